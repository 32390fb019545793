/*
 * malloc.c: the public allocation API, its fast paths and the slow paths
 * behind them (misuse checks included).  Per-thread state, initialisation
 * and fork are in tsd.c.
 *
 * The malloc fast path is: size -> class by the thread's table, one
 * compare of the thread's allocated-bytes counter against its single event
 * threshold, a pop from the thread's cache bin of the class and a count of
 * the bin's requests (stats' nrequests, merged by tcache.c).  The
 * threshold is 0 for a thread that is not initialised or must take the
 * slow path (junk, zero, tcache off), so that one branch catches every
 * special case; events (cache GC, decay, profiler sampling) fire when the
 * counter crosses it.
 * The free fast path is: page map -> the class tag of the page, one
 * compare of the thread's cache bin of that class with its full mark, a
 * push.  Everything else is out of line.
 *
 * The sampling hook (prof_event, prof_sample_check) is the one place
 * where src/alloc/ calls into the profiler on the allocation path, by
 * design: see doc/design.md, "Dependencies".
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#if MP_CAT(MP_PREFIX, 1) == 1
#define MP_OVERRIDE_GLIBC 1
#include <malloc.h>
#else
#define MP_OVERRIDE_GLIBC 0
#endif

/* ------------------------------------------------------- slow paths */

/* Request flags decoded from jemalloc's MALLOCX_* bits. */
typedef struct {
	size_t align;          /* 0: natural */
	bool zero;
	bool tcache_none;      /* not the thread's cache (none, or explicit) */
	tcache_t *tcache;      /* MALLOCX_TCACHE(tc): explicit cache tc */
	arena_t *arena;        /* NULL: the thread's */
	void *entry;           /* the exported function the program called */
	uintptr_t fp;          /* its frame: where backtraces start */
	size_t size;           /* calloc: bytes asked for; 0: usable size */
	/* Bytes asked for, which only a sample records (prof_stats'
	 * req_sum); 0: the usable size. */
	size_t req;
} alloc_opts_t;

/* xmalloc:true: a call that would fail for want of memory aborts instead
 * (jemalloc's --enable-xmalloc, a run-time option here).  Only on the
 * failure paths: nothing is added where a call succeeds. */
static MP_COLD MP_NOINLINE void xmalloc_abort(const char *func, size_t size) {
	mp_abort("%s(%zu): out of memory (xmalloc:true)", func, size);
}
#define XMALLOC_CHECK(p, func, size) do {				\
	if (unlikely((p) == NULL) && opt_xmalloc)			\
		xmalloc_abort((func), (size));				\
} while (0)

/*
 * The experimental hooks (hook.c), reported by the public functions after
 * their fast paths, which a thread does not use while hooks are
 * installed: hook_active(), a relaxed load, is tested on slow paths only
 * (and in realloc before its same-class shortcut).  A function built on
 * another (mallocx on malloc, realloc of NULL...) reports under its own
 * type and mutes the inner call with hook_enter / hook_exit.
 */
static MP_NOINLINE void hook_alloc(int type, void *p, uintptr_t raw,
    uintptr_t a0, uintptr_t a1, uintptr_t a2) {
	uintptr_t args[3] = {a0, a1, a2};
	hook_call_alloc(type, p, raw, args);
}

static MP_NOINLINE void hook_dalloc(int type, void *p, uintptr_t a0,
    uintptr_t a1, uintptr_t a2) {
	uintptr_t args[3] = {a0, a1, a2};
	hook_call_dalloc(type, p, args);
}

static MP_NOINLINE void hook_expand(int type, void *p, size_t old,
    size_t usize, uintptr_t raw, uintptr_t a0, uintptr_t a1, uintptr_t a2,
    uintptr_t a3) {
	uintptr_t args[4] = {a0, a1, a2, a3};
	hook_call_expand(type, p, old, usize, raw, args);
}

/* Who called: for the profiler's backtraces.  Used in the exported
 * function itself (or the slow path it tail-calls), whose frame holds the
 * program's return address. */
#define CALLER_FP() ((uintptr_t)__builtin_frame_address(0))

/* MALLOCX_TCACHE(tc) naming no live explicit cache: jemalloc aborts. */
static MP_COLD void tcache_index_invalid(const char *func, unsigned tc) {
	mp_error("%s(): MALLOCX_TCACHE(%u): no such cache (never made by "
	    "tcache.create, or destroyed)", func, tc);
	if (opt_abort || config_debug)
		abort();
}

/* true: the flags cannot be honoured (an arena that cannot be had, an
 * explicit cache that does not exist: reported, and left out of *o, so
 * that dallocx, which ignores the result, frees as free would). */
static bool opts_decode(int flags, alloc_opts_t *o, void *entry,
    uintptr_t fp, const char *func) {
	unsigned lg = (unsigned)flags & 0x3f;
	o->entry = entry;
	o->fp = fp;
	o->size = 0;
	o->req = 0;
	o->align = lg != 0 ? (size_t)1 << lg : 0;
	o->zero = (flags & 0x40) != 0;
	/* Bits 8-19: 0 the thread's cache, 1 none, tc + 2 explicit tc. */
	unsigned tc = ((unsigned)flags >> 8) & 0xfff;
	o->tcache_none = tc != 0;
	o->tcache = NULL;
	bool bad = false;
	if (tc >= 2) {
		o->tcache = tcaches_get(tc - 2);
		if (o->tcache == NULL) {
			tcache_index_invalid(func, tc - 2);
			o->tcache_none = false;
			bad = true;
		}
	}
	unsigned a = ((unsigned)flags >> 20) & 0xfff;
	o->arena = NULL;
	if (a != 0) {
		o->arena = arena_get(a - 1, true);
		if (o->arena == NULL)
			return true;
		o->tcache_none = true;
	}
	return bad || lg >= 64;
}

/* The allocation that crossed the thread's sampling threshold.  Internal
 * allocations (reentrancy) and threads being set up or torn down are never
 * sampled; the threshold is redrawn either way, as jemalloc does.
 * Inlined into malloc_sampled (most samples: a frame and the options'
 * copy less, about 20 instructions a sample); prof_event is the rest's. */
MP_INLINE bool prof_event_inline(tsd_t *tsd, void *p, size_t usize,
    size_t req, void *entry, uintptr_t fp) {
	if (!tsd_prof_wait_redraw(tsd, tsd->allocated) || tsd->reentrancy != 0 ||
	    tsd->state != TSD_NOMINAL)
		return false;
	uint64_t since = tsd->allocated - tsd->prof_last_event;
	tsd->prof_last_event = tsd->allocated;
	bool recorded = prof_sample_alloc(tsd, p, usize, req, entry, fp);
	/* A new peak of the live heap: prof_dump.c copies it. */
	if (atomic_load_explicit(&prof_live.bytes, memory_order_relaxed) >=
	    atomic_load_explicit(&prof_peak_next, memory_order_relaxed))
		prof_peak_maybe();
	prof_idump_maybe(since);
	return recorded;
}

static MP_NOINLINE bool prof_event(tsd_t *tsd, void *p, size_t usize,
    const alloc_opts_t *o) {
	return prof_event_inline(tsd, p, usize, o->req, o->entry != NULL ?
	    o->entry : (void *)MP_PUBLIC(malloc), o->fp);
}

/* A new high of active pages noted under some lock: dump now. */
static void tsd_gdump_flush(tsd_t *tsd) {
	if (config_prof && unlikely(tsd->prof_gdump_pending != 0)) {
		size_t pages = tsd->prof_gdump_pending;
		tsd->prof_gdump_pending = 0;
		if (pages > atomic_load_explicit(&prof_gdump_high,
		    memory_order_relaxed))
			prof_gdump_maybe(pages);
	}
}

/* Whether a slow-path call may use the thread's cache.  Allocations made
 * inside the profiler (reentrancy raised) do too: it raises reentrancy
 * only where no cache operation is in progress, and in the arena's shared
 * cache they pinned a slab per arena and size class. */
static bool tsd_cache_usable(const tsd_t *tsd, bool tcache_none) {
	return !tcache_none && tsd->state == TSD_NOMINAL &&
	    tsd->tcache_enabled && tsd->tcache != NULL &&
	    likely(hook_extent_depth == 0);
}

/* After an allocation event of p (usize bytes, already counted): sample it
 * if it crossed the threshold, then any pending gdump.  A small object can
 * be sampled only if it came from the profiler's cache (`samplable`):
 * elsewhere its free would take the fast path and leave its record
 * behind.  One that crossed anyway (prof_active switched meanwhile) just
 * redraws the wait. */
static bool prof_sample_check(tsd_t *tsd, void *p, size_t usize,
    const alloc_opts_t *o, bool samplable) {
	bool recorded = false;
	if (config_prof && unlikely(tsd->allocated >= tsd->prof_sample_at)) {
		if (samplable)
			recorded = prof_event(tsd, p, usize, o);
		else
			tsd_prof_wait_redraw(tsd, tsd->allocated);
	}
	tsd_gdump_flush(tsd);
	return recorded;
}

