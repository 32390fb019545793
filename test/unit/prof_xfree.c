/*
 * test/unit/prof_xfree.c - samples one thread takes and another frees
 * (bench's xthread): the freeing thread's full spare lists of sample
 * records go to prof.c's depot and come back to the sampling thread, so
 * that after a warm-up no round takes a record from base_malloc
 * (prof_sample_records); before the depot each such sample was a
 * base_malloc in one thread and a base_free in the other.  Each record
 * reused that way still describes its object (prof_sample_info: size and
 * sampling thread).
 *
 * prof_xfree.conf: prof:true,lg_prof_sample:0 (every allocation is a
 * sample).  The threads take turns by atomics: no check depends on the
 * machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <sched.h>

#define K 24            /* blocks a round: three full spare lists */
#define ROUNDS 200
#define WARMUP 10
#define B_SIZE 448

static void *blocks[K];
static _Atomic unsigned handed;         /* rounds the sampler handed over */
static _Atomic unsigned freed;          /* rounds the freer finished */
static uint64_t sampler_uid;
static unsigned bad_info;               /* the freer's */

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static void *freer(void *arg) {
	(void)arg;
	for (unsigned r = 1; r <= ROUNDS; r++) {
		while (atomic_load(&handed) < r)
			sched_yield();
		for (unsigned i = 0; i < K; i++) {
			prof_sample_info_t info;
			if (prof_sample_info(blocks[i], &info) ||
			    info.usize != B_SIZE || info.uid != sampler_uid)
				bad_info++;
			free(blocks[i]);
		}
		atomic_store(&freed, r);
	}
	return NULL;
}

static void *sampler(void *arg) {
	uint64_t *made = arg;
	tsd_t *tsd = tsd_fetch();
	prof_tdata_t *td = tsd != NULL ? prof_tdata_get(tsd) : NULL;
	if (td == NULL)
		return NULL;
	sampler_uid = td->uid;
	for (unsigned r = 1; r <= ROUNDS; r++) {
		if (r == WARMUP + 1)
			made[0] = prof_sample_records();
		for (unsigned i = 0; i < K; i++)
			blocks[i] = LAUNDER(malloc(B_SIZE));
		atomic_store(&handed, r);
		while (atomic_load(&freed) < r)
			sched_yield();
	}
	made[1] = prof_sample_records();
	return NULL;
}

static void test_records_come_back(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	uint64_t made[2] = {0, 0};
	pthread_t f, s;
	/* The freer first: its own records come from its first frees. */
	assert_int_equal(pthread_create(&f, NULL, freer, NULL), 0);
	assert_int_equal(pthread_create(&s, NULL, sampler, made), 0);
	assert_int_equal(pthread_join(s, NULL), 0);
	assert_int_equal(pthread_join(f, NULL), 0);
	assert_int_equal(bad_info, 0);
	assert_true(made[1] >= made[0]);
	/* Without the depot: K a round, 4,560 in all.  With it, none once
	 * the lists circulate; a few for allocations of the library's own
	 * that sample too (the threads' set-up and exit). */
	assert_true(made[1] - made[0] < K);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_come_back),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
