/*
 * prof.c: the heap profiler's sampling and bookkeeping.
 *
 * Sampling is per allocated byte: each thread draws the distance to its
 * next sample from a geometric distribution with mean 2^lg_prof_sample and
 * the allocation that crosses it is sampled.  The decision costs the fast
 * path nothing: the thread's event threshold (tsd->next_event) is the
 * nearer of the cache-GC event and the next sample, so the one compare
 * malloc already makes sends the sampled allocation to the slow path.
 * A thread that is not sampling (prof.active or thread.prof.active off)
 * has no next sample at all, so an inactive profiler costs nothing; the
 * switches bump prof_wait_gen, and each thread redraws at its next
 * slow-path allocation (within TSD_EVENT_INTERVAL bytes).
 *
 * A sample captures the backtrace, finds or creates the gctx of that
 * backtrace and the tctx of (this thread, that backtrace), adds to its
 * counters, and keeps a prof_sample_t for the object: in extent->prof for
 * a large block, in the sharded sample table for a small one.  A small
 * object of a page or less about to be sampled is taken from the
 * prof_cache of its thread's arena (arena 0's for a thread on a manual
 * arena), whose slabs no thread owns: it keeps its size class, and its
 * slab's pages carry no class tag in the page map, so its free misses the
 * fast path's cache bins and finds the record.  A bigger small one is
 * promoted (malloc.c, alloc_promoted): a large block of its own, whose
 * extent holds the record as a large sample's does.  Unsampled objects
 * pay nothing, on malloc or on free, wherever they live.
 *
 * Each sample also carries when it was taken (prof_time_resolution's
 * clock) and, through its tctx, its thread and the thread's label set at
 * the time (thread.prof.label): a tctx is one (thread, label set,
 * backtrace), so samples taken under different sets count apart and
 * pprof dumps write each with its labels.  Label sets are interned here,
 * one record per distinct set, so a sample copies a pointer.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <math.h>
#include <sys/prctl.h>

MP_READ_MOSTLY bool opt_prof = false;
bool opt_prof_active = true;
bool opt_prof_thread_active_init = true;
size_t opt_lg_prof_sample = 19;
ssize_t opt_lg_prof_interval = -1;
bool opt_prof_gdump = false;
bool opt_prof_final = false;
bool opt_prof_leak = false;
bool opt_prof_leak_error = false;
MP_READ_MOSTLY bool opt_prof_accum = false;
char opt_prof_prefix[1024] = "jeprof";
MP_READ_MOSTLY unsigned opt_prof_bt_max = 128;
MP_READ_MOSTLY bool opt_prof_sys_thread_name = false;
const char *const prof_time_resolution_names[PROF_TIME_RES_COUNT] = {
	"default", "high",
};
MP_READ_MOSTLY unsigned opt_prof_time_resolution = PROF_TIME_RES_DEFAULT;

MP_READ_MOSTLY _Atomic bool prof_active;
_Atomic bool prof_thread_active_init;
_Atomic bool prof_gdump_enabled;
MP_READ_MOSTLY _Atomic size_t prof_lg_sample;
_Atomic uint64_t prof_dropped;
/* Bumped by prof.reset: samples taken before it no longer count.  (The
 * redraw of waits goes by prof_wait_gen, which prof.reset bumps too.) */
MP_READ_MOSTLY _Atomic uint64_t prof_epoch;
prof_live_t prof_live;
/* Bit i: gctx shard i holds a backtrace.  Set and cleared under the
 * shard's lock; read without it by snapshots, which skip the others (a
 * copy of a small table then costs its stacks, not 64 lock round trips):
 * a shard filled after the read is one whose samples came after the
 * copy began. */
_Atomic uint64_t prof_gctx_shards_used;
MP_READ_MOSTLY _Atomic uint64_t prof_wait_gen;

/* A shard's chains: `b` has `n` buckets (a power of two), first the
 * shard's own PROF_BUCKETS_INIT (`init`, further in the shard: this header
 * shares the lock's line), later a base_malloc'd array.  Guarded by the
 * shard's lock. */
typedef struct {
	void **b;
	uint32_t n;
	uint32_t count;                  /* entries in all chains */
} prof_buckets_t;

static void buckets_init(prof_buckets_t *t, void **init) {
	memset(init, 0, PROF_BUCKETS_INIT * sizeof(void *));
	t->b = init;
	t->n = PROF_BUCKETS_INIT;
	t->count = 0;
}

/* One more entry; true if the chains should be spread over twice as many
 * buckets now. */
static bool buckets_added(prof_buckets_t *t) {
	return ++t->count > t->n * PROF_BUCKETS_LOAD && t->n < PROF_BUCKETS_MAX;
}

/* Move every entry to a table of twice the buckets.  `key` gives an
 * entry's bucket-spreading bits, `next` the offset of its chain link.  On
 * no memory the chains just stay longer. */
static void buckets_grow(prof_buckets_t *t, uint64_t (*key)(const void *),
    size_t next) {
	uint32_t n = t->n * 2;
	void **b = base_malloc(n * sizeof(void *));
	if (b == NULL)
		return;
	for (uint32_t i = 0; i < t->n; i++) {
		void *e = t->b[i];
		while (e != NULL) {
			void **link = (void **)((char *)e + next);
			void *after = *link;
			void **head = &b[key(e) & (n - 1)];
			*link = *head;
			*head = e;
			e = after;
		}
	}
	if (t->n > PROF_BUCKETS_INIT)   /* else the shard's own */
		base_free(t->b, t->n * sizeof(void *));
	t->b = b;
	t->n = n;
}

/* Backtrace table: gctx chains, sharded; each shard lock also guards the
 * gctxs and tctxs in its chains.  A shard takes whole cache lines (as the
 * sample table's do), so that threads sampling under two shards' locks
 * write no line in common: at 272 bytes, one shard's lock shared a line
 * with the end of the shard before it. */
typedef struct {
	/* What a sample reads and writes comes first, in one line: gen,
	 * the chains' header and the lock's word and counters (a sample
	 * whose memo knows its gctx reads only gen and the lock; with the
	 * lock first, glibc's unused mutex and the cold counters put the
	 * chains and gen two and three lines further).  gen is bumped when
	 * a gctx of the shard is freed: a gctx a thread found under an
	 * earlier value is still there (prof_bt_hint_t). */
	_Alignas(CACHELINE) uint64_t gen;
	prof_buckets_t chains;           /* of prof_gctx_t, by gctx_key */
	mp_mutex_t mtx;
	/* The last gctx of the shard left without a tctx, kept in the
	 * chains (see gctx_release_locked); NULL: none.  It may have tctxs
	 * again by now. */
	prof_gctx_t *kept;
	/* Freed tctxs of the shard's, for its next new ones (NULL: none):
	 * a stack with one live sample at a time (bench's churn, simple)
	 * made and freed a tctx at nearly every sample, base_malloc and
	 * base_free 100 instructions of it.  Two: a stack two threads
	 * sample (bench's xthread) empties both threads' tctxs before
	 * either samples again, and with one spare 7% of its samples still
	 * made a tctx.  13 KiB at most. */
	prof_tctx_t *spare_t[2];
	void *chains_init[PROF_BUCKETS_INIT];    /* chains.b until it grows */
	/* The lifetime table's part of the shard's stacks (prof_lifetime.c):
	 * here, in pages the shard's lock has made resident anyway. */
	prof_life_part_t life;
} prof_gctx_shard_t;
/* prof_nshards of them (prof_boot). */
static MP_READ_MOSTLY prof_gctx_shard_t *gctx_shards;

/* prof_unbias of every size class up to UNBIAS_MAX at the current
 * lg_prof_sample: written with every gctx shard held, read under one.
 * Large classes too: their exp and two roundings were about 120
 * instructions at each sample and again at its free (8% of the per-sample
 * cost on bench's midsize, whose samples are mostly large).  Filled at
 * boot with prof:true only (prof_boot); 1.3 KiB in all. */
