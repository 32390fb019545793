/*
 * test/integration/prof_stats_req.c - prof_stats' req_sum is the sum of
 * the bytes asked for, as jemalloc's (prof.stats.{bins,lextents}.<i>.
 * {live,accum}), through every allocating entry point: malloc(100) adds
 * 100 per object to its 112-byte class, not 112; calloc adds n * size,
 * posix_memalign, aligned_alloc, mallocx and realloc their size; a
 * large request (40000 bytes in the 40960 class) its size.  Each free
 * takes back from live exactly what its allocation added, accum keeps it.
 *
 * prof_stats_req.conf: prof:true,lg_prof_sample:0,prof_stats:true, so
 * every allocation is a sample and the counts are exact.
 */
#include "../test_util.h"

#define K 50

typedef struct {
	uint64_t req_sum;
	uint64_t count;
} stats_pair_t;

typedef struct {
	stats_pair_t live, accum;
} stats_both_t;

/* The prof.stats group and index of usable size usize. */
static void class_of(size_t usize, const char **group, unsigned *idx) {
	static const char *const groups[2][2] = {{"bin", "bins"},
	    {"lextent", "lextents"}};
	for (int g = 0; g < 2; g++) {
		unsigned n;
		size_t len = sizeof(n);
		char name[64];
		snprintf(name, sizeof(name), "arenas.n%ss", groups[g][0]);
		assert_int_equal(mallctl(name, &n, &len, NULL, 0), 0);
		for (unsigned i = 0; i < n; i++) {
			size_t sz;
			len = sizeof(sz);
			snprintf(name, sizeof(name), "arenas.%s.%u.size",
			    groups[g][0], i);
			assert_int_equal(mallctl(name, &sz, &len, NULL, 0), 0);
			if (sz == usize) {
				*group = groups[g][1];
				*idx = i;
				return;
			}
		}
	}
	fail_msg("no class of %zu bytes", usize);
}

static stats_both_t read_class(size_t usize) {
	const char *group;
	unsigned i;
	class_of(usize, &group, &i);
	stats_both_t v;
	char name[64];
	size_t len = sizeof(v.live);
	snprintf(name, sizeof(name), "prof.stats.%s.%u.live", group, i);
	assert_int_equal(mallctl(name, &v.live, &len, NULL, 0), 0);
	len = sizeof(v.accum);
	snprintf(name, sizeof(name), "prof.stats.%s.%u.accum", group, i);
	assert_int_equal(mallctl(name, &v.accum, &len, NULL, 0), 0);
	return v;
}

typedef enum {
	VIA_MALLOC, VIA_CALLOC, VIA_MEMALIGN, VIA_ALIGNED, VIA_MALLOCX,
	VIA_REALLOC, VIA_COUNT
} via_t;

static const char *const via_names[VIA_COUNT] = {"malloc", "calloc",
    "posix_memalign", "aligned_alloc", "mallocx", "realloc"};

/* One object of req bytes (calloc: req / 4 elements of 4) through via. */
static void *alloc_via(via_t via, size_t req) {
	void *p = NULL;
	switch (via) {
	case VIA_MALLOC:
		p = malloc(opaque_size(req));
		break;
	case VIA_CALLOC:
		p = calloc(opaque_size(req / 4), 4);
		break;
	case VIA_MEMALIGN:
		if (posix_memalign(&p, 64, opaque_size(req)) != 0)
			p = NULL;
		break;
	case VIA_ALIGNED:
		p = aligned_alloc(64, opaque_size(req));
		break;
	case VIA_MALLOCX:
		p = mallocx(opaque_size(req), MALLOCX_ZERO);
		break;
	case VIA_REALLOC: {
		/* From another class, so that the object moves and the new
		 * one is a sample of req bytes. */
		void *q = malloc(opaque_size(8));
		assert_non_null(q);
		p = realloc(q, opaque_size(req));
		break;
	}
	default:
		break;
	}
	assert_non_null(p);
	return p;
}

/* K objects of req bytes through via, in the class of usize: req_sum
 * grows by K * req in live and accum; freed, live is back. */
static void check(via_t via, size_t req, size_t usize) {
	void *p[K];
	stats_both_t a = read_class(usize);
	for (int k = 0; k < K; k++) {
		p[k] = alloc_via(via, req);
		assert_int_equal(malloc_usable_size(p[k]), usize);
	}
	stats_both_t b = read_class(usize);
	MP_ASSERT(b.live.count - a.live.count == K, "%s(%zu): live count "
	    "+%" PRIu64 ", expected %d", via_names[via], req,
	    b.live.count - a.live.count, K);
	MP_ASSERT(b.live.req_sum - a.live.req_sum == (uint64_t)K * req,
	    "%s(%zu): live req_sum +%" PRIu64 ", expected %d * %zu (not "
	    "the usable %zu)", via_names[via], req,
	    b.live.req_sum - a.live.req_sum, K, req, usize);
	MP_ASSERT(b.accum.req_sum - a.accum.req_sum == (uint64_t)K * req,
	    "%s(%zu): accum req_sum +%" PRIu64, via_names[via], req,
	    b.accum.req_sum - a.accum.req_sum);
	for (int k = 0; k < K; k++)
		free(p[k]);
	stats_both_t c = read_class(usize);
	assert_int_equal(c.live.count, a.live.count);
	assert_int_equal(c.live.req_sum, a.live.req_sum);
	assert_int_equal(c.accum.req_sum, b.accum.req_sum);
	assert_int_equal(c.accum.count, b.accum.count);
}

static void test_small(void **state) {
	(void)state;
	check(VIA_MALLOC, 100, 112);
	check(VIA_CALLOC, 100, 112);
	check(VIA_MEMALIGN, 100, 128);
	check(VIA_ALIGNED, 100, 128);
	check(VIA_MALLOCX, 100, 112);
	check(VIA_REALLOC, 100, 112);
}

static void test_large(void **state) {
	(void)state;
	check(VIA_MALLOC, 40000, 40960);
	check(VIA_CALLOC, 40000, 40960);
	check(VIA_MALLOCX, 40000, 40960);
	check(VIA_REALLOC, 40000, 40960);
}

/* A request of the class's own size sums to the usable size, as before
 * (and as jemalloc). */
static void test_exact(void **state) {
	(void)state;
	check(VIA_MALLOC, 112, 112);
	check(VIA_MALLOC, 40960, 40960);
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
		cmocka_unit_test(test_small),
		cmocka_unit_test(test_large),
		cmocka_unit_test(test_exact),
	};
	return mp_run_tests(tests);
}
