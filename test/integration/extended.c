/*
 * test/integration/extended.c - the non-standard (jemalloc) API:
 * mallocx, rallocx, xallocx, sallocx, dallocx, sdallocx and nallocx with
 * MALLOCX_LG_ALIGN, MALLOCX_ALIGN, MALLOCX_ZERO, MALLOCX_TCACHE_NONE and
 * MALLOCX_ARENA.
 */
#include "../test_util.h"

static size_t next_class(size_t c) {
	return mp_expected_size_class(c + 1);
}

/* Fills freshly freed memory of roughly n bytes with 0xff, several times. */
static void make_dirty(size_t n, int count) {
	void *ptrs[16];
	if (count > 16) {
		count = 16;
	}
	for (int i = 0; i < count; i++) {
		ptrs[i] = LAUNDER(malloc(n));
		assert_non_null(ptrs[i]);
		memset(ptrs[i], 0xff, malloc_usable_size(ptrs[i]));
	}
	for (int i = 0; i < count; i++) {
		free(ptrs[i]);
	}
}

static size_t arena_pactive(unsigned arena) {
	size_t v = 0;
	mp_epoch();
	int r = mallctl_fmt(&v, &(size_t){sizeof(v)}, NULL, 0,
	    "stats.arenas.%u.pactive", arena);
	if (r != 0) {
		MP_FAIL("stats.arenas.%u.pactive: %d", arena, r);
	}
	return v;
}

/* Bytes in large blocks of one arena: unlike pactive, the cache GC that
 * may run inside any allocation cannot lower it. */
static size_t arena_large_allocated(unsigned arena) {
	size_t v = 0;
	mp_epoch();
	int r = mallctl_fmt(&v, &(size_t){sizeof(v)}, NULL, 0,
	    "stats.arenas.%u.large.allocated", arena);
	if (r != 0) {
		MP_FAIL("stats.arenas.%u.large.allocated: %d", arena, r);
	}
	return v;
}

/* ------------------------------------------------------------------------ */

static void test_mallocx_basic(void **state) {
	(void)state;
	for (size_t c = 16; c <= 8 * MP_MiB; c = next_class(c)) {
		size_t probes[] = {c - 1, c, c + 1};
		for (size_t i = 0; i < 3; i++) {
			size_t n = probes[i];
			unsigned char *p = LAUNDER((unsigned char *)mallocx(n, 0));
			MP_ASSERT(p != NULL, "mallocx(%zu, 0) failed", n);
			assert_true(mp_is_aligned(p, 16));
			size_t usable = sallocx(p, 0);
			MP_ASSERT(usable == nallocx(n, 0),
			    "sallocx(mallocx(%zu)) = %zu, nallocx = %zu", n,
			    usable, nallocx(n, 0));
			assert_int_equal(usable, malloc_usable_size(p));
			assert_true(usable >= n);
			p[0] = 1;
			p[usable - 1] = 2;
			p[usable / 2] = 3;
			dallocx(p, 0);
		}
	}
}

/* mallocx with MALLOCX_ALIGN / MALLOCX_LG_ALIGN, freed every way. */
static void test_mallocx_align(void **state) {
	(void)state;
	for (unsigned lg = 4; lg <= 23; lg++) {
		size_t a = (size_t)1 << lg;
		const size_t sizes[] = {1, a / 2, a - 1, a, a + 1, 2 * a + 3,
		    100, 5000, 70000};
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			size_t n = sizes[i];
			int flags = (i % 2 == 0) ? MALLOCX_LG_ALIGN(lg) :
			    MALLOCX_ALIGN(a);
			unsigned char *p = LAUNDER((unsigned char *)mallocx(n,
			    flags));
			MP_ASSERT(p != NULL, "mallocx(%zu, align %zu) failed", n,
			    a);
			MP_ASSERT(mp_is_aligned(p, a),
			    "mallocx(%zu, align %zu) = %p", n, a, (void *)p);
			size_t usable = sallocx(p, 0);
			MP_ASSERT(usable == nallocx(n, flags),
			    "mallocx(%zu, align %zu): sallocx %zu nallocx %zu",
			    n, a, usable, nallocx(n, flags));
			MP_ASSERT(usable == sallocx(p, flags), "sallocx flags");
			assert_true(usable >= n);
			pattern_fill(p, usable, n * 31 + lg);
			assert_int_equal(pattern_check(p, usable, n * 31 + lg),
			    SIZE_MAX);
			switch (i % 4) {
			case 0:
				sdallocx(p, n, flags);
				break;
			case 1:
				sdallocx(p, usable, flags);
				break;
			case 2:
				dallocx(p, flags);
				break;
			default:
				free(p);
				break;
			}
		}
	}
}

