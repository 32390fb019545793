/*
 * test/integration/prof_mdump.c - prof.dump and prof.prefix (jemalloc's
 * test/unit/prof_mdump.c): named dumps, automatic names
 * <prefix>.<pid>.<seq>.m<n>.heap, the errors and their messages.
 *
 * prof_mdump.conf: prof:true,lg_prof_sample:0 (exact counts).
 */
#include "../test_util.h"

static char tmpdir[256];

#define NOBJ 32
static void *objs[NOBJ];

void mdump_site(void);

MP_SITE void mdump_site(void) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size(100));	/* usize 112 */
	}
	__asm__ volatile("" : : : "memory");
}

static bool running_as_root(void) {
	return geteuid() == 0;
}

static void test_named(void **state) {
	(void)state;
	char path[512];
	snprintf(path, sizeof(path), "%s/named.heap", tmpdir);
	mdump_site();
	assert_int_equal(mp_prof_dump(path), 0);

	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	MP_ASSERT((st.st_mode & 07777) == 0600, "dump mode %o",
	    (unsigned)(st.st_mode & 07777));

	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 1);
	mp_heap_check_sums(&h, true);
	assert_true(h.has_maps);
	assert_true(h.maps_lines > 0);
	assert_true(h.maps_has_so);
	assert_true(h.nthreads >= 1);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)mdump_site,
	    1);
	MP_ASSERT(s != NULL, "no stack of mdump_site among %zu", h.nstacks);
	mp_cnts_t want = {NOBJ, NOBJ * 112, 0, 0};
	MP_ASSERT(mp_cnts_eq(&s->total, &want), "%" PRIu64 ": %" PRIu64 " [%"
	    PRIu64 ": %" PRIu64 "]", s->total.co, s->total.cb, s->total.ao,
	    s->total.ab);
	mp_heap_free(&h);

	/* The same name again replaces the file; the freed objects are
	 * gone from it. */
	mp_free_all(objs, NOBJ);
	assert_int_equal(mp_prof_dump(path), 0);
	MP_HEAP_PARSE(path, &h);
	assert_null(mp_heap_find_site(&h, (void *)mdump_site, 1));
	mp_heap_free(&h);

	/* A relative name is relative to the working directory. */
	char cwd[512];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(tmpdir), 0);
	int r = mp_prof_dump("relative.heap");
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(r, 0);
	snprintf(path, sizeof(path), "%s/relative.heap", tmpdir);
	MP_HEAP_PARSE(path, &h);
	mp_heap_free(&h);
}

static void test_automatic_names(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/auto", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	/* No value, then an explicit NULL: both make automatic names. */
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	const char *none = NULL;
	assert_int_equal(mallctl("prof.dump", NULL, NULL, (void *)&none,
	    sizeof(none)), 0);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	mp_autoname_t a[8];
	size_t n = mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', a, 8);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", tmpdir, a[i].name);
		mp_heap_t h;
		MP_HEAP_PARSE(path, &h);
		mp_heap_check_sums(&h, true);
		mp_heap_free(&h);
		if (i > 0) {
			/* m<n> counts m dumps; seq counts every dump. */
			assert_int_equal(a[i].n, a[i - 1].n + 1);
			assert_true(a[i].seq > a[i - 1].seq);
		}
	}
	/* A named dump takes no sequence number. */
	char path[512];
	snprintf(path, sizeof(path), "%s/between.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	mp_autoname_t b[8];
	assert_int_equal(mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', b,
	    8), 4);
	assert_int_equal(b[3].n, a[2].n + 1);
	assert_int_equal(b[3].seq, a[2].seq + 1);

	/* A new prefix applies from the next dump on. */
	snprintf(prefix, sizeof(prefix), "%s/other", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	assert_int_equal(mp_dump_list(tmpdir, "other", (long)getpid(), 'm', b,
	    8), 1);
	assert_int_equal(b[0].n, a[2].n + 2);
}

/* One failing dump: EFAULT and exactly one "<malloc_prof>: " line that
 * names the file.  `why` is the expected strerror text, or NULL. */
static void check_dump_fails(const char *path, const char *why) {
	mp_msgs_start();
	int r = path != NULL ? mp_prof_dump(path) :
	    mallctl("prof.dump", NULL, NULL, NULL, 0);
	mp_msgs_stop();
	MP_ASSERT(r == EFAULT, "prof.dump(%s): %d", path ? path : "NULL", r);
	MP_ASSERT(mp_msgs_lines == 1, "%u lines: %s", mp_msgs_lines, mp_msgs);
	MP_ASSERT(strncmp(mp_msgs, "<malloc_prof>: prof.dump: ", 26) == 0,
	    "%s", mp_msgs);
	if (path != NULL && path[0] != '\0') {
		char quoted[600];
		snprintf(quoted, sizeof(quoted), "\"%s\"", path);
		MP_ASSERT(strstr(mp_msgs, quoted) != NULL, "%s", mp_msgs);
	}
	if (why != NULL) {
		MP_ASSERT(strstr(mp_msgs, why) != NULL, "want \"%s\": %s", why,
		    mp_msgs);
	}
}

