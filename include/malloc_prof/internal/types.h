/*
 * types.h: every internal struct and constant of libmalloc_prof, with the
 * invariants that govern each struct written above it.
 *
 * The shape follows jemalloc (arenas, size classes, slabs, extents, a page
 * map, per-thread caches) with one deliberate difference taken from
 * mimalloc: a thread's cache owns whole slabs.  In front of the slabs each
 * thread keeps, per small class, a stack of pointers (cache_bin_t, as
 * jemalloc's tcache does): malloc pops and free pushes without reading or
 * writing the object, whichever thread's slab it came from.  Only when a
 * stack overflows or runs dry do regions move between it and the slabs:
 * the owner's slabs take theirs back in a bitmap with no atomics, other
 * owners' through a remote bitmap (one atomic or per word of regions; no
 * write to the regions).  No free takes a lock.
 */
#ifndef MP_INTERNAL_TYPES_H
#define MP_INTERNAL_TYPES_H

#include "malloc_prof/internal/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- compile-time configuration (constants, not #ifdefs) ---- */
static const bool config_debug = MP_CONFIG_DEBUG;
static const bool config_prof = MP_CONFIG_PROF;

#define MP_CAT_(a, b) a##b
#define MP_CAT(a, b) MP_CAT_(a, b)
/* The public name of an exported symbol: `malloc` or `mp_malloc`. */
#define MP_PUBLIC(name) MP_CAT(MP_PREFIX, name)
#define MP_EXPORT __attribute__((visibility("default")))
#define MP_INLINE static inline __attribute__((always_inline))
#define MP_NOINLINE __attribute__((noinline))
#define MP_COLD __attribute__((cold, noinline))
/* A function of a file whose code rarely runs (ctl, the profiler, hpa)
 * that every process runs all the same (boot, thread exit): the linkers
 * put .text.startup.* before .text, beside the allocator's objects, which
 * Makefile.am links first.  Fault-around maps 64 KiB of the library's
 * code around each page it runs, so one such call in a cold file made its
 * whole window resident (doc/performance.md, Peak RSS round 7). */
#define MP_WARM __attribute__((section(".text.startup.mp_warm")))
/* A small variable that every process writes at boot (or, in the
 * allocator, every profiled one at its first samples): in the library's
 * .data, whose pages the loader writes anyway, not on a page of .bss that
 * only it would make resident (prof.h's PROF_DATA is the profiler's). */
#define MP_DATA __attribute__((section(".data.mp_boot")))
/*
 * A variable every sample reads and nearly nothing writes (the profiler's
 * switches and options, its tables' addresses, the hooks' generation): all
 * in one section, a few cache lines together, as the Linux kernel's
 * __read_mostly.  A sample comes every 512 KiB of allocation and the
 * program's own work evicts what it touched before the next one: spread
 * over .data and .bss, these were 14 lines to fetch again at every sample
 * (doc/performance.md, "Per-sample cost, round 11").  Not for a variable
 * written at each sample or by every thread: its writes would evict the
 * others from every core.
 */
#define MP_READ_MOSTLY __attribute__((section("mp_read_mostly")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- geometry ---- */
#define LG_QUANTUM 4
#define QUANTUM ((size_t)1 << LG_QUANTUM)
#define LG_PAGE MP_LG_PAGE
#define PAGE ((size_t)1 << LG_PAGE)
#define PAGE_MASK (PAGE - 1)
#define PAGE_CEILING(s) (((s) + PAGE_MASK) & ~PAGE_MASK)
#define ALIGNMENT_CEILING(s, a) (((s) + ((a) - 1)) & ~((a) - 1))
#define CACHELINE 64

/*
 * Size classes: 16, 32, ... 128 (quantum spaced), then four classes per
 * doubling: 160, 192, 224, 256, 320, ...  Classes up to SC_SMALL_MAXCLASS
 * live in slabs ("small"); larger ones are page-multiple extents ("large").
 * Internal fragmentation is at most 20% of the block.
 */
#define SC_NBINS 35                     /* small classes: 16 .. 14336 */
#define SC_SMALL_MAXCLASS ((size_t)14336)
#define SC_LARGE_MINCLASS ((size_t)16384)
#define SC_LG_LARGE_MAX 62              /* largest class is 2^62 */
#define SC_LARGE_MAXCLASS ((size_t)1 << SC_LG_LARGE_MAX)
/* Index of the largest class: 8 quantum classes + 4 per doubling from 2^7. */
#define SC_NSIZES (8 + 4 * (SC_LG_LARGE_MAX - 7))
#define SC_NLEXTENTS (SC_NSIZES - SC_NBINS)
#define SC_LOOKUP_MAX SC_SMALL_MAXCLASS
#define SC_LOOKUP_LEN ((SC_LOOKUP_MAX >> LG_QUANTUM) + 1)

