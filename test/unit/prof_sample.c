/*
 * test/unit/prof_sample.c - the sampling maths of src/prof/prof.c:
 * prof_sample_wait (the bytes to the next sample: geometric with mean
 * 2^lg_prof_sample) and prof_unbias (what one sampled object stands for).
 *
 * The rate is set with prof_reset(lg), the function behind prof.reset.
 * The waits come from the calling thread's generator, so the checks are
 * statistical: 200k draws put the mean within 1% of R with a margin of
 * more than 4 standard deviations.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define NDRAWS 200000

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static int teardown(void **state) {
	(void)state;
	prof_reset(opt_lg_prof_sample);
	return 0;
}

typedef struct {
	double mean, sd;
	double frac_le_r;        /* draws <= R */
	uint64_t min;
} waits_t;

static waits_t draw(size_t lg) {
	prof_reset(lg);
	tsd_t *tsd = tsd_fetch();
	double r = (double)((uint64_t)1 << lg);
	double sum = 0, sum2 = 0;
	uint64_t le = 0, min = UINT64_MAX;
	for (int i = 0; i < NDRAWS; i++) {
		uint64_t w = prof_sample_wait(tsd);
		sum += (double)w;
		sum2 += (double)w * (double)w;
		le += (double)w <= r;
		if (w < min)
			min = w;
	}
	waits_t res;
	res.mean = sum / NDRAWS;
	res.sd = sqrt(sum2 / NDRAWS - res.mean * res.mean);
	res.frac_le_r = (double)le / NDRAWS;
	res.min = min;
	return res;
}

static void test_wait_mean(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	static const size_t lgs[] = {10, 14, 19};
	for (size_t i = 0; i < MP_ARRAY_SIZE(lgs); i++) {
		double r = (double)((uint64_t)1 << lgs[i]);
		waits_t w = draw(lgs[i]);
		MP_ASSERT(fabs(w.mean / r - 1.0) < 0.01, "lg %zu: mean %.1f, "
		    "want %.0f +- 1%%", lgs[i], w.mean, r);
		/* Geometric with p = 1/R: sd = sqrt(1 - p) / p ~ R. */
		MP_ASSERT(fabs(w.sd / r - 1.0) < 0.03, "lg %zu: sd %.1f, want "
		    "%.0f +- 3%%", lgs[i], w.sd, r);
		/* P(wait <= R) = 1 - (1 - 1/R)^R ~ 1 - 1/e. */
		double want = 1.0 - pow(1.0 - 1.0 / r, r);
		MP_ASSERT(fabs(w.frac_le_r - want) < 0.005, "lg %zu: P(wait <= "
		    "R) = %.4f, want %.4f", lgs[i], w.frac_le_r, want);
		assert_true(w.min >= 1);
	}
	assert_int_equal(atomic_load(&prof_lg_sample), 19);
}

static void test_wait_lg0(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	prof_reset(0);
	tsd_t *tsd = tsd_fetch();
	for (int i = 0; i < 1000; i++)
		assert_int_equal(prof_sample_wait(tsd), 1);
	/* prof_reset clamps to 63. */
	prof_reset(100);
	assert_int_equal(atomic_load(&prof_lg_sample), 63);
	uint64_t w = prof_sample_wait(tsd);
	assert_true(w >= 1);
}

/* The expected values, computed independently (expm1 rather than
 * 1 - exp): the library may round the other way at a .5 boundary. */
static void unbias_expect(size_t usize, size_t lg, double *objs_shifted,
    double *bytes) {
	double r = (double)((uint64_t)1 << lg);
	double p = -expm1(-(double)usize / r);
	*objs_shifted = 8.0 / p;
	*bytes = (double)usize / p;
}

