/*
 * prof_frag.c: the fragmentation profile.
 *
 * The fragmentation profile (prof.fragmentation.dump, GET
 * /debug/pprof/fragmentation): built at dump time only, from the
 * allocator's per-class counters and the live samples; nothing is kept
 * for it outside dumps.  A sampled small object lives in a slab of the
 * profiler's cache (its arena's prof_cache), not in the program's slabs of
 * its class, so what its own slab wastes says nothing about the program.
 * A sampled object of a class above a page is promoted instead (a large
 * block of its own: malloc.c, alloc_promoted), and is no region of any
 * slab.  The charge is the program's: for size class j,
 *
 *   unused_j = slabs_j * slab_size_j - regs_j * usize_j
 *
 * over every arena, slabs_j and regs_j being the class's slabs held and
 * regions taken from them (stats.arenas.<i>.bins.<j>.curslabs and
 * curregs) less the profiler cache's own (its slabs, and the regions of
 * the live samples).  Each live object of the class, in the program's
 * slabs, the profiler's or a promoted block (live_j: the regions taken
 * and the promoted samples), is charged an equal share, unused_j / live_j,
 * and a live sample, which stands for N objects (its unbiased count), is
 * charged N times that: summed over a class's samples, the charges
 * estimate unused_j.  Regions in the threads' cache
 * bins count as taken (as curregs counts them), and kept empty slabs as
 * not held.  Large blocks are charged nothing: their extents are their
 * usable size (page multiples), so no tail is unused, and they are left
 * out of the profile.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* -------------------------------------------------- fragmentation */

static const prof_snap_sample_type_t frag_types[2] = {
	{"fragmentation_objects", "count"}, {"fragmentation_space", "bytes"},
};

/* One (thread, backtrace) of the profile: a tctx of live small samples. */
typedef struct frag_ent_s {
	const prof_tctx_t *tctx;         /* NULL: a free slot */
	uint64_t uid;
	const prof_labels_t *labels;     /* its label set (interned) */
	uint64_t nraw;                   /* its live samples */
	uint64_t objs_shifted;           /* what they stand for, times 8 */
	double bytes;                    /* their charge */
	size_t foff;                     /* frames in the frame buffer */
	unsigned nframes;
} frag_ent_t;

typedef struct frag_walk_s {
	uint64_t nsmall[SC_NBINS];       /* pass 1: live samples per class,
	                                  * in the profiler's slabs */
	uint64_t npromoted[SC_NBINS];    /* and promoted */
	bool promoted;                   /* visiting promoted samples */
	double charge[SC_NBINS];         /* per object of the class */
	frag_ent_t *ents;                /* pass 2: open addressing */
	size_t nents, cap;               /* cap: a power of two */
	void **frames;
	size_t flen, fcap;
	bool oom;
} frag_walk_t;

static void frag_count(const prof_sample_t *s, void *arg) {
	frag_walk_t *w = arg;
	if (s->usize <= SC_SMALL_MAXCLASS)
		(w->promoted ? w->npromoted : w->nsmall)[sz_size2index(
		    s->usize)]++;
}

/* A visit of every live small sample: the sample table's, then the
 * promoted ones. */
static void frag_visit_all(prof_sample_visit_t *visit, frag_walk_t *w) {
	w->promoted = false;
	prof_samples_foreach(visit, w);
	w->promoted = true;
	prof_promoted_foreach(visit, w);
}

/* Pass 2, under the lock of the sample's shard of the sample table, or of
 * its gctx if promoted (its tctx, gctx and tdata are alive): charge it
 * to its tctx's entry.  A sample taken since pass 1
 * that finds the table too full is left out. */
