/*
 * test/integration/api.c - the standard allocation entry points.
 *
 * malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, malloc_usable_size and reallocarray: results, size
 * classes, alignment, content preservation, zeroing and error reporting.
 */
#include "../test_util.h"

/* Size classes from 16 upward, in order: c(0) = 16, c(i+1) = class(c(i)+1). */
static size_t next_class(size_t c) {
	return mp_expected_size_class(c + 1);
}

/* Allocates n bytes with malloc and checks everything about the result. */
static void check_malloc_size(size_t n) {
	unsigned char *p = LAUNDER((unsigned char *)malloc(n));
	MP_ASSERT(p != NULL, "malloc(%zu) returned NULL", n);
	MP_ASSERT(mp_is_aligned(p, 16), "malloc(%zu) = %p not 16-aligned", n,
	    (void *)p);
	size_t usable = malloc_usable_size(p);
	size_t expect = nallocx(n, 0);
	MP_ASSERT(usable == expect,
	    "malloc_usable_size(malloc(%zu)) = %zu, nallocx = %zu", n, usable,
	    expect);
	MP_ASSERT(sallocx(p, 0) == usable, "sallocx(malloc(%zu)) = %zu != %zu",
	    n, sallocx(p, 0), usable);
	MP_ASSERT(usable >= n, "usable %zu < requested %zu", usable, n);
	MP_ASSERT(usable == mp_expected_size_class(n),
	    "malloc(%zu): usable %zu, expected size class %zu", n, usable,
	    mp_expected_size_class(n));
	/* Every usable byte is writable and keeps its value. */
	pattern_fill(p, usable, n);
	size_t bad = pattern_check(p, usable, n);
	MP_ASSERT(bad == SIZE_MAX, "malloc(%zu): byte %zu lost its value", n,
	    bad);
	free(p);
}

/* ------------------------------------------------------------------------ */

static void test_malloc_zero(void **state) {
	(void)state;
	void *p = LAUNDER(malloc(0));
	void *q = LAUNDER(malloc(0));
	assert_non_null(p);
	assert_non_null(q);
	assert_ptr_not_equal(p, q);
	assert_true(mp_is_aligned(p, 16));
	assert_true(mp_is_aligned(q, 16));
	assert_int_equal(malloc_usable_size(p), 16);
	/* The minimum size is usable. */
	memset(p, 0xa5, malloc_usable_size(p));
	memset(q, 0x5a, malloc_usable_size(q));
	assert_int_equal(first_not_byte(p, 16, 0xa5), SIZE_MAX);
	free(p);
	free(q);

	/* Many zero-size allocations alive at once are all distinct. */
	enum { N = 1000 };
	static void *ptrs[N];
	for (int i = 0; i < N; i++) {
		ptrs[i] = LAUNDER(malloc(0));
		assert_non_null(ptrs[i]);
		*(uint64_t *)ptrs[i] = (uint64_t)i;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(*(uint64_t *)ptrs[i], (uint64_t)i);
		free(ptrs[i]);
	}
}

static void test_free_null(void **state) {
	(void)state;
	free(LAUNDER((void *)NULL));
	free(NULL);
	assert_int_equal(malloc_usable_size(LAUNDER((void *)NULL)), 0);
	/* The allocator still works afterwards. */
	void *p = LAUNDER(malloc(10));
	assert_non_null(p);
	free(p);
}

static void test_malloc_alignment_16(void **state) {
	(void)state;
	static void *ptrs[4096];
	size_t k = 0;
	for (size_t n = 1; n <= 2048; n++) {
		ptrs[k] = LAUNDER(malloc(n));
		assert_non_null(ptrs[k]);
		MP_ASSERT(mp_is_aligned(ptrs[k], 16), "malloc(%zu) = %p", n,
		    ptrs[k]);
		k++;
	}
	for (size_t n = 2049; n < 4 * MP_MiB; n = n * 5 / 4 + 3) {
		ptrs[k] = LAUNDER(malloc(n));
		assert_non_null(ptrs[k]);
		MP_ASSERT(mp_is_aligned(ptrs[k], 16), "malloc(%zu) = %p", n,
		    ptrs[k]);
		k++;
	}
	for (size_t i = 0; i < k; i++) {
		free(ptrs[i]);
	}
}

