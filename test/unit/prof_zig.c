/*
 * test/unit/prof_zig.c - the sampling wait's exponential draw (prof.c's
 * ziggurat, prof_exp_draw) against the exact distributions: Exp(1) for
 * the draw, and the geometric with p = 1/R for prof_sample_wait.  The
 * method's error must stay far below the sampling error, so the checks
 * are tight statistical ones on a fixed seed (deterministic: a run either
 * passes or fails every time): Kolmogorov-Smirnov, a chi-square over
 * 1,000 equiprobable bins, the tail past the ziggurat's last strip (its
 * own code path), the moments and the correlation of successive draws.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define NDRAWS 1000000
#define NBINS 1000
/* The ziggurat's tail starts here (prof.c, ZIG_R). */
#define TAIL_X 7.697117470131487

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static int teardown(void **state) {
	(void)state;
	if (config_prof)
		prof_reset(opt_lg_prof_sample);
	return 0;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* A macro: MP_SKIP returns from the test function. */
#define SKIP_UNLESS_PROF() do {						\
	if (!config_prof || !opt_prof)					\
		MP_SKIP("profiling not built in / not on");		\
} while (0)

/* Exp(1): KS distance, a chi-square of 1 - e^-x over equiprobable bins
 * (catches a strip's wedge accepted or rejected wrongly: each strip is
 * ~1/256 of the mass, several bins), the mean and variance. */
static void test_exp_distribution(void **state) {
	(void)state;
	SKIP_UNLESS_PROF();
	double *x = malloc(NDRAWS * sizeof(double));
	assert_non_null(x);
	uint64_t seed = 0x243f6a8885a308d3ULL;
	static unsigned bins[NBINS];
	memset(bins, 0, sizeof(bins));
	double sum = 0, sum2 = 0;
	for (int i = 0; i < NDRAWS; i++) {
		x[i] = prof_exp_draw(&seed);
		MP_ASSERT(x[i] >= 0 && isfinite(x[i]), "draw %d: %g", i, x[i]);
		sum += x[i];
		sum2 += x[i] * x[i];
		double u = -expm1(-x[i]);
		unsigned b = (unsigned)(u * NBINS);
		bins[b < NBINS ? b : NBINS - 1]++;
	}
	double mean = sum / NDRAWS, var = sum2 / NDRAWS - mean * mean;
	/* sd of the mean 1/sqrt(N) = 0.001; of the variance ~sqrt(8/N). */
	MP_ASSERT(fabs(mean - 1.0) < 0.005, "mean %.5f, want 1", mean);
	MP_ASSERT(fabs(var - 1.0) < 0.015, "variance %.5f, want 1", var);
	double expect = (double)NDRAWS / NBINS, chi2 = 0;
	for (unsigned b = 0; b < NBINS; b++)
		chi2 += (bins[b] - expect) * (bins[b] - expect) / expect;
	/* 999 degrees of freedom: mean 999, sd 44.7; 5 sd. */
	MP_ASSERT(chi2 < 999 + 5 * 44.7, "chi-square %.1f over %u bins",
	    chi2, NBINS);
	qsort(x, NDRAWS, sizeof(double), cmp_double);
	double d = 0;
	for (int i = 0; i < NDRAWS; i++) {
		double f = -expm1(-x[i]);
		double lo = f - (double)i / NDRAWS;
		double hi = (double)(i + 1) / NDRAWS - f;
		d = fmax(d, fmax(lo, hi));
	}
	/* sqrt(N) D < 1.95 at the 0.1% level. */
	MP_ASSERT(d * sqrt((double)NDRAWS) < 1.95, "KS distance %.6f (%.3f)",
	    d, d * sqrt((double)NDRAWS));
	free(x);
}

/* The tail past the last strip comes from its own branch: it must carry
 * e^-TAIL_X of the draws, and past TAIL_X the excess must be Exp(1) again
 * (memoryless), mean 1. */