#define UNBIAS_MAX ((size_t)64 << 20)
#define UNBIAS_NCLASSES (8 + 4 * (26 - 7))      /* classes <= UNBIAS_MAX */
_Static_assert(UNBIAS_NCLASSES <= SC_NSIZES && UNBIAS_NCLASSES > SC_NBINS,
    "the unbias table covers the small classes");
static struct {
	uint64_t objs_shifted, bytes;
} unbias_tab[UNBIAS_NCLASSES];
static MP_READ_MOSTLY unsigned unbias_n;        /* classes filled */

static void unbias_tab_fill(void) {
	unbias_n = UNBIAS_NCLASSES;
	for (unsigned i = 0; i < UNBIAS_NCLASSES; i++)
		prof_unbias(sz_index2size(i), &unbias_tab[i].objs_shifted,
		    &unbias_tab[i].bytes);
}

/* prof_unbias(usize) from the table when usize is a class it holds (a
 * sampled usize always is a class; the check keeps any other exact).
 * Under a gctx shard lock, like the table's writer. */
static inline void unbias_lookup(size_t usize, uint64_t *objs_shifted,
    uint64_t *bytes) {
	if (usize <= UNBIAS_MAX) {
		unsigned ind = sz_size2index(usize);
		if (ind < unbias_n && sz_index2size(ind) == usize) {
			*objs_shifted = unbias_tab[ind].objs_shifted;
			*bytes = unbias_tab[ind].bytes;
			return;
		}
	}
	prof_unbias(usize, objs_shifted, bytes);
}

/* The same by the class index the sample's extent carries (a slab's or
 * a large block's szind): no size-to-class computation, which for a
 * large class is a call of 13 instructions, at each sample and again at
 * its free.  An index that is not usize's class (none is expected: a
 * block keeps its class while sampled) goes by the size. */
static inline void unbias_lookup_ind(unsigned ind, size_t usize,
    uint64_t *objs_shifted, uint64_t *bytes) {
	if (ind < unbias_n && sz_index2size(ind) == usize) {
		*objs_shifted = unbias_tab[ind].objs_shifted;
		*bytes = unbias_tab[ind].bytes;
		return;
	}
	unbias_lookup(usize, objs_shifted, bytes);
}

void prof_unbias_cached(size_t usize, uint64_t *objs_shifted,
    uint64_t *bytes) {
	unbias_lookup(usize, objs_shifted, bytes);
}

/* Sample table: live sampled small objects by address. */
typedef struct {
	/* The chains' header and the lock's hot fields in the first line
	 * (as the gctx shard's). */
	_Alignas(CACHELINE) prof_buckets_t chains; /* of prof_sample_t, by
	                                            * sample_key */
	mp_mutex_t mtx;
	void *chains_init[PROF_BUCKETS_INIT];    /* chains.b until it grows */
} prof_sample_shard_t;
/* prof_nshards of them. */
static MP_READ_MOSTLY prof_sample_shard_t *sample_shards;

/* An uncontended lock round trip writes its first MP_MUTEX_HOT_BYTES
 * (types.h): with what comes before it in a shard, one line. */
_Static_assert(offsetof(prof_gctx_shard_t, mtx) + MP_MUTEX_HOT_BYTES <=
    CACHELINE && offsetof(prof_sample_shard_t, mtx) + MP_MUTEX_HOT_BYTES <=
    CACHELINE, "a shard's gen, chains and lock in its first line");

/* Shards in each of the two tables: 4 a CPU, a power of two from
 * PROF_SHARDS_MIN to PROF_GCTX_SHARDS, 0 with the profiler off (prof_boot).
 * A gctx's shard is its hash's low bits, and its bucket takes the bits
 * from 6 up (hash / PROF_GCTX_SHARDS, also prof_lifetime.c's), so the
 * count changes neither.  64 of each were 29 KiB, 9 pages written at boot:
 * in a 3 MB program, 1% of its peak RSS each; 8 of each on 2 CPUs are one
 * page, and a lock's contention needs two threads sampling at once. */
MP_READ_MOSTLY unsigned prof_nshards;

static mp_mutex_t tdatas_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_PROF_TDATAS);
prof_tdata_t *prof_tdatas_head;
static prof_tdata_t *tdatas_tail;
static uint64_t tdata_next_uid;

/* -1 / ln(1 - 2^-lg) for each lg_prof_sample, filled at boot. */
double prof_wait_scale[64];

/*
 * The wait's exponential variate by Marsaglia and Tsang's ziggurat (2000)
 * with 256 strips: the draw's top 8 bits pick a strip, the 53 bits below
 * them a point in it, and 97.8% of draws fall in the strip's inner
 * rectangle and are returned after one compare and one multiply.  The
 * rest (the strip's wedge, or the tail past ZIG_R) take a rejection step
 * with exp or ln, which keeps the distribution exact: no approximation of
 * ln on the common path, where the atanh series cost 59 instructions a
 * draw.
 * Strip i's point j (53 bits) is accepted at once when j < zig_k(i), and
 * is then j * zig_w(i); zig_f[i] is exp(-x_i) at the strip's edge.
 * 6 KiB, made when the profiler first turns active (at boot with
 * prof_active:true, else at the first write of prof.active true): a
 * process with prof_active:false draws no wait, and the table was two
 * pages of its resident memory.  A thread draws only after it read
 * prof.active true, which the writer stored after the table.  The common
 * path is prof.h's prof_exp_draw_inline (tsd.c's redraw inlines it).
 */
#define ZIG_N PROF_ZIG_N
#define ZIG_R 7.697117470131487         /* the tail's start */
#define ZIG_V 3.949659822581572e-3      /* each strip's area */
#define ZIG_M 9007199254740992.0        /* 2^53 */
/* In base memory, not .bss: 6 KiB more of .bss moved the object table's
 * arrays across pages (test/integration/prof_data_pages). */
MP_READ_MOSTLY const prof_zig_t *prof_zig;
#define zig_k(i) (prof_zig->kw[i].k)
#define zig_w(i) (prof_zig->kw[i].w)
#define zig_f (prof_zig->f)

static bool zig_fill(void) {
	prof_zig_t *z = base_malloc(sizeof(*z));
	if (z == NULL)
		return true;
	double x = ZIG_R, prev = ZIG_R;
	double q = ZIG_V / util_exp(-x);
	z->kw[0].k = (uint64_t)(x / q * ZIG_M);
	z->kw[1].k = 0;
	z->kw[0].w = q / ZIG_M;
	z->kw[ZIG_N - 1].w = x / ZIG_M;
	z->f[0] = 1.0;
	z->f[ZIG_N - 1] = util_exp(-x);
	for (unsigned i = ZIG_N - 2; i >= 1; i--) {
		/* ln y as log1p(y - 1): y is in (0, 1], where y - 1 is exact
		 * to an ulp of 1 (no libm: test/integration/boot_libm). */
		x = -util_log1p(ZIG_V / x + z->f[i + 1] - 1.0);
		z->kw[i + 1].k = (uint64_t)(x / prev * ZIG_M);
		prev = x;
		z->f[i] = util_exp(-x);
		z->kw[i].w = x / ZIG_M;
	}
	prof_zig = z;
	return false;
}

bool prof_zig_ensure(void) {
	mp_mutex_lock(&tdatas_mtx);
	bool fail = prof_zig == NULL && zig_fill();
	mp_mutex_unlock(&tdatas_mtx);
	return fail;
}

static void wait_scale_fill(void) {
	for (unsigned lg = 1; lg < 64; lg++)
		prof_wait_scale[lg] = -1.0 / util_log1p(-1.0 /
		    (double)((uint64_t)1 << lg));
}

/*
 * The shards (gctx_shards, sample_shards) exist only when the profiler is
 * on (opt_prof, fixed at boot): made at boot in base memory.  Off, nothing
 * is ever sampled into them, and every function that would lock or walk
 * them for a reader (dumps, snapshots, prof.reset, fork) returns first:
 * there is nothing to lock and nothing to visit.  Their locks are
 * registered with ctl only then (stats.mutexes.prof reads each registered
 * lock under it: off, it reads zeros).
 */
static bool shards_ready(void) {
	return prof_nshards != 0;
}

