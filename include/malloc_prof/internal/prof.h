/*
 * prof.h: the heap profiler's structs and cross-file prototypes (prof.c:
 * sampling, thread data, the backtrace and sample tables; prof_sys.c:
 * backtraces by frame pointers, then by prof_cfi.c's .eh_frame reader;
 * prof_snap.c: the snapshot dumps are written from; prof_heap_v2.c and
 * prof_pprof.c: its two writers; prof_dump.c: dump files and their
 * triggers; prof_lifetime.c: the lifetimes of freed samples).
 *
 * What is counted: each sampled object adds to the counters of the
 * (thread, backtrace) pair that allocated it, a tctx; freeing it, from any
 * thread, subtracts from the same tctx.  A gctx is one unique backtrace
 * with the list of its tctxs; a tdata is one thread's identity (uid, name,
 * active switch).  All profiler memory comes from base_malloc: it never
 * shows up in the profile and never recurses into sampling.
 *
 * Locks (see lock_rank_t): prof_dump_mtx (one dump at a time) before the
 * gctx shard locks, before prof_tdatas_mtx, before the sample-table shard
 * locks; each shard lock guards its chains and every gctx/tctx in them.
 */
#ifndef MP_INTERNAL_PROF_H
#define MP_INTERNAL_PROF_H

#include "malloc_prof/internal/alloc.h"

#define PROF_BT_MAX_LIMIT 256
/* The most shards of the backtrace table and of the sample table, and
 * the fewest (prof.c's prof_nshards: 4 a CPU in between). */
#define PROF_GCTX_SHARDS 64
#define PROF_SHARDS_MIN 8
/* For the profiler's few small variables that every profiled process
 * writes (at its first samples, at its peaks): in the library's .data,
 * whose two pages are written at load anyway, rather than each on a
 * page of .bss that only it would make resident (4 KiB of a small
 * process's peak RSS a page). */
#define PROF_DATA __attribute__((section(".data.mp_prof")))
/* Each shard's bucket array starts with this many buckets, inside the
 * shard, and doubles whenever its chains average more than
 * PROF_BUCKETS_LOAD entries.  Buckets are touched at random: fixed arrays
 * sized for a big heap (192 KiB in all) were resident in a small process
 * after a few dozen samples (+1% peak RSS on the 3 MB benchmarks). */
#define PROF_BUCKETS_INIT 8
#define PROF_BUCKETS_LOAD 2
#define PROF_BUCKETS_MAX ((uint32_t)1 << 20)
#define PROF_THREAD_NAME_MAX 16         /* with the NUL */
#define PROF_SPARE_SAMPLES 8            /* prof_tdata_t.spare */
/* thread.prof.label: a thread's label set holds at most this many
 * key=value pairs, keys of 1..PROF_LABEL_KEY_MAX characters and values of
 * 1..PROF_LABEL_VALUE_MAX; at most PROF_LABEL_SETS_MAX distinct sets are
 * ever made (they are kept for the process's life: see prof_labels_t). */
#define PROF_LABEL_PAIRS_MAX 8
#define PROF_LABEL_KEY_MAX 32
#define PROF_LABEL_VALUE_MAX 64
#define PROF_LABEL_SETS_MAX 1024
#define PROF_LABEL_STR_MAX (PROF_LABEL_PAIRS_MAX *                      \
	(PROF_LABEL_KEY_MAX + PROF_LABEL_VALUE_MAX + 2))

/* Counters of sampled objects.  *_shifted_unbiased counts are 8 times the
 * unbiased object count (jemalloc's rounding trick); *_unbiased bytes are
 * the unbiased estimate of the bytes the samples stand for. */
typedef struct prof_cnt_s {
	uint64_t curobjs;
	uint64_t curbytes;
	uint64_t curobjs_shifted_unbiased;
	uint64_t curbytes_unbiased;
	uint64_t accumobjs;
	uint64_t accumbytes;
	uint64_t accumobjs_shifted_unbiased;
	uint64_t accumbytes_unbiased;
} prof_cnt_t;

typedef struct prof_tdata_s prof_tdata_t;
typedef struct prof_gctx_s prof_gctx_t;
typedef struct prof_tctx_s prof_tctx_t;

/*
 * One distinct label set (thread.prof.label), interned: every thread and
 * every sample with the same pairs points at the same record, so a sample
 * copies a pointer, never a string, and allocates nothing for its labels.
 * `str` is the canonical form, the pairs sorted by key and joined as
 * "k1=v1,k2=v2" (what a read of thread.prof.label returns).  Records are
 * never freed (dumps and the peak's copy hold their pointers with no lock,
 * for as long as they like), hence PROF_LABEL_SETS_MAX; made and looked up
 * under prof_tdatas_lock.  The empty set is NULL, not a record.
 */
typedef struct prof_labels_s {
	struct prof_labels_s *next;      /* intern chain */
	uint64_t hash;
	uint32_t npairs;
	uint32_t len;                    /* strlen(str) */
	char str[];
} prof_labels_t;

/*
 * One thread's profiling identity.  Created at the thread's first sample
 * or thread.prof.* call; kept after the thread exits while any tctx still
 * names it, so that its objects stay attributed to it: refs counts
 * TDATA_REF_TCTX per tctx naming it plus TDATA_REF_THREAD while its
 * thread is alive, and whoever drops it to 0 frees it (a sample adds a
 * tctx's reference without a lock: only the thread itself adds any).
 * uid is the `tN` of dumps: first-use order, not the OS thread id.
 * The list and name are guarded by prof_tdatas_mtx; `active` is read
 * racily by its thread.
 */
#define TDATA_REF_THREAD ((uint64_t)1)
#define TDATA_REF_TCTX ((uint64_t)2)
struct prof_tdata_s {
	uint64_t uid;
	char name[PROF_THREAD_NAME_MAX];  /* zero-padded to the end */
	_Atomic bool active;             /* thread.prof.active */
	_Atomic uint64_t refs;
	/* thread.prof.label: the thread's current set (NULL: none); read
	 * and written by its thread only. */
	const prof_labels_t *labels;
	/* prof_backtrace's memo of the thread's last walks (prof_sys.c);
	 * NULL until its first sample, freed when the thread exits. */
	struct prof_bt_memo_s *bt_memo;
	/* A sample's frames while prof_sample_alloc gathers them
	 * (opt_prof_bt_max of them), made and freed with bt_memo: an array
	 * of PROF_BT_MAX_LIMIT on the stack, 2 KiB below malloc's frame,
	 * took each sampling thread a page of stack (bench's falseshare:
	 * 4 KiB more in each of its threads). */
	void **frames;
	/* prof_sys_thread_name: the sample time of the last read of the
	 * OS name (0: never); its thread's only. */
	uint64_t name_read_ns;
	/* Sample records its thread freed, for its next samples (its frees
	 * add while fewer than PROF_SPARE_SAMPLES; a list taken from prof.c's
	 * depot may be longer; chained by next; given back at its exit):
	 * base_malloc and base_free were about 110 instructions a sample. */
	struct prof_sample_s *spare;
	unsigned nspare;
	prof_tdata_t *prev, *next;       /* the global list, by uid */
};

/* Counters of one (thread, label set, backtrace): a thread's samples
 * taken under different label sets count apart.  Guarded by its gctx's
 * shard lock.  Freed when no live sample names it and it counts nothing
 * (with prof_accum, or while a delta window is open, it keeps counting
 * what was freed: prof_accum_hold). */
struct prof_tctx_s {
	prof_tdata_t *tdata;
	const prof_labels_t *labels;     /* interned; NULL: none */
	prof_gctx_t *gctx;
	prof_cnt_t cnt;
	uint64_t nsamples;               /* live prof_sample_t naming it */
	prof_tctx_t *next;               /* in gctx->tctxs */
};

/* One unique backtrace (frame 0 innermost).  Guarded by its shard lock;
 * freed with its last tctx. */
struct prof_gctx_s {
	prof_gctx_t *next;               /* hash chain */
	uint64_t hash;
	prof_tctx_t *tctxs;
	unsigned shard;
	unsigned nframes;
	/* prof_sys_note has kept the objects of its frames (read and set
	 * with no lock, by the thread sampling it). */
	_Atomic bool noted;
	/* Its stack's record in the lifetime table (prof_lifetime.c; NULL
	 * until a sample of it is freed): records outlive gctxs. */
	struct life_rec_s *life;
	void *frames[];
};

/* One live sampled object: found from its pointer in the sample table
 * (small objects) or from extent->prof (large ones).  What the sample
 * carries: its allocation time, and through its tctx the allocating
 * thread's uid and the label set it had then.  64 bytes: base_malloc's
 * smallest class. */