static void test_malloc_enomem(void **state) {
	(void)state;
	const size_t sizes[] = {
		SIZE_MAX,
		SIZE_MAX - 1,
		SIZE_MAX - 4096,
		(size_t)PTRDIFF_MAX + 1,
		(size_t)PTRDIFF_MAX,
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		errno = 0;
		void *p = malloc(opaque_size(sizes[i]));
		MP_ASSERT(p == NULL, "malloc(%zu) = %p", sizes[i], p);
		MP_ASSERT(errno == ENOMEM, "malloc(%zu): errno %d, want ENOMEM",
		    sizes[i], errno);
	}
	/* A failed request does not break later ones. */
	void *p = LAUNDER(malloc(100));
	assert_non_null(p);
	free(p);
}

static void test_calloc_overflow(void **state) {
	(void)state;
	const struct {
		size_t n, m;
	} cases[] = {
		{SIZE_MAX / 2, 3},
		{3, SIZE_MAX / 2},
		{SIZE_MAX, SIZE_MAX},
		{(size_t)1 << 32, (size_t)1 << 32},
		{((size_t)1 << 32) + 1, ((size_t)1 << 32) - 1},
		{SIZE_MAX, 2},
		{(size_t)PTRDIFF_MAX / 2 + 1, 2},	/* == PTRDIFF_MAX + 1 */
		{1, SIZE_MAX},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		errno = 0;
		void *p = calloc(opaque_size(cases[i].n),
		    opaque_size(cases[i].m));
		MP_ASSERT(p == NULL, "calloc(%zu, %zu) = %p", cases[i].n,
		    cases[i].m, p);
		MP_ASSERT(errno == ENOMEM, "calloc(%zu, %zu): errno %d",
		    cases[i].n, cases[i].m, errno);
	}
	/* Zero-sized calloc returns a unique freeable pointer. */
	void *a = LAUNDER(calloc(0, 0));
	void *b = LAUNDER(calloc(0, 16));
	void *c = LAUNDER(calloc(16, 0));
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_ptr_not_equal(a, b);
	assert_ptr_not_equal(b, c);
	assert_ptr_not_equal(a, c);
	free(a);
	free(b);
	free(c);
}

/* calloc memory is zero, also when it reuses memory freed dirty. */
static void test_calloc_zero_reuse(void **state) {
	(void)state;
	const size_t sizes[] = {1, 8, 24, 100, 1000, 4000, 4096, 8192, 14336,
	    16384, 20000, 65536, 100000, 1 * MP_MiB, 4 * MP_MiB + 100};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		for (int round = 0; round < 20; round++) {
			unsigned char *d = LAUNDER((unsigned char *)malloc(n));
			assert_non_null(d);
			memset(d, 0xff, malloc_usable_size(d));
			free(d);
			/* Alternate the shape of the request. */
			unsigned char *z;
			if (round % 2 == 0) {
				z = calloc(1, n);
			} else if (n % 4 == 0) {
				z = calloc(n / 4, 4);
			} else {
				z = calloc(n, 1);
			}
			z = LAUNDER(z);
			assert_non_null(z);
			size_t bad = first_nonzero(z, n);
			MP_ASSERT(bad == SIZE_MAX,
			    "calloc(%zu) round %d: byte %zu = 0x%02x", n, round,
			    bad, bad == SIZE_MAX ? 0 : z[bad]);
			MP_ASSERT(malloc_usable_size(z) >= n, "usable %zu < %zu",
			    malloc_usable_size(z), n);
			memset(z, 0xff, malloc_usable_size(z));
			free(z);
		}
	}
	/* Many small callocs while the same size class is full of garbage. */
	enum { N = 2000 };
	static unsigned char *ptrs[N];
	for (int i = 0; i < N; i++) {
		ptrs[i] = LAUNDER((unsigned char *)malloc(48));
		assert_non_null(ptrs[i]);
		memset(ptrs[i], 0xee, 48);
	}
	for (int i = 0; i < N; i++) {
		free(ptrs[i]);
	}
	for (int i = 0; i < N; i++) {
		ptrs[i] = LAUNDER((unsigned char *)calloc(3, 16));
		assert_non_null(ptrs[i]);
		MP_ASSERT(first_nonzero(ptrs[i], 48) == SIZE_MAX,
		    "calloc(3, 16) #%d not zero", i);
	}
	for (int i = 0; i < N; i++) {
		free(ptrs[i]);
	}
}

