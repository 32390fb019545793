/*
 * arena.c: arenas, the sources of pages.  An arena hands slabs to thread
 * caches and large blocks to callers, takes them back, and runs decay.
 * Automatic arenas (4 per CPU unless narenas says otherwise; by default
 * threads share past one per CPU, see arena_choose_auto) are created
 * on first use; arenas.create adds manual ones, which arena.<i>.reset
 * empties and arena.<i>.destroy also takes apart (its pages go back
 * through the extent hooks, its index to the next arenas.create).  With
 * percpu_arena the first automatic arenas belong to CPUs instead
 * (arena_percpu_boot).
 * Large blocks of oversize_threshold bytes or more come from the huge
 * arena, index narenas_auto, which purges what is freed at once.  One
 * mutex per arena guards its extents and counters; small allocations
 * never reach it except to fetch or return a whole slab.
 *
 * The layers above know the arena, not the reverse: this file calls no
 * cache and no background-thread function (arena_reset alone reaches
 * into its shared cache's fields, under shared_mtx: it takes the slabs
 * off the lists).  The caches an arena embeds
 * (shared, prof_cache) are set up by tcache.c through the setup function
 * arena_boot is given, and flushed by tcache.c before a decay pass; the
 * background thread learns of freed pages through arena_pages_freed,
 * which it sets at its boot.
 */
#include "malloc_prof/internal/internal.h"

#include <sched.h>
#include <unistd.h>

_Atomic(arena_t *) arenas[ARENAS_MAX];
unsigned narenas_auto;
/* arena_choose_auto makes no new automatic arena once this many exist:
 * one per CPU unless narenas was given (arena_boot). */
static unsigned arena_share_from;
unsigned arena_percpu_limit;
/* The CPU count percpu_arena was set up for (phycpu's pairing). */
static unsigned arena_percpu_ncpus;
_Atomic unsigned narenas_total;
static mp_mutex_t arenas_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_ARENAS);
/* Sets up the caches a new arena embeds (tcache.c's, given to
 * arena_boot): they must be ready before the arena is published, which
 * happens here under arenas_mtx, so the setup is passed in rather than
 * left to arena_get's callers. */
static void (*arena_cache_setup)(arena_t *arena);
/* Pages in slabs and large blocks over all arenas: prof_gdump watches its
 * high-water mark. */
static _Atomic size_t arenas_pactive;

/* After a new slab or large block.  The caller may hold a shared-cache
 * lock, so a possible new high is only noted here and handed to the
 * profiler by the allocation's outermost slow path once every lock is
 * released (tsd_gdump_flush). */
static void active_grew(size_t pages) {
	size_t total = atomic_fetch_add_explicit(&arenas_pactive, pages,
	    memory_order_relaxed) + pages;
	if (config_prof && opt_prof)
		mp_tsd.prof_gdump_pending = total;
}

size_t arena_pactive_total(void) {
	return atomic_load_explicit(&arenas_pactive, memory_order_relaxed);
}

/* A hook rather than a call so that arena.c does not depend on the
 * background thread (which depends on it): the thread sets it at boot.
 * Never NULL, so the free paths that reach it pay no test; the cost is
 * the same call as before, made through a pointer. */
static void pages_freed_none(void) {
}
void (*arena_pages_freed)(void) = pages_freed_none;

/* arena_reset's way to the profiler for a sampled large block (alloc
 * uses no prof function): tsd.c's boot list points it at
 * prof_sample_free. */
void (*arena_large_unsample)(void *p, extent_t *e);

/* Called after pages were freed, with no arena lock held. */
static void active_shrank(size_t pages) {
	atomic_fetch_sub_explicit(&arenas_pactive, pages, memory_order_relaxed);
	arena_pages_freed();
}

_Atomic ssize_t arena_dirty_decay_ms_default = ARENA_DECAY_MS_OPT;
_Atomic ssize_t arena_muzzy_decay_ms_default = ARENA_DECAY_MS_OPT;

/* stats.arenas.<i>.lextents: a block of class ind carved (nmalloc and a
 * request) or returned.  Under arena->mtx. */
static void arena_lextent_count(arena_t *arena, unsigned ind, bool alloc) {
	arena_lextent_stats_t *ls = &arena->lstats[ind - SC_NBINS];
	if (alloc) {
		atomic_fetch_add_explicit(&ls->nmalloc, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&ls->nrequests, 1,
		    memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&ls->ndalloc, 1, memory_order_relaxed);
	}
}

/* Indices of destroyed arenas, with their records, for the next
 * arenas.create (under arenas_mtx): base.c's memory is never freed, so a
 * record is kept for reuse rather than lost. */
static arena_t *arenas_destroyed[ARENAS_MAX];
static unsigned narenas_destroyed;

/*
 * Clear a destroyed arena's record for reuse, all but its three mutexes
 * and the two fields read without a lock: a thread that looked the arena
 * up before it was destroyed (a purge of all arenas, malloc_trim, a
 * statistics snapshot, the background thread) may still lock the
 * mutexes, peek at `orphans` or read `nthreads`, and finds an empty
 * arena.  The caller holds the three mutexes, so that no such thread
 * sees the record half cleared.
 */
#define ARENA_FIELD(f) { offsetof(arena_t, f), sizeof(((arena_t *)0)->f) }
static const struct {
	size_t off, size;
} arena_kept[] = {
	ARENA_FIELD(mtx), ARENA_FIELD(shared_mtx), ARENA_FIELD(prof_cache_mtx),
	ARENA_FIELD(orphans_mtx), ARENA_FIELD(orphans), ARENA_FIELD(nthreads),
};
_Static_assert(offsetof(arena_t, mtx) < offsetof(arena_t, shared_mtx) &&
    offsetof(arena_t, shared_mtx) < offsetof(arena_t, prof_cache_mtx) &&
    offsetof(arena_t, prof_cache_mtx) < offsetof(arena_t, orphans_mtx) &&
    offsetof(arena_t, orphans_mtx) < offsetof(arena_t, orphans) &&
    offsetof(arena_t, orphans) < offsetof(arena_t, nthreads),
    "arena_kept: in declaration order");

