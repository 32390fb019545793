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
 *
 * Where the process may run on one CPU only, the waiter does not spin at
 * all (mp_mutex_boot, from the affinity mask at boot): a child started
 * on one CPU boots with no spin, and with the spin off every contended
 * round is a wait, never a spin.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* The spin's bound the library booted with: its CPU count's. */
static void test_spins_by_cpus(void **state) {
	(void)state;
	assert_int_equal(mp_mutex_lite_spins(), cpus_allowed() > 1 ? 128 : 0);
}

/* A child bound to one CPU before it starts (the affinity mask survives
 * exec) boots with no spin: it runs this program again with
 * --print-spins, which prints the bound and exits. */
static void test_one_cpu_boots_without_spin(void **state) {
	(void)state;
	cpu_set_t set, one;
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (CPU_ISSET(c, &set)) {
			CPU_SET(c, &one);
			break;
		}
	}
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		if (sched_setaffinity(0, sizeof(one), &one) != 0)
			_exit(90);
		char *argv[] = {"mutex_spin", "--print-spins", NULL};
		execv("/proc/self/exe", argv);
		_exit(91);
	}
	close(fds[1]);
	char buf[32] = {0};
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(n > 0);
	assert_string_equal(buf, "spins 0\n");
}

/* With the spin off (the bound a one-CPU boot sets), a waiter that finds
 * the lock held blocks every time: no round is taken by spinning, each
 * one is a wait.  With the spin on, test_spin_acquired finds rounds that
 * are taken by the spin within the same number of rounds. */
static void test_no_spin_when_off(void **state) {
	(void)state;
	if (mp_tsan_build())
		MP_SKIP("ThreadSanitizer build: lite locks are glibc's mutexes");
	mp_mutex_boot(1);
	assert_int_equal(mp_mutex_lite_spins(), 0);
	mp_mutex_init_lite(&lock, LOCK_RANK_PROF_GCTX);
	atomic_store(&go, 0);
	atomic_store(&done, 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, waiter, NULL), 0);
	unsigned spun = 0, waited = 0;
	for (unsigned r = 1; r <= ROUNDS; r++) {
		mp_mutex_prof_reset(&lock);
		mp_mutex_lite_lock(&lock);
		atomic_store(&go, r);
		while (atomic_load(&lock.prof.n_waiting) == 0)
			sched_yield();
		mp_mutex_lite_unlock(&lock);
		while (atomic_load(&done) < r)
			sched_yield();
		mp_mutex_prof_t p;
		mp_mutex_prof_read(&lock, &p);
		spun += (unsigned)p.n_spin_acquired;
		waited += (unsigned)p.n_wait_times;
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	mp_mutex_boot(cpus_allowed());
	assert_int_equal(spun, 0);
	assert_int_equal(waited, ROUNDS);
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "--print-spins") == 0) {
		if (malloc_init())
			return 2;
		printf("spins %u\n", mp_mutex_lite_spins());
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spin_acquired),
		cmocka_unit_test(test_spins_by_cpus),
		cmocka_unit_test(test_one_cpu_boots_without_spin),
		cmocka_unit_test(test_no_spin_when_off),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
