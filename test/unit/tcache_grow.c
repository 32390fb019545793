/*
 * test/unit/tcache_grow.c - cache bins that grow for batches and shrink
 * back (src/alloc/tcache.c, bin_move and bin_gc).
 *
 * A thread that allocates a batch of one class larger than its bin and
 * frees it again swings the bin from empty to full; the bin doubles after
 * two quick swings, until the batch fits and the regions stop going
 * through the slabs (no fills, no flushes).  A bin left alone shrinks
 * back to its base size at its GC visits, a flush puts it back at once,
 * and a random walk of allocations and frees does not grow it.  The
 * regions handed out stay distinct through the moves between the bin's
 * home slots and the grow area.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define BATCH 1000

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static unsigned cap_of(unsigned ind) {
	return tcache_bin_cap(tsd_fetch()->tcache, ind);
}

static uint64_t fills_and_flushes(unsigned ind) {
	arena_bin_stats_t *bs = &tsd_fetch()->tcache->arena->bstats[ind];
	return atomic_load(&bs->nfills) + atomic_load(&bs->nflushes);
}

/* One batch of n blocks of `size`, each filled with its number, checked
 * (two blocks handed out twice would overlap) and freed.  No other
 * allocation in between: its bytes would count between the swings. */
static void batch(size_t size, unsigned n) {
	static unsigned char *v[BATCH];
	for (unsigned i = 0; i < n; i++) {
		v[i] = LAUNDER(malloc(size));
		assert_non_null(v[i]);
		memset(v[i], (int)(i % 251), size);
	}
	for (unsigned i = 0; i < n; i++) {
		MP_ASSERT(v[i][0] == i % 251 && v[i][size - 1] == i % 251,
		    "block %u at %p overwritten", i, (void *)v[i]);
		free(v[i]);
	}
}

static void test_batch_grows_and_flush_resets(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(64);
	tcache_flush(tsd_fetch()->tcache);
	const unsigned base = cap_of(ind);
	assert_true(base >= CACHE_BIN_MIN && base < BATCH);
	for (int r = 0; r < 20; r++)
		batch(64, BATCH);
	unsigned grown = cap_of(ind);
	MP_ASSERT(grown >= BATCH, "bin of %u slots after 20 batches of %u "
	    "(base %u)", grown, BATCH, base);
	assert_true(grown <= CACHE_BIN_GROW_SLOTS);
	/* The batch fits: at most one GC step's flush and its refill. */
	uint64_t before = fills_and_flushes(ind);
	for (int r = 0; r < 5; r++)
		batch(64, BATCH);
	uint64_t moves = fills_and_flushes(ind) - before;
	MP_ASSERT(moves <= 4, "%" PRIu64 " fills and flushes in 5 batches "
	    "that fit the bin", moves);
	tcache_flush(tsd_fetch()->tcache);
	assert_int_equal(cap_of(ind), base);
	assert_int_equal(tcache_bin_count(tsd_fetch()->tcache, ind), 0);
	/* And it works at home again. */
	batch(64, BATCH);
}

/* Idle bins shrink at their GC visits: traffic in another class only. */
static void test_idle_bin_shrinks(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(128);
	tcache_flush(tsd_fetch()->tcache);
	const unsigned base = cap_of(ind);
	for (int r = 0; r < 20; r++)
		batch(128, BATCH);
	assert_true(cap_of(ind) > base);
	/* Enough for every bin's GC visit several times over. */
	size_t traffic = (size_t)SC_NBINS * opt_tcache_gc_incr_bytes * 16;
	for (size_t done = 0; done < traffic; done += 4096)
		free(LAUNDER(malloc(4096)));
	assert_int_equal(cap_of(ind), base);
	assert_true(tcache_bin_count(tsd_fetch()->tcache, ind) <= base);
	batch(128, BATCH);
}

/* A random walk of mallocs and frees of one class (a set of up to 600
 * blocks, each step adding or removing one) is no batch. */
static void test_random_walk_does_not_grow(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(48);
	tcache_flush(tsd_fetch()->tcache);
	const unsigned base = cap_of(ind);
	static void *set[600];
	unsigned n = 0;
	uint64_t x = 88172645463325252u;
	for (int step = 0; step < 400000; step++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		bool add = n == 0 || (n < 600 && (x & 1));
		if (add) {
			set[n] = LAUNDER(malloc(48));
			assert_non_null(set[n]);
			n++;
		} else {
			unsigned k = (unsigned)((x >> 8) % n);
			free(set[k]);
			set[k] = set[--n];
		}
	}
	while (n > 0)
		free(set[--n]);
	MP_ASSERT(cap_of(ind) == base, "bin of %u slots after a random walk "
	    "(base %u)", cap_of(ind), base);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_grows_and_flush_resets),
		cmocka_unit_test(test_idle_bin_shrinks),
		cmocka_unit_test(test_random_walk_does_not_grow),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
