/*
 * background_thread.c: a thread that purges decayed pages on time, not
 * only on allocation events (jemalloc's background_thread).
 *
 * Without it, decay runs when threads allocate (a tick every
 * TSD_EVENT_INTERVAL bytes) or free large blocks, so a process that frees
 * a lot and then sleeps, or only trickles tiny allocations, keeps its
 * freed pages resident.  With background_thread:true one thread sleeps
 * until the oldest free extent of any arena has aged past its decay time,
 * purges what is due in every arena, and sleeps again; with nothing to
 * purge it waits until pages are freed (arena.c calls
 * background_thread_notify through arena_pages_freed, set at boot, so
 * that arena.c does not depend on this file).  One thread serves all
 * arenas: purging is a few madvise calls per period.
 *
 * With opt.hpa it also does the pageslabs' deferred work, as jemalloc's
 * does while its background threads are enabled (deferral_allowed):
 * hugifications after hpa_hugify_delay_ms and purges by hpa_dirty_mult
 * leave the allocation and free paths (hpa.c defers them while
 * hpa_deferral is set, which follows `enabled` here) and run here.  hpa.c
 * says when new work is due (hpa_work_due, called under an arena lock);
 * jemalloc's rule decides whether to wake the thread: when it sleeps
 * with no deadline or past the new one.  Under the arena lock bg_mtx may
 * only be tried (its rank is lower), so the due time is also left in
 * bg_kick_ns, which the thread reads before it sleeps, and the sleep is
 * bounded by 5 s while pageslab work is deferred (jemalloc's default
 * background_thread_hpa_interval_max_ms), which bounds a wake-up lost to
 * a busy bg_mtx.
 *
 * The option starts it lazily, at a thread's first slow-path allocation
 * (never inside malloc_init, where creating a thread would allocate); the
 * mallctl starts it at once.  It runs with every signal blocked and holds
 * no lock while it sleeps.  After fork the child has no such thread: it is
 * started again at the child's first slow-path allocation.
 */
#include "malloc_prof/internal/internal.h"

#include <signal.h>
#include <time.h>

bool opt_background_thread = false;
size_t opt_max_background_threads = 1;

/*
 * State, under bg_mtx: `enabled` is what the option or the mallctl asked
 * for; `running` says a thread exists (it is joined when disabled); the
 * thread runs while bg_gen is the generation it was started with, so that
 * one stopped by a disable cannot be revived by an enable that follows at
 * once.  `idle`: the thread waits with no deadline, so a free must wake
 * it.  bg_start_pending (atomic) lets event paths check cheaply whether
 * they should start it.
 */
static mp_mutex_t bg_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_BACKGROUND);
static pthread_cond_t bg_cond;
static pthread_t bg_thread;
static bool bg_enabled, bg_running;
static uint64_t bg_gen;
static _Atomic bool bg_idle;
static _Atomic bool bg_start_pending;
/* stats.background_thread: runs, and the first and last run's start. */
static _Atomic uint64_t bg_runs, bg_first_ns, bg_last_ns;
/* The deadline the thread sleeps to (UINT64_MAX: none, or running), and
 * the earliest time pageslab work is due that it may not have seen. */
static _Atomic uint64_t bg_sleep_ns, bg_kick_ns = UINT64_MAX;
#define BG_HPA_MAX_SLEEP_NS ((uint64_t)5000 * 1000000u)

static void bg_cond_init(void) {
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&bg_cond, &attr);
	pthread_condattr_destroy(&attr);
}

bool background_thread_boot(void) {
	mp_mutex_init(&bg_mtx, LOCK_RANK_BACKGROUND);
	bg_cond_init();
	opt_max_background_threads = 1;     /* the number in effect */
	bg_enabled = opt_background_thread;
	atomic_store(&bg_start_pending, opt_background_thread);
	arena_pages_freed = background_thread_notify;
	hpa_work_due = background_thread_hpa_due;
	/* Stored only when it changes: hpa_deferral shares a page of .bss
	 * with nothing else a process writes, and a store of false made it
	 * resident in every process. */
	if (atomic_load(&hpa_deferral) != opt_background_thread)
		atomic_store(&hpa_deferral, opt_background_thread);
	return false;
}

