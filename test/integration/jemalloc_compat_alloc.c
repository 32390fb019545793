/*
 * test/integration/jemalloc_compat_alloc.c - the behaviour that jemalloc
 * 5.3's public-API integration tests check of the standard calls and of
 * the per-thread controls, written again for this library (issue 18):
 * aligned_alloc.c, posix_memalign.c, malloc.c, overflow.c, allocated.c,
 * thread_arena.c, thread_tcache_enabled.c, MALLOCX_ARENA.c and
 * sdallocx.c.  Each test names the jemalloc test it stands for; the
 * checks are those tests' (errors and errno, alignment and usable size
 * over a sweep, counters, arena and cache switches from several
 * threads), not their code.
 */
#include "../test_util.h"

/* jemalloc's sweeps go up to 8 MiB alignments (MAXALIGN). */
#define COMPAT_MAXALIGN ((size_t)1 << 23)

/* Between sweeps, as jemalloc's tests do, so that they do not pile up
 * dirty memory. */
static void compat_purge(void) {
	assert_int_equal(mallctl("arena.0.purge", NULL, NULL, NULL, 0), 0);
}

static size_t compat_largemax(void) {
	unsigned n = 0;
	MALLCTL_READ("arenas.nlextents", n);
	size_t mib[4], miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arenas.lextent.0.size", mib,
	    &miblen), 0);
	mib[2] = n - 1;
	size_t v = 0, len = sizeof(v);
	assert_int_equal(mallctlbymib(mib, miblen, &v, &len, NULL, 0), 0);
	return v;
}

/* ------------------------------------------------ aligned_alloc.c */

/* An alignment that is not a power of two (0 included) is EINVAL. */
static void test_aligned_alloc_alignment_errors(void **state) {
	(void)state;
	errno = 0;
	void *p = aligned_alloc(opaque_size(0), 1);
	MP_ASSERT(p == NULL && errno == EINVAL, "aligned_alloc(0, 1): %p, "
	    "errno %d", p, errno);
	for (size_t a = sizeof(size_t); a < COMPAT_MAXALIGN; a <<= 1) {
		errno = 0;
		p = aligned_alloc(opaque_size(a + 1), 1);
		MP_ASSERT(p == NULL && errno == EINVAL, "aligned_alloc(%zu, "
		    "1): %p, errno %d", a + 1, p, errno);
	}
}

/* Requests no address space can hold are ENOMEM. */
static void test_aligned_alloc_oom_errors(void **state) {
	(void)state;
	const size_t cases[][2] = {
		{(size_t)1 << 63, (size_t)1 << 63},
		{(size_t)1 << 62, ((size_t)3 << 62) + 1},
		{16, SIZE_MAX - 15},
	};
	for (size_t k = 0; k < MP_ARRAY_SIZE(cases); k++) {
		errno = 0;
		void *p = aligned_alloc(opaque_size(cases[k][0]),
		    opaque_size(cases[k][1]));
		MP_ASSERT(p == NULL && errno == ENOMEM, "aligned_alloc(%#zx, "
		    "%#zx): %p, errno %d", cases[k][0], cases[k][1], p, errno);
	}
}

/*
 * Alignments 8 .. 8 MiB, sizes up to three alignments in jemalloc's
 * steps, four blocks at a time: each is aligned and its usable size
 * holds the request.  alloc: 0 aligned_alloc, 1 posix_memalign.
 */
static void compat_align_sweep(int alloc) {
	void *ps[4];
	for (size_t a = 8; a <= COMPAT_MAXALIGN; a <<= 1) {
		size_t total = 0;
		for (size_t sz = 1; sz < 3 * a && sz < ((size_t)1 << 31);
		    sz += (a >> 2) - 1) {
			unsigned n = 0;
			for (; n < MP_ARRAY_SIZE(ps); n++) {
				void *p = NULL;
				if (alloc == 0) {
					p = aligned_alloc(a, sz);
				} else {
					int r = posix_memalign(&p, a, sz);
					MP_ASSERT(r == 0, "posix_memalign(%zu, "
					    "%zu): %d", a, sz, r);
				}
				MP_ASSERT(p != NULL, "alignment %zu, size %zu",
				    a, sz);
				MP_ASSERT(((uintptr_t)p & (a - 1)) == 0,
				    "%p not aligned to %zu", p, a);
				size_t usz = malloc_usable_size(p);
				MP_ASSERT(usz >= sz, "usable %zu < %zu", usz,
				    sz);
				ps[n] = p;
				total += usz;
				if (total >= 2 * COMPAT_MAXALIGN) {
					n++;
					break;
				}
			}
			for (unsigned i = 0; i < n; i++)
				free(ps[i]);
		}
		compat_purge();
	}
}

