/*
 * test/integration/prof_leak.c - the exit leak report (prof_leak,
 * prof_leak_error) and the final dump.
 *
 * The test runs itself again (/proc/self/exe --child MODE) with options in
 * this build's conf variable and reads the child's standard error and exit
 * status.  The child allocates from leak_site() and keeps or frees what it
 * got, then returns from main; nothing else in it allocates, so with
 * lg_prof_sample:0 the summary's numbers are exact: 10 objects of 1000
 * bytes (usize 1024) are "~10240 bytes, ~10 objects, >= 1 context".
 *
 * Checked: prof_leak alone (no prof_final, even no prof:true) writes the
 * final dump and the summary, whose "Run jeprof" line names that dump; the
 * dump holds the leaking stack; with prof_leak_error the exit status is 1
 * and the dump is complete (MAPPED_LIBRARIES and the maps); no leak, no
 * summary and exit 0; the program's own exit handlers run before the
 * final dump; an empty prof_prefix gives the summary without a file.
 */
#include "../test_util.h"

#include <sys/wait.h>

#define NLEAK 10
#define LEAK_SIZE 1000		/* usize 1024 */

static void *leaked[NLEAK];

void leak_site(void);

MP_SITE void leak_site(void) {
	for (int i = 0; i < NLEAK; i++) {
		leaked[i] = malloc(opaque_size(LEAK_SIZE));
	}
	__asm__ volatile("" : : : "memory");
}

static void free_one_at_exit(void) {
	free(leaked[0]);
	leaked[0] = NULL;
}

/* Tells the parent where leak_site is in this process (address space
 * randomisation moves it): "0x<hex>\n" on standard output, without
 * stdio. */
static void child_report_site(void) {
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%#lx\n",
	    (unsigned long)(uintptr_t)leak_site);
	if (n > 0) {
		(void)!write(STDOUT_FILENO, buf, (size_t)n);
	}
}

/* The child: no stdio, no cmocka, nothing that allocates but leak_site. */
static int child_main(const char *mode) {
	child_report_site();
	if (strcmp(mode, "leak") == 0) {
		leak_site();
		return 0;
	}
	if (strcmp(mode, "noleak") == 0) {
		leak_site();
		for (int i = 0; i < NLEAK; i++) {
			free(leaked[i]);
		}
		return 0;
	}
	if (strcmp(mode, "atexit") == 0) {
		/* The library is initialised by now (first malloc), so its
		 * exit handler was registered before this one and runs
		 * after it. */
		leak_site();
		atexit(free_one_at_exit);
		return 0;
	}
	if (strcmp(mode, "exit3") == 0) {
		leak_site();
		exit(3);
	}
	return 100;
}

/* ------------------------------------------------------------ parent */

static char tmpdir[256];

typedef struct {
	int status;		/* waitpid status */
	pid_t pid;
	char err[8192];		/* the child's standard error */
	size_t nlines;
	uintptr_t leak_site;	/* &leak_site in the child */
} child_t;

/* Runs this program as `--child mode` with conf as its options. */
static void run_child(const char *mode, const char *conf, child_t *c) {
	memset(c, 0, sizeof(*c));
	/* The child writes a few bytes to stdout (its leak site), then
	 * stderr until it exits. */
	char out[64];
	c->status = mp_run_child_conf(mode, conf, c->err, sizeof(c->err), out,
	    sizeof(out), &c->pid);
	c->leak_site = (uintptr_t)strtoull(out, NULL, 16);
	for (const char *p = c->err; *p != '\0'; p++)
		c->nlines += *p == '\n';
}

/* The stack of the child's leak_site, or NULL.  Its addresses are the
 * child's: frame 2 is looked at too, in case the library recorded a frame
 * of its own as frame 1 (prof_callsite is the test of that). */
static const mp_heap_stack_t *child_site(const child_t *c, const mp_heap_t *h) {
	uintptr_t lo, hi;
	mp_fn_range((void *)leak_site, &lo, &hi);
	uintptr_t size = hi - lo;
	assert_true(c->leak_site != 0);
	for (size_t i = 0; i < h->nstacks; i++) {
		const mp_heap_stack_t *s = &h->stacks[i];
		for (size_t k = 1; k < s->nframes && k <= 2; k++) {
			if (mp_ra_in(s->frames[k], c->leak_site, c->leak_site +
			    size)) {
				return s;
			}
		}
	}
	return NULL;
}

static bool exited_with(const child_t *c, int code) {
	return WIFEXITED(c->status) && WEXITSTATUS(c->status) == code;
}

/* The line of c->err that starts with prefix, copied to out; false if
 * there is none. */