static void arena_clear_reused(arena_t *arena) {
	char *p = (char *)arena;
	size_t from = 0;
	for (unsigned i = 0; i < sizeof(arena_kept) / sizeof(arena_kept[0]);
	    i++) {
		memset(p + from, 0, arena_kept[i].off - from);
		from = arena_kept[i].off + arena_kept[i].size;
	}
	memset(p + from, 0, sizeof(arena_t) - from);
	__atomic_store_n(&arena->orphans, NULL, __ATOMIC_RELAXED);
	atomic_store_explicit(&arena->nthreads, 0, memory_order_relaxed);
}

/* A new arena at index ind; `reuse` is a destroyed arena's record. */
static arena_t *arena_new_at(unsigned ind, arena_t *reuse,
    extent_hooks_t *hooks) {
	arena_t *arena = reuse;
	if (arena != NULL) {
		mp_mutex_lock(&arena->shared_mtx);
		mp_mutex_lite_lock(&arena->prof_cache_mtx);
		mp_mutex_lock(&arena->orphans_mtx);
		mp_mutex_lock(&arena->mtx);
		/* opt.hpa: the pageslabs' record, emptied by the destroy,
		 * stays with the arena (base.c's memory is kept). */
		struct hpa_shard_s *hpa = arena->hpa;
		arena_clear_reused(arena);
		arena->hpa = hpa;
	} else {
		arena = base_alloc(sizeof(arena_t));
		if (arena == NULL)
			return NULL;
		mp_mutex_init(&arena->mtx, LOCK_RANK_ARENA);
		mp_mutex_init(&arena->shared_mtx, LOCK_RANK_ARENA_SHARED);
		mp_mutex_init_lite(&arena->prof_cache_mtx,
		    LOCK_RANK_ARENA_PROF_CACHE);
		mp_mutex_init(&arena->orphans_mtx, LOCK_RANK_ARENA_ORPHANS);
	}
	atomic_store(&arena->hooks, hooks != NULL ? hooks :
	    &extent_hooks_default);
	extent_dss_set(ind, arena_dss_default);
	atomic_store(&arena->dirty_decay_ms,
	    atomic_load(&arena_dirty_decay_ms_default));
	atomic_store(&arena->muzzy_decay_ms,
	    atomic_load(&arena_muzzy_decay_ms_default));
	/*
	 * The huge arena (made on first use, whoever asks) purges at once:
	 * both decay times 0 unless the default is already 0 or -1, as
	 * jemalloc's arena_choose_huge sets them.  Huge blocks are few, so
	 * decay driven by allocation ticks would seldom run, and they are
	 * seldom reused at once.  With the background_thread option the
	 * times stay: its thread purges on time (as later jemalloc does).
	 */
	if (ind != 0 && ind == extent_huge_ind && !opt_background_thread) {
		if (arena_dirty_decay_ms(arena) > 0)
			atomic_store(&arena->dirty_decay_ms, 0);
		if (arena_muzzy_decay_ms(arena) > 0)
			atomic_store(&arena->muzzy_decay_ms, 0);
	}
	for (unsigned k = 0; k < EXTENT_NFREE_KINDS; k++)
		extent_set_init(&arena->sets[k]);
	arena->grow_next = (size_t)2 << 20;
	arena->ind = ind;
	arena->create_ns = os_now_ns();
	arena_cache_setup(arena);
	if (reuse != NULL) {
		mp_mutex_unlock(&arena->mtx);
		mp_mutex_unlock(&arena->orphans_mtx);
		mp_mutex_lite_unlock(&arena->prof_cache_mtx);
		mp_mutex_unlock(&arena->shared_mtx);
	}
	return arena;
}

static arena_t *arena_new(unsigned ind) {
	return arena_new_at(ind, NULL, NULL);
}

/*
 * percpu_arena, as jemalloc 5.3 sets it up: arenas [0, limit) belong to
 * CPUs, limit being the CPU count (percpu) or half of it, rounded up
 * (phycpu), and narenas is raised to the limit.  The CPU count is the
 * affinity mask's; jemalloc turns the option off, with one line, when
 * sched_getcpu fails, or when that count differs from the CPUs online or
 * configured (taskset, cgroups: the CPU numbers then run past the count)
 * and narenas was not given.  Returns the automatic arenas to make, 0
 * when the option is off.
 */
static unsigned arena_percpu_boot(void) {
	if (opt_percpu_arena == PERCPU_ARENA_DISABLED)
		return 0;
	unsigned ncpus = os_ncpus();
	long onln = sysconf(_SC_NPROCESSORS_ONLN);
	long conf = sysconf(_SC_NPROCESSORS_CONF);
	const char *why = NULL;
	if (sched_getcpu() < 0)
		why = "sched_getcpu() is not available";
	else if (opt_narenas == 0 && (onln != (long)ncpus ||
	    conf != (long)ncpus))
		why = "the CPU count is not deterministic (affinity mask, CPUs "
		    "online and configured differ)";
	if (why != NULL) {
		mp_error("percpu_arena: %s; per-CPU arenas disabled", why);
		opt_percpu_arena = PERCPU_ARENA_DISABLED;
		return 0;
	}
	if (opt_percpu_arena == PERCPU_ARENA_PHYCPU && ncpus % 2 != 0)
		mp_error("percpu_arena:phycpu with an odd number (%u) of CPUs "
		    "(no hyperthreading?)", ncpus);
	unsigned limit = opt_percpu_arena == PERCPU_ARENA_PHYCPU && ncpus > 1
	    ? ncpus / 2 + ncpus % 2 : ncpus;
	if (limit > ARENAS_MAX - 1)
		limit = ARENAS_MAX - 1;
	arena_percpu_ncpus = ncpus;
	arena_percpu_limit = limit;
	return opt_narenas > limit ? opt_narenas : limit;
}

