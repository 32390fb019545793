/*
 * test/integration/prof_dump_files.c - how dump files are created: names
 * planted by another user are never written through, and a failed dump
 * leaves nothing behind.
 *
 * prof_dump_files.conf: prof:true,lg_prof_sample:0,prof_prefix: (empty:
 * the tests set their own prefix).  Each case plants a symbolic link to a
 * "victim" file, or a regular file (owned by nobody when run as root), at
 * the names the next dump would take, and checks that the victim and the
 * planted file keep their bytes, that one "<malloc_prof>: " line names the
 * planted path, and that the dump went to the next free name:
 *   - automatic names of every kind: m (prof.dump), the pprof .pb.gz name,
 *     i (lg_prof_interval) and u (prof.gdump) from another thread, and f
 *     (prof_final at exit), the last three in processes of their own
 *     (`prof_dump_files MODE DIR`, run with their own MALLOC_CONF);
 *   - a named dump whose name is a symbolic link: refused, or written to
 *     the link's target with prof_dump_follow_symlinks:true;
 *   - a named dump over a regular file replaces it whole (no temporary
 *     file left), over /dev/null writes in place;
 *   - dumps failing for lack of room (RLIMIT_FSIZE): the previous file at
 *     the name keeps its bytes, and no file or temporary file is left.
 */
#include "../test_util.h"

#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char tmpdir[256];

static const char victim_text[] = "the victim's own bytes\n";
static const char planted_text[] = "a file planted by another user\n";

/* ---- files */

static void write_file(const char *path, const char *text) {
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	MP_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	if (fd >= 0) {
		MP_CHECK(write(fd, text, strlen(text)) ==
		    (ssize_t)strlen(text), "write %s", path);
		close(fd);
	}
}

/* True if path holds exactly text. */
static bool file_is(const char *path, const char *text) {
	char buf[256];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		return false;
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	return n == (ssize_t)strlen(text) && memcmp(buf, text, (size_t)n) == 0;
}

/* A file owned by another user when we are root: O_EXCL must refuse it
 * whoever owns it. */
static void plant_file(const char *path) {
	write_file(path, planted_text);
	if (geteuid() == 0) {
		const struct passwd *pw = getpwnam("nobody");
		MP_CHECK(chown(path, pw != NULL ? pw->pw_uid : 65534,
		    pw != NULL ? pw->pw_gid : 65534) == 0, "chown %s: %s",
		    path, strerror(errno));
	}
}

static void plant_link(const char *path, const char *target) {
	MP_CHECK(symlink(target, path) == 0, "symlink %s: %s", path,
	    strerror(errno));
}

/* The number of names in dir containing s. */
static unsigned names_with(const char *dir, const char *s) {
	unsigned n = 0;
	DIR *d = opendir(dir);
	if (d == NULL) {
		return 0;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		n += strstr(e->d_name, s) != NULL;
	}
	closedir(d);
	return n;
}

/* A regular file of mode 0600 that parses as a heap_v2 profile. */
static void check_dump(const char *path) {
	struct stat st;
	MP_CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	    (st.st_mode & 0777) == 0600, "%s: not a regular 0600 file "
	    "(mode %o)", path, (unsigned)st.st_mode);
	mp_heap_t h;
	MP_CHECK(mp_heap_parse(path, &h), "%s: %s", path, h.err);
	mp_heap_free(&h);
}

/* The victim and the planted files are as they were. */
static void check_untouched(const char *victim, const char *planted) {
	MP_CHECK(file_is(victim, victim_text), "%s was written through a "
	    "planted link", victim);
	if (planted != NULL) {
		MP_CHECK(file_is(planted, planted_text), "planted %s was "
		    "overwritten", planted);
	}
}

/* One message line, from `what`, naming `path` as skipped and the dump as
 * `dump`. */
static void check_skip_msg(const char *what, const char *path,
    const char *dump) {
	char want[1200];
	snprintf(want, sizeof(want), "<malloc_prof>: %s: \"%s\"", what, path);
	MP_CHECK(mp_msgs_lines == 1 && strncmp(mp_msgs, want, strlen(want))
	    == 0 && strstr(mp_msgs, "not written through") != NULL,
	    "want one line starting %s: %u lines: %.600s", want,
	    mp_msgs_lines, mp_msgs);
	if (dump != NULL) {
		snprintf(want, sizeof(want), "the dump is \"%s\"\n", dump);
		MP_CHECK(strstr(mp_msgs, want) != NULL, "want %s in %.600s",
		    want, mp_msgs);
	}
}

