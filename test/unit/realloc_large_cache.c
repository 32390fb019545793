/*
 * test/unit/realloc_large_cache.c - a large block that realloc (or
 * rallocx) grows out of, moving the contents, goes back to the arena and
 * not to the thread's large cache (src/alloc/malloc.c, ralloc_impl); a
 * large block the program frees, or shrinks out of, is still cached.
 *
 * The buffer that grew will not need its old size again, and in the
 * arena the old extent merges with its free neighbours into room for the
 * next growth: in bench's realloc the cache kept up to its 2 MiB budget
 * of such blocks out of reach (doc/performance.md, "Peak RSS, round 4").
 *
 * The move is forced by an alignment the block does not have (rallocx
 * with MALLOCX_ALIGN), so that the test does not depend on whether the
 * pages after the block happen to be free; counted through the thread's
 * cache (tcache_t.large[]).
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define OLD_SIZE ((size_t)20 << 10)     /* a cached large class */
#define NEW_SIZE ((size_t)40 << 10)
#define ALIGN ((size_t)1 << 20)

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static MP_NOINLINE tcache_t *main_tcache(void) {
	return tsd_fetch()->tcache;
}

/* Blocks of OLD_SIZE's class the thread's cache holds. */
static uint32_t cached(void) {
	unsigned li = sz_size2index(OLD_SIZE) - SC_NBINS;
	return main_tcache()->large[li].n;
}

/* A block of OLD_SIZE that is not ALIGN-aligned, its bytes numbered. */
static unsigned char *old_block(void) {
	unsigned char *p = LAUNDER(malloc(OLD_SIZE));
	assert_non_null(p);
	if (((uintptr_t)p & (ALIGN - 1)) == 0) {
		/* Unlikely: take the next one, keep this one for later. */
		unsigned char *q = old_block();
		free(p);
		return q;
	}
	for (size_t i = 0; i < OLD_SIZE; i += 512)
		p[i] = (unsigned char)(i / 512);
	return p;
}

static void check_moved(const unsigned char *q) {
	assert_non_null(q);
	assert_int_equal((uintptr_t)q & (ALIGN - 1), 0);
	for (size_t i = 0; i < OLD_SIZE; i += 512)
		MP_ASSERT(q[i] == (unsigned char)(i / 512), "byte %zu of the "
		    "moved block is %u", i, q[i]);
}

static void test_grown_out_of_goes_to_arena(void **state) {
	(void)state;
	assert_non_null(main_tcache());
	tcache_flush(main_tcache());
	unsigned char *p = old_block();
	uint32_t before = cached();
	unsigned char *q = LAUNDER(rallocx(p, NEW_SIZE,
	    MALLOCX_ALIGN(ALIGN)));
	check_moved(q);
	MP_ASSERT(cached() == before, "%u blocks of %zu B cached after a "
	    "realloc grew out of one (%u before)", cached(), OLD_SIZE,
	    before);
	free(q);
}

static void test_freed_block_is_cached(void **state) {
	(void)state;
	tcache_flush(main_tcache());
	unsigned char *p = old_block();
	uint32_t before = cached();
	free(p);
	MP_ASSERT(cached() == before + 1, "%u blocks of %zu B cached after a "
	    "free (%u before)", cached(), OLD_SIZE, before);
	/* And shrinking out of a bigger class by a move caches the old
	 * block of that class too: only growth bypasses the cache. */
	tcache_flush(main_tcache());
	unsigned char *big = LAUNDER(malloc(NEW_SIZE));
	assert_non_null(big);
	if (((uintptr_t)big & (ALIGN - 1)) != 0) {
		unsigned li = sz_size2index(NEW_SIZE) - SC_NBINS;
		uint32_t had = main_tcache()->large[li].n;
		unsigned char *s = LAUNDER(rallocx(big, OLD_SIZE,
		    MALLOCX_ALIGN(ALIGN)));
		assert_non_null(s);
		MP_ASSERT(main_tcache()->large[li].n == had + 1, "%u blocks of "
		    "%zu B cached after a shrinking move (%u before)",
		    main_tcache()->large[li].n, NEW_SIZE, had);
		free(s);
	} else {
		free(big);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grown_out_of_goes_to_arena),
		cmocka_unit_test(test_freed_block_is_cached),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
