/*
 * test/unit/prof_zig_lazy.c - the sampling wait's table (prof.c's
 * prof_zig, 6 KiB in a mapping of its own: two pages) is made when the
 * profiler first turns active, not at boot: a process started with
 * prof_active:false draws no wait until prof.active is written true.
 * After boot and allocations the table does not exist; the write makes it
 * before any thread can read prof.active true, and the thread's next
 * allocations are sampled (lg_prof_sample:0: every one).  In a debug
 * build, a write that cannot map the table fails with EAGAIN and leaves
 * the profiler inactive.
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
	if (config_debug) {
		/* No memory for the table (the mapping fault injection of
		 * debug builds: its 6 KiB is a mapping of its own): the write
		 * fails with EAGAIN and the profiler stays inactive. */
		size_t fail = 1, none = 0;
		assert_int_equal(mallctl("debug.mmap_fail", NULL, NULL, &fail,
		    sizeof(fail)), 0);
		int r = mallctl("prof.active", NULL, NULL, &on, sizeof(on));
		assert_int_equal(mallctl("debug.mmap_fail", NULL, NULL, &none,
		    sizeof(none)), 0);
		assert_int_equal(r, EAGAIN);
		assert_null(prof_zig);
		bool active = true;
		size_t sz = sizeof(active);
		assert_int_equal(mallctl("prof.active", &active, &sz, NULL, 0),
		    0);
		assert_false(active);
	}
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