static void test_reallocarray(void **state) {
	(void)state;
	errno = 0;
	void *p = reallocarray(NULL, opaque_size(SIZE_MAX / 2), 3);
	assert_null(p);
	assert_int_equal(errno, ENOMEM);

	unsigned char *q = LAUNDER((unsigned char *)reallocarray(NULL, 10, 10));
	assert_non_null(q);
	assert_true(malloc_usable_size(q) >= 100);
	pattern_fill(q, 100, 77);

	/* Overflow leaves the old block intact. */
	errno = 0;
	p = reallocarray(LAUNDER(q), opaque_size((size_t)1 << 33),
	    opaque_size((size_t)1 << 33));
	assert_null(p);
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(pattern_check(q, 100, 77), SIZE_MAX);

	/* Growth keeps the content. */
	q = LAUNDER((unsigned char *)reallocarray(q, 1000, 100));
	assert_non_null(q);
	assert_true(malloc_usable_size(q) >= 100000);
	assert_int_equal(pattern_check(q, 100, 77), SIZE_MAX);
	memset(q, 1, 100000);
	free(q);
}

/* A realloc that cannot be satisfied returns NULL and keeps the block. */
static void test_realloc_impossible(void **state) {
	(void)state;
	const size_t old_sizes[] = {1, 100, 5000, 40000, 1 * MP_MiB};
	const size_t huge[] = {SIZE_MAX, SIZE_MAX - 16, (size_t)PTRDIFF_MAX + 1,
	    (size_t)PTRDIFF_MAX};
	for (size_t i = 0; i < MP_ARRAY_SIZE(old_sizes); i++) {
		size_t n = old_sizes[i];
		unsigned char *p = LAUNDER((unsigned char *)malloc(n));
		assert_non_null(p);
		size_t usable = malloc_usable_size(p);
		pattern_fill(p, n, n + 5);
		for (size_t j = 0; j < MP_ARRAY_SIZE(huge); j++) {
			errno = 0;
			/* Launder p so the compiler does not flag the intended reuse. */
			void *q = realloc(LAUNDER(p), opaque_size(huge[j]));
			MP_ASSERT(q == NULL, "realloc(%zu -> %zu) = %p", n,
			    huge[j], q);
			MP_ASSERT(errno == ENOMEM, "realloc(%zu -> %zu): errno %d",
			    n, huge[j], errno);
			MP_ASSERT(pattern_check(p, n, n + 5) == SIZE_MAX,
			    "realloc(%zu -> %zu) failure damaged the block", n,
			    huge[j]);
			assert_int_equal(malloc_usable_size(p), usable);
		}
		/* The block is still a live allocation. */
		unsigned char *r = LAUNDER((unsigned char *)realloc(p, 2 * n));
		assert_non_null(r);
		assert_int_equal(pattern_check(r, n, n + 5), SIZE_MAX);
		free(r);
	}
}

static void test_realloc_null_is_malloc(void **state) {
	(void)state;
	const size_t sizes[] = {0, 1, 17, 129, 4096, 16385, 100000, 3 * MP_MiB};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		unsigned char *p = LAUNDER((unsigned char *)realloc(NULL,
		    sizes[i]));
		assert_non_null(p);
		assert_true(mp_is_aligned(p, 16));
		assert_int_equal(malloc_usable_size(p), nallocx(sizes[i], 0));
		memset(p, 0x11, malloc_usable_size(p));
		free(p);
	}
}

/* realloc(p, 0) frees p and returns NULL (zero_realloc:free, glibc-like). */
static void test_realloc_zero_frees(void **state) {
	(void)state;
	const size_t sizes[] = {1, 100, 5000, 100000};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		void *p = LAUNDER(malloc(sizes[i]));
		assert_non_null(p);
		size_t usable = malloc_usable_size(p);
		uint64_t d0 = 0, d1 = 0;
		MALLCTL_READ("thread.deallocated", d0);
		void *q = realloc(p, opaque_size(0));
		MALLCTL_READ("thread.deallocated", d1);
		MP_ASSERT(q == NULL, "realloc(p[%zu], 0) = %p, want NULL",
		    sizes[i], q);
		MP_ASSERT(d1 - d0 >= usable,
		    "realloc(p[%zu], 0) freed %" PRIu64 " bytes, want >= %zu",
		    sizes[i], d1 - d0, usable);
	}
}

