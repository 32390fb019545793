/*
 * test/integration/tcache_explicit.c - jemalloc's explicit thread caches:
 * tcache.create, tcache.flush and tcache.destroy, and MALLOCX_TCACHE(tc)
 * on mallocx, rallocx, dallocx and sdallocx.  A block freed into a cache
 * comes back from that cache only; a flush and a destroy give what it
 * holds back to the arena (stats.arenas.<i>.pactive); a destroyed index
 * is handed out again; a cache works from one thread after another; bad
 * arguments give jemalloc's error codes, and a bad index in a flag is
 * reported (debug builds abort, as jemalloc does).
 */
#include "../test_util.h"

#include <sys/wait.h>

#define TC_MAX 4093     /* jemalloc's MALLOCX_TCACHE_MAX */

static unsigned tc_create(void) {
	unsigned ind = UINT_MAX;
	size_t sz = sizeof(ind);
	int r = mallctl("tcache.create", &ind, &sz, NULL, 0);
	MP_ASSERT(r == 0, "tcache.create: %d (%s)", r, strerror(r));
	assert_int_equal(sz, sizeof(ind));
	MP_ASSERT(ind <= TC_MAX, "tcache.create gave %u", ind);
	return ind;
}

static int tc_ctl(const char *name, unsigned ind) {
	return mallctl(name, NULL, NULL, &ind, sizeof(ind));
}

static void tc_destroy(unsigned ind) {
	int r = tc_ctl("tcache.destroy", ind);
	MP_ASSERT(r == 0, "tcache.destroy(%u): %d", ind, r);
}

/* Whether addresses can be compared: a sampled object comes from the
 * profiler's own slabs, whatever the cache. */
static bool same_block_checks(void) {
	bool prof = false;
	size_t sz = sizeof(prof);
	if (mallctl("opt.prof", &prof, &sz, NULL, 0) != 0) {
		prof = false;
	}
	return !prof;
}

static size_t page_size(void) {
	size_t page = 0;
	MALLCTL_READ("arenas.page", page);
	return page;
}

static unsigned thread_arena(void) {
	unsigned a = 0;
	MALLCTL_READ("thread.arena", a);
	return a;
}

static size_t arena_pactive(unsigned arena) {
	size_t v = 0;
	mp_epoch();
	int r = mallctl_fmt(&v, &(size_t){sizeof(v)}, NULL, 0,
	    "stats.arenas.%u.pactive", arena);
	MP_ASSERT(r == 0, "stats.arenas.%u.pactive: %d", arena, r);
	return v;
}

/* ------------------------------------------------------------------------ */

static void test_create_distinct(void **state) {
	(void)state;
	unsigned tc[8];
	for (size_t i = 0; i < MP_ARRAY_SIZE(tc); i++) {
		tc[i] = tc_create();
		for (size_t j = 0; j < i; j++) {
			MP_ASSERT(tc[i] != tc[j], "tcache.create gave %u twice",
			    tc[i]);
		}
	}
	/* Flushing an empty cache is fine. */
	for (size_t i = 0; i < MP_ARRAY_SIZE(tc); i++) {
		assert_int_equal(tc_ctl("tcache.flush", tc[i]), 0);
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(tc); i++) {
		tc_destroy(tc[i]);
	}
	/* By MIB as well. */
	size_t mib[2], miblen = 2;
	assert_int_equal(mallctlnametomib("tcache.create", mib, &miblen), 0);
	assert_int_equal(miblen, 2);
	unsigned ind = UINT_MAX;
	size_t sz = sizeof(ind);
	assert_int_equal(mallctlbymib(mib, miblen, &ind, &sz, NULL, 0), 0);
	assert_true(ind <= TC_MAX);
	miblen = 2;
	assert_int_equal(mallctlnametomib("tcache.destroy", mib, &miblen), 0);
	assert_int_equal(mallctlbymib(mib, miblen, NULL, NULL, &ind,
	    sizeof(ind)), 0);
}