/* Thread caches keep freed large blocks up to this class (tcache_max). */
#define TCACHE_MAXCLASS_LIMIT ((size_t)8 << 20)
#define TCACHE_NLARGE 37                /* large classes 16 KiB .. 8 MiB */
#define TCACHE_LARGE_SLOTS 8            /* cached blocks per large class */
#define TCACHE_EMPTY_SLABS_MAX 4        /* empty slabs a thread keeps */
/* Empty slabs an arena's prof_cache keeps, for any class whose slab is as
 * big: up to PROF_CACHE_EMPTY_SLABS_MAX slabs, of PROF_CACHE_EMPTY_BYTES
 * each, and past that while all prof_caches together keep at most the
 * arenas' active bytes >> PROF_CACHE_EMPTY_LG_SHARE (slab.c,
 * slab_prof_keep).  Samples are rare,
 * so a slab per class touched, kept for the next one, would be a small
 * program's largest fixed cost of the profiler (16 slabs, 64 KiB, in a
 * process of 3 MB): 16 KiB whatever the heap.  But a big heap has many
 * samples live, in slabs of one to five pages, and the number live moves
 * up and down by several: with 16 KiB, midsize (150 MiB) sent 777 of
 * 1,013 small samples' slabs to the arena and back, ~1,900 instructions
 * each.  A share of the heap (0.1%) keeps most of those swings' slabs;
 * the slabs kept longest make room for a new one, so that what is kept
 * shrinks with the heap. */
#define PROF_CACHE_EMPTY_SLABS_MAX 32
#define PROF_CACHE_EMPTY_BYTES ((size_t)16 << 10)
#define PROF_CACHE_EMPTY_LG_SHARE 10
/* Pointers a thread's cache bin holds per small class: 32 KiB worth,
 * within these bounds (cache_bin_t): the defaults of
 * tcache_nslots_small_min / _max (tcache.c). */
#define CACHE_BIN_MIN 8
#define CACHE_BIN_MAX 128
/* How far a bin that swings between full and empty may grow past that
 * (tcache.c, bin_move): to this many slots, this many bytes of regions,
 * for classes up to CACHE_BIN_GROW_USIZE. */
#define CACHE_BIN_GROW_SLOTS 2048
#define CACHE_BIN_GROW_BYTES ((size_t)512 << 10)
#define CACHE_BIN_GROW_USIZE ((size_t)1024)
/* The classes above CACHE_BIN_GROW_USIZE grow to this many times their
 * base slots (within CACHE_BIN_GROW_BYTES), and only when their bin was
 * filled or flushed CACHE_BIN_BUSY_MOVES times between two GC visits and
 * other threads freed into the class's slabs (tcache.c, bin_gc). */
#define CACHE_BIN_GROW_MID_MUL 4
#define CACHE_BIN_BUSY_MOVES 4
/* Bytes between two thread events (cache GC step, decay tick):
 * tcache_gc_incr_bytes, 256 KiB by default (alloc.h, conf.c). */
#define TSD_EVENT_INTERVAL ((uint64_t)opt_tcache_gc_incr_bytes)
/* base_malloc's recycled classes: blocks of up to this many bytes (larger
 * ones are mapped on their own and unmapped when freed). */
#define BASE_SMALL_MAX ((size_t)4096)
/* base_malloc's per-thread stash: blocks of up to this many cache lines. */
#define BASE_STASH_CLASSES 8

/* ---- locks, in the order they may be taken (lower first) ----
 * A thread holding a lock may only take locks of a higher rank.  Debug
 * builds check this on every acquisition. */
typedef enum {
	LOCK_RANK_INIT = 1,       /* malloc_init_mtx: one-time global init */
	LOCK_RANK_CTL,            /* ctl_mtx: mallctl refresh and actions */
	LOCK_RANK_BACKGROUND,     /* bg_mtx: the background thread's state
	                           * (held across pthread_create, which
	                           * allocates) */
	LOCK_RANK_PROF_HTTP,      /* http_mtx: the scrape endpoint's
	                           * descriptors (held across pthread_create) */
	LOCK_RANK_PROF_RECENT_DUMP, /* recent_dump_mtx: one dump of the
	                           * recent allocations at a time (held
	                           * across the program's write callback) */
	LOCK_RANK_PROF_DUMP,      /* prof_dump_mtx: one dump at a time */
	LOCK_RANK_PROF_GCTX,      /* gctx shard: backtraces and counters */
	LOCK_RANK_PROF_TDATAS,    /* prof_tdatas_mtx: thread identities */
	LOCK_RANK_PROF_SAMPLES,   /* sample-table shard: live samples */
	LOCK_RANK_PROF_RECENT,    /* recent_mtx: the recent allocations */
	LOCK_RANK_PROF_LIFETIME,  /* life_mtx: the lifetime profile's table */
	LOCK_RANK_TSD_REGISTRY,   /* tsd_registry_mtx: list of live threads */
	LOCK_RANK_ARENAS,         /* arenas_mtx: creating arenas */
	LOCK_RANK_ARENA_SHARED,   /* arena->shared_mtx: the arena's locked cache */
	LOCK_RANK_ARENA_PROF_CACHE, /* arena->prof_cache_mtx: sampled regions
	                           * (a lite lock) */
	LOCK_RANK_ARENA_ORPHANS,  /* arena->orphans_mtx: caches of dead threads */
	LOCK_RANK_ARENA,          /* arena->mtx: extents, decay, stats */
	/* The hook arena's three locks (hook.c): a custom extent hook runs
	 * with its arena's mtx held, and what it allocates comes from
	 * there, so they rank above every other arena's. */
	LOCK_RANK_HOOK_ARENA_SHARED,
	LOCK_RANK_HOOK_ARENA_PROF_CACHE,
	LOCK_RANK_HOOK_ARENA_ORPHANS,
	LOCK_RANK_HOOK_ARENA,
	LOCK_RANK_BASE,           /* base_mtx: metadata allocator (leaf) */
} lock_rank_t;

