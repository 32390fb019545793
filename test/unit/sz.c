/*
 * test/unit/sz.c - size classes and slab geometry (src/alloc/sz.c).
 *
 * Every request size up to 64 KiB and sampled sizes up to 2^40 round up to
 * the smallest class that holds them; the class tables round-trip and
 * agree with the arithmetic; the classes are 16..128 quantum spaced, then
 * exactly four per doubling, so a block of more than 64 bytes wastes less
 * than 20% of itself.  sz_sa2u keeps aligned small requests small when a
 * small class is a multiple of the alignment.  Slab geometry fits its
 * regions in whole pages with bounded waste, and the page-count classes of
 * the extent buckets bracket every page count.  The tables are built at
 * compile time: every entry equals what the arithmetic (the *_compute
 * functions) gives, and they sit in read-only memory, so nothing can
 * write them at boot while another thread's malloc fast path reads them.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

/* Independent model of the classes: the smallest class >= n. */
static size_t model_class(size_t n) {
	if (n <= 128)
		return n == 0 ? QUANTUM : ALIGNMENT_CEILING(n, QUANTUM);
	unsigned lg = 63u - (unsigned)__builtin_clzl(n - 1);
	size_t step = (size_t)1 << (lg - 2);
	return (n + step - 1) & ~(step - 1);
}

static int boot(void **state) {
	(void)state;
	return malloc_init() ? -1 : 0;
}

/* ------------------------------------------------------------ classes */

static void test_class_table_shape(void **state) {
	(void)state;
	/* 16, 32, ..., 128. */
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(sz_index2size(i), (size_t)(i + 1) * QUANTUM);
	/* Strictly increasing. */
	for (unsigned i = 1; i < SC_NSIZES; i++) {
		MP_ASSERT(sz_index2size(i) > sz_index2size(i - 1),
		    "class %u (%zu) <= class %u (%zu)", i, sz_index2size(i),
		    i - 1, sz_index2size(i - 1));
	}
	/* Exactly four evenly spaced classes in each (2^lg, 2^(lg+1)]. */
	for (unsigned lg = 7; lg < SC_LG_LARGE_MAX; lg++) {
		size_t lo = (size_t)1 << lg, step = lo >> 2;
		unsigned n = 0;
		for (unsigned i = 0; i < SC_NSIZES; i++) {
			size_t s = sz_index2size(i);
			if (s > lo && s <= 2 * lo) {
				n++;
				MP_ASSERT(s == lo + n * step, "class %u = %zu, "
				    "expected %zu (lg %u)", i, s,
				    lo + n * step, lg);
			}
		}
		MP_ASSERT(n == 4, "%u classes in (2^%u, 2^%u]", n, lg, lg + 1);
	}
	/* The named boundaries. */
	assert_int_equal(sz_index2size(SC_NBINS - 1), SC_SMALL_MAXCLASS);
	assert_int_equal(sz_index2size(SC_NBINS), SC_LARGE_MINCLASS);
	assert_int_equal(sz_index2size(SC_NSIZES - 1), SC_LARGE_MAXCLASS);
	assert_int_equal(sz_size2index(SC_SMALL_MAXCLASS), SC_NBINS - 1);
	assert_int_equal(sz_size2index(SC_SMALL_MAXCLASS + 1), SC_NBINS);
	assert_int_equal(sz_size2index(SC_LARGE_MAXCLASS), SC_NSIZES - 1);
	/* Large classes are whole pages. */
	for (unsigned i = SC_NBINS; i < SC_NSIZES; i++)
		MP_ASSERT(sz_index2size(i) % PAGE == 0, "large class %u = %zu",
		    i, sz_index2size(i));
}

static void test_index_round_trip(void **state) {
	(void)state;
	for (unsigned i = 0; i < SC_NSIZES; i++) {
		size_t s = sz_index2size(i);
		MP_ASSERT(sz_size2index(s) == i, "size2index(index2size(%u) = "
		    "%zu) = %u", i, s, sz_size2index(s));
		MP_ASSERT(sz_size2index_compute(s) == i, "compute(%zu) = %u, "
		    "expected %u", s, sz_size2index_compute(s), i);
		/* One byte more is the next class. */
		if (i + 1 < SC_NSIZES)
			MP_ASSERT(sz_size2index(s + 1) == i + 1,
			    "size2index(%zu) = %u, expected %u", s + 1,
			    sz_size2index(s + 1), i + 1);
		assert_int_equal(sz_s2u(s), s);
	}
}

