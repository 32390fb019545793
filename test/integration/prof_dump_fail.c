/*
 * test/integration/prof_dump_fail.c - dumps that cannot be written, and
 * the process going on (prof_mdump and prof_idump have the other cases:
 * missing directory, not a directory, a directory's name, empty names).
 *
 * prof_dump_fail.conf: prof:true,lg_prof_sample:0,lg_prof_interval:16,
 * prof_prefix: (empty: no automatic dump until a test sets the prefix).
 *   - prof.dump to /dev/full (ENOSPC) and, as an unprivileged user (a
 *     child that drops root with setuid if run as root), into a read-only
 *     directory (EACCES): EFAULT and one "<malloc_prof>: " line naming the
 *     file and the cause; the next dump works.
 *   - interval dumps failing for more than 10 s: the first failure and one
 *     more line 10 s or more later carrying the count of the failures not reported
 *     in between (gdump failures count with them); with a writable prefix
 *     the next interval dump is written.
 */
#include "../test_util.h"

#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>

static char tmpdir[256];

/* One failing prof.dump: EFAULT and one line naming path and why. */
static bool dump_fails(const char *path, const char *why) {
	mp_msgs_start();
	int r = mp_prof_dump(path);
	mp_msgs_stop();
	const char *at = strstr(mp_msgs, path);
	bool named = at != NULL && at > mp_msgs && at[-1] == '"' &&
	    at[strlen(path)] == '"';
	MP_CHECK(r == EFAULT, "prof.dump(%.300s): %d", path, r);
	MP_CHECK(mp_msgs_lines == 1, "%u lines: %.300s", mp_msgs_lines,
	    mp_msgs);
	MP_CHECK(strncmp(mp_msgs, "<malloc_prof>: prof.dump: ", 26) == 0 &&
	    named && strstr(mp_msgs, why) != NULL, "want the name and %.60s: "
	    "%.200s", why, mp_msgs);
	return r == EFAULT && mp_msgs_lines == 1;
}

/* A dump that works, and parses. */
static void dump_works(const char *dir, const char *name) {
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	void *p = malloc(opaque_size(1000));
	int r = mp_prof_dump(path);
	MP_CHECK(r == 0, "prof.dump(%.300s) after the failure: %d", path, r);
	mp_heap_t h;
	MP_CHECK(r != 0 || mp_heap_parse(path, &h), "%.300s", h.err);
	if (r == 0) {
		mp_heap_free(&h);
	}
	free(p);
	unlink(path);
}