typedef struct prof_sample_s {
	/* Sample-table chain (small); the next of the live large samples
	 * of its gctx's shard (extent->prof; prof_lifetime_large_add). */
	struct prof_sample_s *next;
	union {
		/* A small sample's object: the sample table's key. */
		void *ptr;
		/* A large sample's previous in that list (its object is
		 * the extent's, which points here): unlinked in O(1). */
		struct prof_sample_s *prev;
	};
	prof_tctx_t *tctx;
	size_t usize;
	/* prof.reset count when sampled, its low 32 bits (2^32 resets
	 * during one object's life would be needed to confuse two). */
	uint32_t epoch;
	/* usize minus the bytes asked for (prof_stats' req_sum), at most
	 * UINT32_MAX: prof_sample_req. */
	uint32_t req_pad;
	/* When it was allocated: CLOCK_MONOTONIC nanoseconds, at the tick's
	 * resolution with prof_time_resolution:default (prof_time_ns). */
	uint64_t time_ns;
	/* The unbiased bytes it added to its tctx, taken back on free with
	 * the object count recomputed (unbias_small or prof_unbias: the epoch
	 * guarantees the same lg_prof_sample). */
	uint64_t bytes_unbiased;
	/* Its record among the recent allocations (prof_recent.c), or
	 * NULL; changed under recent_mtx, peeked at by the free. */
	_Atomic(struct recent_s *) recent;
} prof_sample_t;

/* The bytes asked for that s records (usize when a request left more than
 * UINT32_MAX of its class unused: objects over 16 GiB). */
static inline size_t prof_sample_req(const prof_sample_t *s) {
	return s->usize - s->req_pad;
}
/* The req_pad of a request of req bytes (0: unknown) in usize. */
static inline uint32_t prof_sample_req_pad(size_t usize, size_t req) {
	if (req == 0 || req > usize || usize - req > UINT32_MAX)
		return 0;
	return (uint32_t)(usize - req);
}

/* Room for n more frames in a dump-time walk's frame buffer (*frames, of
 * *cap slots, len used; base_malloc'd): grown by doubling from 1,024.
 * True if out of memory, the buffer left as it was.  Used by the walks
 * of prof_lifetime.c and prof_frag.c. */
static inline bool prof_frames_reserve(void ***frames, size_t *cap,
    size_t len, size_t n) {
	if (len + n <= *cap)
		return false;
	size_t ncap = *cap < 1024 ? 1024 : *cap;
	while (ncap < len + n)
		ncap *= 2;
	void **f = base_malloc(ncap * sizeof(void *));
	if (f == NULL)
		return true;
	if (len != 0)
		memcpy(f, *frames, len * sizeof(void *));
	if (*frames != NULL)
		base_free(*frames, *cap * sizeof(void *));
	*frames = f;
	*cap = ncap;
	return false;
}

/* ------------------------------------------------------------ prof.c */
extern bool opt_prof;
extern bool opt_prof_active;
extern bool opt_prof_thread_active_init;
extern size_t opt_lg_prof_sample;
extern ssize_t opt_lg_prof_interval;
extern bool opt_prof_gdump;
extern bool opt_prof_final;
extern bool opt_prof_leak;
extern bool opt_prof_leak_error;
extern bool opt_prof_accum;
extern char opt_prof_prefix[1024];
/* prof_dump.c: named dumps write through a final symbolic link. */
extern bool opt_prof_dump_follow_symlinks;
extern unsigned opt_prof_bt_max;
/* Threads' names in dumps come from the OS (PR_GET_NAME), read at the
 * thread's first sample, then at a sample PROF_SYS_NAME_PERIOD_NS or more
 * after the last read (on the sample clock, prof_time_ns), and at its
 * exit; prof_sys_name_reads counts the reads (for the tests). */
extern bool opt_prof_sys_thread_name;
#define PROF_SYS_NAME_PERIOD_NS ((uint64_t)100 * 1000 * 1000)
extern _Atomic uint64_t prof_sys_name_reads;
/* prof_time_resolution (indexes of prof_time_resolution_names): the clock
 * of sample times, CLOCK_MONOTONIC_COARSE (default: a few ms, 6 ns) or
 * CLOCK_MONOTONIC (high: ns, 20 ns). */
typedef enum {
	PROF_TIME_RES_DEFAULT,
	PROF_TIME_RES_HIGH,
	PROF_TIME_RES_COUNT
} prof_time_res_t;
extern const char *const prof_time_resolution_names[PROF_TIME_RES_COUNT];
extern unsigned opt_prof_time_resolution;
/* prof_snap.c: false: dumps print the sampled counts, not the unbiased
 * estimates (prof_snap_printed). */
extern bool opt_prof_unbias;

extern _Atomic bool prof_active;           /* prof.active */
extern _Atomic bool prof_thread_active_init;
extern _Atomic bool prof_gdump_enabled;    /* prof.gdump */
extern _Atomic size_t prof_lg_sample;      /* prof.lg_sample */
extern _Atomic uint64_t prof_epoch;        /* prof.reset count */
/* The live heap the samples estimate: the sum of the unbiased bytes of
 * the samples counted since the last prof.reset (what they added to
 * their tctx's curbytes_unbiased).  Changed under the sample's gctx
 * shard lock; prof_reset zeroes it holding every shard.  Every sample and
 * every sampled free of every thread writes it, so it has a cache line
 * of its own: in the line of the switches above, which each sample
 * reads, its writes made the other threads' next reads misses. */
typedef struct {
	_Alignas(CACHELINE) _Atomic uint64_t bytes;
} prof_live_t;
extern prof_live_t prof_live;
/* Bit i: gctx shard i is not empty (prof.c; PROF_GCTX_SHARDS is 64). */
extern _Atomic uint64_t prof_gctx_shards_used;
/* Shards in the backtrace table and in the sample table (prof.c), a power
 * of two; 0 with the profiler off. */
extern unsigned prof_nshards;
/* Bumped when threads must redraw their sampling wait: prof.active or
 * prof.thread_active_init written, prof.reset.  Write the switch first,
 * then bump; a thread loads the generation before the switches. */
extern _Atomic uint64_t prof_wait_gen;

/* Boot after conf: true on error. */
bool prof_boot(void);
/* The wait's tables (prof.c, zig_fill): the ziggurat's strips, and
 * -1 / ln(1 - 2^-lg) by lg_prof_sample. */
#define PROF_ZIG_N 256
typedef struct {
	/* Strip i's pair in 16 bytes, so that a draw (which reads both, at
	 * a random strip, once a sample) fetches one line, not two. */
	struct {
		uint64_t k;              /* j below: in the inner rectangle */
		double w;                /* x = j * w */
	} kw[PROF_ZIG_N];
	double f[PROF_ZIG_N];            /* exp(-x) at the strip's edge */
} prof_zig_t;
/* NULL until the profiler first turns active (prof.c). */
extern const prof_zig_t *prof_zig;
/* Make prof_zig if it is not made yet; before prof.active is stored true.
 * true on error (out of memory). */
bool prof_zig_ensure(void);
extern double prof_wait_scale[64];
/* The draws outside their strip's rectangle (~2.5%). */
double prof_zig_slow(uint64_t *state, unsigned i, uint64_t j);

/* An exponential variate of mean 1 from jemalloc's LCG state: the top 8
 * bits of the step pick a strip, the 53 below them a point in it (the
 * LCG's weak low bits are the point's last ones).  Inline: tsd.c's
 * redraw, which runs at every sample, saves the calls. */
MP_INLINE double prof_exp_draw_inline(uint64_t *state) {
	uint64_t v = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	*state = v;
	unsigned i = (unsigned)(v >> 56);
	uint64_t j = (v >> 3) & (((uint64_t)1 << 53) - 1);
	const prof_zig_t *z = prof_zig;
	if (likely(j < z->kw[i].k))
		return (double)j * z->kw[i].w;
	return prof_zig_slow(state, i, j);
}
/* The same, out of line (test/unit/prof_zig). */
double prof_exp_draw(uint64_t *state);

/* Next sampling threshold for a thread (bytes from `allocated`): the
 * geometric floor(E / -ln(1 - 1/R)) + 1 of an exponential E, mean
 * R = 2^lg_prof_sample.  floor is the conversion's truncation (both
 * factors >= 0; past 2^53 every double is whole), without libm.  Below
 * 2^63 the signed conversion is one instruction, where the unsigned one
 * takes two compares more. */
MP_INLINE uint64_t prof_sample_wait_inline(tsd_t *tsd) {
	size_t lg = atomic_load_explicit(&prof_lg_sample,
	    memory_order_relaxed);
	if (lg == 0)
		return 1;
	double x = prof_exp_draw_inline(&tsd->prng) * prof_wait_scale[lg];
	if (likely(x < 9223372036854775808.0))
		return (uint64_t)(int64_t)x + 1;
	return x + 1.0 >= 1.8e19 ? UINT64_MAX : (uint64_t)x + 1;
}
uint64_t prof_sample_wait(tsd_t *tsd);

/* Whether the calling thread's allocations are sampled now: prof.active
 * and its thread.prof.active (prof.thread_active_init before it has a
 * tdata).  A thread that is not sampling draws no waits at all. */