/*
 * jemalloc's mapping: CPU i has arena i; with phycpu, CPU i and CPU
 * i + ncpus/2 share arena i (Linux numbers the second hyperthreads of
 * all cores after the first ones).  A CPU number past the limit (CPUs
 * brought online after start-up, or an affinity mask narrower than the
 * machine when narenas was given) folds back into it, where jemalloc
 * would leave the thread on an arena outside the per-CPU range for good.
 */
unsigned arena_percpu_choose(void) {
	int cpu = sched_getcpu();
	unsigned c = cpu < 0 ? 0 : (unsigned)cpu;
	unsigned half = arena_percpu_ncpus / 2;
	if (opt_percpu_arena == PERCPU_ARENA_PHYCPU && c >= half)
		c -= half;
	return c < arena_percpu_limit ? c : c % arena_percpu_limit;
}

/* Under arena->mtx, after its pages in use changed. */
static void huge_used_note(arena_t *arena) {
	if (extent_huge_ind != 0 && arena->ind == extent_huge_ind)
		atomic_store_explicit(&extent_huge_used,
		    arena->stats.pactive - arena->ptail,
		    memory_order_relaxed);
}

bool arena_boot(void (*cache_setup)(arena_t *arena)) {
	mp_mutex_init(&arenas_mtx, LOCK_RANK_ARENAS);
	arena_cache_setup = cache_setup;
	arena_dss_default = opt_dss;
	/* The kernel's THP mode, once (opt.thp reads "not supported" on a
	 * kernel without it, as in jemalloc), and the advice for the
	 * metadata mapped before the options were read. */
	if (os_thp_system() == OS_THP_UNSUPPORTED)
		opt_thp = OS_THP_UNSUPPORTED;
	base_thp_boot();
	/* A threshold outside the large classes turns the huge arena off
	 * and reads 0 (jemalloc's arena_init_huge). */
	bool huge = opt_oversize_threshold >= SC_LARGE_MINCLASS &&
	    opt_oversize_threshold <= SC_LARGE_MAXCLASS;
	unsigned n = arena_percpu_boot();
	bool given = n != 0 || opt_narenas != 0;
	if (n == 0)
		n = opt_narenas != 0 ? opt_narenas : 4 * os_ncpus();
	unsigned cap = ARENAS_MAX - 1 - (huge ? 1u : 0u);
	if (n > cap)
		n = cap;
	narenas_auto = n;
	arena_share_from = given || os_ncpus() > n ? n : os_ncpus();
	opt_narenas = n;        /* opt.narenas reads the number in effect */
	if (huge) {
		/* Its index follows the automatic ones: arenas.narenas
		 * counts it, threads never pick it. */
		extent_huge_ind = n;
		extent_oversize = opt_oversize_threshold;
		n++;
	} else {
		extent_huge_ind = 0;
		extent_oversize = SIZE_MAX;
		/* Stored only when it changes (by default it is 0): the
		 * store made its page of .bss resident in every process. */
		if (opt_oversize_threshold != 0)
			opt_oversize_threshold = 0;
	}
	atomic_store(&narenas_total, n);
	arena_t *a0 = arena_new(0);
	if (a0 == NULL)
		return true;
	atomic_store_explicit(&arenas[0], a0, memory_order_release);
	return false;
}

/* Automatic arena ind (or the huge one), made if it is not yet; NULL if
 * that failed.  arenas_mtx held. */
static arena_t *arena_make_locked(unsigned ind) {
	arena_t *a = atomic_load_explicit(&arenas[ind], memory_order_acquire);
	if (a == NULL) {
		a = arena_new(ind);
		if (a != NULL)
			atomic_store_explicit(&arenas[ind], a,
			    memory_order_release);
	}
	return a;
}

arena_t *arena_get(unsigned ind, bool create) {
	if (ind >= ARENAS_MAX)
		return NULL;
	arena_t *a = atomic_load_explicit(&arenas[ind], memory_order_acquire);
	if (a != NULL || !create || ind >= atomic_load(&narenas_total))
		return a;
	/* Only automatic arenas and the huge one are made on first use: a
	 * manual index without an arena was destroyed. */
	if (ind >= narenas_auto && (extent_huge_ind == 0 ||
	    ind != extent_huge_ind))
		return NULL;
	mp_mutex_lock(&arenas_mtx);
	a = arena_make_locked(ind);
	mp_mutex_unlock(&arenas_mtx);
	return a;
}

/*
 * A new thread's arena, with the thread counted in its nthreads: the
 * first one with no thread attached, else a new one while fewer than
 * arena_share_from exist, else the least loaded.  Round robin spread
 * threads that come and go over every arena, each keeping its own slabs
 * and orphaned caches: with four threads at a time, eight arenas' worth
 * of memory.  A thread that takes a dead thread's arena also adopts its
 * orphaned cache.
 *
 * jemalloc makes new arenas up to narenas (4 per CPU), each with its own
 * dirty pages that only its threads reuse.  Here, unless narenas was
 * given, threads share once there is one arena per CPU: a thread takes an
 * arena's lock only to fetch or return a whole slab, so sharing costs
 * little, and the arenas' dirty pages are pooled.  bench's threadchurn
 * (four short threads at a time on 2 CPUs) held five arenas, each as
 * high as the largest worker it ever ran; with two its peak fell below
 * jemalloc's for 0.6-1.5% more CPU time (doc/performance.md, "threadchurn's
 * arenas").
 *
 * The choice and the count are made under arenas_mtx, as jemalloc's
 * arena_choose_hard binds under arenas_lock: threads starting at once
 * each saw the first arena without a thread and all took it, and a
 * program of 9 threads on narenas:6 used 5 (test/unit/arena_share_given
 * under a loaded machine).
 */