static void test_dev_full(void **state) {
	(void)state;
	if (access("/dev/full", W_OK) != 0) {
		MP_SKIP("no writable /dev/full");
	}
	for (int i = 0; i < 3; i++) {
		dump_fails("/dev/full", strerror(ENOSPC));
		dump_works(tmpdir, "after-full.heap");
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* As an unprivileged user: the dump into a read-only directory fails,
 * the next one (into a writable directory) works. */
static int readonly_child(const char *ro, const char *rw) {
	char path[1024];
	snprintf(path, sizeof(path), "%s/x.heap", ro);
	dump_fails(path, strerror(EACCES));
	dump_works(rw, "after-ro.heap");
	return atomic_load(&mp_failures) != 0;
}

static void test_readonly_dir(void **state) {
	(void)state;
	char ro[300], rw[300];
	snprintf(ro, sizeof(ro), "%s/readonly", tmpdir);
	snprintf(rw, sizeof(rw), "%s/writable", tmpdir);
	assert_int_equal(mkdir(ro, 0555), 0);
	assert_int_equal(mkdir(rw, 0777), 0);
	assert_int_equal(chmod(rw, 0777), 0);
	if (geteuid() != 0) {
		assert_int_equal(readonly_child(ro, rw), 0);
		rmdir(ro);
		rmdir(rw);
		return;
	}
	/* Root writes anywhere: drop to nobody in a child.  The test's
	 * directory must let it through. */
	const struct passwd *pw = getpwnam("nobody");
	uid_t uid = pw != NULL ? pw->pw_uid : 65534;
	gid_t gid = pw != NULL ? pw->pw_gid : 65534;
	assert_int_equal(chmod(tmpdir, 0711), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid(gid) != 0 ||
		    setuid(uid) != 0) {
			_exit(3);
		}
		_exit(readonly_child(ro, rw));
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	chmod(tmpdir, 0700);
	rmdir(ro);
	rmdir(rw);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child as "
	    "uid %ld: status %#x (3: setuid failed)", (long)uid, status);
}

#define CHUNK ((size_t)80 << 10)	/* > 2^16: an interval dump each */

/* Interval (and gdump) failures until the second line: it comes no
 * sooner than 10 s after the first and carries the number of failures in
 * between.  The test waits for that line, up to MP_WAIT_S: a fixed 10.5 s
 * window failed whenever a loaded machine stalled the process at its end. */
static void test_auto_rate_limit(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/no-such-dir/a", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	bool old;
	assert_int_equal(mp_prof_switch("prof.gdump", true, &old), 0);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned rounds = 0;
	void *grow[64];
	size_t ngrow = 0;
	mp_msgs_start();
	double s = 0;
	while (mp_msgs_lines < 2 && s < MP_WAIT_S) {
		free(malloc(opaque_size(CHUNK)));
		/* A new high of active memory now and then: a gdump. */
		if (rounds % 16 == 0 && ngrow < 64) {
			grow[ngrow++] = malloc(opaque_size((size_t)1 << 20));
		}
		rounds++;
		usleep(20000);
		clock_gettime(CLOCK_MONOTONIC, &t);
		s = (double)(t.tv_sec - t0.tv_sec) +
		    (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
	}
	mp_msgs_stop();
	for (size_t i = 0; i < ngrow; i++) {
		free(grow[i]);
	}
	assert_int_equal(mp_prof_switch("prof.gdump", old, NULL), 0);
	print_message("# %u failing rounds in %.1f s: %s", rounds, s, mp_msgs);
	MP_ASSERT(mp_msgs_lines == 2, "%u lines: %s", mp_msgs_lines, mp_msgs);
	/* Not sooner than 10 s (less the coarse clock's few ms). */
	MP_ASSERT(s >= 9.9, "second report after %.2f s", s);
	MP_ASSERT(strstr(mp_msgs, "/no-such-dir/a.") != NULL &&
	    strstr(mp_msgs, "reported at most every 10 s") != NULL, "%s",
	    mp_msgs);
	const char *second = strchr(mp_msgs, '\n') + 1;
	unsigned long n = 0;
	const char *c = strrchr(second, '(');
	MP_ASSERT(c != NULL && sscanf(c, "(%lu more automatic dump failures "
	    "since the last report)", &n) == 1, "%s", second);
	/* About one interval dump per round; gdumps add a few. */
	MP_ASSERT(n >= rounds / 2 && n <= 2 * rounds + 64, "%lu suppressed "
	    "of %u rounds", n, rounds);
	/* A writable prefix: the next interval dump is written. */
	snprintf(prefix, sizeof(prefix), "%s/a", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	mp_msgs_start();
	free(malloc(opaque_size(CHUNK)));
	mp_msgs_stop();
	assert_int_equal(mp_msgs_lines, 0);
	mp_autoname_t a[4];
	MP_ASSERT(mp_dump_list(tmpdir, "a", (long)getpid(), 'i', a, 4) >= 1,
	    "no interval dump after the prefix was fixed");
}

static void test_no_profiler(void **state) {
	(void)state;
	MP_SKIP("built with --disable-prof");
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dev_full),
		cmocka_unit_test(test_readonly_dir),
		cmocka_unit_test(test_auto_rate_limit),
	};
	return mp_prof_test_main("mp_prof_dump_fail", test_no_profiler, tests);
}