/* Content survives every kind of realloc transition. */
static void test_realloc_content(void **state) {
	(void)state;
	const struct {
		size_t from, to;
		const char *what;
	} cases[] = {
		{16, 100, "small grow"},
		{100, 3000, "small grow"},
		{1000, 10, "small shrink"},
		{3000, 2900, "small same class region"},
		{100, 100000, "small to large"},
		{14336, 16384, "largest small to smallest large"},
		{100000, 3 * MP_MiB, "large grow"},
		{20000, 40000, "large grow (maybe in place)"},
		{3 * MP_MiB, 50, "large to small"},
		{1 * MP_MiB, 20000, "large shrink"},
		{1 * MP_MiB, 1 * MP_MiB - 4096, "large shrink by a page"},
		{40000, 16, "large to smallest"},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		size_t from = cases[i].from, to = cases[i].to;
		uint64_t seed = 1000 + i;
		unsigned char *p = LAUNDER((unsigned char *)malloc(from));
		assert_non_null(p);
		pattern_fill(p, from, seed);
		unsigned char *q = LAUNDER((unsigned char *)realloc(p, to));
		MP_ASSERT(q != NULL, "%s: realloc(%zu -> %zu) failed",
		    cases[i].what, from, to);
		assert_true(mp_is_aligned(q, 16));
		size_t keep = from < to ? from : to;
		size_t bad = pattern_check(q, keep, seed);
		MP_ASSERT(bad == SIZE_MAX, "%s: realloc(%zu -> %zu) byte %zu",
		    cases[i].what, from, to, bad);
		MP_ASSERT(malloc_usable_size(q) == nallocx(to, 0),
		    "%s: usable %zu != nallocx(%zu) %zu", cases[i].what,
		    malloc_usable_size(q), to, nallocx(to, 0));
		memset(q, 0x3c, malloc_usable_size(q));
		free(q);
	}

	/* A chain of reallocs through many size classes, up and down. */
	size_t n = 1;
	unsigned char *p = LAUNDER((unsigned char *)malloc(n));
	assert_non_null(p);
	p[0] = 0x42;
	size_t valid = 1;
	while (n < 2 * MP_MiB) {
		size_t next = n * 3 / 2 + 7;
		p = LAUNDER((unsigned char *)realloc(p, next));
		assert_non_null(p);
		assert_int_equal(first_not_byte(p, valid, 0x42), SIZE_MAX);
		memset(p + valid, 0x42, next - valid);
		valid = next;
		n = next;
	}
	while (n > 1) {
		n = n / 3;
		p = LAUNDER((unsigned char *)realloc(p, n + 1));
		assert_non_null(p);
		assert_int_equal(first_not_byte(p, n + 1, 0x42), SIZE_MAX);
	}
	free(p);
}

/* A 64 MiB block grown to 128 MiB keeps all its bytes. */
static void test_realloc_64m_to_128m(void **state) {
	(void)state;
	size_t n = 64 * MP_MiB;
	unsigned char *p = LAUNDER((unsigned char *)malloc(n));
	assert_non_null(p);
	assert_int_equal(malloc_usable_size(p), nallocx(n, 0));
	pattern_fill(p, n, 0x64);
	unsigned char *q = LAUNDER((unsigned char *)realloc(p, 2 * n));
	assert_non_null(q);
	assert_true(malloc_usable_size(q) >= 2 * n);
	assert_int_equal(pattern_check(q, n, 0x64), SIZE_MAX);
	memset(q + n, 0x77, n);
	assert_int_equal(pattern_check(q, n, 0x64), SIZE_MAX);
	/* And back down. */
	q = LAUNDER((unsigned char *)realloc(q, n / 2));
	assert_non_null(q);
	assert_int_equal(pattern_check(q, n / 2, 0x64), SIZE_MAX);
	free(q);
}

/*
 * realloc within a block's size class keeps the block where it is, for
 * small classes and large ones (whose class the page map carries up to
 * about 1.75 MiB, and the extent beyond); a size one class up moves it
 * or grows it, and the contents come along.  With junk filling on (debug
 * builds) every realloc moves, so only contents are checked there.
 */