arena_t *arena_choose_auto(void) {
	arena_t *best = NULL, *chosen = NULL;
	uint32_t best_n = UINT32_MAX;
	mp_mutex_lock(&arenas_mtx);
	for (unsigned i = 0; i < narenas_auto && chosen == NULL; i++) {
		arena_t *a = atomic_load_explicit(&arenas[i],
		    memory_order_acquire);
		if (a == NULL) {
			if (i >= arena_share_from && best != NULL)
				break;
			if (i < atomic_load(&narenas_total))
				chosen = arena_make_locked(i);
			break;
		}
		uint32_t n = atomic_load_explicit(&a->nthreads,
		    memory_order_relaxed);
		if (n == 0)
			chosen = a;
		else if (n < best_n) {
			best = a;
			best_n = n;
		}
	}
	if (chosen == NULL)
		chosen = best != NULL ? best : atomic_load_explicit(&arenas[0],
		    memory_order_acquire);
	atomic_fetch_add(&chosen->nthreads, 1);
	mp_mutex_unlock(&arenas_mtx);
	return chosen;
}

bool arena_create(unsigned *ind) {
	return arena_create_hooked(ind, NULL);
}

bool arena_create_hooked(unsigned *ind, extent_hooks_t *hooks) {
	mp_mutex_lock(&arenas_mtx);
	arena_t *a;
	unsigned i;
	if (narenas_destroyed != 0) {
		arena_t *old = arenas_destroyed[narenas_destroyed - 1];
		i = old->ind;
		a = arena_new_at(i, old, hooks);
		narenas_destroyed--;
	} else {
		i = atomic_load(&narenas_total);
		a = i < ARENAS_MAX - 1 ? arena_new_at(i, NULL, hooks) : NULL;
		if (a != NULL)
			atomic_store(&narenas_total, i + 1);
	}
	if (a != NULL) {
		a->manual = true;
		atomic_store_explicit(&arenas[i], a, memory_order_release);
		*ind = i;
	}
	mp_mutex_unlock(&arenas_mtx);
	return a == NULL;
}

/* A manual arena's large blocks in use, for arena_reset (under mtx). */
static void large_link(arena_t *arena, extent_t *e) {
	e->lru_prev = NULL;
	e->lru_next = arena->large_head;
	if (arena->large_head != NULL)
		arena->large_head->lru_prev = e;
	arena->large_head = e;
}

static void large_unlink(arena_t *arena, extent_t *e) {
	if (e->lru_prev != NULL)
		e->lru_prev->lru_next = e->lru_next;
	else
		arena->large_head = e->lru_next;
	if (e->lru_next != NULL)
		e->lru_next->lru_prev = e->lru_prev;
}

/* (Re)start an empty slab as a slab of class ind, regions untouched
 * (every region free; the remote map is empty once a slab is).
 * class_tag: every page maps to it with the class tag, so that an
 * interior pointer finds the slab and realloc finds the class (the
 * leaves exist already: the mapping prepared them).  Else (the
 * prof_cache's slabs) the pages map to it untagged whatever its class:
 * arena_slab_alloc sets them once, and a kept slab set up again for
 * another class leaves them as they are. */
void arena_slab_init(extent_t *slab, unsigned ind, bool class_tag) {
	slab->szind = (uint8_t)ind;
	slab->usize = (uint32_t)sz_index2size(ind);
	slab->nregs = (uint32_t)(slab->size / slab->usize);
	slab->div_magic = (uint32_t)((((uint64_t)1 << 32) + slab->usize - 1) /
	    slab->usize);
	mp_assert(slab->nregs <= SLAB_MAXREGS);
	slab->used = 0;
	slab->free_word = 0;
	for (unsigned w = 0; w < SLAB_WORDS; w++) {
		unsigned first = w * 64;
		slab->free_bits[w] = first >= slab->nregs ? 0
		    : slab->nregs - first >= 64 ? ~(uint64_t)0
		    : ((uint64_t)1 << (slab->nregs - first)) - 1;
		mp_assert(atomic_load_explicit(&slab->remote_bits[w],
		    memory_order_relaxed) == 0);
	}
	if (class_tag)
		pagemap_set_class(slab->addr, slab->size, slab);
}

extent_t *arena_slab_alloc(arena_t *arena, unsigned ind, size_t size,
    bool class_tag) {
	size_t dirty_off, dirty_len;
	/* san_guard_small: carved a page longer at each end (san.c). */
	bool guard = unlikely(opt_san_guard_small != 0) &&
	    san_slab_decide(arena);
	size_t carve = unlikely(guard) ? size + 2 * PAGE : size;
	mp_mutex_lock(&arena->mtx);
	extent_t *slab = NULL;
	/* opt.hpa: from a pageslab (hpa.c); else, or out of memory there,
	 * from the extents. */
	if (unlikely(opt_hpa) && !guard && hpa_eligible(arena, carve))
		slab = extent_alloc_hpa_locked(arena, carve, &dirty_off,
		    &dirty_len);
	if (slab == NULL)
		slab = extent_alloc_locked(arena, carve, carve, false, PAGE,
		    &dirty_off, &dirty_len);
	if (unlikely(guard) && slab != NULL)
		san_guard(slab, dirty_off, dirty_len);
	if (slab != NULL) {
		slab->kind = EXTENT_SLAB;
		arena->stats.pactive += size >> LG_PAGE;
		arena->stats.slabs_cur++;
		arena->stats.slabs_total++;
	}
	mp_mutex_unlock(&arena->mtx);
	if (slab == NULL)
		return NULL;
	active_grew(size >> LG_PAGE);
	slab->list = SLAB_LIST_NONE;
	slab->prof = NULL;
	atomic_store_explicit(&slab->full, 0, memory_order_relaxed);
	for (unsigned w = 0; w < SLAB_WORDS; w++)
		atomic_store_explicit(&slab->remote_bits[w], 0,
		    memory_order_relaxed);
	arena_slab_init(slab, ind, class_tag);
	if (!class_tag)
		pagemap_set_range(slab->addr, slab->size, slab);
	return slab;
}

