/*
 * test/unit/util_math.c - the library's own exp, log1p, llround and round
 * (src/sys/util.c), which replace libm's so that the library links no
 * libm (its pages were part of every profiled process's resident set).
 *
 * Compared with glibc's (this test links libm): at every point the
 * profiler uses them, where the results must be the same integers as
 * before (unbiased counts of every class at every lg_prof_sample, the
 * sampling wait's scale), and at random points over their whole ranges,
 * where the error must stay within an ulp.
 */
#include "../test_util.h"

#include <float.h>
#include <math.h>

#include "malloc_prof/internal/internal.h"

/* The distance between two doubles in units in the last place: their
 * ordinals' difference (same sign, finite). */
static uint64_t ulps(double a, double b) {
	if (a == b)
		return 0;
	if ((a < 0) != (b < 0))
		return UINT64_MAX;
	union {
		double d;
		int64_t i;
	} x = {.d = a}, y = {.d = b};
	return x.i > y.i ? (uint64_t)(x.i - y.i) : (uint64_t)(y.i - x.i);
}

/* A deterministic xorshift: the points are the same at every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void) {
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Uniform in [lo, hi). */
static double uniform(double lo, double hi) {
	return lo + (hi - lo) * ((double)(rng() >> 11) * 0x1p-53);
}

/* Finite, either sign, magnitude 2^lo_e .. 2^hi_e (log-uniform). */
static double logscale(int lo_e, int hi_e) {
	double m = 1.0 + (double)(rng() >> 12) * 0x1p-52;
	int e = lo_e + (int)(rng() % (uint64_t)(hi_e - lo_e + 1));
	double v = ldexp(m, e);
	return rng() & 1 ? -v : v;
}

#define NPOINTS 2000000

static void test_exp_random(void **state) {
	(void)state;
	uint64_t worst = 0, diff = 0;
	double worst_x = 0;
	for (int i = 0; i < NPOINTS; i++) {
		/* Half over the whole finite range, half near 0 (1 - e^-x). */
		double x = i & 1 ? uniform(-745.0, 709.7) : logscale(-60, 0);
		double want = exp(x), got = util_exp(x);
		/* Subnormal results: an ulp there is a coarser step. */
		uint64_t u = want < DBL_MIN ? (fabs(want - got) <=
		    0x1p-1074 ? 0 : UINT64_MAX) : ulps(want, got);
		diff += u != 0;
		if (u > worst) {
			worst = u;
			worst_x = x;
		}
	}
	print_message("# util_exp: %d points, %" PRIu64 " differ from libm, "
	    "worst %" PRIu64 " ulp (x = %a)\n", NPOINTS, diff, worst, worst_x);
	MP_ASSERT(worst <= 1, "util_exp(%a) = %a, libm %a: %" PRIu64 " ulps",
	    worst_x, util_exp(worst_x), exp(worst_x), worst);
}

static void test_exp_special(void **state) {
	(void)state;
	assert_true(util_exp(0.0) == 1.0);
	assert_true(util_exp(-0.0) == 1.0);
	assert_true(util_exp(1.0) == exp(1.0));
	assert_true(util_exp(-1.0) == exp(-1.0));
	assert_true(isinf(util_exp(710.0)) && util_exp(710.0) > 0);
	assert_true(isinf(util_exp(INFINITY)));
	assert_true(util_exp(-INFINITY) == 0.0);
	assert_true(util_exp(-746.0) == 0.0);
	assert_true(isnan(util_exp(NAN)));
	assert_true(util_exp(709.78) == exp(709.78));
	assert_true(ulps(util_exp(-708.5), exp(-708.5)) <= 1);
	assert_true(util_exp(-745.0) == exp(-745.0));        /* least subnormal */
}