static void test_ctl_errors(void **state) {
	(void)state;
	unsigned ind = 0;
	size_t sz = sizeof(ind);
	/* create is read-only and needs room for exactly an unsigned: with
	 * any other size nothing is made and *oldlenp becomes 0. */
	assert_int_equal(mallctl("tcache.create", &ind, &sz, &ind,
	    sizeof(ind)), EPERM);
	assert_int_equal(mallctl("tcache.create", NULL, NULL, NULL, 0), EINVAL);
	uint64_t wide = 0;
	sz = sizeof(wide);
	assert_int_equal(mallctl("tcache.create", &wide, &sz, NULL, 0), EINVAL);
	assert_int_equal(sz, 0);
	assert_int_equal(wide, 0);

	unsigned tc = tc_create();
	const char *names[] = {"tcache.flush", "tcache.destroy"};
	for (size_t i = 0; i < MP_ARRAY_SIZE(names); i++) {
		/* Write-only, an unsigned. */
		sz = sizeof(ind);
		assert_int_equal(mallctl(names[i], &ind, &sz, &tc,
		    sizeof(tc)), EPERM);
		assert_int_equal(mallctl(names[i], NULL, NULL, NULL, 0), EINVAL);
		uint64_t tc64 = tc;
		assert_int_equal(mallctl(names[i], NULL, NULL, &tc64,
		    sizeof(tc64)), EINVAL);
		/* Indices that name no cache. */
		assert_int_equal(tc_ctl(names[i], TC_MAX), EFAULT);
		assert_int_equal(tc_ctl(names[i], TC_MAX + 1), EFAULT);
		assert_int_equal(tc_ctl(names[i], UINT_MAX), EFAULT);
	}
	tc_destroy(tc);
	/* A destroyed index, until it is handed out again. */
	assert_int_equal(tc_ctl("tcache.flush", tc), EFAULT);
	assert_int_equal(tc_ctl("tcache.destroy", tc), EFAULT);
	/* Not a directory, not anything else. */
	assert_int_equal(mallctl("tcache", NULL, NULL, NULL, 0), ENOENT);
	assert_int_equal(mallctl("tcache.create.x", &ind, &sz, NULL, 0),
	    ENOENT);
}

/* A block freed into a cache is what that cache hands out next, and
 * neither the thread's cache nor another explicit cache hands it out. */