static void test_realloc_within_class(void **state) {
	(void)state;
	const char *junk = NULL;
	size_t len = sizeof(junk);
	assert_int_equal(mallctl("opt.junk", &junk, &len, NULL, 0), 0);
	bool in_place = strcmp(junk, "false") == 0;
	size_t prev = 0;
	for (size_t want = 1; want <= 4 * MP_MiB; ) {
		size_t c = nallocx(want, 0);
		unsigned char *p = LAUNDER((unsigned char *)malloc(c));
		assert_non_null(p);
		memset(p, 0x5c, c);
		size_t sizes[3] = {c, prev + 1, c - (c - prev) / 2};
		size_t keep = c;        /* bytes realloc must have kept */
		for (unsigned i = 0; i < 3; i++) {
			if (sizes[i] < keep)
				keep = sizes[i];
			unsigned char *q = LAUNDER((unsigned char *)realloc(p,
			    opaque_size(sizes[i])));
			assert_non_null(q);
			MP_ASSERT(!in_place || q == p, "realloc(%zu-byte block, "
			    "%zu) moved it to %p from %p", c, sizes[i],
			    (void *)q, (void *)p);
			MP_ASSERT(malloc_usable_size(q) == c, "realloc(%zu-byte "
			    "block, %zu): usable size %zu", c, sizes[i],
			    malloc_usable_size(q));
			MP_ASSERT(q[0] == 0x5c && q[keep - 1] == 0x5c, "realloc("
			    "%zu-byte block, %zu) lost its contents", c,
			    sizes[i]);
			p = q;
		}
		unsigned char *q = LAUNDER((unsigned char *)realloc(p,
		    opaque_size(c + 1)));
		assert_non_null(q);
		MP_ASSERT(malloc_usable_size(q) == nallocx(c + 1, 0),
		    "realloc(%zu-byte block, %zu): usable size %zu", c, c + 1,
		    malloc_usable_size(q));
		MP_ASSERT(q[0] == 0x5c && q[keep - 1] == 0x5c, "realloc(%zu-"
		    "byte block, %zu) lost its contents", c, c + 1);
		free(q);
		prev = c;
		want = c + 1;
	}
}

static void test_size_class_values(void **state) {
	(void)state;
	assert_int_equal(nallocx(0, 0), 16);
	assert_int_equal(nallocx(1, 0), 16);
	assert_int_equal(nallocx(15, 0), 16);
	assert_int_equal(nallocx(16, 0), 16);
	assert_int_equal(nallocx(17, 0), 32);
	assert_int_equal(nallocx(48, 0), 48);
	assert_int_equal(nallocx(65, 0), 80);
	assert_int_equal(nallocx(128, 0), 128);
	assert_int_equal(nallocx(129, 0), 160);
	assert_int_equal(nallocx(257, 0), 320);
	assert_int_equal(nallocx(14336, 0), 14336);
	assert_int_equal(nallocx(14337, 0), 16384);
	assert_int_equal(nallocx(16384, 0), 16384);
	assert_int_equal(nallocx(16385, 0), 20480);
	assert_int_equal(nallocx(MP_MiB + 1, 0), MP_MiB + 256 * MP_KiB);
	assert_int_equal(nallocx(opaque_size(SIZE_MAX), 0), 0);
	assert_int_equal(nallocx(opaque_size((size_t)PTRDIFF_MAX + 1), 0), 0);

	/* Every request up to 64 KiB + 1 maps to the expected class. */
	for (size_t n = 0; n <= 64 * MP_KiB + 1; n++) {
		size_t got = nallocx(n, 0);
		if (got != mp_expected_size_class(n)) {
			MP_FAIL("nallocx(%zu, 0) = %zu, expected %zu", n, got,
			    mp_expected_size_class(n));
		}
	}
	/* Class boundaries up to 1 TiB, +-1, without allocating. */
	for (size_t c = 16; c <= ((size_t)1 << 40); c = next_class(c)) {
		size_t probes[] = {c - 1, c, c + 1};
		for (size_t i = 0; i < 3; i++) {
			size_t got = nallocx(probes[i], 0);
			MP_ASSERT(got == mp_expected_size_class(probes[i]),
			    "nallocx(%zu, 0) = %zu, expected %zu", probes[i],
			    got, mp_expected_size_class(probes[i]));
		}
	}
}

/* malloc at every size class boundary +-1 up to 64 KiB, then to 8 MiB. */
static void test_size_class_sweep(void **state) {
	(void)state;
	check_malloc_size(0);
	for (size_t c = 16; c <= 8 * MP_MiB; c = next_class(c)) {
		check_malloc_size(c - 1);
		check_malloc_size(c);
		check_malloc_size(c + 1);
	}
	/* Odd sizes in between. */
	for (size_t n = 3; n < 12 * MP_MiB; n = n * 9 / 7 + 1) {
		check_malloc_size(n);
	}
}