static void test_log1p_random(void **state) {
	(void)state;
	uint64_t worst = 0, diff = 0;
	double worst_x = 0;
	for (int i = 0; i < NPOINTS; i++) {
		double x;
		switch (i % 3) {
		case 0: x = uniform(-1.0, 0.0); break;
		case 1: x = -logscale(-70, 0) * (rng() & 1 ? 1 : -1); break;
		default: x = ldexp(1.0 + (double)(rng() >> 12) * 0x1p-52,
		    (int)(rng() % 1000)); break;
		}
		if (x <= -1.0)
			continue;
		double want = log1p(x), got = util_log1p(x);
		uint64_t u = ulps(want, got);
		diff += u != 0;
		if (u > worst) {
			worst = u;
			worst_x = x;
		}
	}
	print_message("# util_log1p: %d points, %" PRIu64 " differ from libm, "
	    "worst %" PRIu64 " ulp (x = %a)\n", NPOINTS, diff, worst, worst_x);
	MP_ASSERT(worst <= 1, "util_log1p(%a) = %a, libm %a: %" PRIu64 " ulps",
	    worst_x, util_log1p(worst_x), log1p(worst_x), worst);
}

static void test_log1p_special(void **state) {
	(void)state;
	assert_true(util_log1p(0.0) == 0.0);
	assert_true(util_log1p(-0.5) == log1p(-0.5));
	assert_true(util_log1p(1.0) == log1p(1.0));
	assert_true(isinf(util_log1p(-1.0)) && util_log1p(-1.0) < 0);
	assert_true(isnan(util_log1p(-2.0)));
	assert_true(isnan(util_log1p(NAN)));
	assert_true(isinf(util_log1p(INFINITY)));
	assert_true(util_log1p(DBL_MAX) == log1p(DBL_MAX));
	assert_true(util_log1p(0x1p-1074) == 0x1p-1074);
}

/* The sampling wait's scale (prof.c, wait_scale_fill): 1 / ln(1 - 2^-lg)
 * for every lg_prof_sample, the same doubles as with libm. */
static void test_wait_scale_same(void **state) {
	(void)state;
	unsigned before = mp_failures;
	for (unsigned lg = 1; lg < 64; lg++) {
		double x = -1.0 / (double)((uint64_t)1 << lg);
		double want = 1.0 / log1p(x), got = 1.0 / util_log1p(x);
		MP_CHECK(want == got, "lg %u: 1/log1p %a, libm %a", lg, got,
		    want);
	}
	assert_int_equal(mp_failures, before);
}

static void test_rounding(void **state) {
	(void)state;
	unsigned before = mp_failures;
	static const double pts[] = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5,
	    -2.5, 0.49999999999999994, -0.49999999999999994, 1.0, 3.7, -3.7,
	    4503599627370495.5, 4503599627370496.0, -4503599627370495.5,
	    9007199254740993.0, 1e18, -1e18, 9223372036854774784.0,
	    -9223372036854775808.0, 0x1p-1074, 123456.4999999, 123456.5};
	for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++) {
		double x = pts[i];
		MP_CHECK(util_llround(x) == llround(x), "llround(%a): %lld, "
		    "libm %lld", x, util_llround(x), llround(x));
		MP_CHECK(util_round(x) == round(x) && signbit(util_round(x)) ==
		    signbit(round(x)), "round(%a): %a, libm %a", x,
		    util_round(x), round(x));
	}
	for (int i = 0; i < NPOINTS; i++) {
		double x = logscale(-4, 70);
		if (fabs(x) < 0x1p63)
			MP_CHECK(util_llround(x) == llround(x), "llround(%a)",
			    x);
		MP_CHECK(util_round(x) == round(x), "round(%a)", x);
		/* Halves exactly. */
		double h = (double)(int64_t)(rng() >> 20) + 0.5;
		MP_CHECK(util_llround(h) == llround(h) && util_round(-h) ==
		    round(-h), "halves: %a", h);
		if (mp_failures > before + 10)
			break;
	}
	/* Out of range: LLONG_MIN, as glibc on x86-64 (callers never pass
	 * such values; prof_pprof.c caps them first). */
	assert_true(util_llround(0x1p63) == LLONG_MIN);
	assert_true(util_llround(NAN) == LLONG_MIN);
	assert_true(isnan(util_round(NAN)));
	assert_true(util_round(INFINITY) == INFINITY);
	assert_int_equal(mp_failures, before);
}

/* prof_unbias's formula (prof.c) with one exp and two llrounds. */
static void unbias(double (*e)(double), long long (*r)(double), size_t usize,
    double R, uint64_t *objs, uint64_t *bytes) {
	double p = 1.0 - e(-(double)usize / R);
	if (p <= 0.0) {
		*objs = 8;
		*bytes = usize;
		return;
	}
	*objs = (uint64_t)r(8.0 / p);
	*bytes = (uint64_t)r((double)usize / p);
}