/* ---- automatic names in this process */

/* The newest m dump of prefix dir/base: its seq and n. */
static void last_m(const char *dir, const char *base, uint64_t *seq,
    uint64_t *n) {
	mp_autoname_t a[64];
	size_t k = mp_dump_list(dir, base, (long)getpid(), 'm', a, 64);
	assert_true(k >= 1 && k <= 64);
	*seq = a[k - 1].seq;
	*n = a[k - 1].n;
}

static void test_auto_m(void **state) {
	(void)state;
	char prefix[512], victim[512], link1[600], file2[600], dump3[600];
	snprintf(prefix, sizeof(prefix), "%s/m", tmpdir);
	snprintf(victim, sizeof(victim), "%s/victim-m", tmpdir);
	write_file(victim, victim_text);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	void *p = malloc(opaque_size(1000));
	assert_int_equal(mp_prof_dump(NULL), 0);
	uint64_t seq, n;
	last_m(tmpdir, "m", &seq, &n);
	long pid = (long)getpid();
	snprintf(link1, sizeof(link1), "%s.%ld.%" PRIu64 ".m%" PRIu64
	    ".heap", prefix, pid, seq + 1, n + 1);
	snprintf(file2, sizeof(file2), "%s.%ld.%" PRIu64 ".m%" PRIu64
	    ".heap", prefix, pid, seq + 2, n + 2);
	snprintf(dump3, sizeof(dump3), "%s.%ld.%" PRIu64 ".m%" PRIu64
	    ".heap", prefix, pid, seq + 3, n + 3);
	plant_link(link1, victim);
	plant_file(file2);

	mp_msgs_start();
	int r = mp_prof_dump(NULL);
	mp_msgs_stop();
	assert_int_equal(r, 0);
	check_untouched(victim, file2);
	check_skip_msg("prof.dump", link1, dump3);
	MP_CHECK(strstr(mp_msgs, "and 1 more names exist") != NULL, "%s",
	    mp_msgs);
	check_dump(dump3);
	struct stat st;
	MP_CHECK(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode), "the "
	    "planted link was replaced");
	free(p);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* pprof's automatic names end in .pb.gz: the same rule. */
