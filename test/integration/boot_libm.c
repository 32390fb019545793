/*
 * test/integration/boot_libm.c - a process without the profiler calls
 * none of libm's functions (issue 15, peak RSS).  The profiler's tables
 * (unbiasing by class, the sampling wait's scale) took exp, llround and
 * log1p at every start, profiler on or off; the pages those calls
 * faulted in, and the ones fault-around mapped beside them, were about
 * 270 KiB of libm's file pages in every process's resident set (bench's
 * xthread: 2.6 MB of file pages against 2.3).  This program defines the
 * libm functions the library imports (exported, so the library's calls
 * reach them) and counts the calls: none after a start, allocations of
 * every kind and threads with the default options; some in a child run
 * with prof:true, which shows that the counting sees the library's calls.
 */
#include "../test_util.h"

#include <sys/wait.h>

static _Atomic unsigned libm_calls;

/* Exported whatever -fvisibility the build compiles with. */
#define LIBM_STANDIN __attribute__((visibility("default")))

/* Stand-ins good enough for a profiler's tables in the prof:true child
 * (which only allocates and exits): exp by (1 + x / 2^20)^(2^20). */
LIBM_STANDIN double exp(double x) {
	atomic_fetch_add(&libm_calls, 1);
	double y = 1.0 + x / 1048576.0;
	for (int i = 0; i < 20; i++)
		y *= y;
	return y;
}

LIBM_STANDIN double log1p(double x) {
	atomic_fetch_add(&libm_calls, 1);
	/* The series to x^4: the library calls it with -2^-lg. */
	return x - x * x / 2 + x * x * x / 3 - x * x * x * x / 4;
}

LIBM_STANDIN long long llround(double x) {
	atomic_fetch_add(&libm_calls, 1);
	return x >= 0 ? (long long)(x + 0.5) : -(long long)(-x + 0.5);
}

LIBM_STANDIN double round(double x) {
	atomic_fetch_add(&libm_calls, 1);
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

static void test_counted_with_prof(void **state) {
	(void)state;
	if (!MALLOC_PROF_CONFIG_PROF)
		MP_SKIP("built without the profiler");
	static char err[1 << 14];
	int status = mp_run_child_conf("count", "prof:true", err, sizeof(err),
	    NULL, 0, NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the prof:true child saw no libm call (status %#x): the count "
	    "does not see the library's calls", status);
}

int main(int argc, char **argv) {
	if (argc > 2 && strcmp(argv[1], "--child") == 0) {
		free(LAUNDER(malloc(64)));
		return atomic_load(&libm_calls) > 0 ? 0 : 1;
	}
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prof_off),
		cmocka_unit_test(test_counted_with_prof),
	};
	return mp_run_tests(tests);
}