static void frag_charge(const prof_sample_t *s, void *arg) {
	frag_walk_t *w = arg;
	if (s->usize > SC_SMALL_MAXCLASS || w->oom)
		return;
	unsigned ind = sz_size2index(s->usize);
	uint64_t k = (uint64_t)(uintptr_t)s->tctx * 0x9e3779b97f4a7c15ULL;
	size_t i = (size_t)(k >> 32) & (w->cap - 1);
	while (w->ents[i].tctx != NULL && w->ents[i].tctx != s->tctx)
		i = (i + 1) & (w->cap - 1);
	frag_ent_t *e = &w->ents[i];
	if (e->tctx == NULL) {
		if ((w->nents + 1) * 4 > w->cap * 3)
			return;
		const prof_gctx_t *g = s->tctx->gctx;
		if (prof_frames_reserve(&w->frames, &w->fcap, w->flen,
		    g->nframes)) {
			w->oom = true;
			return;
		}
		e->tctx = s->tctx;
		e->uid = s->tctx->tdata->uid;
		e->labels = s->tctx->labels;
		e->foff = w->flen;
		e->nframes = g->nframes;
		memcpy(w->frames + w->flen, g->frames,
		    g->nframes * sizeof(void *));
		w->flen += g->nframes;
		w->nents++;
	}
	/* What it stands for: its unbiased bytes are usize times that. */
	double n = (double)s->bytes_unbiased / (double)s->usize;
	e->nraw++;
	e->objs_shifted += (uint64_t)util_llround(n * 8.0);
	e->bytes += n * w->charge[ind];
}

/* The charge per object of each small class (see the top), pass 1's
 * sample counts taken. */
static void frag_charges(frag_walk_t *w) {
	uint64_t slabs[SC_NBINS] = {0}, regs[SC_NBINS] = {0};
	uint32_t pslabs[SC_NBINS] = {0};
	unsigned n = atomic_load(&narenas_total);
	for (unsigned a = 0; a < n; a++) {
		arena_t *arena = arena_get(a, false);
		if (arena == NULL)
			continue;
		for (unsigned j = 0; j < SC_NBINS; j++) {
			arena_bin_stats_t *bs = &arena->bstats[j];
			/* ndalloc first: a region is freed after it is
			 * taken. */
			uint64_t nd = atomic_load_explicit(&bs->ndalloc,
			    memory_order_relaxed);
			uint64_t nm = atomic_load_explicit(&bs->nmalloc,
			    memory_order_relaxed);
			regs[j] += nm > nd ? nm - nd : 0;
			slabs[j] += atomic_load_explicit(&bs->curslabs,
			    memory_order_relaxed);
		}
		mp_mutex_lite_lock(&arena->prof_cache_mtx);
		for (unsigned j = 0; j < SC_NBINS; j++)
			pslabs[j] += arena->prof_cache.bins[j].nslabs;
		mp_mutex_lite_unlock(&arena->prof_cache_mtx);
	}
	for (unsigned j = 0; j < SC_NBINS; j++) {
		uint64_t s = slabs[j] > pslabs[j] ? slabs[j] - pslabs[j] : 0;
		uint64_t r = regs[j] > w->nsmall[j] ? regs[j] - w->nsmall[j] :
		    0;
		double space = (double)s * (double)sz_slab_size_get(j);
		double used = (double)r * (double)sz_index2size(j);
		/* Shared by every live object of the class, the samples'
		 * too: they are what the samples' counts estimate. */
		uint64_t live = regs[j] + w->npromoted[j];
		w->charge[j] = live != 0 && space > used ? (space - used) /
		    (double)live : 0.0;
	}
}

static void frag_walk_free(frag_walk_t *w) {
	base_free(w->ents, w->cap * sizeof(frag_ent_t));
	base_free(w->frames, w->fcap * sizeof(void *));
}

