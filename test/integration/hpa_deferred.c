/*
 * test/integration/hpa_deferred.c - opt.hpa's deferred work (issue 18).
 * With background_thread:true (hpa_deferred.conf, with a 200 ms hugify
 * delay and purge interval), the pageslabs' hugifications and purges by
 * hpa_dirty_mult are the background thread's, as in jemalloc: once the
 * program has filled pageslabs and then freed most of it, it only sleeps
 * and reads statistics, and the thread hugifies the dense pageslabs and
 * later purges the dirty pages.  The waits poll with a generous bound
 * (MP_WAIT_S, a hang detector), never a timing assertion.  Turning the
 * thread off brings the inline path back: a forced purge still works.
 */
#include "hpa_stats.h"

#define OBJ 1024
#define NOBJ (6 * 1024)          /* 6 MiB of 1 KiB objects */

static void *objs[NOBJ];

static size_t bg_threads(void) {
	size_t n = 0;
	MALLCTL_READ("stats.background_thread.num_threads", n);
	return n;
}

static void test_thread_starts(void **state) {
	(void)state;
	bool on = false;
	MALLCTL_READ("opt.background_thread", on);
	assert_true(on);
	MALLCTL_READ("opt.hpa", on);
	assert_true(on);
	uint64_t t0 = mp_now_ns();
	while (bg_threads() != 1) {
		MP_ASSERT(!mp_waited_too_long(t0), "no background thread");
		for (int i = 0; i < 256; i++)
			free(LAUNDER(malloc(4000)));
		mp_sleep_ms(10);
	}
}

/* Dense pageslabs are hugified while the program sleeps. */
static void test_hugify_in_background(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	uint64_t hug0 = hpa_stat_u64(a, "hpa_shard.nhugifies");
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i] = malloc(OBJ);
		assert_non_null(objs[i]);
		memset(LAUNDER(objs[i]), 0x5a, OBJ);
	}
	assert_true(hpa_stat_size(a, "hpa_shard.nactive") >= NOBJ * OBJ / 4096);
	if (!hpa_thp_available())
		MP_SKIP("no transparent huge pages: hugification not checked");
	uint64_t t0 = mp_now_ns();
	while (hpa_stat_u64(a, "hpa_shard.nhugifies") < hug0 + 2) {
		MP_ASSERT(!mp_waited_too_long(t0), "nhugifies %" PRIu64
		    " -> %" PRIu64 " with no allocation", hug0,
		    hpa_stat_u64(a, "hpa_shard.nhugifies"));
		mp_sleep_ms(20);
	}
	assert_true(hpa_stat_size(a, "hpa_shard.nhuge") >= 2);
}

/* Freed pages over hpa_dirty_mult x the active ones are purged while the
 * program sleeps. */
static void test_purge_in_background(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	if (objs[0] == NULL) {
		for (size_t i = 0; i < NOBJ; i++) {
			objs[i] = malloc(OBJ);
			assert_non_null(objs[i]);
			memset(LAUNDER(objs[i]), 0x5a, OBJ);
		}
	}
	uint64_t passes0 = hpa_stat_u64(a, "hpa_shard.npurge_passes");
	for (size_t i = 0; i < NOBJ; i++) {
		if (i % 512 != 0) {
			free(objs[i]);
			objs[i] = NULL;
		}
	}
	mp_tcache_flush();
	uint64_t t0 = mp_now_ns();
	for (;;) {
		size_t dirty = hpa_stat_size(a, "hpa_shard.ndirty");
		size_t active = hpa_stat_size(a, "hpa_shard.nactive");
		/* hpa_dirty_mult 0.25: at most a quarter of the active. */
		if (hpa_stat_u64(a, "hpa_shard.npurge_passes") > passes0 &&
		    dirty * 4 <= active)
			break;
		MP_ASSERT(!mp_waited_too_long(t0), "still %zu dirty pages "
		    "for %zu active with no allocation", dirty, active);
		mp_sleep_ms(20);
	}
	for (size_t i = 0; i < NOBJ; i++) {
		free(objs[i]);
		objs[i] = NULL;
	}
}

/* background_thread:false through the mallctl: the work is inline
 * again, and arena.<i>.purge empties the pageslabs of dirty pages. */
static void test_inline_again(void **state) {
	(void)state;
	bool off = false, was = true;
	size_t sz = sizeof(was);
	assert_int_equal(mallctl("background_thread", &was, &sz, &off,
	    sizeof(off)), 0);
	assert_true(was);
	assert_int_equal(bg_threads(), 0);
	unsigned a = hpa_arena_ind();
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i] = malloc(OBJ);
		assert_non_null(objs[i]);
	}
	for (size_t i = 0; i < NOBJ; i++) {
		free(objs[i]);
		objs[i] = NULL;
	}
	mp_tcache_flush();
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MALLCTL_CALL(name);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.ndirty"), 0);
}

int main(void) {
	mp_test_init(180);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thread_starts),
		cmocka_unit_test(test_hugify_in_background),
		cmocka_unit_test(test_purge_in_background),
		cmocka_unit_test(test_inline_again),
	};
	return mp_run_tests(tests);
}
