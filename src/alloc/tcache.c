/*
 * tcache.c: thread caches.  A cache owns slabs, one bin of them per small
 * size class (slab.c), and a few freed large blocks per large class up to
 * tcache_max.  In front of the slabs, a thread's cache has a cache bin
 * per small class (tsd->bin_cur, types.h): a stack of pointers that malloc
 * pops and free pushes.  A dry bin is filled with half its slots from the
 * current slab; an overflowing one gives its older half back, each region
 * to its own slab (slab_regions_return).  This file holds the cache bins,
 * the large blocks, flushing and GC, and the orphans: caches of exited
 * threads, which the next new thread adopts and decay reclaims meanwhile.
 * It also keeps the explicit caches of tcache.create: caches of no
 * thread, with cache bins of their own, numbered for MALLOCX_TCACHE(tc).
 *
 * The arena's shared cache uses the same slab code under arena->shared_mtx
 * (it has no cache bins).  The cache knows the arena, not the reverse:
 * this file sets up the caches an arena embeds when the arena is made
 * (tcache_arena_setup, which arena_boot is given) and returns what they
 * hold before a decay pass (tcache_arena_decay); arena.c calls no cache
 * function.
 */
#include "malloc_prof/internal/internal.h"

/* Bytes of large blocks one cache may hold: 2 MiB at the default
 * tcache_max of 64 KiB, against 8 slots per class.  At 4 x tcache_max
 * (1 MiB) bench's midsize (sizes to 64 KiB, a random one replaced at
 * each step) missed the cache in one large allocation in five and took
 * the arena's lock, split and coalesce instead; at 32 x in one in six,
 * at 64 x in one in seven, for no fewer instructions in all.  The GC
 * returns what goes unused (low_water). */
#define TCACHE_LARGE_BUDGET(max) ((max) * 32 > ((size_t)1 << 20) ? \
    (max) * 32 : ((size_t)1 << 20))

void tcache_init(tcache_t *tc, arena_t *arena, bool shared) {
	memset(tc, 0, sizeof(*tc));
	tc->arena = arena;
	tc->shared = shared;
}

/* ---- cache bins ---- */

/*
 * Slots of class ind's cache bin: 16 KiB << lg_tcache_nslots_mul of
 * regions (32 KiB by default), within tcache_nslots_small_min and _max
 * (8 and 128 by default; the max wins if they cross, as in jemalloc).
 * jemalloc counts from the regions of a slab instead; the knobs keep
 * their meaning.  At least 2: a fill takes half the slots.
 */
static unsigned cache_bin_slots(unsigned ind) {
	ssize_t mul = opt_lg_tcache_nslots_mul;
	size_t bytes = mul >= 0 ? ((size_t)16 << 10) << mul :
	    ((size_t)16 << 10) >> -mul;
	size_t n = bytes / sz_index2size(ind);
	if (n < opt_tcache_nslots_small_min)
		n = opt_tcache_nslots_small_min;
	if (n > opt_tcache_nslots_small_max)
		n = opt_tcache_nslots_small_max;
	return n < 2 ? 2 : (unsigned)n;
}

/*
 * Slots a bin may grow to.  A program that allocates a batch of objects of
 * one class and frees it again (glibc's bench-malloc-simple: batches of up
 * to 1,600) swings its bin from empty to full and back; with a fixed bin
 * smaller than the batch, every region goes through the slab's bitmap on
 * the way out and again on the way in, which in bench's simple was a
 * quarter of the time.  Such a bin doubles, up to CACHE_BIN_GROW_SLOTS
 * and CACHE_BIN_GROW_BYTES of regions, for classes up to
 * CACHE_BIN_GROW_USIZE.  The larger ones hold much memory in few regions
 * (8 at the base size from 4 KiB up): they grow to CACHE_BIN_GROW_MID_MUL
 * times that, by the same swings or when busy with remote frees (bin_gc).
 * A tcache_nslots_small_max set by the program is a bound it chose: no
 * growth then.
 */
static unsigned cache_bin_slots_max(unsigned ind) {
	unsigned base = cache_bin_slots(ind);
	size_t usize = sz_index2size(ind);
	if (opt_tcache_nslots_small_max != CACHE_BIN_MAX)
		return base;
	size_t n = usize > CACHE_BIN_GROW_USIZE ?
	    (size_t)base * CACHE_BIN_GROW_MID_MUL : CACHE_BIN_GROW_BYTES / usize;
	if (n > CACHE_BIN_GROW_BYTES / usize)
		n = CACHE_BIN_GROW_BYTES / usize;
	if (n > CACHE_BIN_GROW_SLOTS)
		n = CACHE_BIN_GROW_SLOTS;
	return n > base ? (unsigned)n : base;
}