/* A lock's profiling counters (jemalloc's mutex_prof_data_t, read by
 * the stats.mutexes.* and stats.arenas.<i>.mutexes.* names).  Written by
 * the holder, so plain fields, except the count of waiters.  The ones
 * every acquisition writes come first: see mp_mutex_t. */
typedef struct mp_mutex_prof_s {
	const void *prev_owner;          /* a per-thread address */
	uint64_t n_lock_ops;             /* acquisitions */
	uint64_t n_owner_switches;       /* acquisitions by another thread
	                                  * than the last one's */
	_Atomic uint32_t n_waiting;
	uint32_t max_n_thds;             /* most threads seen waiting */
	uint64_t n_wait_times;           /* acquisitions that had to wait */
	uint64_t n_spin_acquired;        /* lite locks only (mutex.c) */
	uint64_t tot_wait_ns, max_wait_ns;
} mp_mutex_prof_t;

/*
 * What an uncontended lite lock's round trip touches (word, then the
 * counters through n_owner_switches) is the first 40 bytes, one cache
 * line wherever the lock starts in the first 24 bytes of a line: a
 * sample takes six lite locks, each a line the program's own work had
 * evicted since the last one, and with glibc's mutex first (40 bytes the
 * lite lock never reads) each took two (cachegrind: 1.7 L1 misses an
 * acquisition, doc/performance.md "Per-sample cost, round 11").
 */
typedef struct mp_mutex_s {
	/* mp_mutex_init_lite's locks: `word` is the lock (0 free, 1 held,
	 * 2 held with waiters) and `lock` is unused. */
	_Atomic uint32_t word;
	lock_rank_t rank;
	bool lite;
	mp_mutex_prof_t prof;
	pthread_mutex_t lock;
} mp_mutex_t;
/* The bytes an uncontended lite lock's round trip writes, from its start
 * (test/unit/mutex_lite checks the layout against it). */
#define MP_MUTEX_HOT_BYTES (offsetof(mp_mutex_t, prof) + \
    offsetof(mp_mutex_prof_t, n_owner_switches) + sizeof(uint64_t))

/* ThreadSanitizer sees glibc's mutexes through its interceptors but not
 * a futex word: under it, lite locks stay glibc's. */
#if defined(__SANITIZE_THREAD__)
#define MP_MUTEX_LITE_OK false
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MP_MUTEX_LITE_OK false
#endif
#endif
#ifndef MP_MUTEX_LITE_OK
#define MP_MUTEX_LITE_OK true
#endif

#define MP_MUTEX_INITIALIZER(r) { .lock = PTHREAD_MUTEX_INITIALIZER, .rank = (r) }
/* A lite lock's, for a lock in static storage (mp_mutex_init_lite's). */
#define MP_MUTEX_LITE_INITIALIZER(r) { .lock = PTHREAD_MUTEX_INITIALIZER, \
    .rank = (r), .lite = MP_MUTEX_LITE_OK }

/*
 * (The same text as include/malloc_prof.h.in's, under the same guard.)
 * Extent hooks, jemalloc's ABI (arena.<i>.extent_hooks, arenas.create):
 * the functions an arena gets its pages through.  Every one but destroy
 * returns false on success; a NULL member means "cannot" (the arena then
 * does what jemalloc does without it: keep pages instead of giving them
 * back, skip a purge, not split or merge).  See doc/design.md, "Extent
 * hooks", for who calls what with which locks held.
 */
#ifndef MALLOC_PROF_EXTENT_HOOKS_DEFINED
#define MALLOC_PROF_EXTENT_HOOKS_DEFINED
typedef struct extent_hooks_s extent_hooks_t;
typedef void *(extent_alloc_t)(extent_hooks_t *, void *, size_t, size_t,
    bool *, bool *, unsigned);
