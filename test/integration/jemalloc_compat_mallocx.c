/*
 * test/integration/jemalloc_compat_mallocx.c - the behaviour that jemalloc
 * 5.3's integration tests mallocx.c, rallocx.c and xallocx.c check of the
 * non-standard API, written again for this library (issue 18): sizes that
 * cannot be had give NULL (or leave xallocx's block as it was), nallocx,
 * sallocx and the block agree over a sweep of sizes and alignments,
 * rallocx keeps the contents and zeroes what MALLOCX_ZERO adds, and
 * xallocx resizes in place within the bounds jemalloc's tests set.  The
 * .conf turns junk filling off, as those tests do (with junk the bytes
 * beyond a shrink are not kept).
 */
#include "../test_util.h"

static unsigned compat_nsizes(const char *name) {
	unsigned v = 0;
	MALLCTL_READ(name, v);
	return v;
}

/* arenas.bin.<ind>.size or arenas.lextent.<ind>.size by MIB, as the
 * jemalloc tests read them. */
static size_t compat_size(const char *name, size_t ind) {
	size_t mib[4], miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib(name, mib, &miblen), 0);
	mib[2] = ind;
	size_t v = 0, len = sizeof(v);
	assert_int_equal(mallctlbymib(mib, miblen, &v, &len, NULL, 0), 0);
	return v;
}

static size_t compat_small(size_t ind) {
	return compat_size("arenas.bin.0.size", ind);
}

static size_t compat_large(size_t ind) {
	return compat_size("arenas.lextent.0.size", ind);
}

static size_t compat_largemax(void) {
	return compat_large(compat_nsizes("arenas.nlextents") - 1);
}

static void compat_purge(void) {
	assert_int_equal(mallctl("arena.0.purge", NULL, NULL, NULL, 0), 0);
}

/* The first byte of p[off, off + len) that is not c, or SIZE_MAX. */
static size_t compat_bad_byte(const void *p, unsigned char c, size_t off,
    size_t len) {
	const unsigned char *b = LAUNDER((const unsigned char *)p);
	for (size_t i = off; i < off + len; i++) {
		if (b[i] != c)
			return i;
	}
	return SIZE_MAX;
}

/* An arena of the tests' own for the in-place tests, so that nothing
 * else (the profiler's records...) takes the pages next to a block. */
static unsigned compat_arena(void) {
	static unsigned ind;
	if (ind == 0) {
		size_t len = sizeof(ind);
		assert_int_equal(mallctl("arenas.create", &ind, &len, NULL,
		    0), 0);
	}
	return ind;
}

/* ------------------------------------------------------- mallocx.c */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
static void test_mallocx_overflow(void **state) {
	(void)state;
	size_t max = compat_largemax();
	assert_null(mallocx(opaque_size(max + 1), 0));
	assert_null(mallocx(opaque_size((size_t)PTRDIFF_MAX + 1), 0));
	assert_null(mallocx(opaque_size(SIZE_MAX), 0));
	assert_null(mallocx(1, MALLOCX_ALIGN(opaque_size((size_t)PTRDIFF_MAX
	    + 1))));
}

/* Three blocks of the largest class cannot all exist; alignments of
 * half the address space cannot be had. */
static void test_mallocx_oom(void **state) {
	(void)state;
	size_t max = compat_largemax();
	void *ps[3];
	bool oom = false;
	for (unsigned i = 0; i < MP_ARRAY_SIZE(ps); i++) {
		ps[i] = mallocx(opaque_size(max), 0);
		oom |= ps[i] == NULL;
	}
	assert_true(oom);
	for (unsigned i = 0; i < MP_ARRAY_SIZE(ps); i++) {
		if (ps[i] != NULL)
			dallocx(ps[i], 0);
	}
	compat_purge();
	assert_null(mallocx(opaque_size((size_t)1 << 63),
	    MALLOCX_ALIGN((size_t)1 << 63)));
	assert_null(mallocx(opaque_size((size_t)1 << 63),
	    MALLOCX_ALIGN((size_t)1 << 31)));
}
#pragma GCC diagnostic pop

