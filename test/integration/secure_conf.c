/*
 * test/integration/secure_conf.c - a setuid or setgid program ignores the
 * MALLOC_CONF variable (secure_getenv): whoever runs it must not choose
 * its allocator options (or where its heap profiles go).
 *
 * Needs root (CI runs as root; otherwise it skips).  The test copies
 * itself (a real program: -no-install, the library found through its
 * RPATH) into a directory of its own, owned by daemon, and runs the copy
 * as nobody with MALLOC_CONF=junk:free (MP_MALLOC_CONF in a prefixed
 * build): plain (mode 0755) the copy must report opt.junk "free"; setuid
 * (04755) and setgid (02755, group daemon) it must not.  The copy, run as
 * `secure_conf report`, prints "junk=<opt.junk> secure=<AT_SECURE>".
 */
#include "test_util.h"

#include <grp.h>
#include <pwd.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

static char tmpdir[256];

static int report(void) {
	const char *junk = NULL;
	size_t sz = sizeof(junk);
	if (mallctl("opt.junk", (void *)&junk, &sz, NULL, 0) != 0) {
		return 2;
	}
	printf("junk=%s secure=%lu\n", junk, getauxval(AT_SECURE));
	return 0;
}

static bool copy_file(const char *from, const char *to) {
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
	bool ok = in >= 0 && out >= 0;
	char buf[65536];
	ssize_t n;
	while (ok && (n = read(in, buf, sizeof(buf))) > 0) {
		ok = write(out, buf, (size_t)n) == n;
	}
	if (in >= 0) {
		close(in);
	}
	if (out >= 0 && close(out) != 0) {
		ok = false;
	}
	return ok;
}

/* Runs the copy as nobody with the conf variable set; its line in out. */
static void run_as_nobody(const char *prog, uid_t uid, gid_t gid, char *out,
    size_t size) {
	int p[2];
	assert_int_equal(pipe(p), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		close(p[0]);
		close(p[1]);
		if (setgroups(0, NULL) != 0 || setgid(gid) != 0 ||
		    setuid(uid) != 0) {
			_exit(3);
		}
		char var[128];
		snprintf(var, sizeof(var), "%s=junk:free", mp_env_conf_name());
		char *envp[] = {var, NULL};
		char *argv[] = {(char *)prog, "report", NULL};
		execve(prog, argv, envp);
		_exit(126);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t n;
	while (len + 1 < size && (n = read(p[0], out + len,
	    size - 1 - len)) > 0) {
		len += (size_t)n;
	}
	out[len] = '\0';
	close(p[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s as "
	    "nobody: status %#x (3: setuid failed, 126: exec failed): %s",
	    prog, status, out);
}

static void test_setuid_setgid(void **state) {
	(void)state;
	if (geteuid() != 0) {
		MP_SKIP("needs root, to make a setuid program and run it as "
		    "nobody");
	}
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: a sanitizer's runtime refuses or changes "
		    "setuid programs", mp_env_sanitizer());
	}
	const struct passwd *pw = getpwnam("nobody");
	uid_t nobody = pw != NULL ? pw->pw_uid : 65534;
	gid_t nogroup = pw != NULL ? pw->pw_gid : 65534;
	pw = getpwnam("daemon");
	uid_t owner = pw != NULL ? pw->pw_uid : 1;
	gid_t group = pw != NULL ? pw->pw_gid : 1;
	assert_true(owner != nobody && group != nogroup);

	char prog[512];
	snprintf(prog, sizeof(prog), "%s/secure_conf", tmpdir);
	assert_true(copy_file("/proc/self/exe", prog));
	assert_int_equal(chmod(tmpdir, 0755), 0);
	assert_int_equal(chown(prog, owner, group), 0);
	struct statvfs vfs;
	if (statvfs(tmpdir, &vfs) == 0 && (vfs.f_flag & ST_NOSUID) != 0) {
		MP_SKIP("%s is on a nosuid file system", tmpdir);
	}

	char out[256];
	assert_int_equal(chmod(prog, 0755), 0);
	run_as_nobody(prog, nobody, nogroup, out, sizeof(out));
	MP_ASSERT(strcmp(out, "junk=free secure=0\n") == 0, "plain program "
	    "run as nobody: %s", out);

	assert_int_equal(chmod(prog, 04755), 0);
	run_as_nobody(prog, nobody, nogroup, out, sizeof(out));
	MP_ASSERT(strncmp(out, "junk=", 5) == 0 && strstr(out, "junk=free") ==
	    NULL && strstr(out, "secure=1") != NULL, "setuid program: %s", out);

	assert_int_equal(chmod(prog, 02755), 0);
	run_as_nobody(prog, nobody, nogroup, out, sizeof(out));
	MP_ASSERT(strncmp(out, "junk=", 5) == 0 && strstr(out, "junk=free") ==
	    NULL && strstr(out, "secure=1") != NULL, "setgid program: %s", out);
	unlink(prog);
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "report") == 0) {
		return report();
	}
	mp_test_init(60);
	if (!mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_secure_conf")) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_setuid_setgid),
	};
	int r = mp_run_tests(tests);
	mp_tmpdir_remove(tmpdir);
	return r;
}
