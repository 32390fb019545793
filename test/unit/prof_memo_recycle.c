/*
 * test/unit/prof_memo_recycle.c - a thread's walk memo (prof_sys.c)
 * comes from base_malloc's recycled classes: a thread that samples maps
 * nothing of its own for it, a thread that exits gives it back for the
 * next, and a recycled memo starts empty (a stale slot answering a walk
 * would give a wrong stack).  When the memo was over BASE_SMALL_MAX, each
 * sampling thread mapped 8 KiB at its first sample and unmapped it at its
 * exit: bench's threadchurn spent a third of its profiling cost there.
 *
 * prof_memo_recycle.conf: prof:true,lg_prof_sample:0 (every allocation
 * is a sample).  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <pthread.h>

#define THREADS 16

typedef struct {
	size_t mapped_in_thread;   /* base_mapped_bytes after a sample */
	uint64_t hits_first;       /* walks the memo answered: the first */
	uint64_t hits_second;      /* and after the same walk again */
	unsigned nframes;          /* of the first walk */
	bool had_memo;
} thread_seen_t;

MP_SITE unsigned memo_leaf(void **vec, unsigned max);

/* A walk of its own (prof_cost.c's shape): the same start, the same words
 * in every thread that runs it from the same stack. */
MP_SITE unsigned memo_leaf(void **vec, unsigned max) {
	unsigned n = prof_backtrace(vec, max,
	    (uintptr_t)__builtin_frame_address(0));
	__asm__ __volatile__("" ::: "memory");
	return n;
}

static void *sampling_thread(void *arg) {
	thread_seen_t *seen = arg;
	tsd_t *tsd = tsd_fetch();
	/* A sample: the thread's memo is made on its first walk. */
	void *p = LAUNDER(malloc(96));
	prof_tdata_t *td = tsd != NULL ? tsd->prof_tdata : NULL;
	seen->had_memo = td != NULL && td->bt_memo != NULL;
	seen->mapped_in_thread = base_mapped_bytes();
	if (seen->had_memo) {
		void *vec[64];
		/* Two walks from one call site (a loop of a count the
		 * compiler cannot see): the same words. */
		volatile int walks = 2;
		uint64_t h0 = prof_bt_memo_hits(td->bt_memo);
		for (int i = 0; i < walks; i++) {
			unsigned n = memo_leaf(vec, 64);
			uint64_t h = prof_bt_memo_hits(td->bt_memo) - h0;
			if (i == 0) {
				seen->nframes = n;
				seen->hits_first = h;
			}
			seen->hits_second = h;
		}
	}
	free(p);
	return NULL;
}

static void run_thread(thread_seen_t *seen) {
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, sampling_thread, seen), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

static void test_memo_recycled(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	assert_false(malloc_init());
	/* One thread first: the profiler's bump chunk and tables exist
	 * after it, and its memo is on a free list. */
	thread_seen_t warm = {0};
	run_thread(&warm);
	assert_true(warm.had_memo);
	size_t before = base_mapped_bytes();
	for (int i = 0; i < THREADS; i++) {
		thread_seen_t seen = {0};
		run_thread(&seen);
		assert_true(seen.had_memo);
		/* No mapping of its own while the thread lives. */
		assert_int_equal(seen.mapped_in_thread, before);
		/* Recycled, yet empty: the first walk was not answered by a
		 * slot the previous thread left; the same walk again was. */
		MP_ASSERT(seen.nframes >= 2, "a walk of %u frames",
		    seen.nframes);
		MP_ASSERT(seen.hits_first == 0 && seen.hits_second == 1,
		    "thread %d: the memo answered %" PRIu64 " of the first "
		    "walk, %" PRIu64 " of both (%u frames)", i, seen.hits_first,
		    seen.hits_second, seen.nframes);
	}
	assert_int_equal(base_mapped_bytes(), before);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memo_recycled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