/*
 * What a large block weighs on the clock of the thread's cache events
 * (GC steps, decay ticks: tsd_event every TSD_EVENT_INTERVAL bytes
 * allocated).  The events pace the GC of the cache bins, whose regions
 * are at most SC_SMALL_MAXCLASS bytes; counted in full, blocks of tens of
 * KiB made a GC step every 14 allocations in bench's midsize (sizes
 * log-uniform to 64 KiB), a third of the allocator's instructions, spent
 * flushing bins the program was still using.  Large blocks do not need
 * the GC to be returned: their frees tick decay themselves, and the few
 * the cache keeps are a bounded budget.
 */
#define LARGE_EVENT_BYTES ((uint64_t)PAGE)

/* alloc_impl's failure: the one place where running out of memory is
 * seen with no allocator lock held (prof_oom_dump). */
static MP_COLD MP_NOINLINE void *alloc_fail(void) {
	if (config_prof && opt_prof_oom_dump)
		prof_oom_dump();
	return NULL;
}

/* Whether this allocation may be a small sample: the profiler on and
 * active, and the thread neither inside the allocator nor starting up
 * or exiting.  alloc_impl and malloc_slow's shortcut both ask. */
static inline bool sample_small_allowed(const tsd_t *tsd) {
	return opt_prof && tsd->reentrancy == 0 &&
	    tsd->state == TSD_NOMINAL &&
	    atomic_load_explicit(&prof_active, memory_order_relaxed);
}

/* A small request served without a cache bin, p (NULL: none), counted in
 * arena's stats.arenas.<i>.bins.<j>.nrequests at once: these paths take a
 * lock or go to the slabs anyway. */
static inline void *small_request(arena_t *arena, unsigned ind, void *p) {
	if (p != NULL)
		atomic_fetch_add_explicit(&arena->bstats[ind].nrequests, 1,
		    memory_order_relaxed);
	return p;
}

/*
 * A small object about to be sampled comes from the prof_cache of the
 * thread's arena (see prof.c), under its prof_cache_mtx: threads spread
 * over arenas sample without a lock or a line in common.  With one
 * prof_cache for all threads (arena 0's), two threads on two cores
 * sampling the same workload (bench's scale with 2 threads) paid 5-7
 * points more CPU time for profiling than with their own: its lock, its
 * bins and its slabs' records went from core to core at every sample.
 * A thread on a manual arena (thread.arena, arenas.create) samples into
 * arena 0's: a manual arena may be destroyed under its samples' records.
 * Its slabs are released to their own arena.
 */
static void *prof_cache_alloc_small(const tsd_t *tsd, unsigned ind) {
	arena_t *pa = tsd->arena;
	if (unlikely(pa == NULL || pa->manual))
		pa = atomic_load_explicit(&arenas[0], memory_order_acquire);
	mp_mutex_lite_lock(&pa->prof_cache_mtx);
	/* A request of the arena, whose slab serves it (nmalloc too). */
	void *p = small_request(pa, ind,
	    tcache_alloc_small(&pa->prof_cache, ind));
	mp_mutex_lite_unlock(&pa->prof_cache_mtx);
	return p;
}

/*
 * A sampled object of a class above a page is promoted, as jemalloc
 * promotes every sampled small object: it gets a block of the smallest
 * large class of its own, from the cache's large bin when it has one,
 * and its record lives in the extent (e->prof), as a large sample's does.
 * The profiler's slabs of those classes held one to three regions, so
 * nearly every such sample set a slab up from the arena and gave it back
 * at its free (bench's xthread: about 1,200 instructions a sample, half
 * of what profiling cost it).  Classes up to a page keep the profiler's
 * cache, whose slabs hold many samples of a class.  Its usable size
 * stays its class's (extent_usize).  Cached blocks start a cache line
 * apart at best (cache_oblivious), so a request aligned further takes
 * the profiler's cache.
 */
static bool promotable(size_t usize, size_t align) {
	return usize > PAGE && usize <= SC_SMALL_MAXCLASS &&
	    align <= (opt_cache_oblivious ? CACHELINE : PAGE);
}

/* The block of a promoted sample; NULL: no memory. */
static void *alloc_promoted(tcache_t *tc, arena_t *arena, size_t align) {
	void *p = NULL;
	if (tc != NULL && SC_LARGE_MINCLASS <= opt_tcache_max)
		p = tcache_alloc_large(tc, SC_NBINS);
	if (p == NULL)
		p = arena_large_alloc(arena, SC_LARGE_MINCLASS, align, false);
	return p;
}

/* A promoted block the profiler did not sample after all (prof_active
 * switched off meanwhile, no memory for its record): a large block like
 * any other then, whose usable size is its extent's: its tail is filled
 * as the rest was (zero: calloc, MALLOCX_ZERO, opt.zero), and the
 * thread's count of bytes allocated says so. */
static void promoted_settle(tsd_t *tsd, void *p, size_t usize, bool zero) {
	extent_t *e = pagemap_lookup(p);
	if (e->kind != EXTENT_LARGE || e->prof != NULL)
		return;
	if (zero)
		memset((char *)p + usize, 0, e->size - usize);
	else if (opt_junk_alloc)
		memset((char *)p + usize, JUNK_ALLOC_BYTE, e->size - usize);
	tsd_count_alloc(tsd, e->size - usize);
}

/* Every allocation that misses the fast path ends here. */
static void *alloc_impl(tsd_t *tsd, size_t usize, size_t align,
    const alloc_opts_t *o) {
	hook_thread_check(tsd);
	unsigned ind = sz_size2index(usize);
	bool zero = o->zero || opt_zero;
	/* MALLOCX_TCACHE(tc): like the thread's cache, without its events
	 * (an explicit cache has no GC: jemalloc's neither). */
	tcache_t *xtc = o->tcache;
	bool use_tcache = tsd_cache_usable(tsd, o->tcache_none);
	if (use_tcache && tsd->fast_owner != NULL) {
		uint64_t weight = usize < LARGE_EVENT_BYTES ? usize :
		    LARGE_EVENT_BYTES;
		if (tsd->allocated + weight >= tsd->cache_event_at)
			tsd_event(tsd);
		if (weight < usize) {
			/* Only `weight` of the bytes counted below moves
			 * the GC clock (tsd.c's tsd_arm, inlined). */
			tsd->cache_event_at += usize - weight;
			tsd->next_event = tsd->cache_event_at <
			    tsd->prof_sample_at ? tsd->cache_event_at :
			    tsd->prof_sample_at;
		}
	}
	arena_t *arena = o->arena;
	if (arena == NULL)
		arena = tsd->arena != NULL ? tsd->arena : arena_get(0, false);
	/* Inside a custom extent hook, whose arena's lock is held: the hook
	 * arena, without a cache (hook.c). */
	if (unlikely(hook_extent_depth != 0)) {
		arena = atomic_load_explicit(&hook_extent_arena,
		    memory_order_acquire);
		xtc = NULL;
	}
	/* An explicit cache fills from the call's arena, as jemalloc's: the
	 * one MALLOCX_ARENA names, else the calling thread's. */
	if (xtc != NULL)
		xtc->arena = arena;
	/* A profiler switch or prof.reset since the wait was drawn: redraw
	 * (a fast-path thread gets here at its next event at the latest),
	 * counted from the start of this allocation, which the new wait may
	 * already cover; before deciding where the object comes from, which
	 * depends on whether it is to be sampled. */
	if (config_prof && opt_prof && unlikely(tsd->prof_wait_gen_seen !=
	    atomic_load_explicit(&prof_wait_gen, memory_order_relaxed)) &&
	    tsd->state == TSD_NOMINAL)
		tsd_prof_wait_redraw(tsd, tsd->allocated);
	void *p;
	bool sample_small = config_prof &&
	    unlikely(tsd->allocated + usize >= tsd->prof_sample_at) &&
	    ind < SC_NBINS && sample_small_allowed(tsd);
	bool promote = sample_small && promotable(usize, align);
	if (ind < SC_NBINS) {
		/* Each branch counts the request (nrequests): a cache bin
		 * in its cache's count, merged later (tcache.c), a fill
		 * in tcache_bin_fill, the rest in the arena's stats.  A
		 * thread on the fast path has its bins on (tsd.c): its
		 * test spares the thread events tsd_cache_bins' loads. */
		if (promote) {
			p = alloc_promoted(xtc != NULL ? xtc : use_tcache ?
			    tsd->tcache : NULL, arena, align);
		} else if (sample_small) {
			p = prof_cache_alloc_small(tsd, ind);
		} else if (use_tcache) {
			if (tsd->fast_owner == NULL && !tsd_cache_bins(tsd)) {
				p = small_request(tsd->tcache->arena, ind,
				    tcache_alloc_small(tsd->tcache, ind));
			} else if (*tsd->bin_cur[ind + 1] != NULL) {
				p = *tsd->bin_cur[ind + 1]++;
				tsd->bin_nreq[ind + 1]++;
			} else {
				p = tcache_bin_fill(tsd->tcache, ind);
			}
		} else if (xtc != NULL) {
			p = tcache_explicit_alloc_small(xtc, ind);
		} else {
			mp_mutex_lock(&arena->shared_mtx);
			p = small_request(arena, ind,
			    tcache_alloc_small(&arena->shared, ind));
			mp_mutex_unlock(&arena->shared_mtx);
		}
		if (p == NULL)
			return alloc_fail();
		if (zero)
			memset(p, 0, usize);
		else if (opt_junk_alloc)
			memset(p, JUNK_ALLOC_BYTE, usize);
	} else {
		p = NULL;
		tcache_t *tc = xtc != NULL ? xtc :
		    use_tcache ? tsd->tcache : NULL;
		/* Cached blocks are page-aligned unless cache_oblivious
		 * offset them (arena.c): then only by a cache line. */
		if (tc != NULL && align <= (opt_cache_oblivious ? CACHELINE :
		    PAGE) && usize <= opt_tcache_max) {
			p = tcache_alloc_large(tc, ind);
			if (p != NULL && zero)
				memset(p, 0, usize);
		}
		if (p == NULL) {
			p = arena_large_alloc_req(arena, usize, align, zero,
			    o->size != 0 ? o->size : usize);
			if (p == NULL)
				return alloc_fail();
		}
		if (!zero && opt_junk_alloc)
			memset(p, JUNK_ALLOC_BYTE, usize);
	}
	tsd_count_alloc(tsd, usize);
	if (!prof_sample_check(tsd, p, usize, o, ind >= SC_NBINS ||
	    sample_small) && promote)
		promoted_settle(tsd, p, usize, zero);
	/* Outside start-up and the profiler: creating a thread allocates. */
	if (tsd->state == TSD_NOMINAL && tsd->reentrancy == 0) {
		background_thread_start_pending();
		prof_http_start_pending();
	}
	return p;
}