static void test_isolation(void **state) {
	(void)state;
	if (!same_block_checks()) {
		MP_SKIP("the profiler is on: sampled blocks come from its slabs");
	}
	unsigned t1 = tc_create(), t2 = tc_create();
	bool thread_cache = false;
	MALLCTL_READ("thread.tcache.enabled", thread_cache);
	size_t sizes[] = {64, 1000, 32 * MP_KiB};
	size_t tcache_max = 0;
	MALLCTL_READ("arenas.tcache_max", tcache_max);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		if (n > tcache_max) {
			continue;
		}
		void *p = LAUNDER(mallocx(n, MALLOCX_TCACHE(t1)));
		assert_non_null(p);
		memset(p, 0x11, n);
		dallocx(p, MALLOCX_TCACHE(t1));
		void *q = LAUNDER(mallocx(n, MALLOCX_TCACHE(t2)));
		void *r = LAUNDER(mallocx(n, 0));
		MP_ASSERT(q != p, "size %zu: cache %u handed out a block freed "
		    "into cache %u", n, t2, t1);
		MP_ASSERT(r != p, "size %zu: the thread's cache handed out a "
		    "block freed into cache %u", n, t1);
		void *s = LAUNDER(mallocx(n, MALLOCX_TCACHE(t1)));
		MP_ASSERT(s == p, "size %zu: cache %u gave %p, not %p", n, t1,
		    s, p);
		/* A block of the thread's cache, freed into t1, is t1's. */
		dallocx(r, MALLOCX_TCACHE(t1));
		void *u = LAUNDER(mallocx(n, MALLOCX_TCACHE(t1)));
		MP_ASSERT(u == r, "size %zu: cache %u gave %p, not %p", n, t1,
		    u, r);
		/* And a block of t1 freed with free() is the thread's (or,
		 * with tcache:false, the arena's, which may hand it out to
		 * anyone again). */
		free(u);
		void *v = LAUNDER(mallocx(n, MALLOCX_TCACHE(t1)));
		MP_ASSERT(v != u || !thread_cache, "size %zu: free() put %p in "
		    "cache %u", n, u, t1);
		dallocx(v, MALLOCX_TCACHE(t1));
		sdallocx(s, n, MALLOCX_TCACHE(t2));
		dallocx(q, MALLOCX_TCACHE(t2));
		/* LIFO: q went in last. */
		void *w = LAUNDER(mallocx(n, MALLOCX_TCACHE(t2)));
		MP_ASSERT(w == q, "size %zu: cache %u gave %p, not %p", n, t2,
		    w, q);
		dallocx(w, MALLOCX_TCACHE(t2));
	}

	/* The size queries ignore the cache; xallocx resizes in place. */
	assert_int_equal(nallocx(100, MALLOCX_TCACHE(t1)), nallocx(100, 0));
	void *x = LAUNDER(mallocx(100 * MP_KiB, MALLOCX_TCACHE(t1)));
	assert_non_null(x);
	assert_int_equal(sallocx(x, MALLOCX_TCACHE(t1)), nallocx(100 * MP_KiB,
	    0));
	assert_int_equal(xallocx(x, 90 * MP_KiB, 0, MALLOCX_TCACHE(t1)),
	    nallocx(90 * MP_KiB, 0));
	dallocx(x, MALLOCX_TCACHE(t1));

	/* MALLOCX_ZERO and an alignment on a block from the cache. */
	unsigned char *p = LAUNDER((unsigned char *)mallocx(256,
	    MALLOCX_TCACHE(t1)));
	assert_non_null(p);
	memset(p, 0xff, 256);
	dallocx(p, MALLOCX_TCACHE(t1));
	unsigned char *z = LAUNDER((unsigned char *)mallocx(256,
	    MALLOCX_TCACHE(t1) | MALLOCX_ZERO | MALLOCX_ALIGN(256)));
	assert_ptr_equal(z, p);
	assert_true(mp_is_aligned(z, 256));
	assert_int_equal(first_nonzero(z, 256), SIZE_MAX);
	dallocx(z, MALLOCX_TCACHE(t1));

	/* rallocx takes the new block from the cache and frees the old one
	 * into it (jemalloc's test_tcache). */
	void *ps = LAUNDER(mallocx(42, MALLOCX_TCACHE(t1)));
	size_t qsz = nallocx(42, 0) + 1;
	void *qs = LAUNDER(mallocx(qsz, MALLOCX_TCACHE(t1)));
	dallocx(ps, MALLOCX_TCACHE(t1));
	dallocx(qs, MALLOCX_TCACHE(t1));
	void *p0 = LAUNDER(mallocx(42, MALLOCX_TCACHE(t1)));
	assert_ptr_equal(p0, ps);
	pattern_fill(p0, 42, 7);
	void *q0 = LAUNDER(rallocx(p0, qsz, MALLOCX_TCACHE(t1)));
	assert_ptr_equal(q0, qs);
	assert_int_equal(pattern_check(q0, 42, 7), SIZE_MAX);
	void *p1 = LAUNDER(mallocx(42, MALLOCX_TCACHE(t1)));
	assert_ptr_equal(p1, ps);
	dallocx(p1, MALLOCX_TCACHE(t1));
	dallocx(q0, MALLOCX_TCACHE(t1));

	/* The thread's own cache off: explicit caches still cache. */
	bool on = true, off = false;
	MALLCTL_WRITE("thread.tcache.enabled", off);
	void *a = LAUNDER(mallocx(128, MALLOCX_TCACHE(t2)));
	dallocx(a, MALLOCX_TCACHE(t2));
	assert_ptr_equal(LAUNDER(mallocx(128, MALLOCX_TCACHE(t2))), a);
	dallocx(a, 0);
	MALLCTL_WRITE("thread.tcache.enabled", on);

	tc_destroy(t1);
	tc_destroy(t2);
}

/* tcache.flush gives the cached large blocks back to the arena: active
 * pages drop by exactly theirs, and the cache's next block comes from the
 * arena again. */
