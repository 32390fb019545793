/*
 * tsd.c: per-thread state (tsd), initialisation, thread exit and fork.
 *
 * This is one of the two places where the folders' one-way dependencies
 * (sys <- alloc <- ctl, prof beside them) are crossed on purpose: the
 * boot and fork lists below name every subsystem that has state to set
 * up or to hold across fork(), the ctl and prof ones included, in their
 * lock order.  (The other is the sampling hook on the allocation path in
 * malloc.c.)  Everything else in src/alloc/ leaves ctl/ and prof/ alone.
 *
 * A thread's tsd_t lives in initial-exec TLS (mp_tsd): its first fields
 * are all the fast paths of malloc.c read.  It is set up by tsd_fetch on
 * the thread's first slow-path call, registered so that statistics can
 * sum its counters, and folded into the dead threads' totals at exit.
 */
#include "malloc_prof/internal/internal.h"

#include <stdlib.h>

__thread tsd_t mp_tsd __attribute__((tls_model("initial-exec")));
bool malloc_initialized;

static mp_mutex_t init_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_INIT);
/* This thread is running malloc_init_hard: thread-local, so that other
 * threads never read it while it changes (a data race TSan reported). */
static __thread bool init_in_progress
    __attribute__((tls_model("initial-exec")));
static pthread_key_t tsd_key;

/* Live threads, so that stats can sum their counters; exited threads'
 * counters are folded into tsd_dead_*. */
static mp_mutex_t registry_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_TSD_REGISTRY);
static tsd_t *registry_head;
_Atomic uint64_t tsd_dead_allocated, tsd_dead_deallocated;

/* ------------------------------------------------------------- init */

static void malloc_prefork(void);
static void malloc_postfork_parent(void);
static void malloc_postfork_child(void);
static void tsd_cleanup(void *arg);

/* stats_print:true at exit: the exiting thread's cache bins' requests
 * merged first (jemalloc merges its caches' there too), or the main
 * thread's work since its last fill or flush would be missing from
 * nrequests.  Other threads' counts are theirs to merge. */
static void stats_print_exit(void) {
	tsd_t *tsd = &mp_tsd;
	if (tsd->state == TSD_NOMINAL && tsd->tcache != NULL)
		tcache_requests_merge(tsd->tcache);
	stats_print_atexit();
}

#if MP_HAVE_REGISTER_ATFORK
extern void *__dso_handle;
extern int __register_atfork(void (*prepare)(void), void (*parent)(void),
    void (*child)(void), void *dso_handle);
#endif

/* The fork handlers.  With glibc, __register_atfork straight away: its
 * pthread_atfork is a small wrapper in libc_nonshared.a that does just
 * this, but the linker puts the wrapper after all of the library's code,
 * where the one call every process makes would map the last fault-around
 * window of .text (test/integration/code_resident).  The object's handle
 * makes the handlers go away with it on dlclose, as the wrapper's do. */
static void tsd_register_atfork(void) {
#if MP_HAVE_REGISTER_ATFORK
	__register_atfork(malloc_prefork, malloc_postfork_parent,
	    malloc_postfork_child, __dso_handle);
#else
	pthread_atfork(malloc_prefork, malloc_postfork_parent,
	    malloc_postfork_child);
#endif
}

static MP_COLD bool malloc_init_hard(void) {
	if (init_in_progress)
		return true;    /* recursion from inside init: cannot serve */
	mp_mutex_lock(&init_mtx);
	if (malloc_initialized) {
		mp_mutex_unlock(&init_mtx);
		return false;
	}
	init_in_progress = true;
	bool err = base_boot();
	if (!err) {
		pagemap_boot();
		conf_boot();
		sz_boot();
		mp_mutex_boot(os_ncpus());
		err = prof_boot() || background_thread_boot() ||
		    prof_http_boot(prof_http_route_match,
		    prof_http_route_serve);
	}
	if (!err) {
		err = arena_boot(tcache_arena_setup) || ctl_boot() || prof_ctl_boot() ||
		    pthread_key_create(&tsd_key, tsd_cleanup) != 0;
		arena_large_unsample = prof_sample_free;
	}
	if (!err) {
		malloc_sized_boot();
		__atomic_store_n(&malloc_initialized, true, __ATOMIC_RELEASE);
		/* Both may allocate: we are initialised by now. */
		tsd_register_atfork();
		if (opt_stats_print)
			atexit(stats_print_exit);
		/* Registered first, so it runs after the program's own exit
		 * handlers: the final dump sees what they freed. */
		if (config_prof && opt_prof && opt_prof_final)
			atexit(prof_final_dump);
	} else {
		mp_error("initialisation failed: out of memory");
	}
	init_in_progress = false;
	mp_mutex_unlock(&init_mtx);
	return err;
}