/* MALLOCX_ZERO memory is zero over its usable size, also when reused dirty. */
static void test_mallocx_zero(void **state) {
	(void)state;
	const size_t sizes[] = {1, 16, 24, 100, 1000, 4096, 14336, 16384, 20000,
	    100000, 1 * MP_MiB, 3 * MP_MiB + 5};
	const int extra_flags[] = {0, MALLOCX_TCACHE_NONE, MALLOCX_ALIGN(64),
	    MALLOCX_LG_ALIGN(12)};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		for (size_t f = 0; f < MP_ARRAY_SIZE(extra_flags); f++) {
			int flags = MALLOCX_ZERO | extra_flags[f];
			for (int round = 0; round < 8; round++) {
				size_t n = sizes[i];
				make_dirty(n, 2);
				unsigned char *p = LAUNDER((unsigned char *)
				    mallocx(n, flags));
				assert_non_null(p);
				size_t usable = sallocx(p, 0);
				size_t bad = first_nonzero(p, usable);
				MP_ASSERT(bad == SIZE_MAX,
				    "mallocx(%zu, ZERO|0x%x) round %d: byte %zu "
				    "of %zu not zero", n, (unsigned)extra_flags[f],
				    round, bad, usable);
				memset(p, 0xff, usable);
				dallocx(p, extra_flags[f]);
			}
		}
	}
}

static void test_mallocx_tcache_none(void **state) {
	(void)state;
	const size_t sizes[] = {8, 48, 200, 3000, 14336, 20000, 300000};
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			size_t n = sizes[i];
			/* No tcache on either side. */
			void *p = LAUNDER(mallocx(n, MALLOCX_TCACHE_NONE));
			assert_non_null(p);
			pattern_fill(p, n, n);
			assert_int_equal(pattern_check(p, n, n), SIZE_MAX);
			dallocx(p, MALLOCX_TCACHE_NONE);
			/* Mixed: tcache alloc, uncached free, and back. */
			p = LAUNDER(mallocx(n, 0));
			assert_non_null(p);
			dallocx(p, MALLOCX_TCACHE_NONE);
			p = LAUNDER(mallocx(n, MALLOCX_TCACHE_NONE));
			assert_non_null(p);
			dallocx(p, 0);
			p = LAUNDER(mallocx(n, MALLOCX_TCACHE_NONE));
			assert_non_null(p);
			sdallocx(p, n, MALLOCX_TCACHE_NONE);
		}
	}
}