/*
 * Trimming (bin_gc): a bin of a class above CACHE_BIN_TRIM_USIZE that was
 * filled or flushed at most CACHE_BIN_SHRINK_MOVES times in a GC period
 * (SC_NBINS thread events) halves, down to CACHE_BIN_FLOOR_BYTES of
 * regions (at least 2 slots), and doubles back towards its base size once
 * it is filled or flushed CACHE_BIN_REGROW_MOVES times in a period (a bin
 * half the size is moved about four times as often: the gap between the
 * two keeps it from going back and forth).  The regions a bin holds pin
 * their slabs' pages, and the slabs a class needs at its busiest stay:
 * in bench's alloctest (8 threads, a few percent of the calls above
 * 256 B) each thread's bins of those classes held about half of 32 KiB
 * each, where jemalloc's caches, trimmed to their low-water marks, hold
 * less: 1.09 x jemalloc's peak RSS, 1.05 with the trimming.  The fast
 * paths record nothing: a period with next to no fill or overflow is the
 * low-water mark as the slow paths see it.
 *
 * Only with CACHE_BIN_TRIM_THREADS threads or more attached: one thread's
 * bins hold a megabyte at most, and a smaller bin moves more regions per
 * call (bench's churn +0.8% and midsize +1.6% instructions, one thread
 * each, when every process trimmed).  Not for classes other threads free into,
 * whose bins grow instead (bin_gc), nor for the classes to 256 B, whose
 * bins hold little and are the busiest.
 */
#define CACHE_BIN_FLOOR_BYTES ((size_t)4 << 10)
#define CACHE_BIN_TRIM_USIZE ((size_t)256)
#define CACHE_BIN_TRIM_THREADS 8
#define CACHE_BIN_SHRINK_MOVES 1
#define CACHE_BIN_REGROW_MOVES 5

static unsigned cache_bin_slots_min(unsigned ind) {
	unsigned base = cache_bin_slots(ind);
	size_t usize = sz_index2size(ind);
	if (usize <= CACHE_BIN_TRIM_USIZE)
		return base;
	size_t n = CACHE_BIN_FLOOR_BYTES / usize;
	if (n < 2)
		n = 2;
	return n < base ? (unsigned)n : base;
}

/* Bin ind holds at most cap regions from now on (it holds no more). */
static void bin_set_cap(tcache_t *tc, unsigned ind, unsigned cap) {
	mp_assert(tcache_bin_count(tc, ind) <= cap);
	tc->cb_full[ind] = (uint32_t)(uintptr_t)(tc->cb_empty[ind] - cap);
}

/*
 * Where a bin's slots are.  At its base size a bin lives in cb_slots,
 * packed with the others (one page holds the tops of many bins, which is
 * all most programs touch); a grown one moves to its own stretch of
 * cb_grow_slots, room for its largest size, made at the first growth of
 * any bin of the cache.  Untouched, that stretch costs address space
 * only: with every bin laid out at its largest size in cb_slots, each
 * bin's top page was its own, 80 KiB more resident per thread (bench's
 * alloctest, 8 threads: +0.7 MB).
 */
static void **bin_grow_end(tcache_t *tc, unsigned ind) {
	return tc->cb_grow_slots + tc->cb_grow_end[ind];
}

/* Move bin ind's regions to the slots ending at `empty`, cap of them. */
static void bin_relocate(tcache_t *tc, unsigned ind, void **empty,
    unsigned cap) {
	unsigned n = tcache_bin_count(tc, ind);
	mp_assert(n <= cap && *empty == NULL);
	if (empty == tc->cb_empty[ind]) {
		bin_set_cap(tc, ind, cap);
		return;
	}
	memcpy(empty - n, tc->cb_cur[ind], n * sizeof(void *));
	tc->cb_cur[ind] = empty - n;
	tc->cb_empty[ind] = empty;
	bin_set_cap(tc, ind, cap);
}

/* Bin ind at cap slots (it holds no more than that), in its home slots
 * at the base size, else in the grow area; false if that cannot be
 * made. */
static bool bin_resize(tcache_t *tc, unsigned ind, unsigned cap) {
	if (cap <= cache_bin_slots(ind)) {
		bin_relocate(tc, ind, tc->cb_home[ind], cap);
		return true;
	}
	if (tc->cb_grow_slots == NULL) {
		/* Where each bin's sentinel is, kept: summed at each resize,
		 * it was most of a resize's cost once the mid-size bins grew
		 * and shrank at GC visits. */
		uint32_t total = 0;
		for (unsigned i = 0; i < SC_NBINS; i++) {
			tc->cb_grow_end[i] = total + cache_bin_slots_max(i);
			total = tc->cb_grow_end[i] + 1;
		}
		tc->cb_grow_slots = base_alloc(total * sizeof(void *));
		if (tc->cb_grow_slots == NULL)
			return false;
	}
	bin_relocate(tc, ind, bin_grow_end(tc, ind), cap);
	return true;
}

enum { BIN_MOVE_NONE = 0, BIN_MOVE_FILL, BIN_MOVE_OVERFLOW };

/*
 * Bin ind of tc is filled (it ran dry) or overflows (it is full).  A
 * swing is a fill after an overflow or the reverse; it is quick when the
 * thread's traffic between them is below twice the bin's bytes: a batch
 * goes from one end to the other in about one bin's worth, a random walk
 * of allocations and frees needs about cap / 4 times that.  Two quick
 * swings in a row double the bin (true: it grew, and has room now).
 * Nothing on the fast paths: the moves are the slow paths'.
 */
