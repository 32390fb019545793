/*
 * test/unit/tsd_exit_purge.c - when a thread of an automatic arena exits
 * after a long life (TSD_EXIT_PURGE_EVENTS thread events), the arena's
 * free pages are purged at once instead of decaying for dirty_decay_ms
 * (src/alloc/tsd.c, tsd_exit_purge), also when another thread is still
 * attached to the arena; a short-lived thread leaves them dirty for the
 * next thread that takes the arena.
 *
 * Each worker runs alone in its arena (the main thread stays in its own,
 * and a new thread takes the first arena no thread is attached to),
 * leaves dirty pages there (slabs emptied and released, a large block
 * freed) and exits; the main thread reads that arena's counters after the
 * join.  The default decay time (10 s) is far longer than the test.
 * narenas is given (the .conf): without it a process on one CPU shares
 * one arena between all its threads (arena_choose_auto).
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define SMALL 1024
#define BATCH 2048              /* 2 MiB of 1 KiB blocks at a time */
#define LARGE ((size_t)1 << 20)

struct worker {
	size_t rounds;          /* batches allocated and freed */
	unsigned arena;         /* the worker's arena, set by it */
	bool join_main;         /* move to the main thread's arena first */
	unsigned main_arena;
};

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static void *worker(void *arg) {
	struct worker *w = arg;
	if (w->join_main && mallctl("thread.arena", NULL, NULL,
	    &w->main_arena, sizeof(w->main_arena)) != 0)
		return NULL;
	void **v = malloc(BATCH * sizeof(*v));
	if (v == NULL)
		return NULL;
	w->arena = tsd_fetch()->arena->ind;
	for (size_t r = 0; r < w->rounds; r++) {
		for (unsigned i = 0; i < BATCH; i++) {
			v[i] = LAUNDER(malloc(SMALL));
			if (v[i] != NULL)
				memset(v[i], (int)(r + i), 64);
		}
		for (unsigned i = 0; i < BATCH; i++)
			free(v[i]);
	}
	free(v);
	void *big = LAUNDER(malloc(LARGE));
	if (big != NULL)
		memset(big, 1, LARGE);
	free(big);
	return NULL;
}

/* The dirty pages of the arena the worker ran in, after it exited. */
static size_t run_worker(size_t rounds, unsigned *arena) {
	struct worker w = {.rounds = rounds, .arena = UINT32_MAX};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, worker, &w), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(w.arena != UINT32_MAX);
	assert_true(w.arena != tsd_fetch()->arena->ind);
	arena_t *a = arena_get(w.arena, false);
	assert_non_null(a);
	assert_int_equal(atomic_load(&a->nthreads), 0);
	arena_stats_t s;
	arena_stats_read(a, &s);
	*arena = w.arena;
	return s.pdirty;
}

static void test_short_thread_leaves_dirty_pages(void **state) {
	(void)state;
	unsigned ind;
	/* 2 MiB of small blocks and a 1 MiB block: a few events. */
	size_t dirty = run_worker(1, &ind);
	MP_ASSERT(dirty >= (LARGE >> LG_PAGE), "%zu dirty pages in arena %u "
	    "after a short-lived thread freed a %zu B block", dirty, ind,
	    LARGE);
}

static void test_long_thread_purges_its_arena(void **state) {
	(void)state;
	unsigned ind;
	/* 32 MiB of small blocks: 128 events at the default 256 KiB. */
	size_t dirty = run_worker(16, &ind);
	MP_ASSERT(dirty == 0, "%zu dirty pages in arena %u after its only "
	    "thread exited from a long life", dirty, ind);
}

/* The worker shares the main thread's arena, which stays attached. */
static void test_long_thread_purges_shared_arena(void **state) {
	(void)state;
	arena_t *a = tsd_fetch()->arena;
	struct worker w = {.rounds = 16, .arena = UINT32_MAX,
	    .join_main = true, .main_arena = a->ind};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, worker, &w), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(w.arena, a->ind);
	assert_true(atomic_load(&a->nthreads) >= 1);
	arena_stats_t s;
	arena_stats_read(a, &s);
	MP_ASSERT(s.pdirty == 0, "%zu dirty pages in arena %u after a "
	    "long-lived thread that shared it exited", s.pdirty, a->ind);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_thread_leaves_dirty_pages),
		cmocka_unit_test(test_long_thread_purges_its_arena),
		cmocka_unit_test(test_long_thread_purges_shared_arena),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
