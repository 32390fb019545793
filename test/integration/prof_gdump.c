/*
 * test/integration/prof_gdump.c - high-water dumps (prof_gdump,
 * prof.gdump).
 *
 * prof_gdump.conf: prof:true,prof_gdump:true,lg_prof_sample:0,
 * prof_prefix:/tmp/mp_prof_gdump_conf.  Each new high of the pages in use
 * writes <prefix>.<pid>.<seq>.u<n>.heap: growing by eight 4 MiB blocks
 * gives at least eight of them; going back up short of an old high gives
 * none;
 * prof.gdump false (which returns the old value, true) stops them and
 * true resumes them.  The dumps written before the test set its own
 * prefix (with the conf's prefix in /tmp) are removed at the end.
 */
#include "../test_util.h"

#define CONF_DIR "/tmp"
#define CONF_BASE "mp_prof_gdump_conf"

static char tmpdir[256];

#define NBIG 8
#define BIG ((size_t)4 << 20)

void gdump_site(void **objs, int n);

MP_SITE void gdump_site(void **objs, int n) {
	for (int i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(BIG));
	}
	__asm__ volatile("" : : : "memory");
}

/* Listing allocates (opendir): with gdump on that could be a new high of
 * its own.  Bookkeeping runs with prof.gdump off. */
static size_t list_u(mp_autoname_t *a, size_t max) {
	bool old;
	assert_int_equal(mp_prof_switch("prof.gdump", false, &old), 0);
	size_t n = mp_dump_list(tmpdir, "g", (long)getpid(), 'u', a, max);
	assert_int_equal(mp_prof_switch("prof.gdump", old, NULL), 0);
	return n;
}

static void test_gdump(void **state) {
	(void)state;
	bool b = false;
	MALLCTL_READ("opt.prof_gdump", b);
	assert_true(b);
	MALLCTL_READ("prof.gdump", b);
	assert_true(b);

	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/g", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	mp_autoname_t a[256];
	size_t n0 = list_u(a, 256);

	/* Eight new highs. */
	void *objs[NBIG], *more[NBIG];
	gdump_site(objs, NBIG);
	size_t n1 = list_u(a, 256);
	MP_ASSERT(n1 - n0 >= NBIG, "%zu u dumps for %d new highs", n1 - n0,
	    NBIG);
	print_message("# %zu u dumps for %d new highs\n", n1 - n0, NBIG);
	for (size_t i = 1; i < n1 && i < 256; i++) {
		assert_int_equal(a[i].n, a[i - 1].n + 1);
		assert_true(a[i].seq > a[i - 1].seq);
	}
	/* The last one was written by the allocation of the eighth block,
	 * before it was recorded: it shows the other seven. */
	bool old;
	assert_int_equal(mp_prof_switch("prof.gdump", false, &old), 0);
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[n1 - 1].name);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	mp_heap_check_sums(&h, true);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)gdump_site, 1);
	assert_non_null(s);
	MP_ASSERT(s->total.co >= NBIG - 1, "%" PRIu64 " blocks in the last u "
	    "dump", s->total.co);
	mp_heap_free(&h);
	assert_int_equal(mp_prof_switch("prof.gdump", true, &old), 0);

	/* Back up, but not to the old high (one block, 4 MiB, short of
	 * it: the bookkeeping above may have kept a few pages): no dump. */
	mp_free_all(objs, NBIG);
	gdump_site(objs, NBIG - 1);
	size_t n2 = list_u(a, 256);
	MP_ASSERT(n2 == n1, "%zu u dumps without a new high", n2 - n1);
	gdump_site(objs + NBIG - 1, 1);
	n2 = list_u(a, 256);

	/* prof.gdump false: new highs are not dumped. */
	assert_int_equal(mp_prof_switch("prof.gdump", false, &old), 0);
	assert_true(old);
	gdump_site(more, NBIG);
	assert_int_equal(mp_prof_switch("prof.gdump", false, &old), 0);
	assert_false(old);
	size_t n3 = list_u(a, 256);
	MP_ASSERT(n3 == n2, "%zu u dumps with prof.gdump off", n3 - n2);

	/* On again: the next new high dumps. */
	assert_int_equal(mp_prof_switch("prof.gdump", true, &old), 0);
	assert_false(old);
	void *one;
	gdump_site(&one, 1);
	size_t n4 = list_u(a, 256);
	MP_ASSERT(n4 >= n3 + 1, "%zu u dumps after prof.gdump on", n4 - n3);
	free(one);
	mp_free_all(more, NBIG);
	mp_free_all(objs, NBIG);
}

/* prof.gdump needs prof.active: off, no dumps. */
static void test_inactive(void **state) {
	(void)state;
	mp_autoname_t a[256];
	size_t n0 = list_u(a, 256);
	bool old;
	assert_int_equal(mp_prof_switch("prof.active", false, &old), 0);
	void *objs[2 * NBIG + 4];
	gdump_site(objs, 2 * NBIG + 4);		/* beyond every high */
	assert_int_equal(mp_prof_switch("prof.active", true, &old), 0);
	size_t n1 = list_u(a, 256);
	MP_ASSERT(n1 == n0, "%zu u dumps while prof.active was off", n1 - n0);
	mp_free_all(objs, 2 * NBIG + 4);
}

/*
 * The high-water mark is the highest level ever reached, also while
 * prof.gdump was off (jemalloc tracks it whenever profiling is on): after
 * turning it on again, growing to a level above the last dumped high but
 * below the true maximum is not a new high.
 */
static void test_high_tracked_while_off(void **state) {
	(void)state;
	enum { N1 = 24, N2 = 32, N3 = 28 };	/* 96, 128, 112 MiB */
	void *objs[N2];
	bool old;
	assert_int_equal(mp_prof_switch("prof.gdump", true, &old), 0);
	gdump_site(objs, N1);		/* a new high H (dumped) */
	mp_free_all(objs, N1);
	assert_int_equal(mp_prof_switch("prof.gdump", false, &old), 0);
	gdump_site(objs, N2);		/* the true maximum, not dumped */
	mp_free_all(objs, N2);
	mp_autoname_t a[256];
	size_t n0 = list_u(a, 256);
	assert_int_equal(mp_prof_switch("prof.gdump", true, &old), 0);
	gdump_site(objs, N3);		/* above H, below the maximum */
	size_t n1 = list_u(a, 256);
	mp_free_all(objs, N3);
	MP_ASSERT(n1 == n0, "%zu u dumps for growth below the high-water mark "
	    "reached while prof.gdump was off", n1 - n0);
}

static void test_no_profiler(void **state) {
	(void)state;
	bool b;
	size_t sz = sizeof(b);
	assert_int_equal(mallctl("prof.gdump", &b, &sz, NULL, 0), ENOENT);
	b = true;
	assert_int_equal(mallctl("prof.gdump", NULL, NULL, &b, sizeof(b)),
	    ENOENT);
	void *objs[NBIG];
	gdump_site(objs, NBIG);
	mp_free_all(objs, NBIG);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gdump),
		cmocka_unit_test(test_inactive),
		cmocka_unit_test(test_high_tracked_while_off),
	};
	int r = mp_prof_test_main("mp_prof_gdump", test_no_profiler, tests);
	if (MALLOC_PROF_CONFIG_PROF) {
		mp_dump_remove_conf(CONF_DIR, CONF_BASE, "u");
	}
	return r;
}