static void test_exp_tail(void **state) {
	(void)state;
	SKIP_UNLESS_PROF();
	uint64_t seed = 7;
	const int n = 4 * NDRAWS;
	unsigned tail = 0;
	double excess = 0, max = 0;
	for (int i = 0; i < n; i++) {
		double x = prof_exp_draw(&seed);
		if (x > TAIL_X) {
			tail++;
			excess += x - TAIL_X;
		}
		max = fmax(max, x);
	}
	double want = n * exp(-TAIL_X);      /* ~1,816, sd ~43 */
	MP_ASSERT(fabs(tail - want) < 5 * sqrt(want), "%u draws past %.3f, "
	    "want %.0f", tail, TAIL_X, want);
	/* The excess's mean: sd 1/sqrt(tail) ~ 0.023. */
	MP_ASSERT(fabs(excess / tail - 1.0) < 0.12, "tail excess mean %.3f",
	    excess / tail);
	/* ln(4e6) = 15.2: the largest is near there, well past the table. */
	MP_ASSERT(max > 12.0 && max < 25.0, "largest draw %.2f", max);
}

/* Successive draws are independent (the strip and the point come from
 * one generator step each): lag-1 and lag-2 correlations. */
static void test_exp_independent(void **state) {
	(void)state;
	SKIP_UNLESS_PROF();
	uint64_t seed = 12345;
	double p2 = prof_exp_draw(&seed), p1 = prof_exp_draw(&seed);
	double s1 = 0, s2 = 0;
	for (int i = 0; i < NDRAWS; i++) {
		double x = prof_exp_draw(&seed);
		s1 += (x - 1) * (p1 - 1);
		s2 += (x - 1) * (p2 - 1);
		p2 = p1;
		p1 = x;
	}
	/* Var 1, so the correlation is the mean product: sd 1/sqrt(N). */
	double bound = 5.0 / sqrt((double)NDRAWS);
	MP_ASSERT(fabs(s1 / NDRAWS) < bound, "lag-1 correlation %.5f",
	    s1 / NDRAWS);
	MP_ASSERT(fabs(s2 / NDRAWS) < bound, "lag-2 correlation %.5f",
	    s2 / NDRAWS);
}

/* prof_sample_wait is the geometric of p = 1/R: a chi-square over its
 * first 64 values and the rest, at lg 4 (R = 16), where the rounding of
 * the scale and floor would show. */
static void test_wait_geometric(void **state) {
	(void)state;
	SKIP_UNLESS_PROF();
	tsd_t *tsd = tsd_fetch();
	prof_reset(4);
	uint64_t saved = tsd->prng;
	tsd->prng = 99;
	enum { K = 64 };
	static unsigned count[K + 1];
	memset(count, 0, sizeof(count));
	for (int i = 0; i < NDRAWS; i++) {
		uint64_t w = prof_sample_wait(tsd);
		MP_ASSERT(w >= 1, "wait %" PRIu64, w);
		count[w <= K ? w - 1 : K]++;
	}
	tsd->prng = saved;
	prof_reset(opt_lg_prof_sample);
	double p = 1.0 / 16, chi2 = 0;
	for (unsigned k = 0; k <= K; k++) {
		/* P(w = k + 1) = (1 - p)^k p; the last cell P(w > K). */
		double pk = k < K ? pow(1 - p, k) * p : pow(1 - p, K);
		double e = pk * NDRAWS;
		chi2 += (count[k] - e) * (count[k] - e) / e;
	}
	/* 64 degrees of freedom: mean 64, sd 11.3; 5 sd. */
	MP_ASSERT(chi2 < 64 + 5 * 11.3, "chi-square %.1f", chi2);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exp_distribution),
		cmocka_unit_test(test_exp_tail),
		cmocka_unit_test(test_exp_independent),
		cmocka_unit_test(test_wait_geometric),
	};
	return cmocka_run_group_tests(tests, setup, teardown) == 0 ? 0 : 1;
}
