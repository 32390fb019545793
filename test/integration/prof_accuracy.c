/*
 * test/integration/prof_accuracy.c - sampled profiles estimate what is
 * live, per call site, without bias.
 *
 * prof_accuracy.conf: prof:true,lg_prof_sample:14 (one sample per 16 KiB
 * on average).  Three call sites each keep 64 MiB live in objects of
 * mixed sizes, allocating about twice that and freeing a random half as
 * they go.  In the dump, each site's stack line, scaled the way jeprof
 * does (scale = 1 / (1 - exp(-(s/n)/R)) applied to n and s), must be
 * within 10% of the site's true live bytes (15% of its live objects),
 * and the sum over the sites within 5%.  64 MiB per site is about 4096 samples, a
 * standard error near 1.6% for the site of small objects: the bounds
 * are several standard errors wide, so the test is deterministic in
 * practice although the sampling is random.
 *
 * The mixed site is one malloc call with sizes from 32 B to 128 KiB: a
 * profiler that summed raw samples and scaled them by their average size
 * (pprof's bias) would be off by far more than 10% there.
 *
 * The last test checks the dump-time transform exactly: at lg 19, k
 * sampled 1 MiB objects print as jemalloc prints them (8 of them as
 * "8: 8460155").
 */
#include "../test_util.h"

#define SITE_LIVE ((size_t)64 << 20)

void *acc_small(size_t size);
void *acc_mixed(size_t size);
void *acc_large(size_t size);
void *acc_mib(size_t size);

#define USE(p) __asm__ volatile("" : : "r"(p) : "memory")

MP_SITE void *acc_small(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

MP_SITE void *acc_mixed(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

MP_SITE void *acc_large(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

MP_SITE void *acc_mib(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

typedef void *site_fn_t(size_t);

typedef struct {
	const char *name;
	site_fn_t *fn;
	size_t (*size)(mp_rng_t *);
	void **objs;
	size_t n, cap;
	uint64_t live_bytes;	/* usable sizes of objs[] */
} site_t;

/* 16 B .. 2 KiB, uniform. */
static size_t size_small(mp_rng_t *r) {
	return 16 + (size_t)mp_rng_below(r, 2033);
}

/* Half the bytes in 32-byte objects, half in 128 KiB ones. */
static size_t size_mixed(mp_rng_t *r) {
	/* 128 KiB / 32 B = 4096 small objects per big one. */
	return mp_rng_below(r, 4097) == 0 ? (size_t)128 << 10 : 32;
}

/* 16 KiB .. 1 MiB, uniform. */
static size_t size_large(mp_rng_t *r) {
	return (16 << 10) + (size_t)mp_rng_below(r, (1 << 20) - (16 << 10));
}

static site_t sites[] = {
	{"acc_small", acc_small, size_small, NULL, 0, 0, 0},
	{"acc_mixed", acc_mixed, size_mixed, NULL, 0, 0, 0},
	{"acc_large", acc_large, size_large, NULL, 0, 0, 0},
};

static char tmpdir[256];

/* Allocates at st until SITE_LIVE bytes are live, freeing a random live
 * object after every other allocation. */
static void fill(site_t *st, uint64_t seed) {
	mp_rng_t rng = {seed};
	while (st->live_bytes < SITE_LIVE) {
		if (st->n == st->cap) {
			st->cap = st->cap ? st->cap * 2 : 4096;
			st->objs = realloc(st->objs, st->cap * sizeof(void *));
			assert_non_null(st->objs);
		}
		void *p = st->fn(st->size(&rng));
		assert_non_null(p);
		st->objs[st->n++] = p;
		st->live_bytes += malloc_usable_size(p);
		if (mp_rng_below(&rng, 2) == 0) {
			size_t k = (size_t)mp_rng_below(&rng, st->n);
			st->live_bytes -= malloc_usable_size(st->objs[k]);
			free(st->objs[k]);
			st->objs[k] = st->objs[--st->n];
		}
	}
}

static void release(site_t *st) {
	for (size_t i = 0; i < st->n; i++) {
		free(st->objs[i]);
	}
	free(st->objs);
	st->objs = NULL;
	st->n = st->cap = 0;
	st->live_bytes = 0;
}

/* jeprof's estimate for the site: every stack whose frame 1 is in it,
 * each line scaled on its own. */
static void site_estimate(const mp_heap_t *h, site_fn_t *fn, double *objs,
    double *bytes, size_t *nstacks) {
	uintptr_t lo, hi;
	mp_fn_range((void *)fn, &lo, &hi);
	*objs = *bytes = 0;
	*nstacks = 0;
	for (size_t i = 0; i < h->nstacks; i++) {
		const mp_heap_stack_t *s = &h->stacks[i];
		size_t u = mp_heap_user_frame(s);
		if (s->nframes <= u || !mp_ra_in(s->frames[u], lo, hi)) {
			continue;
		}
		double n, b;
		mp_heap_unbias(s->total.co, s->total.cb, h->rate, &n, &b);
		*objs += n;
		*bytes += b;
		(*nstacks)++;
	}
}

static double rel_err(double est, double truth) {
	return fabs(est / truth - 1.0);
}

static void test_accuracy(void **state) {
	(void)state;
	size_t lg = 0;
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 14);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		fill(&sites[i], 1000 + i);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/accuracy.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 16384);
	mp_heap_check_sums(&h, false);

	double sum_est = 0, sum_true = 0;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		const site_t *st = &sites[i];
		double eo, eb;
		size_t ns;
		site_estimate(&h, st->fn, &eo, &eb, &ns);
		print_message("# %-10s live %zu objects, %" PRIu64 " bytes; "
		    "estimate %.0f objects, %.0f bytes (%+.2f%%, %+.2f%%), %zu "
		    "stack(s)\n", st->name, st->n, st->live_bytes, eo, eb,
		    100 * (eo / (double)st->n - 1),
		    100 * (eb / (double)st->live_bytes - 1), ns);
		MP_ASSERT(ns == 1, "%s: %zu stacks", st->name, ns);
		MP_ASSERT(rel_err(eb, (double)st->live_bytes) < 0.10, "%s: "
		    "bytes estimate %.0f, true %" PRIu64, st->name, eb,
		    st->live_bytes);
		/* Object counts vary more than bytes (a sampled 16-byte
		 * object stands for ~1000 objects): about 2.5% standard
		 * error for acc_small, so 15% is 6 of them. */
		MP_ASSERT(rel_err(eo, (double)st->n) < 0.15, "%s: objects "
		    "estimate %.0f, true %zu", st->name, eo, st->n);
		sum_est += eb;
		sum_true += (double)st->live_bytes;
	}
	MP_ASSERT(rel_err(sum_est, sum_true) < 0.05, "total: estimate %.0f, "
	    "true %.0f", sum_est, sum_true);
	/* The header's t* line is transformed from the aggregate so that
	 * jeprof's scaling of it gives the unbiased total of everything
	 * live: the sites, the sites' pointer arrays, and a little more
	 * (under 1 MiB) of the test's own. */
	double arrays = 0;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		arrays += (double)malloc_usable_size(sites[i].objs);
	}
	double hn, hb;
	mp_heap_unbias(h.total.co, h.total.cb, h.rate, &hn, &hb);
	print_message("# header t*: estimate %.0f bytes, sites %.0f + their "
	    "arrays %.0f\n", hb, sum_true, arrays);
	MP_ASSERT(rel_err(hb, sum_true + arrays + (512 << 10)) < 0.05,
	    "header estimate %.0f, sites and arrays hold %.0f", hb,
	    sum_true + arrays);
	mp_heap_free(&h);

	/* Everything freed: the sites are gone from the next dump. */
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		release(&sites[i]);
	}
	assert_int_equal(mp_prof_dump(path), 0);
	MP_HEAP_PARSE(path, &h);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		MP_ASSERT(mp_heap_find_site(&h, (void *)sites[i].fn, 1) == NULL,
		    "%s still in the dump", sites[i].name);
	}
	mp_heap_free(&h);
}