void prof_shards_extent(bool samples, const void **addr, size_t *size) {
	*addr = samples ? (const void *)sample_shards :
	    (const void *)gctx_shards;
	*size = prof_nshards * (samples ? sizeof(*sample_shards) :
	    sizeof(*gctx_shards));
}

/* prof_nshards for ncpus CPUs. */
static unsigned shards_for(unsigned ncpus) {
	unsigned n = PROF_SHARDS_MIN;
	while (n < PROF_GCTX_SHARDS && n < 4 * ncpus)
		n *= 2;
	return n;
}

/* Both tables in base memory (zeroed, as base_malloc's always are),
 * every lock and bucket array set up. */
static bool shards_make(void) {
	unsigned n = shards_for(os_ncpus());
	/* base_malloc's blocks are line-aligned, as the shards must be;
	 * two blocks, so that each stays within BASE_SMALL_MAX and comes
	 * out of pages base memory has resident anyway (8 shards: 2,560 and
	 * 2,048 bytes), where one of both would map pages of its own. */
	gctx_shards = base_malloc(n * sizeof(*gctx_shards));
	sample_shards = base_malloc(n * sizeof(*sample_shards));
	if (gctx_shards == NULL || sample_shards == NULL) {
		base_free(gctx_shards, n * sizeof(*gctx_shards));
		base_free(sample_shards, n * sizeof(*sample_shards));
		return true;
	}
	for (unsigned i = 0; i < n; i++) {
		mp_mutex_init_lite(&gctx_shards[i].mtx, LOCK_RANK_PROF_GCTX);
		buckets_init(&gctx_shards[i].chains,
		    gctx_shards[i].chains_init);
		/* jemalloc's "prof" lock guards its backtrace table. */
		ctl_mutex_register("prof", &gctx_shards[i].mtx);
		mp_mutex_init_lite(&sample_shards[i].mtx,
		    LOCK_RANK_PROF_SAMPLES);
		buckets_init(&sample_shards[i].chains,
		    sample_shards[i].chains_init);
	}
	prof_nshards = n;
	return false;
}

MP_WARM bool prof_boot(void) {
	mp_mutex_init(&tdatas_mtx, LOCK_RANK_PROF_TDATAS);
	ctl_mutex_register("prof_thds_data", &tdatas_mtx);
	if (!config_prof)
		opt_prof = false;
	prof_recent_boot();
	/* Unlike jemalloc, prof_leak works alone: it implies the final dump
	 * it reports from, and prof_leak_error implies prof_leak. */
	if (opt_prof_leak_error)
		opt_prof_leak = true;
	if (opt_prof_leak) {
		opt_prof = config_prof;
		opt_prof_final = true;
	}
	atomic_store(&prof_active, opt_prof && opt_prof_active);
	atomic_store(&prof_thread_active_init, opt_prof_thread_active_init);
	atomic_store(&prof_gdump_enabled, opt_prof && opt_prof_gdump);
	atomic_store(&prof_lg_sample, opt_lg_prof_sample);
	/* Only for the profiler: nothing else reads them, and their exp and
	 * log1p (util.c's; libm's, when the library still linked it, put
	 * 270 KiB of libm's pages in every process's resident set) are ~170
	 * calls of boot work (test/integration/boot_libm). */
	if (opt_prof) {
		if (shards_make())
			return true;
		unbias_tab_fill();
		wait_scale_fill();
		if (opt_prof_active && zig_fill())
			return true;
	}
	return false;
}

/* ---------------------------------------------------------- sampling */

/*
 * ln(x) for 1 <= x < 2^53, within 1e-7: x = 2^e * m with m in [1, 2), and
 * ln m = 2 atanh(t), t = (m - 1) / (m + 1) <= 1/3, from its series to t^11.
 * Only the ziggurat's tail (1 draw in 2,200) takes it now.
 */
static double prof_ln(uint64_t x) {
	union {
		double d;
		uint64_t u;
	} v = {.d = (double)x};
	int e = (int)(v.u >> 52) - 1023;
	v.u = (v.u & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
	double t = (v.d - 1.0) / (v.d + 1.0), t2 = t * t;
	double series = 1.0 + t2 * (1.0 / 3 + t2 * (1.0 / 5 + t2 * (1.0 / 7 +
	    t2 * (1.0 / 9 + t2 * (1.0 / 11)))));
	return e * 0.69314718055994530942 + 2.0 * t * series;
}

/* jemalloc's LCG, one step. */
static inline uint64_t prng_step(uint64_t *state) {
	*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	return *state;
}

/* A uniform in (0, 1] from the step's 53 high bits, as its ln (<= 0). */
static double zig_ln_uniform(uint64_t *state) {
	uint64_t r = (prng_step(state) >> 11) + 1;
	return prof_ln(r) - 53 * 0.69314718055994530942;
}

/* The draws that missed their strip's inner rectangle: the tail past
 * ZIG_R (strip 0), or the wedge under exp(-x) (accept or redraw). */
MP_NOINLINE double prof_zig_slow(uint64_t *state, unsigned i, uint64_t j) {
	for (;;) {
		if (i == 0)
			return ZIG_R - zig_ln_uniform(state);
		double x = (double)j * zig_w(i);
		double u = (double)(prng_step(state) >> 11) * (1.0 / ZIG_M);
		if (zig_f[i] + u * (zig_f[i - 1] - zig_f[i]) < util_exp(-x))
			return x;
		uint64_t v = prng_step(state);
		i = (unsigned)(v >> 56);
		j = (v >> 3) & (((uint64_t)1 << 53) - 1);
		if (j < zig_k(i))
			return (double)j * zig_w(i);
	}
}

double prof_exp_draw(uint64_t *state) {
	return prof_exp_draw_inline(state);
}

uint64_t prof_sample_wait(tsd_t *tsd) {
	return prof_sample_wait_inline(tsd);
}

bool prof_thread_sampling(tsd_t *tsd) {
	return prof_thread_sampling_inline(tsd);
}

void prof_wait_gen_bump(void) {
	atomic_fetch_add(&prof_wait_gen, 1);
}

/*
 * One sampled object of usize bytes stands for 1/(1 - e^(-usize/R)) such
 * objects (the probability that a Poisson process of rate 1/R per byte
 * hits it is 1 - e^(-usize/R)).  Counts are kept times 8 to cut rounding.
 */
void prof_unbias(size_t usize, uint64_t *objs_shifted, uint64_t *bytes) {
	double R = (double)((uint64_t)1 << atomic_load_explicit(
	    &prof_lg_sample, memory_order_relaxed));
	double p = 1.0 - util_exp(-(double)usize / R);
	if (p <= 0.0) {
		*objs_shifted = 8;
		*bytes = usize;
		return;
	}
	*objs_shifted = (uint64_t)util_llround(8.0 / p);
	*bytes = (uint64_t)util_llround((double)usize / p);
}

/* ------------------------------------------------------------ tdata */

prof_tdata_t *prof_tdata_get(tsd_t *tsd) {
	if (tsd->prof_tdata != NULL)
		return tsd->prof_tdata;
	prof_tdata_t *td = base_malloc(sizeof(*td));
	if (td == NULL)
		return NULL;
	atomic_store(&td->active, atomic_load(&prof_thread_active_init));
	atomic_store_explicit(&td->refs, TDATA_REF_THREAD,
	    memory_order_relaxed);
	mp_mutex_lock(&tdatas_mtx);
	td->uid = tdata_next_uid++;
	td->prev = tdatas_tail;
	if (tdatas_tail != NULL)
		tdatas_tail->next = td;
	else
		prof_tdatas_head = td;
	tdatas_tail = td;
	mp_mutex_unlock(&tdatas_mtx);
	tsd->prof_tdata = td;
	return td;
}

static void tdata_unlink_locked(prof_tdata_t *td) {
	if (td->prev != NULL)
		td->prev->next = td->next;
	else
		prof_tdatas_head = td->next;
	if (td->next != NULL)
		td->next->prev = td->prev;
	else
		tdatas_tail = td->prev;
}

/* Drop n references (TDATA_REF_TCTX: a tctx's; TDATA_REF_THREAD: its
 * thread's, at exit); whoever drops the last unlinks and frees it. */
static void tdata_release(prof_tdata_t *td, uint64_t n) {
	if (atomic_fetch_sub_explicit(&td->refs, n, memory_order_acq_rel) != n)
		return;
	mp_mutex_lock(&tdatas_mtx);
	tdata_unlink_locked(td);
	mp_mutex_unlock(&tdatas_mtx);
	base_free(td, sizeof(*td));
}

/* prof_sys_thread_name: the thread's OS name (at most 15 characters, as
 * PR_GET_NAME gives it; printable ones only, as thread.prof.name takes
 * them) into its tdata when it changed.  A system call: made at the
 * thread's first sample, then at a sample at least
 * PROF_SYS_NAME_PERIOD_NS after the last read on the sample clock (`now`,
 * prof_time_ns), and at the thread's exit (prof_thread_exit), rather than
 * at every sample as jemalloc does (one sample of a few thousand
 * instructions would carry a system call). */
_Atomic uint64_t prof_sys_name_reads;

static void tdata_sys_name(prof_tdata_t *td, uint64_t now) {
	td->name_read_ns = now;
	atomic_fetch_add_explicit(&prof_sys_name_reads, 1,
	    memory_order_relaxed);
	char name[16] = "";
	if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0)
		return;
	name[sizeof(name) - 1] = '\0';
	char *c;
	for (c = name; *c != '\0'; c++) {
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
	}
	/* Zero-padded, as prof_tdata_t.name always is. */
	memset(c, 0, (size_t)(name + sizeof(name) - c));
	_Static_assert(PROF_THREAD_NAME_MAX >= sizeof(name), "room");
	if (strncmp(td->name, name, sizeof(name)) == 0)
		return;         /* its own storage: only it writes there */
	prof_tdatas_lock();
	memcpy(td->name, name, sizeof(name));
	prof_tdatas_unlock();
}

