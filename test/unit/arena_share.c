/*
 * test/unit/arena_share.c - how many automatic arenas threads are spread
 * over (src/alloc/arena.c, arena_choose_auto).  A new thread takes an
 * arena no thread is attached to, else a new one; without narenas in the
 * options it makes no new one once there is one per CPU (the CPUs of the
 * affinity mask) and shares the least-loaded instead, so that threads
 * that come and go pool their dirty pages.  With narenas given (built as
 * arena_share_given, whose .conf sets narenas:6) every one of the narenas
 * arenas is made, as in jemalloc.
 *
 * More threads than arenas are held alive at once (a barrier), each
 * notes its arena; then the same number of short-lived threads, one
 * round after another, must reuse the first round's arenas and pages.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#ifdef ARENA_SHARE_GIVEN
#define NARENAS_GIVEN 6
#endif

#define EXTRA 3                 /* threads beyond the arenas expected */
#define BLOCKS 512
#define BLOCK_SIZE 256          /* 128 KiB a thread */

static pthread_barrier_t barrier;

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

/* The arenas new threads are spread over before they share. */
static unsigned expected_arenas(void) {
#ifdef NARENAS_GIVEN
	return NARENAS_GIVEN;
#else
	unsigned n = os_ncpus();
	return n < narenas_auto ? n : narenas_auto;
#endif
}

static void *worker(void *arg) {
	unsigned *arena = arg;
	void *v[BLOCKS];
	for (unsigned i = 0; i < BLOCKS; i++) {
		v[i] = LAUNDER(malloc(BLOCK_SIZE));
		if (v[i] != NULL)
			memset(v[i], (int)i, BLOCK_SIZE);
	}
	unsigned ind;
	size_t sz = sizeof(ind);
	assert_int_equal(mallctl("thread.arena", &ind, &sz, NULL, 0), 0);
	*arena = ind;
	pthread_barrier_wait(&barrier);
	for (unsigned i = 0; i < BLOCKS; i++)
		free(v[i]);
	return NULL;
}

/* n threads alive at once; their arenas in arena[]. */
static void round_of(unsigned n, unsigned *arena) {
	pthread_t *t = malloc(n * sizeof(*t));
	assert_non_null(t);
	assert_int_equal(pthread_barrier_init(&barrier, NULL, n), 0);
	for (unsigned i = 0; i < n; i++) {
		arena[i] = UINT32_MAX;
		assert_int_equal(pthread_create(&t[i], NULL, worker,
		    &arena[i]), 0);
	}
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&barrier);
	free(t);
}

/* Pages in slabs, large blocks and dirty extents of every automatic
 * arena. */
static size_t arenas_pages(void) {
	size_t n = 0;
	for (unsigned i = 0; i < narenas_auto; i++) {
		arena_t *a = arena_get(i, false);
		if (a == NULL)
			continue;
		arena_stats_t s;
		arena_stats_read(a, &s);
		n += s.pactive + s.pdirty;
	}
	return n;
}

static unsigned arenas_made(void) {
	unsigned n = 0;
	for (unsigned i = 0; i < narenas_auto; i++)
		n += arena_get(i, false) != NULL;
	return n;
}

static void test_threads_spread_then_share(void **state) {
	(void)state;
	unsigned want = expected_arenas();
	assert_true(want >= 1 && want <= narenas_auto);
	unsigned n = want + EXTRA;
	unsigned *arena = malloc(n * sizeof(*arena));
	assert_non_null(arena);
	round_of(n, arena);
	bool used[ARENAS_MAX] = {false};
	used[tsd_fetch()->arena->ind] = true;   /* the main thread's */
	for (unsigned i = 0; i < n; i++) {
		MP_ASSERT(arena[i] < narenas_auto, "thread %u on arena %u, "
		    "not an automatic one (%u)", i, arena[i], narenas_auto);
		used[arena[i]] = true;
	}
	unsigned nused = 0;
	for (unsigned i = 0; i < narenas_auto; i++)
		nused += used[i];
	MP_ASSERT(nused == want, "%u threads and the main thread on %u "
	    "arenas, expected %u (%u CPUs, narenas %u)", n, nused, want,
	    os_ncpus(), narenas_auto);
	MP_ASSERT(arenas_made() == want, "%u automatic arenas made, "
	    "expected %u", arenas_made(), want);

	/* Rounds of the same threads again: the arenas and their dirty
	 * pages are there already.  A round holds n * 128 KiB; interleaved
	 * fills may take a few more slabs, not a round's worth. */
	size_t before = arenas_pages();
	for (unsigned r = 0; r < 4; r++)
		round_of(n, arena);
	size_t grown = arenas_pages() - before;
	size_t round = (size_t)n * BLOCKS * BLOCK_SIZE >> LG_PAGE;
	MP_ASSERT(arenas_made() == want, "%u automatic arenas made after "
	    "more rounds, expected %u", arenas_made(), want);
	MP_ASSERT(grown <= round / 2, "the arenas grew by %zu pages in four "
	    "more rounds of %u threads (a round holds %zu)", grown, n,
	    round);
	free(arena);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_spread_then_share),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