bool malloc_init(void) {
	if (likely(__atomic_load_n(&malloc_initialized, __ATOMIC_ACQUIRE)))
		return false;
	return malloc_init_hard();
}

/* ------------------------------------------------------------- tsd */

/* Set the fast path's one threshold: the nearer of the next cache event
 * and the next profiler sample; 0 keeps every call on the slow path. */
static void tsd_arm(tsd_t *tsd) {
	if (tsd->fast_owner == NULL) {
		tsd->next_event = 0;
		return;
	}
	tsd->next_event = tsd->cache_event_at < tsd->prof_sample_at ?
	    tsd->cache_event_at : tsd->prof_sample_at;
}

/* Draw the distance to the thread's next sample, counted from `from`
 * (a value of `allocated`); none while the thread is not sampling.
 * true if it is sampling. */
bool tsd_prof_wait_redraw(tsd_t *tsd, uint64_t from) {
	/* The generation before the switches: see prof_wait_gen. */
	tsd->prof_wait_gen_seen = atomic_load(&prof_wait_gen);
	/* Inline (prof.h): this runs at every sample, and the two calls
	 * were a fifth of its cost. */
	bool sampling = prof_thread_sampling_inline(tsd);
	uint64_t wait = sampling ? prof_sample_wait_inline(tsd) : UINT64_MAX;
	tsd->prof_sample_at = wait < UINT64_MAX - from ? from + wait
	    : UINT64_MAX;
	tsd_arm(tsd);
	return sampling;
}

void tsd_prof_redraw(tsd_t *tsd) {
	if (config_prof && opt_prof && tsd->state == TSD_NOMINAL)
		tsd_prof_wait_redraw(tsd, tsd->allocated);
}

/* Decide whether this thread may use the fast paths, and arm them: the
 * cache bins (free's fast path) whenever the thread's cache is on and frees
 * need no junk, malloc's fast path when allocations need no filling
 * either.  Neither while experimental hooks are installed (hook.c): every
 * call must reach them. */
static void tsd_update_fast(tsd_t *tsd) {
	bool cached = tsd->state == TSD_NOMINAL && tsd->tcache_enabled &&
	    tsd->tcache != NULL && !hook_active();
	/* Without cache bins (junk on free, or no memory for the slots) the
	 * thread's calls take the slow paths to the slabs. */
	bool bins = false;
	if (cached && !opt_junk_free)
		bins = tsd->tcache->cb_cur != NULL ||
		    !tcache_bins_attach(tsd->tcache, tsd);
	else if (tsd->tcache != NULL)
		tcache_bins_detach(tsd->tcache);
	bool fast = bins && tsd->reentrancy == 0 && !opt_junk_alloc &&
	    !opt_zero;
	tsd->fast_owner = fast ? tsd->tcache : NULL;
	tsd_arm(tsd);
}

void tsd_fast_recompute(tsd_t *tsd) {
	tsd_update_fast(tsd);
}

static void registry_insert(tsd_t *tsd) {
	mp_mutex_lock(&registry_mtx);
	tsd->reg_prev = NULL;
	tsd->reg_next = registry_head;
	if (registry_head != NULL)
		registry_head->reg_prev = tsd;
	registry_head = tsd;
	mp_mutex_unlock(&registry_mtx);
}