/* When the oldest free extent of `set` is due for purging after `ms`
 * milliseconds, or UINT64_MAX. */
static uint64_t set_deadline(const extent_set_t *set, ssize_t ms) {
	if (ms <= 0 || set->lru_head == NULL)
		return UINT64_MAX;
	return set->lru_head->free_ns + (uint64_t)ms * 1000000u;
}

/* Purge what is due in every arena; the next deadline, or UINT64_MAX. */
static uint64_t bg_run(void) {
	uint64_t start = os_now_ns(), next = UINT64_MAX;
	if (atomic_fetch_add(&bg_runs, 1) == 0)
		atomic_store(&bg_first_ns, start);
	atomic_store(&bg_last_ns, start);
	unsigned n = atomic_load(&narenas_total);
	for (unsigned i = 0; i < n; i++) {
		arena_t *arena = arena_get(i, false);
		if (arena == NULL)
			continue;
		mp_mutex_lock(&arena->mtx);
		uint64_t now = os_now_ns();
		extent_decay_locked(arena, now, false);
		uint64_t d = set_deadline(&arena->sets[EXTENT_FREE_DIRTY],
		    arena_dirty_decay_ms(arena));
		uint64_t m = set_deadline(&arena->sets[EXTENT_FREE_MUZZY],
		    arena_muzzy_decay_ms(arena));
		uint64_t h = opt_hpa && atomic_load(&hpa_deferral) ?
		    hpa_deferred_work_locked(arena, now) : UINT64_MAX;
		mp_mutex_unlock(&arena->mtx);
		if (d < next)
			next = d;
		if (m < next)
			next = m;
		if (h < next)
			next = h;
	}
	return next;
}

static void *bg_main(void *arg) {
	uint64_t gen = (uint64_t)(uintptr_t)arg;
	pthread_setname_np(pthread_self(), "malloc_prof_bg");
	mp_mutex_lock(&bg_mtx);
	while (gen == bg_gen) {
		atomic_store(&bg_kick_ns, UINT64_MAX);
		mp_mutex_unlock(&bg_mtx);
		uint64_t next = bg_run();
		mp_mutex_lock(&bg_mtx);
		if (gen != bg_gen)
			break;
		/* Pageslab work made due while this run went by: the
		 * deadline is published first, so that a waker either
		 * sees it or is seen here. */
		atomic_store(&bg_sleep_ns, next);
		uint64_t kick = atomic_load(&bg_kick_ns);
		if (kick < next)
			next = kick;
		uint64_t now = os_now_ns();
		if (opt_hpa && atomic_load(&hpa_deferral) &&
		    next > now && next - now > BG_HPA_MAX_SLEEP_NS)
			next = now + BG_HPA_MAX_SLEEP_NS;
		if (next == UINT64_MAX) {
			atomic_store(&bg_idle, true);
			atomic_store(&bg_sleep_ns, UINT64_MAX);
			while (atomic_load(&bg_idle) && gen == bg_gen)
				pthread_cond_wait(&bg_cond, &bg_mtx.lock);
			continue;
		}
		/* At least a millisecond, so that a burst of deadlines
		 * is purged in one run. */
		if (next < now + 1000000u)
			next = now + 1000000u;
		atomic_store(&bg_sleep_ns, next);
		struct timespec ts = {
			.tv_sec = (time_t)(next / 1000000000u),
			.tv_nsec = (long)(next % 1000000000u),
		};
		pthread_cond_timedwait(&bg_cond, &bg_mtx.lock, &ts);
		atomic_store(&bg_sleep_ns, 0);
	}
	mp_mutex_unlock(&bg_mtx);
	return NULL;
}