static void test_usable_size_writable_many_live(void **state) {
	(void)state;
	/*
	 * Many live objects of random sizes: fill each with its own pattern
	 * over the whole usable size, then check none was overwritten (no two
	 * allocations overlap) and that address ranges are disjoint.
	 */
	enum { N = 20000 };
	static unsigned char *ptrs[N];
	static size_t usable[N];
	mp_rng_t rng = {12345};
	for (size_t i = 0; i < N; i++) {
		uint64_t r = mp_rng_next(&rng);
		size_t n;
		switch (r % 16) {
		case 0:
			n = (size_t)(r >> 8) % (256 * MP_KiB);
			break;
		case 1:
		case 2:
			n = (size_t)(r >> 8) % (16 * MP_KiB);
			break;
		default:
			n = (size_t)(r >> 8) % 512;
			break;
		}
		ptrs[i] = LAUNDER((unsigned char *)malloc(n));
		assert_non_null(ptrs[i]);
		usable[i] = malloc_usable_size(ptrs[i]);
		assert_true(usable[i] >= n);
		pattern_fill(ptrs[i], usable[i], i);
	}
	for (size_t i = 0; i < N; i++) {
		size_t bad = pattern_check(ptrs[i], usable[i], i);
		MP_ASSERT(bad == SIZE_MAX, "object %zu (usable %zu) byte %zu "
		    "overwritten", i, usable[i], bad);
	}
	/* Free in a scrambled order. */
	for (size_t i = 0; i < N; i++) {
		size_t j = (size_t)mp_rng_below(&rng, N - i) + i;
		unsigned char *tp = ptrs[i];
		size_t tu = usable[i];
		ptrs[i] = ptrs[j];
		usable[i] = usable[j];
		ptrs[j] = tp;
		usable[j] = tu;
	}
	for (size_t i = 0; i < N; i++) {
		free(ptrs[i]);
	}
}

/* ------------------------------------------------------------------------ */
/* Aligned allocation.                                                      */

static void test_posix_memalign_errors(void **state) {
	(void)state;
	void *const sentinel = (void *)(uintptr_t)0x5a5a5a50;
	const size_t bad_align[] = {0, 1, 2, 4, sizeof(void *) / 2, 3, 12, 24,
	    40, 48, 96, 4097, 3 * 4096, SIZE_MAX, SIZE_MAX / 2};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad_align); i++) {
		void *p = sentinel;
		int r = posix_memalign(&p, opaque_size(bad_align[i]), 64);
		MP_ASSERT(r == EINVAL, "posix_memalign(align %zu) = %d, want "
		    "EINVAL", bad_align[i], r);
		MP_ASSERT(p == sentinel, "posix_memalign(align %zu) wrote %p "
		    "on error", bad_align[i], p);
	}
	const struct {
		size_t align, size;
	} nomem[] = {
		{16, SIZE_MAX},
		{16, SIZE_MAX - 15},
		{4096, SIZE_MAX - 4095},
		{4096, (size_t)PTRDIFF_MAX + 1},
		{sizeof(void *), SIZE_MAX},
		{MP_MiB, SIZE_MAX - MP_MiB},
		{(size_t)1 << 62, 1},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(nomem); i++) {
		void *p = sentinel;
		int r = posix_memalign(&p, opaque_size(nomem[i].align),
		    opaque_size(nomem[i].size));
		MP_ASSERT(r == ENOMEM, "posix_memalign(align %zu, size %zu) = %d,"
		    " want ENOMEM", nomem[i].align, nomem[i].size, r);
		MP_ASSERT(p == sentinel, "posix_memalign(align %zu, size %zu) "
		    "wrote %p on error", nomem[i].align, nomem[i].size, p);
	}
	/* sizeof(void *) is the smallest valid alignment. */
	void *p = NULL;
	assert_int_equal(posix_memalign(&p, sizeof(void *), 10), 0);
	p = LAUNDER(p);
	assert_non_null(p);
	assert_true(mp_is_aligned(p, sizeof(void *)));
	free(p);
	/* Size 0 succeeds with a freeable pointer. */
	p = NULL;
	assert_int_equal(posix_memalign(&p, 64, 0), 0);
	p = LAUNDER(p);
	if (p != NULL) {
		assert_true(mp_is_aligned(p, 64));
		free(p);
	}
}