/* At a sample taken at `now`: whether the name is due (see above).  The
 * first read is the one with name_read_ns still 0. */
static inline bool tdata_sys_name_due(const prof_tdata_t *td, uint64_t now) {
	return td->name_read_ns == 0 ||
	    now - td->name_read_ns >= PROF_SYS_NAME_PERIOD_NS;
}

/* A thread's frames array (prof_tdata_t.frames). */
static size_t frames_size(void) {
	return opt_prof_bt_max * sizeof(void *);
}

MP_WARM void prof_thread_exit(tsd_t *tsd) {
	prof_tdata_t *td = tsd->prof_tdata;
	if (td == NULL)
		return;
	tsd->prof_tdata = NULL;
	/* The name it leaves dumps with (prof_sys_thread_name), read once
	 * more: a rename since its last sample shows. */
	if (opt_prof_sys_thread_name && td->name_read_ns != 0)
		tdata_sys_name(td, prof_time_ns());
	/* Only its thread walks with it (the tdata may stay, for dumps). */
	prof_bt_memo_free(td->bt_memo);
	td->bt_memo = NULL;
	base_free(td->frames, frames_size());
	td->frames = NULL;
	while (td->spare != NULL) {
		prof_sample_t *s = td->spare;
		td->spare = s->next;
		base_free(s, sizeof(*s));
	}
	td->nspare = 0;
	tdata_release(td, TDATA_REF_THREAD);
}

void prof_tdatas_lock(void) {
	mp_mutex_lock(&tdatas_mtx);
}

void prof_tdatas_unlock(void) {
	mp_mutex_unlock(&tdatas_mtx);
}

/* ------------------------------------------------------------ labels */

/* The interned label sets (prof_labels_t), under tdatas_mtx. */
#define LABELS_BUCKETS 256
static prof_labels_t *labels_table[LABELS_BUCKETS];
static unsigned labels_count;

typedef struct {
	const char *k, *v;
	size_t klen, vlen;
} label_pair_t;

static uint64_t labels_hash(const char *str, size_t len) {
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)str[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The pairs of a canonical string (well formed: made by labels_apply). */
static unsigned labels_split(const char *str, size_t len, label_pair_t *out) {
	unsigned n = 0;
	const char *p = str, *end = str + len;
	while (p < end && n < PROF_LABEL_PAIRS_MAX) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *stop = comma != NULL ? comma : end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		out[n].k = p;
		out[n].klen = (size_t)(eq - p);
		out[n].v = eq + 1;
		out[n].vlen = (size_t)(stop - eq - 1);
		n++;
		p = stop + 1;
	}
	return n;
}

/* A key: printable ASCII without spaces, '=' or ','; a value: printable
 * ASCII and spaces without ','.  So "k1=v1,k2=v2" reads back unambiguously
 * (a value may hold '=': the first one ends the key). */
static bool label_key_char(unsigned char c) {
	return c > 0x20 && c < 0x7f && c != '=' && c != ',';
}

static bool label_value_char(unsigned char c) {
	return c >= 0x20 && c < 0x7f && c != ',';
}

/* s[0..n) as a message may show it: at most 32 characters, each control
 * or non-ASCII one as '?', "..." after a cut (one line, whatever the
 * program passed). */