static void test_flush(void **state) {
	(void)state;
	size_t tcache_max = 0, n = 32 * MP_KiB;
	MALLCTL_READ("arenas.tcache_max", tcache_max);
	if (tcache_max < n) {
		MP_SKIP("tcache_max %zu below %zu", tcache_max, n);
	}
	/* cache_oblivious: each block's extent is a page longer. */
	bool co = false;
	MALLCTL_READ("opt.cache_oblivious", co);
	size_t pages = n / page_size() + (co ? 1 : 0);
	unsigned arena = thread_arena();
	unsigned tc = tc_create();
	/* A cache handed out again may still own slabs whose last regions
	 * wait in this thread's cache bins: return them, then what they
	 * free in the cache, so that it holds nothing to begin with. */
	mp_tcache_flush();
	assert_int_equal(tc_ctl("tcache.flush", tc), 0);
	void *b[8];
	for (size_t i = 0; i < MP_ARRAY_SIZE(b); i++) {
		b[i] = LAUNDER(mallocx(n, MALLOCX_TCACHE(tc)));
		assert_non_null(b[i]);
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(b); i++) {
		dallocx(b[i], MALLOCX_TCACHE(tc));
	}
	size_t pa0 = arena_pactive(arena);
	void *p = LAUNDER(mallocx(n, MALLOCX_TCACHE(tc)));
	assert_non_null(p);
	MP_ASSERT(arena_pactive(arena) == pa0, "a cached block took new pages");
	dallocx(p, MALLOCX_TCACHE(tc));

	assert_int_equal(tc_ctl("tcache.flush", tc), 0);
	size_t pa1 = arena_pactive(arena);
	MP_ASSERT(pa0 - pa1 == MP_ARRAY_SIZE(b) * pages,
	    "flush returned %zu pages, not %zu", pa0 - pa1,
	    MP_ARRAY_SIZE(b) * pages);
	p = LAUNDER(mallocx(n, MALLOCX_TCACHE(tc)));
	assert_non_null(p);
	MP_ASSERT(arena_pactive(arena) == pa1 + pages,
	    "the flushed cache still had a block");
	dallocx(p, MALLOCX_TCACHE(tc));
	tc_destroy(tc);
	MP_ASSERT(arena_pactive(arena) == pa1, "destroy kept a block");
}

/* Destroy then create hands the index out again, and stats.allocated
 * counts exactly the blocks the program still holds. */
static void test_destroy_reuse(void **state) {
	(void)state;
	/* The three lowest free indices: after b is destroyed, b is the
	 * lowest free one. */
	unsigned a = tc_create(), b = tc_create(), c = tc_create();
	tc_destroy(b);
	assert_int_equal(tc_create(), b);

	size_t small = nallocx(100, 0), large = nallocx(40000, 0);
	size_t before = mp_stat("stats.allocated");
	void *p[64];
	for (size_t i = 0; i < MP_ARRAY_SIZE(p); i++) {
		p[i] = LAUNDER(mallocx(100, MALLOCX_TCACHE(b)));
		assert_non_null(p[i]);
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(p) / 2; i++) {
		dallocx(p[i], MALLOCX_TCACHE(b));
	}
	void *big = LAUNDER(mallocx(40000, MALLOCX_TCACHE(b)));
	void *gone = LAUNDER(mallocx(40000, MALLOCX_TCACHE(b)));
	assert_non_null(big);
	assert_non_null(gone);
	dallocx(gone, MALLOCX_TCACHE(b));
	tc_destroy(b);
	size_t held = MP_ARRAY_SIZE(p) / 2 * small + large;
	size_t after = mp_stat("stats.allocated");
	MP_ASSERT(after - before == held, "stats.allocated grew by %zu, the "
	    "program holds %zu", after - before, held);

	/* b again: its blocks freed since, the new cache works. */
	assert_int_equal(tc_create(), b);
	for (size_t i = MP_ARRAY_SIZE(p) / 2; i < MP_ARRAY_SIZE(p); i++) {
		if (i % 2 == 0) {
			free(p[i]);
		} else {
			dallocx(p[i], MALLOCX_TCACHE(b));
		}
	}
	dallocx(big, 0);
	assert_int_equal(mp_stat("stats.allocated"), before);
	void *q = LAUNDER(mallocx(100, MALLOCX_TCACHE(b)));
	assert_non_null(q);
	dallocx(q, MALLOCX_TCACHE(b));
	if (same_block_checks()) {
		assert_ptr_equal(LAUNDER(mallocx(100, MALLOCX_TCACHE(b))), q);
		dallocx(q, MALLOCX_TCACHE(b));
	}
	tc_destroy(a);
	tc_destroy(b);
	tc_destroy(c);
}

