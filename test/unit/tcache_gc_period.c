/*
 * test/unit/tcache_gc_period.c - how often the cache GC disturbs a bin in
 * steady use, and the fill that skips alloc_impl (src/alloc/malloc.c,
 * alloc_small_fill).
 *
 * The GC visits one class per thread event (every tcache_gc_incr_bytes
 * allocated), and a bin that neither ran dry nor overflowed since its
 * last visit gives back half of its regions, which its next allocations
 * take back from the slabs.  A bin in steady use therefore pays a flush
 * and a fill per visit: with the old 128 KiB period, bench's xthread
 * (blocks of 8 B-16 KB, a visit to each class every ~850 allocations)
 * spent a third of its allocator instructions there.  The period is
 * 256 KiB now: steady traffic in one class sees half as many moves, and a
 * bin left idle is still trimmed within a bounded amount of traffic
 * elsewhere.  The fill path must count thread.allocated exactly and hand
 * out distinct regions.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define ROUND 8
#define TRAFFIC ((size_t)64 << 20)

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static uint64_t fills_and_flushes(unsigned ind) {
	arena_bin_stats_t *bs = &tsd_fetch()->tcache->arena->bstats[ind];
	return atomic_load(&bs->nfills) + atomic_load(&bs->nflushes);
}

static uint64_t flushes(unsigned ind) {
	arena_bin_stats_t *bs = &tsd_fetch()->tcache->arena->bstats[ind];
	return atomic_load(&bs->nflushes);
}

/* ROUND blocks of `size` allocated, written, checked and freed. */
static void round_of(size_t size) {
	unsigned char *v[ROUND];
	for (unsigned i = 0; i < ROUND; i++) {
		v[i] = LAUNDER(malloc(size));
		assert_non_null(v[i]);
		v[i][0] = v[i][size - 1] = (unsigned char)i;
	}
	for (unsigned i = 0; i < ROUND; i++) {
		MP_ASSERT(v[i][0] == i && v[i][size - 1] == i,
		    "block %u at %p overwritten", i, (void *)v[i]);
		free(v[i]);
	}
}

static void test_default_period(void **state) {
	(void)state;
	size_t incr = 0;
	MALLCTL_READ("opt.tcache_gc_incr_bytes", incr);
	assert_int_equal(incr, (size_t)256 << 10);
}

/* A bin that holds its class's traffic (8 of 1 KiB at a time) is moved
 * only by the GC's visits: 64 MiB over 35 classes at 256 KiB a step is
 * about 7 visits (6 fills and flushes measured; 14 at 128 KiB). */
static void test_steady_bin_left_alone(void **state) {
	(void)state;
	const size_t size = 1024;
	const unsigned ind = sz_size2index(size);
	tcache_flush(tsd_fetch()->tcache);
	round_of(size);
	uint64_t before = fills_and_flushes(ind);
	for (size_t done = 0; done < TRAFFIC; done += ROUND * size)
		round_of(size);
	uint64_t moves = fills_and_flushes(ind) - before;
	MP_ASSERT(moves <= 9, "%" PRIu64 " fills and flushes of a bin in "
	    "steady use over %zu MiB", moves, TRAFFIC >> 20);
}

/* The GC still runs: a bin holding regions, left alone while the thread
 * allocates in another class, is flushed within two rounds of visits. */
static void test_idle_bin_still_trimmed(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(1024);
	tcache_flush(tsd_fetch()->tcache);
	round_of(1024);
	tcache_t *tc = tsd_fetch()->tcache;
	assert_true(tcache_bin_count(tc, ind) > 0);
	uint64_t before = flushes(ind);
	size_t traffic = (size_t)SC_NBINS * opt_tcache_gc_incr_bytes * 2;
	for (size_t done = 0; done < traffic; done += ROUND * 64)
		round_of(64);
	MP_ASSERT(flushes(ind) > before, "idle bin of %u regions never "
	    "flushed in %zu bytes of other traffic",
	    tcache_bin_count(tc, ind), traffic);
}

/* Bins run dry again and again (more blocks live than a bin holds):
 * every fill counts its block in thread.allocated, and no region is
 * handed out twice. */
static void test_fill_counts_and_distinct(void **state) {
	(void)state;
	enum { N = 3000 };
	static unsigned char *v[N];
	const size_t size = 4096;
	uint64_t a0 = 0, a1 = 0;
	tcache_flush(tsd_fetch()->tcache);
	MALLCTL_READ("thread.allocated", a0);
	for (unsigned i = 0; i < N; i++) {
		v[i] = LAUNDER(malloc(size));
		assert_non_null(v[i]);
		memset(v[i], (int)(i % 251), size);
	}
	MALLCTL_READ("thread.allocated", a1);
	assert_true(a1 - a0 == (uint64_t)N * size);
	for (unsigned i = 0; i < N; i++) {
		MP_ASSERT(v[i][0] == i % 251 && v[i][size - 1] == i % 251,
		    "block %u at %p overwritten", i, (void *)v[i]);
		free(v[i]);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_period),
		cmocka_unit_test(test_steady_bin_left_alone),
		cmocka_unit_test(test_idle_bin_still_trimmed),
		cmocka_unit_test(test_fill_counts_and_distinct),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
