/*
 * test/unit/tcache_top.c - in a process of CACHE_BIN_TRIM_THREADS
 * threads or more, a cache bin of a class above 256 B that other threads
 * do not free into goes back to half its base size at each GC visit,
 * however busy it was (src/alloc/tcache.c, bin_trim_top); a process with
 * fewer threads keeps its busy bins at their base size.
 *
 * "Busy" is two fills in a GC period with no overflow between them: more
 * than the idle trimming allows (CACHE_BIN_SHRINK_MOVES), and no swing
 * for bin_move to grow the bin by.  The GC is driven by hand
 * (tcache_gc_step, one bin per call: SC_NBINS calls are a period), with
 * the helper threads tcache_trim.c uses too (tcache_threads.h).
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define SIZE 1024

#include "tcache_threads.h"

/* Two fills of bin ind and no overflow: the bin is emptied into the
 * slabs, one block is allocated (a fill), checked and freed, twice. */
static void busy_period(unsigned ind) {
	for (unsigned k = 0; k < 2; k++) {
		tcache_bin_flush(main_tcache(), ind, 0);
		unsigned char *p = LAUNDER(malloc(SIZE));
		assert_non_null(p);
		memset(p, (int)k, SIZE);
		MP_ASSERT(p[SIZE - 1] == (unsigned char)k, "block %p", (void *)p);
		free(p);
	}
}

static void test_few_threads_keep_base(void **state) {
	(void)state;
	const unsigned ind = sz_size2index(SIZE);
	tcache_flush(main_tcache());
	const unsigned base = tcache_bin_cap(main_tcache(), ind);
	for (unsigned r = 0; r < 4; r++) {
		busy_period(ind);
		gc_pass();
	}
	MP_ASSERT(tcache_bin_cap(main_tcache(), ind) == base, "busy bin of %u "
	    "slots in a process of one thread (base %u)",
	    tcache_bin_cap(main_tcache(), ind), base);
}

static void test_many_threads_halve_busy_bins(void **state) {
	(void)state;
	helpers_start();
	const unsigned ind = sz_size2index(SIZE);
	tcache_flush(main_tcache());
	const unsigned base = tcache_bin_cap(main_tcache(), ind);
	assert_true(base >= 8);
	/* Busy from the start: the idle trimming never applies.  The GC's
	 * pass counts the threads (bins_trim_update) at its first step,
	 * before it visits the bin. */
	for (unsigned r = 0; r < 4; r++) {
		busy_period(ind);
		gc_pass();
		MP_ASSERT(tcache_bin_cap(main_tcache(), ind) == base / 2, "busy "
		    "bin of %u slots after period %u in a process of %u "
		    "threads (base %u)", tcache_bin_cap(main_tcache(), ind), r,
		    HELPERS + 1, base);
		MP_ASSERT(tcache_bin_count(main_tcache(), ind) <= base / 2,
		    "%u regions in a bin of %u slots",
		    tcache_bin_count(main_tcache(), ind), base / 2);
	}
	/* A flush puts it back at its base size. */
	tcache_flush(main_tcache());
	assert_int_equal(tcache_bin_cap(main_tcache(), ind), base);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_few_threads_keep_base),
		cmocka_unit_test(test_many_threads_halve_busy_bins),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