/* n -> the smallest class >= n, for n checked against the model. */
static void check_s2u(size_t n) {
	size_t u = sz_s2u(n);
	MP_ASSERT(u >= n, "s2u(%zu) = %zu", n, u);
	MP_ASSERT(u == model_class(n), "s2u(%zu) = %zu, model %zu", n, u,
	    model_class(n));
	unsigned ind = sz_size2index(n);
	MP_ASSERT(sz_index2size(ind) == u, "index2size(size2index(%zu))",
	    n);
	MP_ASSERT(ind == 0 || sz_index2size(ind - 1) < n,
	    "class %u (%zu) below %zu also holds it", ind - 1,
	    sz_index2size(ind - 1), n);
	/* Waste: a block of more than 64 bytes wastes under 20%. */
	if (n > 64)
		MP_ASSERT((u - n) * 5 < u, "s2u(%zu) = %zu wastes %zu", n, u,
		    u - n);
}

static void test_s2u_every_size_to_64k(void **state) {
	(void)state;
	for (size_t n = 0; n <= 64 * MP_KiB; n++)
		check_s2u(n);
	/* The 20% bound is tight only from 65 on: 33 -> 48 wastes 31%. */
	assert_int_equal(sz_s2u(33), 48);
	assert_int_equal(sz_s2u(0), QUANTUM);
	/* The worst case of each doubling: 2^lg + 1. */
	for (unsigned lg = 7; lg < 40; lg++) {
		size_t n = ((size_t)1 << lg) + 1;
		size_t u = sz_s2u(n);
		assert_int_equal(u, ((size_t)1 << lg) + ((size_t)1 << (lg - 2)));
	}
}

static void test_s2u_sampled_to_2_40(void **state) {
	(void)state;
	mp_rng_t rng = {12345};
	for (unsigned lg = 0; lg <= 40; lg++) {
		size_t p = (size_t)1 << lg;
		check_s2u(p);
		check_s2u(p + 1);
		if (p > 1)
			check_s2u(p - 1);
		for (unsigned k = 1; k <= 4 && lg >= 2; k++) {
			size_t c = p + k * (p >> 2);
			check_s2u(c - 1);
			check_s2u(c);
			check_s2u(c + 1);
		}
		for (unsigned j = 0; j < 2000; j++)
			check_s2u(p + mp_rng_below(&rng, p));
	}
}

static void test_lookup_table_matches_compute(void **state) {
	(void)state;
	for (size_t n = 0; n <= SC_LOOKUP_MAX; n++) {
		unsigned t = sz_size2index_tab[(n + QUANTUM - 1) >> LG_QUANTUM];
		unsigned c = sz_size2index_compute(n);
		MP_ASSERT(t == c, "size %zu: table %u, compute %u", n, t, c);
		MP_ASSERT(sz_size2index(n) == c, "size %zu", n);
	}
	/* The last table entry is the largest small class. */
	assert_int_equal(sz_size2index_tab[SC_LOOKUP_LEN - 1], SC_NBINS - 1);
	/* The index2size table agrees with the model for every class. */
	for (unsigned i = 0; i < SC_NSIZES; i++)
		assert_int_equal(sz_index2size(i), model_class(sz_index2size(i)));
}

static void test_s2u_limits(void **state) {
	(void)state;
	assert_int_equal(sz_s2u(opaque_size(SC_LARGE_MAXCLASS)),
	    SC_LARGE_MAXCLASS);
	assert_int_equal(sz_s2u(opaque_size(SC_LARGE_MAXCLASS - 1)),
	    SC_LARGE_MAXCLASS);
	assert_int_equal(sz_s2u(opaque_size(SC_LARGE_MAXCLASS + 1)), 0);
	assert_int_equal(sz_s2u(opaque_size(SIZE_MAX)), 0);
	assert_int_equal(sz_s2u(opaque_size(SIZE_MAX / 2 + 1)), 0);
	/* Just above the second largest class. */
	size_t second = sz_index2size(SC_NSIZES - 2);
	assert_int_equal(sz_s2u(second + 1), SC_LARGE_MAXCLASS);
	assert_int_equal(sz_size2index_compute(second + 1), SC_NSIZES - 1);
}

/* The compile-time tables are the formula's values, and read-only. */
static bool in_readonly_mapping(const void *p) {
	FILE *f = fopen("/proc/self/maps", "r");
	assert_non_null(f);
	char line[512];
	bool found = false, ro = false;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    (uintptr_t)p >= lo && (uintptr_t)p < hi) {
			found = true;
			ro = perms[1] == '-';
		}
	}
	fclose(f);
	MP_ASSERT(found, "%p is in no mapping", p);
	return ro;
}