static const char *label_show(char *buf, size_t size, const char *s,
    size_t n) {
	size_t k = 0;
	for (; k < n && k < 32 && k + 4 < size; k++)
		buf[k] = (unsigned char)s[k] >= 0x20 &&
		    (unsigned char)s[k] < 0x7f ? s[k] : '?';
	if (k < n && k + 4 <= size) {
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	buf[k] = '\0';
	return buf;
}

/* The record of canonical string str[0..len), made if new (tdatas_mtx
 * held); NULL if the table is full (*full set) or out of memory. */
static const prof_labels_t *labels_intern_locked(const char *str, size_t len,
    unsigned npairs, bool *full) {
	uint64_t h = labels_hash(str, len);
	prof_labels_t **bucket = &labels_table[h % LABELS_BUCKETS];
	for (prof_labels_t *l = *bucket; l != NULL; l = l->next) {
		if (l->hash == h && l->len == len &&
		    memcmp(l->str, str, len) == 0)
			return l;
	}
	*full = labels_count >= PROF_LABEL_SETS_MAX;
	if (*full)
		return NULL;
	prof_labels_t *l = base_malloc(sizeof(*l) + len + 1);
	if (l == NULL)
		return NULL;
	l->hash = h;
	l->npairs = npairs;
	l->len = (uint32_t)len;
	memcpy(l->str, str, len);
	l->str[len] = '\0';
	l->next = *bucket;
	*bucket = l;
	labels_count++;
	return l;
}

int prof_labels_apply(tsd_t *tsd, const char *spec, char *why,
    size_t whysize) {
	label_pair_t pairs[PROF_LABEL_PAIRS_MAX + 1];
	unsigned n = 0;
	prof_tdata_t *td = prof_tdata_get(tsd);
	if (td == NULL) {
		mp_snprintf(why, whysize, "out of memory for the thread's "
		    "profiling record");
		return EAGAIN;
	}
	if (spec == NULL) {
		td->labels = NULL;
		return 0;
	}
	if (spec[0] == '\0') {
		mp_snprintf(why, whysize, "empty label: expected \"key=value\" "
		    "(\"key=\" removes key; NULL clears every label)");
		return EINVAL;
	}
	if (td->labels != NULL)
		n = labels_split(td->labels->str, td->labels->len, pairs);
	const char *p = spec;
	for (;;) {
		const char *stop = strchr(p, ',');
		if (stop == NULL)
			stop = p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		size_t klen = eq != NULL ? (size_t)(eq - p) : (size_t)(stop - p);
		char key[40];
		label_show(key, sizeof(key), p, klen);
		if (eq == NULL || klen == 0) {
			mp_snprintf(why, whysize, "\"%s\" is not key=value",
			    label_show(key, sizeof(key), p, (size_t)(stop - p)));
			return EINVAL;
		}
		if (klen > PROF_LABEL_KEY_MAX) {
			mp_snprintf(why, whysize, "key \"%s\" is longer than "
			    "%d characters", key, PROF_LABEL_KEY_MAX);
			return EINVAL;
		}
		for (size_t i = 0; i < klen; i++) {
			if (!label_key_char((unsigned char)p[i])) {
				mp_snprintf(why, whysize, "key \"%s\": character "
				    "%#x is not allowed (printable, no space, "
				    "'=' or ',')", key, (unsigned char)p[i]);
				return EINVAL;
			}
		}
		/* The pprof writer's own labels. */
		if ((klen == 9 && memcmp(p, "thread_id", 9) == 0) ||
		    (klen == 11 && memcmp(p, "thread_name", 11) == 0)) {
			mp_snprintf(why, whysize, "key \"%s\" is reserved "
			    "(every sample has it)", key);
			return EINVAL;
		}
		const char *v = eq + 1;
		size_t vlen = (size_t)(stop - v);
		if (vlen > PROF_LABEL_VALUE_MAX) {
			mp_snprintf(why, whysize, "the value of \"%s\" is "
			    "longer than %d characters", key,
			    PROF_LABEL_VALUE_MAX);
			return EINVAL;
		}
		for (size_t i = 0; i < vlen; i++) {
			if (!label_value_char((unsigned char)v[i])) {
				mp_snprintf(why, whysize, "the value of \"%s\": "
				    "character %#x is not allowed (printable or "
				    "space, no ',')", key, (unsigned char)v[i]);
				return EINVAL;
			}
		}
		/* Replace, remove or insert in key order. */
		unsigned i = 0;
		int c = 1;
		while (i < n) {
			size_t m = klen < pairs[i].klen ? klen : pairs[i].klen;
			c = memcmp(pairs[i].k, p, m);
			if (c == 0)
				c = (pairs[i].klen > klen) - (pairs[i].klen < klen);
			if (c >= 0)
				break;
			i++;
		}
		if (i < n && c == 0) {
			if (vlen == 0) {
				memmove(&pairs[i], &pairs[i + 1],
				    (n - i - 1) * sizeof(pairs[0]));
				n--;
			} else {
				pairs[i].v = v;
				pairs[i].vlen = vlen;
			}
		} else if (vlen != 0) {
			if (n == PROF_LABEL_PAIRS_MAX) {
				mp_snprintf(why, whysize, "\"%s\" would make "
				    "more than %d labels", key,
				    PROF_LABEL_PAIRS_MAX);
				return EINVAL;
			}
			memmove(&pairs[i + 1], &pairs[i],
			    (n - i) * sizeof(pairs[0]));
			pairs[i] = (label_pair_t){p, v, klen, vlen};
			n++;
		}
		if (*stop == '\0')
			break;
		p = stop + 1;
	}
	if (n == 0) {
		td->labels = NULL;
		return 0;
	}
	char str[PROF_LABEL_STR_MAX + 1];
	size_t len = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i > 0)
			str[len++] = ',';
		memcpy(str + len, pairs[i].k, pairs[i].klen);
		len += pairs[i].klen;
		str[len++] = '=';
		memcpy(str + len, pairs[i].v, pairs[i].vlen);
		len += pairs[i].vlen;
	}
	bool full = false;
	prof_tdatas_lock();
	const prof_labels_t *l = labels_intern_locked(str, len, n, &full);
	prof_tdatas_unlock();
	if (l == NULL) {
		if (full)
			mp_snprintf(why, whysize, "%d distinct label sets "
			    "already (labels are for a few values, such as "
			    "request types, not one per request)",
			    PROF_LABEL_SETS_MAX);
		else
			mp_snprintf(why, whysize, "out of memory for the "
			    "label set");
		return EAGAIN;
	}
	td->labels = l;
	return 0;
}

const char *prof_labels_get(tsd_t *tsd) {
	prof_tdata_t *td = tsd->prof_tdata;
	return td != NULL && td->labels != NULL ? td->labels->str : "";
}

unsigned prof_labels_count(void) {
	prof_tdatas_lock();
	unsigned n = labels_count;
	prof_tdatas_unlock();
	return n;
}

/* ------------------------------------------------------------ time */

uint64_t prof_time_ns(void) {
	return opt_prof_time_resolution == PROF_TIME_RES_HIGH ? os_now_ns() :
	    os_now_coarse_ns();
}

uint64_t prof_time_wall_offset(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec -
	    prof_time_ns();
}

/* ----------------------------------------------------- gctx / tctx */

void prof_shard_lock(unsigned shard) {
	if (shards_ready())
		mp_mutex_lite_lock(&gctx_shards[shard].mtx);
}

void prof_shard_unlock(unsigned shard) {
	if (shards_ready())
		mp_mutex_lite_unlock(&gctx_shards[shard].mtx);
}

prof_life_part_t *prof_life_part(unsigned shard) {
	return &gctx_shards[shard].life;
}

void prof_shards_lock_all(void) {
	if (!shards_ready())
		return;
	for (unsigned i = 0; i < prof_nshards; i++)
		mp_mutex_lock_quiet(&gctx_shards[i].mtx);
}

void prof_shards_unlock_all(void) {
	if (!shards_ready())
		return;
	for (unsigned i = 0; i < prof_nshards; i++)
		mp_mutex_unlock_quiet(&gctx_shards[i].mtx);
}

void prof_gctx_foreach_locked_shard(unsigned shard,
    prof_gctx_visit_t *visit, void *arg) {
	prof_gctx_shard_t *sh = &gctx_shards[shard];
	for (uint32_t b = 0; b < sh->chains.n; b++) {
		for (prof_gctx_t *g = sh->chains.b[b]; g != NULL; g = g->next)
			visit(g, arg);
	}
}

/* A gctx's bits for its bucket: the shard took bits below
 * PROF_GCTX_SHARDS's (prof_nshards). */
static uint64_t gctx_key(const void *e) {
	return ((const prof_gctx_t *)e)->hash / PROF_GCTX_SHARDS;
}

static prof_gctx_t **gctx_bucket(prof_gctx_shard_t *sh, uint64_t hash) {
	return (prof_gctx_t **)&sh->chains.b[(hash / PROF_GCTX_SHARDS) &
	    (sh->chains.n - 1)];
}

static size_t gctx_size(unsigned nframes) {
	return sizeof(prof_gctx_t) + nframes * sizeof(void *);
}

/* The tctx of (td, backtrace), created if needed; shard lock held.  g:
 * the backtrace's gctx if the caller knows it (a hint), else NULL.
 * NULL when profiler memory ran out. */
static prof_tctx_t *tctx_lookup_locked(prof_gctx_shard_t *sh,
    unsigned shard, uint64_t hash, void *const *frames, unsigned n,
    prof_tdata_t *td, const prof_labels_t *labels, prof_gctx_t *g) {
	prof_gctx_t **bucket = gctx_bucket(sh, hash);
	if (g == NULL) {
		for (g = *bucket; g != NULL; g = g->next) {
			if (g->hash == hash && g->nframes == n &&
			    memcmp(g->frames, frames, n * sizeof(void *)) == 0)
				break;
		}
	}
	if (g == NULL) {
		g = base_malloc(gctx_size(n));
		if (g == NULL)
			return NULL;
		g->hash = hash;
		g->shard = shard;
		g->nframes = n;
		memcpy(g->frames, frames, n * sizeof(void *));
		g->next = *bucket;
		*bucket = g;
		if (sh->chains.count == 0)
			atomic_fetch_or_explicit(&prof_gctx_shards_used,
			    (uint64_t)1 << shard, memory_order_relaxed);
		if (buckets_added(&sh->chains))
			buckets_grow(&sh->chains, gctx_key,
			    offsetof(prof_gctx_t, next));
	}
	prof_tctx_t *t;
	for (t = g->tctxs; t != NULL; t = t->next) {
		if (t->tdata == td && t->labels == labels)
			return t;
	}
	unsigned k = sh->spare_t[1] != NULL;
	t = sh->spare_t[k];
	if (t != NULL) {
		/* As base_malloc's would be: its accumulated counts may
		 * be left (cnt_empty). */
		sh->spare_t[k] = NULL;
		memset(&t->cnt, 0, sizeof(t->cnt));
		t->nsamples = 0;
	} else if ((t = base_malloc(sizeof(*t))) == NULL) {
		return NULL;     /* an empty gctx is reaped on the next free */
	}
	t->tdata = td;
	t->labels = labels;
	t->gctx = g;
	t->next = g->tctxs;
	g->tctxs = t;
	/* No lock: only td's thread adds references, and it holds one
	 * itself until it exits. */
	atomic_fetch_add_explicit(&td->refs, TDATA_REF_TCTX,
	    memory_order_relaxed);
	return t;
}