static void test_aligned_alloc_errors(void **state) {
	(void)state;
	const size_t bad_align[] = {0, 3, 12, 24, 48, 96, 4097, SIZE_MAX};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad_align); i++) {
		errno = 0;
		void *p = aligned_alloc(opaque_size(bad_align[i]), 96);
		MP_ASSERT(p == NULL, "aligned_alloc(%zu, 96) = %p", bad_align[i],
		    p);
		MP_ASSERT(errno == EINVAL, "aligned_alloc(%zu, 96): errno %d, "
		    "want EINVAL", bad_align[i], errno);
	}
	errno = 0;
	void *p = aligned_alloc(16, opaque_size(SIZE_MAX));
	assert_null(p);
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	p = aligned_alloc(4096, opaque_size(SIZE_MAX - 4095));
	assert_null(p);
	assert_int_equal(errno, ENOMEM);

	/* Small power-of-two alignments are valid for aligned_alloc. */
	for (size_t a = 1; a <= 8; a *= 2) {
		p = LAUNDER(aligned_alloc(a, 10));
		MP_ASSERT(p != NULL, "aligned_alloc(%zu, 10) failed", a);
		assert_true(mp_is_aligned(p, a));
		assert_true(malloc_usable_size(p) >= 10);
		free(p);
	}
	/* A size that is not a multiple of the alignment is accepted (C17). */
	p = LAUNDER(aligned_alloc(64, 100));
	assert_non_null(p);
	assert_true(mp_is_aligned(p, 64));
	assert_true(malloc_usable_size(p) >= 100);
	free(p);
}

static void test_other_aligned_errors(void **state) {
	(void)state;
	errno = 0;
	assert_null(memalign(16, opaque_size(SIZE_MAX)));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(memalign(4096, opaque_size((size_t)PTRDIFF_MAX + 1)));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(valloc(opaque_size(SIZE_MAX)));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(valloc(opaque_size(SIZE_MAX - 4095)));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(pvalloc(opaque_size(SIZE_MAX)));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(pvalloc(opaque_size(SIZE_MAX - 4095)));
	assert_int_equal(errno, ENOMEM);
}

enum align_api { API_POSIX_MEMALIGN, API_ALIGNED_ALLOC, API_MEMALIGN };

static const char *const align_api_name[] = {"posix_memalign",
    "aligned_alloc", "memalign"};

static void *aligned_by(enum align_api api, size_t a, size_t n) {
	void *p = NULL;
	switch (api) {
	case API_POSIX_MEMALIGN: {
		int r = posix_memalign(&p, a, n);
		if (r != 0) {
			MP_FAIL("posix_memalign(%zu, %zu) = %d", a, n, r);
		}
		break;
	}
	case API_ALIGNED_ALLOC:
		p = aligned_alloc(a, n);
		break;
	case API_MEMALIGN:
		p = memalign(a, n);
		break;
	}
	return LAUNDER(p);
}

static void check_aligned_api(enum align_api api) {
	for (size_t a = 16; a <= 8 * MP_MiB; a *= 2) {
		const size_t sizes[] = {1, 8, a / 2, a - 1, a, a + 1, 3 * a + 5,
		    100, 5000};
		void *held[MP_ARRAY_SIZE(sizes)];
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			size_t n = sizes[i];
			unsigned char *p = aligned_by(api, a, n);
			MP_ASSERT(p != NULL, "%s(%zu, %zu) returned NULL",
			    align_api_name[api], a, n);
			MP_ASSERT(mp_is_aligned(p, a), "%s(%zu, %zu) = %p",
			    align_api_name[api], a, n, (void *)p);
			size_t usable = malloc_usable_size(p);
			MP_ASSERT(usable >= n, "%s(%zu, %zu): usable %zu",
			    align_api_name[api], a, n, usable);
			MP_ASSERT(usable == sallocx(p, 0),
			    "%s(%zu, %zu): usable %zu, sallocx %zu",
			    align_api_name[api], a, n, usable, sallocx(p, 0));
			MP_ASSERT(usable == nallocx(n, MALLOCX_ALIGN(a)),
			    "%s(%zu, %zu): usable %zu, nallocx %zu",
			    align_api_name[api], a, n, usable,
			    nallocx(n, MALLOCX_ALIGN(a)));
			pattern_fill(p, usable, a ^ n);
			held[i] = p;
		}
		/* Nothing overlapped while all were live. */
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			size_t usable = malloc_usable_size(held[i]);
			MP_ASSERT(pattern_check(held[i], usable, a ^ sizes[i]) ==
			    SIZE_MAX, "%s(%zu, %zu) content overwritten",
			    align_api_name[api], a, sizes[i]);
			free(held[i]);
		}
	}
}

static void test_posix_memalign_sweep(void **state) {
	(void)state;
	check_aligned_api(API_POSIX_MEMALIGN);
}

static void test_aligned_alloc_sweep(void **state) {
	(void)state;
	check_aligned_api(API_ALIGNED_ALLOC);
}