static bool find_line(const child_t *c, const char *prefix, char *out,
    size_t size) {
	const char *p = c->err;
	size_t plen = strlen(prefix);
	while (*p != '\0') {
		const char *nl = strchr(p, '\n');
		size_t l = nl != NULL ? (size_t)(nl - p) : strlen(p);
		if (l >= plen && strncmp(p, prefix, plen) == 0) {
			snprintf(out, size, "%.*s", (int)l, p);
			return true;
		}
		p += l + (nl != NULL);
	}
	return false;
}

#define SUMMARY "<malloc_prof>: Leak approximation summary: "
#define RUN_JEPROF "<malloc_prof>: Run jeprof on \""
#define EXITING "<malloc_prof>: Exiting with error code because memory " \
	"leaks were detected"

/* The file named by the "Run jeprof" line, checked and parsed. */
/* The child printed the summary of its NLEAK leaked KiB. */
static void check_summary(const child_t *c) {
	char line[1024];
	MP_ASSERT(find_line(c, SUMMARY, line, sizeof(line)), "no summary in "
	    "\"%s\"", c->err);
	assert_string_equal(line, SUMMARY "~10240 bytes, ~10 objects, >= 1 "
	    "context");
}

static void check_final_dump(const child_t *c, const char *base, mp_heap_t *h) {
	char line[1024];
	MP_ASSERT(find_line(c, RUN_JEPROF, line, sizeof(line)), "no \"Run "
	    "jeprof\" line");
	const char *name = line + strlen(RUN_JEPROF);
	const char *q = strchr(name, '"');
	assert_non_null(q);
	assert_string_equal(q, "\" for leak detail");
	char path[1024];
	snprintf(path, sizeof(path), "%.*s", (int)(q - name), name);
	/* <tmpdir>/<base>.<pid>.<seq>.f.heap */
	mp_autoname_t a[2];
	assert_int_equal(mp_dump_list(tmpdir, base, (long)c->pid, 'f', a, 2),
	    1);
	char want[1024];
	snprintf(want, sizeof(want), "%s/%s", tmpdir, a[0].name);
	assert_string_equal(path, want);
	MP_HEAP_PARSE(path, h);
	assert_int_equal(h->rate, 1);
	mp_heap_check_sums(h, true);
	MP_ASSERT(h->has_maps && h->maps_lines > 0 && h->maps_has_so,
	    "the final dump has no MAPPED_LIBRARIES section");
}

static void test_leak_summary(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof:true,prof_leak:true,"
	    "lg_prof_sample:0,prof_prefix:%s/leak", tmpdir);
	child_t c;
	run_child("leak", conf, &c);
	assert_true(exited_with(&c, 0));
	check_summary(&c);
	assert_int_equal(c.nlines, 2);
	mp_heap_t h;
	check_final_dump(&c, "leak", &h);
	/* The leak, with its stack, is all there is. */
	assert_int_equal(h.nstacks, 1);
	const mp_heap_stack_t *s = child_site(&c, &h);
	MP_ASSERT(s != NULL, "the leaking stack is not in the final dump");
	mp_cnts_t want = {NLEAK, NLEAK * 1024, 0, 0};
	assert_true(mp_cnts_eq(&s->total, &want));
	assert_true(mp_cnts_eq(&h.total, &want));
	mp_heap_free(&h);
}

/* prof_leak alone turns profiling on and implies prof_final. */
static void test_leak_implies_prof(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof_leak:true,lg_prof_sample:0,"
	    "prof_prefix:%s/alone", tmpdir);
	child_t c;
	run_child("leak", conf, &c);
	assert_true(exited_with(&c, 0));
	check_summary(&c);
	mp_heap_t h;
	check_final_dump(&c, "alone", &h);
	assert_non_null(child_site(&c, &h));
	mp_heap_free(&h);
}

static void test_leak_error(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof:true,prof_leak:true,"
	    "prof_leak_error:true,lg_prof_sample:0,prof_prefix:%s/err",
	    tmpdir);
	child_t c;
	run_child("leak", conf, &c);
	MP_ASSERT(exited_with(&c, 1), "status %#x", c.status);
	check_summary(&c);
	char line[1024];
	assert_true(find_line(&c, EXITING, line, sizeof(line)));
	assert_string_equal(line, EXITING);
	assert_int_equal(c.nlines, 3);
	/* The dump was complete before the exit. */
	mp_heap_t h;
	check_final_dump(&c, "err", &h);
	assert_non_null(child_site(&c, &h));
	mp_heap_free(&h);

	/* prof_leak_error alone implies prof_leak (and prof). */
	snprintf(conf, sizeof(conf), "prof_leak_error:true,lg_prof_sample:0,"
	    "prof_prefix:%s/erralone", tmpdir);
	run_child("leak", conf, &c);
	MP_ASSERT(exited_with(&c, 1), "status %#x", c.status);
	assert_true(find_line(&c, SUMMARY, line, sizeof(line)));
	check_final_dump(&c, "erralone", &h);
	mp_heap_free(&h);

	/* exit(3) with a leak: the leak status wins. */
	snprintf(conf, sizeof(conf), "prof_leak_error:true,lg_prof_sample:0,"
	    "prof_prefix:%s/exit3", tmpdir);
	run_child("exit3", conf, &c);
	MP_ASSERT(exited_with(&c, 1), "status %#x", c.status);
}

