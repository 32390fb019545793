/*
 * mutex.c: ranked mutexes, the only wrapper of pthread_mutex_* in the
 * library.  Every lock has a rank (lock_rank_t, types.h, lists them in
 * the order they may be taken); debug builds check the order.  A "lite"
 * lock is a futex word instead of glibc's mutex, for the locks taken on
 * every profiler sample; a waiter spins briefly before it blocks (where
 * the process may run on more than one CPU).
 */
#include "malloc_prof/internal/internal.h"
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	m->lite = false;
	atomic_store_explicit(&m->word, 0, memory_order_relaxed);
	memset(&m->prof, 0, sizeof(m->prof));
}

/*
 * glibc's trylock and unlock were 34 and 25 instructions of a profiler
 * sample's 76 a lock round trip (doc/performance.md, "Per-sample cost,
 * round 4"), mostly checks of mutex kinds this library never uses.  The
 * lite lock is Drepper's three-state futex lock ("Futexes Are Tricky",
 * mutex3): a compare-exchange to take it, an exchange to give it back,
 * and a system call only when a thread waits.
 */
void mp_mutex_init_lite(mp_mutex_t *m, lock_rank_t rank) {
	mp_mutex_init(m, rank);
	m->lite = MP_MUTEX_LITE_OK;
}

static void mutex_futex(_Atomic uint32_t *word, int op, uint32_t val) {
	syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val,
	    NULL, NULL, 0);
}

/* Take a lite lock another thread holds: marked 2 (a waiter), so that
 * its holder's unlock wakes one. */
static void mutex_lite_take_slow(mp_mutex_t *m) {
	while (atomic_exchange_explicit(&m->word, 2, memory_order_acquire)
	    != 0)
		mutex_futex(&m->word, FUTEX_WAIT, 2);
}

static inline bool mutex_lite_try(mp_mutex_t *m) {
	uint32_t free_word = 0;
	return atomic_compare_exchange_strong_explicit(&m->word, &free_word,
	    1, memory_order_acquire, memory_order_relaxed);
}

/*
 * Before a lite lock blocks, it spins a while: its holders hold it for a
 * sample's few hundred instructions, so a waiter on another CPU mostly
 * finds it free again within a microsecond, while blocking costs the
 * waiter's FUTEX_WAIT and, because the word then stays 2, the next
 * holder's FUTEX_WAKE.  Without the spin, bench's xthread with profiling
 * active made ~5,000 futex calls (~50 without profiling), four fifths
 * of them on arena 0's prof_cache_mtx (doc/performance.md, "Profiling in
 * threaded workloads: pxthr").  The bound keeps a waiter whose holder
 * was preempted from burning more than a few microseconds; jemalloc's
 * mutexes spin too (MALLOC_MUTEX_MAX_SPIN).  Only lite locks: glibc's
 * mutex word is not ours to read.
 */
#define MUTEX_LITE_SPINS 128

/* The spin's bound in effect: MUTEX_LITE_SPINS, or none where the
 * process may run on one CPU only (taskset, a cpuset of one CPU, a
 * one-CPU VM): its holder cannot run to give the lock back while the
 * waiter spins, so each contended acquisition would burn the whole spin
 * (a few microseconds) before blocking anyway.  jemalloc's mutexes skip
 * their spin the same way (ncpus == 1).  Set at boot from the affinity
 * mask (mp_mutex_boot), like jemalloc's CPU count, not read again: a
 * process moved to one CPU later spins in vain, one moved to more does
 * not spin. */
static _Atomic unsigned mutex_lite_spins = MUTEX_LITE_SPINS;

void mp_mutex_boot(unsigned ncpus) {
	atomic_store_explicit(&mutex_lite_spins, ncpus > 1 ?
	    MUTEX_LITE_SPINS : 0, memory_order_relaxed);
}

unsigned mp_mutex_lite_spins(void) {
	return atomic_load_explicit(&mutex_lite_spins, memory_order_relaxed);
}

static inline void mutex_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

/* true: m taken while spinning.  Reads the word until it is free before
 * each compare-exchange, so the spinner does not steal the cache line
 * from its holder at every turn. */
static bool mutex_lite_spin(mp_mutex_t *m) {
	unsigned spins = mp_mutex_lite_spins();
	for (unsigned i = 0; i < spins; i++) {
		mutex_spin_pause();
		if (atomic_load_explicit(&m->word, memory_order_relaxed) == 0 &&
		    mutex_lite_try(m))
			return true;
	}
	return false;
}

static inline void mutex_lite_give(mp_mutex_t *m) {
	if (atomic_exchange_explicit(&m->word, 0, memory_order_release) == 2)
		mutex_futex(&m->word, FUTEX_WAKE, 1);
}

/* Lock or unlock m whichever kind it is, with nothing else. */
static inline bool mutex_try_raw(mp_mutex_t *m) {
	return m->lite ? mutex_lite_try(m) :
	    pthread_mutex_trylock(&m->lock) == 0;
}

static void mutex_take_raw(mp_mutex_t *m) {
	if (m->lite)
		mutex_lite_take_slow(m);
	else
		pthread_mutex_lock(&m->lock);
}