MP_INLINE bool prof_thread_sampling_inline(tsd_t *tsd) {
	if (!atomic_load(&prof_active))
		return false;
	prof_tdata_t *td = tsd->prof_tdata;
	return td != NULL ? atomic_load_explicit(&td->active,
	    memory_order_relaxed) : atomic_load(&prof_thread_active_init);
}
bool prof_thread_sampling(tsd_t *tsd);
/* Ask every thread to redraw its wait (see prof_wait_gen). */
void prof_wait_gen_bump(void);
/* Record object p (usize bytes, req of them asked for: 0 if unknown) as a
 * sample allocated by the calling thread through `entry` (the exported
 * function the program called, e.g. malloc), whose frame is `fp`.  Never
 * fails the allocation.  true: recorded (false: the profiler or the
 * thread not sampling, or no memory for the record). */
bool prof_sample_alloc(tsd_t *tsd, void *p, size_t usize, size_t req,
    void *entry, uintptr_t fp);
/* Undo a sample when the object is freed (any thread). */
void prof_sample_free(void *p, extent_t *e);
/* The same from a free whose exported function's frame is fp (the
 * frame holding the program's return address, where the free's walk for
 * the recent records starts; 0: from here, the allocator's own frames
 * left out as they are found). */
void prof_sample_free_at(void *p, extent_t *e, uintptr_t fp);
/* A sample's time now, on prof_time_resolution's clock (monotonic ns). */
uint64_t prof_time_ns(void);
/* What turns a time of that clock into CLOCK_REALTIME ns now (added). */
uint64_t prof_time_wall_offset(void);
/* What the record of live sampled object p carries: true if p is not a
 * live sample.  labels[] gets the set's canonical string ("" for none).
 * For tests and tools; takes the sample shard's lock. */
typedef struct prof_sample_info_s {
	uint64_t time_ns;
	uint64_t uid;
	size_t usize;
	char labels[PROF_LABEL_STR_MAX + 1];
} prof_sample_info_t;
bool prof_sample_info(void *p, prof_sample_info_t *info);
/* Sample records taken from base_malloc so far (not from a thread's spare
 * list or the depot of full ones: prof.c), for the tests. */
uint64_t prof_sample_records(void);
/* thread.prof.label: apply `spec` ("key=value", "key=" to remove a key,
 * several joined by ',') to the calling thread's label set (spec NULL:
 * clear it).  0, or EINVAL with why[] naming what is wrong in spec, or
 * EAGAIN (out of memory, or PROF_LABEL_SETS_MAX sets made) with why[];
 * the set is unchanged on error. */
int prof_labels_apply(tsd_t *tsd, const char *spec, char *why,
    size_t whysize);
/* The calling thread's set as "k1=v1,k2=v2" ("" when none): interned
 * storage, valid for the process's life. */
const char *prof_labels_get(tsd_t *tsd);
/* How many distinct sets were made (for the tests). */
unsigned prof_labels_count(void);
/* Thread exit: detach the thread's tdata. */
void prof_thread_exit(tsd_t *tsd);
/* The calling thread's tdata, created if needed; NULL on OOM. */
prof_tdata_t *prof_tdata_get(tsd_t *tsd);
/* A backtrace's hash (a gctx's; the recent records' sides mix it with
 * the thread's).  Inline: prof_recent.c, which prof.c calls, uses it
 * too, and the files depend on each other one way (test/unit/layers). */