static bool bin_move(tcache_t *tc, unsigned ind, uint8_t kind) {
	tsd_t *tsd = &mp_tsd;
	uint64_t now = tsd->allocated + tsd->deallocated;
	unsigned cap = tcache_bin_cap(tc, ind);
	uint8_t last = tc->cb_move[ind];
	tc->cb_idle[ind] = false;
	if (tc->cb_moves[ind] != UINT8_MAX)
		tc->cb_moves[ind]++;
	if (last != kind) {
		bool quick = last != BIN_MOVE_NONE && now -
		    tc->cb_move_at[ind] < (uint64_t)2 * cap *
		    sz_index2size(ind);
		tc->cb_swings[ind] = quick ? (uint8_t)(tc->cb_swings[ind] + 1)
		    : 0;
	}
	tc->cb_move[ind] = kind;
	tc->cb_move_at[ind] = now;
	if (tc->cb_swings[ind] < 2)
		return false;
	tc->cb_swings[ind] = 0;
	unsigned max = cache_bin_slots_max(ind);
	if (cap >= max)
		return false;
	return bin_resize(tc, ind, cap * 2 < max ? cap * 2 : max);
}

/* Enough threads attached to the arenas that their bins' memory adds up
 * (bin_gc's trimming below the base size). */
static bool bins_count_threads(void) {
	uint32_t n = 0;
	for (unsigned i = 0; i < narenas_auto; i++) {
		arena_t *a = arena_get(i, false);
		if (a == NULL)
			break;
		n += atomic_load_explicit(&a->nthreads, memory_order_relaxed);
		if (n >= CACHE_BIN_TRIM_THREADS)
			return true;
	}
	return false;
}

/* bins_count_threads' answer, taken once per GC pass of any cache
 * (bins_trim_update) rather than at each bin's visit: counting walks the
 * arenas, which at every visit cost 0.16% of bench's churn instructions.
 * Written only when it changes, so the line stays shared. */
static _Atomic bool bins_trim_on;

static void bins_trim_update(void) {
	bool on = bins_count_threads();
	if (atomic_load_explicit(&bins_trim_on, memory_order_relaxed) != on)
		atomic_store_explicit(&bins_trim_on, on, memory_order_relaxed);
}

/* Other threads freed into class ind's slabs since its last GC visit. */
static bool bin_remote(tcache_t *tc, unsigned ind) {
	return (atomic_load_explicit(&tc->remote_classes,
	    memory_order_relaxed) & ((uint64_t)1 << ind)) != 0;
}

/* The slots bin ind (cap of them, at most its base size, next to no
 * fills or flushes this period) is trimmed to: half, down to
 * cache_bin_slots_min, or cap itself where trimming does not apply. */
static unsigned bin_trim_cap(tcache_t *tc, unsigned ind, unsigned cap) {
	if (!atomic_load_explicit(&bins_trim_on, memory_order_relaxed) ||
	    bin_remote(tc, ind))
		return cap;
	unsigned floor = cache_bin_slots_min(ind);
	if (cap <= floor)
		return cap;
	return cap / 2 > floor ? cap / 2 : floor;
}

/*
 * The most slots bin ind returns to at GC visits (bin_gc), at or below
 * its base size: half of it for the classes that trimming applies to
 * (bin_trim_cap: a process of CACHE_BIN_TRIM_THREADS threads or more,
 * classes above CACHE_BIN_TRIM_USIZE that no other thread frees into),
 * however busy the bin.  A bin in the middle of a random walk of frees
 * and allocations holds half its slots on average, and what its regions
 * touched stays resident: with eight threads such bins of the classes
 * from 320 B to 4 KiB were much of bench's alloctest's excess over
 * jemalloc's peak (13.8 MB, 13.2 with every bin halved by
 * lg_tcache_nslots_mul:-1; jemalloc 13.0).  Processes with fewer threads
 * keep the full size: one thread's bins hold a megabyte at most, and
 * halving them costs single-thread programs' instructions.
 */
static unsigned bin_trim_top(tcache_t *tc, unsigned ind, unsigned base) {
	if (!atomic_load_explicit(&bins_trim_on, memory_order_relaxed) ||
	    sz_index2size(ind) <= CACHE_BIN_TRIM_USIZE || bin_remote(tc, ind))
		return base;
	unsigned floor = cache_bin_slots_min(ind);
	return base / 2 > floor ? base / 2 : floor;
}

/*
 * At the bin's GC visit: one that neither ran dry nor overflowed since
 * the last visit halves back towards its base size; at or below it, the
 * trimming above (bin_trim_cap) may halve it further.  A bin above
 * CACHE_BIN_GROW_USIZE that did so CACHE_BIN_BUSY_MOVES times or more,
 * in a class other threads free into, doubles.  bin_move's swings, timed
 * by the thread's traffic in every class, never look quick for a class
 * that is one of many: in bench's xthread (sizes 8 B to 16 KB, half the
 * frees remote) the 8-slot bins of 4-14 KiB were filled and flushed
 * several times a loop, and moving regions between the bins and the
 * slabs was two thirds of the allocator's instructions.  Only with remote
 * frees: in a single-thread random walk (midsize, realloc) or same-thread
 * traffic (alloctest) growth saved under 2% of the instructions and cost
 * 0.4-0.9 MB of peak RSS.  The bit is only read here; slab_bin_gc, right
 * after, clears it.
 */
