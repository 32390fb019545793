/*
 * test/integration/boot_libm.c - the library calls none of libm's
 * functions, with the profiler off or on (issues 15 and 20, peak RSS).
 * The profiler's tables (unbiasing by class, the sampling wait's scale)
 * took exp, llround and log1p at every start, and its estimates at every
 * sample and dump: the pages those calls faulted in, and the ones
 * fault-around mapped beside them, were about 270 KiB of libm's file pages
 * in the process's resident set (bench's xthread: 2.6 MB of file pages
 * against 2.3).  The library now has its own (src/sys/util.c) and links
 * no libm (test/integration/no_libm.sh).  This program defines the libm
 * functions the library used to import (exported, so that calls of those
 * names anywhere in the process reach them) and counts the calls: none
 * after a start, allocations of every kind and threads with the default
 * options; none in a child run with prof:true, prof_active:true and
 * lg_prof_sample:0 that samples every allocation, frees some and dumps
 * heap_v2 and pprof profiles with the leak summary at exit.  The program's
 * own call through a pointer shows that the count sees such calls.
 */
#include "../test_util.h"

#include <sys/wait.h>

static _Atomic unsigned libm_calls;

/* Counts a call and says so on stderr (write(2): no allocation, and it
 * still works in exit handlers, where the leak summary runs). */
static void libm_note(const char *name) {
	atomic_fetch_add(&libm_calls, 1);
	char line[64];
	int n = snprintf(line, sizeof(line), "libm call: %s\n", name);
	if (write(2, line, (size_t)n) < 0)
		return;
}

/* Exported whatever -fvisibility the build compiles with. */
#define LIBM_STANDIN __attribute__((visibility("default")))

/* Stand-ins good enough for a profiler's tables, were the library to call
 * them: exp by (1 + x / 2^20)^(2^20). */
LIBM_STANDIN double exp(double x) {
	libm_note("exp");
	double y = 1.0 + x / 1048576.0;
	for (int i = 0; i < 20; i++)
		y *= y;
	return y;
}

LIBM_STANDIN double log1p(double x) {
	libm_note("log1p");
	/* The series to x^4: the library calls it with -2^-lg. */
	return x - x * x / 2 + x * x * x / 3 - x * x * x * x / 4;
}

LIBM_STANDIN long long llround(double x) {
	libm_note("llround");
	return x >= 0 ? (long long)(x + 0.5) : -(long long)(-x + 0.5);
}

LIBM_STANDIN double round(double x) {
	libm_note("round");
	return (double)(x >= 0 ? (long long)(x + 0.5) : -(long long)(-x + 0.5));
}

static void *churn(void *arg) {
	(void)arg;
	for (size_t size = 8; size <= ((size_t)1 << 22); size = size * 5 / 4 + 8) {
		unsigned char *p = LAUNDER(malloc(size));
		MP_CHECK(p != NULL, "malloc(%zu)", size);
		if (p == NULL)
			continue;
		p[0] = 1;
		p[size - 1] = 2;
		unsigned char *q = LAUNDER(realloc(p, size * 2));
		MP_CHECK(q != NULL && q[0] == 1, "realloc(%zu)", size * 2);
		free(q);
		free(LAUNDER(calloc(1, size)));
	}
	return NULL;
}

static bool prof_opt(void) {
	bool on = false;
	size_t sz = sizeof(on);
	if (mallctl("opt.prof", &on, &sz, NULL, 0) != 0)
		return false;
	return on;
}

static void test_prof_off(void **state) {
	(void)state;
	churn(NULL);
	if (prof_opt())
		MP_SKIP("opt.prof is on in this environment");
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(mp_failures, 0);
	MP_ASSERT(atomic_load(&libm_calls) == 0,
	    "%u calls of libm's functions without the profiler",
	    atomic_load(&libm_calls));
}

/* The profiler's child: every allocation sampled (the unbiasing of each
 * class, the wait's scale), a heap_v2 dump and a pprof one (their scaling
 * and rounding), and the leak summary at exit (prof_leak). */
static int prof_child(void) {
	void *keep[64];
	for (unsigned i = 0; i < 64; i++)
		keep[i] = LAUNDER(malloc((size_t)16 << (i % 20)));
	for (unsigned i = 0; i < 64; i += 2)
		free(keep[i]);
	char dir[64], path[128];
	if (!mp_tmpdir_make(dir, sizeof(dir), "mp-boot-libm"))
		return 2;
	snprintf(path, sizeof(path), "%s/heap_v2", dir);
	int r = mp_prof_dump(path);
	const char *pprof = "pprof";
	if (r == 0)
		r = mallctl("prof.format", NULL, NULL, (void *)&pprof,
		    sizeof(pprof));
	snprintf(path, sizeof(path), "%s/pprof", dir);
	if (r == 0)
		r = mp_prof_dump(path);
	snprintf(path, sizeof(path), "%s/heap_v2", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/pprof", dir);
	unlink(path);
	rmdir(dir);
	if (r != 0) {
		fprintf(stderr, "prof.dump or prof.format: %d\n", r);
		return 2;
	}
	unsigned n = atomic_load(&libm_calls);
	fprintf(stderr, "libm calls: %u\n", n);
	return n == 0 ? 0 : 1;
}

static void test_none_with_prof(void **state) {
	(void)state;
	if (!MALLOC_PROF_CONFIG_PROF)
		MP_SKIP("built without the profiler");
	static char err[1 << 14];
	int status = mp_run_child_conf("prof", "prof:true,prof_active:true,"
	    "lg_prof_sample:0,prof_leak:true", err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the prof:true child called libm's functions or failed "
	    "(status %#x)", status);
	/* At exit too (the leak summary, the final dumps). */
	MP_ASSERT(strstr(err, "libm call: ") == NULL, "the prof:true child "
	    "called libm's functions: %s", err);
	MP_ASSERT(strstr(err, "Leak approximation summary") != NULL,
	    "no leak summary at the child's exit: %s", err);
}

/* The stand-ins are what those names resolve to in this process. */
static void test_count_sees_calls(void **state) {
	(void)state;
	double (*volatile e)(double) = exp;
	unsigned before = atomic_load(&libm_calls);
	assert_true(e(0.0) == 1.0);
	assert_int_equal(atomic_load(&libm_calls), before + 1);
}

int main(int argc, char **argv) {
	if (argc > 2 && strcmp(argv[1], "--child") == 0)
		return prof_child();
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prof_off),
		cmocka_unit_test(test_none_with_prof),
		cmocka_unit_test(test_count_sees_calls),
	};
	return mp_run_tests(tests);
}
