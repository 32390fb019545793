/*
 * test/unit/mutex_spin.c - a lite lock's waiter spins before it blocks
 * (mutex.c): a lock given back while its waiter still spins is taken
 * without a futex call and counted in n_spin_acquired (stats.mutexes.*.
 * num_spin_acq), not as a wait; either way the word is free afterwards,
 * so the next uncontended unlock makes no FUTEX_WAKE.  Before the spin,
 * every contended acquisition blocked, and n_spin_acquired was always 0.
 *
 * Whether one given round is taken by the spin depends on the scheduler,
 * so the test runs rounds until one is (at most ROUNDS) and checks only
 * the counters' sum in each; with fewer than two CPUs to run on, the
 * holder cannot give the lock back while the waiter spins, and the test
 * skips.  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <sched.h>

#define ROUNDS 2000

static mp_mutex_t lock;
static _Atomic unsigned go;             /* rounds the waiter may start */
static _Atomic unsigned done;           /* rounds the waiter finished */

static int setup(void **state) {
	(void)state;
	return malloc_init() ? -1 : 0;
}

static unsigned cpus_allowed(void) {
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	return (unsigned)CPU_COUNT(&set);
}

/* Round r: wait for go, take the lock (the main thread holds it), give
 * it back. */
static void *waiter(void *arg) {
	(void)arg;
	for (unsigned r = 1; r <= ROUNDS; r++) {
		while (atomic_load(&go) < r)
			sched_yield();
		mp_mutex_lite_lock(&lock);
		mp_mutex_lite_unlock(&lock);
		atomic_store(&done, r);
	}
	return NULL;
}

static void test_spin_acquired(void **state) {
	(void)state;
	if (mp_tsan_build())
		MP_SKIP("ThreadSanitizer build: lite locks are glibc's mutexes");
	if (cpus_allowed() < 2)
		MP_SKIP("one CPU: the holder cannot give the lock back while "
		    "its waiter spins");
	mp_mutex_init_lite(&lock, LOCK_RANK_PROF_GCTX);
	atomic_store(&go, 0);
	atomic_store(&done, 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, waiter, NULL), 0);
	bool spun = false;
	unsigned r;
	for (r = 1; r <= ROUNDS; r++) {
		mp_mutex_prof_reset(&lock);
		mp_mutex_lite_lock(&lock);
		atomic_store(&go, r);
		/* The waiter has found the lock held: give it back at once,
		 * while it most likely still spins. */
		while (atomic_load(&lock.prof.n_waiting) == 0)
			;
		mp_mutex_lite_unlock(&lock);
		while (atomic_load(&done) < r)
			sched_yield();
		mp_mutex_prof_t p;
		mp_mutex_prof_read(&lock, &p);
		/* Ours, the waiter's and the read's (the reset zeroed its own). */
		assert_int_equal(p.n_lock_ops, 3);
		/* The waiter got it once, by spinning or by blocking. */
		assert_int_equal(p.n_spin_acquired + p.n_wait_times, 1);
		assert_int_equal(atomic_load(&p.n_waiting), 0);
		/* Free again, not "held with waiters": an unlock now needs
		 * no wake. */
		assert_int_equal(atomic_load(&lock.word), 0);
		if (p.n_spin_acquired == 1) {
			spun = true;
			break;
		}
	}
	/* Let the waiter finish its rounds. */
	for (r++; r <= ROUNDS; r++) {
		atomic_store(&go, r);
		while (atomic_load(&done) < r)
			sched_yield();
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(spun);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spin_acquired),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