static void test_no_leak(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof:true,prof_leak:true,"
	    "prof_leak_error:true,lg_prof_sample:0,prof_prefix:%s/noleak",
	    tmpdir);
	child_t c;
	run_child("noleak", conf, &c);
	MP_ASSERT(exited_with(&c, 0), "status %#x", c.status);
	MP_ASSERT(c.nlines == 0, "stderr: %s", c.err);
	/* The final dump is still written, with nothing live in it. */
	mp_autoname_t a[2];
	assert_int_equal(mp_dump_list(tmpdir, "noleak", (long)c.pid, 'f', a,
	    2), 1);
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[0].name);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.nstacks, 0);
	assert_int_equal(h.total.co, 0);
	mp_heap_free(&h);

	/* exit(3) without prof_leak_error keeps its status. */
	snprintf(conf, sizeof(conf), "prof_leak:true,lg_prof_sample:0,"
	    "prof_prefix:%s/exit3b", tmpdir);
	run_child("exit3", conf, &c);
	MP_ASSERT(exited_with(&c, 3), "status %#x", c.status);
}

/* The program's exit handlers run before the final dump: what they free
 * is not a leak. */
static void test_atexit_order(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof_leak:true,lg_prof_sample:0,"
	    "prof_prefix:%s/atexit", tmpdir);
	child_t c;
	run_child("atexit", conf, &c);
	assert_true(exited_with(&c, 0));
	char line[1024];
	assert_true(find_line(&c, SUMMARY, line, sizeof(line)));
	assert_string_equal(line, SUMMARY "~9216 bytes, ~9 objects, >= 1 "
	    "context");
}

/* prof_final without prof_leak: the dump, no summary. */
static void test_final_only(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof:true,prof_final:true,"
	    "lg_prof_sample:0,prof_prefix:%s/final", tmpdir);
	child_t c;
	run_child("leak", conf, &c);
	assert_true(exited_with(&c, 0));
	MP_ASSERT(c.nlines == 0, "stderr: %s", c.err);
	mp_autoname_t a[2];
	assert_int_equal(mp_dump_list(tmpdir, "final", (long)c.pid, 'f', a, 2),
	    1);
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[0].name);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_non_null(child_site(&c, &h));
	mp_heap_free(&h);
}

/* An empty prefix: the summary, and why there is no file. */
static void test_empty_prefix(void **state) {
	(void)state;
	child_t c;
	run_child("leak", "prof_leak:true,lg_prof_sample:0,prof_prefix:", &c);
	assert_true(exited_with(&c, 0));
	check_summary(&c);
	char line[1024];
	assert_false(find_line(&c, RUN_JEPROF, line, sizeof(line)));
	assert_true(find_line(&c, "<malloc_prof>: No heap profile was written "
	    "for leak detail: prof_prefix is empty", line, sizeof(line)));
}

/* Without the profiler the options are reported and nothing happens. */
static void test_no_profiler(void **state) {
	(void)state;
	char conf[512];
	snprintf(conf, sizeof(conf), "prof_leak:true,prof_leak_error:true,"
	    "prof_prefix:%s/np", tmpdir);
	child_t c;
	run_child("leak", conf, &c);
	MP_ASSERT(exited_with(&c, 0), "status %#x", c.status);
	char line[1024];
	assert_false(find_line(&c, SUMMARY, line, sizeof(line)));
	assert_true(find_line(&c, "<malloc_prof>: ", line, sizeof(line)));
	MP_ASSERT(strstr(c.err, "option \"prof_leak\" is not available") !=
	    NULL, "%s", c.err);
	mp_autoname_t a[1];
	assert_int_equal(mp_dump_list(tmpdir, "np", (long)c.pid, 'f', a, 1), 0);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		return child_main(argv[2]);
	}
	mp_test_init(300);
	if (!mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_prof_leak")) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	int r;
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		r = mp_run_tests(tests);
	} else {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_leak_summary),
			cmocka_unit_test(test_leak_implies_prof),
			cmocka_unit_test(test_leak_error),
			cmocka_unit_test(test_no_leak),
			cmocka_unit_test(test_atexit_order),
			cmocka_unit_test(test_final_only),
			cmocka_unit_test(test_empty_prefix),
		};
		r = mp_run_tests(tests);
	}
	mp_tmpdir_remove(tmpdir);
	return r;
}