/* A pointer this allocator never gave out (or gave back already): reported
 * like any other misuse (mp_misuse). */
static MP_COLD void invalid_pointer(const char *func, void *p) {
	mp_misuse(func, "invalid pointer", p,
	    ": not allocated by malloc_prof or already freed");
}

/* Whether region p of slab e is free: in its free_bits (the caller owns
 * the slab) or its remote bitmap. */
static bool slab_listed(const extent_t *e, const void *p) {
	return slab_free_listed(e, p) || slab_remote_freed(e, p);
}

/* Whether a cache (any: the mark is the record's, tcache.c) holds large
 * block e. */
static bool large_cached(const extent_t *e) {
	return e->list == LARGE_LIST_CACHED;
}

/* Whether p is where its live extent e's block (large) or one of its
 * regions (slab) starts. */
static bool block_start(const void *p, const extent_t *e) {
	if (e->kind == EXTENT_LARGE)
		return (const char *)p == e->addr;
	size_t off = (size_t)((const char *)p - e->addr);
	uint32_t ind = slab_region_index(e, p);
	return ind < e->nregs && off == (size_t)ind * e->usize;
}

/* True (reported) if p is not block_start of e: free and realloc both
 * check. */
static bool interior_misuse(void *p, const extent_t *e, const char *func) {
	if (block_start(p, e))
		return false;
	mp_misuse(func, e->kind == EXTENT_LARGE ? "interior pointer (not a "
	    "block start)" : "interior pointer (not a region start)", p, "");
	return true;
}

/*
 * The misuse checks of a free that reached dalloc_impl (doc/reliability.md,
 * "Misuse"); true if p must not be freed (reported).  Every build checks
 * what costs a few compares on this slow path: a free extent, a large block
 * already in any cache (its record's mark), a pointer into a small region
 * but not at its start, a region free in its slab when this thread's cache
 * (or xtc) owns it.
 * Any double free that reaches a slab is caught there as well (its bit is
 * set already: tcache_free_small / tcache_free_remote).  Debug builds also
 * look into the slabs of the arenas' locked caches.
 */
static bool dalloc_misuse(tsd_t *tsd, void *p, extent_t *e,
    const tcache_t *xtc, const char *func) {
	if (e == NULL) {
		invalid_pointer(func, p);
		return true;
	}
	if (e->kind != EXTENT_SLAB && e->kind != EXTENT_LARGE) {
		if ((char *)p == e->addr)
			mp_misuse(func, "double free of", p, "");
		else
			invalid_pointer(func, p);
		return true;
	}
	if (interior_misuse(p, e, func))
		return true;
	if (e->kind == EXTENT_LARGE) {
		if (large_cached(e)) {
			mp_misuse(func, "double free of", p, "");
			return true;
		}
		return false;
	}
	tcache_t *owner = slab_owner(e);
	bool mine = owner != NULL && (owner == tsd->tcache || owner == xtc);
	if (mine && slab_listed(e, p)) {
		mp_misuse(func, "double free of", p, "");
		return true;
	}
	if (config_debug && !mine && (owner == &e->arena->shared ||
	    owner == &e->arena->prof_cache)) {
		/* An arena's cache (tcache:false, MALLOCX_TCACHE_NONE,
		 * sampled regions): its owner takes the maps under this
		 * lock. */
		bool listed;
		if (owner == &e->arena->shared) {
			mp_mutex_lock(&e->arena->shared_mtx);
			listed = slab_listed(e, p);
			mp_mutex_unlock(&e->arena->shared_mtx);
		} else {
			mp_mutex_lite_lock(&e->arena->prof_cache_mtx);
			listed = slab_listed(e, p);
			mp_mutex_lite_unlock(&e->arena->prof_cache_mtx);
		}
		if (listed) {
			mp_misuse(func, "double free of", p, "");
			return true;
		}
	}
	return false;
}

/* A block's usable size: a promoted sample's is its small class's, which
 * its record holds (alloc_promoted), so that malloc_usable_size, realloc
 * and the thread's counters do not see whether it was sampled; every
 * other large sample's record holds its extent's size. */
static size_t extent_usize(const extent_t *e) {
	if (e->kind == EXTENT_SLAB)
		return e->usize;
	if (config_prof && e->prof != NULL)
		return ((const prof_sample_t *)e->prof)->usize;
	return e->size;
}

/* Every free that misses the fast path ends here.  e may be NULL.  With
 * an explicit cache xtc (MALLOCX_TCACHE) the block goes into it, unless
 * the profiler must see its free. */
static void dalloc_impl(tsd_t *tsd, void *p, extent_t *e, bool tcache_none,
    tcache_t *xtc, const char *func) {
	if (p == NULL)
		return;
	hook_thread_check(tsd);
	if (unlikely(dalloc_misuse(tsd, p, e, xtc, func)))
		return;
	size_t usize = extent_usize(e);
	if (opt_junk_free)
		memset(p, JUNK_FREE_BYTE, usize);
	if (e->kind == EXTENT_SLAB) {
		tcache_t *owner = slab_owner(e);
		if (config_prof && atomic_load_explicit(&e->nsampled,
		    memory_order_relaxed) != 0)
			prof_sample_free_at(p, e, CALLER_FP());
		bool twice;
		if (config_prof && owner == &e->arena->prof_cache) {
			/* Samples are rare: free under the lock, so that the
			 * slab's count is exact at once and an emptied slab
			 * retires without waiting for a collection. */
			arena_t *arena = e->arena;  /* e may retire below */
			mp_mutex_lite_lock(&arena->prof_cache_mtx);
			twice = tcache_free_small(owner, e, p);
			mp_mutex_lite_unlock(&arena->prof_cache_mtx);
		} else if (xtc != NULL) {
			/* Into its cache bin, whoever owns the slab (a
			 * double free shows when the bin is flushed). */
			tcache_explicit_dalloc_small(xtc, e->szind, p);
			twice = false;
		} else if (owner != tsd->tcache || owner == NULL ||
		    unlikely(hook_extent_depth != 0)) {
			/* Inside an extent hook too: a free to the thread's
			 * own slab could retire it to a held arena lock. */
			twice = tcache_free_remote(e, p);
		} else {
			twice = tcache_free_small(owner, e, p);
		}
		if (unlikely(twice)) {
			mp_misuse(func, "double free of", p, "");
			return;
		}
	} else {
		if (config_prof && e->prof != NULL)
			prof_sample_free_at(p, e, CALLER_FP());
		tcache_t *tc = xtc != NULL ? xtc : tsd_cache_usable(tsd,
		    tcache_none) ? tsd->tcache : NULL;
		if (tc == NULL || tcache_dalloc_large(tc, e))
			arena_large_dalloc(e);
	}
	tsd_count_dalloc(tsd, usize);
}

