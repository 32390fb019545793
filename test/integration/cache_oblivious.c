/*
 * test/integration/cache_oblivious.c - opt.cache_oblivious (jemalloc's
 * cache-oblivious large blocks, issue 18).  With cache_oblivious:true
 * (cache_oblivious.conf) a large block aligned below a page starts a
 * random number of cache lines (of alignment steps, if larger) into its
 * extent (below 4 MiB): blocks of one class are not page-aligned, their
 * offsets modulo the page differ and are multiples of the cache line,
 * and arenas.lookup finds them from either end.  Every
 * operation on such a block must still find its extent and size: filling
 * all usable bytes, realloc growing and shrinking (in place and moving),
 * xallocx, rallocx with MALLOCX_ZERO, calloc over reused dirty pages,
 * sdallocx and free_sized with the request size, the large cache, a
 * manual arena's reset (its counters back to zero) and destroy.  Re-runs
 * of the program check the same with junk filling and the profiler
 * sampling every block, cache_oblivious:false (every large block
 * page-aligned) and the option mixed with san_guard_large (guarded
 * blocks take no offset, the others do).
 */
#include "../test_util.h"

#include <sys/wait.h>

#define CL 64

static char **main_argv;

static const size_t sizes[] = {
	16 * 1024, 20000, 64 * 1024, 100000, 1 << 20, (3 << 20) + 1,
};

/* How many distinct offsets modulo the page n blocks of `size` bytes
 * (flags for mallocx) have; every one a multiple of `step`.  -1 on a
 * misaligned block. */