typedef bool (extent_dalloc_t)(extent_hooks_t *, void *, size_t, bool,
    unsigned);
typedef void (extent_destroy_t)(extent_hooks_t *, void *, size_t, bool,
    unsigned);
typedef bool (extent_commit_t)(extent_hooks_t *, void *, size_t, size_t,
    size_t, unsigned);
typedef bool (extent_decommit_t)(extent_hooks_t *, void *, size_t, size_t,
    size_t, unsigned);
typedef bool (extent_purge_t)(extent_hooks_t *, void *, size_t, size_t,
    size_t, unsigned);
typedef bool (extent_split_t)(extent_hooks_t *, void *, size_t, size_t,
    size_t, bool, unsigned);
typedef bool (extent_merge_t)(extent_hooks_t *, void *, size_t, void *,
    size_t, bool, unsigned);
struct extent_hooks_s {
	extent_alloc_t *alloc;
	extent_dalloc_t *dalloc;
	extent_destroy_t *destroy;
	extent_commit_t *commit;
	extent_decommit_t *decommit;
	extent_purge_t *purge_lazy;
	extent_purge_t *purge_forced;
	extent_split_t *split;
	extent_merge_t *merge;
};
#endif

typedef struct extent_s extent_t;
typedef struct tcache_s tcache_t;
typedef struct arena_s arena_t;
typedef struct tsd_s tsd_t;

/* What an extent currently is.  Free kinds sit in the arena's extent sets. */
typedef enum {
	EXTENT_FREE_DIRTY = 0,   /* free, pages resident (recently used) */
	EXTENT_FREE_MUZZY,       /* free, MADV_FREE'd: the kernel may reclaim */
	EXTENT_FREE_CLEAN,       /* free, purged or never touched: reads zero */
	EXTENT_SLAB,             /* small objects of one class */
	EXTENT_LARGE,            /* one large object */
	EXTENT_NKINDS
} extent_kind_t;
#define EXTENT_NFREE_KINDS 3

/* Which list of its owning cache a slab is on (owner-private).  A large
 * extent uses the field for one mark: LARGE_LIST_CACHED while a cache's
 * large bin holds it (tcache.c), so free tells a double free by the
 * record it reads anyway rather than by scanning the bin.  No slab takes
 * that value, so a record that was a slab never reads as cached. */
typedef enum {
	SLAB_LIST_NONE = 0,
	SLAB_LIST_PARTIAL,      /* has or may have free regions; head = current */
	SLAB_LIST_FULL,         /* no free region when last looked at */
	SLAB_LIST_EMPTY,        /* no region in use; kept for reuse */
	LARGE_LIST_CACHED,      /* large: in a cache's large bin */
} slab_list_t;

/*
 * extent_t: a page-aligned run of pages (a slab, a large block, or a free
 * extent in an arena).  Metadata lives apart from the pages (base.c), and
 * the page map points from pages to it: every page of a slab, and the first
 * and last page of every other extent.
 *
 * A slab keeps its free regions as bits, never in the regions themselves:
 * the allocator reads and writes no byte of a small object (junk and zero
 * filling aside), so an object freed by one thread and handed out to
 * another costs no cache line moving between them on the allocator's
 * behalf.
 * Slab invariants (owner = the cache that owns the slab):
 *   bit i of free_bits set: region i is free and the owner may hand it out;
 *   bit i of remote_bits set: another thread freed region i and the owner
 *           has not collected it yet;
 *   used == nregs - |free_bits|, i.e. the regions the program holds, the
 *           ones in threads' cache bins and the ones in remote_bits.
 * `free_bits`, `used` and `list` are touched only by the owner (for the
 * arena's shared cache: under arena->shared_mtx).  Any other thread frees
 * region i with an atomic or of bit i into `remote_bits`; the owner
 * collects a word by exchanging it with zero and or-ing it into
 * free_bits.  A bit found already set, in either map, is a double free.
 * `full` is set to 1 by the owner when it parks the slab on its full list;
 * whoever flips it 1 -> 0 first (a remote freer, or the owner on a local
 * free) becomes responsible for making the owner see the slab again: the
 * owner moves it itself, a remote freer pushes it on owner->inbox.  (The
 * owner parks only after finding remote_bits all zero following its store
 * of `full`; a remote freer loads `full` after its or: one of the two sees
 * the other.)
 * Large and free extents name &extent_large_owner as owner, so no extent
 * reachable through the page map has a NULL owner.
 * The first cache line holds what the owner reads and writes most; the
 * remote bitmap and then `full` have lines of their own (other threads
 * write them).  320 bytes.
 */