static inline void mutex_give_raw(mp_mutex_t *m) {
	if (m->lite)
		mutex_lite_give(m);
	else
		pthread_mutex_unlock(&m->lock);
}

/*
 * Profiling counters, as jemalloc keeps them (its mutex stats): a try
 * first, then (lite locks) the spin, and only when both fail the clock is
 * read around the blocking lock, so an uncontended lock costs a few
 * increments made while it is held.  A lock the spin took counts in
 * n_spin_acquired, not in the waits.
 */
static MP_NOINLINE void mutex_lock_wait(mp_mutex_t *m) {
	uint32_t n = atomic_fetch_add_explicit(&m->prof.n_waiting, 1,
	    memory_order_relaxed) + 1;
	if (m->lite && mutex_lite_spin(m)) {
		atomic_fetch_sub_explicit(&m->prof.n_waiting, 1,
		    memory_order_relaxed);
		m->prof.n_spin_acquired++;
		if (n > m->prof.max_n_thds)
			m->prof.max_n_thds = n;
		return;
	}
	uint64_t t0 = os_now_ns();
	mutex_take_raw(m);
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

static inline void mutex_rank_check(const mp_mutex_t *m) {
	if (config_debug) {
		uint32_t above = ~(((uint32_t)1 << m->rank) - 1);
		if (held_ranks & above)
			mp_abort("lock order violation: taking rank %d while "
			    "holding ranks 0x%x", (int)m->rank,
			    (unsigned)held_ranks);
	}
}

/* Not for a lite lock (mp_mutex_lite_lock): glibc's lock of an arena
 * path tests no kind of lock (a test here was 2 instructions of every
 * arena lock and unlock). */
void mp_mutex_lock(mp_mutex_t *m) {
	mutex_rank_check(m);
	if (config_debug && m->lite)
		mp_abort("mp_mutex_lock of a lite lock (rank %d)",
		    (int)m->rank);
	if (pthread_mutex_trylock(&m->lock) != 0)
		mutex_lock_wait(m);
	mutex_prof_taken(m);
	if (config_debug)
		held_ranks |= (uint32_t)1 << m->rank;
}

void mp_mutex_lite_lock(mp_mutex_t *m) {
	if (!MP_MUTEX_LITE_OK) {
		mp_mutex_lock(m);
		return;
	}
	mutex_rank_check(m);
	if (!mutex_lite_try(m))
		mutex_lock_wait(m);
	mutex_prof_taken(m);
	if (config_debug)
		held_ranks |= (uint32_t)1 << m->rank;
}

/* false if another thread holds m (then nothing is taken).  A trylock
 * cannot deadlock, so any rank may be tried; a taken one is tracked as
 * mp_mutex_lock tracks it. */
bool mp_mutex_trylock(mp_mutex_t *m) {
	if (!mutex_try_raw(m))
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

/* m of either kind, for the counters' readers. */
static void mutex_lock_any(mp_mutex_t *m) {
	if (m->lite)
		mp_mutex_lite_lock(m);
	else
		mp_mutex_lock(m);
}

static void mutex_unlock_any(mp_mutex_t *m) {
	if (m->lite)
		mp_mutex_lite_unlock(m);
	else
		mp_mutex_unlock(m);
}

void mp_mutex_prof_read(mp_mutex_t *m, mp_mutex_prof_t *out) {
	mutex_lock_any(m);
	mp_mutex_prof_copy_held(m, out);
	mutex_unlock_any(m);
}

void mp_mutex_prof_reset(mp_mutex_t *m) {
	mutex_lock_any(m);
	m->prof.n_lock_ops = 0;
	m->prof.n_wait_times = 0;
	m->prof.n_owner_switches = 0;
	m->prof.n_spin_acquired = 0;
	m->prof.tot_wait_ns = 0;
	m->prof.max_wait_ns = 0;
	m->prof.max_n_thds = 0;
	m->prof.prev_owner = NULL;
	mutex_unlock_any(m);
}

void mp_mutex_unlock(mp_mutex_t *m) {
	if (config_debug)
		held_ranks &= ~((uint32_t)1 << m->rank);
	pthread_mutex_unlock(&m->lock);
}

void mp_mutex_lite_unlock(mp_mutex_t *m) {
	if (!MP_MUTEX_LITE_OK) {
		mp_mutex_unlock(m);
		return;
	}
	if (config_debug)
		held_ranks &= ~((uint32_t)1 << m->rank);
	mutex_lite_give(m);
}

void mp_mutex_postfork_child(mp_mutex_t *m) {
	/* The forking thread, the child's only one, held it. */
	pthread_mutex_init(&m->lock, NULL);
	atomic_store_explicit(&m->word, 0, memory_order_relaxed);
	if (config_debug)
		held_ranks &= ~((uint32_t)1 << m->rank);
}

void mp_mutex_lock_quiet(mp_mutex_t *m) {
	if (!mutex_try_raw(m))
		mutex_take_raw(m);
}

void mp_mutex_unlock_quiet(mp_mutex_t *m) {
	mutex_give_raw(m);
}