/* Open delta windows (prof_accum_hold): read under a shard lock by
 * cnt_empty, so a window whose first snapshot took that lock after the
 * hold sees every tctx it copied kept to its end. */
static MP_READ_MOSTLY _Atomic unsigned accum_holds;

static bool cnt_empty(const prof_cnt_t *c) {
	return c->curobjs == 0 && (c->accumobjs == 0 || (!opt_prof_accum &&
	    atomic_load_explicit(&accum_holds, memory_order_relaxed) == 0));
}

static void gctx_destroy_locked(prof_gctx_shard_t *sh, prof_gctx_t *g) {
	sh->gen++;
	prof_gctx_t **gp = gctx_bucket(sh, g->hash);
	while (*gp != g)
		gp = &(*gp)->next;
	*gp = g->next;
	if (--sh->chains.count == 0)
		atomic_fetch_and_explicit(&prof_gctx_shards_used,
		    ~((uint64_t)1 << g->shard), memory_order_relaxed);
	base_free(g, gctx_size(g->nframes));
}

/*
 * g lost its last tctx: kept, in place of the shard's previous kept gctx
 * (freed if it is still without a tctx).  A stack whose objects come and
 * go one sample at a time (bench's churn and simple: one or two live
 * samples) made and freed its gctx at every sample, with its frames
 * copied, its objects noted (prof_sys_note) and its lifetime record
 * looked up again: about 400 instructions of a sample of 2,800.  At most
 * one a shard, 64 in all, each without counts (dumps skip them).
 */
static void gctx_release_locked(prof_gctx_shard_t *sh, prof_gctx_t *g) {
	prof_gctx_t *old = sh->kept;
	sh->kept = g;
	if (old != NULL && old != g && old->tctxs == NULL)
		gctx_destroy_locked(sh, old);
}

/* Free t if it counts nothing, and its gctx if that was the last tctx
 * (keep: keep it instead, gctx_release_locked, which may free another
 * gctx of the shard: not while walking the chains).  Shard lock held. */
static void tctx_try_destroy_locked(prof_gctx_shard_t *sh, prof_tctx_t *t,
    bool keep) {
	if (!cnt_empty(&t->cnt))
		return;
	prof_gctx_t *g = t->gctx;
	prof_tctx_t **pp = &g->tctxs;
	while (*pp != t)
		pp = &(*pp)->next;
	*pp = t->next;
	prof_tdata_t *td = t->tdata;
	if (sh->spare_t[0] == NULL)
		sh->spare_t[0] = t;
	else if (sh->spare_t[1] == NULL)
		sh->spare_t[1] = t;
	else
		base_free(t, sizeof(*t));
	tdata_release(td, TDATA_REF_TCTX);
	if (g->tctxs != NULL)
		return;
	if (keep) {
		gctx_release_locked(sh, g);
	} else {
		if (sh->kept == g)
			sh->kept = NULL;
		gctx_destroy_locked(sh, g);
	}
}

/* ----------------------------------------------------- sample table */

/* An address's mixed bits: the top 6 pick the shard, bits 20 up the
 * bucket within it. */
static uint64_t sample_mix(const void *p) {
	uint64_t k = (uintptr_t)p >> 4;
	k ^= k >> 17;
	return k * 0x9e3779b97f4a7c15ULL;
}

static uint64_t sample_key(const void *e) {
	return sample_mix(((const prof_sample_t *)e)->ptr) >> 20;
}

static prof_sample_shard_t *sample_shard(const void *p) {
	return &sample_shards[(sample_mix(p) >> 58) & (prof_nshards - 1)];
}

/* p's chain; the shard's lock held (the table may grow). */
static prof_sample_t **sample_bucket(prof_sample_shard_t *sh, const void *p) {
	return (prof_sample_t **)&sh->chains.b[(sample_mix(p) >> 20) &
	    (sh->chains.n - 1)];
}

void prof_samples_foreach(prof_sample_visit_t *visit, void *arg) {
	if (!shards_ready())
		return;
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_sample_shard_t *ss = &sample_shards[i];
		mp_mutex_lite_lock(&ss->mtx);
		for (size_t b = 0; b < ss->chains.n; b++) {
			for (const prof_sample_t *s = ss->chains.b[b];
			    s != NULL; s = s->next)
				visit(s, arg);
		}
		mp_mutex_lite_unlock(&ss->mtx);
	}
}

void prof_promoted_foreach(prof_sample_visit_t *visit, void *arg) {
	if (!shards_ready())
		return;
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_gctx_shard_t *sh = &gctx_shards[i];
		mp_mutex_lite_lock(&sh->mtx);
		for (const prof_sample_t *s = sh->life.large; s != NULL;
		    s = s->next) {
			if (s->usize <= SC_SMALL_MAXCLASS)
				visit(s, arg);
		}
		mp_mutex_lite_unlock(&sh->mtx);
	}
}

/* ---------------------------------------------------- alloc and free */

/*
 * Sample records a thread had no room for, or that a thread without a
 * tdata freed, chained by next, for threads whose spare lists are empty.
 * A thread that frees what another sampled (bench's xthread: a third of
 * its samples; prodcons: all, by a consumer that never samples) fills its
 * list, or has none, while the sampling thread's runs dry: each such
 * sample was a base_malloc in one thread and a base_free in the other,
 * two trips through base_mtx (10% of xthread's samples, all of
 * prodcons').  Lock-free and ABA-free: a record goes on by a
 * compare-exchange of the head it links to, and the records come off all
 * at once by an exchange with NULL, so no thread follows a link another
 * may be changing.  depot_n counts what was pushed and not yet taken
 * (a pusher counts itself first: never below the records there), and
 * bounds the depot to SAMPLE_DEPOT_MAX records, 4 KiB.
 */
#define SAMPLE_DEPOT_MAX 64
static _Atomic(prof_sample_t *) sample_depot;
static _Atomic unsigned sample_depot_n;
/* Records taken from base_malloc, for the tests (prof_sample_records). */
static _Atomic uint64_t sample_records_made;

uint64_t prof_sample_records(void) {
	return atomic_load_explicit(&sample_records_made,
	    memory_order_relaxed);
}

/* A sample record: one the thread freed, the depot's, or base_malloc's.
 * Every field is set before it is read (base_malloc's zeroing is not
 * relied on). */
static prof_sample_t *sample_new(prof_tdata_t *td) {
	prof_sample_t *s = td->spare;
	if (s == NULL) {
		if (atomic_load_explicit(&sample_depot, memory_order_relaxed)
		    != NULL)
			s = atomic_exchange_explicit(&sample_depot, NULL,
			    memory_order_acquire);
		if (s == NULL) {
			atomic_fetch_add_explicit(&sample_records_made, 1,
			    memory_order_relaxed);
			return base_malloc(sizeof(*s));
		}
		/* The thread's list now, however long (SAMPLE_DEPOT_MAX
		 * at most): its frees add to it only below
		 * PROF_SPARE_SAMPLES. */
		unsigned n = 0;
		for (prof_sample_t *x = s; x != NULL; x = x->next)
			n++;
		atomic_fetch_sub_explicit(&sample_depot_n, n,
		    memory_order_relaxed);
		td->nspare = n;
	}
	td->spare = s->next;
	td->nspare--;
	return s;
}

/* s onto the depot; false: it is full. */
static bool depot_push(prof_sample_t *s) {
	if (atomic_fetch_add_explicit(&sample_depot_n, 1,
	    memory_order_relaxed) >= SAMPLE_DEPOT_MAX) {
		atomic_fetch_sub_explicit(&sample_depot_n, 1,
		    memory_order_relaxed);
		return false;
	}
	prof_sample_t *head = atomic_load_explicit(&sample_depot,
	    memory_order_relaxed);
	do
		s->next = head;
	while (!atomic_compare_exchange_weak_explicit(&sample_depot, &head, s,
	    memory_order_release, memory_order_relaxed));
	return true;
}