#define SLAB_MAXREGS 512                /* regions one slab may hold */
#define SLAB_WORDS (SLAB_MAXREGS / 64)  /* words of each bitmap */

struct extent_s {
	_Atomic(tcache_t *) owner;       /* owning cache (see above) */
	uint32_t used;                   /* slab: see invariant */
	uint32_t usize;                  /* slab: region size */
	uint32_t nregs;                  /* slab: regions in the slab */
	uint32_t div_magic;              /* slab: ceil(2^32 / usize), for
	                                  * region indices by multiplication */
	uint8_t kind;                    /* extent_kind_t */
	uint8_t list;                    /* slab_list_t (slab); large:
	                                  * LARGE_LIST_CACHED or not */
	uint8_t szind;                   /* slab/large: size class index */
	bool zeroed;                     /* free/large: pages known to be zero */
	uint8_t free_word;               /* slab: free_bits[w] == 0 for every
	                                  * w < free_word (owner only) */
	bool guarded;                    /* large: between guard pages
	                                  * (san.c) */
	bool decommitted;                /* free: decommitted through the
	                                  * arena's hooks (extent.c) */
	uint8_t pad_lines;               /* large: 0, or 1 + the cache lines
	                                  * the block starts into its extent,
	                                  * carved a page longer
	                                  * (cache_oblivious, arena.c) */
	char *addr;                      /* first byte */
	size_t size;                     /* bytes (page multiple) */
	arena_t *arena;                  /* the arena the pages belong to */
	/* On the first line with kind, addr, size and szind: a free of a
	 * large block reads them all (bench's midsize: a second line here
	 * was a sixth of free_slow's time). */
	void *prof;                      /* large: its sample record, if any */
	extent_t *prev, *next;           /* cache bin lists / arena sets */
	extent_t *lru_prev, *lru_next;   /* arena decay list (free extents) */
	uint64_t free_ns;                /* free: when it entered this state */
	char *map_addr;                  /* the OS mapping it was carved from */
	size_t map_size;
	size_t clean_from;               /* large: offset past which its pages
	                                  * are to go back clean (see
	                                  * arena_large_alloc_req); 0: none */
	_Atomic uint32_t nsampled;       /* slab: live sampled regions (only
	                                  * slabs of arena 0's prof_cache) */
	struct hpa_ps_s *hpa_ps;         /* slab/large: the pageslab it was
	                                  * carved from (opt.hpa, hpa.c), else
	                                  * NULL */

	uint64_t free_bits[SLAB_WORDS];  /* slab: owner's free regions */
	/* What other threads write, on lines of their own. */
	_Alignas(CACHELINE) _Atomic uint64_t remote_bits[SLAB_WORDS];
	_Alignas(CACHELINE) _Atomic uint8_t full; /* slab: see invariant */
	extent_t *inbox_next;            /* slab: link on owner->inbox */
};

/*
 * Cache bins: per small class, a stack of free regions in a thread.  The
 * slots run from `full` (lowest) to `empty`; the regions cached are
 * [cur, empty), the most recently freed at `cur`, and the slot at `empty`
 * always holds NULL.  malloc pops *cur unless it reads that NULL; free
 * pushes below cur unless cur == full.  What the fast paths use lives in
 * tsd, indexed by the page map's class tag (szind + 1): bin_cur[] and the
 * low 32 bits of `full` in bin_full[] (a bin's slots are far shorter than
 * 4 GiB, so the low bits tell the addresses apart).  Entry 0 and the
 * entries past the small classes are always off: NULL and 0, so free's
 * test fails and it needs no range test of the tag.  A thread's bins are
 * all off without a cache or with junk on free; malloc's fast path never
 * reads an off bin (its threshold is 0 then).  The slots and `empty`
 * belong to the thread's tcache_t, which fills a dry bin from its slabs
 * and empties an overflowing one into the regions' slabs (tcache.c).
 */
#define CACHE_BIN_NTAGS 64

/* One size class of a thread cache. */
typedef struct tcache_bin_s {
	extent_t *partial;      /* slabs with free regions; head is current */
	extent_t *partial_tail;
	extent_t *full;         /* slabs found full */
	uint32_t nslabs;        /* slabs owned for this class */
} tcache_bin_t;

/* Freed large blocks kept by a thread for reuse (a stack per class). */
typedef struct tcache_large_s {
	extent_t *slots[TCACHE_LARGE_SLOTS];
	uint32_t n;
	uint32_t low_water;     /* min n since the last GC pass */
	uint32_t nrequests;     /* hits not yet added to the arena's
	                         * lextent stats (at GC and flush) */
} tcache_large_t;

