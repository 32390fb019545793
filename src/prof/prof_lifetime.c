/*
 * prof_lifetime.c: the lifetime profile of sampled objects (issue 20,
 * part 2): per allocation stack, how many objects and bytes were freed
 * within 1 ms, 10 ms, 100 ms, 1 s or later after their allocation, with
 * the least, mean and greatest lifetime; prof.lifetimes.dump and the
 * endpoint's /debug/pprof/lifetimes write it as a pprof profile with the
 * objects still live split the same way by their age at the dump.
 *
 * Why a table of its own rather than counters in the gctx or tctx: those
 * are freed as soon as their last sample is, and a stack that churns
 * short-lived memory (the one this profile is for) would lose its counts
 * between two of its samples.  A record here lives as long as the process
 * (or until the next prof.reset, which it notices by the epoch and starts
 * over), one per stack that ever had a sample freed: what prof_accum
 * costs.  The tctx (104 bytes) and the 64-byte prof_sample_t are left as
 * they were; the sample already holds its allocation time.
 *
 * Counting happens on the sampled free path only (prof.c's
 * prof_sample_free calls prof_lifetime_free): the fast paths do not
 * change.  The table is split by gctx shard (a stack's records sit in
 * the part of its gctx's shard, which prof.c keeps in the shard) and
 * each part is guarded by that shard's lock, which the free holds
 * already to count the sample off its tctx: no lock of its own on the
 * sampled paths (a lock round trip at every sampled free, and two more
 * for each large sample's entry below, were about 10% of a sample's cost
 * on bench's midsize), and a gctx remembers its record (gctx->life), so
 * only the first free of a stack's samples looks it up.  Nothing under a part
 * allocates but base_malloc (a leaf).  This file calls no other file of
 * the profiler (prof.c calls it), so a dump's live samples come through
 * the caller's walk of prof.c's sample table (small objects) and lists
 * of its own (large ones, which that table does not hold: prof.c adds and
 * removes them under their gctx's shard lock), each aged at the dump,
 * and the collection takes every shard's lock through the caller's
 * lock_all: the cost is the dump's.
 */
#include "malloc_prof/internal/internal.h"

#include <inttypes.h>

const char *const prof_lifetime_bucket_names[PROF_LIFE_NBUCKETS] = {
	"<1ms", "1-10ms", "10-100ms", "100ms-1s", ">1s", "live",
};

/* One stack's freed samples: prof.h's struct life_rec_s. */
typedef struct life_rec_s life_rec_t;

/* A gctx shard's part of the table (prof_life_part_t, in prof.c's shard
 * and guarded by its lock): the records of its stacks, and its live
 * large samples (extent->prof, which prof.c's sample table does not
 * hold: a list through s->next and s->prev, prof.h's
 * prof_lifetime_large_add).  Chains start at LIFE_CHAINS_INIT and double
 * past two entries a chain; out of memory they just grow longer, and
 * with none at all a record is not made (its free is not counted). */
#define LIFE_CHAINS_INIT 8
typedef prof_life_part_t life_part_t;

static size_t life_rec_size(unsigned nframes) {
	return sizeof(life_rec_t) + nframes * sizeof(void *);
}

static size_t life_rec_slot(uint64_t hash, size_t n) {
	/* The low bits picked the shard. */
	return (size_t)(hash / PROF_GCTX_SHARDS) & (n - 1);
}

/* Double a part's record chains (or make the first ones). */
static void life_grow(life_part_t *pt) {
	size_t n = pt->nrecs_b == 0 ? LIFE_CHAINS_INIT : pt->nrecs_b * 2;
	life_rec_t **b = base_malloc(n * sizeof(*b));
	if (b == NULL)
		return;
	memset(b, 0, n * sizeof(*b));
	for (size_t i = 0; i < pt->nrecs_b; i++) {
		life_rec_t *r = pt->recs[i];
		while (r != NULL) {
			life_rec_t *next = r->next;
			life_rec_t **c = &b[life_rec_slot(r->hash, n)];
			r->next = *c;
			*c = r;
			r = next;
		}
	}
	if (pt->recs != NULL)
		base_free(pt->recs, pt->nrecs_b * sizeof(*b));
	pt->recs = b;
	pt->nrecs_b = n;
}

/* g's record, found or made in its shard's part pt (the shard's lock
 * held); NULL out of memory. */