static void bin_gc(tcache_t *tc, unsigned ind) {
	unsigned cap = tcache_bin_cap(tc, ind);
	unsigned base = cache_bin_slots(ind);
	unsigned top = bin_trim_top(tc, ind, base);
	if (tc->cb_idle[ind] && cap > base) {
		unsigned ncap = cap / 2 > base ? cap / 2 : base;
		tcache_bin_flush(tc, ind, ncap);
		bin_resize(tc, ind, ncap);
	} else if (cap > top && cap <= base) {
		tcache_bin_flush(tc, ind, top);
		bin_resize(tc, ind, top);
	} else if (tc->cb_moves[ind] <= CACHE_BIN_SHRINK_MOVES &&
	    cap <= base) {
		unsigned ncap = bin_trim_cap(tc, ind, cap);
		if (ncap < cap) {
			tcache_bin_flush(tc, ind, ncap);
			bin_resize(tc, ind, ncap);
		}
	} else if (cap < top && tc->cb_moves[ind] >= CACHE_BIN_REGROW_MOVES) {
		bin_resize(tc, ind, cap * 2 < top ? cap * 2 : top);
	} else if (tc->cb_moves[ind] >= CACHE_BIN_BUSY_MOVES &&
	    sz_index2size(ind) > CACHE_BIN_GROW_USIZE && bin_remote(tc, ind)) {
		unsigned max = cache_bin_slots_max(ind);
		if (cap < max)
			bin_resize(tc, ind, cap * 2 < max ? cap * 2 : max);
	}
	tc->cb_idle[ind] = true;
	tc->cb_moves[ind] = 0;
}

/*
 * tcache_gc_delay_bytes as jemalloc 5.3 counts it: a small class may skip
 * that many bytes of GC flushes (in regions, at most 255) before one
 * happens.  A visit that would flush fewer regions than the class has left
 * takes them off and leaves the bin as it is (no flush, no shrink: the
 * shrink is this cache's counterpart of jemalloc's smaller fills after a
 * GC flush, which a skipped visit skips too); one that would flush as
 * many or more flushes and starts the count again.
 */
static uint8_t bin_gc_delay_items(unsigned ind) {
	size_t n = opt_tcache_gc_delay_bytes / sz_index2size(ind);
	return n > UINT8_MAX ? UINT8_MAX : (uint8_t)n;
}

/* At the GC visit of idle bin ind: true if the delay swallows it. */
MP_NOINLINE static bool bin_gc_delayed(tcache_t *tc, unsigned ind) {
	unsigned have = tcache_bin_count(tc, ind);
	unsigned nflush = have - have / 2;
	if (nflush == 0)
		return false;
	if (nflush < tc->cb_gc_delay[ind]) {
		tc->cb_gc_delay[ind] = (uint8_t)(tc->cb_gc_delay[ind] - nflush);
		return true;
	}
	tc->cb_gc_delay[ind] = bin_gc_delay_items(ind);
	return false;
}

/*
 * stats.arenas.<i>.bins.<j>.nrequests: the requests bin ind served since
 * the last merge (one increment per malloc, in the owner's tsd or an
 * explicit cache's entry: cb_nreq) go to the cache's arena.  At the bin's
 * fills (tcache_bin_fill adds them with the fill's own request, one atomic
 * add) and flushes (overflow, the GC's flush of an idle bin), at
 * thread.tcache.flush, tcache.flush and tcache.destroy, when the bins are
 * turned off (thread exit, tcache off) and before the cache changes arena:
 * where jemalloc merges its cache bins' tstats.nrequests, so the figure
 * lags by what a bin served since.  Not at a GC visit that flushes
 * nothing: a test there costs about 5 instructions at every thread event
 * (+0.0012 per malloc+free pair in bench's micro, whose count was not to
 * rise).
 */
static inline void bin_requests_merge(tcache_t *tc, unsigned ind) {
	mp_assert(tc->cb_nreq != NULL);
	if (tc->cb_nreq[ind] == 0)
		return;
	atomic_fetch_add_explicit(&tc->arena->bstats[ind].nrequests,
	    tc->cb_nreq[ind], memory_order_relaxed);
	tc->cb_nreq[ind] = 0;
}

static void large_requests_merge(tcache_t *tc, unsigned li);

/* Every class's pending requests, small and large, to the cache's arena:
 * before the cache moves to another one (tsd_arena_set). */
void tcache_requests_merge(tcache_t *tc) {
	for (unsigned i = 0; tc->cb_nreq != NULL && i < SC_NBINS; i++)
		bin_requests_merge(tc, i);
	for (unsigned i = 0; i < TCACHE_NLARGE; i++)
		large_requests_merge(tc, i);
}

void tcache_bin_flush(tcache_t *tc, unsigned ind, unsigned keep) {
	unsigned have = tcache_bin_count(tc, ind);
	if (have <= keep)
		return;
	bin_requests_merge(tc, ind);
	/* The oldest regions go; the most recently freed, likeliest still
	 * in this core's cache, stay. */
	void **cur = tc->cb_cur[ind], **empty = tc->cb_empty[ind];
	/* Counted against the cache's arena (ndalloc: each region's slab's,
	 * slab.c). */
	atomic_fetch_add_explicit(&tc->arena->bstats[ind].nflushes, 1,
	    memory_order_relaxed);
	slab_regions_return(tc, cur + keep, have - keep);
	memmove(empty - keep, cur, keep * sizeof(void *));
	tc->cb_cur[ind] = empty - keep;
}

void tcache_bin_overflow(tcache_t *tc, unsigned ind) {
	if (bin_move(tc, ind, BIN_MOVE_OVERFLOW))
		return;
	/* Its older part (half by default: lg_tcache_flush_small_div)
	 * goes back to the slabs. */
	tcache_bin_flush(tc, ind, tcache_bin_cap(tc, ind) >>
	    opt_lg_tcache_flush_small_div);
}

