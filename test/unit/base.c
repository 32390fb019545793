/*
 * test/unit/base.c - base_malloc/base_free, the profiler's metadata memory,
 * and the per-thread stash in front of its locked free lists:
 *   - a recycled block comes back zeroed, from the stash or the lists;
 *   - the stash takes freed blocks up to BASE_STASH_BYTES and no more, and
 *     hands the latest one back first;
 *   - at thread exit (base_stash_flush) the stash is emptied into the
 *     shared lists, where another thread finds the blocks;
 *   - blocks above BASE_STASH_CLASSES cache lines never enter it.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define STASH_BYTES 4096        /* BASE_STASH_BYTES in base.c */

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static bool all_zero(const void *p, size_t n) {
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++) {
		if (c[i] != 0)
			return false;
	}
	return true;
}

static void test_recycled_blocks_are_zeroed(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	void *p = base_malloc(100);            /* two cache lines */
	assert_non_null(p);
	memset(p, 0xa5, 128);
	base_free(p, 100);
	assert_int_equal(tsd->base_stash_bytes, 128);
	void *q = base_malloc(120);            /* same class: the stash */
	assert_ptr_equal(q, p);
	assert_int_equal(tsd->base_stash_bytes, 0);
	assert_true(all_zero(q, 128));
	/* Through the shared lists too. */
	memset(q, 0x5a, 128);
	base_free(q, 120);
	base_stash_flush(tsd);
	assert_int_equal(tsd->base_stash_bytes, 0);
	assert_null(tsd->base_stash[1]);
	void *r = base_malloc(128);
	assert_ptr_equal(r, q);
	assert_true(all_zero(r, 128));
	base_free(r, 128);
	base_stash_flush(tsd);
}

static void test_stash_is_bounded(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	enum { N = 2 * STASH_BYTES / 64 };
	void *b[N];
	for (int i = 0; i < N; i++) {
		b[i] = base_malloc(64);
		assert_non_null(b[i]);
	}
	for (int i = 0; i < N; i++)
		base_free(b[i], 64);
	assert_int_equal(tsd->base_stash_bytes, STASH_BYTES);
	unsigned n = 0;
	for (void *p = tsd->base_stash[0]; p != NULL; p = *(void **)p)
		n++;
	assert_int_equal(n, STASH_BYTES / 64);
	/* The last block the stash took (freed last among those it kept)
	 * comes back first. */
	assert_ptr_equal(base_malloc(64), b[STASH_BYTES / 64 - 1]);
	base_free(b[STASH_BYTES / 64 - 1], 64);
	base_stash_flush(tsd);
	assert_int_equal(tsd->base_stash_bytes, 0);
	assert_null(tsd->base_stash[0]);
}

static void test_big_blocks_skip_the_stash(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	size_t big = (BASE_STASH_CLASSES + 1) * 64;
	void *p = base_malloc(big);
	assert_non_null(p);
	base_free(p, big);
	assert_int_equal(tsd->base_stash_bytes, 0);
}

static void *take_one(void *arg) {
	(void)arg;
	tsd_fetch();
	return base_malloc(192);
}

/* What a thread's stash held is found by another thread once flushed. */
static void test_flushed_blocks_reach_other_threads(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	void *p = base_malloc(192);
	base_free(p, 192);
	assert_ptr_equal(tsd->base_stash[2], p);
	base_stash_flush(tsd);
	pthread_t t;
	void *got = NULL;
	assert_int_equal(pthread_create(&t, NULL, take_one, NULL), 0);
	assert_int_equal(pthread_join(t, &got), 0);
	assert_ptr_equal(got, p);
	base_free(got, 192);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recycled_blocks_are_zeroed),
		cmocka_unit_test(test_stash_is_bounded),
		cmocka_unit_test(test_big_blocks_skip_the_stash),
		cmocka_unit_test(test_flushed_blocks_reach_other_threads),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
