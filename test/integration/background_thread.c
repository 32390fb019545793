/*
 * test/integration/background_thread.c - the background purging thread.
 *
 * background_thread.conf: background_thread:true,dirty_decay_ms:200,
 * muzzy_decay_ms:0.  The thread starts at the first allocation event after
 * start-up; freed pages go back to the OS while the program sleeps and
 * makes no call at all (without the thread nothing would purge them: decay
 * otherwise runs on allocation events); the mallctl stops and restarts it;
 * a child of fork() gets a thread of its own.
 */
#include "../test_util.h"

#include <sys/wait.h>

#define NBLOCKS 16
#define BLOCK (4 * MP_MiB)

/* Allocation events start the thread: 4 MiB in small steps. */
static void
allocate_a_little(void) {
	for (int i = 0; i < 1024; i++) {
		free(LAUNDER(malloc(4000)));
	}
}

static size_t
bg_threads(void) {
	size_t n = 0;
	MALLCTL_READ("stats.background_thread.num_threads", n);
	return n;
}

/* Polls num_threads for up to 2 s. */
static bool
bg_threads_become(size_t want) {
	for (int i = 0; i < 200; i++) {
		if (bg_threads() == want) {
			return true;
		}
		allocate_a_little();
		mp_sleep_ms(10);
	}
	return false;
}

static void
test_options(void **state) {
	(void)state;
	bool on = false;
	size_t max = 0;
	MALLCTL_READ("opt.background_thread", on);
	assert_true(on);
	MALLCTL_READ("opt.max_background_threads", max);
	assert_int_equal(max, 1);
	MALLCTL_READ("background_thread", on);
	assert_true(on);
	MP_ASSERT(bg_threads_become(1), "no background thread after "
	    "allocation events");
}

static void
test_purges_while_sleeping(void **state) {
	(void)state;
	assert_true(bg_threads_become(1));
	size_t page = mp_page_size();
	unsigned char *b[NBLOCKS];
	for (int i = 0; i < NBLOCKS; i++) {
		b[i] = LAUNDER((unsigned char *)malloc(BLOCK));
		assert_non_null(b[i]);
		for (size_t off = 0; off < BLOCK; off += page) {
			b[i][off] = (unsigned char)i;
		}
	}
	size_t before = read_rss_bytes();
	for (int i = 0; i < NBLOCKS; i++) {
		free(b[i]);
	}
	uint64_t runs0 = 0, runs1 = 0;
	MALLCTL_READ("stats.background_thread.num_runs", runs0);
	/* No allocator call from here until the reading. */
	mp_sleep_ms(1000);
	size_t after = read_rss_bytes();
	MALLCTL_READ("stats.background_thread.num_runs", runs1);
	MP_ASSERT(before > after && before - after >= 3 * (size_t)NBLOCKS *
	    BLOCK / 4, "RSS %zu -> %zu after freeing %d MiB and sleeping",
	    before, after, NBLOCKS * 4);
	assert_true(runs1 > runs0);
}

static void
test_mallctl_switch(void **state) {
	(void)state;
	bool old = false, off = false, on = true;
	size_t sz = sizeof(old);
	assert_true(bg_threads_become(1));
	assert_int_equal(mallctl("background_thread", &old, &sz, &off,
	    sizeof(off)), 0);
	assert_true(old);
	assert_int_equal(bg_threads(), 0);
	MALLCTL_READ("background_thread", old);
	assert_false(old);
	/* Switching it on starts the thread at once. */
	assert_int_equal(mallctl("background_thread", &old, &sz, &on,
	    sizeof(on)), 0);
	assert_false(old);
	assert_int_equal(bg_threads(), 1);
	/* Off and on at once leaves exactly one thread. */
	assert_int_equal(mallctl("background_thread", NULL, NULL, &off,
	    sizeof(off)), 0);
	assert_int_equal(mallctl("background_thread", NULL, NULL, &on,
	    sizeof(on)), 0);
	assert_int_equal(bg_threads(), 1);
	assert_int_equal(mallctl("background_thread", NULL, NULL, &on, 8),
	    EINVAL);
	size_t n = 0;
	assert_int_equal(mallctl("stats.background_thread.num_threads", NULL,
	    NULL, &n, sizeof(n)), EPERM);
}

static void
test_fork_child(void **state) {
	(void)state;
	assert_true(bg_threads_become(1));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20);
		/* The child starts without the thread, then gets its own. */
		_exit(bg_threads_become(1) ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status "
	    "%#x", status);
	assert_int_equal(bg_threads(), 1);
}

int
main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_purges_while_sleeping),
		cmocka_unit_test(test_mallctl_switch),
		cmocka_unit_test(test_fork_child),
	};
	return mp_run_tests(tests);
}