/*
 * Regions a fill of bin ind takes: half its slots, or an eighth
 * (CACHE_BIN_GROWN_FILL_LG) for a bin of a class above
 * CACHE_BIN_GROW_USIZE grown past its base size.  Those bins grow where
 * other threads free into the class (bin_gc), and there the frees and
 * allocations of a thread about balance: the bin's count wanders between
 * empty and full, the regions in it are touched memory no one uses, and
 * a fill of half the bin set it back in the middle.  A small fill sets
 * it near the bottom, and the next frees refill it: in bench's xthread
 * (2 threads, 8 B-16 KB, a third of the frees remote) peak RSS 21.6 ->
 * 20.8 MB, and fewer instructions (callgrind at scale 0.1: 30.05M ->
 * 29.14M; an eighth did better than a quarter, 29.36M, or a sixteenth,
 * 29.94M): the fills move fewer regions that go back to the slabs
 * unused.  Bins of classes up to 1 KiB grow for batches (bin_move), which
 * a full fill serves in one go.
 */
#define CACHE_BIN_GROWN_FILL_LG 3

static unsigned bin_fill_count(tcache_t *tc, unsigned ind) {
	unsigned cap = tcache_bin_cap(tc, ind);
	if (sz_index2size(ind) > CACHE_BIN_GROW_USIZE &&
	    cap > cache_bin_slots(ind))
		return cap >> CACHE_BIN_GROWN_FILL_LG;
	return cap / 2;
}

void *tcache_bin_fill(tcache_t *tc, unsigned ind) {
	mp_assert(tcache_bin_count(tc, ind) == 0);
	bin_move(tc, ind, BIN_MOVE_FILL);
	unsigned n = bin_fill_count(tc, ind);
	void **empty = tc->cb_empty[ind];
	void **first = empty - n;
	/* Popped in the order the slab hands them out: address order. */
	unsigned got = tcache_alloc_batch(tc, ind, first, n);
	if (got == 0)
		return NULL;
	atomic_fetch_add_explicit(&tc->arena->bstats[ind].nfills, 1,
	    memory_order_relaxed);
	if (got < n)
		memmove(empty - got, first, got * sizeof(void *));
	tc->cb_cur[ind] = empty - got + 1;
	/* The bin's requests since its last merge and the one this fill
	 * serves (counted here for every caller), in one add. */
	atomic_fetch_add_explicit(&tc->arena->bstats[ind].nrequests,
	    tc->cb_nreq[ind] + 1, memory_order_relaxed);
	tc->cb_nreq[ind] = 0;
	return empty[-(ptrdiff_t)got];
}

/* Turn tc's cache bins on with their cursors in cur[] and full[] (by
 * szind): a thread's tsd, or an explicit cache's entry. */
static bool bins_attach(tcache_t *tc, void ***cur, uint32_t *full,
    uint64_t *nreq) {
	if (tc->cb_slots == NULL) {
		/* Each bin's slots and its NULL sentinel (base memory is
		 * zeroed, and no one ever writes a sentinel). */
		size_t total = 0;
		for (unsigned i = 0; i < SC_NBINS; i++)
			total += cache_bin_slots(i) + 1;
		tc->cb_slots = base_alloc(total * sizeof(void *));
		if (tc->cb_slots == NULL)
			return true;
	}
	/* Each bin starts at its base size, at home (bin_resize). */
	void **slot = tc->cb_slots;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		full[i] = (uint32_t)(uintptr_t)slot;
		slot += cache_bin_slots(i);
		mp_assert(*slot == NULL);
		tc->cb_empty[i] = slot;
		tc->cb_home[i] = slot;
		cur[i] = slot;
		tc->cb_move[i] = BIN_MOVE_NONE;
		tc->cb_swings[i] = 0;
		tc->cb_idle[i] = false;
		tc->cb_moves[i] = 0;
		tc->cb_gc_delay[i] = bin_gc_delay_items(i);
		slot++;
	}
	tc->cb_cur = cur;
	tc->cb_full = full;
	tc->cb_nreq = nreq;
	return false;
}

bool tcache_bins_attach(tcache_t *tc, tsd_t *tsd) {
	return bins_attach(tc, &tsd->bin_cur[1], &tsd->bin_full[1],
	    &tsd->bin_nreq[1]);
}

void tcache_bins_detach(tcache_t *tc) {
	if (tc->cb_cur == NULL)
		return;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		bin_requests_merge(tc, i);
		tcache_bin_flush(tc, i, 0);
		tc->cb_cur[i] = NULL;
		tc->cb_full[i] = 0;
	}
	tc->cb_cur = NULL;
	tc->cb_full = NULL;
	tc->cb_nreq = NULL;
}

/* ---- large blocks ---- */

void *tcache_alloc_large(tcache_t *tc, unsigned ind) {
	unsigned li = ind - SC_NBINS;
	if (li >= TCACHE_NLARGE)
		return NULL;
	tcache_large_t *c = &tc->large[li];
	if (c->n == 0)
		return NULL;
	extent_t *e = c->slots[--c->n];
	if (c->n < c->low_water)
		c->low_water = c->n;
	e->list = SLAB_LIST_NONE;
	tc->large_bytes -= e->size;
	/* A request the arena never sees: added to its stats at GC. */
	c->nrequests++;
	return e->addr;
}

static void large_flush_count(tcache_t *tc, unsigned li, uint32_t keep);