static void test_unbias(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	static const size_t lgs[] = {0, 10, 14, 19};
	static const size_t sizes[] = {
		16, 48, 1024, 3072, 16384, 65536, 1 << 20, (size_t)64 << 20,
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(lgs); i++) {
		prof_reset(lgs[i]);
		for (size_t k = 0; k < MP_ARRAY_SIZE(sizes); k++) {
			uint64_t os, b;
			prof_unbias(sizes[k], &os, &b);
			double wos, wb;
			unbias_expect(sizes[k], lgs[i], &wos, &wb);
			MP_ASSERT(fabs((double)os - wos) <= 0.5 + 1e-6 &&
			    fabs((double)b - wb) <= 0.5 + 1e-6 * wb, "lg %zu "
			    "usize %zu: (%" PRIu64 ", %" PRIu64 "), want "
			    "(%.2f, %.2f)", lgs[i], sizes[k], os, b, wos, wb);
			/* One sample stands for at least itself. */
			assert_true(os >= 8);
			assert_true(b >= sizes[k]);
		}
	}
	/* A few exact values (lg 19, jemalloc's default). */
	prof_reset(19);
	uint64_t os, b;
	prof_unbias(1 << 20, &os, &b);
	assert_int_equal(os, 9);          /* 8 / (1 - e^-2) = 9.25 */
	assert_int_equal(b, 1212697);     /* 2^20 / (1 - e^-2) */
	prof_unbias(16, &os, &b);
	assert_int_equal(os, 262148);     /* 8 / (1 - e^(-16/2^19)) */
	assert_int_equal(b, 524296);
	/* Objects much bigger than R stand for themselves. */
	prof_unbias((size_t)64 << 20, &os, &b);
	assert_int_equal(os, 8);
	assert_int_equal(b, (size_t)64 << 20);
	/* At R = 1 every object is sampled and counts once. */
	prof_reset(0);
	prof_unbias(16, &os, &b);
	assert_int_equal(os, 8);
	assert_int_equal(b, 16);
}

/*
 * The point of the weights: over many objects, the weights of those
 * that get sampled add up to the bytes allocated.  Simulated with the
 * library's own waits over a stream of mixed sizes (each allocation is
 * sampled when it crosses the running threshold, as in malloc.c).
 */
static void test_unbiased_sum(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	prof_reset(14);
	tsd_t *tsd = tsd_fetch();
	mp_rng_t rng = {42};
	uint64_t allocated = 0, next = prof_sample_wait(tsd);
	double est_bytes = 0, est_objs = 0;
	uint64_t true_objs = 0;
	/* 24M objects, 32 GiB: ~45k samples of the tiny objects, which
	 * dominate the object count (0.5% standard error). */
	while (true_objs < 24000000) {
		/* Most objects tiny, some mid-sized, a few big. */
		uint64_t r = mp_rng_below(&rng, 1000);
		size_t size = r < 950 ? 32 : r < 995 ? 4096 : 256 << 10;
		allocated += size;
		true_objs++;
		if (allocated >= next) {
			uint64_t os, b;
			prof_unbias(size, &os, &b);
			est_bytes += (double)b;
			est_objs += (double)os / 8.0;
			next = allocated + prof_sample_wait(tsd);
		}
	}
	MP_ASSERT(fabs(est_bytes / (double)allocated - 1.0) < 0.02, "bytes: "
	    "estimate %.0f, true %" PRIu64, est_bytes, allocated);
	MP_ASSERT(fabs(est_objs / (double)true_objs - 1.0) < 0.03, "objects: "
	    "estimate %.0f, true %" PRIu64, est_objs, true_objs);
}

/* A small object that is sampled comes from a slab of the prof_cache of
 * its thread's arena (no thread owns it; arena 0's for a thread on a
 * manual arena), in its own size class; unsampled ones stay in the
 * thread's cache. */
