/*
 * test/integration/prof_unbias.c - prof_unbias:false: dumps carry the
 * sampled counts themselves, as jemalloc printed them before 5.3, and
 * jeprof scales each stack by its average size.
 *
 * prof_unbias.conf: prof:true,prof_unbias:false,lg_prof_sample:16.  One
 * call site allocates blocks of two sizes (64 KiB, sampled with
 * probability 1 - e^-1, and 64 B, about 1 in 1,000): its stack's line
 * must be k1 samples of 64 KiB plus k2 of 64 B, integers.  With the
 * unbiased estimates (prof_unbias:true) the line is c*p, s*p for the
 * stack's average size, which two sizes do not split into integers.
 */
#include "../test_util.h"

static char tmpdir[256];

#define BIG ((size_t)64 << 10)
#define SMALL ((size_t)64)
#define NBIG 200
#define NSMALL 200000

void *mixed_site(size_t size);

MP_SITE void *mixed_site(size_t size) {
	void *p = malloc(size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void test_option(void **state) {
	(void)state;
	bool b = true;
	size_t sz = sizeof(b);
	assert_int_equal(mallctl("opt.prof_unbias", &b, &sz, NULL, 0), 0);
	assert_false(b);
}

static void test_sampled_counts(void **state) {
	(void)state;
	size_t total = NSMALL + NBIG;
	size_t *sizes = malloc(total * sizeof(size_t));
	void **all = malloc(total * sizeof(void *));
	assert_non_null(sizes);
	assert_non_null(all);
	for (size_t i = 0; i < total; i++)
		sizes[i] = i % (total / NBIG) == 0 ? BIG : SMALL;
	/* One call of mixed_site for both sizes, with no branch around it
	 * that the compiler could split into two calls: one stack. */
	for (size_t i = 0; i < total; i++) {
		all[i] = mixed_site(sizes[i]);
		assert_non_null(all[i]);
	}
	char path[600];
	snprintf(path, sizeof(path), "%s/unbias.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)mixed_site,
	    1);
	MP_ASSERT(s != NULL, "no stack of mixed_site in %s", path);
	uint64_t n = s->total.co, b = s->total.cb;
	MP_ASSERT(b >= SMALL * n, "%" PRIu64 ": %" PRIu64, n, b);
	uint64_t k1 = (b - SMALL * n) / (BIG - SMALL);
	MP_ASSERT((b - SMALL * n) % (BIG - SMALL) == 0 && k1 <= n,
	    "mixed_site %" PRIu64 ": %" PRIu64 " is not k samples of 64 KiB "
	    "and the rest of 64 B", n, b);
	/* Both sizes were sampled (about 126 and 195 samples expected). */
	MP_ASSERT(k1 > 0 && n - k1 > 0, "64 KiB samples %" PRIu64 ", 64 B "
	    "samples %" PRIu64, k1, n - k1);
	mp_heap_free(&h);
	for (size_t i = 0; i < total; i++)
		free(all[i]);
	free(all);
	free(sizes);
}

static void test_no_profiler(void **state) {
	(void)state;
	bool b;
	size_t sz = sizeof(b);
	assert_int_equal(mallctl("opt.prof_unbias", &b, &sz, NULL, 0), ENOENT);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_option),
		cmocka_unit_test(test_sampled_counts),
	};
	return mp_prof_test_main("mp_prof_unbias", test_no_profiler, tests);
}