/* Every size class up to 8 MiB: nallocx == sallocx >= the request, with
 * and without MALLOCX_ZERO. */
static void test_mallocx_basic(void **state) {
	(void)state;
	for (size_t sz = 1; sz < ((size_t)1 << 23); sz = nallocx(sz, 0) + 1) {
		size_t nsz = nallocx(sz, 0);
		assert_true(nsz != 0);
		void *p = mallocx(sz, 0);
		assert_non_null(p);
		size_t rsz = sallocx(p, 0);
		MP_ASSERT(rsz >= sz && rsz == nsz, "size %zu: nallocx %zu, "
		    "sallocx %zu", sz, nsz, rsz);
		dallocx(p, 0);
		p = mallocx(sz, 0);
		assert_non_null(p);
		dallocx(p, 0);
		nsz = nallocx(sz, MALLOCX_ZERO);
		p = mallocx(sz, MALLOCX_ZERO);
		assert_non_null(p);
		MP_ASSERT(sallocx(p, 0) == nsz, "size %zu zeroed", sz);
		dallocx(p, 0);
		compat_purge();
	}
}

static void test_mallocx_alignment_and_size(void **state) {
	(void)state;
	const size_t maxalign = (size_t)1 << 23;
	void *ps[4];
	for (size_t a = 8; a <= maxalign; a <<= 1) {
		size_t total = 0;
		for (size_t sz = 1; sz < 3 * a && sz < ((size_t)1 << 31);
		    sz += (a >> 2) - 1) {
			unsigned n = 0;
			for (; n < MP_ARRAY_SIZE(ps); n++) {
				int fl = MALLOCX_ALIGN(a) | MALLOCX_ZERO;
				size_t nsz = nallocx(sz, fl);
				ps[n] = mallocx(sz, fl);
				MP_ASSERT(nsz != 0 && ps[n] != NULL,
				    "alignment %zu, size %zu", a, sz);
				size_t rsz = sallocx(ps[n], 0);
				MP_ASSERT(rsz >= sz && rsz == nsz, "alignment "
				    "%zu, size %zu: nallocx %zu, sallocx %zu",
				    a, sz, nsz, rsz);
				MP_ASSERT(((uintptr_t)ps[n] & (a - 1)) == 0,
				    "%p not aligned to %zu", ps[n], a);
				total += rsz;
				if (total >= 2 * maxalign) {
					n++;
					break;
				}
			}
			for (unsigned i = 0; i < n; i++)
				dallocx(ps[i], 0);
		}
		compat_purge();
	}
}

/* ------------------------------------------------------- rallocx.c */

/* Up one byte past each class to 12 MiB, then down class by class, three
 * times: each step lands in the next class up or exactly the class
 * below. */
static void test_rallocx_grow_and_shrink(void **state) {
	(void)state;
	static size_t szs[1024];
	void *p = mallocx(1, 0);
	assert_non_null(p);
	szs[0] = sallocx(p, 0);
	for (int cycle = 0; cycle < 3; cycle++) {
		unsigned j;
		for (j = 1; j < MP_ARRAY_SIZE(szs) &&
		    szs[j - 1] < 12 * MP_MiB; j++) {
			void *q = rallocx(p, szs[j - 1] + 1, 0);
			MP_ASSERT(q != NULL, "%zu -> %zu", szs[j - 1],
			    szs[j - 1] + 1);
			szs[j] = sallocx(q, 0);
			MP_ASSERT(szs[j] > szs[j - 1], "grew to %zu from "
			    "%zu", szs[j], szs[j - 1]);
			p = q;
		}
		for (j--; j > 0; j--) {
			void *q = rallocx(p, szs[j - 1], 0);
			MP_ASSERT(q != NULL, "%zu -> %zu", szs[j], szs[j - 1]);
			size_t t = sallocx(q, 0);
			MP_ASSERT(t == szs[j - 1], "shrank to %zu, not %zu", t,
			    szs[j - 1]);
			p = q;
		}
	}
	dallocx(p, 0);
}