/* What jemalloc prints for k sampled objects of usize u at rate R:
 * count and bytes kept unbiased (count x8, rounded per sample), then
 * transformed so that jeprof's scaling gives them back. */
static void jemalloc_line(uint64_t k, double u, double r, uint64_t *n_out,
    uint64_t *s_out) {
	double p = 1.0 - exp(-u / r);
	uint64_t shifted = k * (uint64_t)llround(8.0 / p);
	uint64_t bytes = k * (uint64_t)llround(u / p);
	if (shifted == 0 || bytes == 0) {
		*n_out = *s_out = 0;
		return;
	}
	double c = (double)shifted / 8.0, s = (double)bytes;
	double q = 1.0 - exp(-(s / c) / r);
	*n_out = (uint64_t)llround(c * q);
	*s_out = (uint64_t)llround(s * q);
}

static void test_dump_transform(void **state) {
	(void)state;
	/* jemalloc's documented example. */
	uint64_t n, s;
	jemalloc_line(8, 1 << 20, 1 << 19, &n, &s);
	assert_int_equal(n, 8);
	assert_int_equal(s, 8460155);

	size_t lg = 19;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &lg, sizeof(lg)),
	    0);
	void *objs[64];
	for (int i = 0; i < 64; i++) {
		objs[i] = acc_mib(1 << 20);
		assert_non_null(objs[i]);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/transform.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 1 << 19);
	const mp_heap_stack_t *st = mp_heap_find_site(&h, (void *)acc_mib, 1);
	/* P(no sample among 64) = e^-128. */
	assert_non_null(st);
	uint64_t k;
	for (k = 1; k <= 64; k++) {
		jemalloc_line(k, 1 << 20, 1 << 19, &n, &s);
		if (n == st->total.co && s == st->total.cb) {
			break;
		}
	}
	MP_ASSERT(k <= 64, "\"%" PRIu64 ": %" PRIu64 "\" is not what k "
	    "sampled 1 MiB objects print as at R = 2^19", st->total.co,
	    st->total.cb);
	print_message("# %" PRIu64 " of 64 sampled: \"%" PRIu64 ": %" PRIu64
	    "\"\n", k, st->total.co, st->total.cb);
	mp_heap_free(&h);
	for (int i = 0; i < 64; i++) {
		free(objs[i]);
	}
	lg = 14;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &lg, sizeof(lg)),
	    0);
}

static void test_no_profiler(void **state) {
	(void)state;
	size_t lg;
	size_t sz = sizeof(lg);
	assert_int_equal(mallctl("prof.lg_sample", &lg, &sz, NULL, 0), ENOENT);
	assert_int_equal(mallctl("opt.lg_prof_sample", &lg, &sz, NULL, 0),
	    ENOENT);
}

int main(void) {
	mp_test_init(600);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accuracy),
		cmocka_unit_test(test_dump_transform),
	};
	return mp_prof_test_main("mp_prof_accuracy", test_no_profiler, tests);
}