void arena_slab_dalloc(arena_t *arena, extent_t *slab) {
	mp_assert(slab->kind == EXTENT_SLAB && slab->used == 0);
	mp_mutex_lock(&arena->mtx);
	arena->stats.pactive -= slab->size >> LG_PAGE;
	arena->stats.slabs_cur--;
	size_t pages = slab->size >> LG_PAGE;
	if (unlikely(slab->guarded))
		san_unguard(slab);
	extent_dalloc_locked(arena, slab);
	mp_mutex_unlock(&arena->mtx);
	active_shrank(pages);
}

/*
 * cache_oblivious (jemalloc's opt.cache_oblivious).  Large blocks all
 * start on a page boundary otherwise, so the first lines of blocks of one
 * class, and any field at one offset in them, fall into the same few sets
 * of a CPU cache.  With it, a block whose alignment is below a page
 * starts a pseudo-random number of cache lines (of alignment steps, if
 * larger) into its extent, which is carved a page longer for that: in
 * (0, PAGE), so the block's first byte is on the extent's first page and
 * its last byte on the extent's last page, the two the page map points
 * at (free, arenas.lookup of either end).  Once
 * carved, the extent is narrowed to the block (addr and size describe
 * the block, as for any large one: free, sized free, usable size, the
 * large cache, the profiler's lookup see nothing new; san_guard narrows
 * a guarded block the same way), and widened back under arena->mtx
 * before its pages change hands: free, in-place resize.  pad_lines says
 * which blocks are narrowed.  Guarded blocks get no offset (the guard
 * page follows the block's end), nor do blocks of LARGE_CAP_MIN or more,
 * unlike jemalloc's: they are carved on 2 MiB granules to take moved
 * page tables (extent.c), and the page more cost bench's large 25% more
 * page faults; for them the spread start matters least.  The pad page
 * counts as active.  Off by default: the page costs 12-13% of peak RSS
 * in bench's midsize, realloc and reallocgrow (doc/performance.md).
 */
bool opt_cache_oblivious = false;

static __thread uint64_t arena_prng __attribute__((tls_model("initial-exec")));

_Static_assert(PAGE / CACHELINE + 1 <= UINT8_MAX, "pad_lines is a byte");

/* The block's offset into its extent: a multiple of the cache line and of
 * align (< PAGE), above 0 and below a page.  A 64-bit LCG per thread
 * (jemalloc's constants), its high bits taken: the low ones have short
 * periods. */
static size_t large_lead(size_t align) {
	size_t step = align > CACHELINE ? align : CACHELINE;
	uint64_t x = arena_prng;
	if (unlikely(x == 0))   /* a thread's first: seeded by its address */
		x = (uint64_t)(uintptr_t)&arena_prng * 0x9e3779b97f4a7c15u;
	x = x * 6364136223846793005u + 1442695040888963407u;
	arena_prng = x;
	return ((size_t)(x >> 40) % (PAGE / step - 1) + 1) * step;
}

_Static_assert(PAGE / CACHELINE >= 2, "room for an offset");

static void large_narrow(extent_t *e, size_t lead) {
	e->addr += lead;
	e->size -= PAGE;
	e->pad_lines = (uint8_t)(lead / CACHELINE + 1);
}

/* Back to its whole extent; returns the block's offset in it. */
static size_t large_widen(extent_t *e) {
	size_t lead = (size_t)(e->pad_lines - 1) * CACHELINE;
	e->addr -= lead;
	e->size += PAGE;
	e->pad_lines = 0;
	return lead;
}

/* A size class's tail past the request at least this long is kept out of
 * the resident set (see arena_large_alloc_req). */
#define LARGE_TAIL_MIN ((size_t)64 << 10)
/* Blocks from this size on are carved under the resident cap, zeroed or
 * not (see arena_large_alloc_req). */
#define LARGE_CAP_MIN ((size_t)4 << 20)

/*
 * A large block of class usize for a request of `size` bytes (usize when
 * unknown).  A zeroed one (calloc) is carved under the arena's resident
 * cap (extent_alloc_locked), and the class's tail past the request (up to
 * a quarter of the class), which the program does not touch, holds no
 * resident memory: its dirty pages are purged and its clean ones left
 * alone, and it is purged again and returned clean when the block is
 * freed (clean_from), whatever the program wrote there.  Only the dirty
 * pages the request covers are cleared: clean pages read as zero.
 *
 * A block of LARGE_CAP_MIN or more that malloc asks for is carved under
 * the cap too, tail and all: its pages that would be faulted in take the
 * page tables of the oldest dirty pages instead (extent.c's move_dirty,
 * whole 2 MiB granules, which such a block spans), so the cap costs it
 * no faults, and it keeps the free dirty runs a bigger block cannot use
 * from adding to the peak (bench's large, 1-32 MiB, 8 live: 276 MB ->
 * 219 MB, 70,000 -> 55,700 page faults, 1.25x -> 0.99x jemalloc's peak).
 * Before the moves existed the cap cost that workload 2x its CPU time
 * (purged pages faulted back in).  Smaller blocks are carved as before:
 * a move needs two granules, and a purge for them costs a fault later.
 */