/*
 * tcache_t: a cache of slabs and large blocks owned by one thread, or by an
 * arena ("shared": used under arena->shared_mtx for MALLOCX_TCACHE_NONE,
 * MALLOCX_ARENA, tcache:false and threads being torn down), or an explicit
 * cache (tcache.create: no thread's; one thread at a time, tcache.c).
 * Caches are never freed: when a thread exits, its cache is flushed and
 * parked on its arena's orphan list with whatever slabs still hold live
 * objects, and the next new thread of that arena adopts it.  Because the
 * struct is immortal, a remote freer may always push on owner->inbox.
 */
struct tcache_s {
	tcache_bin_t bins[SC_NBINS];
	_Atomic(extent_t *) inbox;       /* full slabs that got remote frees */
	extent_t *empty;                 /* empty slabs kept (list via next) */
	uint32_t nempty;
	uint32_t empty_pages;            /* their pages (in nempty's padding) */
	tcache_large_t large[TCACHE_NLARGE];
	size_t large_bytes;              /* bytes cached in `large` */
	arena_t *arena;
	void ***cb_cur;                  /* the owning thread's
	                                  * &tsd->bin_cur[1] (by szind) while
	                                  * its cache bins are on (an explicit
	                                  * cache's: in its registry entry),
	                                  * else NULL (shared, orphaned, bins
	                                  * off) */
	uint32_t *cb_full;               /* &tsd->bin_full[1] likewise */
	uint64_t *cb_nreq;               /* &tsd->bin_nreq[1] likewise: the
	                                  * bins' requests not yet merged */
	void **cb_empty[SC_NBINS];       /* each bin's NULL sentinel slot */
	void **cb_slots;                 /* storage of the bins' slots
	                                  * (thread and explicit caches) */
	tcache_t *orphan_next;
	uint32_t gc_bin;                 /* next bin of the incremental GC */
	/* Cache bin sizes that follow the program (tcache.c, bin_move):
	 * the thread's traffic (allocated + deallocated) at each bin's
	 * last fill or overflow, which of the two it was, the quick swings
	 * between them in a row, and whether neither came since the bin's
	 * last GC visit. */
	void **cb_home[SC_NBINS];        /* each bin's sentinel in cb_slots */
	void **cb_grow_slots;            /* where grown bins live (made at
	                                  * the first growth) */
	uint32_t cb_grow_end[SC_NBINS];  /* each bin's sentinel there */
	uint64_t cb_move_at[SC_NBINS];
	uint8_t cb_move[SC_NBINS];
	uint8_t cb_swings[SC_NBINS];
	bool cb_idle[SC_NBINS];
	uint8_t cb_moves[SC_NBINS];      /* fills and overflows since the
	                                  * bin's last GC visit (to 255) */
	uint8_t cb_gc_delay[SC_NBINS];   /* regions the GC may still skip
	                                  * flushing (tcache_gc_delay_bytes) */
	/* Bit ind: another thread freed into a slab of class ind since the
	 * class's last GC visit, which looks at its slabs only then (slab.c:
	 * walking them for nothing was a tenth of the allocator's time in
	 * bench's midsize).  Other threads set it: a line of its own. */
	_Alignas(CACHELINE) _Atomic uint64_t remote_classes;
	bool shared;
	bool small_slabs;                /* sz_prof_slab_size (prof_cache) */
};

/* Free extents of one kind, bucketed by page-count class for best fit. */
#define EXTENT_NPSIZES 200   /* page-count classes up to 2^50 pages */
typedef struct extent_set_s {
	extent_t *heads[EXTENT_NPSIZES];
	uint64_t nonempty[(EXTENT_NPSIZES + 63) / 64];
	size_t npages;
	extent_t *lru_head, *lru_tail;   /* oldest first */
} extent_set_t;

/* Counters of one arena, guarded by arena->mtx (read as a snapshot). */
typedef struct arena_stats_s {
	size_t mapped;           /* bytes obtained from the OS and not unmapped */
	size_t retained;         /* free clean bytes (virtual memory kept) */
	size_t pactive;          /* pages in slabs and large blocks */
	size_t pdirty;
	size_t pmuzzy;
	uint64_t npurge;         /* purge passes over dirty pages */
	uint64_t nmadvise;       /* madvise calls on dirty pages */
	uint64_t purged;         /* dirty pages purged */
	uint64_t muzzy_npurge;   /* the same for muzzy pages */
	uint64_t muzzy_nmadvise;
	uint64_t muzzy_purged;
	size_t large_allocated;  /* bytes in large blocks handed out */
	uint64_t large_nmalloc;
	uint64_t large_ndalloc;
	size_t slabs_cur;        /* slabs in use */
	uint64_t slabs_total;    /* slabs ever created */
	size_t cached_bytes;     /* large bytes parked in thread caches */
	uint32_t nthreads;       /* threads attached */
	/* opt.hpa (hpa.c; stats.arenas.<i>.hpa_shard.*): pageslabs, those
	 * hugified now, their pages in use and dirty (pdirty counts these
	 * too), purge passes, madvise calls that purged, hugifications and
	 * dehugifications. */
	size_t hpa_npageslabs;
	size_t hpa_nhuge;
	size_t hpa_nactive;
	size_t hpa_ndirty;
	uint64_t hpa_npurge_passes;
	uint64_t hpa_npurges;
	uint64_t hpa_nhugifies;
	uint64_t hpa_ndehugifies;
	size_t hpa_sec_bytes;            /* in the small extent cache */
} arena_stats_t;

