/*
 * test/unit/mutex_lite.c - mutex.c's lite locks (the futex word the
 * profiler's shard locks use instead of glibc's mutex): they exclude,
 * a blocked thread is woken and counted in the lock's counters as glibc's
 * locks count it (stats.mutexes.prof), trylock fails on a held one, and
 * a child of fork gets it back free; what a round trip touches fits a
 * cache line.  No check depends on the machine's speed: a waiter is
 * waited for by its count, not by a delay.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 4
#define NROUNDS 20000

static mp_mutex_t lock;
static uint64_t counter;                /* guarded by lock, not atomic */

static int setup(void **state) {
	(void)state;
	return malloc_init() ? -1 : 0;
}

static void *incr_thread(void *arg) {
	(void)arg;
	for (unsigned i = 0; i < NROUNDS; i++) {
		mp_mutex_lite_lock(&lock);
		/* A read and a later write: two holders at once would lose
		 * increments. */
		uint64_t v = counter;
		if (i % 64 == 0)
			sched_yield();
		counter = v + 1;
		mp_mutex_lite_unlock(&lock);
	}
	return NULL;
}

static void test_exclusion(void **state) {
	(void)state;
	mp_mutex_init_lite(&lock, LOCK_RANK_PROF_GCTX);
	assert_int_equal(lock.lite, !mp_tsan_build());
	counter = 0;
	pthread_t t[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, incr_thread,
		    NULL), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(counter, (uint64_t)NTHREADS * NROUNDS);
	mp_mutex_prof_t p;
	mp_mutex_prof_read(&lock, &p);
	/* Every acquisition, and the read's own. */
	assert_int_equal(p.n_lock_ops, (uint64_t)NTHREADS * NROUNDS + 1);
	assert_true(p.n_owner_switches >= NTHREADS);
	assert_int_equal(atomic_load(&p.n_waiting), 0);
	if (!mp_tsan_build())
		assert_int_equal(atomic_load(&lock.word), 0);
	mp_mutex_prof_reset(&lock);
	mp_mutex_prof_read(&lock, &p);
	assert_int_equal(p.n_lock_ops, 1);
	assert_int_equal(p.n_wait_times, 0);
}

static _Atomic bool waiter_has_it;

static void *wait_thread(void *arg) {
	(void)arg;
	mp_mutex_lite_lock(&lock);
	atomic_store(&waiter_has_it, true);
	counter++;
	mp_mutex_lite_unlock(&lock);
	return NULL;
}

/* A thread that finds the lock held blocks until the holder gives it
 * back, and is counted once as a wait.  A lite lock's waiter spins first
 * (mutex.c): the holder waits for the word's 2, which the waiter writes
 * only once it has spun and is about to block. */
static void test_wait_counted(void **state) {
	(void)state;
	mp_mutex_init_lite(&lock, LOCK_RANK_PROF_GCTX);
	counter = 0;
	atomic_store(&waiter_has_it, false);
	mp_mutex_lite_lock(&lock);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, wait_thread, NULL), 0);
	while (atomic_load(&lock.prof.n_waiting) == 0 || (lock.lite &&
	    atomic_load(&lock.word) != 2))
		sched_yield();
	/* Counted as waiting, it cannot have the lock: we hold it. */
	assert_false(atomic_load(&waiter_has_it));
	assert_int_equal(counter, 0);
	mp_mutex_lite_unlock(&lock);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(atomic_load(&waiter_has_it));
	assert_int_equal(counter, 1);
	mp_mutex_prof_t p;
	mp_mutex_prof_read(&lock, &p);
	assert_int_equal(p.n_lock_ops, 3);
	assert_int_equal(p.n_wait_times, 1);
	assert_int_equal(p.n_spin_acquired, 0);
	assert_int_equal(p.max_n_thds, 1);
	assert_int_equal(atomic_load(&p.n_waiting), 0);
	/* Given back with no waiter left: free, not "held with waiters". */
	if (!mp_tsan_build())
		assert_int_equal(atomic_load(&lock.word), 0);
}

static void test_trylock(void **state) {
	(void)state;
	mp_mutex_init_lite(&lock, LOCK_RANK_PROF_GCTX);
	assert_true(mp_mutex_trylock(&lock));
	assert_false(mp_mutex_trylock(&lock));
	mp_mutex_lite_unlock(&lock);
	mp_mutex_lite_lock(&lock);
	assert_false(mp_mutex_trylock(&lock));
	mp_mutex_lite_unlock(&lock);
	assert_true(mp_mutex_trylock(&lock));
	mp_mutex_lite_unlock(&lock);
}

/* Held across fork as the fork handlers hold it: the parent gives it
 * back, the child reinitialises it free. */
static void test_fork(void **state) {
	(void)state;
	mp_mutex_init_lite(&lock, LOCK_RANK_PROF_GCTX);
	mp_mutex_lock_quiet(&lock);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		mp_mutex_postfork_child(&lock);
		bool ok = mp_mutex_trylock(&lock);
		if (ok)
			mp_mutex_lite_unlock(&lock);
		_exit(ok ? 0 : 1);
	}
	assert_false(mp_mutex_trylock(&lock));
	mp_mutex_unlock_quiet(&lock);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(mp_mutex_trylock(&lock));
	mp_mutex_lite_unlock(&lock);
}

/* An uncontended round trip writes the word and the counters up to
 * n_owner_switches: those come first, in 40 bytes (one line for a lock
 * that starts in a line's first 24 bytes, as the shards' do), and glibc's
 * mutex, which a lite lock never reads, comes after them.  A counter
 * every acquisition writes moved behind the cold ones fails here; so does
 * a lock and its counters a line apart again. */
static void test_hot_fields_first(void **state) {
	(void)state;
	size_t prof = offsetof(mp_mutex_t, prof);
	assert_int_equal(offsetof(mp_mutex_t, word), 0);
	size_t hot_end = 0;
	const size_t hot[] = {
		prof + offsetof(mp_mutex_prof_t, n_lock_ops) + 8,
		prof + offsetof(mp_mutex_prof_t, prev_owner) + sizeof(void *),
		prof + offsetof(mp_mutex_prof_t, n_owner_switches) + 8,
	};
	for (size_t i = 0; i < sizeof(hot) / sizeof(hot[0]); i++)
		hot_end = hot[i] > hot_end ? hot[i] : hot_end;
	MP_ASSERT(hot_end <= 40, "a round trip writes the lock's first %zu "
	    "bytes", hot_end);
	/* What prof.c's shards are laid out by (a _Static_assert there). */
	assert_int_equal(MP_MUTEX_HOT_BYTES, hot_end);
	MP_ASSERT(offsetof(mp_mutex_t, lock) >= hot_end, "glibc's mutex at "
	    "%zu, among the hot counters", offsetof(mp_mutex_t, lock));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exclusion),
		cmocka_unit_test(test_wait_counted),
		cmocka_unit_test(test_trylock),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_hot_fields_first),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