/* Cache e in class li, within the cache's budget (false), or not (true:
 * e goes to the arena). */
static inline bool large_push(tcache_t *tc, unsigned li, extent_t *e) {
	if (tc->large_bytes + e->size > TCACHE_LARGE_BUDGET(opt_tcache_max))
		return true;
	tcache_large_t *c = &tc->large[li];
	c->slots[c->n++] = e;
	/* On the line free read (kind, addr, prof): free's double-free
	 * test reads this instead of scanning the bin, whose loop was 3% of
	 * the allocator's instructions and its slots a line of misses in
	 * bench's midsize. */
	e->list = LARGE_LIST_CACHED;
	tc->large_bytes += e->size;
	return false;
}

/*
 * lg_tcache_flush_large_div as in jemalloc: a class found full returns
 * all but 1/2^N of its blocks, the oldest (as a small bin's overflow
 * does), and then caches the freed one.  Not set at all (N = 1 read out,
 * jemalloc's default), the class keeps all of them and the freed block
 * goes to the arena, as before the option acted: the default behaviour
 * stays as it was measured; set, even to 1, it does what jemalloc does.  Out of
 * line, reached by a tail call with two arguments: so tcache_dalloc_large
 * stays a leaf that saves no registers (with the flush inlined, or a third
 * argument, it saved some at every call: +0.25% to +0.7% of bench's
 * midsize instructions at the default).
 */
MP_NOINLINE static bool large_dalloc_full(tcache_t *tc, extent_t *e) {
	unsigned li = e->szind - SC_NBINS;
	tcache_large_t *c = &tc->large[li];
	uint32_t keep = c->n >> opt_lg_tcache_flush_large_div;
	uint32_t nflush = c->n - keep;
	large_flush_count(tc, li, keep);
	for (uint32_t i = 0; i < nflush; i++) {
		extent_t *old = c->slots[i];
		old->list = SLAB_LIST_NONE;
		tc->large_bytes -= old->size;
		arena_large_dalloc(old);
	}
	memmove(c->slots, c->slots + nflush, keep * sizeof(c->slots[0]));
	c->n = keep;
	if (c->low_water > keep)
		c->low_water = keep;
	return large_push(tc, li, e);
}

bool tcache_dalloc_large(tcache_t *tc, extent_t *e) {
	unsigned li = e->szind - SC_NBINS;
	if (e->size > opt_tcache_max || li >= TCACHE_NLARGE || e->prof != NULL)
		return true;
	tcache_large_t *c = &tc->large[li];
	if (c->n >= opt_tcache_nslots_large) {
		if (opt_lg_tcache_flush_large_div < 2 &&
		    !opt_lg_tcache_flush_large_div_given)
			return true;
		return large_dalloc_full(tc, e);
	}
	return large_push(tc, li, e);
}

/* The cache's hits of large class li go into its arena's lextent stats
 * (jemalloc merges its caches' request counts likewise, at flushes). */
static void large_requests_merge(tcache_t *tc, unsigned li) {
	tcache_large_t *c = &tc->large[li];
	if (c->nrequests == 0)
		return;
	atomic_fetch_add_explicit(&tc->arena->lstats[li].nrequests,
	    c->nrequests, memory_order_relaxed);
	c->nrequests = 0;
}

/* Return all but `keep` of class li's blocks; the stats are the
 * callers' (large_flush_count), which keeps this loop as it was. */
static void large_flush(tcache_t *tc, unsigned li, uint32_t keep) {
	tcache_large_t *c = &tc->large[li];
	while (c->n > keep) {
		extent_t *e = c->slots[--c->n];
		e->list = SLAB_LIST_NONE;
		tc->large_bytes -= e->size;
		arena_large_dalloc(e);
	}
	c->low_water = c->n;
}

/* stats.arenas.<i>.large.nflushes: a flush of class li that will return
 * blocks (keep below what the class holds). */
static void large_flush_count(tcache_t *tc, unsigned li, uint32_t keep) {
	if (tc->large[li].n > keep)
		atomic_fetch_add_explicit(&tc->arena->large_nflushes, 1,
		    memory_order_relaxed);
}

/* ---- flush, GC, orphans ---- */

void tcache_flush(tcache_t *tc) {
	if (tc->cb_cur != NULL) {
		for (unsigned i = 0; i < SC_NBINS; i++) {
			bin_requests_merge(tc, i);
			tcache_bin_flush(tc, i, 0);
			/* And back to its base size. */
			bin_resize(tc, i, cache_bin_slots(i));
			tc->cb_move[i] = BIN_MOVE_NONE;
			tc->cb_swings[i] = 0;
			tc->cb_moves[i] = 0;
		}
	}
	slab_inbox_drain(tc);
	for (unsigned i = 0; i < SC_NBINS; i++)
		slab_bin_flush(tc, i);
	for (unsigned i = 0; i < TCACHE_NLARGE; i++) {
		large_requests_merge(tc, i);
		large_flush_count(tc, i, 0);
		large_flush(tc, i, 0);
	}
	slab_empty_flush(tc, 0);
}

/* One step per thread event: half of one cache bin (unless
 * tcache_gc_delay_bytes holds it: bin_gc_delayed), that class's remote
 * frees and empty slabs, the large blocks of one class that went unused
 * since the last visit, and one kept empty slab. */