static long long libm_llround(double x) {
	return llround(x);
}

/*
 * The unbiased counts of every size class (what prof_unbias is given: a
 * sampled usize is a class) at every lg_prof_sample: the same integers as
 * with libm, so dumps are what they were.  Beside each class, a size one
 * byte below and above: there, where libm's exp and ours may round a
 * near-tie differently (glibc's is within 0.51 ulp, not correctly
 * rounded), the counts may differ, by what one ulp of e^-x makes of them.
 */
static void test_unbias_same(void **state) {
	(void)state;
	unsigned before = mp_failures;
	unsigned checked = 0, near = 0, near_diff = 0;
	for (unsigned lg = 0; lg < 64; lg++) {
		double R = (double)((uint64_t)1 << lg);
		for (unsigned ind = 0; ind < SC_NSIZES; ind++) {
			size_t cls = sz_index2size(ind);
			for (int d = -1; d <= 1; d++) {
				size_t usize = cls + (size_t)d;
				if (usize == 0)
					continue;
				uint64_t wo, wb, go, gb;
				unbias(exp, libm_llround, usize, R, &wo, &wb);
				unbias(util_exp, util_llround, usize, R, &go,
				    &gb);
				double x = -(double)usize / R;
				MP_CHECK(ulps(exp(x), util_exp(x)) <= 1 ||
				    (exp(x) < DBL_MIN && util_exp(x) < DBL_MIN),
				    "exp(%a): %a, libm %a", x, util_exp(x),
				    exp(x));
				if (d != 0) {
					near++;
					near_diff += wo != go || wb != gb;
					continue;
				}
				checked++;
				MP_CHECK(wo == go && wb == gb, "lg %u usize %zu: "
				    "(%" PRIu64 ", %" PRIu64 "), libm (%" PRIu64
				    ", %" PRIu64 ")", lg, usize, go, gb, wo, wb);
				if (mp_failures > before + 10)
					goto out;
			}
		}
	}
out:
	print_message("# unbias: %u (lg, class) pairs all the same; %u of %u "
	    "(lg, class +- 1) differ\n", checked, near_diff, near);
	assert_int_equal(mp_failures, before);
}

/* The scaling of dumps and pprof (1 / (1 - e^-x) times a count, rounded)
 * over averages from 1 byte to 2^40 at rates 2^0 .. 2^40: e^-x within an
 * ulp of libm's, and the printed integers mostly the same (the points are
 * the same at every run; the count that differ is printed). */
static void test_scale_same(void **state) {
	(void)state;
	unsigned before = mp_failures, n = 0, npts = NPOINTS / 4;
	for (unsigned i = 0; i < npts; i++) {
		double R = (double)((uint64_t)1 << (rng() % 41));
		double avg = ldexp(1.0 + (double)(rng() >> 12) * 0x1p-52,
		    (int)(rng() % 41));
		double count = (double)(rng() % 100000 + 1);
		double we = exp(-avg / R), ge = util_exp(-avg / R);
		MP_CHECK(ulps(we, ge) <= 1, "exp(%a): %a, libm %a", -avg / R,
		    ge, we);
		double ws = 1.0 / (1.0 - we), gs = 1.0 / (1.0 - ge);
		n += llround(count * ws) != util_llround(count * gs) ||
		    round(count * avg * ws) != util_round(count * avg * gs);
		if (mp_failures > before + 10)
			break;
	}
	print_message("# scale: %u of %u printed pairs differ from libm's\n",
	    n, npts);
	MP_ASSERT(n < npts / 1000, "%u of %u printed pairs differ", n, npts);
	assert_int_equal(mp_failures, before);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exp_special),
		cmocka_unit_test(test_exp_random),
		cmocka_unit_test(test_log1p_special),
		cmocka_unit_test(test_log1p_random),
		cmocka_unit_test(test_wait_scale_same),
		cmocka_unit_test(test_rounding),
		cmocka_unit_test(test_unbias_same),
		cmocka_unit_test(test_scale_same),
	};
	return mp_run_tests(tests);
}