bool prof_frag_build(dump_snap_t *s, const char **whyp) {
	memset(s, 0, sizeof(*s));
	frag_walk_t *w = base_malloc(sizeof(*w));
	if (w == NULL) {
		*whyp = "out of memory for the fragmentation profile";
		return true;
	}
	memset(w, 0, sizeof(*w));
	frag_visit_all(frag_count, w);
	frag_charges(w);
	uint64_t live = 0;
	for (unsigned j = 0; j < SC_NBINS; j++)
		live += w->nsmall[j] + w->npromoted[j];
	/* Room for the tctxs of every sample of pass 1 and of some taken
	 * since, at most 3/4 full. */
	w->cap = 64;
	while (w->cap < (live + live / 4 + 16) * 2)
		w->cap *= 2;
	w->ents = base_malloc(w->cap * sizeof(frag_ent_t));
	if (w->ents == NULL) {
		w->cap = 0;
		goto oom;
	}
	memset(w->ents, 0, w->cap * sizeof(frag_ent_t));
	frag_visit_all(frag_charge, w);
	if (w->oom)
		goto oom;

	size_t glen = 0;
	for (size_t i = 0; i < w->cap; i++) {
		if (w->ents[i].tctx != NULL)
			glen += sizeof(dump_gctx_t) +
			    dump_frames_size(w->ents[i].nframes) +
			    sizeof(dump_tctx_t);
	}
	s->gcap = glen != 0 ? glen : 8;
	s->gbuf = base_malloc(s->gcap);
	if (s->gbuf == NULL) {
		s->gcap = 0;
		goto oom;
	}
	for (size_t i = 0; i < w->cap; i++) {
		const frag_ent_t *e = &w->ents[i];
		if (e->tctx == NULL)
			continue;
		dump_gctx_t g;
		memset(&g, 0, sizeof(g));
		g.cnt.curobjs = e->nraw;
		g.cnt.curobjs_shifted_unbiased = e->objs_shifted;
		g.cnt.curbytes_unbiased = prof_snap_round(e->bytes);
		g.cnt.curbytes = g.cnt.curbytes_unbiased;
		g.nframes = e->nframes;
		g.ntctx = 1;
		char *p = s->gbuf + s->glen;
		memcpy(p, &g, sizeof(g));
		p += sizeof(g);
		memset(p, 0, dump_frames_size(e->nframes));
		memcpy(p, w->frames + e->foff, e->nframes * sizeof(void *));
		p += dump_frames_size(e->nframes);
		dump_tctx_t t;
		memset(&t, 0, sizeof(t));
		t.uid = e->uid;
		t.labels = e->labels;
		t.cnt = g.cnt;
		memcpy(p, &t, sizeof(t));
		s->glen += sizeof(g) + dump_frames_size(e->nframes) +
		    sizeof(t);
		s->ngctx++;
		s->ncontexts++;
		s->total.curobjs += g.cnt.curobjs;
		s->total.curobjs_shifted_unbiased += e->objs_shifted;
		s->total.curbytes_unbiased += g.cnt.curbytes_unbiased;
		s->total.curbytes += g.cnt.curbytes;
	}
	s->lg_sample = atomic_load(&prof_lg_sample);
	s->epoch = atomic_load(&prof_epoch);
	s->types = frag_types;
	s->raw = true;
	frag_walk_free(w);
	base_free(w, sizeof(*w));
	return false;
oom:
	frag_walk_free(w);
	base_free(w, sizeof(*w));
	prof_snap_release(s);
	*whyp = "out of memory for the fragmentation profile";
	return true;
}

/* -w: prof.fragmentation.dump, a const char * file name (NULL: the
 * automatic <prefix>.<pid>.<seq>.frag<n>.pb.gz), as prof.dump. */
static int frag_ctl_dump(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp)) {
		mp_error("prof.fragmentation.dump: write-only: pass the value "
		    "in newp, with oldp and oldlenp NULL");
		return EPERM;
	}
	const char *filename = NULL;
	if ((newp != NULL && newlen != sizeof(filename)) ||
	    (newp == NULL && newlen != 0)) {
		mp_error("prof.fragmentation.dump: newlen is %zu: the value "
		    "is a const char * (newlen %zu)", newlen,
		    sizeof(filename));
		return EINVAL;
	}
	if (newp != NULL)
		filename = *(const char *const *)newp;
	return prof_dump_built_file("prof.fragmentation.dump", filename,
	    prof_frag_build) ? EFAULT : 0;
}

const ctl_node_t prof_frag_ctl[PROF_FRAG_NCTL] = {
	{ .name = "dump", .handler = frag_ctl_dump, .prof = CTL_PROF_STARTED },
};