static void test_tables_are_compile_time_formula(void **state) {
	(void)state;
	for (unsigned i = 0; i < SC_NSIZES; i++)
		MP_ASSERT(sz_index2size_tab[i] == sz_index2size_compute(i),
		    "class %u: table %zu, formula %zu", i,
		    sz_index2size_tab[i], sz_index2size_compute(i));
	for (size_t k = 0; k < SC_LOOKUP_LEN; k++)
		MP_ASSERT(sz_size2index_tab[k] ==
		    sz_size2index_compute(k << LG_QUANTUM), "size %zu: table "
		    "%u, formula %u", k << LG_QUANTUM, sz_size2index_tab[k],
		    sz_size2index_compute(k << LG_QUANTUM));
	for (unsigned i = 0; i < SC_NBINS; i++) {
		uint32_t slab = 0, nregs = 0, prof_slab = 0;
		sz_slab_geometry_compute(i, &slab, &nregs, &prof_slab);
		MP_ASSERT(sz_slab_size[i] == slab && sz_slab_nregs[i] == nregs &&
		    sz_prof_slab_size[i] == prof_slab, "bin %u: table %u bytes "
		    "%u regions prof %u, formula %u bytes %u regions prof %u",
		    i, sz_slab_size[i], sz_slab_nregs[i], sz_prof_slab_size[i],
		    slab, nregs, prof_slab);
	}
	/* Nothing writes them: const data, in a read-only mapping. */
	assert_true(in_readonly_mapping(sz_index2size_tab));
	assert_true(in_readonly_mapping(sz_size2index_tab));
	assert_true(in_readonly_mapping(sz_slab_size));
	assert_true(in_readonly_mapping(sz_slab_nregs));
	assert_true(in_readonly_mapping(sz_prof_slab_size));
}

/* ------------------------------------------------------------ sa2u */

/* The smallest small class >= max(n, 1) that is a multiple of align, or
 * SC_LARGE_MINCLASS when there is none (large blocks are carved aligned). */
static size_t model_sa2u(size_t n, size_t align) {
	if (n == 0)
		n = 1;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		size_t s = sz_index2size(i);
		if (s >= n && s % align == 0)
			return s;
	}
	return n <= SC_LARGE_MINCLASS ? SC_LARGE_MINCLASS : model_class(n);
}

static void test_sa2u_small(void **state) {
	(void)state;
	for (size_t align = 2 * QUANTUM; align <= PAGE; align <<= 1) {
		for (size_t n = 0; n <= SC_SMALL_MAXCLASS + 1; n++) {
			size_t u = sz_sa2u(n, align);
			MP_ASSERT(u >= n && u != 0, "sa2u(%zu, %zu) = %zu", n,
			    align, u);
			MP_ASSERT(u % align == 0, "sa2u(%zu, %zu) = %zu is not "
			    "a multiple of the alignment", n, align, u);
			MP_ASSERT(sz_s2u(u) == u, "sa2u(%zu, %zu) = %zu is not "
			    "a class", n, align, u);
			size_t want = model_sa2u(n, align);
			MP_ASSERT(u == want, "sa2u(%zu, %zu) = %zu, expected "
			    "%zu", n, align, u, want);
		}
	}
	/* Alignment up to the quantum is plain s2u. */
	for (size_t align = 1; align <= QUANTUM; align <<= 1)
		for (size_t n = 0; n <= 4096; n++)
			assert_int_equal(sz_sa2u(n, align), sz_s2u(n));
	/* Examples: small stays small, or goes to the first large class. */
	assert_int_equal(sz_sa2u(100, 64), 128);
	assert_int_equal(sz_sa2u(129, 64), 192);
	assert_int_equal(sz_sa2u(129, 128), 256);
	assert_int_equal(sz_sa2u(1, PAGE), PAGE);
	assert_int_equal(sz_sa2u(PAGE + 1, PAGE), 2 * PAGE);
	assert_int_equal(sz_sa2u(3 * PAGE + 1, PAGE), SC_LARGE_MINCLASS);
}

