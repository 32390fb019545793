/*
 * prof_snap.c: the snapshot a dump is written from, and what both dump
 * formats need to read it: the copy of the profiler's tables, thread
 * lookup, jemalloc's unbiasing of sampled counts and the sample types.
 *
 * The two writers, heap_v2 (prof_heap_v2.c) and pprof (prof_pprof.c),
 * read a snapshot only through this file and never call each other; the
 * dump driver in prof_dump.c (files, names, triggers) collects a
 * snapshot here and hands it to the writer of the dump's format.  This
 * file calls neither.
 *
 * The copy is taken one gctx shard at a time under that shard's lock
 * (samplers of the other 63 shards go on undisturbed), then the thread
 * list under prof_tdatas_lock: the caller holds prof_dump_mtx, which
 * ranks before both (lock_rank_t).  Records are read afterwards with no
 * profiler lock held.  Every buffer comes from base_malloc: nothing here
 * calls malloc, so a dump never recurses into the allocator.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <math.h>

/* The first record buffer: grown by doubling from there. */
#define SNAP_GBUF_MIN ((size_t)64 << 10)

static void cnt_add(prof_cnt_t *acc, const prof_cnt_t *c) {
	acc->curobjs += c->curobjs;
	acc->curbytes += c->curbytes;
	acc->curobjs_shifted_unbiased += c->curobjs_shifted_unbiased;
	acc->curbytes_unbiased += c->curbytes_unbiased;
	acc->accumobjs += c->accumobjs;
	acc->accumbytes += c->accumbytes;
	acc->accumobjs_shifted_unbiased += c->accumobjs_shifted_unbiased;
	acc->accumbytes_unbiased += c->accumbytes_unbiased;
}

/* A backtrace or a (thread, backtrace) pair is printed if it counts a
 * live object, or (prof_accum) any object at all. */
static bool cnt_printable(const prof_cnt_t *c) {
	return c->curobjs != 0 || (opt_prof_accum && c->accumobjs != 0);
}

typedef struct snap_visit_s {
	dump_snap_t *snap;
	bool full;               /* a record did not fit: copy the shard again
	                          * into a bigger buffer */
	size_t need;             /* bytes the shard's records take */
} snap_visit_t;

/* Shard lock held: size (or copy) one backtrace. */
static void snap_visit(prof_gctx_t *g, void *arg) {
	snap_visit_t *v = arg;
	prof_cnt_t sum;
	uint32_t ntctx = 0;
	memset(&sum, 0, sizeof(sum));
	for (prof_tctx_t *t = g->tctxs; t != NULL; t = t->next) {
		cnt_add(&sum, &t->cnt);
		if (cnt_printable(&t->cnt))
			ntctx++;
	}
	if (!cnt_printable(&sum))
		return;
	size_t size = sizeof(dump_gctx_t) + dump_frames_size(g->nframes) +
	    ntctx * sizeof(dump_tctx_t);
	v->need += size;
	dump_snap_t *s = v->snap;
	if (v->full || s->glen + size > s->gcap) {
		v->full = true;
		return;
	}
	char *p = s->gbuf + s->glen;
	dump_gctx_t *rec = (dump_gctx_t *)p;
	rec->cnt = sum;
	rec->nframes = g->nframes;
	rec->ntctx = ntctx;
	p += sizeof(*rec);
	memcpy(p, g->frames, g->nframes * sizeof(void *));
	p += dump_frames_size(g->nframes);
	/* By ascending uid, as jemalloc prints them (insertion: a stack
	 * rarely has more than a few threads). */
	dump_tctx_t *tr = (dump_tctx_t *)p;
	uint32_t n = 0;
	for (prof_tctx_t *t = g->tctxs; t != NULL; t = t->next) {
		if (!cnt_printable(&t->cnt))
			continue;
		/* A tdata outlives every tctx naming it: uid is safe. */
		uint64_t uid = t->tdata->uid;
		uint32_t j = n++;
		while (j > 0 && tr[j - 1].uid > uid) {
			tr[j] = tr[j - 1];
			j--;
		}
		tr[j].uid = uid;
		tr[j].labels = t->labels;        /* interned: never freed */
		tr[j].cnt = t->cnt;
	}
	s->glen += size;
	s->ngctx++;
	if (sum.curobjs != 0)
		s->ncontexts++;
	cnt_add(&s->total, &sum);
}