/*
 * The cache's large blocks (up to tcache_max: bench's midsize has one
 * allocation in six there) without alloc_impl and dalloc_impl, whose
 * tests for every special case cost 250 and 165 instructions a call
 * around a pop or push of 20.  Only for a thread on the fast paths
 * (fast_owner: a cache with bins, no junk, no zero, not inside the
 * allocator) and, on the malloc side, with no cache event due; NULL /
 * false: the general path.  A block due to be sampled takes this path
 * too (a large sample lives in its extent, wherever the block came
 * from): the caller sees allocated past prof_sample_at and samples it;
 * so does a sampled block's free, which gives the sample back first.
 * Most of bench's midsize samples are such blocks.
 */
static void *alloc_large_cached(tsd_t *tsd, unsigned ind) {
	size_t usize = sz_index2size(ind);
	if (tsd->fast_owner == NULL || usize > opt_tcache_max ||
	    tsd->allocated + LARGE_EVENT_BYTES >= tsd->cache_event_at)
		return NULL;
	void *p = tcache_alloc_large(tsd->tcache, ind);
	if (p == NULL)
		return NULL;
	tsd->allocated += usize;
	/* As alloc_impl weighs it: LARGE_EVENT_BYTES on the GC clock. */
	tsd->cache_event_at += usize - LARGE_EVENT_BYTES;
	tsd->next_event = tsd->cache_event_at < tsd->prof_sample_at ?
	    tsd->cache_event_at : tsd->prof_sample_at;
	return p;
}

/* A sampled block (dalloc_large_cached's checks of a block that is not in
 * a cache: its first free took e->prof): the sample given back, then the
 * block into the cache or, refused, to the arena, as dalloc_impl would.
 * Out of line: free_slow would otherwise save more registers at every
 * call. */
static MP_NOINLINE bool dalloc_large_sampled(tsd_t *tsd, void *p,
    extent_t *e, tcache_t *tc, uintptr_t fp) {
	/* Before the record goes: a promoted block's is its class's. */
	size_t usize = extent_usize(e);
	prof_sample_free_at(p, e, fp);
	if ((unsigned)e->szind - SC_NBINS >= TCACHE_NLARGE ||
	    tcache_dalloc_large(tc, e))
		arena_large_dalloc(e);
	tsd->deallocated += usize;
	return true;
}

/* The same for free: p's page is tagged with a large class.  A pointer
 * inside the block, a sampled block or one the cache holds already (a
 * double free) goes to dalloc_impl, which reports or handles it. */
static bool dalloc_large_cached(tsd_t *tsd, void *p, uintptr_t entry,
    uintptr_t fp) {
	extent_t *e = pagemap_entry_extent(entry);
	tcache_t *tc = tsd->fast_owner;
	if (tc == NULL || e->kind != EXTENT_LARGE || (char *)p != e->addr)
		return false;
	/* Never in a cache: its first free took e->prof. */
	if (config_prof && unlikely(e->prof != NULL))
		return dalloc_large_sampled(tsd, p, e, tc, fp);
	unsigned li = (unsigned)e->szind - SC_NBINS;
	if (li >= TCACHE_NLARGE)
		return false;
	if (large_cached(e))
		return false;
	size_t usize = e->size;
	if (tcache_dalloc_large(tc, e))
		return false;
	tsd->deallocated += usize;
	return true;
}

/*
 * The same for a small class whose bin malloc_fast found empty, with no
 * event or sample due (the fast path's own test): the bin's fill without
 * alloc_impl, whose tests cost about 150 instructions a fill (bench's
 * xthread, whose bins of 1-14 KiB run dry several times a loop: 1.5% of
 * its instructions).  What alloc_impl does at every call goes there: a
 * thread inside an extent hook (its arena's lock held: the fill would
 * deadlock), hooks installed or a sampling rate changed since the
 * thread last looked.  NULL: the general path.
 */
static void *alloc_small_fill(tsd_t *tsd, unsigned ind, size_t usize) {
	tcache_t *tc = tsd->fast_owner;
	if (tc == NULL || tsd->allocated + usize >= tsd->next_event ||
	    unlikely(hook_extent_depth != 0) ||
	    unlikely(hook_gen_seen != atomic_load_explicit(&hook_gen,
	    memory_order_relaxed)))
		return NULL;
	if (config_prof && opt_prof && unlikely(tsd->prof_wait_gen_seen !=
	    atomic_load_explicit(&prof_wait_gen, memory_order_relaxed)))
		return NULL;
	void **cur = tsd->bin_cur[ind + 1];
	void *p;
	if (*cur != NULL) {
		tsd->bin_cur[ind + 1] = cur + 1;
		tsd->bin_nreq[ind + 1]++;
		p = *cur;
	} else {
		p = tcache_bin_fill(tc, ind);   /* counts the request */
		if (p == NULL)
			return NULL;
	}
	tsd->allocated += usize;
	return p;
}

/*
 * The same for a small block due to be sampled: alloc_impl's
 * sample_small branch (a region of its arena's prof_cache, under its lock)
 * without alloc_impl's tests for every special case (about 150
 * instructions a sample), when none applies: a thread on the fast paths
 * and not inside the allocator or the profiler, no cache event due, no
 * hooks, no sampling switch since its wait was drawn, the profiler
 * active.  The caller samples it.  NULL: the general path.
 */
static MP_NOINLINE void *alloc_small_sampled(tsd_t *tsd, unsigned ind,
    size_t usize) {
	if (!config_prof || tsd->fast_owner == NULL ||
	    tsd->allocated + usize < tsd->prof_sample_at ||
	    tsd->allocated + usize >= tsd->cache_event_at ||
	    unlikely(hook_extent_depth != 0) ||
	    unlikely(hook_gen_seen != atomic_load_explicit(&hook_gen,
	    memory_order_relaxed)) ||
	    tsd->prof_wait_gen_seen != atomic_load_explicit(&prof_wait_gen,
	    memory_order_relaxed) || !sample_small_allowed(tsd))
		return NULL;
	void *p = promotable(usize, 0) ? alloc_promoted(tsd->fast_owner,
	    tsd->arena != NULL ? tsd->arena : arena_get(0, false), 0) :
	    prof_cache_alloc_small(tsd, ind);
	if (p != NULL)
		tsd->allocated += usize;
	return p;
}

/* Sample p, which malloc_slow's shortcuts above took past the sampling
 * threshold (req bytes asked for), and return it.  Tail-called, so that
 * its frame is where malloc_slow's was: the backtrace starts there. */
static MP_NOINLINE void *malloc_sampled(tsd_t *tsd, void *p, size_t usize,
    size_t req) {
	if (!prof_event_inline(tsd, p, usize, req, (void *)MP_PUBLIC(malloc),
	    CALLER_FP()) && promotable(usize, 0))
		promoted_settle(tsd, p, usize, opt_zero);
	tsd_gdump_flush(tsd);
	return p;
}

static MP_NOINLINE void *malloc_slow(size_t size) {
	tsd_t *tsd = tsd_fetch();
	if (unlikely(!malloc_initialized))
		goto oom;
	/* sz_s2u, keeping the index. */
	if (unlikely(size > SC_LARGE_MAXCLASS))
		goto oom;
	unsigned ind = sz_size2index(size);
	size_t usize = sz_index2size(ind);
	void *q = ind >= SC_NBINS ? alloc_large_cached(tsd, ind) :
	    alloc_small_fill(tsd, ind, usize);
	if (q != NULL) {
		/* A cached large block past the sampling threshold. */
		if (config_prof && unlikely(tsd->allocated >=
		    tsd->prof_sample_at))
			return malloc_sampled(tsd, q, usize, size);
		return q;
	}
	if (config_prof && ind < SC_NBINS && unlikely(tsd->allocated +
	    usize >= tsd->prof_sample_at)) {
		q = alloc_small_sampled(tsd, ind, usize);
		if (q != NULL)
			return malloc_sampled(tsd, q, usize, size);
	}
	alloc_opts_t o = {.entry = (void *)MP_PUBLIC(malloc),
	    .fp = CALLER_FP(), .req = size};
	void *p = alloc_impl(tsd, usize, 0, &o);
	if (p == NULL)
		goto oom;
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_MALLOC, p, (uintptr_t)p, size, 0, 0);
	return p;
oom:
	XMALLOC_CHECK(NULL, "malloc", size);
	errno = ENOMEM;
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_MALLOC, NULL, 0, size, 0, 0);
	return NULL;
}

/*
 * A free whose page has no tag: a sampled small region, in the profiler's
 * slabs (an arena's prof_cache), or a pointer no block starts at.  The
 * region goes back under the cache's lock, as dalloc_impl's prof_cache
 * branch does, without dalloc_impl's tests for every other case (about 90
 * instructions of each such free, and free_slow's call of it 50 more):
 * only for a thread on the fast paths (fast_owner: no junk, not inside
 * the allocator), outside extent hooks, with no hook installed since it
 * last looked, and p a region start of such a slab.  Debug builds take
 * the general path, which checks the slab's free regions for a double
 * free first.  false: the general path.
 */