/* From 1 B, 3 KiB, 63 KiB and 4095 KiB, 2047 one-byte growths with
 * MALLOCX_ZERO: what the program wrote stays, what is added is 0. */
static void test_rallocx_zero(void **state) {
	(void)state;
	const size_t starts[] = {1, 3 * MP_KiB, 63 * MP_KiB, 4095 * MP_KiB};
	const unsigned char fill = 0xaa;
	for (size_t i = 0; i < MP_ARRAY_SIZE(starts); i++) {
		unsigned char *p = mallocx(starts[i], MALLOCX_ZERO);
		assert_non_null(p);
		size_t psz = sallocx(p, 0);
		size_t bad = compat_bad_byte(p, 0, 0, psz);
		MP_ASSERT(bad == SIZE_MAX, "byte %zu of %zu not zero", bad,
		    psz);
		memset(p, fill, psz);
		for (size_t j = 1; j < 2048; j++) {
			unsigned char *q = rallocx(p, starts[i] + j,
			    MALLOCX_ZERO);
			assert_non_null(q);
			size_t qsz = sallocx(q, 0);
			if (q != p || qsz != psz) {
				bad = compat_bad_byte(q, fill, 0, psz);
				MP_ASSERT(bad == SIZE_MAX, "start %zu + %zu: "
				    "byte %zu lost", starts[i], j, bad);
				bad = compat_bad_byte(q, 0, psz, qsz - psz);
				MP_ASSERT(bad == SIZE_MAX, "start %zu + %zu: "
				    "added byte %zu not zero", starts[i], j,
				    bad);
			}
			if (qsz != psz) {
				memset(q + psz, fill, qsz - psz);
				psz = qsz;
			}
			p = q;
		}
		assert_int_equal(compat_bad_byte(p, fill, 0, psz), SIZE_MAX);
		dallocx(p, 0);
	}
}

/* One byte moved to every alignment up to 32 MiB. */
static void test_rallocx_align(void **state) {
	(void)state;
	void *p = mallocx(1, MALLOCX_ALIGN(1));
	assert_non_null(p);
	for (size_t a = 2; a <= ((size_t)1 << 25); a <<= 1) {
		void *q = rallocx(p, 1, MALLOCX_ALIGN(a));
		MP_ASSERT(q != NULL && ((uintptr_t)q & (a - 1)) == 0,
		    "alignment %zu: %p", a, q);
		p = q;
	}
	dallocx(p, 0);
}

/* The same with MALLOCX_LG_ALIGN and MALLOCX_ZERO: the block is zero
 * (its first and last 4 MiB checked when it is bigger). */