static void registry_remove_locked(tsd_t *tsd) {
	if (tsd->reg_prev != NULL)
		tsd->reg_prev->reg_next = tsd->reg_next;
	else
		registry_head = tsd->reg_next;
	if (tsd->reg_next != NULL)
		tsd->reg_next->reg_prev = tsd->reg_prev;
	atomic_fetch_add(&tsd_dead_allocated, tsd->allocated);
	atomic_fetch_add(&tsd_dead_deallocated, tsd->deallocated);
}

void tsd_totals(uint64_t *allocated, uint64_t *deallocated) {
	mp_mutex_lock(&registry_mtx);
	uint64_t a = atomic_load(&tsd_dead_allocated);
	uint64_t d = atomic_load(&tsd_dead_deallocated);
	for (tsd_t *t = registry_head; t != NULL; t = t->reg_next) {
		a += __atomic_load_n(&t->allocated, __ATOMIC_RELAXED);
		d += __atomic_load_n(&t->deallocated, __ATOMIC_RELAXED);
	}
	mp_mutex_unlock(&registry_mtx);
	*allocated = a;
	*deallocated = d;
}

static MP_COLD void tsd_init(tsd_t *tsd) {
	tsd->state = TSD_INITIALIZING;
	/* With percpu_arena the CPU's arena, as jemalloc's arena_choose_hard
	 * (created here if it is the CPU's first thread). */
	tsd->arena = arena_percpu_limit != 0 ?
	    arena_get(arena_percpu_choose(), true) : NULL;
	if (tsd->arena != NULL)
		atomic_fetch_add(&tsd->arena->nthreads, 1);
	else
		tsd->arena = arena_choose_auto();
	tsd->tcache_enabled = opt_tcache;
	tsd->prng = (uint64_t)(uintptr_t)tsd ^ os_now_ns();
	tsd->cache_event_at = tsd->allocated + TSD_EVENT_INTERVAL;
	tsd->prof_sample_at = UINT64_MAX;
	if (config_prof && opt_prof)
		tsd_prof_wait_redraw(tsd, tsd->allocated);
	registry_insert(tsd);
	/* May allocate (keys past glibc's first block): we are INITIALIZING,
	 * so such calls are served by the arena's shared cache. */
	pthread_setspecific(tsd_key, tsd);
	if (opt_tcache)
		tsd->tcache = tcache_adopt(tsd->arena);
	/* Before the fast paths are armed: malloc's threshold compare adds
	 * these, and a zero usize must never pass it (see malloc_fast). */
	for (unsigned i = 0; i < SC_NBINS; i++)
		tsd->bin_usize[i + 1] = (uint32_t)sz_index2size_tab[i];
	malloc_size_tags_copy(tsd->size_tags);
	tsd->state = TSD_NOMINAL;
	tsd_update_fast(tsd);
}

MP_NOINLINE tsd_t *tsd_fetch_slow(void) {
	tsd_t *tsd = &mp_tsd;
	if (malloc_init())
		return tsd;
	if (tsd->state == TSD_UNINIT)
		tsd_init(tsd);
	return tsd;
}

/*
 * A long-lived thread (TSD_EXIT_PURGE_EVENTS thread events, 16 MiB
 * allocated at the default tcache_gc_incr_bytes) of an automatic arena
 * exits: its arena's free pages go back to the system now instead of at
 * decay (10 s by default).  Alone in its arena, they are dirty pages no
 * other thread can use while none is attached, and the threads still
 * running add their own growth on top of them: in bench's alloctest (8
 * threads, one per arena, that end one after another) the ended threads'
 * arenas held 1.7 MB of dirty pages each while the rest went on.  Also
 * when other threads remain attached, since threads share arenas past
 * one per CPU (arena_choose_auto): those threads are often not the ones
 * that grow next (alloctest's peak under SCHED_FIFO, two threads at a
 * time on 2 CPUs: 5,168 KiB sharing, 4,576 with this, 4,604 with an
 * arena each); one purge per long life costs at most the arena's dirty
 * pages faulted in again.  Short-lived threads are left out: the next
 * one that takes the arena reuses those pages (bench's threadchurn,
 * 6,000 threads of 4,000 objects, would fault them all in again).
 */
#define TSD_EXIT_PURGE_EVENTS 64