static int distinct_offsets(size_t size, int flags, size_t step,
    size_t n) {
	void *ps[64];
	bool seen[4096 / CL] = {false};
	int distinct = 0;
	assert_true(n <= MP_ARRAY_SIZE(ps));
	for (size_t i = 0; i < n; i++) {
		ps[i] = flags != 0 ? mallocx(size, flags) : malloc(size);
		assert_non_null(ps[i]);
	}
	for (size_t i = 0; i < n; i++) {
		uintptr_t off = (uintptr_t)ps[i] & (mp_page_size() - 1);
		if (off % step != 0)
			distinct = -1;
		else if (distinct >= 0 && !seen[off / CL]) {
			seen[off / CL] = true;
			distinct++;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(ps[i]);
	return distinct;
}

static void test_opt(void **state) {
	(void)state;
	bool v = false;
	MALLCTL_READ("opt.cache_oblivious", v);
	assert_true(v);
	v = false;
	MALLCTL_READ("config.cache_oblivious", v);
	assert_true(v);
}

static void test_offsets(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		/* 48 blocks over 63 possible offsets: about 34 distinct;
		 * 8 leaves no room for chance. */
		int d = distinct_offsets(sizes[i], 0, CL, 48);
		MP_ASSERT(d >= 8, "malloc(%zu): %d distinct offsets mod the "
		    "page (-1: one not a multiple of %d)", sizes[i], d, CL);
	}
	/* An alignment above the cache line: offsets in its steps. */
	int d = distinct_offsets(20000, MALLOCX_ALIGN(512), 512, 48);
	MP_ASSERT(d >= 2, "MALLOCX_ALIGN(512): %d distinct offsets", d);
	/* A page's alignment (or more) leaves no room: all page-aligned. */
	d = distinct_offsets(20000, MALLOCX_ALIGN(4096), 4096, 16);
	assert_int_equal(d, 1);
	d = distinct_offsets(20000, MALLOCX_ALIGN(8192), 4096, 16);
	assert_int_equal(d, 1);
	/* Blocks of 4 MiB or more keep their pages' alignment (they are
	 * carved on 2 MiB granules, arena.c): all page-aligned. */
	d = distinct_offsets(5 << 20, 0, 4096, 8);
	assert_int_equal(d, 1);
	/* Small blocks are untouched (slabs). */
	void *p = malloc(4096);
	assert_true(((uintptr_t)p & 4095) == 0);
	free(p);
}

/* Fills, checks, resizes and frees blocks of every size, through every
 * path that maps a pointer back to its extent. */
static void exercise(size_t size, uint64_t seed) {
	/* Sized frees with the request's size. */
	char *p = LAUNDER(malloc(size));
	assert_non_null(p);
	size_t usable = malloc_usable_size(p);
	MP_ASSERT(usable >= size && usable == nallocx(size, 0) &&
	    usable == sallocx(p, 0), "malloc(%zu) = %p: usable %zu, nallocx "
	    "%zu", size, (void *)p, usable, nallocx(size, 0));
	pattern_fill(p, usable, seed);
	assert_true(pattern_check(p, usable, seed) == SIZE_MAX);
	sdallocx(p, size, 0);
	p = LAUNDER(malloc(size));
	pattern_fill(p, size, seed);
	free_sized(p, size);

	/* realloc growing and shrinking keeps the contents. */
	p = LAUNDER(malloc(size));
	pattern_fill(p, size, seed);
	size_t big = size * 3 + 12345;
	char *q = LAUNDER(realloc(p, big));
	assert_non_null(q);
	assert_true(pattern_check(q, size, seed) == SIZE_MAX);
	assert_true(malloc_usable_size(q) >= big);
	memset(q + size, 0x77, malloc_usable_size(q) - size);
	char *r = LAUNDER(realloc(q, size / 2 + 1));
	assert_non_null(r);
	assert_true(pattern_check(r, size / 2 + 1, seed) == SIZE_MAX);
	/* A large block within its class: nothing moves (a small one may,
	 * under junk filling). */
	size_t u = malloc_usable_size(r);
	if (u >= 16384)
		assert_ptr_equal(LAUNDER(realloc(r, u)), r);
	free(r);

	/* xallocx: growing in place or not at all, shrinking in place. */
	p = LAUNDER(mallocx(size, 0));
	pattern_fill(p, size, seed);
	size_t old = sallocx(p, 0);
	size_t got = xallocx(p, old + 200000, 0, 0);
	assert_true(got == old || got >= old + 200000);
	assert_int_equal(sallocx(p, 0), got);
	assert_true(pattern_check(p, size, seed) == SIZE_MAX);
	memset(p, 0x11, got);
	got = xallocx(p, 16384, 0, 0);
	assert_int_equal(got, 16384);
	assert_int_equal(sallocx(p, 0), 16384);
	for (size_t i = 0; i < 16384; i++)
		MP_ASSERT(p[i] == 0x11, "xallocx shrink lost byte %zu", i);
	/* rallocx with MALLOCX_ZERO: the new bytes read zero, though the
	 * pad page past the block may hold old data. */
	char *z = LAUNDER(rallocx(p, 300000, MALLOCX_ZERO));
	assert_non_null(z);
	for (size_t i = 0; i < 16384; i++)
		MP_ASSERT(z[i] == 0x11, "rallocx lost byte %zu", i);
	size_t zu = sallocx(z, 0);
	for (size_t i = 16384; i < zu; i++)
		MP_ASSERT(z[i] == 0, "rallocx(MALLOCX_ZERO) byte %zu = %#x",
		    i, (unsigned)(unsigned char)z[i]);
	dallocx(z, MALLOCX_TCACHE_NONE);

	/* calloc over reused dirty pages reads zero, every byte. */
	void *d[4];
	for (int i = 0; i < 4; i++) {
		d[i] = malloc(size);
		memset(d[i], 0xee, malloc_usable_size(d[i]));
	}
	for (int i = 0; i < 4; i++)
		dallocx(d[i], MALLOCX_TCACHE_NONE);
	for (int i = 0; i < 4; i++) {
		unsigned char *c = LAUNDER(calloc(1, size));
		assert_non_null(c);
		size_t cu = malloc_usable_size(c);
		for (size_t j = 0; j < cu; j++)
			MP_ASSERT(c[j] == 0, "calloc(%zu) byte %zu = %#x",
			    size, j, (unsigned)c[j]);
		d[i] = c;
	}
	for (int i = 0; i < 4; i++)
		free(d[i]);
}

static void test_operations(void **state) {
	(void)state;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		exercise(sizes[i], 0x5eed + i);
}

/* arenas.lookup finds a block from its first and its last byte (the
 * offset is never 0, so the last byte is on the extent's last page). */
static void test_lookup(void **state) {
	(void)state;
	unsigned mine = 0;
	MALLCTL_READ("thread.arena", mine);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		for (int k = 0; k < 64; k++) {
			char *p = LAUNDER(malloc(sizes[i]));
			assert_non_null(p);
			MP_ASSERT(((uintptr_t)p & 4095) != 0, "malloc(%zu) = "
			    "%p: page-aligned", sizes[i], (void *)p);
			size_t u = malloc_usable_size(p);
			char *ends[2] = { p, p + u - 1 };
			for (int j = 0; j < 2; j++) {
				unsigned ind = 12345;
				size_t len = sizeof(ind);
				void *q = ends[j];
				int r = mallctl("arenas.lookup", &ind, &len, &q,
				    sizeof(q));
				MP_ASSERT(r == 0 && ind == mine, "lookup of "
				    "%p in malloc(%zu) = %p: %d, arena %u",
				    q, sizes[i], (void *)p, r, ind);
			}
			free(p);
		}
	}
}