void *arena_large_alloc_req(arena_t *arena, size_t usize, size_t align,
    bool zero, size_t size) {
	size_t dirty_off, dirty_len;
	/* cache_oblivious: the block starts `lead` bytes into an extent of
	 * esize bytes; used, the dirty range and clean_from are offsets in
	 * the extent until it is narrowed to the block. */
	size_t lead = 0, esize = usize;
	if (opt_cache_oblivious && align < PAGE && usize < LARGE_CAP_MIN) {
		lead = large_lead(align);
		esize = usize + PAGE;
	}
	size_t used = PAGE_CEILING(lead + size);
	/* Custom hooks: no clean tail, whose purges would bypass them. */
	if (!zero || esize - used < LARGE_TAIL_MIN ||
	    unlikely(extent_hooks_custom(arena)))
		used = esize;
	/* oversize_threshold: the huge arena, for a thread on an automatic
	 * arena; an arena the thread or the call chose (a manual one,
	 * MALLOCX_ARENA of another) is kept, as jemalloc keeps it. */
	if (unlikely(usize >= extent_oversize) && arena->ind < narenas_auto &&
	    (mp_tsd.arena == NULL || mp_tsd.arena == arena)) {
		arena_t *huge = arena_get(extent_huge_ind, true);
		if (huge != NULL) {
			/* The pages a zeroed block faults in count against
			 * the thread's arena's cap, as if carved there. */
			if (zero) {
				mp_mutex_lock(&arena->mtx);
				extent_resident_cap_locked(arena, used);
				mp_mutex_unlock(&arena->mtx);
			}
			arena = huge;
		}
	}
	/* san_guard_large: carved a page longer at each end (san.c). */
	bool guard = unlikely(opt_san_guard_large != 0) &&
	    san_large_decide(arena, usize, align);
	size_t carve = esize;
	if (unlikely(guard)) {
		lead = 0;
		esize = usize;
		used = usize;
		carve = usize + 2 * PAGE;
	}
	mp_mutex_lock(&arena->mtx);
	extent_t *e = NULL;
	if (unlikely(opt_hpa) && !guard && align <= PAGE &&
	    hpa_eligible(arena, carve))
		e = extent_alloc_hpa_locked(arena, carve, &dirty_off,
		    &dirty_len);
	if (e == NULL)
		e = extent_alloc_locked(arena, carve,
		    unlikely(guard) ? carve : used,
		    zero || usize >= LARGE_CAP_MIN, align, &dirty_off,
		    &dirty_len);
	if (unlikely(guard) && e != NULL) {
		san_guard(e, dirty_off, dirty_len);
		/* The dirty range, of the block now. */
		size_t dlo = dirty_off > PAGE ? dirty_off - PAGE : 0;
		size_t dhi = dirty_off + dirty_len > PAGE
		    ? dirty_off + dirty_len - PAGE : 0;
		if (dhi > usize)
			dhi = usize;
		if (dlo > dhi)
			dlo = dhi;
		dirty_off = dlo;
		dirty_len = dhi - dlo;
	}
	char *base = NULL;
	if (e != NULL) {
		arena->stats.pactive += esize >> LG_PAGE;
		arena->stats.large_allocated += usize;
		arena->stats.large_nmalloc++;
		arena_lextent_count(arena, sz_size2index(usize), true);
		arena->ptail += (esize - used) >> LG_PAGE;
		e->clean_from = used < esize ? used : 0;
		huge_used_note(arena);
		e->kind = EXTENT_LARGE;
		e->szind = (uint8_t)sz_size2index(usize);
		e->prof = NULL;
		atomic_store_explicit(&e->owner, &extent_large_owner,
		    memory_order_relaxed);
		pagemap_set_class(e->addr, PAGE, e);
		if (unlikely(arena->manual))
			large_link(arena, e);
		base = e->addr;
		e->pad_lines = 0;
		if (esize != usize)
			large_narrow(e, lead);
	}
	mp_mutex_unlock(&arena->mtx);
	if (e == NULL)
		return NULL;
	active_grew(esize >> LG_PAGE);
	size_t lo = dirty_off, hi = dirty_off + dirty_len;
	if (e->clean_from != 0 && hi > used) {
		size_t cut = used > lo ? used : lo;
		/* Zeroed by the purge unless MADV_DONTNEED does not zero. */
		if (!os_purge_forced(base + cut, hi - cut))
			hi = cut;
	}
	/* Of a padded extent, the bytes before the block too: fewer tests,
	 * and at most a page. */
	if (zero && hi > lo)
		memset(base + lo, 0, hi - lo);
	return e->addr;
}

void *arena_large_alloc(arena_t *arena, size_t usize, size_t align,
    bool zero) {
	return arena_large_alloc_req(arena, usize, align, zero, usize);
}

/* Whether a decay pass is due at `now`; if so, the next one is set for
 * 1/16 of the decay time later (at least 1 ms). */
static bool decay_due(arena_t *arena, uint64_t now) {
	ssize_t dirty_ms = arena_dirty_decay_ms(arena);
	ssize_t muzzy_ms = arena_muzzy_decay_ms(arena);
	if (dirty_ms <= 0 && muzzy_ms <= 0)
		return false;
	if (now < __atomic_load_n(&arena->decay_next_ns, __ATOMIC_RELAXED))
		return false;
	ssize_t ms = dirty_ms > 0 ? dirty_ms : muzzy_ms;
	if (muzzy_ms > 0 && muzzy_ms < ms)
		ms = muzzy_ms;
	uint64_t step = (uint64_t)ms * 1000000u / 16;
	if (step < 1000000u)
		step = 1000000u;
	__atomic_store_n(&arena->decay_next_ns, now + step, __ATOMIC_RELAXED);
	return true;
}

void arena_large_dalloc(extent_t *e) {
	arena_t *arena = e->arena;
	size_t usize = e->size;
	/* Before the lock: the block is still ours.  clean_from counts
	 * from the start of a padded block's extent. */
	if (e->clean_from != 0) {
		size_t lead = e->pad_lines != 0 ?
		    (size_t)(e->pad_lines - 1) * CACHELINE : 0;
		size_t esize = usize + (e->pad_lines != 0 ? PAGE : 0);
		os_purge_forced(e->addr - lead + e->clean_from,
		    esize - e->clean_from);
	}
	mp_mutex_lock(&arena->mtx);
	if (e->pad_lines != 0)
		large_widen(e);
	arena->stats.pactive -= e->size >> LG_PAGE;
	arena->stats.large_allocated -= usize;
	arena->stats.large_ndalloc++;
	arena_lextent_count(arena, e->szind, false);
	size_t pages = e->size >> LG_PAGE;
	if (e->clean_from != 0)
		arena->ptail -= (e->size - e->clean_from) >> LG_PAGE;
	huge_used_note(arena);
	if (unlikely(arena->manual))
		large_unlink(arena, e);
	/* One clock reading serves the free time and the decay tick (two
	 * were 1.3% of logsizes). */
	uint64_t now = os_now_ns();
	if (unlikely(e->guarded))
		san_unguard(e);
	extent_dalloc_at_locked(arena, e, now);
	if (decay_due(arena, now))
		extent_decay_locked(arena, now, false);
	mp_mutex_unlock(&arena->mtx);
	active_shrank(pages);
}