/* Done with s: kept by the calling thread for its next sample while it
 * has room and runs, else put in the depot while that has room, else
 * given back. */
static void sample_dispose(prof_sample_t *s) {
	tsd_t *tsd = &mp_tsd;
	prof_tdata_t *td = tsd->state == TSD_NOMINAL ? tsd->prof_tdata : NULL;
	if (td == NULL || td->nspare >= PROF_SPARE_SAMPLES) {
		if (!depot_push(s))
			base_free(s, sizeof(*s));
		return;
	}
	s->next = td->spare;
	td->spare = s;
	td->nspare++;
}

bool prof_sample_alloc(tsd_t *tsd, void *p, size_t usize, size_t req,
    void *entry, uintptr_t fp) {
	if (!atomic_load_explicit(&prof_active, memory_order_relaxed))
		return false;
	bool recorded = false;
	tsd->reentrancy++;
	prof_tdata_t *td = prof_tdata_get(tsd);
	if (td == NULL) {
		/* No memory for the thread's record: the next sample of
		 * this thread tries again. */
		atomic_fetch_add(&prof_dropped, 1);
		goto out;
	}
	if (!atomic_load_explicit(&td->active, memory_order_relaxed))
		goto out;
	if (tsd->stack_hi == 0)
		prof_sys_thread_init(tsd);
	if (td->bt_memo == NULL)
		td->bt_memo = prof_bt_memo_new();
	if (td->frames == NULL && (td->frames = base_malloc(frames_size())) ==
	    NULL) {
		atomic_fetch_add(&prof_dropped, 1);
		goto out;
	}
	/* The time first, nearest the allocation it dates. */
	uint64_t now = prof_time_ns();
	if (opt_prof_sys_thread_name && tdata_sys_name_due(td, now))
		tdata_sys_name(td, now);
	/* Frame 0 is the entry point the program called: jeprof knows
	 * malloc, calloc, realloc, ... and strips frames up to it (a
	 * prefixed build's heap_v2 writer puts the call there instead:
	 * prof_heap_v2.c). */
	void **frames = td->frames;
	frames[0] = entry;
	/* A walk the thread's memo answered comes with what this found for
	 * it last time: its hash and gctx. */
	prof_bt_hint_t hint;
	prof_bt_ref_t ref;
	unsigned n = 1 + prof_backtrace_hinted(frames + 1, opt_prof_bt_max -
	    1, fp, &hint, &ref);
	bool hinted = hint.gctx != NULL && hint.entry == entry;
	prof_sample_t *s = sample_new(td);
	if (s == NULL) {
		atomic_fetch_add(&prof_dropped, 1);
		goto out;
	}
	s->ptr = p;
	s->usize = usize;
	s->req_pad = prof_sample_req_pad(usize, req);
	s->time_ns = now;
	uint64_t hash = hinted ? hint.hash : prof_bt_hash(frames, n);
	unsigned shard = (unsigned)(hash & (prof_nshards - 1));
	prof_gctx_shard_t *sh = &gctx_shards[shard];
	uint64_t objs_u, bytes_u;
	extent_t *e = pagemap_lookup(p);
	bool large = e->kind == EXTENT_LARGE;
	atomic_store_explicit(&s->recent, NULL, memory_order_relaxed);
	mp_mutex_lite_lock(&sh->mtx);
	prof_gctx_t *hint_g = hinted && hint.gen == sh->gen ? hint.gctx : NULL;
	prof_tctx_t *t = tctx_lookup_locked(sh, shard, hash, frames, n, td,
	    td->labels, hint_g);
	/* The memo's hint was right: it stays as it is (most samples of
	 * a repeated stack; its store was 20 instructions of them, and
	 * making the new hint 10 more). */
	bool hint_kept = t != NULL && hint_g != NULL && hint_g == t->gctx;
	if (t != NULL) {
		if (!hint_kept)
			hint = (prof_bt_hint_t){entry, hash, t->gctx, sh->gen};
		/* Under the shard lock, like the epoch: prof_reset changes
		 * lg_sample only while holding every shard. */
		unbias_lookup_ind(e->szind, usize, &objs_u, &bytes_u);
		s->bytes_unbiased = bytes_u;
		/* Read under the shard lock: prof_reset holds them all. */
		s->epoch = (uint32_t)atomic_load(&prof_epoch);
		t->nsamples++;
		t->cnt.curobjs++;
		t->cnt.curbytes += usize;
		t->cnt.curobjs_shifted_unbiased += objs_u;
		t->cnt.curbytes_unbiased += bytes_u;
		atomic_fetch_add_explicit(&prof_live.bytes, bytes_u,
		    memory_order_relaxed);
		/* Without prof_accum too: a delta window's allocations are
		 * the difference of these (prof_accum_hold). */
		t->cnt.accumobjs++;
		t->cnt.accumbytes += usize;
		t->cnt.accumobjs_shifted_unbiased += objs_u;
		t->cnt.accumbytes_unbiased += bytes_u;
		s->tctx = t;
		/* Among the live large samples of the lifetime profile:
		 * under this lock too (prof_lifetime.c). */
		if (large)
			prof_lifetime_large_add(&sh->life, s);
	}
	mp_mutex_lite_unlock(&sh->mtx);
	if (t != NULL && !hint_kept)
		prof_bt_hint_store(td->bt_memo, ref, &hint);
	if (t == NULL) {
		sample_dispose(s);
		atomic_fetch_add(&prof_dropped, 1);
		goto out;
	}
	/* A new stack's objects, for dumps after they are unloaded (t and
	 * its gctx live on: s, which names t, is not published yet).  The
	 * return addresses follow the entry point in frames[0]. */
	if (!atomic_load_explicit(&t->gctx->noted, memory_order_relaxed) &&
	    prof_sys_note(frames + 1, n - 1))
		atomic_store_explicit(&t->gctx->noted, true,
		    memory_order_relaxed);
	if (opt_prof_stats)
		prof_stats_alloc(prof_sample_req(s), usize);
	if (large) {
		e->prof = s;
	} else {
		prof_sample_shard_t *ss = sample_shard(p);
		mp_mutex_lite_lock(&ss->mtx);
		prof_sample_t **bucket = sample_bucket(ss, p);
		s->next = *bucket;
		*bucket = s;
		if (buckets_added(&ss->chains))
			buckets_grow(&ss->chains, sample_key,
			    offsetof(prof_sample_t, next));
		mp_mutex_lite_unlock(&ss->mtx);
		atomic_fetch_add(&e->nsampled, 1);
	}
	if (atomic_load_explicit(&prof_recent_max, memory_order_relaxed) != 0) {
		/* td is this thread's: only it writes its name (under
		 * the lock, for other threads' dumps), so reading it
		 * needs no lock. */
		prof_recent_alloc(s, usize, td->uid, td->name, frames, n,
		    hash);
	}
	recorded = true;
out:
	tsd->reentrancy--;
	return recorded;
}

_Static_assert(sizeof(prof_sample_t) <= 64, "one base_malloc line");

bool prof_sample_info(void *p, prof_sample_info_t *info) {
	extent_t *e = pagemap_lookup(p);
	if (e == NULL)
		return true;
	prof_sample_t *s = NULL;
	prof_sample_shard_t *ss = NULL;
	if (e->kind == EXTENT_LARGE) {
		s = e->prof;
	} else {
		ss = sample_shard(p);
		mp_mutex_lite_lock(&ss->mtx);
		for (s = *sample_bucket(ss, p); s != NULL && s->ptr != p;
		    s = s->next)
			;
	}
	if (s != NULL) {
		/* The caller keeps p live: its tctx and tdata stay. */
		info->time_ns = s->time_ns;
		info->usize = s->usize;
		info->uid = s->tctx->tdata->uid;
		const prof_labels_t *l = s->tctx->labels;
		memcpy(info->labels, l != NULL ? l->str : "",
		    l != NULL ? l->len + 1 : 1);
	}
	if (ss != NULL)
		mp_mutex_lite_unlock(&ss->mtx);
	return s == NULL;
}