/* The large cache hands a block back as it was: its pointer, size and
 * contents behave. */
static void test_large_cache(void **state) {
	(void)state;
	for (int round = 0; round < 50; round++) {
		char *p = LAUNDER(malloc(40000));
		assert_non_null(p);
		assert_true(((uintptr_t)p & (CL - 1)) == 0);
		assert_int_equal(malloc_usable_size(p), nallocx(40000, 0));
		memset(p, round, malloc_usable_size(p));
		free(p);
	}
}

/* A manual arena: its counters show the block sizes (allocated) and the
 * pad pages (active); reset returns everything, destroy works. */
static void test_arena_reset(void **state) {
	(void)state;
	unsigned ind = 0;
	size_t sz = sizeof(ind);
	assert_int_equal(mallctl("arenas.create", &ind, &sz, NULL, 0), 0);
	int flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	void *ps[16];
	size_t want = 0;
	for (int i = 0; i < 16; i++) {
		ps[i] = mallocx(65536, flags);
		assert_non_null(ps[i]);
		memset(ps[i], 0xab, 65536);
		want += 65536;
	}
	char name[128];
	mp_epoch();
	size_t alloc = 0, pactive = 0;
	snprintf(name, sizeof(name), "stats.arenas.%u.large.allocated", ind);
	MALLCTL_READ(name, alloc);
	assert_int_equal(alloc, want);
	snprintf(name, sizeof(name), "stats.arenas.%u.pactive", ind);
	MALLCTL_READ(name, pactive);
	/* Each block one page longer. */
	assert_int_equal(pactive, 16 * (65536 / 4096 + 1));
	/* Freed one by one, the rest reset. */
	for (int i = 0; i < 8; i++)
		dallocx(ps[i], MALLOCX_TCACHE_NONE);
	snprintf(name, sizeof(name), "arena.%u.reset", ind);
	MALLCTL_CALL(name);
	mp_epoch();
	snprintf(name, sizeof(name), "stats.arenas.%u.large.allocated", ind);
	MALLCTL_READ(name, alloc);
	assert_int_equal(alloc, 0);
	snprintf(name, sizeof(name), "stats.arenas.%u.pactive", ind);
	MALLCTL_READ(name, pactive);
	assert_int_equal(pactive, 0);
	/* The arena works again, then goes. */
	void *p = mallocx(100000, flags);
	assert_non_null(p);
	memset(p, 1, 100000);
	snprintf(name, sizeof(name), "arena.%u.destroy", ind);
	MALLCTL_CALL(name);
}

/* Threads draw their own offsets. */
static void *thread_body(void *arg) {
	(void)arg;
	for (int i = 0; i < 200; i++) {
		char *p = malloc(20000 + (size_t)i * 1000);
		if (p == NULL || ((uintptr_t)p & (CL - 1)) != 0)
			return (void *)1;
		memset(p, i, 20000);
		free(p);
	}
	return NULL;
}

