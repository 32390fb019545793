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
}

void mp_mutex_lock(mp_mutex_t *m) {
	if (config_debug) {
		uint32_t above = ~(((uint32_t)1 << m->rank) - 1);
		if (held_ranks & above)
			mp_abort("lock order violation: taking rank %d while "
			    "holding ranks 0x%x", (int)m->rank,
			    (unsigned)held_ranks);
	}
	pthread_mutex_lock(&m->lock);
	if (config_debug)
		held_ranks |= (uint32_t)1 << m->rank;
}

/* false if another thread holds m (then nothing is taken).  A trylock
 * cannot deadlock, so any rank may be tried; a taken one is tracked as
 * mp_mutex_lock tracks it. */
bool mp_mutex_trylock(mp_mutex_t *m) {
	if (pthread_mutex_trylock(&m->lock) != 0)
		return false;
	if (config_debug)
		held_ranks |= (uint32_t)1 << m->rank;
	return true;
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
