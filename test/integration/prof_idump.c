/*
 * test/integration/prof_idump.c - interval dumps (lg_prof_interval).
 *
 * prof_idump.conf: prof:true,lg_prof_sample:0,lg_prof_interval:16,
 * prof_prefix:/tmp/mp_prof_idump_conf.  Every 64 KiB allocated, an
 * automatic dump <prefix>.<pid>.<seq>.i<n>.heap is written: allocating
 * 1 MiB gives 16 of them (one more or less, depending on what was
 * counted before), numbered i<n>, i<n+1>, ... with increasing seq.  None
 * are written while prof.active is off.  The dumps the process wrote
 * before the test set its own prefix (to the conf's prefix in /tmp) are
 * removed at the end.
 */
#include "../test_util.h"

#define CONF_DIR "/tmp"
#define CONF_BASE "mp_prof_idump_conf"

static char tmpdir[256];

#define NOBJ 64
#define OBJ_SIZE (16 << 10)
static void *objs[NOBJ];

void idump_site(void);

MP_SITE void idump_site(void) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size(OBJ_SIZE));
	}
	__asm__ volatile("" : : : "memory");
}

/*
 * The test's own bookkeeping allocates too (opendir takes 32 KiB, the
 * dump parser 64 KiB), which would write interval dumps of its own:
 * listings and parses run with prof.active off (the interval counter
 * then drops what it counts instead of dumping).
 */
static void quiet(bool on) {
	bool old;
	assert_int_equal(mp_prof_switch("prof.active", !on, &old), 0);
	MP_ASSERT(old == on, "prof.active was %d", old);
}

static size_t list_i(mp_autoname_t *a, size_t max) {
	quiet(true);
	size_t n = mp_dump_list(tmpdir, "i", (long)getpid(), 'i', a, max);
	quiet(false);
	return n;
}

static void test_interval(void **state) {
	(void)state;
	ssize_t lg = 0;
	MALLCTL_READ("opt.lg_prof_interval", lg);
	assert_int_equal(lg, 16);
	uint64_t interval = 0;
	MALLCTL_READ("prof.interval", interval);
	assert_int_equal(interval, 65536);
	const char *pfx = NULL;
	MALLCTL_READ("opt.prof_prefix", pfx);
	assert_string_equal(pfx, CONF_DIR "/" CONF_BASE);

	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/i", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	mp_autoname_t a[64];
	assert_int_equal(list_i(a, 64), 0);

	idump_site();		/* 64 x 16 KiB = 1 MiB */
	size_t n = list_i(a, 64);
	MP_ASSERT(n >= 15 && n <= 17, "%zu interval dumps for 1 MiB at 64 KiB",
	    n);
	quiet(true);
	for (size_t i = 1; i < n; i++) {
		assert_int_equal(a[i].n, a[i - 1].n + 1);
		assert_true(a[i].seq > a[i - 1].seq);
	}
	/* Each is a complete dump; the last shows most of the objects (the
	 * dump is written by the allocation that crossed the interval). */
	for (size_t i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", tmpdir, a[i].name);
		mp_heap_t h;
		MP_HEAP_PARSE(path, &h);
		mp_heap_check_sums(&h, true);
		assert_true(h.has_maps);
		if (i == n - 1) {
			const mp_heap_stack_t *s = mp_heap_find_site(&h,
			    (void *)idump_site, 1);
			assert_non_null(s);
			MP_ASSERT(s->total.co >= NOBJ - 4, "%" PRIu64 " objects",
			    s->total.co);
		}
		mp_heap_free(&h);
	}
	quiet(false);
	mp_free_all(objs, NOBJ);

	/* prof.dump's m<n> counter is separate, seq is shared. */
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	mp_autoname_t m[2];
	quiet(true);
	assert_int_equal(mp_dump_list(tmpdir, "i", (long)getpid(), 'm', m, 2),
	    1);
	quiet(false);
	assert_int_equal(m[0].n, 0);
	assert_true(m[0].seq > a[n - 1].seq);
}

static void test_inactive(void **state) {
	(void)state;
	mp_autoname_t a[64];
	size_t before = list_i(a, 64);
	bool old;
	assert_int_equal(mp_prof_switch("prof.active", false, &old), 0);
	assert_true(old);
	idump_site();
	mp_free_all(objs, NOBJ);
	idump_site();
	mp_free_all(objs, NOBJ);
	assert_int_equal(mp_prof_switch("prof.active", true, &old), 0);
	size_t after = list_i(a, 64);
	MP_ASSERT(after == before, "%zu interval dumps while prof.active was "
	    "off", after - before);
	/* And on again, they resume. */
	idump_site();
	after = list_i(a, 64);
	mp_free_all(objs, NOBJ);
	MP_ASSERT(after >= before + 15 && after <= before + 17, "%zu new "
	    "interval dumps", after - before);
}

/* An unwritable prefix: one line for the first failure, then quiet. */
static void test_failure_rate_limited(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/no-such-dir/i", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	mp_msgs_start();
	idump_site();
	mp_msgs_stop();
	unsigned lines = mp_msgs_lines;
	mp_free_all(objs, NOBJ);
	MP_ASSERT(lines == 1, "%u lines for ~16 failed dumps: %s", lines,
	    mp_msgs);
	MP_ASSERT(strstr(mp_msgs, "interval dump") != NULL &&
	    strstr(mp_msgs, "/no-such-dir/i.") != NULL, "%s", mp_msgs);
	snprintf(prefix, sizeof(prefix), "%s/i", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
}

static void test_no_profiler(void **state) {
	(void)state;
	uint64_t interval;
	size_t sz = sizeof(interval);
	assert_int_equal(mallctl("prof.interval", &interval, &sz, NULL, 0),
	    ENOENT);
	idump_site();
	mp_free_all(objs, NOBJ);
	mp_autoname_t a[1];
	assert_int_equal(mp_dump_list(CONF_DIR, CONF_BASE, (long)getpid(), 'i',
	    a, 1), 0);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_inactive),
		cmocka_unit_test(test_failure_rate_limited),
	};
	int r = mp_prof_test_main("mp_prof_idump", test_no_profiler, tests);
	if (MALLOC_PROF_CONFIG_PROF) {
		mp_dump_remove_conf(CONF_DIR, CONF_BASE, "imuf");
	}
	return r;
}