static void test_mallocx_arena(void **state) {
	(void)state;
	unsigned narenas0 = 0, narenas1 = 0, a = 0;
	MALLCTL_READ("arenas.narenas", narenas0);
	size_t sz = sizeof(a);
	assert_int_equal(mallctl("arenas.create", &a, &sz, NULL, 0), 0);
	assert_int_equal(sz, sizeof(a));
	MALLCTL_READ("arenas.narenas", narenas1);
	assert_int_equal(narenas1, narenas0 + 1);
	assert_int_equal(a, narenas0);

	size_t page = 0;
	MALLCTL_READ("arenas.page", page);
	/* A large block placed in the new arena shows up in its pactive. */
	size_t before = arena_pactive(a);
	size_t n = 2 * MP_MiB;
	void *p = LAUNDER(mallocx(n, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE));
	assert_non_null(p);
	memset(p, 1, n);
	size_t during = arena_pactive(a);
	MP_ASSERT(during >= before + n / page,
	    "arena %u pactive %zu -> %zu after a %zu-byte mallocx", a, before,
	    during, n);
	dallocx(p, MALLOCX_TCACHE_NONE);
	size_t after = arena_pactive(a);
	MP_ASSERT(after + n / page <= during,
	    "arena %u pactive %zu -> %zu after dallocx", a, during, after);

	/* Small objects from the arena, freed with and without the flag. */
	void *small[200];
	for (int i = 0; i < 200; i++) {
		small[i] = LAUNDER(mallocx(64 + (size_t)i, MALLOCX_ARENA(a)));
		assert_non_null(small[i]);
		memset(small[i], i, 64);
	}
	MP_ASSERT(arena_pactive(a) > 0, "arena %u has no active pages", a);
	for (int i = 0; i < 200; i++) {
		assert_int_equal(first_not_byte(small[i], 64,
		    (unsigned char)i), SIZE_MAX);
		if (i % 2 == 0) {
			dallocx(small[i], 0);
		} else {
			free(small[i]);
		}
	}

	/* thread.arena = a routes plain malloc to the new arena. */
	unsigned old_arena = 0, cur = 0;
	MALLCTL_READ("thread.arena", old_arena);
	MALLCTL_WRITE("thread.arena", a);
	MALLCTL_READ("thread.arena", cur);
	assert_int_equal(cur, a);
	before = arena_large_allocated(a);
	p = LAUNDER(malloc(n));
	assert_non_null(p);
	during = arena_large_allocated(a);
	MP_ASSERT(during >= before + n,
	    "thread.arena=%u: large.allocated %zu -> %zu after malloc(%zu)",
	    a, before, during, n);
	free(p);
	MALLCTL_WRITE("thread.arena", old_arena);
}

static void test_rallocx_content(void **state) {
	(void)state;
	const struct {
		size_t from, to;
	} cases[] = {
		{16, 100}, {100, 3000}, {1000, 10}, {100, 100000},
		{14336, 16384}, {100000, 3 * MP_MiB}, {20000, 40000},
		{3 * MP_MiB, 50}, {1 * MP_MiB, 20000}, {40000, 16},
		{64 * MP_MiB, 80 * MP_MiB},
	};
	const int flags_set[] = {0, MALLOCX_TCACHE_NONE};
	for (size_t f = 0; f < MP_ARRAY_SIZE(flags_set); f++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
			size_t from = cases[i].from, to = cases[i].to;
			int flags = flags_set[f];
			unsigned char *p = LAUNDER((unsigned char *)mallocx(from,
			    flags));
			assert_non_null(p);
			pattern_fill(p, from, i);
			unsigned char *q = LAUNDER((unsigned char *)rallocx(p, to,
			    flags));
			MP_ASSERT(q != NULL, "rallocx(%zu -> %zu) failed", from,
			    to);
			size_t keep = from < to ? from : to;
			MP_ASSERT(pattern_check(q, keep, i) == SIZE_MAX,
			    "rallocx(%zu -> %zu) lost content", from, to);
			MP_ASSERT(sallocx(q, 0) == nallocx(to, 0),
			    "rallocx(%zu -> %zu): sallocx %zu nallocx %zu", from,
			    to, sallocx(q, 0), nallocx(to, 0));
			memset(q, 0, to);
			dallocx(q, flags);
		}
	}
}