static void test_memalign_sweep(void **state) {
	(void)state;
	check_aligned_api(API_MEMALIGN);
	/* Alignments below the quantum are valid too. */
	for (size_t a = 1; a < 16; a *= 2) {
		void *p = LAUNDER(memalign(a, 33));
		assert_non_null(p);
		assert_true(mp_is_aligned(p, a));
		assert_true(malloc_usable_size(p) >= 33);
		free(p);
	}
}

/* Aligned blocks can be grown with realloc and keep their content. */
static void test_aligned_then_realloc(void **state) {
	(void)state;
	void *p = NULL;
	assert_int_equal(posix_memalign(&p, 4096, 3000), 0);
	p = LAUNDER(p);
	pattern_fill(p, 3000, 9);
	unsigned char *q = LAUNDER((unsigned char *)realloc(p, 300000));
	assert_non_null(q);
	assert_int_equal(pattern_check(q, 3000, 9), SIZE_MAX);
	free(q);

	q = LAUNDER((unsigned char *)aligned_alloc(2 * MP_MiB, 100));
	assert_non_null(q);
	assert_true(mp_is_aligned(q, 2 * MP_MiB));
	pattern_fill(q, 100, 10);
	q = LAUNDER((unsigned char *)realloc(q, 20));
	assert_non_null(q);
	assert_int_equal(pattern_check(q, 20, 10), SIZE_MAX);
	free(q);
}

static void test_valloc(void **state) {
	(void)state;
	size_t page = mp_page_size();
	const size_t sizes[] = {0, 1, 100, page - 1, page, page + 1, 100000,
	    3 * MP_MiB + 1};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		unsigned char *p = LAUNDER((unsigned char *)valloc(sizes[i]));
		MP_ASSERT(p != NULL, "valloc(%zu) returned NULL", sizes[i]);
		MP_ASSERT(mp_is_aligned(p, page), "valloc(%zu) = %p", sizes[i],
		    (void *)p);
		size_t usable = malloc_usable_size(p);
		assert_true(usable >= sizes[i]);
		memset(p, 0x99, usable);
		free(p);
	}
}

static void test_pvalloc(void **state) {
	(void)state;
	size_t page = mp_page_size();
	const size_t sizes[] = {0, 1, 100, page - 1, page, page + 1,
	    3 * page + 17, 100000, 3 * MP_MiB + 1};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		size_t rounded = n == 0 ? page : (n + page - 1) / page * page;
		unsigned char *p = LAUNDER((unsigned char *)pvalloc(n));
		MP_ASSERT(p != NULL, "pvalloc(%zu) returned NULL", n);
		MP_ASSERT(mp_is_aligned(p, page), "pvalloc(%zu) = %p", n,
		    (void *)p);
		size_t usable = malloc_usable_size(p);
		MP_ASSERT(usable >= rounded, "pvalloc(%zu): usable %zu < %zu",
		    n, usable, rounded);
		memset(p, 0x98, rounded);
		free(p);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_malloc_zero),
		cmocka_unit_test(test_free_null),
		cmocka_unit_test(test_malloc_alignment_16),
		cmocka_unit_test(test_malloc_enomem),
		cmocka_unit_test(test_calloc_overflow),
		cmocka_unit_test(test_calloc_zero_reuse),
		cmocka_unit_test(test_reallocarray),
		cmocka_unit_test(test_realloc_impossible),
		cmocka_unit_test(test_realloc_null_is_malloc),
		cmocka_unit_test(test_realloc_zero_frees),
		cmocka_unit_test(test_realloc_content),
		cmocka_unit_test(test_realloc_64m_to_128m),
		cmocka_unit_test(test_realloc_within_class),
		cmocka_unit_test(test_size_class_values),
		cmocka_unit_test(test_size_class_sweep),
		cmocka_unit_test(test_usable_size_writable_many_live),
		cmocka_unit_test(test_posix_memalign_errors),
		cmocka_unit_test(test_aligned_alloc_errors),
		cmocka_unit_test(test_other_aligned_errors),
		cmocka_unit_test(test_posix_memalign_sweep),
		cmocka_unit_test(test_aligned_alloc_sweep),
		cmocka_unit_test(test_memalign_sweep),
		cmocka_unit_test(test_aligned_then_realloc),
		cmocka_unit_test(test_valloc),
		cmocka_unit_test(test_pvalloc),
	};
	return mp_run_tests(tests);
}