static void test_threads(void **state) {
	(void)state;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_body,
		    NULL), 0);
	for (int i = 0; i < 4; i++) {
		void *ret = (void *)2;
		assert_int_equal(pthread_join(t[i], &ret), 0);
		assert_null(ret);
	}
}

/* The re-runs' bodies: exit 0 when fine, a distinct code otherwise. */
static int child_off(void) {
	bool v = true;
	size_t sz = sizeof(v);
	if (mallctl("opt.cache_oblivious", &v, &sz, NULL, 0) != 0 || v)
		return 2;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		for (int k = 0; k < 16; k++) {
			void *p = malloc(sizes[i]);
			if (p == NULL || ((uintptr_t)p & 4095) != 0)
				return 3;
			memset(p, k, sizes[i]);
			void *q = realloc(p, sizes[i] * 2);
			if (q == NULL || ((uintptr_t)q & 4095) != 0)
				return 4;
			free(q);
		}
	}
	return 0;
}

/* san_guard_large:2: every second carved block is guarded, page-aligned
 * (its guard follows its end); the others are offset.  All work. */
static int child_guard(void) {
	void *ps[32];
	int aligned = 0;
	for (int k = 0; k < 32; k++) {
		ps[k] = mallocx(20000, MALLOCX_TCACHE_NONE);
		if (ps[k] == NULL || ((uintptr_t)ps[k] & (CL - 1)) != 0)
			return 2;
		aligned += ((uintptr_t)ps[k] & 4095) == 0;
		memset(ps[k], k, malloc_usable_size(ps[k]));
	}
	for (int k = 0; k < 32; k++) {
		void *q = rallocx(ps[k], 50000, MALLOCX_TCACHE_NONE);
		if (q == NULL)
			return 3;
		ps[k] = q;
	}
	for (int k = 0; k < 32; k++)
		dallocx(ps[k], MALLOCX_TCACHE_NONE);
	/* The 32 carvings alternate: 16 guarded and page-aligned, 16
	 * offset (never by 0). */
	return aligned == 16 ? 0 : 4;
}

static void run_child(const char *conf, const char *mode) {
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv(mp_env_conf_name(), conf, 1);
		char *argv[] = { main_argv[0], (char *)mode, NULL };
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s run: status %#x (exit codes: child_%s)", conf, status, mode);
}

/* Junk filling and, where built, the profiler sampling every block
 * (its record of a large block hangs on the extent, found through the
 * page map): the operations again, in a child with those options. */
static void test_junk_prof(void **state) {
	(void)state;
	char conf[128];
	snprintf(conf, sizeof(conf), "cache_oblivious:true,junk:true%s",
	    MALLOC_PROF_CONFIG_PROF ? ",prof:true,lg_prof_sample:0" : "");
	static char err[1 << 16];
	int status = mp_run_child_conf("mix", conf, err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s run: status %#x", conf, status);
}

static void test_off(void **state) {
	(void)state;
	run_child("cache_oblivious:false", "off");
}

static void test_with_guards(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	run_child("cache_oblivious:true,san_guard_large:2", "guard");
}

int main(int argc, char **argv) {
	main_argv = argv;
	if (argc > 1 && strcmp(argv[1], "off") == 0)
		return child_off();
	if (argc > 1 && strcmp(argv[1], "guard") == 0)
		return child_guard();
	mp_test_init(120);
	if (argc > 2 && strcmp(argv[1], "--child") == 0) {
		const struct CMUnitTest mix[] = {
			cmocka_unit_test(test_operations),
			cmocka_unit_test(test_lookup),
			cmocka_unit_test(test_large_cache),
			cmocka_unit_test(test_arena_reset),
			cmocka_unit_test(test_threads),
		};
		return mp_run_tests(mix);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opt),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_operations),
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_large_cache),
		cmocka_unit_test(test_arena_reset),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_junk_prof),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_with_guards),
	};
	return mp_run_tests(tests);
}