/* rallocx(MALLOCX_ZERO) zeroes everything past the old usable size. */
static void test_rallocx_zero_tail(void **state) {
	(void)state;
	const struct {
		size_t from, to;
	} cases[] = {
		{16, 64}, {20, 48}, {100, 4000}, {1000, 100000}, {20000, 40000},
		{16384, 20480}, {40000, 1 * MP_MiB}, {1 * MP_MiB, 3 * MP_MiB},
		{3 * MP_MiB, 3 * MP_MiB + 200 * MP_KiB},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		size_t from = cases[i].from, to = cases[i].to;
		for (int round = 0; round < 4; round++) {
			make_dirty(to, 3);
			make_dirty(to - from, 3);
			unsigned char *p = LAUNDER((unsigned char *)mallocx(from,
			    0));
			assert_non_null(p);
			size_t old = sallocx(p, 0);
			memset(p, 0xab, old);
			unsigned char *q = LAUNDER((unsigned char *)rallocx(p, to,
			    MALLOCX_ZERO));
			assert_non_null(q);
			size_t usable = sallocx(q, 0);
			assert_true(usable >= to);
			MP_ASSERT(first_not_byte(q, from, 0xab) == SIZE_MAX,
			    "rallocx(%zu -> %zu, ZERO) lost content", from, to);
			size_t bad = first_nonzero(q + old, usable - old);
			MP_ASSERT(bad == SIZE_MAX,
			    "rallocx(%zu -> %zu, ZERO) round %d: byte %zu (old "
			    "usable %zu, new %zu) not zero", from, to, round,
			    bad == SIZE_MAX ? 0 : old + bad, old, usable);
			memset(q, 0xff, usable);
			dallocx(q, 0);
		}
	}

	/*
	 * Growth into a just-freed dirty neighbour: carve a block out of a
	 * bigger dirty one (shrink in place) and grow it back with ZERO.
	 */
	for (int round = 0; round < 4; round++) {
		size_t big = 1 * MP_MiB, small = 64 * MP_KiB;
		unsigned char *p = LAUNDER((unsigned char *)mallocx(big,
		    MALLOCX_TCACHE_NONE));
		assert_non_null(p);
		memset(p, 0xff, big);
		size_t shrunk = xallocx(p, small, 0, 0);
		assert_int_equal(shrunk, sallocx(p, 0));
		unsigned char *q = LAUNDER((unsigned char *)rallocx(p, big,
		    MALLOCX_ZERO | MALLOCX_TCACHE_NONE));
		assert_non_null(q);
		assert_int_equal(first_not_byte(q, small, 0xff), SIZE_MAX);
		size_t bad = first_nonzero(q + shrunk, sallocx(q, 0) - shrunk);
		MP_ASSERT(bad == SIZE_MAX, "regrow after shrink to %zu: byte "
		    "%zu not zero", shrunk, shrunk + bad);
		dallocx(q, MALLOCX_TCACHE_NONE);
	}
}

/* rallocx with an alignment flag returns aligned memory with the content. */
static void test_rallocx_align(void **state) {
	(void)state;
	size_t n = 100;
	unsigned char *p = LAUNDER((unsigned char *)mallocx(n, 0));
	assert_non_null(p);
	pattern_fill(p, n, 5);
	size_t valid = n;
	for (unsigned lg = 4; lg <= 22; lg++) {
		size_t a = (size_t)1 << lg;
		/* Alternate growing and shrinking. */
		size_t to = (lg % 2 == 0) ? a + 3 * lg : 64 + lg;
		unsigned char *q = LAUNDER((unsigned char *)rallocx(p, to,
		    MALLOCX_ALIGN(a)));
		MP_ASSERT(q != NULL, "rallocx(%zu -> %zu, align %zu) failed",
		    n, to, a);
		MP_ASSERT(mp_is_aligned(q, a), "rallocx(align %zu) = %p", a,
		    (void *)q);
		size_t keep = valid < to ? valid : to;
		MP_ASSERT(pattern_check(q, keep, 5) == SIZE_MAX,
		    "rallocx(%zu -> %zu, align %zu) lost content", n, to, a);
		MP_ASSERT(sallocx(q, 0) == nallocx(to, MALLOCX_ALIGN(a)),
		    "rallocx align %zu: sallocx %zu, nallocx %zu", a,
		    sallocx(q, 0), nallocx(to, MALLOCX_ALIGN(a)));
		pattern_fill(q, to, 5);
		valid = to;
		n = to;
		p = q;
	}
	dallocx(p, 0);
}

/* A request that cannot be mapped fails and leaves the block alone. */
static void test_rallocx_fail(void **state) {
	(void)state;
	size_t impossible = (size_t)1 << 50;	/* beyond the address space */
	assert_null(mallocx(opaque_size(impossible), 0));
	unsigned char *p = LAUNDER((unsigned char *)mallocx(5000, 0));
	assert_non_null(p);
	pattern_fill(p, 5000, 1);
	size_t usable = sallocx(p, 0);
	void *q = rallocx(LAUNDER(p), opaque_size(impossible), 0);
	assert_null(q);
	assert_int_equal(sallocx(p, 0), usable);
	assert_int_equal(pattern_check(p, 5000, 1), SIZE_MAX);
	dallocx(p, 0);
}

