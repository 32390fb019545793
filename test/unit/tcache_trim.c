/*
 * test/unit/tcache_trim.c - cache bins trimmed below their base size by
 * the GC when a thread of a process with several threads uses their class
 * now and then, and grown back when it uses the class again
 * (src/alloc/tcache.c, bin_gc).
 *
 * Alone, the main thread's bins keep their base size (a single thread's
 * bins hold at most about a megabyte: not worth the fills).  With seven
 * more threads attached (they allocate once and wait), the trimming
 * starts.
 *
 * The GC is driven by hand (tcache_gc_step, one bin per call, so a pass
 * of SC_NBINS calls is one period for every bin), with nothing allocated
 * between the calls of a pass: no thread event of the test's own traffic
 * falls inside one.  A bin of 1 KiB blocks (32 slots at its base size)
 * that is left alone halves at each visit down to 4 KiB of slots, and then
 * holds no more than that when a batch is freed into it; swung through a
 * batch bigger than its slots several times a period, it is back at its
 * base size or above (bin_gc doubles it; bin_move's rule for batches may
 * grow it further).  Blocks stay distinct and intact throughout.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define SIZE 1024
#define BATCH 40        /* more than the bin's base slots */

#include "tcache_threads.h"

/* HELPERS + 1 threads attached to the arenas. */
static bool bins_attached(void) {
	uint32_t n = 0;
	for (unsigned i = 0; i < narenas_auto; i++) {
		arena_t *a = arena_get(i, false);
		if (a == NULL)
			break;
		n += atomic_load(&a->nthreads);
	}
	return n >= HELPERS + 1;
}

static unsigned cap_of(unsigned ind) {
	return tcache_bin_cap(main_tcache(), ind);
}

static unsigned count_of(unsigned ind) {
	return tcache_bin_count(main_tcache(), ind);
}

/* BATCH blocks of SIZE, each filled with its number and checked before
 * the free (a block handed out twice would be overwritten). */
static void batch(unsigned round) {
	unsigned char *v[BATCH];
	for (unsigned i = 0; i < BATCH; i++) {
		v[i] = LAUNDER(malloc(SIZE));
		assert_non_null(v[i]);
		memset(v[i], (int)((round + i) % 251), SIZE);
	}
	for (unsigned i = 0; i < BATCH; i++) {
		unsigned char want = (unsigned char)((round + i) % 251);
		MP_ASSERT(v[i][0] == want && v[i][SIZE - 1] == want,
		    "block %u of round %u at %p overwritten", i, round,
		    (void *)v[i]);
		free(v[i]);
	}
}

static void test_alone_bin_keeps_base(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(SIZE);
	tcache_flush(main_tcache());
	const unsigned base = cap_of(ind);
	batch(0);
	for (unsigned r = 0; r < 8; r++)
		gc_pass();
	MP_ASSERT(cap_of(ind) == base, "bin of %u slots after 8 idle periods "
	    "of the only thread (base %u)", cap_of(ind), base);
}

static void test_idle_bin_shrinks(void **state) {
	(void)state;
	helpers_start();
	assert_true(bins_attached());
	const unsigned ind = sz_size2index(SIZE);
	const unsigned floor = (4096 / SIZE) > 2 ? 4096 / SIZE : 2;
	tcache_flush(main_tcache());
	const unsigned base = cap_of(ind);
	assert_true(base > floor && base < BATCH);
	batch(0);
	unsigned held = count_of(ind);
	MP_ASSERT(held > floor, "%u regions in the bin after a batch (base "
	    "%u)", held, base);
	/* Halving from base to floor takes log2(base / floor) idle periods;
	 * a few more change nothing. */
	for (unsigned r = 0; r < 8; r++)
		gc_pass();
	MP_ASSERT(cap_of(ind) == floor, "bin of %u slots after 8 idle "
	    "periods (base %u, floor %u)", cap_of(ind), base, floor);
	assert_true(count_of(ind) <= floor);
	/* What the thread frees now stays in the bin up to the floor only;
	 * the rest goes back to the slabs. */
	batch(1);
	MP_ASSERT(count_of(ind) <= floor, "%u regions in a bin trimmed to %u "
	    "slots", count_of(ind), floor);
}

static void test_busy_bin_grows_back(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(SIZE);
	tcache_flush(main_tcache());
	const unsigned base = cap_of(ind);
	for (unsigned r = 0; r < 8; r++)
		gc_pass();
	assert_true(cap_of(ind) < base);
	/* Each batch runs the trimmed bin dry and over several times: well
	 * past CACHE_BIN_REGROW_MOVES fills and flushes a period. */
	for (unsigned r = 0; r < 8; r++) {
		for (unsigned k = 0; k < 4; k++)
			batch(r * 4 + k);
		gc_pass();
	}
	MP_ASSERT(cap_of(ind) >= base, "bin of %u slots after 8 busy periods "
	    "(base %u)", cap_of(ind), base);
	/* And a flush leaves it at its base size, empty. */
	tcache_flush(main_tcache());
	assert_int_equal(cap_of(ind), base);
	assert_int_equal(count_of(ind), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alone_bin_keeps_base),
		cmocka_unit_test(test_idle_bin_shrinks),
		cmocka_unit_test(test_busy_bin_grows_back),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
