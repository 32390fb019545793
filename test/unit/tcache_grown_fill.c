/*
 * test/unit/tcache_grown_fill.c - a cache bin of a class above
 * CACHE_BIN_GROW_USIZE that has grown past its base size (with remote
 * frees, as in tcache_grow_mid.c) is filled with an eighth of its slots,
 * not half (src/alloc/tcache.c, bin_fill_count); at its base size it is
 * filled with half, as every other bin.
 *
 * The bin is grown by rounds of a handoff (another thread frees blocks
 * of the class into the main thread's slabs) and a swing through more
 * blocks than its base slots, then emptied into the slabs; one malloc
 * fills it and takes one region, and the rest stay in the bin.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define MID 8192
#define SWING 12
#define HANDOFF 16

#include "tcache_remote.h"

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static MP_NOINLINE tcache_t *main_tcache(void) {
	return tsd_fetch()->tcache;
}

/* Empty bin ind into the slabs, then one malloc: the regions the fill
 * left in the bin. */
static unsigned fill_once(unsigned ind) {
	tcache_bin_flush(main_tcache(), ind, 0);
	void *p = LAUNDER(malloc(MID));
	assert_non_null(p);
	unsigned left = tcache_bin_count(main_tcache(), ind);
	free(p);
	return left;
}

static void test_base_bin_fills_half(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(MID);
	tcache_flush(main_tcache());
	unsigned cap = tcache_bin_cap(main_tcache(), ind);
	unsigned left = fill_once(ind);
	MP_ASSERT(left == cap / 2 - 1, "%u regions left by a fill of a bin "
	    "of %u slots at its base size", left, cap);
}

static void test_grown_bin_fills_an_eighth(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(MID);
	tcache_flush(main_tcache());
	const unsigned base = tcache_bin_cap(main_tcache(), ind);
	unsigned r = 0;
	while (tcache_bin_cap(main_tcache(), ind) < 4 * base && r < 2000) {
		handoff();
		swing(r++, 0);
	}
	unsigned cap = tcache_bin_cap(main_tcache(), ind);
	MP_ASSERT(cap >= 4 * base, "bin of %u slots after %u rounds with "
	    "remote frees (base %u)", cap, r, base);
	unsigned left = fill_once(ind);
	MP_ASSERT(left == cap / 8 - 1, "%u regions left by a fill of a bin "
	    "grown to %u slots (base %u)", left, cap, base);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base_bin_fills_half),
		cmocka_unit_test(test_grown_bin_fills_an_eighth),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