static MP_NOINLINE bool dalloc_small_sampled(tsd_t *tsd, void *p,
    uintptr_t entry, uintptr_t fp) {
	extent_t *e = pagemap_entry_extent(entry);
	if (config_debug || tsd->fast_owner == NULL || e == NULL ||
	    e->kind != EXTENT_SLAB || unlikely(hook_extent_depth != 0) ||
	    unlikely(hook_gen_seen != atomic_load_explicit(&hook_gen,
	    memory_order_relaxed)))
		return false;
	arena_t *arena = e->arena;   /* e may retire below */
	if (slab_owner(e) != &arena->prof_cache || !block_start(p, e))
		return false;
	size_t usize = e->usize;
	if (atomic_load_explicit(&e->nsampled, memory_order_relaxed) != 0)
		prof_sample_free_at(p, e, fp);
	mp_mutex_lite_lock(&arena->prof_cache_mtx);
	bool twice = tcache_free_small(&arena->prof_cache, e, p);
	mp_mutex_lite_unlock(&arena->prof_cache_mtx);
	if (unlikely(twice)) {
		mp_misuse("free", "double free of", p, "");
		return true;
	}
	tsd_count_dalloc(tsd, usize);
	return true;
}

/* Every free whose tag the fast path could not push: NULL, a full bin,
 * a page without a tag (large blocks past the first page, sampled
 * regions, garbage), a thread whose bins are off, or no flat tag table
 * (then the tree's tag may still find room in the bin). */
static MP_NOINLINE void free_slow(void *p) {
	if (p == NULL)
		return;
	tsd_t *tsd = &mp_tsd;
	uintptr_t entry = pagemap_lookup_entry(p);
	unsigned ind = (unsigned)(entry & PAGEMAP_TAG_MASK) - 1;
	if (ind < SC_NBINS && tsd_cache_bins(tsd)) {
		if ((uint32_t)(uintptr_t)tsd->bin_cur[ind + 1] ==
		    tsd->bin_full[ind + 1])
			tcache_bin_overflow(tsd->tcache, ind);
		*--tsd->bin_cur[ind + 1] = p;
		tsd->deallocated += sz_index2size_tab[ind];
		return;
	}
	/* A large block's tag is on its first page only (pagemap.c). */
	if (ind >= SC_NBINS && ind < PAGEMAP_TAG_MASK &&
	    dalloc_large_cached(tsd, p, entry, CALLER_FP()))
		return;
	if (config_prof && ind == (unsigned)-1 &&
	    dalloc_small_sampled(tsd, p, entry, CALLER_FP()))
		return;
	/* Only here: a thread that has seen the hooks has no cache bins and
	 * no fast_owner, so its frees all come here; one that has not seen
	 * them yet is not reported. */
	if (unlikely(hook_active()))
		hook_dalloc(HOOK_DALLOC_FREE, p, (uintptr_t)p, 0, 0);
	dalloc_impl(tsd_fetch(), p, pagemap_entry_extent(entry), false, NULL,
	    "free");
}

/* Aligned allocation for posix_memalign and friends; errno untouched. */
static void *alloc_aligned(size_t size, size_t align, int flags,
    void *entry, uintptr_t fp) {
	tsd_t *tsd = tsd_fetch();
	if (unlikely(!malloc_initialized))
		return NULL;
	alloc_opts_t o;
	if (opts_decode(flags, &o, entry, fp, "mallocx"))
		return NULL;
	if (align < o.align)
		align = o.align;
	size_t usize = align > QUANTUM ? sz_sa2u(size, align) : sz_s2u(size);
	if (usize == 0)
		return NULL;
	o.req = size;
	return alloc_impl(tsd, usize, align > QUANTUM ? align : 0, &o);
}

/* ------------------------------------------------------ public API */

/*
 * Size (by quantum, up to SC_LOOKUP_MAX) -> class tag (szind + 1, what
 * indexes the cache bins), for malloc's fast path (each thread's copy in
 * tsd, size_tags: read at a fixed TLS offset, it costs no load of a table
 * address, and that instruction pays for the count of the bin's requests)
 * and the sized frees' (free_sized_tags, a global).  All zero before
 * they are filled, tag 0 naming a bin that is always off.
 * sz_size2index_tab would cost the fast paths an add of the 1.
 *
 * free_sized_tags stays zero with prof:true: a sampled small region sits
 * in the profiler's slabs, untagged in the page map, and its free must
 * reach the profiler, which only the page map can tell, so every sized
 * free takes free's path then.  The one table lookup serves both the
 * class and that switch.  Relaxed atomics: the bytes are written once,
 * before malloc_initialized is published.
 */
static _Atomic uint8_t free_sized_tags[SC_LOOKUP_LEN];

void malloc_sized_boot(void) {
	for (size_t q = 0; q < SC_LOOKUP_LEN; q++) {
		uint8_t tag = (uint8_t)(sz_size2index_tab[q] + 1);
		if (!config_prof || !opt_prof)
			atomic_store_explicit(&free_sized_tags[q], tag,
			    memory_order_relaxed);
	}
}

/* 897 bytes of TLS per thread, written once at its start (tsd_init),
 * eight tags a step (a byte loop was about 5,400 instructions a thread:
 * gcc's -O2 does not vectorise it).  No index in the table is 255, so
 * adding 1 to every byte of a word carries into no neighbour. */
_Static_assert(SC_NSIZES <= 255, "a class index + 1 fits a byte");
void malloc_size_tags_copy(uint8_t *tags) {
	const uint64_t ones = 0x0101010101010101u;
	size_t q = 0;
	for (; q + 8 <= SC_LOOKUP_LEN; q += 8) {
		uint64_t w;
		memcpy(&w, &sz_size2index_tab[q], sizeof(w));
		w += ones;
		memcpy(&tags[q], &w, sizeof(w));
	}
	for (; q < SC_LOOKUP_LEN; q++)
		tags[q] = (uint8_t)(sz_size2index_tab[q] + 1);
}

/* malloc's fast path: a block of size's class from the thread's cache
 * bin, or NULL for the slow path (too big, an event due, the bin empty).
 * malloc and C++'s operator new differ only in what follows a NULL.
 * Every pop counts a request of the bin (bin_nreq: one `incq`, the
 * stats' nrequests, merged into the arena's in batches by tcache.c). */
MP_INLINE void *malloc_fast(size_t size) {
	tsd_t *tsd = &mp_tsd;
	if (likely(size <= SC_LOOKUP_MAX)) {
		size_t tag = tsd->size_tags[(size + (QUANTUM - 1)) >>
		    LG_QUANTUM];
		/* bin_usize is 0 in a thread not set up yet, and so is its
		 * tag table, where next_event is 0 too: the compare fails
		 * all the same. */
		uint64_t allocated = tsd->allocated + tsd->bin_usize[tag];
		if (likely(allocated < tsd->next_event)) {
			/* The bin's NULL sentinel says it is empty. */
			void **cur = tsd->bin_cur[tag];
			void *p = *cur;
			if (likely(p != NULL)) {
				tsd->bin_cur[tag] = cur + 1;
				tsd->allocated = allocated;
				tsd->bin_nreq[tag]++;
				return p;
			}
		}
	}
	return NULL;
}

MP_EXPORT void *MP_PUBLIC(malloc)(size_t size) {
	void *p = malloc_fast(size);
	if (likely(p != NULL))
		return p;
	return malloc_slow(size);
}

/* free's fast path: push p on the thread's cache bin of class tag `tag`
 * unless it is full or off (tag 0 and the tags past the small classes
 * are always off); false: not done. */
MP_INLINE bool free_push(void *p, size_t tag) {
	tsd_t *tsd = &mp_tsd;
	void **cur = tsd->bin_cur[tag];
	if (likely((uint32_t)(uintptr_t)cur != tsd->bin_full[tag])) {
		tsd->bin_cur[tag] = --cur;
		*cur = p;
		tsd->deallocated += tsd->bin_usize[tag];
		return true;
	}
	return false;
}

/* free's fast path for p, whose page-map entry the caller has read. */
MP_INLINE void free_entry(void *p, uintptr_t entry) {
	if (likely(free_push(p, entry & PAGEMAP_TAG_MASK)))
		return;
	free_slow(p);
}

/* The tag comes from the flat table (pagemap.c): a garbage pointer finds
 * tag 0 there, or fails its bound, and free_slow reports it. */
MP_EXPORT void MP_PUBLIC(free)(void *p) {
	if (likely(free_push(p, pagemap_lookup_tag(p))))
		return;
	free_slow(p);
}