void prof_snap_release(dump_snap_t *s) {
	base_free(s->gbuf, s->gcap);
	base_free(s->threads, s->tcap * sizeof(dump_thread_t));
	memset(s, 0, sizeof(*s));
}

/* Make room for `need` more bytes of records (no lock held). */
static bool snap_reserve(dump_snap_t *s, size_t need) {
	if (s->glen + need <= s->gcap)
		return false;
	size_t cap = s->gcap < SNAP_GBUF_MIN ? SNAP_GBUF_MIN : s->gcap;
	while (cap < s->glen + need) {
		if (cap > SIZE_MAX / 2)
			return true;
		cap *= 2;
	}
	char *buf = base_malloc(cap);
	if (buf == NULL)
		return true;
	if (s->glen != 0)
		memcpy(buf, s->gbuf, s->glen);
	base_free(s->gbuf, s->gcap);
	s->gbuf = buf;
	s->gcap = cap;
	return false;
}

static dump_thread_t *snap_thread_find(const dump_snap_t *s, uint64_t uid) {
	size_t lo = 0, hi = s->nthreads;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t u = s->threads[mid].uid;
		if (u == uid)
			return &s->threads[mid];
		if (u < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const dump_thread_t *prof_snap_thread_find(const dump_snap_t *s,
    uint64_t uid) {
	return snap_thread_find(s, uid);
}

/*
 * Copy the backtraces, then the threads.  The two copies are not one
 * atomic picture (a thread may start or a backtrace change in between),
 * but each record is consistent in itself and the sums printed are sums
 * of the records printed.
 */
/*
 * A shard's records are copied in one pass under its lock; if they do not
 * fit, what was copied of it is dropped, the buffer grows outside the lock
 * (by what the pass counted, and a quarter more) and the shard is copied
 * again: it may have changed meanwhile.
 */
bool prof_snap_collect(dump_snap_t *s, const char **whyp) {
	return prof_snap_collect_reusing(s, NULL, whyp);
}

bool prof_snap_collect_reusing(dump_snap_t *s, dump_snap_t *spare,
    const char **whyp) {
	memset(s, 0, sizeof(*s));
	if (spare != NULL) {
		s->gbuf = spare->gbuf;
		s->gcap = spare->gcap;
		s->threads = spare->threads;
		s->tcap = spare->tcap;
		memset(spare, 0, sizeof(*spare));
	}
	s->lg_sample = atomic_load(&prof_lg_sample);
	_Static_assert(PROF_GCTX_SHARDS == 64, "one bit a shard");
	uint64_t used = atomic_load_explicit(&prof_gctx_shards_used,
	    memory_order_relaxed);
	for (unsigned shard = 0; shard < PROF_GCTX_SHARDS; shard++) {
		if ((used & ((uint64_t)1 << shard)) == 0)
			continue;
		for (;;) {
			size_t glen = s->glen, ngctx = s->ngctx;
			size_t ncontexts = s->ncontexts;
			prof_cnt_t total = s->total;
			snap_visit_t v = {s, false, 0};
			prof_shard_lock(shard);
			prof_gctx_foreach_locked_shard(shard, snap_visit, &v);
			prof_shard_unlock(shard);
			if (!v.full)
				break;
			s->glen = glen;
			s->ngctx = ngctx;
			s->ncontexts = ncontexts;
			s->total = total;
			if (snap_reserve(s, v.need + v.need / 4 + 4096)) {
				*whyp = "out of memory for the dump snapshot";
				prof_snap_release(s);
				return true;
			}
		}
	}

	for (;;) {
		size_t n = 0;
		prof_tdatas_lock();
		for (prof_tdata_t *td = prof_tdatas_head; td != NULL;
		    td = td->next)
			n++;
		if (n <= s->tcap) {
			for (prof_tdata_t *td = prof_tdatas_head; td != NULL;
			    td = td->next) {
				dump_thread_t *t = &s->threads[s->nthreads++];
				memset(t, 0, sizeof(*t));
				t->uid = td->uid;
				memcpy(t->name, td->name, sizeof(t->name));
				t->name[sizeof(t->name) - 1] = '\0';
			}
			prof_tdatas_unlock();
			break;
		}
		prof_tdatas_unlock();
		size_t cap = n + n / 4 + 16;
		dump_thread_t *th = base_malloc(cap * sizeof(*th));
		if (th == NULL) {
			*whyp = "out of memory for the dump snapshot";
			prof_snap_release(s);
			return true;
		}
		base_free(s->threads, s->tcap * sizeof(*th));
		s->threads = th;
		s->tcap = cap;
	}
	/* The list is kept by uid; make sure (insertion sort: O(n) when
	 * already sorted). */
	for (size_t i = 1; i < s->nthreads; i++) {
		dump_thread_t t = s->threads[i];
		size_t j = i;
		while (j > 0 && s->threads[j - 1].uid > t.uid) {
			s->threads[j] = s->threads[j - 1];
			j--;
		}
		s->threads[j] = t;
	}
	/* Per-thread sums from the copied pairs. */
	char *p = s->gbuf;
	for (size_t i = 0; i < s->ngctx; i++) {
		dump_gctx_t *g = (dump_gctx_t *)p;
		p += sizeof(*g) + dump_frames_size(g->nframes);
		dump_tctx_t *tr = (dump_tctx_t *)p;
		for (uint32_t k = 0; k < g->ntctx; k++) {
			dump_thread_t *t = snap_thread_find(s, tr[k].uid);
			if (t != NULL)
				cnt_add(&t->cnt, &tr[k].cnt);
		}
		p += g->ntctx * sizeof(dump_tctx_t);
	}
	return false;
}

/* ------------------------------------------------------------ numbers */

uint64_t prof_snap_round(double v) {
	if (!(v > 0.0))
		return 0;
	if (v >= 18446744073709549568.0)
		return UINT64_MAX;
	return (uint64_t)round(v);
}

/*
 * What jemalloc prints for a pair of unbiased sums (prof_do_unbias):
 * c = shifted / 8 objects of s bytes in all, average x = s / c; print
 * the (count, bytes) that jeprof's per-line scaling 1/(1 - e^(-x/R))
 * turns back into (c, s).
 */
void prof_snap_unbias(uint64_t shifted, uint64_t bytes, double R,
    uint64_t *n_out, uint64_t *s_out) {
	if (shifted == 0 || bytes == 0) {
		*n_out = 0;
		*s_out = 0;
		return;
	}
	double c = (double)shifted / 8.0;
	double s = (double)bytes;
	double p = 1.0 - exp(-(s / c) / R);
	*n_out = prof_snap_round(c * p);
	*s_out = prof_snap_round(s * p);
}

/* ------------------------------------------------------- sample types */

/* The curobjs/curbytes pair, then (prof_accum) the accum pair. */
const prof_snap_sample_type_t prof_snap_sample_types[4] = {
	{"inuse_objects", "count"}, {"inuse_space", "bytes"},
	{"alloc_objects", "count"}, {"alloc_space", "bytes"},
};

unsigned prof_snap_nsample_types(void) {
	return opt_prof_accum ? 4 : 2;
}

bool prof_snap_sample_type_ok(const char *name) {
	unsigned n = prof_snap_nsample_types();
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(name, prof_snap_sample_types[i].type) == 0)
			return true;
	}
	return false;
}
