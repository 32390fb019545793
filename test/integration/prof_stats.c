/*
 * test/integration/prof_stats.c - prof_stats: jemalloc 5.3's per-class
 * counts of sampled objects (prof.stats.bins.<i>.{live,accum},
 * prof.stats.lextents.<i>.{live,accum}, each {req_sum, count}).
 *
 * prof_stats.conf: prof:true,lg_prof_sample:0,prof_stats:true, so every
 * allocation is a sample and the counts are exact: allocating K objects of
 * a small and of a large class adds K to both counts and K * usize to
 * both sums (requests of the class's own size: prof_stats_req checks
 * other sizes);
 * freeing them takes them off live only.  The same read through
 * mallctlnametomib/mallctlbymib.  Errors as jemalloc's: a write is
 * EPERM, a wrong size EINVAL, an index past the classes ENOENT
 * (prof_frag checks ENOENT without prof_stats).
 */
#include "../test_util.h"

#define K 100

typedef struct {
	uint64_t req_sum;
	uint64_t count;
} stats_pair_t;

/* The index of the small (bin) or large (lextent) class of usize. */
static unsigned class_index(const char *group, size_t usize) {
	unsigned n;
	size_t len = sizeof(n);
	char name[64];
	snprintf(name, sizeof(name), "arenas.n%s", strcmp(group, "bin") == 0
	    ? "bins" : "lextents");
	assert_int_equal(mallctl(name, &n, &len, NULL, 0), 0);
	for (unsigned i = 0; i < n; i++) {
		size_t sz;
		len = sizeof(sz);
		snprintf(name, sizeof(name), "arenas.%s.%u.size", group, i);
		assert_int_equal(mallctl(name, &sz, &len, NULL, 0), 0);
		if (sz == usize)
			return i;
	}
	fail_msg("no %s class of %zu bytes", group, usize);
	return 0;
}

static stats_pair_t read_pair(const char *group, unsigned i,
    const char *leaf) {
	char name[64];
	stats_pair_t v;
	size_t len = sizeof(v);
	snprintf(name, sizeof(name), "prof.stats.%s.%u.%s", group, i, leaf);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_ASSERT(r == 0, "%s: %d", name, r);
	return v;
}

static void check_class(const char *group, const char *sgroup,
    size_t usize) {
	unsigned i = class_index(sgroup, usize);
	void *p[K];
	stats_pair_t l0 = read_pair(group, i, "live");
	stats_pair_t a0 = read_pair(group, i, "accum");
	for (int k = 0; k < K; k++) {
		p[k] = malloc(opaque_size(usize));
		assert_non_null(p[k]);
	}
	stats_pair_t l1 = read_pair(group, i, "live");
	stats_pair_t a1 = read_pair(group, i, "accum");
	MP_ASSERT(l1.count - l0.count == K && a1.count - a0.count == K,
	    "%s.%u (%zu bytes): live +%" PRIu64 ", accum +%" PRIu64
	    " after %d mallocs", group, i, usize, l1.count - l0.count,
	    a1.count - a0.count, K);
	assert_int_equal(l1.req_sum - l0.req_sum, (uint64_t)K * usize);
	assert_int_equal(a1.req_sum - a0.req_sum, (uint64_t)K * usize);
	for (int k = 0; k < K; k++)
		free(p[k]);
	stats_pair_t l2 = read_pair(group, i, "live");
	stats_pair_t a2 = read_pair(group, i, "accum");
	assert_int_equal(l2.count, l0.count);
	assert_int_equal(l2.req_sum, l0.req_sum);
	assert_int_equal(a2.count, a1.count);
	assert_int_equal(a2.req_sum, a1.req_sum);
}

static void test_counts(void **state) {
	(void)state;
	check_class("bins", "bin", 10240);
	check_class("lextents", "lextent", 40960);
}

static void test_bymib(void **state) {
	(void)state;
	unsigned i = class_index("bin", 10240);
	size_t mib[8], miblen = 8;
	assert_int_equal(mallctlnametomib("prof.stats.bins.0.live", mib,
	    &miblen), 0);
	assert_int_equal(miblen, 5);
	mib[3] = i;
	stats_pair_t v, w;
	size_t len = sizeof(v);
	void *p = malloc(opaque_size(10240));
	assert_int_equal(mallctlbymib(mib, miblen, &v, &len, NULL, 0), 0);
	w = read_pair("bins", i, "live");
	assert_int_equal(v.count, w.count);
	assert_true(v.count >= 1);
	free(p);
}

static void test_errors(void **state) {
	(void)state;
	stats_pair_t v;
	size_t len = sizeof(v);
	unsigned nbins, nlext;
	size_t ulen = sizeof(nbins);
	assert_int_equal(mallctl("arenas.nbins", &nbins, &ulen, NULL, 0), 0);
	assert_int_equal(mallctl("arenas.nlextents", &nlext, &ulen, NULL, 0),
	    0);
	char name[64];
	snprintf(name, sizeof(name), "prof.stats.bins.%u.live", nbins);
	assert_int_equal(mallctl(name, &v, &len, NULL, 0), ENOENT);
	snprintf(name, sizeof(name), "prof.stats.lextents.%u.accum", nlext);
	assert_int_equal(mallctl(name, &v, &len, NULL, 0), ENOENT);
	snprintf(name, sizeof(name), "prof.stats.lextents.%u.accum",
	    nlext - 1);
	assert_int_equal(mallctl(name, &v, &len, NULL, 0), 0);
	assert_int_equal(mallctl("prof.stats.bins.0.nothing", &v, &len, NULL,
	    0), ENOENT);
	len = sizeof(uint64_t);
	assert_int_equal(mallctl("prof.stats.bins.0.live", &v, &len, NULL, 0),
	    EINVAL);
	len = sizeof(v);
	assert_int_equal(mallctl("prof.stats.bins.0.live", NULL, NULL, &v,
	    sizeof(v)), EPERM);
}

static void test_no_profiler(void **state) {
	(void)state;
	stats_pair_t v;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("prof.stats.bins.0.live", &v, &len, NULL, 0),
	    ENOENT);
}

int main(void) {
	mp_test_init(120);
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		return mp_run_tests(tests);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),
		cmocka_unit_test(test_bymib),
		cmocka_unit_test(test_errors),
	};
	return mp_run_tests(tests);
}