static void test_xallocx_small(void **state) {
	(void)state;
	unsigned char *p = LAUNDER((unsigned char *)mallocx(100, 0));
	assert_non_null(p);
	size_t usable = sallocx(p, 0);
	assert_int_equal(usable, nallocx(100, 0));
	pattern_fill(p, usable, 3);
	size_t r = xallocx(p, 100, 0, 0);
	assert_int_equal(r, usable);
	r = xallocx(p, usable, 0, 0);
	assert_int_equal(r, usable);
	r = xallocx(p, 50, 0, 0);
	assert_int_equal(r, sallocx(p, 0));
	assert_true(r >= 50);
	r = xallocx(p, 100, 2000, 0);
	assert_int_equal(r, sallocx(p, 0));
	assert_true(r >= 100);
	r = xallocx(p, 5000, 0, 0);
	assert_int_equal(r, sallocx(p, 0));
	MP_ASSERT(r == usable || r >= 5000, "xallocx(100 -> 5000) = %zu", r);
	/* Never moves: the content is where it was. */
	size_t keep = r < usable ? r : usable;
	assert_int_equal(pattern_check(p, keep, 3), SIZE_MAX);
	dallocx(p, 0);
}

static void test_xallocx_large(void **state) {
	(void)state;
	/* Growth: either unchanged or at least the request. */
	const size_t grow[][3] = {
		/* from, size, extra */
		{64 * MP_KiB, 128 * MP_KiB, 0},
		{64 * MP_KiB, 80 * MP_KiB, 64 * MP_KiB},
		{20000, 40000, 0},
		{1 * MP_MiB, 2 * MP_MiB, 0},
		{16384, 16385, 0},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(grow); i++) {
		size_t from = grow[i][0], size = grow[i][1], extra = grow[i][2];
		unsigned char *p = LAUNDER((unsigned char *)mallocx(from, 0));
		assert_non_null(p);
		size_t old = sallocx(p, 0);
		pattern_fill(p, old, i + 100);
		size_t r = xallocx(p, size, extra, 0);
		assert_int_equal(r, sallocx(p, 0));
		MP_ASSERT(r == old || (r >= size &&
		    r <= nallocx(size + extra, 0)),
		    "xallocx(%zu, %zu, %zu) = %zu (old %zu)", from, size, extra,
		    r, old);
		assert_int_equal(pattern_check(p, old, i + 100), SIZE_MAX);
		memset(p, 0, r);
		dallocx(p, 0);
	}

	/* Shrinking a large block in place gives the new size class. */
	size_t n = 1 * MP_MiB;
	unsigned char *p = LAUNDER((unsigned char *)mallocx(n, 0));
	assert_non_null(p);
	pattern_fill(p, n, 42);
	const size_t shrink_to[] = {768 * MP_KiB, 256 * MP_KiB, 100000, 20481,
	    16384};
	for (size_t i = 0; i < MP_ARRAY_SIZE(shrink_to); i++) {
		size_t r = xallocx(p, shrink_to[i], 0, 0);
		MP_ASSERT(r == nallocx(shrink_to[i], 0),
		    "xallocx shrink to %zu = %zu, want %zu", shrink_to[i], r,
		    nallocx(shrink_to[i], 0));
		assert_int_equal(sallocx(p, 0), r);
		assert_int_equal(malloc_usable_size(p), r);
		assert_int_equal(pattern_check(p, r, 42), SIZE_MAX);
	}
	/* A large block cannot become small in place: unchanged size. */
	size_t r = xallocx(p, 100, 0, 0);
	assert_int_equal(r, sallocx(p, 0));
	assert_true(r >= 100);
	assert_int_equal(pattern_check(p, 100, 42), SIZE_MAX);
	dallocx(p, 0);

	/*
	 * Shrink, then grow back into the space just released (which was
	 * filled with 0xff) with MALLOCX_ZERO: any growth must be zeroed.
	 */
	for (int round = 0; round < 4; round++) {
		p = LAUNDER((unsigned char *)mallocx(n, MALLOCX_TCACHE_NONE));
		assert_non_null(p);
		memset(p, 0xff, n);
		size_t small = xallocx(p, 256 * MP_KiB, 0, 0);
		assert_int_equal(small, 256 * MP_KiB);
		r = xallocx(p, n, 0, MALLOCX_ZERO);
		assert_int_equal(r, sallocx(p, 0));
		MP_ASSERT(r == small || r >= n, "regrow: xallocx = %zu", r);
		assert_int_equal(first_not_byte(p, small, 0xff), SIZE_MAX);
		if (r > small) {
			size_t bad = first_nonzero(p + small, r - small);
			MP_ASSERT(bad == SIZE_MAX, "xallocx ZERO regrow: byte "
			    "%zu not zero", small + bad);
		}
		dallocx(p, MALLOCX_TCACHE_NONE);
	}
}