static void test_samples_in_prof_cache(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	tsd_t *tsd = tsd_fetch();
	arena_t *home_arena = tsd->arena;
	tcache_t *prof_cache = &home_arena->prof_cache;
	prof_reset(0);
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	void *p[2][8];
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 8; i++) {
			size_t size = 40 + (size_t)i * 100;
			p[k][i] = LAUNDER(malloc(size));
			assert_non_null(p[k][i]);
			extent_t *e = pagemap_lookup(p[k][i]);
			MP_ASSERT(e != NULL && e->kind == EXTENT_SLAB &&
			    slab_owner(e) == prof_cache && e->usize ==
			    sz_s2u(size) && atomic_load(&e->nsampled) >= 1 &&
			    e->size == sz_prof_slab_size[sz_size2index(size)],
			    "sampled malloc(%zu) = %p not in a prof_cache slab "
			    "of its class", size, p[k][i]);
		}
	}
	/* Both objects of a class share a slab: freeing one takes exactly
	 * its record away. */
	for (int i = 0; i < 8; i++) {
		extent_t *e = pagemap_lookup(p[0][i]);
		assert_ptr_equal(pagemap_lookup(p[1][i]), e);
		uint32_t n = atomic_load(&e->nsampled);
		free(p[0][i]);
		assert_int_equal(atomic_load(&e->nsampled), n - 1);
		free(p[1][i]);
	}
	/* Emptied, the eight classes' slabs left the cache: it keeps no
	 * empty slab per class (a page or more each, for the next sample of
	 * the class), only PROF_CACHE_EMPTY_SLABS_MAX for any class. */
	mp_mutex_lite_lock(&home_arena->prof_cache_mtx);
	unsigned empty_listed = 0;
	for (unsigned ind = 0; ind < SC_NBINS; ind++) {
		for (extent_t *s = prof_cache->bins[ind].partial; s != NULL;
		    s = s->next)
			empty_listed += s->used == 0;
	}
	uint32_t nempty = prof_cache->nempty;
	mp_mutex_lite_unlock(&home_arena->prof_cache_mtx);
	MP_ASSERT(empty_listed == 0 && nempty <= PROF_CACHE_EMPTY_SLABS_MAX,
	    "the prof_cache holds %u empty current slabs and %u kept ones",
	    empty_listed, (unsigned)nempty);
	/* A thread of another arena samples into that arena's cache (with
	 * one cache for all threads, two threads sampling on two cores took
	 * its lock and lines from each other at every sample). */
	unsigned home = home_arena->ind;
	unsigned away = home == 0 ? 1 : 0;
	assert_false(tsd_arena_set(tsd, away));
	void *other = LAUNDER(malloc(300));
	assert_ptr_equal(slab_owner(pagemap_lookup(other)),
	    &arena_get(away, false)->prof_cache);
	free(other);
	/* One on a manual arena samples into arena 0's: a manual arena may
	 * be destroyed under its samples. */
	unsigned manual;
	size_t sz = sizeof(manual);
	assert_int_equal(mallctl("arenas.create", &manual, &sz, NULL, 0), 0);
	assert_false(tsd_arena_set(tsd, manual));
	other = LAUNDER(malloc(300));
	assert_ptr_equal(slab_owner(pagemap_lookup(other)),
	    &arena_get(0, false)->prof_cache);
	free(other);
	assert_false(tsd_arena_set(tsd, home));
	prof_reset(63);
	free(LAUNDER(malloc(64)));
	void *q = LAUNDER(malloc(200));
	assert_ptr_equal(slab_owner(pagemap_lookup(q)), tsd->tcache);
	free(q);
}

/* With every allocation sampled, 20,000 live samples spread over the
 * sample table's shards (each table doubles several times from its 8
 * buckets), and every free finds its record: a record lost in a rehash,
 * or made for an object outside the profiler's cache (whose free then
 * took the fast path), leaves a slab's nsampled too high.  The latter
 * happened at the first allocation after prof.reset: the wait was redrawn
 * after the object had come from the thread's cache bin.  Other sampled
 * objects may share the slabs: they are counted before and after. */
#define NGROW 20000
static void *grow_p[NGROW];
static extent_t *grow_slab[NGROW];

static int cmp_slab(const void *a, const void *b) {
	uintptr_t x = (uintptr_t)*(extent_t *const *)a;
	uintptr_t y = (uintptr_t)*(extent_t *const *)b;
	return x < y ? -1 : x > y;
}

/* Sum of nsampled over the distinct slabs in grow_slab[0..n). */
static size_t slabs_nsampled(size_t n) {
	size_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || grow_slab[i] != grow_slab[i - 1])
			sum += atomic_load(&grow_slab[i]->nsampled);
	}
	return sum;
}