static void test_auto_pprof(void **state) {
	(void)state;
	char prefix[512], victim[512], link[600];
	snprintf(prefix, sizeof(prefix), "%s/pp", tmpdir);
	snprintf(victim, sizeof(victim), "%s/victim-pp", tmpdir);
	write_file(victim, victim_text);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	const char *pprof = "pprof", *heap = "heap_v2";
	assert_int_equal(mallctl("prof.format", NULL, NULL, &pprof,
	    sizeof(pprof)), 0);
	/* Where the m counter is: one heap_v2 dump, then plant at the next
	 * pprof name. */
	assert_int_equal(mallctl("prof.format", NULL, NULL, &heap,
	    sizeof(heap)), 0);
	assert_int_equal(mp_prof_dump(NULL), 0);
	uint64_t seq, n;
	last_m(tmpdir, "pp", &seq, &n);
	snprintf(link, sizeof(link), "%s.%ld.%" PRIu64 ".m%" PRIu64
	    ".pb.gz", prefix, (long)getpid(), seq + 1, n + 1);
	plant_link(link, victim);
	assert_int_equal(mallctl("prof.format", NULL, NULL, &pprof,
	    sizeof(pprof)), 0);
	mp_msgs_start();
	int r = mp_prof_dump(NULL);
	mp_msgs_stop();
	assert_int_equal(mallctl("prof.format", NULL, NULL, &heap,
	    sizeof(heap)), 0);
	assert_int_equal(r, 0);
	check_untouched(victim, NULL);
	check_skip_msg("prof.dump", link, NULL);
	assert_int_equal(names_with(tmpdir, ".pb.gz"), 2);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ---- named dumps */

static void test_named_link_refused(void **state) {
	(void)state;
	char victim[512], link[512], dangling[512], gone[512];
	snprintf(victim, sizeof(victim), "%s/victim-n", tmpdir);
	snprintf(link, sizeof(link), "%s/named-link.heap", tmpdir);
	snprintf(gone, sizeof(gone), "%s/not-there", tmpdir);
	snprintf(dangling, sizeof(dangling), "%s/dangling.heap", tmpdir);
	write_file(victim, victim_text);
	plant_link(link, victim);
	plant_link(dangling, gone);
	const char *paths[] = {link, dangling};
	for (int i = 0; i < 2; i++) {
		mp_msgs_start();
		int r = mp_prof_dump(paths[i]);
		mp_msgs_stop();
		char want[700];
		snprintf(want, sizeof(want), "<malloc_prof>: prof.dump: cannot "
		    "write \"%s\": it is a symbolic link, not followed",
		    paths[i]);
		MP_CHECK(r == EFAULT, "prof.dump(%s): %d", paths[i], r);
		MP_CHECK(mp_msgs_lines == 1 && strncmp(mp_msgs, want,
		    strlen(want)) == 0 && strstr(mp_msgs,
		    "prof_dump_follow_symlinks:true") != NULL, "%u lines: %s",
		    mp_msgs_lines, mp_msgs);
	}
	check_untouched(victim, NULL);
	MP_CHECK(access(gone, F_OK) != 0, "the dangling link's target was "
	    "created");
	assert_int_equal(names_with(tmpdir, ".tmp."), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* A regular file is replaced whole, /dev/null is written in place. */
static void test_named_replace(void **state) {
	(void)state;
	char path[512];
	snprintf(path, sizeof(path), "%s/replace.heap", tmpdir);
	write_file(path, victim_text);
	assert_int_equal(mp_prof_dump(path), 0);
	check_dump(path);
	assert_int_equal(names_with(tmpdir, ".tmp."), 0);
	unlink(path);
	if (access("/dev/null", W_OK) == 0) {
		assert_int_equal(mp_prof_dump("/dev/null"), 0);
		struct stat st;
		assert_int_equal(lstat("/dev/null", &st), 0);
		assert_true(S_ISCHR(st.st_mode));
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ---- failures leave nothing behind */

/* In a forked child (the limit stays there): every write past 64 bytes
 * fails with EFBIG. */
static int no_room_child(void) {
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = {64, 64};
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0) {
		return 3;
	}
	char dir[512], old[600], fresh[600], prefix[600];
	snprintf(dir, sizeof(dir), "%s/noroom", tmpdir);
	snprintf(old, sizeof(old), "%s/old.heap", dir);
	snprintf(fresh, sizeof(fresh), "%s/fresh.heap", dir);
	snprintf(prefix, sizeof(prefix), "%s/auto", dir);
	write_file(old, victim_text);
	const char *named[] = {old, fresh};
	for (int i = 0; i < 2; i++) {
		mp_msgs_start();
		int r = mp_prof_dump(named[i]);
		mp_msgs_stop();
		char want[700];
		snprintf(want, sizeof(want), "<malloc_prof>: prof.dump: cannot "
		    "write \"%s\": %s", named[i], strerror(EFBIG));
		MP_CHECK(r == EFAULT && mp_msgs_lines == 1 && strstr(mp_msgs,
		    want) != NULL, "%s: %d, %s", named[i], r, mp_msgs);
	}
	MP_CHECK(file_is(old, victim_text), "the failed dump changed %s", old);
	MP_CHECK(access(fresh, F_OK) != 0, "the failed dump left %s", fresh);
	MP_CHECK(mp_prof_prefix(prefix) == 0, "prof.prefix");
	mp_msgs_start();
	int r = mp_prof_dump(NULL);
	mp_msgs_stop();
	MP_CHECK(r == EFAULT && mp_msgs_lines == 1 && strstr(mp_msgs,
	    strerror(EFBIG)) != NULL, "automatic: %d, %s", r, mp_msgs);
	/* Only old.heap is left: no dump, no temporary file. */
	MP_CHECK(names_with(dir, ".heap") == 1, "files left in %s", dir);
	return atomic_load(&mp_failures) != 0;
}

static void test_failed_dump_leaves_nothing(void **state) {
	(void)state;
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/noroom", tmpdir);
	assert_int_equal(mkdir(dir, 0700), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(no_room_child());
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	mp_tmpdir_remove(dir);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: "
	    "status %#x (3: setrlimit failed; failed checks above)", status);
}

/* ---- other processes: interval, gdump, final, follow */

/*
 * Plant links to victim at every name "<prefix>.<pid>.<seq>.<kind><n>"
 * with seq and n below 8 (whatever dumps came first, the next one is
 * among them), and the f names with seq below 8.
 */
static void plant_grid(const char *prefix, char kind, const char *victim) {
	char path[700];
	for (unsigned s = 0; s < 8; s++) {
		if (kind == 'f') {
			snprintf(path, sizeof(path), "%s.%ld.%u.f.heap", prefix,
			    (long)getpid(), s);
			plant_link(path, victim);
			continue;
		}
		for (unsigned n = 0; n < 8; n++) {
			snprintf(path, sizeof(path), "%s.%ld.%u.%c%u.heap",
			    prefix, (long)getpid(), s, kind, n);
			plant_link(path, victim);
		}
	}
}

/* A dump of kind by the process, at seq or n 8 and up: a real file. */
static void check_kind_written(const char *dir, const char *base, char kind) {
	mp_autoname_t a[128];
	size_t k = mp_dump_list(dir, base, (long)getpid(), kind, a, 128);
	bool found = false;
	for (size_t i = 0; i < k && i < 128; i++) {
		char path[700];
		snprintf(path, sizeof(path), "%s/%s", dir, a[i].name);
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			check_dump(path);
			found = true;
		}
	}
	MP_CHECK(found, "no %c dump was written in %s", kind, dir);
}

static void *grow_thread(void *arg) {
	/* 4 MiB: past the 1 MiB interval, and a new high for gdump. */
	void **p = arg;
	*p = malloc(opaque_size((size_t)4 << 20));
	MP_CHECK(*p != NULL, "malloc");
	return NULL;
}

/* `prof_dump_files interval|gdump DIR`: one dump from another thread. */
static int auto_thread_child(const char *mode, const char *dir) {
	char prefix[600], victim[600];
	snprintf(prefix, sizeof(prefix), "%s/%s", dir, mode);
	snprintf(victim, sizeof(victim), "%s/victim-%s", dir, mode);
	char kind = mode[0] == 'i' ? 'i' : 'u';
	plant_grid(prefix, kind, victim);
	MP_CHECK(mp_prof_prefix(prefix) == 0, "prof.prefix");
	if (kind == 'u') {
		MP_CHECK(mp_prof_switch("prof.gdump", true, NULL) == 0,
		    "prof.gdump");
	}
	void *p = NULL;
	pthread_t t;
	mp_msgs_start();
	MP_CHECK(pthread_create(&t, NULL, grow_thread, &p) == 0, "thread");
	pthread_join(t, NULL);
	mp_msgs_stop();
	check_untouched(victim, NULL);
	const char *what = kind == 'i' ? "interval dump (lg_prof_interval)" :
	    "gdump (prof.gdump)";
	char want[800];
	snprintf(want, sizeof(want), "<malloc_prof>: %s: \"%s.%ld.", what,
	    prefix, (long)getpid());
	MP_CHECK(mp_msgs_lines >= 1 && strncmp(mp_msgs, want, strlen(want))
	    == 0 && strstr(mp_msgs, "not written through") != NULL, "want "
	    "%s...: %s", want, mp_msgs);
	check_kind_written(dir, mode, kind);
	free(p);
	return atomic_load(&mp_failures) != 0;
}

/* `prof_dump_files final DIR`: plants, then exits (the dump is checked
 * by the parent). */
static int final_child(const char *dir) {
	char prefix[600], victim[600];
	snprintf(prefix, sizeof(prefix), "%s/final", dir);
	snprintf(victim, sizeof(victim), "%s/victim-final", dir);
	plant_grid(prefix, 'f', victim);
	free(malloc(opaque_size(1000)));
	return atomic_load(&mp_failures) != 0;
}

/* `prof_dump_files follow DIR`: prof_dump_follow_symlinks:true writes
 * the link's target (replacing it whole), the link stays. */
static int follow_child(const char *dir) {
	char victim[600], link[600];
	snprintf(victim, sizeof(victim), "%s/victim-follow", dir);
	snprintf(link, sizeof(link), "%s/follow.heap", dir);
	plant_link(link, victim);
	MP_CHECK(mp_prof_dump(link) == 0, "prof.dump through the link");
	check_dump(victim);
	struct stat st;
	MP_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link was "
	    "replaced");
	MP_CHECK(names_with(dir, ".tmp.") == 0, "temporary file left");
	return atomic_load(&mp_failures) != 0;
}

/*
 * Run `prof_dump_files mode dir` with conf as its MALLOC_CONF and stderr
 * to dir/stderr-<mode>; returns its pid (for the names of its dumps).
 */
static pid_t run_child(const char *mode, const char *dir, const char *conf) {
	char errpath[600];
	snprintf(errpath, sizeof(errpath), "%s/stderr-%s", dir, mode);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, STDERR_FILENO) < 0 ||
		    setenv(mp_env_conf_name(), conf, 1) != 0) {
			_exit(125);
		}
		char *argv[] = {"prof_dump_files", (char *)mode, (char *)dir,
		    NULL};
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	char err[4096] = "";
	int fd = open(errpath, O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, err, sizeof(err) - 1);
		err[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s child: "
	    "status %#x, stderr: %s", mode, status, err);
	return pid;
}