/* sdallocx with the requested or the usable size, with and without flags. */
static void test_sdallocx(void **state) {
	(void)state;
	for (size_t c = 16; c <= 4 * MP_MiB; c = next_class(c)) {
		const size_t sizes[] = {c - 1, c};
		for (size_t i = 0; i < 2; i++) {
			size_t n = sizes[i];
			uint64_t d0 = 0, d1 = 0;
			void *p = LAUNDER(malloc(n));
			assert_non_null(p);
			size_t usable = malloc_usable_size(p);
			MALLCTL_READ("thread.deallocated", d0);
			sdallocx(p, n, 0);
			MALLCTL_READ("thread.deallocated", d1);
			MP_ASSERT(d1 - d0 >= usable, "sdallocx(%zu) counted %"
			    PRIu64, n, d1 - d0);

			p = LAUNDER(mallocx(n, 0));
			assert_non_null(p);
			sdallocx(p, sallocx(p, 0), 0);

			p = LAUNDER(mallocx(n, MALLOCX_TCACHE_NONE));
			assert_non_null(p);
			sdallocx(p, n, MALLOCX_TCACHE_NONE);
		}
	}
	/* Aligned objects: the same alignment flag as at allocation. */
	for (unsigned lg = 4; lg <= 21; lg++) {
		size_t a = (size_t)1 << lg;
		const size_t sizes[] = {1, a - 1, a + 1, 3000};
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			void *p = LAUNDER(mallocx(sizes[i], MALLOCX_LG_ALIGN(lg)));
			assert_non_null(p);
			sdallocx(p, sizes[i], MALLOCX_LG_ALIGN(lg));
			p = NULL;
			assert_int_equal(posix_memalign(&p, a, sizes[i]), 0);
			p = LAUNDER(p);
			sdallocx(p, sizes[i], MALLOCX_ALIGN(a));
			p = LAUNDER(aligned_alloc(a, sizes[i]));
			assert_non_null(p);
			sdallocx(p, malloc_usable_size(p), MALLOCX_ALIGN(a));
		}
	}
	/* After all that, the allocator hands out sound, disjoint memory. */
	enum { N = 3000 };
	static unsigned char *ptrs[N];
	static size_t sizes[N];
	mp_rng_t rng = {99};
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < N; i++) {
			sizes[i] = (size_t)mp_rng_below(&rng, (i % 10 == 0) ?
			    200000 : 2000) + 1;
			ptrs[i] = LAUNDER((unsigned char *)mallocx(sizes[i], 0));
			assert_non_null(ptrs[i]);
			pattern_fill(ptrs[i], sizes[i], i + (size_t)round);
		}
		for (size_t i = 0; i < N; i += 2) {
			assert_int_equal(pattern_check(ptrs[i], sizes[i],
			    i + (size_t)round), SIZE_MAX);
			sdallocx(ptrs[i], sizes[i], 0);
		}
		for (size_t i = 1; i < N; i += 2) {
			assert_int_equal(pattern_check(ptrs[i], sizes[i],
			    i + (size_t)round), SIZE_MAX);
			sdallocx(ptrs[i], sallocx(ptrs[i], 0),
			    MALLOCX_TCACHE_NONE);
		}
	}
}