static void test_sa2u_large_and_overflow(void **state) {
	(void)state;
	/* Alignment above a page: always large, the extent is aligned. */
	assert_int_equal(sz_sa2u(1, 2 * PAGE), SC_LARGE_MINCLASS);
	assert_int_equal(sz_sa2u(SC_LARGE_MINCLASS, (size_t)8 << 20),
	    SC_LARGE_MINCLASS);
	assert_int_equal(sz_sa2u(SC_LARGE_MINCLASS + 1, (size_t)8 << 20),
	    sz_s2u(SC_LARGE_MINCLASS + 1));
	assert_int_equal(sz_sa2u(100000, PAGE), sz_s2u(100000));
	/* Overflow and impossible requests give 0. */
	assert_int_equal(sz_sa2u(opaque_size(SIZE_MAX), 64), 0);
	assert_int_equal(sz_sa2u(opaque_size(SIZE_MAX - 10), PAGE), 0);
	assert_int_equal(sz_sa2u(opaque_size(SC_LARGE_MAXCLASS + 1), PAGE), 0);
	assert_int_equal(sz_sa2u(opaque_size(SC_LARGE_MAXCLASS + 1),
	    (size_t)1 << 20), 0);
	assert_int_equal(sz_sa2u(16, opaque_size((size_t)1 << 63)), 0);
	assert_int_equal(sz_sa2u(opaque_size(SC_LARGE_MAXCLASS), PAGE),
	    SC_LARGE_MAXCLASS);
}

/* ------------------------------------------------------- slab geometry */

static void test_slab_geometry(void **state) {
	(void)state;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		size_t size = sz_index2size(i);
		size_t slab = sz_slab_size[i];
		size_t nregs = sz_slab_nregs[i];
		MP_ASSERT(slab % PAGE == 0 && slab > 0, "bin %u: slab %zu", i,
		    slab);
		MP_ASSERT(nregs * size <= slab, "bin %u: %zu x %zu > %zu", i,
		    nregs, size, slab);
		/* As many regions as fit. */
		MP_ASSERT(nregs == slab / size, "bin %u: nregs %zu, fit %zu",
		    i, nregs, slab / size);
		MP_ASSERT(nregs >= 4, "bin %u: %zu regions", i, nregs);
		size_t min_bytes = SZ_SLAB_MIN_BYTES(size) <
		    SLAB_MAXREGS * size ? SZ_SLAB_MIN_BYTES(size) :
		    SLAB_MAXREGS * size;
		MP_ASSERT(slab >= min_bytes, "bin %u: slab %zu < %zu",
		    i, slab, min_bytes);
		MP_ASSERT(slab <= SZ_SLAB_MAX_PAGES * PAGE ||
		    slab == PAGE_CEILING(4 * size),
		    "bin %u: slab %zu pages", i, slab / PAGE);
		/* Waste (the tail after the last region) at most 1/64 of the
		 * slab: every class finds such a slab within the bound. */
		size_t waste = slab - nregs * size;
		MP_ASSERT(waste * 64 <= slab, "bin %u (size %zu): slab %zu "
		    "wastes %zu", i, size, slab, waste);
		/* The smallest slab with under 1/64 waste is taken when one
		 * exists within the bound. */
		for (size_t pages = 1; pages < slab / PAGE; pages++) {
			size_t bytes = pages * PAGE;
			if (bytes < min_bytes || bytes / size < 4)
				continue;
			MP_ASSERT((bytes % size) * 64 > bytes, "bin %u: %zu "
			    "pages would waste only %zu, slab is %zu", i,
			    pages, bytes % size, slab);
		}
		/* uint32 fields hold the geometry, and a slab's bitmaps have
		 * a bit for at most SLAB_MAXREGS regions. */
		MP_ASSERT(nregs * size < ((size_t)1 << 32), "bin %u", i);
		MP_ASSERT(nregs <= SLAB_MAXREGS,
		    "bin %u: %zu regions overflow the bitmaps", i, nregs);
	}
}

/* The profiler's cache takes the smallest slab that wastes at most 1/8 of
 * itself: a sampled object pins as few pages as possible. */
static void test_prof_slab_geometry(void **state) {
	(void)state;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		size_t size = sz_index2size(i);
		size_t slab = sz_prof_slab_size[i];
		MP_ASSERT(slab % PAGE == 0 && slab >= size, "bin %u: prof slab "
		    "%zu for size %zu", i, slab, size);
		MP_ASSERT((slab % size) * 8 <= slab, "bin %u: prof slab %zu "
		    "wastes %zu", i, slab, slab % size);
		MP_ASSERT(slab <= sz_slab_size[i], "bin %u: prof slab %zu > "
		    "slab %u", i, slab, sz_slab_size[i]);
		MP_ASSERT(slab / size <= SLAB_MAXREGS, "bin %u: prof slab of "
		    "%zu regions", i, slab / size);
		for (size_t bytes = PAGE; bytes < slab; bytes += PAGE) {
			MP_ASSERT(bytes < size || (bytes % size) * 8 > bytes,
			    "bin %u: %zu bytes would do, prof slab is %zu", i,
			    bytes, slab);
		}
	}
	assert_int_equal(sz_prof_slab_size[0], PAGE);
	/* 14 KiB: four pages, one region, 1/8 wasted. */
	assert_int_equal(sz_prof_slab_size[SC_NBINS - 1], 4 * PAGE);
}