static void make_subdir(char *dir, size_t size, const char *name) {
	snprintf(dir, size, "%s/%s", tmpdir, name);
	assert_int_equal(mkdir(dir, 0700), 0);
	char victim[600];
	snprintf(victim, sizeof(victim), "%s/victim-%s", dir, name);
	write_file(victim, victim_text);
}

static void test_auto_interval_thread(void **state) {
	(void)state;
	char dir[512];
	make_subdir(dir, sizeof(dir), "interval");
	run_child("interval", dir, "prof:true,lg_prof_sample:0,"
	    "lg_prof_interval:20,prof_prefix:");
	mp_tmpdir_remove(dir);
}

static void test_auto_gdump_thread(void **state) {
	(void)state;
	char dir[512];
	make_subdir(dir, sizeof(dir), "gdump");
	run_child("gdump", dir, "prof:true,lg_prof_sample:0,prof_prefix:");
	mp_tmpdir_remove(dir);
}

static void test_auto_final(void **state) {
	(void)state;
	char dir[512], conf[700], victim[600], errpath[600];
	make_subdir(dir, sizeof(dir), "final");
	snprintf(conf, sizeof(conf), "prof:true,lg_prof_sample:0,"
	    "prof_final:true,prof_prefix:%s/final", dir);
	pid_t pid = run_child("final", dir, conf);
	snprintf(victim, sizeof(victim), "%s/victim-final", dir);
	assert_true(file_is(victim, victim_text));
	/* Seq 0 to 7 were planted: the f dump has the first free one. */
	mp_autoname_t a[16];
	size_t k = mp_dump_list(dir, "final", (long)pid, 'f', a, 16);
	assert_int_equal(k, 9);
	char path[700];
	snprintf(path, sizeof(path), "%s/%s", dir, a[8].name);
	assert_int_equal(a[8].seq, 8);
	check_dump(path);
	snprintf(errpath, sizeof(errpath), "%s/stderr-final", dir);
	char err[4096] = "", want[800];
	int fd = open(errpath, O_RDONLY);
	assert_true(fd >= 0);
	ssize_t n = read(fd, err, sizeof(err) - 1);
	err[n > 0 ? n : 0] = '\0';
	close(fd);
	snprintf(want, sizeof(want), "<malloc_prof>: final dump (prof_final): "
	    "\"%s/final.%ld.0.f.heap\" and 7 more names exist (put there by "
	    "someone else?): not written through; the dump is \"%s\"\n", dir,
	    (long)pid, path);
	MP_ASSERT(strstr(err, want) != NULL, "want %s in: %s", want, err);
	assert_int_equal(atomic_load(&mp_failures), 0);
	mp_tmpdir_remove(dir);
}

