/*
 * test/integration/background_thread.c - the background purging thread.
 *
 * background_thread.conf: background_thread:true,dirty_decay_ms:200,
 * muzzy_decay_ms:0.  The thread starts at the first allocation event after
 * start-up; freed pages go back to the OS while the program sleeps and
 * makes no call at all (without the thread nothing would purge them: decay
 * otherwise runs on allocation events); the mallctl stops and restarts it;
 * a child of fork() gets a thread of its own; when the thread cannot be
 * created the mallctl says EAGAIN and why.
 */
#include "../test_util.h"

#include <sys/resource.h>
#include <sys/wait.h>

#define NBLOCKS 16
#define BLOCK (4 * MP_MiB)

/* Allocation events start the thread: 4 MiB in small steps. */
static void allocate_a_little(void) {
	for (int i = 0; i < 1024; i++) {
		free(LAUNDER(malloc(4000)));
	}
}

static size_t bg_threads(void) {
	size_t n = 0;
	MALLCTL_READ("stats.background_thread.num_threads", n);
	return n;
}

/* Polls num_threads, for up to MP_WAIT_S (a hang detector: it takes
 * milliseconds). */
static bool bg_threads_become(size_t want) {
	uint64_t t0 = mp_now_ns();
	while (bg_threads() != want) {
		if (mp_waited_too_long(t0)) {
			return false;
		}
		allocate_a_little();
		mp_sleep_ms(10);
	}
	return true;
}

static void test_options(void **state) {
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

static void test_purges_while_sleeping(void **state) {
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
	/* No allocator call from here until the RSS has dropped (raw reads
	 * of /proc): only the background thread can purge.  It takes ~0.3 s
	 * (dirty_decay_ms:200); a loaded machine may not run the thread for
	 * a while, so wait on the RSS itself, up to MP_WAIT_S. */
	uint64_t t0 = mp_now_ns();
	size_t after;
	do {
		mp_sleep_ms(100);
		after = read_rss_bytes();
	} while ((after >= before || before - after < 3 * (size_t)NBLOCKS *
	    BLOCK / 4) && !mp_waited_too_long(t0));
	printf("# RSS %zu MiB -> %zu MiB in %" PRIu64 " ms\n", before /
	    MP_MiB, after / MP_MiB, (mp_now_ns() - t0) / 1000000);
	MALLCTL_READ("stats.background_thread.num_runs", runs1);
	MP_ASSERT(before > after && before - after >= 3 * (size_t)NBLOCKS *
	    BLOCK / 4, "RSS %zu -> %zu after freeing %d MiB and sleeping",
	    before, after, NBLOCKS * 4);
	assert_true(runs1 > runs0);
}

static void test_mallctl_switch(void **state) {
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

static void test_fork_child(void **state) {
	(void)state;
	if (strcmp(mp_env_sanitizer(), "tsan") == 0)
		MP_SKIP("tsan build: ThreadSanitizer cannot start threads in "
		    "the child of a multi-threaded fork");
	assert_true(bg_threads_become(1));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		mp_alarm_arm(120);
		/* The child starts without the thread, then gets its own. */
		_exit(bg_threads_become(1) ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status "
	    "%#x", status);
	assert_int_equal(bg_threads(), 1);
}

/*
 * The child mode of test_create_fails: with the address space capped just
 * above what the process uses, the thread's stack cannot be mapped; the
 * mallctl must say EAGAIN with one line naming the cause, and leave the
 * switch off.  A fresh process: glibc would reuse a cached stack of an
 * earlier thread.  Exit status 0 when all holds.
 */
static int create_fails_child(void) {
	struct rlimit rl;
	size_t vm = 0;
	char buf[4096];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 2;
	buf[n] = '\0';
	vm = (size_t)strtoull(buf, NULL, 10) * mp_page_size();
	rl.rlim_cur = rl.rlim_max = vm + 2 * MP_MiB;
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return 3;
	bool on = true, now = true;
	size_t sz = sizeof(now), nthreads = 1;
	mp_msgs_start();
	int r = mallctl("background_thread", NULL, NULL, &on, sizeof(on));
	mp_msgs_stop();
	if (r != EAGAIN)
		return 4;
	if (mp_msgs_lines != 1 || strstr(mp_msgs, "<malloc_prof>: "
	    "background_thread: cannot create the thread: ") != mp_msgs)
		return 5;
	if (mallctl("background_thread", &now, &sz, NULL, 0) != 0 || now)
		return 6;
	sz = sizeof(nthreads);
	if (mallctl("stats.background_thread.num_threads", &nthreads, &sz,
	    NULL, 0) != 0 || nthreads != 0)
		return 7;
	return 0;
}

static void test_create_fails(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("%s build: the sanitizer's runtime needs address space "
		    "that RLIMIT_AS takes away", mp_env_sanitizer());
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {"background_thread", "create_fails", NULL};
		setenv(mp_env_conf_name(), "background_thread:false", 1);
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child "
	    "status %#x (exit code = the check that failed)", status);
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "create_fails") == 0)
		return create_fails_child();
	mp_test_init(600);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_purges_while_sleeping),
		cmocka_unit_test(test_mallctl_switch),
		cmocka_unit_test(test_fork_child),
		cmocka_unit_test(test_create_fails),
	};
	return mp_run_tests(tests);
}