static life_rec_t *life_rec_get(life_part_t *pt, prof_gctx_t *g,
    uint64_t epoch) {
	for (life_rec_t *r = pt->nrecs_b == 0 ? NULL :
	    pt->recs[life_rec_slot(g->hash, pt->nrecs_b)]; r != NULL;
	    r = r->next) {
		if (r->hash == g->hash && r->nframes == g->nframes &&
		    memcmp(r->frames, g->frames, g->nframes *
		    sizeof(void *)) == 0)
			return r;
	}
	if (pt->nrecs >= pt->nrecs_b * 2)
		life_grow(pt);
	life_rec_t *r = pt->nrecs_b == 0 ? NULL :
	    base_malloc(life_rec_size(g->nframes));
	if (r == NULL)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->hash = g->hash;
	r->epoch = epoch;
	r->min_ns = UINT64_MAX;
	r->nframes = g->nframes;
	memcpy(r->frames, g->frames, g->nframes * sizeof(void *));
	life_rec_t **c = &pt->recs[life_rec_slot(r->hash, pt->nrecs_b)];
	r->next = *c;
	*c = r;
	pt->nrecs++;
	return r;
}

void prof_lifetime_free_slow(life_part_t *pt, prof_gctx_t *g, uint64_t ns,
    uint64_t objs_shifted, uint64_t bytes, uint64_t epoch) {
	/* Records live as long as the process: a gctx may keep its own. */
	life_rec_t *r = g->life;
	if (r == NULL) {
		r = life_rec_get(pt, g, epoch);
		if (r == NULL)
			return; /* out of profiler memory: not counted (the
				 * heap profile's counts are unaffected) */
		g->life = r;
	}
	if (r->epoch != epoch) {
		/* A prof.reset since: start over. */
		r->epoch = epoch;
		r->nfreed = r->sum_ns = r->max_ns = 0;
		r->min_ns = UINT64_MAX;
		memset(r->objs_shifted, 0, sizeof(r->objs_shifted));
		memset(r->bytes, 0, sizeof(r->bytes));
	}
	prof_lifetime_count(r, ns, objs_shifted, bytes);
}

/* ------------------------------------------------------------ collect */

/* One stack's live samples of the dump's epoch, by age at the dump. */
typedef struct life_live_s {
	uint64_t hash;                   /* its gctx's (prof_bt_hash) */
	size_t foff;                     /* frames in the walk's buffer */
	uint32_t nframes;
	bool used;                       /* a slot in use */
	uint64_t raw[PROF_LIFE_FREED];   /* samples */
	uint64_t objs_shifted[PROF_LIFE_FREED];
	uint64_t bytes[PROF_LIFE_FREED];
} life_live_t;

/* The walk of the live samples: an open-addressed table of stacks (cap a
 * power of two, at most 3/4 full) and their frames, copied, because a
 * stack's gctx may go (and its address be reused by another) between the
 * sample-table shards the walk visits one at a time. */
typedef struct life_walk_s {
	life_live_t *ents;
	size_t cap, nents;
	void **frames;
	size_t flen, fcap;
	uint64_t now_ns;
	uint32_t epoch;
	bool oom;
} life_walk_t;

static life_live_t *walk_slot(life_live_t *ents, size_t cap, uint64_t h,
    void *const *frames, uint32_t nframes, void *const *buf) {
	size_t i = (size_t)h & (cap - 1);
	for (; ents[i].used; i = (i + 1) & (cap - 1)) {
		const life_live_t *e = &ents[i];
		if (e->hash == h && e->nframes == nframes &&
		    memcmp(buf + e->foff, frames,
		    nframes * sizeof(void *)) == 0)
			break;
	}
	return &ents[i];
}

/* Double the table (or make the first); true on OOM. */
static bool walk_grow(life_walk_t *w) {
	size_t cap = w->cap == 0 ? 256 : w->cap * 2;
	life_live_t *e = base_malloc(cap * sizeof(*e));
	if (e == NULL)
		return true;
	memset(e, 0, cap * sizeof(*e));
	for (size_t i = 0; i < w->cap; i++) {
		if (!w->ents[i].used)
			continue;
		size_t j = (size_t)w->ents[i].hash & (cap - 1);
		while (e[j].used)
			j = (j + 1) & (cap - 1);
		e[j] = w->ents[i];
	}
	if (w->ents != NULL)
		base_free(w->ents, w->cap * sizeof(*e));
	w->ents = e;
	w->cap = cap;
	return false;
}

/* One live sample (under its sample-table shard's lock, or its gctx
 * shard's for a large one: its tctx and gctx are alive): its age's bucket of its
 * stack.  What it stands for is its unbiased bytes over its size, as the
 * heap profile's counts (objects shifted by 3). */