static void tsd_exit_purge(tsd_t *tsd) {
	arena_t *arena = tsd->arena;
	if (tsd->event_count < TSD_EXIT_PURGE_EVENTS ||
	    arena->ind >= narenas_auto)
		return;
	tcache_arena_decay(arena, true);
}

/* Thread exit: park the cache as an orphan and fold the counters.  Later
 * calls from other destructors of this thread use the shared caches. */
static void tsd_cleanup(void *arg) {
	tsd_t *tsd = arg;
	if (tsd->state != TSD_NOMINAL)
		return;
	tsd->state = TSD_DEAD;
	tcache_t *tc = tsd->tcache;
	tsd->tcache = NULL;
	tsd_update_fast(tsd);
	/* Gives the cache bins' regions back and turns the bins off. */
	if (tc != NULL)
		tcache_orphan(tc);
	if (config_prof)
		prof_thread_exit(tsd);
	base_stash_flush(tsd);
	atomic_fetch_sub(&tsd->arena->nthreads, 1);
	tsd_exit_purge(tsd);
	mp_mutex_lock(&registry_mtx);
	registry_remove_locked(tsd);
	mp_mutex_unlock(&registry_mtx);
	tsd->allocated = tsd->deallocated = 0;
	tsd->peak_max = tsd->peak_base = 0;
}

void tsd_tcache_set_enabled(tsd_t *tsd, bool enabled) {
	if (!enabled && tsd->tcache != NULL)
		tcache_flush(tsd->tcache);
	if (enabled && tsd->tcache == NULL && tsd->state == TSD_NOMINAL)
		tsd->tcache = tcache_adopt(tsd->arena);
	tsd->tcache_enabled = enabled;
	tsd_update_fast(tsd);
}

void tsd_tcache_flush(tsd_t *tsd) {
	if (tsd->tcache != NULL)
		tcache_flush(tsd->tcache);
}

bool tsd_arena_set(tsd_t *tsd, unsigned ind) {
	arena_t *arena = arena_get(ind, true);
	if (arena == NULL)
		return true;
	if (tsd->arena != NULL)
		atomic_fetch_sub(&tsd->arena->nthreads, 1);
	atomic_fetch_add(&arena->nthreads, 1);
	tsd->arena = arena;
	if (tsd->tcache != NULL) {
		/* What it served so far was the old arena's. */
		tcache_requests_merge(tsd->tcache);
		tsd->tcache->arena = arena;
	}
	return false;
}

/*
 * percpu_arena (tsd_fetch, on every slow-path entry): the thread follows
 * the CPU it runs on.  Its cache keeps what it holds (slabs and blocks go
 * back to the arenas they came from) and takes new ones from the new
 * arena, as jemalloc's tcache_arena_reassociate.  As in jemalloc, not
 * while the allocator allocates for itself (reentrancy), and not for a
 * thread that thread.arena moved to a manual arena.  jemalloc reads the
 * CPU only when another thread used the arena since this one did; here
 * sched_getcpu is read each time, which glibc's rseq area makes a load,
 * so that a thread that moves to an idle CPU follows as well.
 */
MP_NOINLINE void tsd_arena_percpu(tsd_t *tsd) {
	if (tsd->reentrancy != 0 || tsd->arena == NULL ||
	    tsd->arena->ind >= arena_percpu_limit)
		return;
	unsigned ind = arena_percpu_choose();
	if (ind != tsd->arena->ind)
		tsd_arena_set(tsd, ind);
}

/*
 * thread.peak, jemalloc's way: the fast paths only count bytes, and the
 * peak of allocated - deallocated (less its value at the last reset) is
 * taken at check points: every thread event and every read.  A high
 * that rises and falls between two check points is missed; the
 * shortfall is at most what the thread allocated in between: about
 * TSD_EVENT_INTERVAL bytes of small blocks (a large block weighs only a
 * page on the event clock, see malloc.c), and everything allocated
 * between two reads by a thread without the malloc fast path (tcache
 * off, junk, zero), which has no events.  The difference is cast to a
 * signed value: a thread that frees what others allocated goes below
 * its base, which is no peak.
 */