/* One cache, used by one thread and then by another. */
typedef struct {
	unsigned tc;
	void *blocks[16];
} shared_t;

#define SHARED_SIZE 200

static void *thread_fill(void *arg) {
	shared_t *s = arg;
	for (size_t i = 0; i < MP_ARRAY_SIZE(s->blocks); i++) {
		s->blocks[i] = LAUNDER(mallocx(SHARED_SIZE,
		    MALLOCX_TCACHE(s->tc)));
		MP_CHECK(s->blocks[i] != NULL, "mallocx failed");
		if (s->blocks[i] != NULL) {
			pattern_fill(s->blocks[i], SHARED_SIZE, i);
		}
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(s->blocks); i++) {
		dallocx(s->blocks[i], MALLOCX_TCACHE(s->tc));
	}
	return NULL;
}

static bool shared_has(const shared_t *s, const void *p) {
	for (size_t i = 0; i < MP_ARRAY_SIZE(s->blocks); i++) {
		if (s->blocks[i] == p) {
			return true;
		}
	}
	return false;
}

static void *thread_take(void *arg) {
	shared_t *s = arg;
	bool same = same_block_checks();
	void *got[MP_ARRAY_SIZE(s->blocks)];
	/* The other thread's blocks, last freed first. */
	for (size_t i = 0; i < MP_ARRAY_SIZE(got); i++) {
		got[i] = LAUNDER(mallocx(SHARED_SIZE, MALLOCX_TCACHE(s->tc)));
		MP_CHECK(got[i] != NULL, "mallocx failed");
		size_t want = MP_ARRAY_SIZE(got) - 1 - i;
		MP_CHECK(!same || got[i] == s->blocks[want],
		    "block %zu: %p, not %p", i, got[i], s->blocks[want]);
		if (got[i] != NULL) {
			memset(got[i], 0x22, SHARED_SIZE);
		}
	}
	/* This thread's cache has none of them. */
	void *mine = LAUNDER(malloc(SHARED_SIZE));
	MP_CHECK(!shared_has(s, mine), "malloc gave a block of the cache");
	free(mine);
	/* Half back into the cache, half freed through this thread's. */
	for (size_t i = 0; i < MP_ARRAY_SIZE(got); i++) {
		if (i % 2 == 0) {
			dallocx(got[i], MALLOCX_TCACHE(s->tc));
		} else {
			free(got[i]);
		}
	}
	return NULL;
}

static void test_two_threads(void **state) {
	(void)state;
	shared_t s;
	memset(&s, 0, sizeof(s));
	s.tc = tc_create();
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_fill, &s), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, thread_take, &s), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* And the creating thread last. */
	void *p = LAUNDER(mallocx(SHARED_SIZE, MALLOCX_TCACHE(s.tc)));
	assert_non_null(p);
	if (same_block_checks()) {
		assert_true(shared_has(&s, p));
	}
	dallocx(p, MALLOCX_TCACHE(s.tc));
	assert_int_equal(tc_ctl("tcache.flush", s.tc), 0);
	tc_destroy(s.tc);
}

/* MALLOCX_ARENA with MALLOCX_TCACHE: the cache fills from that arena. */
static void test_arena(void **state) {
	(void)state;
	unsigned arena = 0;
	MALLCTL_READ("arenas.create", arena);
	unsigned tc = tc_create();
	int flags = MALLOCX_ARENA(arena) | MALLOCX_TCACHE(tc);
	size_t slabs = 0;
	mp_epoch();
	assert_int_equal(mallctl_fmt(&slabs, &(size_t){sizeof(slabs)}, NULL,
	    0, "stats.arenas.%u.small.curslabs", arena), 0);
	assert_int_equal(slabs, 0);
	void *p = LAUNDER(mallocx(100, flags));
	void *big = LAUNDER(mallocx(200 * MP_KiB, flags));
	assert_non_null(p);
	assert_non_null(big);
	mp_epoch();
	assert_int_equal(mallctl_fmt(&slabs, &(size_t){sizeof(slabs)}, NULL,
	    0, "stats.arenas.%u.small.curslabs", arena), 0);
	/* (A sampled block comes from arena 0's profiler cache.) */
	assert_true(slabs >= 1 || !same_block_checks());
	size_t large = 0;
	assert_int_equal(mallctl_fmt(&large, &(size_t){sizeof(large)}, NULL,
	    0, "stats.arenas.%u.large.allocated", arena), 0);
	assert_int_equal(large, nallocx(200 * MP_KiB, 0));
	dallocx(p, flags);
	dallocx(big, flags);
	tc_destroy(tc);
}