/*
 * Counters of one small class in one arena (stats.arenas.<i>.bins.<j>).
 * Relaxed atomics, added to where regions move between slabs and cache
 * bins (fills, flushes), where slabs come and go, and on the paths that
 * use no cache bin; never per cached malloc or free (nrequests gets the
 * cache bins' own counts, tsd's bin_nreq, in batches).  A region counts
 * against the arena of its slab, a request against its cache's.  curregs
 * is nmalloc - ndalloc: regions held by the program or sitting in cache
 * bins, as jemalloc counts them.
 */
typedef struct arena_bin_stats_s {
	_Atomic uint64_t nmalloc;        /* regions taken from slabs */
	_Atomic uint64_t ndalloc;        /* regions given back to slabs */
	_Atomic uint64_t nfills;         /* cache-bin fills */
	_Atomic uint64_t nflushes;       /* cache-bin flushes */
	_Atomic uint64_t nslabs;         /* slabs taken up for the class */
	_Atomic uint64_t nreslabs;       /* changes of a cache's current slab */
	_Atomic uint64_t curslabs;       /* slabs held for the class */
	_Atomic uint64_t fullslabs;      /* of which with `full` set: parked
	                                  * full, no region freed since */
	_Atomic uint64_t nrequests;      /* mallocs of the class, the cache
	                                  * bins' hits added when merged
	                                  * (tcache.c, bin_requests_merge) */
} arena_bin_stats_t;

/* Counters of one large class in one arena (stats.arenas.<i>.lextents.
 * <j>): nmalloc / ndalloc under arena->mtx, when a block is carved or
 * returned; nrequests also gets the thread caches' hits, added at GC. */
typedef struct arena_lextent_stats_s {
	_Atomic uint64_t nmalloc;
	_Atomic uint64_t ndalloc;
	_Atomic uint64_t nrequests;
} arena_lextent_stats_t;

/*
 * arena_t: a source of pages.  Slabs and large blocks are carved from its
 * mappings; freed ones return here, coalesce with free neighbours, and
 * decay from dirty to muzzy to clean (purged) over time.  A new thread
 * takes the automatic arena with the fewest threads (arena_choose_auto).
 */
struct arena_s {
	mp_mutex_t mtx;                  /* extents, decay, stats */
	extent_set_t sets[EXTENT_NFREE_KINDS];
	arena_stats_t stats;
	size_t grow_next;                /* size of the next OS mapping */
	size_t ptail;                    /* active pages in large blocks'
	                                  * clean tails (clean_from) */
	size_t pused_peak;               /* most of pactive - ptail ever */
	uint64_t decay_next_ns;          /* earliest time decay has work */
	/* arena.<i>.{dirty,muzzy}_decay_ms: this arena's decay times (from
	 * arenas.*_decay_ms when made); read relaxed, set by ctl. */
	_Atomic ssize_t dirty_decay_ms, muzzy_decay_ms;

	mp_mutex_t shared_mtx;           /* the arena's own caches: */
	tcache_t shared;
	/* Sampled small objects come from slabs of the sampling thread's
	 * arena's cache (arena 0's for a thread on a manual arena:
	 * malloc.c, prof_cache_alloc_small): no thread owns them, so only
	 * their frees leave the fast path for the profiler, and the objects
	 * keep their size class.  An arena's cache stays empty until one of
	 * its threads samples; one for all threads sent its lock, bins and
	 * slabs' records from core to core at every sample
	 * (doc/performance.md, "Profiling in threads on two cores"). */
	tcache_t prof_cache;
	/* prof_cache's own lock, not shared_mtx: a sample's region took
	 * glibc's mutex twice (76 instructions a round trip, against 20 for
	 * the lite lock: doc/performance.md, "Per-sample cost"), and the
	 * shared cache's traffic (tcache:false) is no reason for a sample to
	 * wait. */
	mp_mutex_t prof_cache_mtx;

	mp_mutex_t orphans_mtx;          /* caches of exited threads */
	tcache_t *orphans;
	uint32_t norphans;

	unsigned ind;
	_Atomic uint32_t nthreads;
	uint64_t create_ns;              /* os_now_ns() when made (uptime) */
	arena_bin_stats_t bstats[SC_NBINS];
	arena_lextent_stats_t lstats[SC_NLEXTENTS];
	_Atomic uint64_t large_nflushes; /* cache flushes that returned large
	                                  * blocks here */