static void test_errors(void **state) {
	(void)state;
	char path[1024];
	/* A directory that does not exist. */
	snprintf(path, sizeof(path), "%s/no-such-dir/x.heap", tmpdir);
	check_dump_fails(path, strerror(ENOENT));
	/* A directory that is a file (fails for root too). */
	char file[512];
	snprintf(file, sizeof(file), "%s/plainfile", tmpdir);
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/x.heap", file);
	check_dump_fails(path, strerror(ENOTDIR));
	/* The name of a directory. */
	check_dump_fails(tmpdir, strerror(EISDIR));
	/* A directory without write permission (root ignores modes). */
	char ro[600];
	snprintf(ro, sizeof(ro), "%s/readonly", tmpdir);
	assert_int_equal(mkdir(ro, 0500), 0);
	snprintf(path, sizeof(path), "%s/x.heap", ro);
	if (!running_as_root()) {
		check_dump_fails(path, strerror(EACCES));
	} else {
		print_message("# running as root: mode 0500 does not stop "
		    "writes, skipped that case\n");
	}
	/* An unwritable prefix: the automatic dump fails the same way. */
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/no-such-dir/auto", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	check_dump_fails(NULL, strerror(ENOENT));
	assert_true(strstr(mp_msgs, "/no-such-dir/auto.") != NULL);
	/* An empty prefix: no automatic name can be made. */
	assert_int_equal(mp_prof_prefix(""), 0);
	check_dump_fails(NULL, "prof_prefix is empty");
	/* An empty file name. */
	check_dump_fails("", "the file name is empty");
	snprintf(prefix, sizeof(prefix), "%s/auto", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	rmdir(ro);
	unlink(file);

	/* prof.dump and prof.prefix are write-only: a read is EPERM. */
	const char *p = NULL;
	size_t sz = sizeof(p);
	assert_int_equal(mallctl("prof.dump", (void *)&p, &sz, NULL, 0), EPERM);
	assert_int_equal(mallctl("prof.prefix", (void *)&p, &sz, NULL, 0),
	    EPERM);
	/* A wrong value size is EINVAL. */
	const char *name = "/dev/null";
	assert_int_equal(mallctl("prof.dump", NULL, NULL, (void *)&name,
	    sizeof(name) - 1), EINVAL);
	assert_int_equal(mallctl("prof.prefix", NULL, NULL, (void *)&name,
	    sizeof(name) + 1), EINVAL);

	/* prof.prefix NULL: EFAULT with one line; the old prefix stays. */
	const char *null = NULL;
	mp_msgs_start();
	int r = mallctl("prof.prefix", NULL, NULL, (void *)&null,
	    sizeof(null));
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	MP_ASSERT(mp_msgs_lines == 1 && strncmp(mp_msgs,
	    "<malloc_prof>: prof.prefix: ", 28) == 0, "%s", mp_msgs);
	mp_autoname_t a[8];
	size_t before = mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', a, 8);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	assert_int_equal(mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', a,
	    8), before + 1);
}

/* Dumps from several threads at once, while they allocate. */
#define NDUMPERS 4
static atomic_uint dumper_ids;

static void *dumper(void *arg) {
	const char *dir = arg;
	unsigned id = atomic_fetch_add(&dumper_ids, 1);
	for (int i = 0; i < 20; i++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/conc-%u-%d.heap", dir, id,
		    i % 2);
		void *p = malloc(1000 + (size_t)i);
		MP_CHECK(mp_prof_dump(path) == 0, "named dump %d", i);
		free(p);
		MP_CHECK(mallctl("prof.dump", NULL, NULL, NULL, 0) == 0,
		    "automatic dump");
	}
	return NULL;
}

static void test_concurrent(void **state) {
	(void)state;
	pthread_t t[NDUMPERS];
	for (int i = 0; i < NDUMPERS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, dumper, tmpdir),
		    0);
	}
	for (int i = 0; i < NDUMPERS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* Every automatic name was distinct: one file per dump. */
	mp_autoname_t a[1];
	size_t n = mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', a, 0);
	MP_ASSERT(n >= NDUMPERS * 20, "%zu automatic dumps", n);
	/* The named ones parse. */
	for (unsigned i = 0; i < NDUMPERS; i++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/conc-%u-1.heap", tmpdir, i);
		mp_heap_t h;
		MP_HEAP_PARSE(path, &h);
		mp_heap_check_sums(&h, true);
		mp_heap_free(&h);
	}
}

static void test_no_profiler(void **state) {
	(void)state;
	mp_msgs_start();
	int r1 = mallctl("prof.dump", NULL, NULL, NULL, 0);
	const char *pfx = "/tmp/x";
	int r2 = mp_prof_prefix(pfx);
	mp_msgs_stop();
	assert_int_equal(r1, ENOENT);
	assert_int_equal(r2, ENOENT);
	/* Each says why. */
	MP_ASSERT(strstr(mp_msgs, "--disable-prof") != NULL, "%s", mp_msgs);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_named),
		cmocka_unit_test(test_automatic_names),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_concurrent),
	};
	return mp_prof_test_main("mp_prof_mdump", test_no_profiler, tests);
}