MP_INLINE uint64_t prof_bt_hash(void *const *frames, unsigned n) {
	uint64_t h = 0x94122f33u ^ n;
	for (unsigned i = 0; i < n; i++) {
		h ^= (uint64_t)(uintptr_t)frames[i];
		h *= 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	return h;
}
/* prof.reset: drop every counter of freed objects and set lg_sample. */
void prof_reset(size_t lg_sample);
/*
 * Delta windows (the endpoint's ?seconds=N).  Samples always add to
 * their tctx's accumulated counters (four adds on the sampling path);
 * without prof_accum those are printed only by deltas.  While a window
 * holds (prof_accum_hold), a tctx whose last sample is freed is kept
 * with its counts, so that the window's second snapshot still sees what
 * was allocated and freed inside it; the last release frees the tctxs
 * kept that way (prof_accum off).  hold before the first snapshot.
 */
void prof_accum_hold(void);
void prof_accum_release(void);
/* Samples dropped because profiler memory ran out (prof.dropped_samples). */
extern _Atomic uint64_t prof_dropped;

/* Unbiasing: what one sampled object of usize bytes stands for. */
void prof_unbias(size_t usize, uint64_t *objs_shifted, uint64_t *bytes);
/* The same from the per-class table the sampler reads (filled at boot
 * and by prof_reset; computed for a size it does not hold).  For the
 * tests: it must always equal prof_unbias. */
void prof_unbias_cached(size_t usize, uint64_t *objs_shifted,
    uint64_t *bytes);

/* Visit every gctx shard under its lock (dumps copy what they need). */
typedef void prof_gctx_visit_t(prof_gctx_t *gctx, void *arg);
void prof_gctx_foreach_locked_shard(unsigned shard,
    prof_gctx_visit_t *visit, void *arg);
void prof_shard_lock(unsigned shard);
void prof_shard_unlock(unsigned shard);
/* Every gctx shard at once (raw locks: one rank), as prof.reset takes
 * them: no sample or sampled free runs meanwhile. */
void prof_shards_lock_all(void);
void prof_shards_unlock_all(void);
/* Where the gctx shards (samples false) or the sample table's shards lie
 * (test/unit/prof_shards_idle: nowhere with the profiler off). */
void prof_shards_extent(bool samples, const void **addr, size_t *size);
void prof_tdatas_lock(void);
void prof_tdatas_unlock(void);
extern prof_tdata_t *prof_tdatas_head;     /* by uid (tdatas lock) */

/* The shard and tdata locks around fork (tsd.c's fork list calls the
 * other prof_*_prefork first: their locks rank before these). */
void prof_prefork(void);
void prof_postfork_parent(void);
void prof_postfork_child(void);

/* -------------------------------------------------------- prof_sys.c */
/* On functions that read stack words a walk computed (prof_sys.c,
 * prof_cfi.c): a garbage frame may point at bytes a sanitizer poisoned
 * (a redzone between a frame's locals); the walk checks its reads
 * against the thread's stack bounds instead. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
#define PROF_STACK_READER __attribute__((no_sanitize("address", \
    "hwaddress")))
#endif
#endif
#ifndef PROF_STACK_READER
#define PROF_STACK_READER
#endif

/* opt.prof_unwind: how stacks are walked (indexes of prof_unwind_names):
 * frame pointers, call-frame information (.eh_frame), or frame pointers
 * while they hold and .eh_frame from the first frame where they stop. */
typedef enum {
	PROF_UNWIND_FP,
	PROF_UNWIND_CFI,
	PROF_UNWIND_AUTO,
	PROF_UNWIND_COUNT
} prof_unwind_t;
extern const char *const prof_unwind_names[PROF_UNWIND_COUNT];
extern unsigned opt_prof_unwind;
/* Fill vec with up to max return addresses, starting with the one saved
 * in frame `fp` (the frame of the exported entry point), up to the first
 * one outside executable text; never faults, never locks. */
unsigned prof_backtrace(void **vec, unsigned max, uintptr_t fp);
/* The calling thread's walks are remembered in its tdata's bt_memo: a
 * walk from the same frame whose every stack word read is unchanged
 * gives the same frames, and then costs a compare per word instead of a
 * row lookup and a step per frame (a loop allocating at one site samples
 * the same stack again and again).  new: NULL on no memory (walks are
 * not remembered then); free: at the thread's exit. */
typedef struct prof_bt_memo_s prof_bt_memo_t;
prof_bt_memo_t *prof_bt_memo_new(void);
void prof_bt_memo_free(prof_bt_memo_t *m);
/* How many walks m answered (for the tests). */
uint64_t prof_bt_memo_hits(const prof_bt_memo_t *m);
/*
 * What the sampler (prof.c) found for a remembered walk, kept beside it
 * so that the walk's next sample skips the hash of its frames and the
 * search of its shard's chains: entry is the frame the sampler put
 * before the walk, hash the hash of both, gctx (NULL: none) the gctx it
 * found, valid while its shard's destroy generation is still gen.
 * prof_backtrace_hinted is prof_backtrace that also copies the hint of
 * the memo slot that answered (or a cleared one) into *hint and names
 * the slot in *ref (ref->slot UINT32_MAX: no slot); prof_bt_hint_store
 * stores a hint for the slot, unless it was recorded anew since or a
 * walk is using the memo (a signal handler's).
 */
typedef struct prof_bt_hint_s {
	void *entry;
	uint64_t hash;
	prof_gctx_t *gctx;
	uint64_t gen;
} prof_bt_hint_t;
typedef struct prof_bt_ref_s {
	uint32_t slot, version;
} prof_bt_ref_t;
unsigned prof_backtrace_hinted(void **vec, unsigned max, uintptr_t fp,
    prof_bt_hint_t *hint, prof_bt_ref_t *ref);
void prof_bt_hint_store(prof_bt_memo_t *m, prof_bt_ref_t ref,
    const prof_bt_hint_t *hint);
/* Keep the objects (file, segments) that the return addresses vec[0..n)
 * of a new stack point into, so that dumps still name them once the
 * loader unloads them (prof_sys_unloaded).  Once per stack, not per
 * sample: a stack's frames, once noted, stay noted.  false if one could
 * not be added now (another thread was adding one): note it again at
 * the stack's next sample.  No lock, no allocation. */
bool prof_sys_note(void *const *vec, unsigned n);
/* How many of vec[0..n) lead with return addresses into this library's
 * own text (all but the last, at most: a walk from inside the library
 * whose every frame is its own keeps one). */
unsigned prof_backtrace_self_frames(void *const *vec, unsigned n);
/* fork: no reload of the text tables across it. */
void prof_sys_prefork(void);
void prof_sys_postfork_parent(void);
void prof_sys_postfork_child(void);
/* Frame-pointer walk bounds for the calling thread (lazily computed). */
void prof_sys_thread_init(tsd_t *tsd);
/* An executable segment of an object the loader unloaded (dlclose)
 * after samples were taken in it, for the dump writers. */
typedef struct prof_sys_unloaded_s {
	uintptr_t lo, hi, offset;        /* as a /proc/self/maps line */
	const char *name;                /* the file, kept for good */
} prof_sys_unloaded_t;
#define PROF_SYS_UNLOADED_MAX 64
/* Up to max segments of unloaded objects that frames of s point into;
 * their number.  No lock, no allocation. */
struct dump_snap_s;
size_t prof_sys_unloaded(const struct dump_snap_s *s,
    prof_sys_unloaded_t *out, size_t max);

/* -------------------------------------------------------- prof_cfi.c */
/* One object's call-frame tables where they are mapped: .eh_frame_hdr
 * (hdr NULL: none) and .eh_frame, each up to the end of what may be
 * read (the end of its mapping, for .eh_frame). */
typedef struct prof_cfi_obj_s {
	const uint8_t *hdr, *hdr_end;
	const uint8_t *eh, *eh_end;
} prof_cfi_obj_t;

typedef enum {
	PROF_CFI_OK,
	PROF_CFI_NOT_FOUND,      /* no FDE covers the pc */
	PROF_CFI_BAD,            /* malformed, out of bounds, unknown */
	PROF_CFI_UNSUPPORTED,    /* a rule the walker does not evaluate:
				  * expressions, another CFA register */
	PROF_CFI_STACK,          /* a stack read out of bounds or
				  * misaligned, or a frame not above */
	PROF_CFI_END             /* return address undefined or 0 */
} prof_cfi_err_t;

/* The CFA of a row (prof_cfi_rule_t.cfa). */
typedef enum {
	PROF_CFI_CFA_RSP,        /* rsp + cfa_off */
	PROF_CFI_CFA_RBP,        /* rbp + cfa_off */
	PROF_CFI_CFA_PLT         /* rsp + cfa_off, + 8 if (rip & 15) >=
				  * plt_k: the linkers' PLT expression */
} prof_cfi_cfa_t;

/* How the caller's value of a register is found. */
typedef enum {
	PROF_CFI_SAME,           /* the register was not changed */
	PROF_CFI_UNDEF,          /* lost (or not computable here) */
	PROF_CFI_AT_CFA,         /* saved at CFA + off */
	PROF_CFI_VAL_CFA         /* is CFA + off */
} prof_cfi_how_t;

/* One row of an unwind table: the rule at pcs [lo, hi). */
typedef struct prof_cfi_rule_s {
	uintptr_t lo, hi;
	int64_t cfa_off, ra_off, rbp_off;
	uint8_t cfa;             /* prof_cfi_cfa_t */
	uint8_t ra_how, rbp_how; /* prof_cfi_how_t */
	uint8_t plt_k;
	bool signal;             /* the CIE's 'S': an interrupted frame */
} prof_cfi_rule_t;

/* The registers a walk tracks (x86-64). */
typedef struct prof_cfi_regs_s {
	uintptr_t rip, rsp, rbp;
} prof_cfi_regs_t;

/* obj for the object whose PT_GNU_EH_FRAME is hdr[0..hdr_len) and
 * whose .eh_frame lies in the mapped segment [seg_lo, seg_hi) (the one
 * holding it).  true on error (no version-1 header, a pointer outside). */
bool prof_cfi_obj_init(prof_cfi_obj_t *obj, const void *hdr, size_t hdr_len,
    uintptr_t seg_lo, uintptr_t seg_hi);
/* The row of obj's tables at pc (for a return address, pass ret - 1). */
prof_cfi_err_t prof_cfi_find(const prof_cfi_obj_t *obj, uintptr_t pc,
    prof_cfi_rule_t *rule);
/* One step up the stack: regs become the caller's, with every stack
 * read inside [lo, hi) and aligned.  regs unchanged unless PROF_CFI_OK. */
prof_cfi_err_t prof_cfi_apply(const prof_cfi_rule_t *rule,
    prof_cfi_regs_t *regs, uintptr_t lo, uintptr_t hi);
/* prof_cfi_find at regs->rip (first: the pc of the innermost frame;
 * else a return address, looked up at rip - 1), then prof_cfi_apply. */
prof_cfi_err_t prof_cfi_step(const prof_cfi_obj_t *obj,
    prof_cfi_regs_t *regs, bool first, uintptr_t lo, uintptr_t hi);
/* A walk's state across its lookups of rows (prof_cfi_row): whether it
 * has looked at the loader's unloads yet, and a pc and the .eh_frame_hdr
 * of each object (up to two) whose tables it read rather than found
 * cached, whose pages prof_cfi_walk_end may drop.  {false} at its
 * start. */
typedef struct prof_cfi_walk_s {
	bool unloads_checked;
	uintptr_t read_pc[2];
	const void *read_hdr[2];
} prof_cfi_walk_t;
/* The end of walk w: the first few times (PROF_CFI_DROPS_PER_OBJ) a walk
 * read an object's tables, the pages of its .eh_frame_hdr and .eh_frame
 * that the read mapped are dropped from the process (os_file_pages_drop)
 * when that is safe (prof_cfi_drop_range): the kernel maps a file's pages
 * 64 KiB at a time around a fault, and a small process would otherwise
 * keep 64 KiB or more of libc's tables resident for a few rows that the
 * row cache keeps.  Same conditions as prof_cfi_unwind. */
#define PROF_CFI_DROPS_PER_OBJ 4
void prof_cfi_walk_end(prof_cfi_walk_t *w);
/* The pages [*lo, *hi) to drop after a read of the tables at hdr (the
 * object's .eh_frame_hdr) of the object whose phnum program headers
 * (ElfW(Phdr)) are at phdrs, loaded at bias: the whole pages from the
 * one after hdr's to the end of the segment holding hdr (.eh_frame and
 * what follows it there), if that segment is a read-only mapping of the
 * file (no PF_W, all of it from the file), no writable segment or
 * PT_GNU_RELRO shares a page with them, and the object has no text
 * relocations (DT_TEXTREL, DF_TEXTREL: the loader would have written
 * those pages, and dropping a written private page loses the write).
 * true if none may be dropped. */
bool prof_cfi_drop_range(const void *phdrs, unsigned phnum, uintptr_t bias,
    uintptr_t hdr, uintptr_t *lo, uintptr_t *hi);
/* Drops made so far, and of the object holding pc (tests). */
uint64_t prof_cfi_drops(void);
unsigned prof_cfi_drops_of(uintptr_t pc);
/* The backtrace's step: regs->rip is a return address, whose object is
 * found without locks and whose row is cached by pc.  Never allocates,
 * never locks; may take the loader's lock (dl_iterate_phdr: the unload
 * count, and without _dl_find_object the object table's reload), so call
 * it with no allocator lock held. */
prof_cfi_err_t prof_cfi_unwind(prof_cfi_regs_t *regs, uintptr_t lo,
    uintptr_t hi);
/* Whether the function of return address ret keeps a frame pointer
 * there (its row: CFA = rbp + 16, rbp and the return address saved
 * below it), so that the frame-pointer walk may go on through it; also
 * true when it has no usable row (a frame-pointer walk is all there
 * is).  Same conditions as prof_cfi_unwind. */
bool prof_cfi_keeps_fp(uintptr_t ret);
/* The row at return address ret, as prof_cfi_unwind finds it (cached),
 * within walk w: PROF_CFI_OK says ret is code with call-frame
 * information.  The walk uses it to apply the row itself
 * (prof_cfi_apply) and to skip the text table's lookup for an address
 * that has a row.  The first lookup in w of a row of an object that may
 * be unloaded reads the loader's unload count (prof_cfi_unloads_check):
 * rows cached before an object was unloaded (dlclose) are not used after
 * it.  Same conditions as prof_cfi_unwind. */
prof_cfi_err_t prof_cfi_row(prof_cfi_walk_t *w, uintptr_t ret,
    prof_cfi_rule_t *rule);
/* Whether rule is the frame-pointer row (prof_cfi_keeps_fp). */
static inline bool prof_cfi_rule_keeps_fp(const prof_cfi_rule_t *r) {
	return r->cfa == PROF_CFI_CFA_RBP && r->cfa_off == 16 &&
	    r->ra_how == PROF_CFI_AT_CFA && r->ra_off == -8 &&
	    r->rbp_how == PROF_CFI_AT_CFA && r->rbp_off == -16;
}
/* Reads the loader's count of unloads (dl_iterate_phdr, stopped at its
 * first object) and moves the cache's unload epoch if it changed. */
void prof_cfi_unloads_check(void);
/* Whether a lies in an executable segment of a loaded object, asked of
 * the loader without its lock (_dl_find_object; else the object table,
 * reloaded on a miss at most every 100 ms).  For prof_sys.c's text check,
 * whose own table may not know a library dlopened since its last load. */
bool prof_cfi_in_text(uintptr_t a);
/* The cache's unload epoch, whether pc lies in an object whose rows are
 * cached without it (never unloaded), and the sets of the cache's
 * current table (for the unit tests). */
uint64_t prof_cfi_epoch(void);
bool prof_cfi_fixed(uintptr_t pc);
size_t prof_cfi_cache_sets(void);
/* fork: no thread inside the loader (prof_cfi_unloads_check, the object
 * table's reload) across it. */
void prof_cfi_prefork(void);
void prof_cfi_postfork_parent(void);
void prof_cfi_postfork_child(void);

/* ------------------------------------------------------- prof_snap.c */
/*
 * A dump's snapshot, copied out of the profiler's tables by
 * prof_snap_collect and read by the writers of both formats (heap_v2 in
 * prof_dump.c, pprof in prof_pprof.c), which never call each other.
 * Records are only read while prof_dump_mtx is held.
 */
/* A backtrace in the snapshot buffer: this header, nframes frames
 * (padded to 8 bytes), then ntctx dump_tctx_t. */
typedef struct dump_gctx_s {
	prof_cnt_t cnt;          /* sum over all its tctxs */
	uint32_t nframes;
	uint32_t ntctx;          /* tctxs copied (those with counts) */
} dump_gctx_t;

typedef struct dump_tctx_s {
	uint64_t uid;
	const prof_labels_t *labels;     /* interned (never freed); NULL */
	prof_cnt_t cnt;
} dump_tctx_t;

typedef struct dump_thread_s {
	uint64_t uid;
	prof_cnt_t cnt;          /* sum over its tctxs */
	char name[PROF_THREAD_NAME_MAX];
} dump_thread_t;

/* What one dump prints, copied out of the profiler's tables. */
typedef struct dump_snap_s {
	char *gbuf;              /* dump_gctx_t records, base_malloc'd */
	size_t gcap, glen;
	size_t ngctx;            /* records in gbuf */
	size_t ncontexts;        /* backtraces with curobjs != 0 */
	prof_cnt_t total;        /* the t* aggregate */
	dump_thread_t *threads;  /* by uid, base_malloc'd */
	size_t nthreads, tcap;
	size_t lg_sample;        /* in effect when the dump started */
	/* Whether the accumulated pair (alloc_*) is printed: prof_accum,
	 * or a delta (prof_snap_delta), which counts the window's
	 * allocations without it. */
	bool accum;
	uint64_t epoch;          /* prof_epoch when taken */
	/* pprof's time_nanos and duration_nanos (wall clock): 0, 0 for a
	 * dump of now (the writer reads the clock); a delta's are its
	 * second snapshot's time and the window's length, as Go sets
	 * them. */
	uint64_t time_ns, duration_ns;
	/* A lifetime profile (prof_lifetime_collect): each record's
	 * dump_tctx_t are its buckets, not its threads. */
	bool lifetimes;
	/* A profile of another quantity (prof_frag.c's fragmentation
	 * profile, pprof only): its two sample types (NULL:
	 * prof_snap_sample_types), and live counters that are final values
	 * (objects times 8, bytes) written as they are, not unbiased. */
	const struct prof_snap_sample_type_s *types;
	bool raw;
} dump_snap_t;


static inline size_t dump_frames_size(unsigned nframes) {
	return ALIGNMENT_CEILING(nframes * sizeof(void *), (size_t)8);
}

/* The formats of dumps: opt.prof_format / prof.format (indexes of
 * prof_format_names). */
typedef enum {
	PROF_FORMAT_CURRENT = -1,        /* prof_dump_to_fd: prof.format's */
	PROF_FORMAT_HEAP_V2,
	PROF_FORMAT_PPROF,
	PROF_FORMAT_COUNT
} prof_format_t;

/* Copy the profiler's tables into s (prof_dump_mtx held; takes the gctx
 * shard locks one at a time, then prof_tdatas_lock).  true on error (out
 * of memory) with *whyp saying so and s released. */
bool prof_snap_collect(dump_snap_t *s, const char **whyp);
/* The same, starting from spare's buffers (a snapshot no longer needed:
 * taken over, and left empty), so that repeated copies (the peak's) map
 * nothing new. */
bool prof_snap_collect_reusing(dump_snap_t *s, dump_snap_t *spare,
    const char **whyp);
/* The same into spare's buffers only (no allocation; prof_oom_dump):
 * records or threads that do not fit are left out and *truncated set.
 * Never fails (false). */
bool prof_snap_collect_fixed(dump_snap_t *s, dump_snap_t *spare,
    bool *truncated);
void prof_snap_release(dump_snap_t *s);
/* The delta profile of a window (the endpoint's ?seconds=N, Go's
 * semantics): per (stack, thread), s1's counters minus s0's, one record
 * per pair (ntctx 1), pairs whose difference is zero left out.  The live
 * pair may be negative (a heap that shrank: two's complement in the
 * uint64 counters, which the pprof writer prints as negative values); the
 * accumulated pair is the window's allocations, from the counts kept
 * while a window is open (prof_accum_hold), prof_accum or not.  s0 and
 * s1 were collected with accum (prof_snap_collect_accum).  true on error
 * (out of memory) with *whyp set and d empty. */
bool prof_snap_delta(dump_snap_t *d, const dump_snap_t *s0,
    const dump_snap_t *s1, const char **whyp);
/* prof_snap_collect that also copies the records that count only freed
 * objects (accumulated counts), as a delta's two snapshots need. */
bool prof_snap_collect_accum(dump_snap_t *s, const char **whyp);
/* The backtraces a profile of now would print: with live objects, or
 * (alloc) with any accumulated count (the endpoint's index).  Takes the
 * gctx shard locks one at a time; no other lock needed. */
size_t prof_snap_count(bool alloc);
/* The snapshot's thread of this uid, or NULL. */
const dump_thread_t *prof_snap_thread_find(const dump_snap_t *s,
    uint64_t uid);
/* What jemalloc prints for a pair of unbiased sums at rate R: both
 * formats start from these numbers, so that their dumps of one moment
 * agree to the byte. */
/* What dumps print for c's cur (or accum) pair: prof_unbias. */
void prof_snap_printed(const prof_cnt_t *c, bool accum, double R,
    uint64_t *n_out, uint64_t *s_out);
void prof_snap_unbias(uint64_t shifted, uint64_t bytes, double R,
    uint64_t *n_out, uint64_t *s_out);
/* v rounded to the nearest integer, clamped to [0, UINT64_MAX]. */
uint64_t prof_snap_round(double v);
/* The sample types of a profile: (type, unit) of the live counts, then
 * of the accumulated ones (prof_accum only): prof_snap_nsample_types()
 * of them are in use. */
typedef struct prof_snap_sample_type_s {
	const char *type;
	const char *unit;
} prof_snap_sample_type_t;
extern const prof_snap_sample_type_t prof_snap_sample_types[4];
unsigned prof_snap_nsample_types(void);
/* Whether name is a sample type in use. */
bool prof_snap_sample_type_ok(const char *name);

/* ---------------------------------------------------- prof_heap_v2.c */
/* s to fd as heap_v2 (prof_dump_mtx held): 0, or the errno of the
 * failure (ENOMEM, with *whyp naming what ran out). */
int prof_heap_v2_write(const dump_snap_t *s, int fd, const char **whyp);
/* The same through the caller's buffer (no allocation: prof_oom_dump). */
int prof_heap_v2_write_buf(const dump_snap_t *s, int fd, char *buf,
    size_t size);

/* ----------------------------------------------------- prof_recent.c */
/* jemalloc's record of the last sampled allocations (see the file). */
extern ssize_t opt_prof_recent_alloc_max;
/* experimental.prof_recent.alloc_max (0: no records are taken). */
extern _Atomic ssize_t prof_recent_max;
void prof_recent_boot(void);
/* prof.c calls these and hands them what they record (thread uid and
 * name, zero-padded as prof_tdata_t's), so that this file uses nothing of
 * prof.c (prof_bt_hash is inline).  A new sample s of usize bytes (its record
 * linked to it; the dump prints usize as the size too, as the sampler
 * knows no other), frames_hash prof_bt_hash's of its frames; from
 * prof_sample_alloc with no profiler lock held. */
void prof_recent_alloc(prof_sample_t *s, size_t usize, uint64_t uid,
    const char name[PROF_THREAD_NAME_MAX], void *const *frames,
    unsigned nframes, uint64_t frames_hash);
/* Whether s still has a record (a peek: only its free and a trim change
 * it, and a trim leaves nothing to fill in). */
MP_INLINE bool prof_recent_linked(prof_sample_t *s) {
	return atomic_load_explicit(&s->recent, memory_order_relaxed) != NULL;
}
/* s's object is being freed (s unlinked from the tables, not yet
 * freed) by the thread uid/name (known false, name NULL: a thread without
 * a profiling identity, exiting): fill in its record's free side, with
 * the stack walked from frame fp (0: from here; prof_sample_free_at) into
 * frames (opt_prof_bt_max entries: the thread's prof_tdata_t.frames), at
 * time now (prof_time_ns). */
void prof_recent_dalloc(prof_sample_t *s, bool known, uint64_t uid,
    const char name[PROF_THREAD_NAME_MAX], uintptr_t fp, void **frames,
    uint64_t now);
/* experimental.prof_recent.alloc_max: the limit (-1: none); set returns
 * the old one and drops the oldest records past the new one. */
ssize_t prof_recent_max_get(void);
ssize_t prof_recent_max_set(ssize_t max);
/* The metadata bytes the kept records and their shared stacks take now,
 * and how many distinct stacks they hold (for the tests). */
size_t prof_recent_bytes(size_t *nstacks);
/* experimental.prof_recent.alloc_dump: jemalloc's JSON through write_cb,
 * its times the records' (prof_time_ns) plus wall_offset
 * (prof_time_wall_offset); true if the buffer could not be had. */
bool prof_recent_dump(void (*write_cb)(void *, const char *),
    void *cbopaque, uint64_t sample_interval, uint64_t wall_offset);
/* recent_dump_mtx around fork (taken in prof_dump_prefork, before
 * prof_dump_mtx), recent_mtx (in prof_prefork, after the sample shards). */
void prof_recent_dump_prefork(void);
void prof_recent_dump_postfork_parent(void);
void prof_recent_dump_postfork_child(void);
void prof_recent_prefork(void);
void prof_recent_postfork_parent(void);
void prof_recent_postfork_child(void);

/* --------------------------------------------------- prof_lifetime.c */
/*
 * The lifetime profile: a sampled object's lifetime (free time minus
 * allocation time, on prof_time_resolution's clock) counts in its
 * stack's bucket.  PROF_LIFE_LIVE is the objects still live at the dump.
 */
typedef enum {
	PROF_LIFE_LT1MS,
	PROF_LIFE_LT10MS,
	PROF_LIFE_LT100MS,
	PROF_LIFE_LT1S,
	PROF_LIFE_GE1S,
	PROF_LIFE_LIVE,
	PROF_LIFE_NBUCKETS
} prof_life_bucket_t;
#define PROF_LIFE_FREED PROF_LIFE_LIVE   /* the freed buckets */
/* A live record's uid in the collection: PROF_LIFE_LIVE plus its age
 * bucket (a freed bucket's index: the objects' age at the dump). */
#define PROF_LIFE_NUIDS (PROF_LIFE_LIVE + PROF_LIFE_FREED)
/* The pprof label `lifetime`'s values, by bucket. */
extern const char *const prof_lifetime_bucket_names[PROF_LIFE_NBUCKETS];
/* One gctx shard's part of the lifetime table (prof_lifetime.c's, kept
 * in prof.c's shard and guarded by its lock): the records of its stacks,
 * in chains, and its live large samples, a doubly linked list. */
typedef struct prof_life_part_s {
	struct life_rec_s **recs;        /* nrecs_b chains */
	size_t nrecs_b, nrecs;
	prof_sample_t *large;            /* through next and prev */
	size_t nlarge;
} prof_life_part_t;
/* prof.c: shard i's part (for the collection). */
prof_life_part_t *prof_life_part(unsigned shard);
/* One stack's freed samples (prof_lifetime.c's record; frames follow).
 * The unbiased pairs are what the samples added to their tctx (objects
 * shifted by 3, as prof_cnt_t).  Here so that a free counts itself in
 * its stack's record without a call (prof_lifetime_free, below). */
struct life_rec_s {
	struct life_rec_s *next;         /* hash chain */
	uint64_t hash;                   /* the gctx's */
	uint64_t epoch;                  /* prof_epoch its counts are of */
	uint64_t nfreed;                 /* samples freed */
	uint64_t sum_ns, min_ns, max_ns;
	uint64_t objs_shifted[PROF_LIFE_FREED];
	uint64_t bytes[PROF_LIFE_FREED];
	uint32_t nframes;
	void *frames[];
};

/* Which freed bucket a lifetime (or a live sample's age) falls in. */
static inline unsigned prof_life_bucket(uint64_t ns) {
	if (ns < 1000000)
		return PROF_LIFE_LT1MS;
	if (ns < 10000000)
		return PROF_LIFE_LT10MS;
	if (ns < 100000000)
		return PROF_LIFE_LT100MS;
	if (ns < 1000000000)
		return PROF_LIFE_LT1S;
	return PROF_LIFE_GE1S;
}

/* A sample freed ns after its allocation, counted in r. */
static inline void prof_lifetime_count(struct life_rec_s *r, uint64_t ns,
    uint64_t objs_shifted, uint64_t bytes) {
	unsigned b = prof_life_bucket(ns);
	r->objs_shifted[b] += objs_shifted;
	r->bytes[b] += bytes;
	r->nfreed++;
	r->sum_ns += ns;
	if (ns < r->min_ns)
		r->min_ns = ns;
	if (ns > r->max_ns)
		r->max_ns = ns;
}

/* prof_lifetime_free's other case: g has no record yet (found or made,
 * and set in g->life) or one of an earlier epoch (started over). */
void prof_lifetime_free_slow(prof_life_part_t *pt, prof_gctx_t *g,
    uint64_t ns, uint64_t objs_shifted, uint64_t bytes, uint64_t epoch);

/* prof_sample_free's call, under g's shard lock (pt its part), for a
 * sample of epoch `epoch` (the current one) that added (objs_shifted,
 * bytes) unbiased; sets g->life.  Inline: a stack's record is found by
 * its gctx after its first free, and a call with seven arguments was
 * about 30 of its 54 instructions. */
static inline void prof_lifetime_free(prof_life_part_t *pt, prof_gctx_t *g,
    uint64_t alloc_ns, uint64_t free_ns, uint64_t objs_shifted,
    uint64_t bytes, uint64_t epoch) {
	uint64_t ns = free_ns > alloc_ns ? free_ns - alloc_ns : 0;
	struct life_rec_s *r = g->life;
	if (r == NULL || r->epoch != epoch)
		prof_lifetime_free_slow(pt, g, ns, objs_shifted, bytes, epoch);
	else
		prof_lifetime_count(r, ns, objs_shifted, bytes);
}
/* prof_samples_foreach's visitor (declared again below, with it: C11
 * allows the same typedef twice). */
typedef void prof_sample_visit_t(const prof_sample_t *s, void *arg);
/* A large sample s (extent->prof, s->tctx set) was taken, or is being
 * freed (before its tctx may go): its entry among the live large samples,
 * which the collection visits as prof_samples_foreach visits the small
 * ones.  Under the shard lock of s's gctx.  A list linked both ways
 * rather than chains hashed by address: no chain search, no table to
 * grow, nothing to allocate (the hashed chains' add and delete were 38
 * and 21 instructions, a call each, at every large sample). */
static inline void prof_lifetime_large_add(prof_life_part_t *pt,
    prof_sample_t *s) {
	s->prev = NULL;
	s->next = pt->large;
	if (pt->large != NULL)
		pt->large->prev = s;
	pt->large = s;
	pt->nlarge++;
}

static inline void prof_lifetime_large_del(prof_life_part_t *pt,
    prof_sample_t *s) {
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		pt->large = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	pt->nlarge--;
}
/*
 * The lifetime profile of now into *out (prof_dump_mtx held), from the
 * live snapshot `live` (prof_snap_collect: its lg_sample and epoch), the
 * live samples of that epoch (the small ones through `foreach`,
 * prof_samples_foreach, passed by the caller so that this file calls
 * nothing of prof.c; the large ones of the shards' parts, `part`,
 * prof_life_part, nparts of them (prof_nshards), read with every gctx
 * shard held by lock_all,
 * prof_shards_lock_all), aged at now_ns
 * (prof_time_ns), and the freed counts: one record per stack, whose
 * dump_tctx_t are its non-empty buckets (uid: a freed
 * prof_life_bucket_t, or PROF_LIFE_LIVE + the age bucket of live ones,
 * below PROF_LIFE_NUIDS; cnt.curobjs_shifted_unbiased, curbytes_unbiased:
 * its unbiased pair) carrying the stack's lifetimes of freed samples in
 * ns (cnt.accumobjs: min, accumbytes: max, accumobjs_shifted_unbiased:
 * mean; all 0 when none was freed); out->lifetimes set.  Released with
 * prof_snap_release.  true on error (out of memory) with *whyp set.
 */
bool prof_lifetime_collect(dump_snap_t *out, const dump_snap_t *live,
    void (*foreach)(prof_sample_visit_t *, void *), void (*lock_all)(void),
    void (*unlock_all)(void), prof_life_part_t *(*part)(unsigned),
    unsigned nparts, uint64_t now_ns, const char **whyp);

/* ------------------------------------------------------- prof_dump.c */
extern const char *const prof_format_names[PROF_FORMAT_COUNT];
extern unsigned opt_prof_format;

/* The OS error text, without allocating. */
const char *prof_dump_strerror(int err, char *buf, size_t size);

/* prof.format: the format of every dump from now on (under
 * prof_dump_mtx, so a dump in progress keeps its format). */
prof_format_t prof_dump_format_get(void);
void prof_dump_format_set(prof_format_t format);
/* prof.dump_fd: write the current profile, in the current format, to an
 * open descriptor (no file is created).  true on error, after printing
 * the cause on stderr. */
bool prof_dump_fd(int fd);
/*
 * The same, for callers that report errors their own way (the planned
 * HTTP endpoint): the profile of this moment to fd in `format`
 * (PROF_FORMAT_CURRENT: prof.format's), and for pprof with `sample_type`
 * as its default sample type (NULL: inuse_space).  Prints nothing; true
 * on error with err[] naming the fd and the cause (closed, read-only,
 * EPIPE, ENOSPC, an unknown sample type, out of memory).  Safe from any
 * thread; serialized with every other dump.
 */
bool prof_dump_to_fd(int fd, prof_format_t format, const char *sample_type,
    char *err, size_t errsize);
/* Write a heap_v2 dump to `filename` (NULL: an automatic name of kind
 * 'm').  true on error, after printing the cause on stderr. */
bool prof_dump_file(const char *filename);
/* Interval (idump) and high-water (gdump) triggers, called outside locks
 * from allocation slow paths.  Both do nothing while the calling thread's
 * tsd->reentrancy is raised (inside the profiler or a dump); gdump then
 * leaves its high-water mark alone, so the next growth dumps. */
void prof_idump_maybe(size_t bytes);
void prof_gdump_maybe(size_t active_pages);
/* The highest count of active pages prof_gdump_maybe has seen: a count
 * not above it needs no call (malloc.c tests it first: every new slab or
 * large block hands one over). */
extern _Atomic size_t prof_gdump_high;
/* The final dump (and the final peak dump, prof_peak) and the leak
 * summary, from an atexit handler. */
void prof_final_dump(void);
/*
 * The peak-heap profile (prof_peak): a snapshot of the samples live when
 * prof_live.bytes was highest, taken again each time it passes the last
 * peak by prof_peak_growth.  prof_peak_next is the live bytes at which
 * the next snapshot is due (UINT64_MAX: never, prof_peak off).
 * prof_peak_maybe is the sampling hook's call (malloc.c's prof_event)
 * once a sample took prof_live.bytes past it (no lock held; it skips if
 * a dump is running: the next sample past the mark tries again).
 */
extern bool opt_prof_peak;
extern char opt_prof_peak_growth[16];
extern _Atomic uint64_t prof_peak_next;
bool prof_peak_growth_conf_check(const char *v, size_t vlen, char *why,
    size_t whysize);
void prof_peak_maybe(void);
/* prof_oom_dump: the current and the peak profile, once, at the first
 * allocation that fails because the OS refused a mapping; malloc.c's
 * call just before returning NULL (no allocator lock held). */
extern bool opt_prof_oom_dump;
void prof_oom_dump(void);
/* prof.peak.reset (and prof.reset): the peak is the heap of now. */
void prof_peak_reset(void);
/* prof.peak.bytes: the estimated live bytes at the peak kept (0: none). */
uint64_t prof_peak_bytes(void);
/* prof.peak.dump: the peak to `filename` (NULL: the automatic name
 * <prefix>.<pid>.<seq>.p<n>.heap) in the current format.  true on error,
 * after printing the cause on stderr. */
bool prof_peak_dump_file(const char *filename);
/* The peak to an open descriptor, as prof_dump_to_fd writes the heap of
 * now (the endpoint's /debug/pprof/peak). */
bool prof_peak_dump_to_fd(int fd, prof_format_t format,
    const char *sample_type, char *err, size_t errsize);
/* prof.lifetimes.dump: the lifetime profile (prof_lifetime.c) to
 * `filename` (NULL: the automatic name <prefix>.<pid>.<seq>.l<n>.pb.gz),
 * always pprof; true on error after printing the cause.  _to_fd: the
 * same to an open descriptor (/debug/pprof/lifetimes), sample_type
 * "alloc_objects" or "alloc_space" (NULL: alloc_objects), as
 * prof_dump_to_fd. */
bool prof_lifetimes_dump_file(const char *filename);
bool prof_lifetimes_dump_to_fd(int fd, const char *sample_type, char *err,
    size_t errsize);
/* A delta profile's two ends (the endpoint's ?seconds=N), under
 * prof_dump_mtx: take copies the tables into *s0 (prof_snap_collect_accum;
 * its wall-clock time in s0->time_ns) with a hold on the accumulated
 * counts (prof_accum_hold); delta_to_fd takes the second copy, writes
 * the difference as pprof (sample_type: its default, NULL inuse_space)
 * and releases both the hold and *s0.  drop: the window is abandoned
 * (hold and *s0 released).  true on error with err[] (take: nothing is
 * held then). */
bool prof_dump_delta_take(dump_snap_t *s0, char *err, size_t errsize);
bool prof_dump_delta_to_fd(int fd, dump_snap_t *s0, const char *sample_type,
    char *err, size_t errsize);
void prof_dump_delta_drop(dump_snap_t *s0);
/* A profile that the caller builds under prof_dump_mtx (prof_frag.c's
 * fragmentation profile), always written as pprof: to filename (NULL:
 * the automatic <prefix>.<pid>.<seq>.frag<n>.pb.gz), printing errors
 * as `what`, or to an open descriptor as prof_dump_to_fd (sample_type
 * NULL: the profile's second type).  true on error. */
typedef bool prof_dump_build_t(dump_snap_t *s, const char **whyp);
bool prof_dump_built_file(const char *what, const char *filename,
    prof_dump_build_t *build);
bool prof_dump_built_to_fd(int fd, prof_dump_build_t *build,
    const char *sample_type, char *err, size_t errsize);
/* prof.prefix: the prefix of automatic dump names from now on (initially
 * opt_prof_prefix); true if it is too long (>= sizeof(opt_prof_prefix)). */
bool prof_dump_prefix_set(const char *prefix);
/* prof_dump_mtx around fork: tsd.c's fork list calls prefork before
 * prof_sys_prefork and prof_prefork (it ranks before the shard locks), the
 * postfork ones after theirs. */
void prof_dump_mutex_register(void);   /* at prof_ctl_boot */
void prof_dump_prefork(void);
void prof_dump_postfork_parent(void);
void prof_dump_postfork_child(void);

/* ------------------------------------------------------ prof_pprof.c */
/* prof_symbolize: function names in pprof profiles. */
extern bool opt_prof_symbolize;
/* The pprof writer (prof_dump.c's dump_write): the snapshot to fd as a gzipped
 * profile.proto.  Called with prof_dump_mtx held (its buffers are kept
 * for the next dump).  sample_type is the default sample type (NULL:
 * inuse_space; checked with prof_snap_sample_type_ok by the caller).
 * true on error: *errp is the errno of a failed write, or 0 with *whyp
 * naming the cause (out of memory). */
bool prof_pprof_write(const dump_snap_t *s, int fd,
    const char *sample_type, int *errp, const char **whyp);
/* Building blocks, exposed for the unit tests: pprof_enc.c's, shared
 * with malloc-prof.  prof_pb_varint writes v
 * as a protobuf base-128 varint to out (room for 10 bytes) and returns
 * its length.  prof_gzip_write compresses len bytes of data (deflate with
 * fixed Huffman codes and LZ77 matches, gzip header, CRC-32 and size
 * trailer) to fd with the library's tables (base_malloc); true on error
 * with *errp set (an errno, or ENOMEM). */
size_t prof_pb_varint(uint8_t *out, uint64_t v);
bool prof_gzip_write(int fd, const void *data, size_t len, int *errp);

/* -------------------------------------------------------- prof_ctl.c */
/* Register prof.* and thread.prof.* into ctl.c's tree (after ctl_boot). */
bool prof_ctl_boot(void);

/* ------------------------------------------------------- prof_http.c */
/* prof_http:HOST:PORT, the scrape endpoint ("": off). */
extern char opt_prof_http[128];
/* prof_http_timeout_ms: how long a client has, from connecting, to send
 * its whole request (a connection still incomplete then gets 408). */
extern unsigned opt_prof_http_timeout_ms;
#define PROF_HTTP_TIMEOUT_MS_MAX 3600000u
/* The conf row's check: true if v[0..len) is not "" nor a HOST:PORT the
 * endpoint can listen on, with why[] saying what is wrong (one line). */
bool prof_http_conf_check(const char *v, size_t len, char *why,
    size_t whysize);
/* Bind and start the thread if the option asks for it and nobody has
 * tried yet (cheap when not: one relaxed load).  From allocation slow
 * paths with no allocator lock held, and from prof.http_port. */
void prof_http_start_pending(void);
/* prof.http_port: the bound port, 0 when the endpoint is not running. */
unsigned prof_http_port(void);
/* The connection table's place in .bss (test/unit/http_conns_idle: a
 * process without the endpoint never writes it). */
void prof_http_conns_extent(const void **addr, size_t *size);
void prof_http_prefork(void);
void prof_http_postfork_parent(void);
void prof_http_postfork_child(void);

/* What the endpoint does with the bytes of a request received so far:
 * the request parser, a pure function of them (no state, no I/O; fuzzed
 * by test/fuzz/http_request.c).  It frames the request and asks
 * prof_http_route_match for the route. */
typedef enum {
	PROF_HTTP_MORE,         /* not complete yet: read on */
	PROF_HTTP_ERROR,        /* answer status with the line why */
	PROF_HTTP_HEAP,         /* GET /debug/pprof/heap */
	PROF_HTTP_ALLOCS,       /* GET /debug/pprof/allocs */
	PROF_HTTP_PEAK,         /* GET /debug/pprof/peak */
	PROF_HTTP_LIFETIMES,    /* GET /debug/pprof/lifetimes */
	PROF_HTTP_FRAGMENTATION, /* GET /debug/pprof/fragmentation */
	PROF_HTTP_STATS,        /* GET /debug/malloc/stats */
	PROF_HTTP_SYMBOL_GET,   /* GET /debug/pprof/symbol */
	PROF_HTTP_SYMBOL_POST,  /* POST /debug/pprof/symbol, clen bytes */
	PROF_HTTP_INDEX,        /* GET /debug/pprof/ (and without the /) */
	PROF_HTTP_RESUME        /* not parsed: the server's call back for a
				 * request deferred by prof_http_defer */
} prof_http_route_t;

typedef struct {
	prof_http_route_t route;
	int status;             /* PROF_HTTP_ERROR: 400, 404 or 405 */
	const char *allow;      /* 405: the Allow header's methods */
	char why[256];          /* PROF_HTTP_ERROR: one line, no '\n' */
	size_t head_len;        /* the head through its empty line; 0: the
				 * head is not complete */
	bool heap_v2;           /* HEAP, ALLOCS: ?format=heap_v2 */
	bool debug;             /* ?debug=N, N > 0: the text form */
	unsigned seconds;       /* HEAP, ALLOCS: ?seconds=N (0: none) */
	size_t clen;            /* SYMBOL_POST: Content-Length */
	void *resume;           /* RESUME: prof_http_defer's state */
	bool cancel;            /* RESUME: the connection is gone (or the
				 * process forked): release resume only */
} prof_http_req_t;

/* What a framed request asks for (prof_http_route_match, whose comment
 * says more). */
typedef void prof_http_match_fn(prof_http_req_t *req, const char *method,
    size_t mlen, const char *path, size_t plen, const char *query,
    size_t qlen, long long clen);
/* The request buf[0..len) (at most max bytes are ever read): a route
 * (match's) once its head is complete, an error as soon as the first line
 * is complete and malformed or max bytes hold no head, else
 * PROF_HTTP_MORE. */
void prof_http_parse_request(const char *buf, size_t len, size_t max,
    prof_http_match_fn *match, prof_http_req_t *req);
/* Make req an error page: status, with the line fmt... as req->why. */
void prof_http_req_error(prof_http_req_t *req, int status,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The longest request body the server reads (one buffer, which a
 * symbol POST's addresses fill). */
#define PROF_HTTP_BODY_MAX 65536

/* How a route answers: r is the server's handle on the connection, and
 * each request gets one of the prof_http_send_* calls (they block until
 * sent, within the server's time limits).  A body is written to the
 * buffer prof_http_body_begin empties and returns (a descriptor; -1 with
 * why[] on error), then sent whole by prof_http_send_body.  send_text:
 * extra is "" or more header lines, each ending in \r\n; send_error:
 * one line of text/plain. */
typedef struct prof_http_resp_s prof_http_resp_t;
int prof_http_body_begin(char *why, size_t whysize);
void prof_http_send_body(prof_http_resp_t *r, int status,
    const char *ctype);
void prof_http_send_text(prof_http_resp_t *r, int status, const char *ctype,
    const char *extra, const char *text);
void prof_http_send_error(prof_http_resp_t *r, int status,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Answer r later: after wait_ns, the server calls the serve function
 * again with a PROF_HTTP_RESUME request carrying state (or cancel, if the
 * connection was dropped meanwhile), and serves every other connection
 * in between.  true if it cannot (PROF_HTTP_WAITS requests already
 * wait): answer r now and keep state. */
#define PROF_HTTP_WAITS 8
bool prof_http_defer(prof_http_resp_t *r, uint64_t wait_ns, void *state);
/* Requests deferred now (the endpoint's thread only). */
unsigned prof_http_waiting(void);
/* How the server has a complete request answered (prof_http_route_serve,
 * whose comment says more). */
typedef void prof_http_serve_fn(prof_http_resp_t *r,
    const prof_http_req_t *req, const char *body, size_t body_len);
/* After conf; true on error.  The server names no route: tsd.c's boot
 * list hands it prof_http_routes.c's two entry points, which call the
 * server's prof_http_send_* (so the two files do not call each other). */
bool prof_http_boot(prof_http_match_fn *match, prof_http_serve_fn *serve);

/* ------------------------------------------------ prof_http_routes.c */
/* The route of a framed request: sets req->route (heap_v2, clen) or
 * makes it an error page (404, 405, or 400 for a bad query or body
 * length).  path and query are the target's two halves (query "" if it
 * has none); clen is the Content-Length, -1 if absent. */
prof_http_match_fn prof_http_route_match;
/* Answer the complete request req through r: a route's response, or
 * its error page.  body[0..body_len): a SYMBOL_POST's body. */
prof_http_serve_fn prof_http_route_serve;

/* ------------------------------------------------------ prof_stats.c */
/* prof_stats: jemalloc 5.3's counts of sampled objects per size class
 * (prof.stats.bins.<i>.{live,accum}, prof.stats.lextents.<i>.*), kept
 * on the sampling slow path only. */
extern bool opt_prof_stats;
/* A sample of usize bytes (req of them asked for) was recorded, or its
 * object freed (prof.c, when opt_prof_stats). */
void prof_stats_alloc(size_t req, size_t usize);
void prof_stats_free(size_t req, size_t usize);
/* prof.stats, hung into prof_ctl.c's table. */
#define PROF_FRAG_NSTATS 2
extern const ctl_node_t prof_frag_ctl_stats[PROF_FRAG_NSTATS];

/* ------------------------------------------------------- prof_frag.c */
/* prof.fragmentation, hung into prof_ctl.c's table. */
#define PROF_FRAG_NCTL 1
extern const ctl_node_t prof_frag_ctl[PROF_FRAG_NCTL];
/* The fragmentation profile (see the file), built under prof_dump_mtx. */
bool prof_frag_build(dump_snap_t *s, const char **whyp);
/* Every live sampled small object, visited under its sample-table
 * shard's lock (prof.c): its tctx, gctx and tdata stay alive meanwhile.
 * Large samples (extent->prof) are not visited. */
typedef void prof_sample_visit_t(const prof_sample_t *s, void *arg);
void prof_samples_foreach(prof_sample_visit_t *visit, void *arg);
/* Every live promoted sample (an object of a small class in a large block
 * of its own, malloc.c's alloc_promoted: extent->prof), visited under its
 * gctx shard's lock, which keeps its tctx, gctx and tdata alive. */
void prof_promoted_foreach(prof_sample_visit_t *visit, void *arg);

#endif /* MP_INTERNAL_PROF_H */