/* recent_dalloc for a thread without a frames array (exiting, or no
 * memory for one): the walk's array on the stack, 2 KiB, only here. */
static MP_NOINLINE void recent_dalloc_stack_frames(prof_sample_t *s,
    prof_tdata_t *td, uintptr_t fp, uint64_t now) {
	void *frames[PROF_BT_MAX_LIMIT];
	prof_recent_dalloc(s, td != NULL, td != NULL ? td->uid : 0,
	    td != NULL ? td->name : NULL, fp, frames, now);
}

/* The free side of s's record among the recent allocations: the freeing
 * thread's identity (it gets one if it has none, but not while it exits:
 * its identity is gone for good).  The free's stack is walked into the
 * thread's frames array, as a sample's is (prof_tdata_t.frames): an array
 * on the stack took a recorded free 3,288 bytes below the program's frame
 * (test/unit/prof_stack_depth).  now: the free's time (prof_time_ns). */
static MP_NOINLINE void recent_dalloc(prof_sample_t *s, uintptr_t fp,
    uint64_t now) {
	tsd_t *tsd = &mp_tsd;
	/* The free's stack is walked: a thread that never sampled has no
	 * stack bounds yet. */
	if (tsd->stack_hi == 0)
		prof_sys_thread_init(tsd);
	prof_tdata_t *td = tsd->prof_tdata;
	if (td == NULL && tsd->state == TSD_NOMINAL)
		td = prof_tdata_get(tsd);
	if (td != NULL && td->frames == NULL && tsd->state == TSD_NOMINAL)
		td->frames = base_malloc(frames_size());
	if (td == NULL || td->frames == NULL) {
		recent_dalloc_stack_frames(s, td, fp, now);
		return;
	}
	/* td is this thread's: its name needs no lock (prof_sample_alloc) */
	prof_recent_dalloc(s, true, td->uid, td->name, fp, td->frames, now);
}

void prof_sample_free(void *p, extent_t *e) {
	prof_sample_free_at(p, e, 0);
}

void prof_sample_free_at(void *p, extent_t *e, uintptr_t fp) {
	prof_sample_t *s;
	bool large = e->kind == EXTENT_LARGE;
	if (large) {
		s = e->prof;
		e->prof = NULL;
	} else {
		prof_sample_shard_t *ss = sample_shard(p);
		mp_mutex_lite_lock(&ss->mtx);
		prof_sample_t **bucket = sample_bucket(ss, p);
		while ((s = *bucket) != NULL && s->ptr != p)
			bucket = &s->next;
		if (s != NULL) {
			*bucket = s->next;
			ss->chains.count--;
		}
		mp_mutex_lite_unlock(&ss->mtx);
		if (s == NULL)
			return;
		atomic_fetch_sub(&e->nsampled, 1);
	}
	if (s == NULL)
		return;
	if (opt_prof_stats)
		prof_stats_free(prof_sample_req(s), s->usize);
	/* The free's time: its lifetime's end and its record's. */
	uint64_t now = prof_time_ns();
	if (prof_recent_linked(s))
		recent_dalloc(s, fp, now);
	prof_tctx_t *t = s->tctx;
	prof_gctx_shard_t *sh = &gctx_shards[t->gctx->shard];
	mp_mutex_lite_lock(&sh->mtx);
	if (large)
		prof_lifetime_large_del(&sh->life, s);
	/* A prof.reset since the sample already zeroed what it added. */
	uint64_t epoch = atomic_load(&prof_epoch);
	if (s->epoch == (uint32_t)epoch) {
		/* The object count it added, as prof_sample_alloc computed
		 * it: same size, same lg_prof_sample (same epoch). */
		uint64_t objs_u, bytes_u;
		unbias_lookup_ind(e->szind, s->usize, &objs_u, &bytes_u);
		t->cnt.curobjs--;
		t->cnt.curbytes -= s->usize;
		t->cnt.curobjs_shifted_unbiased -= objs_u;
		t->cnt.curbytes_unbiased -= s->bytes_unbiased;
		atomic_fetch_sub_explicit(&prof_live.bytes, s->bytes_unbiased,
		    memory_order_relaxed);
		/* The lifetime profile: its stack's bucket (the gctx is
		 * stable under its shard lock). */
		prof_lifetime_free(&sh->life, t->gctx, s->time_ns, now, objs_u,
		    s->bytes_unbiased, epoch);
	}
	if (--t->nsamples == 0)
		tctx_try_destroy_locked(sh, t, true);
	mp_mutex_lite_unlock(&sh->mtx);
	sample_dispose(s);
}

void prof_accum_hold(void) {
	atomic_fetch_add(&accum_holds, 1);
}

/* The last window closed: free the tctxs it kept (without samples, and
 * now empty: cnt_empty reads the holds again, so a window opened since
 * keeps them). */
void prof_accum_release(void) {
	if (atomic_fetch_sub(&accum_holds, 1) != 1 || opt_prof_accum ||
	    !shards_ready())
		return;
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_gctx_shard_t *sh = &gctx_shards[i];
		mp_mutex_lite_lock(&sh->mtx);
		for (uint32_t b = 0; b < sh->chains.n; b++) {
			prof_gctx_t *g = sh->chains.b[b];
			while (g != NULL) {
				prof_gctx_t *gnext = g->next;
				prof_tctx_t *t = g->tctxs;
				while (t != NULL) {
					prof_tctx_t *tnext = t->next;
					if (t->nsamples == 0)
						tctx_try_destroy_locked(sh, t,
						    false);
					t = tnext;
				}
				g = gnext;
			}
		}
		mp_mutex_lite_unlock(&sh->mtx);
	}
}

/* prof.reset: forget what was counted; objects still live are no longer
 * counted (their records survive so that their frees stay harmless). */
void prof_reset(size_t lg_sample) {
	if (lg_sample > 63)
		lg_sample = 63;
	/* All shards at once (raw locks: same rank), so that no sample or
	 * free sees the counters zeroed but the epoch not yet bumped. */
	prof_shards_lock_all();
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_gctx_shard_t *sh = &gctx_shards[i];
		for (uint32_t b = 0; b < sh->chains.n; b++) {
			for (prof_gctx_t *g = sh->chains.b[b]; g != NULL;
			    g = g->next) {
				for (prof_tctx_t *t = g->tctxs; t != NULL;
				    t = t->next)
					memset(&t->cnt, 0, sizeof(t->cnt));
			}
		}
	}
	atomic_fetch_add(&prof_epoch, 1);
	atomic_store(&prof_live.bytes, 0);
	atomic_store(&prof_lg_sample, lg_sample);
	unbias_tab_fill();
	prof_wait_gen_bump();
	prof_shards_unlock_all();
}

/* ---------------------------------------------------------- fork */

void prof_prefork(void) {
	bool shards = shards_ready();
	for (unsigned i = 0; shards && i < prof_nshards; i++)
		mp_mutex_lock_quiet(&gctx_shards[i].mtx);
	mp_mutex_lock_quiet(&tdatas_mtx);
	for (unsigned i = 0; shards && i < prof_nshards; i++)
		mp_mutex_lock_quiet(&sample_shards[i].mtx);
	prof_recent_prefork();
}

void prof_postfork_parent(void) {
	bool shards = shards_ready();
	prof_recent_postfork_parent();
	for (unsigned i = 0; shards && i < prof_nshards; i++)
		mp_mutex_unlock_quiet(&sample_shards[i].mtx);
	mp_mutex_unlock_quiet(&tdatas_mtx);
	for (unsigned i = 0; shards && i < prof_nshards; i++)
		mp_mutex_unlock_quiet(&gctx_shards[i].mtx);
}

void prof_postfork_child(void) {
	bool shards = shards_ready();
	prof_recent_postfork_child();
	for (unsigned i = 0; shards && i < prof_nshards; i++)
		mp_mutex_postfork_child(&sample_shards[i].mtx);
	mp_mutex_postfork_child(&tdatas_mtx);
	for (unsigned i = 0; shards && i < prof_nshards; i++)
		mp_mutex_postfork_child(&gctx_shards[i].mtx);
}