static void test_aligned_alloc_alignment_and_size(void **state) {
	(void)state;
	compat_align_sweep(0);
}

/* ----------------------------------------------- posix_memalign.c */

/* Not a power of two, or under sizeof(void *): EINVAL, *memptr left. */
static void test_posix_memalign_alignment_errors(void **state) {
	(void)state;
	void *p = (void *)0x1;
	for (size_t a = 0; a < sizeof(void *); a++) {
		int r = posix_memalign(&p, opaque_size(a), 1);
		MP_ASSERT(r == EINVAL, "posix_memalign(%zu, 1): %d", a, r);
	}
	for (size_t a = sizeof(size_t); a < COMPAT_MAXALIGN; a <<= 1) {
		int r = posix_memalign(&p, opaque_size(a + 1), 1);
		MP_ASSERT(r == EINVAL, "posix_memalign(%zu, 1): %d", a + 1,
		    r);
	}
	assert_ptr_equal(p, (void *)0x1);
}

static void test_posix_memalign_oom_errors(void **state) {
	(void)state;
	const size_t cases[][2] = {
		{(size_t)1 << 63, (size_t)1 << 63},
		{(size_t)1 << 62, ((size_t)3 << 62) + 1},
		{16, SIZE_MAX - 15},
	};
	for (size_t k = 0; k < MP_ARRAY_SIZE(cases); k++) {
		void *p = NULL;
		int r = posix_memalign(&p, opaque_size(cases[k][0]),
		    opaque_size(cases[k][1]));
		MP_ASSERT(r == ENOMEM, "posix_memalign(%#zx, %#zx): %d",
		    cases[k][0], cases[k][1], r);
	}
}

static void test_posix_memalign_alignment_and_size(void **state) {
	(void)state;
	compat_align_sweep(1);
}

/* ------------------------------------------------------- malloc.c */

/* malloc(0) gives a block with a usable size. */
static void test_malloc_zero_alloc(void **state) {
	(void)state;
	void *p = malloc(opaque_size(0));
	assert_non_null(p);
	assert_true(malloc_usable_size(p) > 0);
	free(p);
}

/* ----------------------------------------------------- overflow.c */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
/* One byte over the largest size class, and SIZE_MAX: NULL from malloc,
 * calloc and realloc (the old block kept). */
static void test_overflow(void **state) {
	(void)state;
	size_t max = compat_largemax();
	assert_null(malloc(opaque_size(max + 1)));
	assert_null(malloc(opaque_size(SIZE_MAX)));
	assert_null(calloc(1, opaque_size(max + 1)));
	assert_null(calloc(1, opaque_size(SIZE_MAX)));
	char *p = malloc(1);
	assert_non_null(p);
	*p = 'x';
	assert_null(realloc(p, opaque_size(max + 1)));
	assert_null(realloc(p, opaque_size(SIZE_MAX)));
	assert_int_equal(*LAUNDER(p), 'x');
	free(p);
}
#pragma GCC diagnostic pop

/* ---------------------------------------------------- allocated.c */

/* The calling thread's counters and their pointers: the pointers stay
 * put, read the counters, and a malloc/free moves each by at least the
 * usable size.  Returns a failure count (MP_CHECK: any thread). */
