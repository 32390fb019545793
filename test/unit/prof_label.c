/*
 * test/unit/prof_label.c - what a sample's record carries (prof.c): its
 * allocation time on prof_time_resolution's clock, its thread's uid and
 * the thread's label set, read back with prof_sample_info; and the label
 * sets' interning (one record per distinct set, at most
 * PROF_LABEL_SETS_MAX, then EAGAIN).
 *
 * prof_label.conf: prof:true,lg_prof_sample:0 (every allocation is a
 * sample).  Times are checked against clock_gettime read around the
 * allocation: CLOCK_MONOTONIC_COARSE before and CLOCK_MONOTONIC after
 * with the default resolution (the coarse clock is never ahead of the
 * fine one), CLOCK_MONOTONIC on both sides with `high`.  No check depends
 * on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static uint64_t clock_ns(clockid_t id) {
	struct timespec ts;
	assert_int_equal(clock_gettime(id, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sizes small (sample table) and large (extent->prof). */
static const size_t sizes[] = {8, 100, 3000, 40000, (size_t)1 << 20};

static void check_times(unsigned res) {
	opt_prof_time_resolution = res;
	clockid_t before = res == PROF_TIME_RES_HIGH ? CLOCK_MONOTONIC :
	    CLOCK_MONOTONIC_COARSE;
	tsd_t *tsd = tsd_fetch();
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			uint64_t t0 = clock_ns(before);
			void *p = malloc(opaque_size(sizes[i]));
			uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
			assert_non_null(p);
			prof_sample_info_t info;
			MP_ASSERT(!prof_sample_info(p, &info), "malloc(%zu) "
			    "is not a sample", sizes[i]);
			MP_ASSERT(t0 <= info.time_ns && info.time_ns <= t1,
			    "%s: malloc(%zu) sampled at %" PRIu64 ", outside "
			    "[%" PRIu64 ", %" PRIu64 "]",
			    prof_time_resolution_names[res], sizes[i],
			    info.time_ns, t0, t1);
			assert_int_equal(info.uid, tsd->prof_tdata->uid);
			assert_true(info.usize >= sizes[i]);
			free(p);
		}
	}
	opt_prof_time_resolution = PROF_TIME_RES_DEFAULT;
}

static void test_time_default(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	check_times(PROF_TIME_RES_DEFAULT);
}

static void test_time_high(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	check_times(PROF_TIME_RES_HIGH);
}

/* Not a sample: an address outside the heap, a freed object. */
static void test_not_a_sample(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	prof_sample_info_t info;
	int local;
	assert_true(prof_sample_info(&local, &info));
	void *p = malloc(opaque_size(5000));
	assert_false(prof_sample_info(p, &info));
	free(p);
	assert_true(prof_sample_info(p, &info));
}

static void test_labels_carried(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	tsd_t *tsd = tsd_fetch();
	char why[200];
	void *p[3];
	p[0] = malloc(opaque_size(64));
	assert_int_equal(prof_labels_apply(tsd, "tenant=a,req=put", why,
	    sizeof(why)), 0);
	p[1] = malloc(opaque_size(64));
	assert_int_equal(prof_labels_apply(tsd, NULL, why, sizeof(why)), 0);
	p[2] = malloc(opaque_size((size_t)1 << 20));
	const char *want[3] = {"", "req=put,tenant=a", ""};
	for (int i = 0; i < 3; i++) {
		prof_sample_info_t info;
		assert_false(prof_sample_info(p[i], &info));
		assert_string_equal(info.labels, want[i]);
		free(p[i]);
	}
}

/* One record per distinct set; past PROF_LABEL_SETS_MAX, EAGAIN and a
 * reason, while the sets made before still apply. */
static void test_interning_cap(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("built with --disable-prof");
	tsd_t *tsd = tsd_fetch();
	char why[200], spec[64];
	unsigned n0 = prof_labels_count();
	assert_int_equal(prof_labels_apply(tsd, "cap=first", why,
	    sizeof(why)), 0);
	const char *first = prof_labels_get(tsd);
	assert_int_equal(prof_labels_apply(tsd, "cap=second", why,
	    sizeof(why)), 0);
	assert_int_equal(prof_labels_apply(tsd, "cap=first", why,
	    sizeof(why)), 0);
	assert_ptr_equal(prof_labels_get(tsd), first);
	assert_int_equal(prof_labels_count(), n0 + 2);
	int err = 0;
	unsigned i;
	for (i = 0; i < 2 * PROF_LABEL_SETS_MAX && err == 0; i++) {
		snprintf(spec, sizeof(spec), "cap=%u", i);
		err = prof_labels_apply(tsd, spec, why, sizeof(why));
	}
	assert_int_equal(err, EAGAIN);
	MP_ASSERT(strstr(why, "distinct label sets") != NULL, "why: %s", why);
	assert_int_equal(prof_labels_count(), PROF_LABEL_SETS_MAX);
	/* The set before the failed call is kept; known sets still work. */
	snprintf(spec, sizeof(spec), "cap=%u", i - 2);
	assert_string_equal(prof_labels_get(tsd), spec);
	assert_int_equal(prof_labels_apply(tsd, "cap=first", why,
	    sizeof(why)), 0);
	assert_ptr_equal(prof_labels_get(tsd), first);
	assert_int_equal(prof_labels_apply(tsd, NULL, why, sizeof(why)), 0);
	assert_string_equal(prof_labels_get(tsd), "");
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_time_default),
		cmocka_unit_test(test_time_high),
		cmocka_unit_test(test_not_a_sample),
		cmocka_unit_test(test_labels_carried),
		cmocka_unit_test(test_interning_cap),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