void tcache_gc_step(tcache_t *tc) {
	slab_inbox_drain(tc);
	uint32_t step = tc->gc_bin++;
	unsigned i = step % SC_NBINS;
	if (i == 0)
		bins_trim_update();
	if (tc->cb_cur != NULL) {
		/* A delayed bin is idle, so bin_gc would only shrink it. */
		bool held = unlikely(opt_tcache_gc_delay_bytes != 0) &&
		    tc->cb_idle[i] && bin_gc_delayed(tc, i);
		if (!held) {
			if (tc->cb_idle[i])
				tcache_bin_flush(tc, i,
				    tcache_bin_count(tc, i) / 2);
			bin_gc(tc, i);
		}
	}
	slab_bin_gc(tc, i);
	/* Its own modulus: there are more large classes than bins. */
	unsigned li = step % TCACHE_NLARGE;
	tcache_large_t *c = &tc->large[li];
	large_requests_merge(tc, li);
	if (c->low_water > 0) {
		uint32_t keep = c->n - c->low_water + c->low_water / 4;
		large_flush_count(tc, li, keep);
		large_flush(tc, li, keep);
	}
	c->low_water = c->n;
	if (tc->nempty > 1)
		slab_empty_flush(tc, tc->nempty - 1);
}

/* Writers hold orphans_mtx; tcache_orphans_collect peeks at the head
 * without it, so every store of the head is atomic (relaxed: the lock
 * orders the list itself, the peek only decides whether to take it). */
static inline void orphans_head_set(arena_t *arena, tcache_t *head) {
	__atomic_store_n(&arena->orphans, head, __ATOMIC_RELAXED);
}

tcache_t *tcache_adopt(arena_t *arena) {
	mp_mutex_lock(&arena->orphans_mtx);
	tcache_t *tc = arena->orphans;
	if (tc != NULL) {
		orphans_head_set(arena, tc->orphan_next);
		arena->norphans--;
	}
	mp_mutex_unlock(&arena->orphans_mtx);
	if (tc == NULL) {
		tc = base_alloc(sizeof(tcache_t));
		if (tc == NULL)
			return NULL;
		tcache_init(tc, arena, false);
	}
	tc->orphan_next = NULL;
	return tc;
}

void tcache_orphan(tcache_t *tc) {
	tcache_bins_detach(tc);
	tcache_flush(tc);
	arena_t *arena = tc->arena;
	mp_mutex_lock(&arena->orphans_mtx);
	tc->orphan_next = arena->orphans;
	orphans_head_set(arena, tc);
	arena->norphans++;
	mp_mutex_unlock(&arena->orphans_mtx);
}

void tcache_orphans_collect(arena_t *arena, unsigned max) {
	if (__atomic_load_n(&arena->orphans, __ATOMIC_RELAXED) == NULL)
		return;
	mp_mutex_lock(&arena->orphans_mtx);
	if (max >= arena->norphans) {
		for (tcache_t *tc = arena->orphans; tc != NULL;
		    tc = tc->orphan_next)
			tcache_flush(tc);
	} else {
		/* Flush from the head and rotate what was flushed to the
		 * tail, so successive calls visit every orphan. */
		for (unsigned n = 0; n < max; n++) {
			tcache_t *tc = arena->orphans;
			tcache_flush(tc);
			orphans_head_set(arena, tc->orphan_next);
			tc->orphan_next = NULL;
			tcache_t **tail = &arena->orphans;
			while (*tail != NULL)
				tail = &(*tail)->orphan_next;
			/* tail may be the head itself (one orphan). */
			__atomic_store_n(tail, tc, __ATOMIC_RELAXED);
		}
	}
	mp_mutex_unlock(&arena->orphans_mtx);
}

/* ---- explicit caches ---- */

/*
 * The registry of explicit caches: an entry per index handed out, made at
 * the index's first tcache.create and never freed.  The entry holds the
 * cache itself, kept across destroy and create (a destroyed cache keeps
 * the slabs that still hold live objects, as an orphan does, and the next
 * create of its index takes them up again: the number of caches is bounded
 * by the indices, whatever the program's churn), and the cursors of its
 * cache bins, which a thread's cache keeps in its tsd.
 *
 * No lock: an entry's state moves FREE -> BUSY (create, or a collection)
 * and LIVE -> BUSY (destroy) by compare-and-swap, so that two threads never
 * work on one cache's state, and the index counter by compare-and-swap.
 * Nothing here is held across fork.  Between a create and its destroy the
 * program promises that one thread at a time uses the cache.
 */
enum { TCACHES_FREE = 0, TCACHES_LIVE, TCACHES_BUSY };

typedef struct tcaches_elm_s {
	tcache_t tc;
	void **bin_cur[SC_NBINS];        /* tc's cache bins: see types.h */
	uint32_t bin_full[SC_NBINS];
	uint64_t bin_nreq[SC_NBINS];
	_Atomic unsigned state;
} tcaches_elm_t;

static _Atomic(tcaches_elm_t *) tcaches[TCACHES_MAX + 1];
static _Atomic unsigned tcaches_past;    /* indices handed out so far */

static tcaches_elm_t *tcaches_elm(unsigned ind) {
	if (ind > TCACHES_MAX)
		return NULL;
	return atomic_load_explicit(&tcaches[ind], memory_order_acquire);
}