/* Create the thread if it is wanted and missing.  bg_mtx held. */
static bool bg_start_locked(void) {
	if (!bg_enabled || bg_running)
		return false;
	uint64_t gen = ++bg_gen;
	atomic_store(&bg_idle, false);
	/* Signals stay with the program's threads. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* What pthread_create allocates (TLS) is the allocator's own work:
	 * not a sample of the program, and no trigger (prof_http's start)
	 * creates a second thread from inside this one's creation. */
	mp_tsd.reentrancy++;
	int err = pthread_create(&bg_thread, NULL, bg_main,
	    (void *)(uintptr_t)gen);
	mp_tsd.reentrancy--;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err != 0) {
		mp_error("background_thread: cannot create the thread: %s",
		    strerror(err));
		return true;
	}
	bg_running = true;
	return false;
}

void background_thread_start_pending(void) {
	if (!atomic_load_explicit(&bg_start_pending, memory_order_relaxed) ||
	    !atomic_exchange(&bg_start_pending, false))
		return;
	mp_mutex_lock(&bg_mtx);
	bg_start_locked();
	mp_mutex_unlock(&bg_mtx);
}

bool background_thread_set(bool enable, bool *was) {
	mp_mutex_lock(&bg_mtx);
	*was = bg_enabled;
	bg_enabled = enable;
	atomic_store(&hpa_deferral, enable);
	if (enable) {
		bool err = bg_start_locked();
		if (err) {
			bg_enabled = false;
			atomic_store(&hpa_deferral, false);
		}
		mp_mutex_unlock(&bg_mtx);
		return err;
	}
	if (!bg_running) {
		mp_mutex_unlock(&bg_mtx);
		return false;
	}
	bg_gen++;
	atomic_store(&bg_idle, false);
	pthread_cond_broadcast(&bg_cond);
	pthread_t t = bg_thread;
	bg_running = false;
	mp_mutex_unlock(&bg_mtx);
	pthread_join(t, NULL);
	return false;
}

bool background_thread_enabled(void) {
	mp_mutex_lock(&bg_mtx);
	bool on = bg_enabled;
	mp_mutex_unlock(&bg_mtx);
	return on;
}

void background_thread_notify(void) {
	if (!atomic_load_explicit(&bg_idle, memory_order_relaxed))
		return;
	mp_mutex_lock(&bg_mtx);
	if (atomic_load(&bg_idle)) {
		atomic_store(&bg_idle, false);
		pthread_cond_broadcast(&bg_cond);
	}
	mp_mutex_unlock(&bg_mtx);
}

void background_thread_hpa_due(uint64_t due_ns) {
	uint64_t k = atomic_load_explicit(&bg_kick_ns, memory_order_relaxed);
	while (due_ns < k && !atomic_compare_exchange_weak(&bg_kick_ns, &k,
	    due_ns))
		;
	/* Asleep past due_ns (bg_idle: with no deadline), or running (0):
	 * a running thread reads bg_kick_ns before it sleeps. */
	if (due_ns >= atomic_load(&bg_sleep_ns) && !atomic_load(&bg_idle))
		return;
	if (!mp_mutex_trylock(&bg_mtx))
		return;
	atomic_store(&bg_idle, false);
	pthread_cond_broadcast(&bg_cond);
	mp_mutex_unlock(&bg_mtx);
}

mp_mutex_t *background_thread_mutex(void) {
	return &bg_mtx;
}

void background_thread_stats(size_t *nthreads, uint64_t *nruns,
    uint64_t *run_interval_ns) {
	mp_mutex_lock(&bg_mtx);
	*nthreads = bg_running ? 1 : 0;
	mp_mutex_unlock(&bg_mtx);
	uint64_t runs = atomic_load(&bg_runs);
	*nruns = runs;
	*run_interval_ns = runs > 1 ? (atomic_load(&bg_last_ns) -
	    atomic_load(&bg_first_ns)) / (runs - 1) : 0;
}

void background_thread_prefork(void) {
	pthread_mutex_lock(&bg_mtx.lock);
}

void background_thread_postfork_parent(void) {
	pthread_mutex_unlock(&bg_mtx.lock);
}

void background_thread_postfork_child(void) {
	mp_mutex_postfork_child(&bg_mtx);
	bg_cond_init();
	bg_running = false;
	atomic_store(&bg_idle, false);
	atomic_store(&bg_sleep_ns, 0);
	atomic_store(&bg_start_pending, bg_enabled);
}