static void test_sample_table_grows(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	prof_reset(0);
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	for (int i = 0; i < NGROW; i++) {
		grow_p[i] = LAUNDER(malloc(16 + (size_t)(i % 8) * 16));
		assert_non_null(grow_p[i]);
		grow_slab[i] = pagemap_lookup(grow_p[i]);
		MP_ASSERT(atomic_load(&grow_slab[i]->nsampled) > 0,
		    "allocation %d (%p) not sampled", i, grow_p[i]);
	}
	/* The slabs stay: each keeps at least one sampled object until the
	 * last free below, and other samples are counted apart. */
	qsort(grow_slab, NGROW, sizeof(grow_slab[0]), cmp_slab);
	size_t before = slabs_nsampled(NGROW);
	assert_true(before >= NGROW);
	/* Free all but one per slab's worth in another order than the
	 * inserts, then check the count fell by exactly as many. */
	for (int i = 0; i < NGROW; i += 2)
		free(grow_p[i]);
	for (int i = NGROW - 1; i > 2; i -= 2)
		free(grow_p[i]);
	size_t after = slabs_nsampled(NGROW);
	free(grow_p[1]);
	prof_reset(opt_lg_prof_sample);
	MP_ASSERT(after == before - (NGROW - 1), "nsampled over the slabs: "
	    "%zu before, %zu after %d frees", before, after, NGROW - 1);
}

/* Allocate and free enough to reach the next slow-path allocation (a
 * cache event at the latest), where a thread redraws its wait. */
static void pass_an_event(void) {
	for (int i = 0; i < 2 * (int)(TSD_EVENT_INTERVAL / 4096) + 2; i++)
		free(LAUNDER(malloc(4000)));
}

/* A thread that is not sampling draws no wait at all: an inactive
 * profiler sends no allocation to the slow path.  The switches take
 * effect at the thread's next slow-path allocation (prof.active) or at
 * once (thread.prof.active, its own thread). */
static void test_inactive_draws_no_wait(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	tsd_t *tsd = tsd_fetch();
	prof_reset(19);		/* a finite wait (at 63 it may be "never") */
	assert_int_equal(mp_prof_switch("prof.active", false, NULL), 0);
	pass_an_event();
	assert_true(tsd->prof_sample_at == UINT64_MAX);
	assert_true(tsd->next_event <= tsd->cache_event_at);
	assert_int_equal(mp_prof_switch("prof.active", true, NULL), 0);
	pass_an_event();
	assert_true(tsd->prof_sample_at != UINT64_MAX);
	assert_true(tsd->prof_sample_at > tsd->allocated);

	assert_int_equal(mp_prof_switch("thread.prof.active", false, NULL), 0);
	assert_true(tsd->prof_sample_at == UINT64_MAX);
	pass_an_event();
	assert_true(tsd->prof_sample_at == UINT64_MAX);
	assert_int_equal(mp_prof_switch("thread.prof.active", true, NULL), 0);
	assert_true(tsd->prof_sample_at != UINT64_MAX);
	assert_true(tsd->next_event <= tsd->prof_sample_at);
}

/* Samples do not add cache events: the cache-GC threshold advances by
 * TSD_EVENT_INTERVAL per event whatever the sampling rate. */
static void test_samples_leave_cache_events_alone(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	tsd_t *tsd = tsd_fetch();
	prof_reset(6);		/* a sample every 64 bytes on average */
	pass_an_event();
	uint64_t ev0 = tsd->event_count;
	uint64_t a0 = tsd->allocated;
	for (int i = 0; i < 1000; i++)
		free(LAUNDER(malloc(128)));
	uint64_t events = tsd->event_count - ev0;
	uint64_t bytes = tsd->allocated - a0;
	MP_ASSERT(events <= bytes / TSD_EVENT_INTERVAL + 1, "%" PRIu64
	    " cache events for %" PRIu64 " bytes", events, bytes);
	prof_reset(opt_lg_prof_sample);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_mean),
		cmocka_unit_test(test_wait_lg0),
		cmocka_unit_test(test_unbias),
		cmocka_unit_test(test_unbiased_sum),
		cmocka_unit_test(test_samples_in_prof_cache),
		cmocka_unit_test(test_sample_table_grows),
		cmocka_unit_test(test_inactive_draws_no_wait),
		cmocka_unit_test(test_samples_leave_cache_events_alone),
	};
	return cmocka_run_group_tests(tests, setup, teardown) == 0 ? 0 : 1;
}