static void walk_visit(const prof_sample_t *s, void *arg) {
	life_walk_t *w = arg;
	if (w->oom || s->epoch != w->epoch)
		return;
	const prof_gctx_t *g = s->tctx->gctx;
	uint64_t h = g->hash;
	if ((w->nents + 1) * 4 > w->cap * 3 && walk_grow(w)) {
		w->oom = true;
		return;
	}
	life_live_t *e = walk_slot(w->ents, w->cap, h, g->frames,
	    g->nframes, w->frames);
	if (!e->used) {
		if (prof_frames_reserve(&w->frames, &w->fcap, w->flen,
		    g->nframes)) {
			w->oom = true;
			return;
		}
		e->used = true;
		e->hash = h;
		e->nframes = g->nframes;
		e->foff = w->flen;
		memcpy(w->frames + w->flen, g->frames,
		    g->nframes * sizeof(void *));
		w->flen += g->nframes;
		w->nents++;
	}
	uint64_t age = w->now_ns > s->time_ns ? w->now_ns - s->time_ns : 0;
	unsigned b = prof_life_bucket(age);
	e->raw[b]++;
	e->objs_shifted[b] += (uint64_t)((double)s->bytes_unbiased * 8.0 /
	    (double)s->usize + 0.5);
	e->bytes[b] += s->bytes_unbiased;
}

static void walk_release(life_walk_t *w) {
	if (w->ents != NULL)
		base_free(w->ents, w->cap * sizeof(*w->ents));
	if (w->frames != NULL)
		base_free(w->frames, w->fcap * sizeof(void *));
}

/* Append len bytes to out's buffer, growing it; true on OOM. */
static bool life_append(dump_snap_t *out, const void *p, size_t len) {
	if (out->glen + len > out->gcap) {
		size_t cap = out->gcap < 4096 ? 4096 : out->gcap;
		while (cap < out->glen + len)
			cap *= 2;
		char *nb = base_malloc(cap);
		if (nb == NULL)
			return true;
		if (out->glen != 0)
			memcpy(nb, out->gbuf, out->glen);
		if (out->gbuf != NULL)
			base_free(out->gbuf, out->gcap);
		out->gbuf = nb;
		out->gcap = cap;
	}
	memcpy(out->gbuf + out->glen, p, len);
	out->glen += len;
	return false;
}

/* One stack of the output: its live samples by age (lv, may be NULL) and
 * its freed ones (r, may be NULL). */
static bool life_emit(dump_snap_t *out, void *const *frames,
    uint32_t nframes, const life_live_t *lv, const life_rec_t *r) {
	dump_tctx_t tr[PROF_LIFE_NUIDS];
	uint32_t nt = 0;
	dump_gctx_t g;
	memset(&g, 0, sizeof(g));
	memset(tr, 0, sizeof(tr));
	uint64_t min_ns = 0, max_ns = 0, mean_ns = 0;
	if (r != NULL && r->nfreed != 0) {
		min_ns = r->min_ns;
		max_ns = r->max_ns;
		mean_ns = r->sum_ns / r->nfreed;
		g.cnt.accumobjs = r->nfreed;
	}
	for (unsigned b = 0; r != NULL && b < PROF_LIFE_FREED; b++) {
		if (r->objs_shifted[b] == 0 && r->bytes[b] == 0)
			continue;
		tr[nt].uid = b;
		tr[nt].cnt.curobjs_shifted_unbiased = r->objs_shifted[b];
		tr[nt].cnt.curbytes_unbiased = r->bytes[b];
		nt++;
	}
	bool live = false;
	for (unsigned b = 0; lv != NULL && b < PROF_LIFE_FREED; b++) {
		if (lv->raw[b] == 0)
			continue;
		tr[nt].uid = PROF_LIFE_LIVE + b;
		tr[nt].cnt.curobjs = lv->raw[b];
		tr[nt].cnt.curobjs_shifted_unbiased = lv->objs_shifted[b];
		tr[nt].cnt.curbytes_unbiased = lv->bytes[b];
		nt++;
		live = true;
	}
	if (nt == 0)
		return false;
	for (uint32_t k = 0; k < nt; k++) {
		tr[k].cnt.accumobjs = min_ns;
		tr[k].cnt.accumbytes = max_ns;
		tr[k].cnt.accumobjs_shifted_unbiased = mean_ns;
		g.cnt.curobjs += tr[k].cnt.curobjs;
		g.cnt.curobjs_shifted_unbiased +=
		    tr[k].cnt.curobjs_shifted_unbiased;
		g.cnt.curbytes_unbiased += tr[k].cnt.curbytes_unbiased;
	}
	g.nframes = nframes;
	g.ntctx = nt;
	uint64_t pad = 0;
	size_t fsz = nframes * sizeof(void *);
	if (life_append(out, &g, sizeof(g)) || life_append(out, frames, fsz) ||
	    life_append(out, &pad, dump_frames_size(nframes) - fsz) ||
	    life_append(out, tr, nt * sizeof(tr[0])))
		return true;
	out->ngctx++;
	if (live)
		out->ncontexts++;
	return false;
}