/* --------------------------------------------------- page-count classes */

#define NPSZ EXTENT_NPSIZES
static size_t psz_pages[NPSZ];

/* Independent: 1..8, then four per doubling of the page count. */
static void psz_model_init(void) {
	unsigned k = 0;
	for (size_t n = 1; n <= 8; n++)
		psz_pages[k++] = n;
	for (unsigned lg = 3; k < NPSZ; lg++)
		for (unsigned m = 1; m <= 4 && k < NPSZ; m++)
			psz_pages[k++] = ((size_t)1 << lg) + m *
			    ((size_t)1 << (lg - 2));
}

static void check_psz(size_t n) {
	unsigned f = sz_psz_floor(n), c = sz_psz_ceil(n);
	MP_ASSERT(f < NPSZ && c < NPSZ, "n %zu: floor %u ceil %u", n, f, c);
	MP_ASSERT(psz_pages[f] <= n, "floor(%zu) = %u (%zu pages)", n, f,
	    psz_pages[f]);
	MP_ASSERT(f + 1 == NPSZ || psz_pages[f + 1] > n,
	    "floor(%zu) = %u is not the largest", n, f);
	MP_ASSERT(psz_pages[c] >= n, "ceil(%zu) = %u (%zu pages)", n, c,
	    psz_pages[c]);
	MP_ASSERT(c == 0 || psz_pages[c - 1] < n,
	    "ceil(%zu) = %u is not the smallest", n, c);
	MP_ASSERT(f == c || f + 1 == c, "n %zu: floor %u ceil %u", n, f, c);
	MP_ASSERT((f == c) == (psz_pages[f] == n), "n %zu: floor %u ceil %u",
	    n, f, c);
}

static void test_psz_classes(void **state) {
	(void)state;
	psz_model_init();
	/* Exact for n <= 8. */
	for (size_t n = 1; n <= 8; n++) {
		assert_int_equal(sz_psz_floor(n), n - 1);
		assert_int_equal(sz_psz_ceil(n), n - 1);
	}
	unsigned pf = 0, pc = 0;
	for (size_t n = 1; n <= 200000; n++) {
		check_psz(n);
		/* Monotonic. */
		unsigned f = sz_psz_floor(n), c = sz_psz_ceil(n);
		MP_ASSERT(f >= pf && c >= pc, "not monotonic at %zu", n);
		pf = f;
		pc = c;
	}
	/* Every class maps to itself; one past it is the next ceil. */
	mp_rng_t rng = {777};
	for (unsigned i = 0; i < NPSZ; i++) {
		size_t n = psz_pages[i];
		assert_int_equal(sz_psz_floor(n), i);
		assert_int_equal(sz_psz_ceil(n), i);
		if (i + 1 < NPSZ) {
			assert_int_equal(sz_psz_ceil(n + 1), i + 1);
			assert_int_equal(sz_psz_floor(psz_pages[i + 1] - 1), i);
			size_t gap = psz_pages[i + 1] - n;
			check_psz(n + mp_rng_below(&rng, gap));
		}
	}
	/* Page counts of every byte size up to 2^48 stay in range. */
	check_psz(((size_t)1 << 48) >> LG_PAGE);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_class_table_shape),
		cmocka_unit_test(test_index_round_trip),
		cmocka_unit_test(test_s2u_every_size_to_64k),
		cmocka_unit_test(test_s2u_sampled_to_2_40),
		cmocka_unit_test(test_lookup_table_matches_compute),
		cmocka_unit_test(test_tables_are_compile_time_formula),
		cmocka_unit_test(test_s2u_limits),
		cmocka_unit_test(test_sa2u_small),
		cmocka_unit_test(test_sa2u_large_and_overflow),
		cmocka_unit_test(test_slab_geometry),
		cmocka_unit_test(test_prof_slab_geometry),
		cmocka_unit_test(test_psz_classes),
	};
	return cmocka_run_group_tests(tests, boot, NULL) == 0 ? 0 : 1;
}