/* In a child: every *allocx call with an index that names no cache. */
static void bad_index_calls(void *arg) {
	unsigned bad = *(const unsigned *)arg;
	if (mallocx(64, MALLOCX_TCACHE(bad)) != NULL) {
		_exit(3);
	}
	void *q = malloc(64);
	if (q == NULL || rallocx(q, 128, MALLOCX_TCACHE(bad)) != NULL) {
		_exit(4);
	}
	/* The block is good: dallocx frees it as free would. */
	uint64_t d0 = 0, d1 = 0;
	mp_read_u64("thread.deallocated", &d0);
	dallocx(q, MALLOCX_TCACHE(bad));
	mp_read_u64("thread.deallocated", &d1);
	if (d1 - d0 != nallocx(64, 0)) {
		_exit(5);
	}
}

static void test_bad_index(void **state) {
	(void)state;
	bool debug = false;
	MALLCTL_READ("config.debug", debug);
	unsigned destroyed = tc_create();
	tc_destroy(destroyed);
	unsigned bads[] = {TC_MAX, destroyed};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bads); i++) {
		char out[4096], want[128];
		int status = mp_child_stderr(bad_index_calls, &bads[i], out,
		    sizeof(out));
		snprintf(want, sizeof(want), "<malloc_prof>: mallocx(): "
		    "MALLOCX_TCACHE(%u): no such cache", bads[i]);
		MP_ASSERT(strstr(out, want) != NULL, "no \"%s\" in: %s", want,
		    out);
		if (debug) {
			MP_ASSERT(WIFSIGNALED(status) &&
			    WTERMSIG(status) == SIGABRT,
			    "debug build: status %#x, not an abort", status);
		} else {
			MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			    "release build: status %#x: %s", status, out);
			assert_non_null(strstr(out, "rallocx(): MALLOCX_TCACHE"));
			assert_non_null(strstr(out, "dallocx(): MALLOCX_TCACHE"));
		}
	}
}

/* Indices 0 .. 4093 (MALLOCX_TCACHE's 12 bits), then EFAULT. */
static void test_limit(void **state) {
	(void)state;
	static unsigned tcs[TC_MAX + 2];
	static bool seen[TC_MAX + 1];
	unsigned n = 0;
	for (;;) {
		unsigned ind = UINT_MAX;
		size_t sz = sizeof(ind);
		int r = mallctl("tcache.create", &ind, &sz, NULL, 0);
		if (r != 0) {
			assert_int_equal(r, EFAULT);
			break;
		}
		MP_ASSERT(n <= TC_MAX && ind <= TC_MAX && !seen[ind],
		    "create %u gave %u", n, ind);
		seen[ind] = true;
		tcs[n++] = ind;
	}
	/* Every earlier test destroyed its caches. */
	assert_int_equal(n, TC_MAX + 1);
	assert_true(seen[TC_MAX]);
	void *p = LAUNDER(mallocx(48, MALLOCX_TCACHE(TC_MAX)));
	assert_non_null(p);
	dallocx(p, MALLOCX_TCACHE(TC_MAX));
	if (same_block_checks()) {
		assert_ptr_equal(LAUNDER(mallocx(48, MALLOCX_TCACHE(TC_MAX))),
		    p);
		dallocx(p, MALLOCX_TCACHE(TC_MAX));
	}
	for (unsigned i = 0; i < n; i++) {
		tc_destroy(tcs[i]);
	}
	assert_int_equal(tc_create(), 0);
	tc_destroy(0);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_distinct),
		cmocka_unit_test(test_ctl_errors),
		cmocka_unit_test(test_isolation),
		cmocka_unit_test(test_flush),
		cmocka_unit_test(test_destroy_reuse),
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_arena),
		cmocka_unit_test(test_bad_index),
		/* Last: it needs every index free. */
		cmocka_unit_test(test_limit),
	};
	return mp_run_tests(tests);
}