static void test_nallocx(void **state) {
	(void)state;
	assert_int_equal(nallocx(0, 0), 16);
	assert_int_equal(nallocx(1, 0), 16);
	assert_int_equal(nallocx(17, 0), 32);
	assert_int_equal(nallocx(129, 0), 160);
	assert_int_equal(nallocx(16385, 0), 20480);
	assert_int_equal(nallocx(opaque_size(SIZE_MAX), 0), 0);
	assert_int_equal(nallocx(1, MALLOCX_LG_ALIGN(63)), 0);
	assert_int_equal(nallocx(opaque_size(SIZE_MAX - 100),
	    MALLOCX_ALIGN(4096)), 0);
	/* Flags that do not change the size class. */
	assert_int_equal(nallocx(100, MALLOCX_ZERO), nallocx(100, 0));
	assert_int_equal(nallocx(100, MALLOCX_TCACHE_NONE), nallocx(100, 0));
	assert_int_equal(nallocx(100, MALLOCX_ALIGN(16)), nallocx(100, 0));
	/* Alignment never gives less than the request. */
	for (unsigned lg = 4; lg <= 23; lg++) {
		for (size_t n = 1; n < 100000; n = n * 3 + 1) {
			size_t u = nallocx(n, MALLOCX_LG_ALIGN(lg));
			MP_ASSERT(u >= n && u >= nallocx(n, 0),
			    "nallocx(%zu, lg_align %u) = %zu", n, lg, u);
		}
	}
}

/* Memory from one family can be resized or freed by the other. */
static void test_cross_api(void **state) {
	(void)state;
	unsigned char *p = LAUNDER((unsigned char *)mallocx(300, 0));
	assert_non_null(p);
	pattern_fill(p, 300, 1);
	p = LAUNDER((unsigned char *)realloc(p, 30000));
	assert_non_null(p);
	assert_int_equal(pattern_check(p, 300, 1), SIZE_MAX);
	free(p);

	p = LAUNDER((unsigned char *)malloc(300));
	assert_non_null(p);
	pattern_fill(p, 300, 2);
	p = LAUNDER((unsigned char *)rallocx(p, 30000, 0));
	assert_non_null(p);
	assert_int_equal(pattern_check(p, 300, 2), SIZE_MAX);
	assert_int_equal(malloc_usable_size(p), sallocx(p, 0));
	dallocx(p, 0);

	p = LAUNDER((unsigned char *)calloc(10, 30));
	assert_non_null(p);
	assert_int_equal(sallocx(p, 0), nallocx(300, 0));
	sdallocx(p, 300, 0);

	void *v = NULL;
	assert_int_equal(posix_memalign(&v, 256, 1000), 0);
	p = LAUNDER((unsigned char *)v);
	pattern_fill(p, 1000, 3);
	p = LAUNDER((unsigned char *)rallocx(p, 5000, MALLOCX_ALIGN(256)));
	assert_non_null(p);
	assert_true(mp_is_aligned(p, 256));
	assert_int_equal(pattern_check(p, 1000, 3), SIZE_MAX);
	free(p);

	p = LAUNDER((unsigned char *)mallocx(4000, MALLOCX_ALIGN(4096)));
	assert_non_null(p);
	assert_true(mp_is_aligned(p, 4096));
	assert_int_equal(malloc_usable_size(p), sallocx(p, 0));
	free(p);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mallocx_basic),
		cmocka_unit_test(test_mallocx_align),
		cmocka_unit_test(test_mallocx_zero),
		cmocka_unit_test(test_mallocx_tcache_none),
		cmocka_unit_test(test_mallocx_arena),
		cmocka_unit_test(test_rallocx_content),
		cmocka_unit_test(test_rallocx_zero_tail),
		cmocka_unit_test(test_rallocx_align),
		cmocka_unit_test(test_rallocx_fail),
		cmocka_unit_test(test_xallocx_small),
		cmocka_unit_test(test_xallocx_large),
		cmocka_unit_test(test_sdallocx),
		cmocka_unit_test(test_nallocx),
		cmocka_unit_test(test_cross_api),
	};
	return mp_run_tests(tests);
}