static void test_named_follow_option(void **state) {
	(void)state;
	char dir[512];
	make_subdir(dir, sizeof(dir), "follow");
	run_child("follow", dir, "prof:true,lg_prof_sample:0,prof_prefix:,"
	    "prof_dump_follow_symlinks:true");
	mp_tmpdir_remove(dir);
	bool v = true;
	size_t sz = sizeof(v);
	assert_int_equal(mallctl("opt.prof_dump_follow_symlinks", &v, &sz,
	    NULL, 0), 0);
	assert_false(v);
}

static void test_no_profiler(void **state) {
	(void)state;
	MP_SKIP("built with --disable-prof");
}

int main(int argc, char **argv) {
	if (argc == 3) {
		/* A child of run_child: checks on stderr, status 0 if all
		 * passed. */
		if (strcmp(argv[1], "final") == 0) {
			return final_child(argv[2]);
		}
		if (strcmp(argv[1], "follow") == 0) {
			return follow_child(argv[2]);
		}
		return auto_thread_child(argv[1], argv[2]);
	}
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_m),
		cmocka_unit_test(test_auto_pprof),
		cmocka_unit_test(test_named_link_refused),
		cmocka_unit_test(test_named_replace),
		cmocka_unit_test(test_failed_dump_leaves_nothing),
		cmocka_unit_test(test_auto_interval_thread),
		cmocka_unit_test(test_auto_gdump_thread),
		cmocka_unit_test(test_auto_final),
		cmocka_unit_test(test_named_follow_option),
	};
	return mp_prof_test_main("mp_prof_dump_files", test_no_profiler,
	    tests);
}