static void test_rallocx_lg_align_and_zero(void **state) {
	(void)state;
	const size_t maxcheck = (size_t)1 << 22;
	void *p = mallocx(1, MALLOCX_LG_ALIGN(0) | MALLOCX_ZERO);
	assert_non_null(p);
	for (unsigned lg = 1; lg <= 25; lg++) {
		void *q = rallocx(p, 1, MALLOCX_LG_ALIGN(lg) | MALLOCX_ZERO);
		MP_ASSERT(q != NULL &&
		    ((uintptr_t)q & (((size_t)1 << lg) - 1)) == 0,
		    "lg alignment %u: %p", lg, q);
		size_t sz = sallocx(q, 0);
		if (2 * sz <= maxcheck) {
			assert_int_equal(compat_bad_byte(q, 0, 0, sz),
			    SIZE_MAX);
		} else {
			assert_int_equal(compat_bad_byte(q, 0, 0, maxcheck),
			    SIZE_MAX);
			assert_int_equal(compat_bad_byte(q, 0, sz - maxcheck,
			    maxcheck), SIZE_MAX);
		}
		p = q;
	}
	dallocx(p, 0);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
static void test_rallocx_overflow(void **state) {
	(void)state;
	size_t max = compat_largemax();
	void *p = mallocx(1, 0);
	assert_non_null(p);
	assert_null(rallocx(p, opaque_size(max + 1), 0));
	assert_null(rallocx(p, opaque_size((size_t)PTRDIFF_MAX + 1), 0));
	assert_null(rallocx(p, opaque_size(SIZE_MAX), 0));
	assert_null(rallocx(p, 1, MALLOCX_ALIGN(opaque_size(
	    (size_t)PTRDIFF_MAX + 1))));
	dallocx(p, 0);
}
#pragma GCC diagnostic pop

/* ------------------------------------------------------- xallocx.c */

static void test_xallocx_same_size(void **state) {
	(void)state;
	void *p = mallocx(42, 0);
	assert_non_null(p);
	size_t sz = sallocx(p, 0);
	assert_int_equal(xallocx(p, sz, 0, 0), sz);
	/* Extra within the class: no change (test_extra_no_move). */
	assert_int_equal(xallocx(p, sz, sz - 42, 0), sz);
	/* A small block cannot grow past its class (test_no_move_fail). */
	assert_int_equal(xallocx(p, sz + 5, 0, 0), sz);
	dallocx(p, 0);
}

/* test_size and test_size_extra_overflow: requests at and past the
 * largest class never give more than it. */
static void test_xallocx_size(void **state) {
	(void)state;
	size_t small0 = compat_small(0), max = compat_largemax();
	void *p = mallocx(small0, 0);
	assert_non_null(p);
	assert_int_equal(xallocx(p, 1, 0, 0), small0);
	const size_t cases[][2] = {
		{max, 0}, {max + 1, 0}, {SIZE_MAX, 0},
		{max - 1, 2}, {max, 1}, {max + 1, 2}, {max + 2, 3},
		{SIZE_MAX - 2, 2}, {SIZE_MAX - 1, 1},
	};
	for (size_t k = 0; k < MP_ARRAY_SIZE(cases); k++) {
		size_t r = xallocx(p, opaque_size(cases[k][0]),
		    opaque_size(cases[k][1]), 0);
		MP_ASSERT(r <= max, "xallocx(%#zx, %#zx) = %zu", cases[k][0],
		    cases[k][1], r);
	}
	dallocx(p, 0);
}

/* A small block stays in its class whatever is asked. */
static void test_xallocx_extra_small(void **state) {
	(void)state;
	size_t small0 = compat_small(0), small1 = compat_small(1);
	size_t max = compat_largemax();
	void *p = mallocx(small0, 0);
	assert_non_null(p);
	assert_int_equal(xallocx(p, small1, 0, 0), small0);
	assert_int_equal(xallocx(p, small1, 0, 0), small0);
	assert_int_equal(xallocx(p, small0, small1 - small0, 0), small0);
	assert_int_equal(xallocx(p, small0, max - small0 + 1, 0), small0);
	assert_int_equal(xallocx(p, small0, SIZE_MAX - small0, 0), small0);
	dallocx(p, 0);
}

/* Large blocks in an arena of their own: shrinks and growths in place
 * within the bounds of jemalloc's test_extra_large. */
static void test_xallocx_extra_large(void **state) {
	(void)state;
	int flags = MALLOCX_ARENA(compat_arena());
	size_t smallmax = compat_small(compat_nsizes("arenas.nbins") - 1);
	size_t large1 = compat_large(1), large2 = compat_large(2);
	size_t large3 = compat_large(3), max = compat_largemax();
	void *p = mallocx(large3, flags);
	assert_non_null(p);
	assert_int_equal(xallocx(p, large3, 0, flags), large3);
	/* Shrinks with no extra. */
	assert_true(xallocx(p, large1, 0, flags) >= large1);
	assert_true(xallocx(p, smallmax, 0, flags) >= large1);
	if (xallocx(p, large3, 0, flags) != large3) {
		p = rallocx(p, large3, flags);
		assert_non_null(p);
	}
	/* Shrinks with extra. */
	assert_int_equal(xallocx(p, large1, large3 - large1, flags), large3);
	assert_int_equal(xallocx(p, large2, large3 - large2, flags), large3);
	assert_true(xallocx(p, large1, large2 - large1, flags) >= large2);
	assert_true(xallocx(p, smallmax, large1 - smallmax, flags) >=
	    large1);
	assert_true(xallocx(p, large1, 0, flags) >= large1);
	/* Growths with no extra. */
	assert_true(xallocx(p, large3, 0, flags) <= large3);
	assert_true(xallocx(p, opaque_size(max + 1), 0, flags) <= large3);
	assert_true(xallocx(p, large1, 0, flags) >= large1);
	/* Growths with extra. */
	assert_true(xallocx(p, large1, opaque_size(SIZE_MAX - large1),
	    flags) <= max);
	assert_true(xallocx(p, large1, 0, flags) >= large1);
	assert_true(xallocx(p, large1, large3 - large1, flags) <= large3);
	if (xallocx(p, large3, 0, flags) != large3) {
		p = rallocx(p, large3, flags);
		assert_non_null(p);
	}
	assert_true(xallocx(p, large3, max - large3 + 1, flags) <= max);
	dallocx(p, flags);
}

/* test_zero_large: a zeroed block shrunk, then grown class by class (in
 * place, or moved by rallocx): the old bytes stay, the new ones are 0. */
static void test_xallocx_zero_large(void **state) {
	(void)state;
	int flags = MALLOCX_ARENA(compat_arena()) | MALLOCX_ZERO;
	size_t szmin = compat_large(1), szmax = compat_large(0) * 2;
	const unsigned char fill = 0x7a;
	unsigned char *p = mallocx(szmax, flags);
	assert_non_null(p);
	assert_int_equal(compat_bad_byte(p, 0, 0, szmax), SIZE_MAX);
	memset(p, fill, szmax);
	if (xallocx(p, szmin, 0, flags) != szmin) {
		p = rallocx(p, szmin, flags);
		assert_non_null(p);
	}
	assert_int_equal(compat_bad_byte(p, fill, 0, szmin), SIZE_MAX);
	for (size_t sz = szmin, nsz; sz < szmax; sz = nsz) {
		nsz = nallocx(sz + 1, flags);
		if (xallocx(p, sz + 1, 0, flags) != nsz) {
			p = rallocx(p, sz + 1, flags);
			assert_non_null(p);
		}
		size_t bad = compat_bad_byte(p, fill, 0, sz);
		MP_ASSERT(bad == SIZE_MAX, "%zu -> %zu: byte %zu lost", sz,
		    nsz, bad);
		bad = compat_bad_byte(p, 0, sz, nsz - sz);
		MP_ASSERT(bad == SIZE_MAX, "%zu -> %zu: added byte %zu not "
		    "zero", sz, nsz, bad);
		memset(p + sz, fill, nsz - sz);
	}
	dallocx(p, flags);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mallocx_overflow),
		cmocka_unit_test(test_mallocx_oom),
		cmocka_unit_test(test_mallocx_basic),
		cmocka_unit_test(test_mallocx_alignment_and_size),
		cmocka_unit_test(test_rallocx_grow_and_shrink),
		cmocka_unit_test(test_rallocx_zero),
		cmocka_unit_test(test_rallocx_align),
		cmocka_unit_test(test_rallocx_lg_align_and_zero),
		cmocka_unit_test(test_rallocx_overflow),
		cmocka_unit_test(test_xallocx_same_size),
		cmocka_unit_test(test_xallocx_size),
		cmocka_unit_test(test_xallocx_extra_small),
		cmocka_unit_test(test_xallocx_extra_large),
		cmocka_unit_test(test_xallocx_zero_large),
	};
	return mp_run_tests(tests);
}
