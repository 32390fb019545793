/*
 * test/unit/conf_env.c - options from the environment reach the allocator.
 *
 * The harness exports test/unit/conf_env.conf under this build's conf
 * variable (MALLOC_CONF, or MP_MALLOC_CONF in a prefixed build); the values
 * must be in effect from initialisation on, visible through opt.* and the
 * opt_* variables.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

static void test_env_applied_at_init(void **state) {
	(void)state;
	const char *env = getenv(MP_CONF_ENV);
	if (env == NULL) {
		if (mp_under_harness())
			MP_FAIL("the harness did not export %s", MP_CONF_ENV);
		MP_SKIP("run by hand without %s", MP_CONF_ENV);
	}
	assert_string_equal(env, "narenas:3,dirty_decay_ms:500,junk:free,"
	    "zero_realloc:alloc,stats_print_opts:gl");

	unsigned narenas = 0;
	ssize_t dirty = 0, muzzy = -5;
	const char *junk = NULL, *zero_realloc = NULL, *spo = NULL;
	MALLCTL_READ("opt.narenas", narenas);
	MALLCTL_READ("opt.dirty_decay_ms", dirty);
	MALLCTL_READ("opt.muzzy_decay_ms", muzzy);
	MALLCTL_READ("opt.junk", junk);
	MALLCTL_READ("opt.zero_realloc", zero_realloc);
	MALLCTL_READ("opt.stats_print_opts", spo);
	assert_int_equal(narenas, 3);
	assert_int_equal(dirty, 500);
	assert_int_equal(muzzy, 0);             /* untouched: default */
	assert_string_equal(junk, "free");
	assert_string_equal(zero_realloc, "alloc");
	assert_string_equal(spo, "gl");

	/* The derived variables the core reads. */
	assert_false(opt_junk_alloc);
	assert_true(opt_junk_free);
	assert_int_equal(opt_zero_realloc, ZERO_REALLOC_ALLOC);
	assert_int_equal(opt_narenas, 3);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_applied_at_init),
	};
	return mp_run_tests(tests);
}