static void *compat_allocated_body(void *arg) {
	(void)arg;
	uint64_t a0, a1, d0, d1, *ap0, *ap1, *dp0, *dp1;
	MP_CHECK(mp_read_u64("thread.allocated", &a0) == 0, "allocated");
	size_t len = sizeof(ap0);
	MP_CHECK(mallctl("thread.allocatedp", &ap0, &len, NULL, 0) == 0,
	    "allocatedp");
	MP_CHECK(*ap0 == a0, "*allocatedp %" PRIu64 " != %" PRIu64, *ap0,
	    a0);
	MP_CHECK(mp_read_u64("thread.deallocated", &d0) == 0, "deallocated");
	len = sizeof(dp0);
	MP_CHECK(mallctl("thread.deallocatedp", &dp0, &len, NULL, 0) == 0,
	    "deallocatedp");
	MP_CHECK(*dp0 == d0, "*deallocatedp");

	void *p = malloc(opaque_size(1));
	MP_CHECK(p != NULL, "malloc(1)");
	MP_CHECK(mp_read_u64("thread.allocated", &a1) == 0, "allocated");
	len = sizeof(ap1);
	MP_CHECK(mallctl("thread.allocatedp", &ap1, &len, NULL, 0) == 0,
	    "allocatedp");
	MP_CHECK(*ap1 == a1 && ap1 == ap0, "allocatedp moved or differs");
	size_t usz = malloc_usable_size(p);
	MP_CHECK(a0 + usz <= a1, "allocated %" PRIu64 " -> %" PRIu64
	    " for %zu bytes", a0, a1, usz);
	free(p);
	MP_CHECK(mp_read_u64("thread.deallocated", &d1) == 0, "deallocated");
	len = sizeof(dp1);
	MP_CHECK(mallctl("thread.deallocatedp", &dp1, &len, NULL, 0) == 0,
	    "deallocatedp");
	MP_CHECK(*dp1 == d1 && dp1 == dp0, "deallocatedp moved or differs");
	MP_CHECK(d0 + usz <= d1, "deallocated %" PRIu64 " -> %" PRIu64, d0,
	    d1);
	return NULL;
}

