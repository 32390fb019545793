/*
 * mutex.c: ranked mutexes, the only wrapper of pthread_mutex_* in the
 * library.  Every lock has a rank (lock_rank_t, types.h, lists them in
 * the order they may be taken); debug builds check the order.
 */
#include "malloc_prof/internal/internal.h"

/*
 * Ranked mutexes.  In debug builds each thread remembers the ranks it holds
 * (a bit set: ranks are small) and taking a lock whose rank is not above
 * every held one aborts, naming both: a lock-order bug found in a test
 * rather than a deadlock found in production.
 */
static __thread uint32_t held_ranks __attribute__((tls_model("initial-exec")));

void mp_mutex_init(mp_mutex_t *m, lock_rank_t rank) {
	pthread_mutex_init(&m->lock, NULL);
	m->rank = rank;
	memset(&m->prof, 0, sizeof(m->prof));
}

/*
 * Profiling counters, as jemalloc keeps them (its mutex stats): a try
 * first, and only when that fails the clock is read around the blocking
 * lock, so an uncontended lock costs a few increments made while it is
 * held.  No spinning: n_spin_acquired is always 0.
 */
static MP_NOINLINE void mutex_lock_wait(mp_mutex_t *m) {
	uint32_t n = atomic_fetch_add_explicit(&m->prof.n_waiting, 1,
	    memory_order_relaxed) + 1;
	uint64_t t0 = os_now_ns();
	pthread_mutex_lock(&m->lock);
	uint64_t waited = os_now_ns() - t0;
	atomic_fetch_sub_explicit(&m->prof.n_waiting, 1, memory_order_relaxed);
	m->prof.n_wait_times++;
	m->prof.tot_wait_ns += waited;
	if (waited > m->prof.max_wait_ns)
		m->prof.max_wait_ns = waited;
	if (n > m->prof.max_n_thds)
		m->prof.max_n_thds = n;
}

/* The holder's share of the counters: one acquisition, and an owner
 * switch when the previous holder was another thread. */
static inline void mutex_prof_taken(mp_mutex_t *m) {
	/* The thread's identity: the address of its own TLS variable. */
	const void *me = &held_ranks;
	m->prof.n_lock_ops++;
	if (m->prof.prev_owner != me) {
		m->prof.prev_owner = me;
		m->prof.n_owner_switches++;
	}
}

void mp_mutex_lock(mp_mutex_t *m) {
	if (config_debug) {
		uint32_t above = ~(((uint32_t)1 << m->rank) - 1);
		if (held_ranks & above)
			mp_abort("lock order violation: taking rank %d while "
			    "holding ranks 0x%x", (int)m->rank,
			    (unsigned)held_ranks);
	}
	if (pthread_mutex_trylock(&m->lock) != 0)
		mutex_lock_wait(m);
	mutex_prof_taken(m);
	if (config_debug)
		held_ranks |= (uint32_t)1 << m->rank;
}

/* false if another thread holds m (then nothing is taken).  A trylock
 * cannot deadlock, so any rank may be tried; a taken one is tracked as
 * mp_mutex_lock tracks it. */
bool mp_mutex_trylock(mp_mutex_t *m) {
	if (pthread_mutex_trylock(&m->lock) != 0)
		return false;
	mutex_prof_taken(m);
	if (config_debug)
		held_ranks |= (uint32_t)1 << m->rank;
	return true;
}

/* n_waiting changes outside the lock (a waiter counts itself before it
 * blocks), so copies and resets touch it only atomically and the rest
 * field by field: a struct copy or memset would race with a waiter.  The
 * caller holds m. */
void mp_mutex_prof_copy_held(const mp_mutex_t *m, mp_mutex_prof_t *out) {
	out->n_lock_ops = m->prof.n_lock_ops;
	out->n_wait_times = m->prof.n_wait_times;
	out->n_owner_switches = m->prof.n_owner_switches;
	out->n_spin_acquired = m->prof.n_spin_acquired;
	out->tot_wait_ns = m->prof.tot_wait_ns;
	out->max_wait_ns = m->prof.max_wait_ns;
	out->max_n_thds = m->prof.max_n_thds;
	out->prev_owner = m->prof.prev_owner;
	atomic_store_explicit(&out->n_waiting, atomic_load_explicit(
	    &m->prof.n_waiting, memory_order_relaxed), memory_order_relaxed);
}

void mp_mutex_prof_read(mp_mutex_t *m, mp_mutex_prof_t *out) {
	mp_mutex_lock(m);
	mp_mutex_prof_copy_held(m, out);
	mp_mutex_unlock(m);
}

void mp_mutex_prof_reset(mp_mutex_t *m) {
	mp_mutex_lock(m);
	m->prof.n_lock_ops = 0;
	m->prof.n_wait_times = 0;
	m->prof.n_owner_switches = 0;
	m->prof.n_spin_acquired = 0;
	m->prof.tot_wait_ns = 0;
	m->prof.max_wait_ns = 0;
	m->prof.max_n_thds = 0;
	m->prof.prev_owner = NULL;
	mp_mutex_unlock(m);
}

void mp_mutex_unlock(mp_mutex_t *m) {
	if (config_debug)
		held_ranks &= ~((uint32_t)1 << m->rank);
	pthread_mutex_unlock(&m->lock);
}

void mp_mutex_postfork_child(mp_mutex_t *m) {
	pthread_mutex_init(&m->lock, NULL);
	if (config_debug)
		held_ranks &= ~((uint32_t)1 << m->rank);
}