MP_EXPORT void *MP_PUBLIC(calloc)(size_t n, size_t size) {
	size_t total;
	if (unlikely(__builtin_mul_overflow(n, size, &total))) {
		XMALLOC_CHECK(NULL, "calloc", SIZE_MAX);
		errno = ENOMEM;
		return NULL;
	}
	tsd_t *tsd = tsd_fetch();
	size_t usize = sz_s2u(total);
	if (unlikely(!malloc_initialized || usize == 0)) {
		XMALLOC_CHECK(NULL, "calloc", total);
		errno = ENOMEM;
		return NULL;
	}
	alloc_opts_t o = {.zero = true, .entry = (void *)MP_PUBLIC(calloc),
	    .fp = CALLER_FP(), .size = total, .req = total};
	void *p = alloc_impl(tsd, usize, 0, &o);
	if (p == NULL) {
		XMALLOC_CHECK(p, "calloc", total);
		errno = ENOMEM;
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_CALLOC, p, (uintptr_t)p, n, size, 0);
	return p;
}

MP_EXPORT int MP_PUBLIC(posix_memalign)(void **memptr, size_t align,
    size_t size) {
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	void *p = alloc_aligned(size, align, 0, (void *)MP_PUBLIC(posix_memalign),
	    CALLER_FP());
	int ret = 0;
	if (p == NULL) {
		XMALLOC_CHECK(p, "posix_memalign", size);
		ret = ENOMEM;
	} else {
		*memptr = p;
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_POSIX_MEMALIGN, p, (uintptr_t)ret,
		    (uintptr_t)memptr, align, size);
	return ret;
}

