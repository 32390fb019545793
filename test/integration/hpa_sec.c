/*
 * test/integration/hpa_sec.c - opt.hpa's small extent cache (issue 18).
 * hpa_sec.conf: hpa:true with one shard of 64 KiB, flushed down to
 * 32 KiB.  A freed pageslab run of up to hpa_sec_max_alloc comes back at
 * the same address from the cache (stats.arenas.<i>.hpa_sec_bytes counts
 * it meanwhile); the shard never holds more than hpa_sec_max_bytes and a
 * flush gives runs back to the pageslabs; arena.<i>.purge and malloc_trim
 * empty it; a child of fork() finds it intact; malloc_stats_print shows
 * it.  Children: hpa_sec_nshards:0 turns it off
 * (a freed run goes straight back), hpa_sec_batch_fill_extra fills the
 * cache on a miss.
 */
#include "hpa_stats.h"

#include <sys/wait.h>

#define RUN (20 * 1024)          /* 5 pages: cached (max_alloc 32 KiB) */

static void test_opts(void **state) {
	(void)state;
	size_t z = 0;
	MALLCTL_READ("opt.hpa_sec_nshards", z);
	assert_int_equal(z, 1);
	MALLCTL_READ("opt.hpa_sec_max_alloc", z);
	assert_int_equal(z, 32768);
	MALLCTL_READ("opt.hpa_sec_max_bytes", z);
	assert_int_equal(z, 65536);
	MALLCTL_READ("opt.hpa_sec_bytes_after_flush", z);
	assert_int_equal(z, 32768);
	MALLCTL_READ("opt.hpa_sec_batch_fill_extra", z);
	assert_int_equal(z, 0);
}

/* Freed, a run waits in the cache (its pages stay active in the
 * pageslab) and is handed out again at the same address. */
static void test_reuse(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MALLCTL_CALL(name);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	memset(LAUNDER(p), 0x77, RUN);
	size_t active = hpa_stat_size(a, "hpa_shard.nactive");
	dallocx(p, MALLOCX_TCACHE_NONE);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), RUN);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), active);
	void *q = mallocx(RUN, MALLOCX_TCACHE_NONE);
	MP_ASSERT(q == p, "freed run %p, then got %p", p, q);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
	/* Reused with MALLOCX_ZERO, the old contents are gone. */
	dallocx(q, MALLOCX_TCACHE_NONE);
	unsigned char *z = mallocx(RUN, MALLOCX_TCACHE_NONE | MALLOCX_ZERO);
	assert_ptr_equal(z, p);
	assert_true(first_nonzero(LAUNDER(z), RUN) == SIZE_MAX);
	dallocx(z, MALLOCX_TCACHE_NONE);
	/* Above hpa_sec_max_alloc a run goes straight back. */
	void *big = mallocx(40 * 1024, MALLOCX_TCACHE_NONE);
	assert_non_null(big);
	size_t sec = hpa_stat_size(a, "hpa_sec_bytes");
	active = hpa_stat_size(a, "hpa_shard.nactive");
	dallocx(big, MALLOCX_TCACHE_NONE);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), sec);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), active - 10);
	MALLCTL_CALL(name);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
}

/* The shard stays within hpa_sec_max_bytes: going over, it flushes down
 * to hpa_sec_bytes_after_flush and the runs go back to the pageslabs. */
static void test_bound(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	enum { N = 12 };
	void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = mallocx(16 * 1024, MALLOCX_TCACHE_NONE);
		assert_non_null(p[i]);
	}
	size_t active = hpa_stat_size(a, "hpa_shard.nactive");
	size_t most = 0;
	bool dropped = false;
	for (int i = 0; i < N; i++) {
		size_t before = hpa_stat_size(a, "hpa_sec_bytes");
		dallocx(p[i], MALLOCX_TCACHE_NONE);
		size_t now = hpa_stat_size(a, "hpa_sec_bytes");
		MP_ASSERT(now <= 65536, "%zu bytes cached", now);
		if (now < before) {
			dropped = true;
			MP_ASSERT(now <= 32768, "flushed to %zu bytes", now);
		}
		if (now > most)
			most = now;
	}
	/* 192 KiB freed through a 64 KiB cache. */
	assert_true(dropped);
	assert_true(most >= 32768);
	MP_ASSERT(hpa_stat_size(a, "hpa_shard.nactive") + 24 <= active,
	    "nactive %zu -> %zu", active, hpa_stat_size(a, "hpa_shard.nactive"));
}

