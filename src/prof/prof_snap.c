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

/* The first record buffer: grown by doubling from there.  Small, so that
 * a small snapshot (the peak's of a small program, taken at every new
 * peak and kept) comes from base_malloc's small classes, on pages the
 * profiler's records use already: from 64 KiB, two mappings (the peak
 * and its spare) kept a page each resident. */
#define SNAP_GBUF_MIN ((size_t)1 << 10)
/* Room added to what a shard that did not fit needed: for the records
 * samplers add meanwhile. */
#define SNAP_GBUF_SLACK ((size_t)256)

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
 * live object, or (accum: prof_accum, a delta's snapshot) any object at
 * all. */
static bool cnt_printable(const prof_cnt_t *c, bool accum) {
	return c->curobjs != 0 || (accum && c->accumobjs != 0);
}

typedef struct snap_visit_s {
	dump_snap_t *snap;
	bool accum;              /* records of freed objects too */
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
		if (cnt_printable(&t->cnt, v->accum))
			ntctx++;
	}
	if (!cnt_printable(&sum, v->accum))
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
		if (!cnt_printable(&t->cnt, v->accum))
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

bool opt_prof_unbias = true;

/*
 * Copy the backtraces, then the threads.  The two copies are not one
 * atomic picture (a thread may start or a backtrace change in between),
 * but each record is consistent in itself and the sums printed are sums
 * of the records printed.
 *
 * A shard's records are copied in one pass under its lock; if they do not
 * fit, what was copied of it is dropped, the buffer grows outside the lock
 * (by what the pass counted, and a quarter more) and the shard is copied
 * again: it may have changed meanwhile.
 *
 * accum: copy the accumulated counts too (a delta window asks for them
 * without prof_accum).  fixed: never grow spare's buffers (the dump at an
 * allocation failure, prof_dump.c); what does not fit is left out and
 * *truncated says so.
 */
static bool snap_collect(dump_snap_t *s, dump_snap_t *spare, bool accum,
    bool fixed, bool *truncated, const char **whyp);

bool prof_snap_collect(dump_snap_t *s, const char **whyp) {
	return snap_collect(s, NULL, opt_prof_accum, false, NULL, whyp);
}

bool prof_snap_collect_accum(dump_snap_t *s, const char **whyp) {
	return snap_collect(s, NULL, true, false, NULL, whyp);
}

bool prof_snap_collect_reusing(dump_snap_t *s, dump_snap_t *spare,
    const char **whyp) {
	return snap_collect(s, spare, opt_prof_accum, false, NULL, whyp);
}

bool prof_snap_collect_fixed(dump_snap_t *s, dump_snap_t *spare,
    bool *truncated) {
	const char *why;
	*truncated = false;
	return snap_collect(s, spare, opt_prof_accum, true, truncated, &why);
}

static bool snap_collect(dump_snap_t *s, dump_snap_t *spare, bool accum,
    bool fixed, bool *truncated, const char **whyp) {
	memset(s, 0, sizeof(*s));
	s->accum = accum;
	if (spare != NULL) {
		s->gbuf = spare->gbuf;
		s->gcap = spare->gcap;
		s->threads = spare->threads;
		s->tcap = spare->tcap;
		memset(spare, 0, sizeof(*spare));
	}
	s->lg_sample = atomic_load(&prof_lg_sample);
	s->epoch = atomic_load(&prof_epoch);
	_Static_assert(PROF_GCTX_SHARDS == 64, "one bit a shard");
	uint64_t used = atomic_load_explicit(&prof_gctx_shards_used,
	    memory_order_relaxed);
	for (unsigned shard = 0; shard < prof_nshards; shard++) {
		if ((used & ((uint64_t)1 << shard)) == 0)
			continue;
		for (;;) {
			size_t glen = s->glen, ngctx = s->ngctx;
			size_t ncontexts = s->ncontexts;
			prof_cnt_t total = s->total;
			snap_visit_t v = {s, accum, false, 0};
			prof_shard_lock(shard);
			prof_gctx_foreach_locked_shard(shard, snap_visit, &v);
			prof_shard_unlock(shard);
			if (!v.full)
				break;
			if (fixed) {
				/* Keep the records that fit: each is whole. */
				*truncated = true;
				break;
			}
			s->glen = glen;
			s->ngctx = ngctx;
			s->ncontexts = ncontexts;
			s->total = total;
			if (snap_reserve(s, v.need + v.need / 4 +
			    SNAP_GBUF_SLACK)) {
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
		if (fixed && n > s->tcap) {
			*truncated = true;
			n = s->tcap;
		}
		if (n <= s->tcap) {
			for (prof_tdata_t *td = prof_tdatas_head; td != NULL &&
			    s->nthreads < n; td = td->next) {
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
	/* A prof.reset while copying: the records mix two epochs (a
	 * delta against this snapshot would be meaningless). */
	if (atomic_load(&prof_epoch) != s->epoch)
		s->epoch = UINT64_MAX;
	return false;
}

/* ------------------------------------------------------------- counts */

typedef struct snap_count_s {
	bool accum;
	size_t n;
} snap_count_t;

static void snap_count_visit(prof_gctx_t *g, void *arg) {
	snap_count_t *c = arg;
	for (prof_tctx_t *t = g->tctxs; t != NULL; t = t->next) {
		if (cnt_printable(&t->cnt, c->accum)) {
			c->n++;
			return;
		}
	}
}

size_t prof_snap_count(bool alloc) {
	snap_count_t c = {alloc && opt_prof_accum, 0};
	uint64_t used = atomic_load_explicit(&prof_gctx_shards_used,
	    memory_order_relaxed);
	for (unsigned shard = 0; shard < prof_nshards; shard++) {
		if ((used & ((uint64_t)1 << shard)) == 0)
			continue;
		prof_shard_lock(shard);
		prof_gctx_foreach_locked_shard(shard, snap_count_visit, &c);
		prof_shard_unlock(shard);
	}
	return c.n;
}

/* -------------------------------------------------------------- delta */

/*
 * s0's (stack, thread, label set) records in an open-addressing table,
 * looked up by s1's: a record is the same if its frames, thread uid and
 * label set (interned: the same pointer) are.  Records
 * are read in place (the table holds pointers into s0's buffer).
 */
typedef struct delta_ent_s {
	const dump_gctx_t *g;    /* NULL: empty slot */
	const dump_tctx_t *t;
	bool matched;
} delta_ent_t;

static uint64_t delta_hash(const dump_gctx_t *g, const dump_tctx_t *t) {
	void *const *frames = (void *const *)(g + 1);
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ t->uid ^
	    ((uintptr_t)t->labels * 0xff51afd7ed558ccdULL);
	for (uint32_t i = 0; i < g->nframes; i++) {
		h ^= (uintptr_t)frames[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

static bool delta_same(const dump_gctx_t *a, const dump_gctx_t *b) {
	return a->nframes == b->nframes && memcmp(a + 1, b + 1,
	    a->nframes * sizeof(void *)) == 0;
}

static void cnt_sub(prof_cnt_t *d, const prof_cnt_t *a, const prof_cnt_t *b) {
	d->curobjs = a->curobjs - b->curobjs;
	d->curbytes = a->curbytes - b->curbytes;
	d->curobjs_shifted_unbiased = a->curobjs_shifted_unbiased -
	    b->curobjs_shifted_unbiased;
	d->curbytes_unbiased = a->curbytes_unbiased - b->curbytes_unbiased;
	d->accumobjs = a->accumobjs - b->accumobjs;
	d->accumbytes = a->accumbytes - b->accumbytes;
	d->accumobjs_shifted_unbiased = a->accumobjs_shifted_unbiased -
	    b->accumobjs_shifted_unbiased;
	d->accumbytes_unbiased = a->accumbytes_unbiased -
	    b->accumbytes_unbiased;
}

static bool cnt_zero(const prof_cnt_t *c) {
	static const prof_cnt_t zero;
	return memcmp(c, &zero, sizeof(zero)) == 0;
}

/* Walk a snapshot's (stack, thread) pairs. */
#define SNAP_FOREACH_PAIR(s, g, t, body) do {					const char *p_ = (s)->gbuf;						for (size_t i_ = 0; i_ < (s)->ngctx; i_++) {					const dump_gctx_t *g = (const dump_gctx_t *)p_;				p_ += sizeof(*g) + dump_frames_size(g->nframes);			const dump_tctx_t *tr_ = (const dump_tctx_t *)p_;			p_ += g->ntctx * sizeof(dump_tctx_t);					for (uint32_t k_ = 0; k_ < g->ntctx; k_++) {					const dump_tctx_t *t = &tr_[k_];					body								}								}								} while (0)

/* One record of d: g's stack, t's thread, the counts *c. */
static void delta_put(dump_snap_t *d, const dump_gctx_t *g,
    const dump_tctx_t *t, const prof_cnt_t *c) {
	char *p = d->gbuf + d->glen;
	dump_gctx_t *rec = (dump_gctx_t *)p;
	*rec = *g;
	rec->cnt = *c;
	rec->ntctx = 1;
	p += sizeof(*rec);
	memcpy(p, g + 1, g->nframes * sizeof(void *));
	p += dump_frames_size(g->nframes);
	dump_tctx_t *tr = (dump_tctx_t *)p;
	*tr = *t;
	tr->cnt = *c;
	d->glen += sizeof(*rec) + dump_frames_size(g->nframes) + sizeof(*tr);
	d->ngctx++;
	if (c->curobjs != 0)
		d->ncontexts++;
	cnt_add(&d->total, c);
	dump_thread_t *th = snap_thread_find(d, t->uid);
	if (th != NULL)
		cnt_add(&th->cnt, c);
}

bool prof_snap_delta(dump_snap_t *d, const dump_snap_t *s0,
    const dump_snap_t *s1, const char **whyp) {
	memset(d, 0, sizeof(*d));
	size_t npairs = 0, cap = 0;
	SNAP_FOREACH_PAIR(s0, g, t, {
		(void)t;
		npairs++;
		cap += sizeof(*g) + dump_frames_size(g->nframes) +
		    sizeof(dump_tctx_t);
	});
	SNAP_FOREACH_PAIR(s1, g, t, {
		(void)t;
		cap += sizeof(*g) + dump_frames_size(g->nframes) +
		    sizeof(dump_tctx_t);
	});
	size_t tn = 16;
	while (tn < 2 * npairs)
		tn *= 2;
	delta_ent_t *tab = base_malloc(tn * sizeof(*tab));
	d->gcap = cap > 0 ? cap : 8;
	d->gbuf = base_malloc(d->gcap);
	d->tcap = s1->nthreads > 0 ? s1->nthreads : 1;
	d->threads = base_malloc(d->tcap * sizeof(dump_thread_t));
	if (tab == NULL || d->gbuf == NULL || d->threads == NULL) {
		if (tab != NULL)
			base_free(tab, tn * sizeof(*tab));
		prof_snap_release(d);
		*whyp = "out of memory for the delta profile";
		return true;
	}
	memset(tab, 0, tn * sizeof(*tab));
	for (size_t i = 0; i < s1->nthreads; i++) {
		d->threads[i] = s1->threads[i];
		memset(&d->threads[i].cnt, 0, sizeof(prof_cnt_t));
	}
	d->nthreads = s1->nthreads;
	d->lg_sample = s1->lg_sample;
	d->accum = true;
	d->epoch = s1->epoch;
	d->time_ns = s1->time_ns;
	d->duration_ns = s1->time_ns > s0->time_ns ?
	    s1->time_ns - s0->time_ns : 0;

	SNAP_FOREACH_PAIR(s0, g, t, {
		size_t j = delta_hash(g, t) & (tn - 1);
		while (tab[j].g != NULL)
			j = (j + 1) & (tn - 1);
		tab[j].g = g;
		tab[j].t = t;
	});
	static const prof_cnt_t zero;
	prof_cnt_t c;
	SNAP_FOREACH_PAIR(s1, g, t, {
		size_t j = delta_hash(g, t) & (tn - 1);
		while (tab[j].g != NULL && (tab[j].t->uid != t->uid ||
		    tab[j].t->labels != t->labels || !delta_same(tab[j].g, g)))
			j = (j + 1) & (tn - 1);
		const prof_cnt_t *before = &zero;
		if (tab[j].g != NULL) {
			tab[j].matched = true;
			before = &tab[j].t->cnt;
		}
		cnt_sub(&c, &t->cnt, before);
		if (!cnt_zero(&c))
			delta_put(d, g, t, &c);
	});
	/* Pairs gone since s0 (only a prof.reset empties a pair in a
	 * window, and the caller refuses those): minus what they held. */
	for (size_t j = 0; j < tn; j++) {
		if (tab[j].g == NULL || tab[j].matched)
			continue;
		cnt_sub(&c, &zero, &tab[j].t->cnt);
		if (!cnt_zero(&c))
			delta_put(d, tab[j].g, tab[j].t, &c);
	}
	base_free(tab, tn * sizeof(*tab));
	return false;
}


/* ------------------------------------------------------------ numbers */

uint64_t prof_snap_round(double v) {
	if (!(v > 0.0))
		return 0;
	if (v >= 18446744073709549568.0)
		return UINT64_MAX;
	return (uint64_t)util_round(v);
}

/*
 * What jemalloc prints for a pair of unbiased sums (prof_do_unbias):
 * c = shifted / 8 objects of s bytes in all, average x = s / c; print
 * the (count, bytes) that jeprof's per-line scaling 1/(1 - e^(-x/R))
 * turns back into (c, s).
 */
/*
 * What a dump prints for c's pair (cur, or accum): jemalloc 5.3's
 * unbiased estimates (prof_snap_unbias), or with prof_unbias:false the
 * sampled counts themselves, as jemalloc printed them before, which
 * jeprof scales by the stack's average size (biased where a stack
 * allocates several sizes).
 */
void prof_snap_printed(const prof_cnt_t *c, bool accum, double R,
    uint64_t *n_out, uint64_t *s_out) {
	if (!opt_prof_unbias) {
		*n_out = accum ? c->accumobjs : c->curobjs;
		*s_out = accum ? c->accumbytes : c->curbytes;
		return;
	}
	prof_snap_unbias(accum ? c->accumobjs_shifted_unbiased :
	    c->curobjs_shifted_unbiased, accum ? c->accumbytes_unbiased :
	    c->curbytes_unbiased, R, n_out, s_out);
}

void prof_snap_unbias(uint64_t shifted, uint64_t bytes, double R,
    uint64_t *n_out, uint64_t *s_out) {
	if (shifted == 0 || bytes == 0) {
		*n_out = 0;
		*s_out = 0;
		return;
	}
	double c = (double)shifted / 8.0;
	double s = (double)bytes;
	double p = 1.0 - util_exp(-(s / c) / R);
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