MP_EXPORT void *MP_PUBLIC(aligned_alloc)(size_t align, size_t size) {
	if (align == 0 || (align & (align - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	void *p = alloc_aligned(size, align, 0, (void *)MP_PUBLIC(aligned_alloc),
	    CALLER_FP());
	if (p == NULL) {
		XMALLOC_CHECK(p, "aligned_alloc", size);
		errno = ENOMEM;
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_ALIGNED_ALLOC, p, (uintptr_t)p, align,
		    size, 0);
	return p;
}

MP_EXPORT void *MP_PUBLIC(memalign)(size_t align, size_t size) {
	/* glibc rounds a non-power-of-two alignment up. */
	if (align > ((size_t)1 << 62)) {
		errno = EINVAL;
		return NULL;
	}
	if ((align & (align - 1)) != 0)
		align = (size_t)1 << (64 - __builtin_clzl(align));
	void *p = alloc_aligned(size, align, 0, (void *)MP_PUBLIC(memalign),
	    CALLER_FP());
	if (p == NULL) {
		XMALLOC_CHECK(p, "memalign", size);
		errno = ENOMEM;
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_MEMALIGN, p, (uintptr_t)p, align, size,
		    0);
	return p;
}

MP_EXPORT void *MP_PUBLIC(valloc)(size_t size) {
	void *p = alloc_aligned(size, PAGE, 0, (void *)MP_PUBLIC(valloc),
	    CALLER_FP());
	if (p == NULL) {
		XMALLOC_CHECK(p, "valloc", size);
		errno = ENOMEM;
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_VALLOC, p, (uintptr_t)p, size, 0, 0);
	return p;
}

MP_EXPORT void *MP_PUBLIC(pvalloc)(size_t size) {
	size_t rounded = PAGE_CEILING(size);
	if (rounded < size) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = alloc_aligned(rounded == 0 ? PAGE : rounded, PAGE, 0,
	    (void *)MP_PUBLIC(pvalloc), CALLER_FP());
	if (p == NULL) {
		XMALLOC_CHECK(p, "pvalloc", size);
		errno = ENOMEM;
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_VALLOC, p, (uintptr_t)p, size, 0, 0);
	return p;
}

MP_EXPORT size_t MP_PUBLIC(malloc_usable_size)(void *p) {
	if (p == NULL)
		return 0;
	extent_t *e = pagemap_lookup(p);
	if (e == NULL || (e->kind != EXTENT_SLAB && e->kind != EXTENT_LARGE))
		return 0;
	return extent_usize(e);
}

/* A large block resized in place is a new allocation of usize bytes to the
 * profiler, as in jemalloc: its old sample goes, and it may be sampled
 * where it is (a large sample lives in extent->prof, so nothing moves). */
static void resized_in_place(tsd_t *tsd, void *p, extent_t *e, size_t usize,
    size_t old, const alloc_opts_t *o) {
	if (config_prof && e->prof != NULL)
		prof_sample_free(p, e);
	tsd_count_alloc(tsd, usize);
	tsd_count_dalloc(tsd, old);
	prof_sample_check(tsd, p, usize, o, true);
}

/*
 * Resize: in place when the class does not change or a large block can
 * grow or shrink where it is; else allocate, copy, free.  The old block is
 * untouched when the new one cannot be had.
 */
static void *ralloc_impl(void *p, size_t size, int flags, const char *func,
    void *entry, uintptr_t fp) {
	tsd_t *tsd = tsd_fetch();
	extent_t *e = pagemap_lookup(p);
	if (e == NULL || (e->kind != EXTENT_SLAB && e->kind != EXTENT_LARGE)) {
		invalid_pointer(func, p);
		errno = EINVAL;
		return NULL;
	}
	/* Before the in-place paths, which would hand an interior pointer
	 * back as if it were the block. */
	if (interior_misuse(p, e, func)) {
		errno = EINVAL;
		return NULL;
	}
	alloc_opts_t o;
	if (opts_decode(flags, &o, entry, fp, func))
		return NULL;
	size_t align = o.align > QUANTUM ? o.align : 0;
	size_t usize = align ? sz_sa2u(size, align) : sz_s2u(size);
	if (usize == 0)
		return NULL;
	o.req = size;
	size_t old = extent_usize(e);
	bool aligned = align == 0 || ((uintptr_t)p & (align - 1)) == 0;
	bool same_arena = o.arena == NULL || o.arena == e->arena;
	bool hooks = hook_active();
	bool is_realloc = entry == (void *)MP_PUBLIC(realloc);
	/* Within its size class a realloc allocates nothing, and unlike
	 * jemalloc we count nothing (thread.allocated, the sampling
	 * threshold), as tcmalloc does: a buffer grown a byte at a time is
	 * not re-sampled for memory it already had, and the bytes do not
	 * trigger a sample on some later, unrelated allocation with the
	 * weight of a whole period. */
	if (aligned && same_arena && usize == old && !opt_junk_alloc)
		goto in_place;
	/* Growth in place takes no clean pages while dirty ones could hold
	 * the block (prefer_dirty): then it moves, as its copy costs less
	 * than pages faulted in and left resident beside dirty ones. */
	if (aligned && same_arena && e->kind == EXTENT_LARGE &&
	    usize >= SC_LARGE_MINCLASS &&
	    !arena_large_resize(e, usize, o.zero || opt_zero, true)) {
		resized_in_place(tsd, p, e, usize, old, &o);
		goto in_place;
	}
	void *q = alloc_impl(tsd, usize, align, &o);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < size ? old : size);
	if ((o.zero || opt_zero) && usize > old)
		memset((char *)q + old, 0, usize - old);
	if (unlikely(hooks)) {
		hook_alloc(is_realloc ? HOOK_ALLOC_REALLOC : HOOK_ALLOC_RALLOCX,
		    q, (uintptr_t)q, (uintptr_t)p, size, (uintptr_t)flags);
		hook_dalloc(is_realloc ? HOOK_DALLOC_REALLOC :
		    HOOK_DALLOC_RALLOCX, p, (uintptr_t)p, size,
		    (uintptr_t)flags);
	}
	/* A large block a realloc grew out of goes to the arena, not the
	 * thread's large cache: the buffer will not need its size again,
	 * and in the arena it merges with its free neighbours into room for
	 * the next growth (bench's realloc, 256 buffers grown to 1-256 KiB:
	 * peak RSS 15.8 -> 14.5 MB; the cache kept up to 2 MiB of such
	 * blocks out of reach). */
	dalloc_impl(tsd, p, e, o.tcache_none || (e->kind == EXTENT_LARGE &&
	    usize > old), o.tcache, func);
	return q;
in_place:
	if (unlikely(hooks))
		hook_expand(is_realloc ? HOOK_EXPAND_REALLOC :
		    HOOK_EXPAND_RALLOCX, p, old, usize, (uintptr_t)p,
		    (uintptr_t)p, size, (uintptr_t)flags, 0);
	return p;
}

/*
 * Whether `size` falls in size class `szind` of the block p, whose page
 * entry (tagged) carries that class (pagemap.c): then realloc has nothing
 * to do.  A tagged large block's entry is its first page, so a
 * page-aligned p there is the block's start; any other p goes to
 * ralloc_impl, which reports it.  With cache_oblivious a block may start
 * inside that page (arena.c narrows its record to the block), so the
 * record's address decides: a page-aligned p before the block is no
 * block's start.  A promoted sample's block carries the smallest large
 * class while its usable size is its small class's (alloc_promoted):
 * ralloc_impl resizes it.
 */
static bool realloc_same_class(uintptr_t entry, const void *p,
    size_t size) {
	unsigned szind = (unsigned)(entry & PAGEMAP_TAG_MASK) - 1;
	if (size > sz_index2size_tab[szind] || (szind != 0 &&
	    size <= sz_index2size_tab[szind - 1]))
		return false;
	if (szind < SC_NBINS)
		return true;
	if (config_prof && szind == SC_NBINS &&
	    pagemap_entry_extent(entry)->prof != NULL)
		return false;
	if (unlikely(opt_cache_oblivious))
		return pagemap_entry_extent(entry)->addr == p;
	return ((uintptr_t)p & PAGE_MASK) == 0;
}

/*
 * realloc of small block p (page-map entry `entry`, tagged) to `size`,
 * another class, through the fast paths: a block from the thread's cache
 * bin (malloc_fast: it counts thread.allocated and leaves any sampling
 * event, an empty bin or a size past the small classes to the slow
 * path), the copy of the old block's usable size or `size` if less, and
 * free's fast path for the old block.  NULL (nothing done) sends the call
 * to ralloc_impl.  p must be a region's start, as ralloc_impl would
 * check: an interior pointer would be cached as a region by the push.
 */
MP_INLINE void *realloc_small_move(void *p, uintptr_t entry, size_t size) {
	const extent_t *slab = pagemap_entry_extent(entry);
	size_t old = sz_index2size_tab[(entry & PAGEMAP_TAG_MASK) - 1];
	if (unlikely((size_t)slab_region_index(slab, p) * old !=
	    (size_t)((char *)p - slab->addr)))
		return NULL;
	void *q = malloc_fast(size);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old < size ? old : size);
	free_entry(p, entry);
	return q;
}

_Atomic size_t malloc_zero_reallocs;

/* realloc(NULL, size) and realloc(p, 0) with the hooks: reported as
 * realloc's, not as the malloc or free they are. */
static MP_NOINLINE void *realloc_hooked(void *p, size_t size) {
	bool report = hook_enter();
	if (p == NULL) {
		void *q = MP_PUBLIC(malloc)(size);
		if (report) {
			hook_exit();
			hook_alloc(HOOK_ALLOC_REALLOC, q, (uintptr_t)q, 0, size,
			    0);
		}
		return q;
	}
	if (report) {
		hook_exit();
		hook_dalloc(HOOK_DALLOC_REALLOC, p, (uintptr_t)p, 0, 0);
		report = hook_enter();
	}
	MP_PUBLIC(free)(p);
	if (report)
		hook_exit();
	return NULL;
}

/* realloc's shortcuts below are off while realloc_shortcut_off (hook.c)
 * is set: with junk:alloc and while hooks are installed. */
MP_EXPORT void *MP_PUBLIC(realloc)(void *p, size_t size) {
	bool shortcut_off = atomic_load_explicit(&realloc_shortcut_off,
	    memory_order_relaxed);
	if (p == NULL) {
		if (unlikely(shortcut_off) && hook_active())
			return realloc_hooked(p, size);
		return MP_PUBLIC(malloc)(size);
	}
	/* A buffer grown a little at a time mostly stays in its class: one
	 * page-map lookup and two compares, without touching the extent. */
	uintptr_t entry = pagemap_lookup_entry(p);
	uintptr_t tag = entry & PAGEMAP_TAG_MASK;
	if (likely(tag != 0 && size != 0 && !shortcut_off)) {
		if (realloc_same_class(entry, p, size))
			return p;
		/* A small block moving to another small class: malloc's and
		 * free's fast paths around the copy (ralloc_impl's general
		 * path cost about 500 instructions, ten malloc+free pairs). */
		if (tag - 1 < SC_NBINS) {
			void *q = realloc_small_move(p, entry, size);
			if (q != NULL)
				return q;
		}
	}
	if (size == 0) {
		atomic_fetch_add_explicit(&malloc_zero_reallocs, 1,
		    memory_order_relaxed);
		switch (opt_zero_realloc) {
		case ZERO_REALLOC_FREE:
			if (unlikely(hook_active()))
				return realloc_hooked(p, 0);
			MP_PUBLIC(free)(p);
			return NULL;
		case ZERO_REALLOC_ABORT:
			mp_abort("realloc(%p, 0) with zero_realloc:abort", p);
		default:
			break;
		}
	}
	void *q = ralloc_impl(p, size, 0, "realloc",
	    (void *)MP_PUBLIC(realloc), CALLER_FP());
	/* An invalid or interior pointer keeps its EINVAL. */
	extent_t *e = q == NULL ? pagemap_lookup(p) : NULL;
	if (e != NULL && (e->kind == EXTENT_SLAB || e->kind == EXTENT_LARGE) &&
	    block_start(p, e)) {
		XMALLOC_CHECK(q, "realloc", size);
		errno = ENOMEM;
	}
	return q;
}

MP_EXPORT void *MP_PUBLIC(reallocarray)(void *p, size_t n, size_t size) {
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return MP_PUBLIC(realloc)(p, total);
}

/* ---------------------------------------------- jemalloc's *allocx API */

MP_EXPORT void *MP_PUBLIC(mallocx)(size_t size, int flags) {
	if (flags == 0 && likely(!hook_active()))
		return MP_PUBLIC(malloc)(size);
	void *p;
	if (flags == 0) {
		bool report = hook_enter();
		p = MP_PUBLIC(malloc)(size);
		if (report)
			hook_exit();
	} else {
		p = alloc_aligned(size, 0, flags, (void *)MP_PUBLIC(mallocx),
		    CALLER_FP());
		XMALLOC_CHECK(p, "mallocx", size);
	}
	if (unlikely(hook_active()))
		hook_alloc(HOOK_ALLOC_MALLOCX, p, (uintptr_t)p, size,
		    (uintptr_t)flags, 0);
	return p;
}

MP_EXPORT void *MP_PUBLIC(rallocx)(void *p, size_t size, int flags) {
	void *q = ralloc_impl(p, size, flags, "rallocx",
	    (void *)MP_PUBLIC(rallocx), CALLER_FP());
	XMALLOC_CHECK(q, "rallocx", size);
	return q;
}

static size_t xallocx_impl(void *p, size_t size, size_t extra, int flags,
    uintptr_t fp) {
	tsd_t *tsd = tsd_fetch();
	extent_t *e = pagemap_lookup(p);
	if (e == NULL || (e->kind != EXTENT_SLAB && e->kind != EXTENT_LARGE)) {
		invalid_pointer("xallocx", p);
		return 0;
	}
	size_t old = extent_usize(e);
	if (size > SC_LARGE_MAXCLASS)
		return old;
	if (extra > SC_LARGE_MAXCLASS - size)
		extra = SC_LARGE_MAXCLASS - size;
	size_t lo = sz_s2u(size), hi = sz_s2u(size + extra);
	if (old >= lo && old <= hi)
		return old;
	if (e->kind != EXTENT_LARGE || lo < SC_LARGE_MINCLASS)
		return old;
	bool zero = (flags & 0x40) != 0 || opt_zero;
	size_t target;
	if (old < lo) {
		/* Growing: as much as allowed, else at least what was asked. */
		if (!arena_large_resize(e, hi, zero, false))
			target = hi;
		else if (hi != lo && !arena_large_resize(e, lo, zero, false))
			target = lo;
		else
			return old;
	} else {
		if (arena_large_resize(e, hi, zero, false))
			return old;
		target = hi;
	}
	alloc_opts_t o = {.entry = (void *)MP_PUBLIC(xallocx), .fp = fp};
	resized_in_place(tsd, p, e, target, old, &o);
	return target;
}

MP_EXPORT size_t MP_PUBLIC(xallocx)(void *p, size_t size, size_t extra,
    int flags) {
	if (likely(!hook_active()))
		return xallocx_impl(p, size, extra, flags, CALLER_FP());
	size_t old = MP_PUBLIC(malloc_usable_size)(p);
	size_t usize = xallocx_impl(p, size, extra, flags, CALLER_FP());
	if (old != 0)
		hook_expand(HOOK_EXPAND_XALLOCX, p, old, usize, usize,
		    (uintptr_t)p, size, extra, (uintptr_t)flags);
	return usize;
}

MP_EXPORT size_t MP_PUBLIC(sallocx)(const void *p, int flags) {
	return MP_PUBLIC(malloc_usable_size)((void *)p);
}

static void dallocx_impl(void *p, int flags) {
	if ((flags & (0xfff << 8)) == 0) {
		MP_PUBLIC(free)(p);
		return;
	}
	alloc_opts_t o;
	opts_decode(flags, &o, NULL, 0, "dallocx");
	dalloc_impl(tsd_fetch(), p, pagemap_lookup(p), o.tcache_none, o.tcache,
	    "dallocx");
}

/* dallocx and sdallocx with the hooks: reported under their own type,
 * the free inside muted. */
static MP_NOINLINE void dallocx_hooked(void *p, int flags, int type,
    uintptr_t a1, uintptr_t a2) {
	if (p != NULL)
		hook_dalloc(type, p, (uintptr_t)p, a1, a2);
	bool report = hook_enter();
	dallocx_impl(p, flags);
	if (report)
		hook_exit();
}

MP_EXPORT void MP_PUBLIC(dallocx)(void *p, int flags) {
	if (unlikely(hook_active())) {
		dallocx_hooked(p, flags, HOOK_DALLOC_DALLOCX, (uintptr_t)flags,
		    0);
		return;
	}
	dallocx_impl(p, flags);
}

/*
 * The sized frees (free_sized, free_aligned_sized with an alignment of at
 * most QUANTUM, sdallocx without flags, C++'s sized deletes) take the
 * class from the size instead of the page map, as jemalloc's sized
 * deallocation does: the size's class tag indexes the thread's cache bins
 * directly.  The caller promises the size (C23, C++): in a release build a
 * wrong size files the block under the wrong class, and a pointer this
 * allocator never gave out is pushed as it is, unreported (jemalloc's
 * sized delete does the same).  Debug builds first check the size (and
 * alignment) against the block's and abort on a mismatch, as sdallocx
 * does.  Unsized free keeps the page-map lookup and its garbage-pointer
 * check.  free_sized_tags (above) gives the class tag.
 */
static void sized_free_check(void *p, size_t size, size_t align,
    const char *func) {
	extent_t *e = pagemap_lookup(p);
	size_t usize = align > QUANTUM ? sz_sa2u(size, align) : sz_s2u(size);
	if (e != NULL && (e->kind == EXTENT_SLAB || e->kind == EXTENT_LARGE) &&
	    usize != extent_usize(e))
		mp_abort("%s(%p, %zu): size does not match the allocation's "
		    "size class %zu", func, p, size, extent_usize(e));
}

/* The push of free's fast path, with the bin picked by the size. */
MP_INLINE void free_sized_fast(void *p, size_t size) {
	if (likely(p != NULL && size <= SC_LOOKUP_MAX) &&
	    likely(free_push(p, atomic_load_explicit(&free_sized_tags[(size +
	    (QUANTUM - 1)) >> LG_QUANTUM], memory_order_relaxed))))
		return;
	/* What the size could not settle (NULL, a large size, a full or off
	 * bin, prof:true, before boot): free's own path. */
	free_slow(p);
}

/* align: 0 for none; above QUANTUM the class depends on it (sz_sa2u), so
 * the page map decides. */
MP_INLINE void sized_free(void *p, size_t size, size_t align,
    const char *func) {
	if (config_debug && p != NULL)
		sized_free_check(p, size, align, func);
	if (align > QUANTUM) {
		free_slow(p);
		return;
	}
	free_sized_fast(p, size);
}

MP_EXPORT void MP_PUBLIC(free_sized)(void *p, size_t size) {
	sized_free(p, size, 0, "free_sized");
}

MP_EXPORT void MP_PUBLIC(free_aligned_sized)(void *p, size_t align,
    size_t size) {
	sized_free(p, size, align, "free_aligned_sized");
}

MP_EXPORT void MP_PUBLIC(sdallocx)(void *p, size_t size, int flags) {
	if (flags == 0) {
		sized_free(p, size, 0, "sdallocx");
		return;
	}
	if (config_debug && p != NULL)
		sized_free_check(p, size, (flags & 0x3f) ?
		    (size_t)1 << (flags & 0x3f) : 0, "sdallocx");
	if (unlikely(hook_active())) {
		dallocx_hooked(p, flags, HOOK_DALLOC_SDALLOCX, size,
		    (uintptr_t)flags);
		return;
	}
	dallocx_impl(p, flags);
}

MP_EXPORT size_t MP_PUBLIC(nallocx)(size_t size, int flags) {
	if (malloc_init())
		return 0;
	unsigned lg = (unsigned)flags & 0x3f;
	if (lg >= 64)
		return 0;
	size_t align = lg ? (size_t)1 << lg : 0;
	return align > QUANTUM ? sz_sa2u(size, align) : sz_s2u(size);
}

/* ------------------------------------- entry points of the C++ operators */

#if MP_CONFIG_CXX
/*
 * cxx.cpp's operators come here.  operator new is malloc's fast path with
 * another miss: cxx_new_slow (C++: the new-handler loop, bad_alloc),
 * tail-called, so that its frame is where the profiler's backtrace
 * starts, with the program's call site as its return address.  The
 * deletes are free's paths (sized ones through sized_free).
 */
/* Weak: the convenience library's static users (the unit tests) link
 * malloc.o without cxx.cpp, and never call operator new. */
extern __typeof__(cxx_new_slow) cxx_new_slow __attribute__((weak));

/* malloc's fast path, with cxx_new_slow for malloc_slow. */
MP_INLINE void *cxx_new_fast(size_t size, unsigned kind) {
	void *p = malloc_fast(size);
	if (likely(p != NULL))
		return p;
	return cxx_new_slow(size, kind);
}

void *cxx_new(size_t size) {
	return cxx_new_fast(size, CXX_NEW);
}

void *cxx_new_array(size_t size) {
	return cxx_new_fast(size, CXX_NEW_ARRAY);
}

/* With the hooks, new is reported as jemalloc's operators are: as the
 * malloc or aligned_alloc it is built on. */
void *cxx_alloc(size_t size, size_t align, void *entry, uintptr_t fp) {
	void *p = alloc_aligned(size, align, 0, entry, fp);
	if (unlikely(hook_active())) {
		if (align == 0)
			hook_alloc(HOOK_ALLOC_MALLOC, p, (uintptr_t)p, size,
			    0, 0);
		else
			hook_alloc(HOOK_ALLOC_ALIGNED_ALLOC, p, (uintptr_t)p,
			    align, size, 0);
	}
	return p;
}

/* free itself, reached without the PLT (glibc's prototype of free has
 * attributes an alias need not repeat). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
void cxx_free(void *p) __attribute__((alias("free")));
#pragma GCC diagnostic pop

/*
 * operator delete(void *, size_t) and its array form, defined here under
 * their mangled names (LP64: size_t is unsigned long) rather than in
 * cxx.cpp: the program's call then lands on the sized fast path itself,
 * not on two jumps and free's PLT entry in front of it.
 */
_Static_assert(sizeof(size_t) == sizeof(unsigned long), "_ZdlPvm names "
    "operator delete(void *, unsigned long)");
#if MP_CONFIG_DEBUG
/* Debug builds name the operator in the size check's report. */
MP_EXPORT void cxx_delete_sized(void *p, size_t size) __asm__("_ZdlPvm");
MP_EXPORT void cxx_delete_sized(void *p, size_t size) {
	sized_free(p, size, 0, "operator delete");
}
#define CXX_DELETE_SIZED "_ZdlPvm"
#else
/* Release builds: free_sized's body itself (a function of its own would
 * be folded into a jump to it). */
#define CXX_DELETE_SIZED "free_sized"
MP_EXPORT void cxx_delete_sized(void *p, size_t size) __asm__("_ZdlPvm")
    __attribute__((alias(CXX_DELETE_SIZED)));
#endif
MP_EXPORT void cxx_delete_array_sized(void *p, size_t size)
    __asm__("_ZdaPvm") __attribute__((alias(CXX_DELETE_SIZED)));

void cxx_free_aligned_sized(void *p, size_t align, size_t size) {
	sized_free(p, size, align, "operator delete");
}
#endif

/* ------------------------------------------------- glibc's extra names */

#if MP_OVERRIDE_GLIBC
/* Programs and libc itself may call these directly; they must reach us so
 * that nothing we allocate is freed by glibc or the reverse.  (glibc's
 * prototypes carry optimisation attributes an alias need not repeat.) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
MP_EXPORT void *__libc_malloc(size_t) __attribute__((alias("malloc")));
MP_EXPORT void *__libc_calloc(size_t, size_t)
    __attribute__((alias("calloc")));
MP_EXPORT void *__libc_realloc(void *, size_t)
    __attribute__((alias("realloc")));
MP_EXPORT void __libc_free(void *) __attribute__((alias("free")));
MP_EXPORT void *__libc_memalign(size_t, size_t)
    __attribute__((alias("memalign")));
MP_EXPORT void *__libc_valloc(size_t) __attribute__((alias("valloc")));
MP_EXPORT void *__libc_pvalloc(size_t) __attribute__((alias("pvalloc")));
MP_EXPORT int __posix_memalign(void **, size_t, size_t)
    __attribute__((alias("posix_memalign")));
#pragma GCC diagnostic pop

MP_EXPORT int malloc_trim(size_t pad) {
	if (malloc_init())
		return 0;
	tsd_tcache_flush(tsd_fetch());
	unsigned n = atomic_load(&narenas_total);
	for (unsigned i = 0; i < n; i++) {
		arena_t *arena = arena_get(i, false);
		if (arena != NULL)
			tcache_arena_decay(arena, true);
	}
	return 1;
}

/* mallinfo2 and mallinfo read ctl's statistics snapshot: they are in
 * ctl.c, beside malloc_stats_print's snapshot copy. */
#endif