/* malloc_trim empties the cache, as arena.<i>.purge does. */
static void test_trim(void **state) {
	(void)state;
	/* A prefixed build leaves malloc_trim to the C library. */
	if (mp_env_prefix()[0] != '\0')
		MP_SKIP("prefixed build: malloc_trim is glibc's");
	unsigned a = hpa_arena_ind();
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	dallocx(p, MALLOCX_TCACHE_NONE);
	assert_true(hpa_stat_size(a, "hpa_sec_bytes") >= RUN);
	malloc_trim(0);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
}

/* A child of fork() inherits a consistent cache (it lives under the
 * arena lock, which fork takes): the run cached before the fork comes
 * back there too, and a purge empties the child's. */
static void test_fork(void **state) {
	(void)state;
	unsigned a = hpa_arena_ind();
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	dallocx(p, MALLOCX_TCACHE_NONE);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *q = mallocx(RUN, MALLOCX_TCACHE_NONE);
		int bad = q != p;
		dallocx(q, MALLOCX_TCACHE_NONE);
		char name[64];
		snprintf(name, sizeof(name), "arena.%u.purge", a);
		mallctl(name, NULL, NULL, NULL, 0);
		size_t v = 1, sz = sizeof(v);
		mp_epoch();
		mallctl_fmt(&v, &sz, NULL, 0, "stats.arenas.%u.hpa_sec_bytes",
		    a);
		_exit(bad ? 1 : v != 0 ? 2 : 0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %#x "
	    "(1: not the cached run, 2: cache not emptied)", st);
	/* The parent's cache still holds it. */
	void *q = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_ptr_equal(q, p);
	dallocx(q, MALLOCX_TCACHE_NONE);
}

static char stats_out[1 << 20];
static size_t stats_len;

static void stats_collect(void *opaque, const char *str) {
	(void)opaque;
	size_t n = strlen(str);
	if (stats_len + n >= sizeof(stats_out))
		n = sizeof(stats_out) - 1 - stats_len;
	memcpy(stats_out + stats_len, str, n);
	stats_len += n;
	stats_out[stats_len] = '\0';
}

static void test_stats_print(void **state) {
	(void)state;
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	dallocx(p, MALLOCX_TCACHE_NONE);
	stats_len = 0;
	malloc_stats_print(stats_collect, NULL, "gblxe");
	const char *h = strstr(stats_out, "Bytes in small extent cache: ");
	MP_ASSERT(h != NULL, "no small extent cache line in the text");
	assert_true(strtoull(h + strlen("Bytes in small extent cache: "),
	    NULL, 10) >= RUN);
	stats_len = 0;
	malloc_stats_print(stats_collect, NULL, "Jgblxe");
	assert_non_null(strstr(stats_out, "\"sec_bytes\": "));
}

/* Child (hpa_sec_nshards:0): no cache. */
static void test_off_child(void **state) {
	(void)state;
	unsigned a = hpa_arena_ind();
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	size_t active = hpa_stat_size(a, "hpa_shard.nactive");
	dallocx(p, MALLOCX_TCACHE_NONE);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), active - 5);
}

/* Child (hpa_sec_batch_fill_extra:2): a miss caches two more runs. */
static void test_batch_child(void **state) {
	(void)state;
	unsigned a = hpa_arena_ind();
	/* Start-up's slabs filled the cache too: empty it first. */
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MALLCTL_CALL(name);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 2 * RUN);
	void *q = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(q);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), RUN);
	dallocx(p, MALLOCX_TCACHE_NONE);
	dallocx(q, MALLOCX_TCACHE_NONE);
}

static void run_child(const char *mode, const char *conf) {
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	static char err[16384];
	int st = mp_run_child_conf(mode, conf, err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %#x", st);
}

static void test_off(void **state) {
	(void)state;
	run_child("off", "hpa:true,hpa_sec_nshards:0");
}

static void test_batch(void **state) {
	(void)state;
	run_child("batch", "hpa:true,hpa_sec_batch_fill_extra:2");
}

int main(int argc, char **argv) {
	mp_test_init(120);
	if (argc > 2 && strcmp(argv[1], "--child") == 0) {
		const struct CMUnitTest off[] = {
			cmocka_unit_test(test_off_child),
		};
		const struct CMUnitTest batch[] = {
			cmocka_unit_test(test_batch_child),
		};
		if (strcmp(argv[2], "off") == 0)
			return mp_run_tests(off);
		return mp_run_tests(batch);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opts),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_stats_print),
		cmocka_unit_test(test_trim),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_batch),
	};
	return mp_run_tests(tests);
}
