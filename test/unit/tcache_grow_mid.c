/*
 * test/unit/tcache_grow_mid.c - cache bins of the classes above
 * CACHE_BIN_GROW_USIZE that grow when busy with cross-thread traffic
 * (src/alloc/tcache.c, bin_gc).
 *
 * The main thread swings a bin of 8 KiB blocks (8 slots at its base
 * size) through 12 blocks a round, with traffic in another class between
 * the swings, as one class among many sees it.  When another thread also
 * frees blocks of that class into the main thread's slabs, the bin
 * doubles at its GC visits up to CACHE_BIN_GROW_MID_MUL times its base
 * size and the swings stop going through the slabs; without remote frees
 * it keeps its base size (growth there cost peak RSS for little).  A
 * flush puts it back at its base size.  Blocks stay distinct throughout.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define MID 8192
#define SWING 12
#define HANDOFF 16
#define OTHER 3000      /* another class: the traffic between swings */

#include "tcache_remote.h"

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

/* The calling thread's cache.  Out of line: in the ASan+UBSan build
 * (gcc 12 -O2), tsd_fetch inlined into a test function's assertion was
 * reported as a member access through a null tsd_t, though the thread's
 * tsd_t is a TLS object whose address cannot be null (a printf of it
 * made the report go away). */
static MP_NOINLINE tcache_t *main_tcache(void) {
	return tsd_fetch()->tcache;
}

static unsigned cap_of(unsigned ind) {
	return tcache_bin_cap(main_tcache(), ind);
}

static uint64_t fills_and_flushes(unsigned ind) {
	arena_bin_stats_t *bs = &main_tcache()->arena->bstats[ind];
	return atomic_load(&bs->nfills) + atomic_load(&bs->nflushes);
}

/* Regions taken from the class's slabs and given back to them. */
static uint64_t regions_moved(unsigned ind) {
	arena_bin_stats_t *bs = &main_tcache()->arena->bstats[ind];
	return atomic_load(&bs->nmalloc) + atomic_load(&bs->ndalloc);
}

static void test_no_growth_without_remote_frees(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(MID);
	tcache_flush(main_tcache());
	const unsigned base = cap_of(ind);
	assert_true(base < SWING);
	/* Every bin's GC visit many times over; a bin that grew would fit
	 * the swing, look idle at its next visit and halve back, so every
	 * round is looked at. */
	unsigned most = base;
	for (unsigned r = 0; r < 400; r++) {
		swing(r, OTHER);
		if (cap_of(ind) > most)
			most = cap_of(ind);
	}
	MP_ASSERT(most == base, "bin of %u slots in 400 swings of one "
	    "thread (base %u)", most, base);
}

static void test_grows_with_remote_frees(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(MID);
	tcache_flush(main_tcache());
	const unsigned base = cap_of(ind);
	/* Rounds of a handoff and a swing from the base size (one GC visit
	 * of the class may come in them) ... */
	uint64_t before = fills_and_flushes(ind);
	uint64_t rbefore = regions_moved(ind);
	for (unsigned r = 0; r < 10; r++) {
		handoff();
		swing(r, OTHER);
	}
	uint64_t moves_base = fills_and_flushes(ind) - before;
	uint64_t regions_base = regions_moved(ind) - rbefore;
	MP_ASSERT(moves_base >= 20, "%" PRIu64 " fills and flushes in 10 "
	    "rounds from a bin of %u slots", moves_base, base);
	unsigned most = base;
	for (unsigned r = 0; r < 400; r++) {
		handoff();
		swing(r, OTHER);
		unsigned cap = cap_of(ind);
		assert_true(cap <= base * CACHE_BIN_GROW_MID_MUL);
		assert_true((size_t)cap * MID <= CACHE_BIN_GROW_BYTES);
		if (cap > most)
			most = cap;
	}
	MP_ASSERT(most >= 2 * base, "bin of at most %u slots in 400 rounds "
	    "with remote frees (base %u)", most, base);
	/* ... and grown: the rounds move far fewer regions between the bin
	 * and the slabs (in more, smaller fills: bin_fill_count), besides
	 * the handoffs' own, HANDOFF taken and given back a round. */
	unsigned grown = cap_of(ind);
	rbefore = regions_moved(ind);
	for (unsigned r = 0; r < 10; r++) {
		handoff();
		swing(r, OTHER);
	}
	uint64_t regions = regions_moved(ind) - rbefore - 10 * 2 * HANDOFF;
	regions_base -= 10 * 2 * HANDOFF;
	MP_ASSERT(regions * 2 <= regions_base, "%" PRIu64 " regions moved "
	    "in 10 rounds through a bin of %u, %" PRIu64 " at its base size",
	    regions, grown, regions_base);
	tcache_flush(main_tcache());
	assert_int_equal(cap_of(ind), base);
	assert_int_equal(tcache_bin_count(main_tcache(), ind), 0);
	swing(0, OTHER);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_growth_without_remote_frees),
		cmocka_unit_test(test_grows_with_remote_frees),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
