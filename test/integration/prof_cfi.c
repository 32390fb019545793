/*
 * test/integration/prof_cfi.c - stacks of code built without frame
 * pointers, walked with .eh_frame (prof_unwind:cfi and auto).
 *
 * prof_cfi.conf: prof:true,lg_prof_sample:0,prof_unwind:cfi.  The chain
 * main -> cfi_lvl1 -> cfi_lvl2 -> cfi_lvl3 -> cfi_lib_lvl4 ->
 * cfi_lib_alloc -> malloc runs through this program and a shared
 * library (prof_cfi_lib.c), all built with -O2 -fomit-frame-pointer, and
 * its sample's stack must name each function in order (by dladdr: the
 * program is linked -export-dynamic), and go on through main to libc's
 * __libc_start_main.  The same again in a
 * second run of this program under prof_unwind:auto (frame pointers
 * where they hold, here none), and in a thread.  Under prof_unwind:fp
 * the stack is only printed: without frame pointers it is cut short,
 * which is what the option is for.
 */
#include "../test_util.h"

static char tmpdir[256];

void *cfi_lib_alloc(size_t n);
void *cfi_lib_lvl4(size_t n);
void *cfi_lvl1(size_t n);
void *cfi_lvl2(size_t n);
void *cfi_lvl3(size_t n);

MP_NOFP_SITE void *cfi_lvl3(size_t n) {
	volatile long pad[5];
	pad[n % 5] = 0;
	void *p = cfi_lib_lvl4(n + (size_t)pad[n % 5]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *cfi_lvl2(size_t n) {
	void *p = cfi_lvl3(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *cfi_lvl1(size_t n) {
	volatile char pad[300];
	pad[n % 300] = 0;
	void *p = cfi_lvl2(n + (size_t)pad[n % 300]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static const char *const want[] = {"cfi_lib_alloc", "cfi_lib_lvl4",
    "cfi_lvl3", "cfi_lvl2", "cfi_lvl1"};
#define NWANT (sizeof(want) / sizeof(want[0]))

/*
 * Dumps to dir/tag.heap and checks the stack of the sample allocated
 * through cfi_lib_alloc: each function of the chain in order, then at
 * least one more frame, and the function `last` (if not NULL) after.
 * strict false: print only.  Returns the frames found after frame 0.
 */
static size_t check_chain(const char *dir, const char *tag, const char *last,
    bool strict) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", dir, tag);
	MP_CHECK(mp_prof_dump(path) == 0, "%s: prof.dump", tag);
	mp_heap_t h;
	if (!mp_heap_parse(path, &h)) {
		MP_CHECK(false, "%s: %s", path, h.err);
		return 0;
	}
	const mp_heap_stack_t *s = mp_heap_find_site(&h,
	    (const void *)cfi_lib_alloc, 1);
	MP_CHECK(s != NULL, "%s: no stack through cfi_lib_alloc", tag);
	size_t depth = 0;
	if (s != NULL) {
		size_t u = mp_heap_user_frame(s);
		char line[1024];
		int len = snprintf(line, sizeof(line), "# %s:", tag);
		for (size_t k = u; k < s->nframes && len > 0 &&
		    (size_t)len < sizeof(line); k++) {
			len += snprintf(line + len, sizeof(line) - (size_t)len,
			    " %s", mp_fn_name(s->frames[k]));
		}
		printf("%s\n", line);
		fflush(stdout);
		depth = s->nframes - u;
		bool ok = depth >= NWANT + 1;
		for (size_t k = 0; ok && k < NWANT; k++)
			ok = strcmp(mp_fn_name(s->frames[u + k]), want[k]) == 0;
		bool found_last = last == NULL;
		for (size_t k = u + NWANT; ok && last != NULL &&
		    k < s->nframes; k++)
			found_last |= strcmp(mp_fn_name(s->frames[k]), last) == 0;
		if (strict)
			MP_CHECK(ok && found_last, "%s: the chain is not "
			    "complete (printed above)", tag);
	}
	mp_heap_free(&h);
	return depth;
}

/* The thread's function (static: dladdr does not name it). */
static void *thread_main(void *arg) {
	void *p = cfi_lvl1(5000);
	*(void **)arg = p;
	return NULL;
}

/* One mode: the chain from main's frame, then from a thread. */
static void run_mode(const char *dir, const char *mode) {
	bool strict = strcmp(mode, "fp") != 0;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	MP_CHECK(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0) == 0 &&
	    strcmp(opt, mode) == 0, "opt.prof_unwind is not %s", mode);
	void *p = cfi_lvl1(4000);
	MP_CHECK(p != NULL, "malloc");
	char tag[64];
	snprintf(tag, sizeof(tag), "%s-main", mode);
	check_chain(dir, tag, "__libc_start_main", strict);
	free(p);
	/* In a thread, whose stack starts in libc. */
	mallctl("prof.reset", NULL, NULL, NULL, 0);
	pthread_t t;
	void *q = NULL;
	MP_CHECK(pthread_create(&t, NULL, thread_main, &q) == 0, "thread");
	pthread_join(t, NULL);
	snprintf(tag, sizeof(tag), "%s-thread", mode);
	check_chain(dir, tag, NULL, strict);
	free(q);
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	assert_int_equal(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0),
	    ENOENT);
}

static void test_cfi(void **state) {
	(void)state;
	run_mode(tmpdir, "cfi");
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* auto and fp in runs of their own (options are read at start-up). */
static void run_child(const char *mode) {
	char conf[128];
	snprintf(conf, sizeof(conf), "prof:true,lg_prof_sample:0,"
	    "prof_unwind:%s", mode);
	assert_int_equal(setenv(mp_env_conf_name(), conf, 1), 0);
	assert_int_equal(setenv("MP_PROF_CFI_DIR", tmpdir, 1), 0);
	mp_run_self("prof_cfi", mode);
}

static void test_auto(void **state) {
	(void)state;
	run_child("auto");
}

static void test_fp(void **state) {
	(void)state;
	run_child("fp");
}

int main(int argc, char **argv) {
	if (argc == 2) {
		/* A child of run_child: one mode, failures on stderr. */
		const char *dir = getenv("MP_PROF_CFI_DIR");
		if (dir == NULL)
			return 2;
		run_mode(dir, argv[1]);
		return atomic_load(&mp_failures) == 0 ? 0 : 1;
	}
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cfi),
		cmocka_unit_test(test_auto),
		cmocka_unit_test(test_fp),
	};
	return mp_prof_test_main("mp_prof_cfi", test_no_profiler, tests);
}