bool arena_large_resize(extent_t *e, size_t usize, bool zero,
    bool prefer_dirty) {
	arena_t *arena = e->arena;
	size_t old = e->size;
	bool zeroed_tail = false;
	if (usize == old)
		return false;
	/* A guarded block moves (realloc copies it) between new guards. */
	if (unlikely(e->guarded))
		return true;
	/* A padded block is resized as its extent, and keeps its offset. */
	size_t pad = e->pad_lines != 0 ? PAGE : 0, lead = 0;
	mp_mutex_lock(&arena->mtx);
	if (pad != 0)
		lead = large_widen(e);
	bool err = usize > old
	    ? extent_expand_locked(arena, e, usize + pad, prefer_dirty,
	    &zeroed_tail)
	    : extent_shrink_locked(arena, e, usize + pad);
	if (!err) {
		arena->stats.pactive += (usize >> LG_PAGE);
		arena->stats.pactive -= (old >> LG_PAGE);
		arena->stats.large_allocated += usize - old;
		/* As jemalloc: the old class freed, the new one allocated. */
		if (sz_size2index(usize) != e->szind) {
			arena_lextent_count(arena, e->szind, false);
			arena_lextent_count(arena, sz_size2index(usize), true);
		}
		e->szind = (uint8_t)sz_size2index(usize);
	}
	/* Its tail is in use now, or gone. */
	if (e->clean_from != 0)
		arena->ptail -= (old + pad - e->clean_from) >> LG_PAGE;
	e->clean_from = 0;
	huge_used_note(arena);
	/* The resize rewrote the bounds untagged; tag the (new) class. */
	pagemap_set_class(e->addr, PAGE, e);
	if (pad != 0)
		large_narrow(e, lead);
	mp_mutex_unlock(&arena->mtx);
	if (!err && usize > old)
		active_grew((usize - old) >> LG_PAGE);
	else if (!err)
		active_shrank((old - usize) >> LG_PAGE);
	if (!err && zero && usize > old) {
		/* A zeroed tail is the new pages only: the old extent's
		 * bytes past the block (PAGE - lead of them) may be dirty. */
		size_t n = usize - old;
		if (zeroed_tail)
			n = n < pad - lead ? n : pad - lead;
		if (n != 0)
			memset(e->addr + old, 0, n);
	}
	return err;
}

/* Only the arena's free extents: what its caches hold is returned first
 * by tcache.c's decay, the entry point of arena.<i>.decay/purge and
 * malloc_trim. */
void arena_decay(arena_t *arena, bool force) {
	mp_mutex_lock(&arena->mtx);
	extent_decay_locked(arena, os_now_ns(), force);
	mp_mutex_unlock(&arena->mtx);
}

/*
 * arena.<i>.*_decay_ms.  The next tick recomputes its pace (decay_due)
 * and a pass now purges what the new time makes due, as jemalloc does.
 * A background thread asleep until a deadline of the old time sees the
 * new one at its next pass.
 */
void arena_decay_ms_set(arena_t *arena, bool dirty, ssize_t ms) {
	atomic_store(dirty ? &arena->dirty_decay_ms : &arena->muzzy_decay_ms,
	    ms);
	__atomic_store_n(&arena->decay_next_ns, 0, __ATOMIC_RELAXED);
	arena_decay(arena, false);
}

/* Called from slow paths, also inside cache flushes (so it must not touch
 * orphans); purges at most every 1/16 of the decay time. */
void arena_decay_tick(arena_t *arena) {
	if (arena_dirty_decay_ms(arena) <= 0 &&
	    arena_muzzy_decay_ms(arena) <= 0)
		return;
	/* Due at most a tick late; the pass itself runs on the precise
	 * clock, which the extents' free times come from. */
	if (os_now_coarse_ns() < __atomic_load_n(&arena->decay_next_ns,
	    __ATOMIC_RELAXED))
		return;
	uint64_t now = os_now_ns();
	if (!decay_due(arena, now))
		return;
	mp_mutex_lock(&arena->mtx);
	extent_decay_locked(arena, now, false);
	mp_mutex_unlock(&arena->mtx);
}

/*
 * arena.<i>.reset.  The caller (ctl) has returned what the arena's own
 * cache holds free; the user has flushed every cache used with the arena,
 * as jemalloc requires.  What is left in use: the slabs of the arena's
 * shared cache (MALLOCX_ARENA, MALLOCX_TCACHE_NONE) and the large blocks
 * on large_head.  Both go back as if freed; sampled large blocks leave
 * the profiler first.  Slabs that a thread cache owns (a thread moved to
 * the arena with thread.arena) stay theirs: that thread may still hand
 * out their regions.  This reaches into the shared cache's lists, the
 * one place arena.c does, because the reset must see every slab.
 */