/* Main thread, a new thread, and again, as jemalloc runs them. */
static void test_allocated(void **state) {
	(void)state;
	for (int k = 0; k < 5; k++) {
		if (k % 2 == 0) {
			compat_allocated_body(NULL);
		} else {
			pthread_t t;
			assert_int_equal(pthread_create(&t, NULL,
			    compat_allocated_body, NULL), 0);
			assert_int_equal(pthread_join(t, NULL), 0);
		}
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ------------------------------------------------- thread_arena.c */

static void *compat_thread_arena_body(void *arg) {
	unsigned want = *(const unsigned *)arg, got = UINT_MAX;
	free(malloc(opaque_size(1)));
	size_t len = sizeof(got);
	int r = mallctl("thread.arena", &got, &len, &want, sizeof(want));
	MP_CHECK(r == 0, "thread.arena write: %d", r);
	len = sizeof(got);
	r = mallctl("thread.arena", &got, &len, NULL, 0);
	MP_CHECK(r == 0 && got == want, "thread.arena: %d, %u not %u", r,
	    got, want);
	return NULL;
}

/* Ten threads move to the main thread's arena. */
static void test_thread_arena(void **state) {
	(void)state;
	unsigned main_arena = UINT_MAX;
	void *p = malloc(opaque_size(1));
	assert_non_null(p);
	MALLCTL_READ("thread.arena", main_arena);
	pthread_t t[10];
	for (unsigned i = 0; i < MP_ARRAY_SIZE(t); i++)
		assert_int_equal(pthread_create(&t[i], NULL,
		    compat_thread_arena_body, &main_arena), 0);
	for (unsigned i = 0; i < MP_ARRAY_SIZE(t); i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	free(p);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ---------------------------------------- thread_tcache_enabled.c */

/* Writes want and checks the old value read back is was. */
static void compat_tcache_set(bool want, bool was) {
	bool old = !was;
	size_t len = sizeof(old);
	int r = mallctl("thread.tcache.enabled", &old, &len, &want,
	    sizeof(want));
	MP_CHECK(r == 0 && old == was, "thread.tcache.enabled := %d: %d, "
	    "old %d not %d", want, r, old, was);
}

static void *compat_tcache_enabled_body(void *arg) {
	(void)arg;
	bool e0 = false;
	size_t len = sizeof(e0);
	MP_CHECK(mallctl("thread.tcache.enabled", &e0, &len, NULL, 0) == 0,
	    "read");
	if (e0)
		compat_tcache_set(false, true);
	compat_tcache_set(true, false);
	compat_tcache_set(true, true);
	compat_tcache_set(false, true);
	compat_tcache_set(false, false);
	/* The same with allocations in between. */
	free(malloc(opaque_size(1)));
	compat_tcache_set(true, false);
	free(malloc(opaque_size(1)));
	compat_tcache_set(true, true);
	free(malloc(opaque_size(1)));
	compat_tcache_set(false, true);
	free(malloc(opaque_size(1)));
	compat_tcache_set(false, false);
	free(malloc(opaque_size(1)));
	/* Leave the thread as the option left it. */
	if (e0)
		compat_tcache_set(true, false);
	return NULL;
}

static void test_thread_tcache_enabled(void **state) {
	(void)state;
	for (int k = 0; k < 5; k++) {
		if (k % 2 == 0) {
			compat_tcache_enabled_body(NULL);
		} else {
			pthread_t t;
			assert_int_equal(pthread_create(&t, NULL,
			    compat_tcache_enabled_body, NULL), 0);
			assert_int_equal(pthread_join(t, NULL), 0);
		}
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ------------------------------------------------ MALLOCX_ARENA.c */

static void *compat_mallocx_arena_body(void *arg) {
	unsigned i = (unsigned)(uintptr_t)arg, a = 0;
	size_t len = sizeof(a);
	int r = mallctl("arenas.create", &a, &len, NULL, 0);
	MP_CHECK(r == 0, "arenas.create: %d", r);
	if (i % 4 != 3) {
		static const char *const dss[] = {"disabled", "primary",
		    "secondary"};
		const char *d = dss[i % 3];
		size_t mib[3], miblen = MP_ARRAY_SIZE(mib);
		MP_CHECK(mallctlnametomib("arena.0.dss", mib, &miblen) == 0,
		    "nametomib");
		mib[1] = a;
		/* sbrk is supported (config: dss), so every mode is 0. */
		r = mallctlbymib(mib, miblen, NULL, NULL, &d, sizeof(d));
		MP_CHECK(r == 0, "arena.%u.dss := %s: %d", a, d, r);
	}
	void *p = mallocx(1, MALLOCX_ARENA(a));
	MP_CHECK(p != NULL, "mallocx(1, MALLOCX_ARENA(%u))", a);
	unsigned got = UINT_MAX;
	len = sizeof(got);
	r = mallctl("arenas.lookup", &got, &len, &p, sizeof(p));
	MP_CHECK(r == 0 && got == a, "arenas.lookup: %d, %u not %u", r, got,
	    a);
	dallocx(p, 0);
	return NULL;
}

/* Ten threads, each with an arena of its own, some of them using sbrk. */
static void test_mallocx_arena(void **state) {
	(void)state;
	pthread_t t[10];
	for (unsigned i = 0; i < MP_ARRAY_SIZE(t); i++)
		assert_int_equal(pthread_create(&t[i], NULL,
		    compat_mallocx_arena_body, (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < MP_ARRAY_SIZE(t); i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* ----------------------------------------------------- sdallocx.c */

static void test_sdallocx_basic(void **state) {
	(void)state;
	void *p = mallocx(64, 0);
	assert_non_null(p);
	sdallocx(p, 64, 0);
}

/* Sized frees of aligned, zeroed blocks with the size and alignment of
 * the request (4 MiB alignments at most, as jemalloc's). */
static void test_sdallocx_alignment_and_size(void **state) {
	(void)state;
	const size_t maxalign = (size_t)1 << 22;
	void *ps[3];
	for (size_t a = 8; a <= maxalign; a <<= 1) {
		size_t total = 0;
		for (size_t sz = 1; sz < 3 * a && sz < ((size_t)1 << 31);
		    sz += (a >> 2) - 1) {
			unsigned n = 0;
			for (; n < MP_ARRAY_SIZE(ps); n++) {
				int fl = MALLOCX_ALIGN(a) | MALLOCX_ZERO;
				size_t nsz = nallocx(sz, fl);
				ps[n] = mallocx(sz, fl);
				MP_ASSERT(ps[n] != NULL && nsz >= sz,
				    "alignment %zu, size %zu", a, sz);
				MP_ASSERT(sallocx(ps[n], 0) == nsz,
				    "sallocx %zu != nallocx %zu",
				    sallocx(ps[n], 0), nsz);
				total += nsz;
				if (total >= 2 * maxalign) {
					n++;
					break;
				}
			}
			for (unsigned i = 0; i < n; i++)
				sdallocx(ps[i], sz, MALLOCX_ALIGN(a));
		}
	}
	compat_purge();
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aligned_alloc_alignment_errors),
		cmocka_unit_test(test_aligned_alloc_oom_errors),
		cmocka_unit_test(test_aligned_alloc_alignment_and_size),
		cmocka_unit_test(test_posix_memalign_alignment_errors),
		cmocka_unit_test(test_posix_memalign_oom_errors),
		cmocka_unit_test(test_posix_memalign_alignment_and_size),
		cmocka_unit_test(test_malloc_zero_alloc),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_allocated),
		cmocka_unit_test(test_thread_arena),
		cmocka_unit_test(test_thread_tcache_enabled),
		cmocka_unit_test(test_mallocx_arena),
		cmocka_unit_test(test_sdallocx_basic),
		cmocka_unit_test(test_sdallocx_alignment_and_size),
	};
	return mp_run_tests(tests);
}