static void tsd_peak_update(tsd_t *tsd) {
	int64_t cur = (int64_t)(tsd->allocated - tsd->deallocated -
	    tsd->peak_base);
	if (cur > (int64_t)tsd->peak_max)
		tsd->peak_max = (uint64_t)cur;
}

uint64_t tsd_peak_read(tsd_t *tsd) {
	tsd_peak_update(tsd);
	return tsd->peak_max;
}

void tsd_peak_reset(tsd_t *tsd) {
	tsd->peak_max = 0;
	tsd->peak_base = tsd->allocated - tsd->deallocated;
}

/* Crossing the event threshold: one GC step of the cache, a decay tick,
 * a thread.peak check and the activity callback, stats_interval's count
 * (stats.c), and hooks installed or removed by other threads. */
MP_NOINLINE void tsd_event(tsd_t *tsd) {
	tsd->cache_event_at = tsd->allocated + TSD_EVENT_INTERVAL;
	tsd_arm(tsd);
	tsd->event_count++;
	tsd_peak_update(tsd);
	hook_activity_event(tsd);
	tcache_gc_step(tsd->tcache);
	arena_decay_tick(tsd->arena);
	if (unlikely(opt_stats_interval >= 0) && tsd->reentrancy == 0)
		stats_interval_event(tsd->allocated);
	if ((tsd->event_count & 63) == 0) {
		tcache_orphans_collect(tsd->arena, 1);
		tcache_arena_shared_flush(tsd->arena);
	}
	/* Last: it may turn the fast paths off. */
	hook_thread_check(tsd);
}

/* ------------------------------------------------------------- fork */

static void malloc_prefork(void) {
	if (!malloc_initialized)
		return;
	pthread_mutex_lock(&init_mtx.lock);
	ctl_prefork();
	background_thread_prefork();
	prof_http_prefork();
	if (config_prof) {
		prof_dump_prefork();
		prof_sys_prefork();
		prof_prefork();
	}
	pthread_mutex_lock(&registry_mtx.lock);
	arena_prefork();
	base_prefork();
}

static void malloc_postfork_parent(void) {
	if (!malloc_initialized)
		return;
	base_postfork_parent();
	arena_postfork_parent();
	pthread_mutex_unlock(&registry_mtx.lock);
	if (config_prof) {
		prof_postfork_parent();
		prof_sys_postfork_parent();
		prof_dump_postfork_parent();
	}
	prof_http_postfork_parent();
	background_thread_postfork_parent();
	ctl_postfork_parent();
	pthread_mutex_unlock(&init_mtx.lock);
}

/*
 * In the child only the forking thread exists.  The other threads' caches
 * may have been mid-update when fork happened, so they are left alone:
 * their free memory is lost to the child, which is safe.  Their counters
 * are folded so that stats stay right.
 */
/* A thread the child does not have: what its cache bins served and did
 * not merge yet goes to its arena (nrequests), as its byte counters are
 * folded.  Its cache may have been mid-update; these counters are its
 * own plain words, read once. */
static void tsd_requests_fold(tsd_t *t) {
	for (unsigned i = 0; i < SC_NBINS; i++) {
		if (t->bin_nreq[i + 1] != 0)
			atomic_fetch_add_explicit(
			    &t->arena->bstats[i].nrequests, t->bin_nreq[i + 1],
			    memory_order_relaxed);
	}
}

static void malloc_postfork_child(void) {
	if (!malloc_initialized)
		return;
	base_postfork_child();
	arena_postfork_child();
	mp_mutex_postfork_child(&registry_mtx);
	if (config_prof) {
		prof_postfork_child();
		prof_sys_postfork_child();
		prof_dump_postfork_child();
	}
	prof_http_postfork_child();
	background_thread_postfork_child();
	ctl_postfork_child();
	mp_mutex_postfork_child(&init_mtx);
	tsd_t *self = &mp_tsd;
	tsd_t *t = registry_head;
	while (t != NULL) {
		tsd_t *next = t->reg_next;
		if (t != self) {
			registry_remove_locked(t);
			if (t->arena != NULL) {
				atomic_fetch_sub(&t->arena->nthreads, 1);
				tsd_requests_fold(t);
			}
		}
		t = next;
	}
}