void arena_reset(arena_t *arena) {
	extent_t *slabs = NULL;
	tcache_t *tc = &arena->shared;
	mp_mutex_lock(&arena->shared_mtx);
	/* The caller's flush drained the inbox; a slab pushed there since
	 * is on its full list as well. */
	atomic_store_explicit(&tc->inbox, NULL, memory_order_relaxed);
	for (unsigned i = 0; i < SC_NBINS; i++) {
		tcache_bin_t *bin = &tc->bins[i];
		extent_t *lists[2] = { bin->partial, bin->full };
		for (unsigned l = 0; l < 2; l++) {
			for (extent_t *s = lists[l], *n; s != NULL; s = n) {
				n = s->next;
				s->next = slabs;
				slabs = s;
			}
		}
		memset(bin, 0, sizeof(*bin));
	}
	mp_mutex_unlock(&arena->shared_mtx);
	while (slabs != NULL) {
		extent_t *s = slabs;
		slabs = s->next;
		s->prev = s->next = NULL;
		s->used = 0;
		s->list = SLAB_LIST_NONE;
		atomic_store_explicit(&s->full, 0, memory_order_relaxed);
		for (unsigned w = 0; w < SLAB_WORDS; w++)
			atomic_store_explicit(&s->remote_bits[w], 0,
			    memory_order_relaxed);
		atomic_store_explicit(&s->owner, &extent_large_owner,
		    memory_order_relaxed);
		arena_slab_dalloc(arena, s);
	}
	for (;;) {
		mp_mutex_lock(&arena->mtx);
		extent_t *e = arena->large_head;
		mp_mutex_unlock(&arena->mtx);
		if (e == NULL)
			break;
		if (config_prof && e->prof != NULL &&
		    arena_large_unsample != NULL)
			arena_large_unsample(e->addr, e);
		arena_large_dalloc(e);
	}
	/* opt.hpa: the small extent cache's runs go back to the pageslabs
	 * too (jemalloc's pa_shard_reset flushes it). */
	if (unlikely(opt_hpa)) {
		mp_mutex_lock(&arena->mtx);
		hpa_sec_flush_locked(arena);
		mp_mutex_unlock(&arena->mtx);
	}
}

bool arena_destroy(arena_t *arena) {
	if (atomic_load(&arena->nthreads) != 0)
		return true;
	arena_reset(arena);
	mp_mutex_lock(&arena->mtx);
	extent_destroy_all_locked(arena);
	mp_mutex_unlock(&arena->mtx);
	mp_mutex_lock(&arenas_mtx);
	/* Two destroys of one arena at once: the record is kept once. */
	if (atomic_load_explicit(&arenas[arena->ind], memory_order_relaxed) ==
	    arena) {
		atomic_store_explicit(&arenas[arena->ind], NULL,
		    memory_order_release);
		arenas_destroyed[narenas_destroyed++] = arena;
	}
	mp_mutex_unlock(&arenas_mtx);
	return false;
}

void arena_stats_read(arena_t *arena, arena_stats_t *out) {
	mp_mutex_lock(&arena->mtx);
	*out = arena->stats;
	out->pdirty = arena->sets[EXTENT_FREE_DIRTY].npages;
	out->pmuzzy = arena->sets[EXTENT_FREE_MUZZY].npages;
	out->retained = arena->sets[EXTENT_FREE_CLEAN].npages << LG_PAGE;
	hpa_stats_locked(arena, out);
	mp_mutex_unlock(&arena->mtx);
	out->nthreads = atomic_load_explicit(&arena->nthreads,
	    memory_order_relaxed);
}

/*
 * fork: take every arena lock in rank order across all arenas (all shared
 * caches, then all orphan lists, then all extent locks), so that no thread
 * can hold one rank while waiting for a lower one we hold.
 */
static unsigned arenas_initialized(arena_t **out) {
	unsigned n = atomic_load(&narenas_total), k = 0;
	for (unsigned i = 0; i < n; i++) {
		arena_t *a = atomic_load_explicit(&arenas[i],
		    memory_order_acquire);
		if (a != NULL)
			out[k++] = a;
	}
	return k;
}

/* The hook arena (hook.c makes it; defined here, where fork orders its
 * locks, so that arena.c does not depend on hook.c). */
_Atomic(arena_t *) hook_extent_arena;

static arena_t *fork_arenas[ARENAS_MAX];
static unsigned fork_narenas;

void arena_prefork(void) {
	pthread_mutex_lock(&arenas_mtx.lock);
	fork_narenas = arenas_initialized(fork_arenas);
	/* The hook arena's locks rank above every arena's mtx (a thread in
	 * an extent hook holds one and takes them, hook.c): last. */
	unsigned n = fork_narenas;
	arena_t *hook = atomic_load(&hook_extent_arena);
	for (unsigned i = 0; hook != NULL && i < n; i++) {
		if (fork_arenas[i] == hook) {
			fork_arenas[i] = fork_arenas[n - 1];
			fork_arenas[--n] = hook;
		}
	}
	for (unsigned i = 0; i < n; i++)
		pthread_mutex_lock(&fork_arenas[i]->shared_mtx.lock);
	for (unsigned i = 0; i < n; i++)
		mp_mutex_lock_quiet(&fork_arenas[i]->prof_cache_mtx);
	for (unsigned i = 0; i < n; i++)
		pthread_mutex_lock(&fork_arenas[i]->orphans_mtx.lock);
	for (unsigned i = 0; i < n; i++)
		pthread_mutex_lock(&fork_arenas[i]->mtx.lock);
	for (unsigned i = n; i < fork_narenas; i++) {
		pthread_mutex_lock(&fork_arenas[i]->shared_mtx.lock);
		mp_mutex_lock_quiet(&fork_arenas[i]->prof_cache_mtx);
		pthread_mutex_lock(&fork_arenas[i]->orphans_mtx.lock);
		pthread_mutex_lock(&fork_arenas[i]->mtx.lock);
	}
}

void arena_postfork_parent(void) {
	for (unsigned i = 0; i < fork_narenas; i++) {
		pthread_mutex_unlock(&fork_arenas[i]->mtx.lock);
		pthread_mutex_unlock(&fork_arenas[i]->orphans_mtx.lock);
		mp_mutex_unlock_quiet(&fork_arenas[i]->prof_cache_mtx);
		pthread_mutex_unlock(&fork_arenas[i]->shared_mtx.lock);
	}
	pthread_mutex_unlock(&arenas_mtx.lock);
}

void arena_postfork_child(void) {
	for (unsigned i = 0; i < fork_narenas; i++) {
		mp_mutex_postfork_child(&fork_arenas[i]->mtx);
		mp_mutex_postfork_child(&fork_arenas[i]->orphans_mtx);
		mp_mutex_postfork_child(&fork_arenas[i]->prof_cache_mtx);
		mp_mutex_postfork_child(&fork_arenas[i]->shared_mtx);
	}
	mp_mutex_postfork_child(&arenas_mtx);
}