	/* Lifecycle (arena.<i>.*): the extent hooks in use (&extent_hooks_
	 * default: the OS directly, as before hooks existed), read under
	 * mtx or relaxed; `manual` for arenas.create's, the only ones reset
	 * and destroy accept, which then keep their large blocks in use on
	 * a list (large_head, linked through lru_prev/lru_next, which only
	 * free extents use otherwise); the largest mapping growth may ask
	 * for (retain_grow_limit; 0: the default).  Its dss mode is kept by
	 * extent.c (extent_dss_get). */
	_Atomic(extent_hooks_t *) hooks;
	bool manual;
	size_t grow_limit;
	extent_t *large_head;
	struct hpa_shard_s *hpa;         /* opt.hpa: its pageslabs (hpa.c),
	                                  * NULL until the first */
};

/* tsd state; the fast paths run only in TSD_NOMINAL. */
typedef enum {
	TSD_UNINIT = 0,          /* TLS is zero: first call goes slow */
	TSD_INITIALIZING,        /* setting up; recursive calls use the arena */
	TSD_NOMINAL,
	TSD_DEAD,                /* after thread exit cleanup */
} tsd_state_t;

/*
 * tsd_t: per-thread state, in initial-exec TLS.  The first fields are the
 * malloc/free fast path's whole working set:
 *   malloc: allocated + usize >= next_event sends the call to the slow
 *           path (events, prof sampling, uninitialised or slow-mode thread:
 *           next_event is 0 there); otherwise pop bin_cur[ind + 1].
 *   free:   the page map entry's class tag (0: not a cacheable small
 *           region, e.g. a sampled one or a large block), then push on
 *           bin_cur[tag].
 * fast_owner is the thread's cache when its malloc fast path is on, else
 * NULL (then next_event is 0); it is on only while the cache bins are.
 */
struct tsd_s {
	/* At offset 0, so that the fast paths index it with no add. */
	void **bin_cur[CACHE_BIN_NTAGS]; /* cache bins by class tag: see */
	uint32_t bin_full[CACHE_BIN_NTAGS]; /* "Cache bins" above */
	/* Usable size by class tag (0 for tag 0), set at thread start: the
	 * counters' increments, read with the bin's own index. */
	uint32_t bin_usize[SC_NBINS + 1];
	uint64_t allocated;              /* thread.allocated */
	uint64_t next_event;
	tcache_t *fast_owner;
	uint64_t deallocated;            /* thread.deallocated */
	/* Requests served by each cache bin (by class tag) not yet added to
	 * the arena's stats.arenas.<i>.bins.<j>.nrequests: one increment per
	 * malloc, folded in at the bin's fills and flushes and the cache's
	 * (tcache.c, bin_requests_merge), as jemalloc's tstats.nrequests. */
	uint64_t bin_nreq[SC_NBINS + 1];
	/* The thread's copy of malloc.c's size -> class tag table, read at a
	 * fixed TLS offset (no table address to load): the instruction it
	 * saves pays for bin_nreq's increment.  Made before the fast paths
	 * are armed (tsd_init); all zero before, tag 0 being always off. */
	uint8_t size_tags[SC_LOOKUP_LEN];

	tcache_t *tcache;                /* this thread's cache, if any */
	arena_t *arena;
	uint8_t state;                   /* tsd_state_t */
	bool tcache_enabled;
	uint32_t reentrancy;             /* >0: internal allocation in progress */
	uint64_t event_count;
	/* next_event is the nearer of these two; keeping them apart means
	 * samples do not add cache-GC steps. */
	uint64_t cache_event_at;         /* `allocated` of the next GC step */
	uint64_t prof_sample_at;         /* `allocated` at which to sample;
	                                  * UINT64_MAX: not sampling */
	uint64_t prng;                   /* per-thread PRNG state */
	uint64_t prof_last_event;        /* `allocated` at the last sample */
	uint64_t prof_wait_gen_seen;     /* prof_wait_gen when drawn */
	struct prof_tdata_s *prof_tdata; /* created at the first sample */
	size_t prof_gdump_pending;       /* active pages of a new high, to
	                                  * check once no lock is held */
	uintptr_t stack_lo, stack_hi;    /* frame-pointer walk bounds */
	void *base_stash[BASE_STASH_CLASSES]; /* base.c: freed blocks */
	uint32_t base_stash_bytes;
	tsd_t *reg_prev, *reg_next;      /* registry of live threads */
	/* thread.peak: the highest allocated - deallocated - peak_base seen
	 * at a check point (tsd_event, a read); off the fast path's lines. */
	uint64_t peak_max;
	uint64_t peak_base;              /* allocated - deallocated at the
	                                  * last thread.peak.reset */
};

#endif /* MP_INTERNAL_TYPES_H */