/* Take entry `elm` in state `from` for the caller (BUSY). */
static bool tcaches_claim(tcaches_elm_t *elm, unsigned from) {
	unsigned s = from;
	return elm != NULL && atomic_compare_exchange_strong_explicit(
	    &elm->state, &s, TCACHES_BUSY, memory_order_acquire,
	    memory_order_relaxed);
}

static void tcaches_release(tcaches_elm_t *elm, unsigned to) {
	atomic_store_explicit(&elm->state, to, memory_order_release);
}

bool tcaches_create(unsigned *ind) {
	/* The lowest index free again: jemalloc too hands destroyed
	 * indices out again before new ones. */
	unsigned past = atomic_load_explicit(&tcaches_past,
	    memory_order_acquire);
	for (unsigned i = 0; i < past; i++) {
		tcaches_elm_t *elm = tcaches_elm(i);
		if (tcaches_claim(elm, TCACHES_FREE)) {
			tcaches_release(elm, TCACHES_LIVE);
			*ind = i;
			return false;
		}
	}
	/* Checked before the entry is made, so that a program asking past
	 * the limit does not use up memory; two creators racing for the
	 * last index lose one entry at most. */
	if (past > TCACHES_MAX)
		return true;
	tcaches_elm_t *elm = base_alloc(sizeof(*elm));
	if (elm == NULL)
		return true;
	/* The arena is the allocating call's (alloc_impl sets it each time,
	 * as jemalloc fills an explicit cache from the caller's arena). */
	tcache_init(&elm->tc, arena_get(0, false), false);
	if (bins_attach(&elm->tc, elm->bin_cur, elm->bin_full,
	    elm->bin_nreq))
		return true;
	unsigned i = atomic_load(&tcaches_past);
	do {
		if (i > TCACHES_MAX)
			return true;
	} while (!atomic_compare_exchange_weak(&tcaches_past, &i, i + 1));
	atomic_store_explicit(&elm->state, TCACHES_LIVE, memory_order_relaxed);
	atomic_store_explicit(&tcaches[i], elm, memory_order_release);
	*ind = i;
	return false;
}

tcache_t *tcaches_get(unsigned ind) {
	tcaches_elm_t *elm = tcaches_elm(ind);
	if (elm == NULL || atomic_load_explicit(&elm->state,
	    memory_order_acquire) != TCACHES_LIVE)
		return NULL;
	return &elm->tc;
}

bool tcaches_flush(unsigned ind) {
	tcache_t *tc = tcaches_get(ind);
	if (tc == NULL)
		return true;
	tcache_flush(tc);
	return false;
}

bool tcaches_destroy(unsigned ind) {
	tcaches_elm_t *elm = tcaches_elm(ind);
	if (!tcaches_claim(elm, TCACHES_LIVE))
		return true;
	tcache_flush(&elm->tc);
	tcaches_release(elm, TCACHES_FREE);
	return false;
}

/* Destroyed caches of `arena` (the last one they served): what was freed
 * in their slabs since, by remote frees, goes back as it would from an
 * orphan.  Live caches are the program's: they are left alone. */
static void tcaches_collect(arena_t *arena) {
	unsigned past = atomic_load_explicit(&tcaches_past,
	    memory_order_acquire);
	for (unsigned i = 0; i < past; i++) {
		tcaches_elm_t *elm = tcaches_elm(i);
		if (!tcaches_claim(elm, TCACHES_FREE))
			continue;
		if (elm->tc.arena == arena)
			tcache_flush(&elm->tc);
		tcaches_release(elm, TCACHES_FREE);
	}
}

void *tcache_explicit_alloc_small(tcache_t *tc, unsigned ind) {
	void **cur = tc->cb_cur[ind];
	void *p = *cur;
	if (p == NULL)
		return tcache_bin_fill(tc, ind);   /* counts the request */
	tc->cb_cur[ind] = cur + 1;
	tc->cb_nreq[ind]++;
	return p;
}

void tcache_explicit_dalloc_small(tcache_t *tc, unsigned ind, void *p) {
	if ((uint32_t)(uintptr_t)tc->cb_cur[ind] == tc->cb_full[ind])
		tcache_bin_overflow(tc, ind);
	*--tc->cb_cur[ind] = p;
}

/* ---- an arena's caches ---- */

void tcache_arena_setup(arena_t *arena) {
	tcache_init(&arena->shared, arena, true);
	tcache_init(&arena->prof_cache, arena, true);
	arena->prof_cache.small_slabs = true;
}

/* Return what the arena's own caches hold free (slabs, large blocks). */
void tcache_arena_shared_flush(arena_t *arena) {
	mp_mutex_lock(&arena->shared_mtx);
	tcache_flush(&arena->shared);
	mp_mutex_unlock(&arena->shared_mtx);
}

void tcache_arena_decay(arena_t *arena, bool force) {
	tcache_arena_shared_flush(arena);
	/* Emptied prof_cache slabs retire as they empty, past those it
	 * keeps (slab.c's slab_prof_keep: PROF_CACHE_EMPTY_SLABS_MAX, and
	 * PROF_CACHE_EMPTY_BYTES or a share of the heap); this returns those
	 * too. */
	mp_mutex_lite_lock(&arena->prof_cache_mtx);
	tcache_flush(&arena->prof_cache);
	mp_mutex_lite_unlock(&arena->prof_cache_mtx);
	tcache_orphans_collect(arena, UINT32_MAX);
	tcaches_collect(arena);
	arena_decay(arena, force);
}
