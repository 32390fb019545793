/*
 * test/unit/prof_zig_lazy.c - the sampling wait's table (prof.c's
 * prof_zig, 6 KiB in a mapping of its own: two pages) is made when the
 * profiler first turns active, not at boot: a process started with
 * prof_active:false draws no wait until prof.active is written true.
 * After boot and allocations the table does not exist; the write makes it
 * before any thread can read prof.active true, and the thread's next
 * allocations are sampled (lg_prof_sample:0: every one).
 *
 * prof_zig_lazy.conf: prof:true,prof_active:false,lg_prof_sample:0.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

static void test_table_made_on_activation(void **state) {
	(void)state;
	/* A prefixed build's library boots at its first call, not with
	 * the process. */
	assert_false(malloc_init());
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	assert_false(opt_prof_active);
	for (size_t size = 8; size <= ((size_t)1 << 20); size *= 2)
		free(LAUNDER(malloc(size)));
	assert_null(prof_zig);
	bool on = true;
	assert_int_equal(mallctl("prof.active", NULL, NULL, &on, sizeof(on)),
	    0);
	assert_non_null(prof_zig);
	const prof_zig_t *made = prof_zig;
	/* The thread redraws at its next event (the generation changed,
	 * tsd.c: within TSD_EVENT_INTERVAL bytes); lg_prof_sample:0 samples
	 * the allocation after it. */
	bool sampled = false;
	for (int i = 0; i < 1000000 && !sampled; i++) {
		void *p = LAUNDER(malloc(64));
		prof_sample_info_t info;
		sampled = !prof_sample_info(p, &info);
		free(p);
	}
	assert_true(sampled);
	/* Off and on again: the same table. */
	on = false;
	assert_int_equal(mallctl("prof.active", NULL, NULL, &on, sizeof(on)),
	    0);
	on = true;
	assert_int_equal(mallctl("prof.active", NULL, NULL, &on, sizeof(on)),
	    0);
	assert_ptr_equal(prof_zig, made);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_made_on_activation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