bool prof_lifetime_collect(dump_snap_t *out, const dump_snap_t *live,
    void (*foreach)(prof_sample_visit_t *, void *), void (*lock_all)(void),
    void (*unlock_all)(void), life_part_t *(*part)(unsigned),
    unsigned nparts, uint64_t now_ns, const char **whyp) {
	memset(out, 0, sizeof(*out));
	out->lifetimes = true;
	out->lg_sample = live->lg_sample;
	out->epoch = live->epoch;
	/* The small live samples first, with no gctx shard held (the
	 * sample-table shards rank below them), then every part under every
	 * shard's lock. */
	life_walk_t w;
	memset(&w, 0, sizeof(w));
	w.now_ns = now_ns;
	w.epoch = (uint32_t)live->epoch;
	w.oom = walk_grow(&w);
	if (!w.oom)
		foreach(walk_visit, &w);
	lock_all();
	size_t nrecs = 0;
	for (unsigned p = 0; p < nparts; p++) {
		const life_part_t *pt = part(p);
		nrecs += pt->nrecs;
		for (const prof_sample_t *s = w.oom ? NULL : pt->large;
		    s != NULL; s = s->next)
			walk_visit(s, &w);
	}
	/* An index of this epoch's records by the collection's hash, and
	 * which of them a live stack took already. */
	size_t n = 16;
	while (n < nrecs * 2)
		n *= 2;
	life_rec_t **idx = base_malloc(n * sizeof(*idx));
	bool *used = base_malloc(n * sizeof(*used));
	bool fail = w.oom || idx == NULL || used == NULL;
	if (!fail) {
		memset(idx, 0, n * sizeof(*idx));
		memset(used, 0, n * sizeof(*used));
		for (unsigned p = 0; p < nparts; p++) {
			const life_part_t *pt = part(p);
			for (size_t b = 0; b < pt->nrecs_b; b++) {
				for (life_rec_t *r = pt->recs[b]; r != NULL;
				    r = r->next) {
					if (r->epoch != live->epoch ||
					    r->nfreed == 0)
						continue;
					/* its gctx's hash, as
					 * the walk's entries */
					size_t i = r->hash & (n - 1);
					while (idx[i] != NULL)
						i = (i + 1) & (n - 1);
					idx[i] = r;
				}
			}
		}
	}
	for (size_t k = 0; !fail && k < w.cap; k++) {
		const life_live_t *e = &w.ents[k];
		if (!e->used)
			continue;
		void *const *frames = w.frames + e->foff;
		const life_rec_t *r = NULL;
		size_t i = e->hash & (n - 1);
		for (; idx[i] != NULL; i = (i + 1) & (n - 1)) {
			if (!used[i] && idx[i]->nframes == e->nframes &&
			    memcmp(idx[i]->frames, frames, e->nframes *
			    sizeof(void *)) == 0) {
				r = idx[i];
				used[i] = true;
				break;
			}
		}
		fail = life_emit(out, frames, e->nframes, e, r);
	}
	for (size_t i = 0; !fail && i < n; i++) {
		if (idx[i] != NULL && !used[i])
			fail = life_emit(out, idx[i]->frames,
			    idx[i]->nframes, NULL, idx[i]);
	}
	unlock_all();
	walk_release(&w);
	if (idx != NULL)
		base_free(idx, n * sizeof(*idx));
	if (used != NULL)
		base_free(used, n * sizeof(*used));
	if (fail) {
		if (out->gbuf != NULL)
			base_free(out->gbuf, out->gcap);
		memset(out, 0, sizeof(*out));
		*whyp = "out of memory for the lifetime profile";
		return true;
	}
	/* The threads of the live snapshot are not copied: the lifetime
	 * profile's samples carry buckets, not threads. */
	return false;
}
