/*
 * sz.c: size classes.  Quantum-spaced classes up to 128 bytes, then four
 * classes per doubling, so a block wastes at most 20% of itself.  Tables
 * turn small sizes into class indices with one load; larger sizes use a
 * few shifts.  Slab geometry per small class is chosen here too.
 */
#include "malloc_prof/internal/internal.h"

uint8_t sz_size2index_tab[SC_LOOKUP_LEN];
size_t sz_index2size_tab[SC_NSIZES];
uint32_t sz_slab_size[SC_NBINS];
uint32_t sz_slab_nregs[SC_NBINS];
uint32_t sz_prof_slab_size[SC_NBINS];

static unsigned lg_floor(size_t x) {
	return (unsigned)(63 - __builtin_clzl(x));
}

/* Class index of `size` by arithmetic: 8 quantum classes (16..128), then
 * group g = lg - 7 holds the four classes in (2^lg, 2^(lg+1)]. */
unsigned sz_size2index_compute(size_t size) {
	if (size <= 128)
		return size == 0 ? 0 : (unsigned)((size - 1) >> LG_QUANTUM);
	size_t x = size - 1;
	unsigned lg = lg_floor(x);
	return 8 + (lg - 7) * 4 + (unsigned)((x >> (lg - 2)) & 3);
}

static size_t index2size_compute(unsigned ind) {
	if (ind < 8)
		return (size_t)(ind + 1) << LG_QUANTUM;
	unsigned g = (ind - 8) / 4, m = (ind - 8) % 4;
	unsigned lg = g + 7;
	return ((size_t)1 << lg) + ((size_t)(m + 1) << (lg - 2));
}

/*
 * Page-count classes for the arena's free-extent buckets: exact up to 8
 * pages, then four per doubling.  floor(n) is the largest class <= n,
 * ceil(n) the smallest class >= n, so any extent in bucket >= ceil(n) fits.
 */
static size_t psz_class_pages(unsigned ind) {
	if (ind < 8)
		return ind + 1;
	unsigned g = (ind - 8) / 4, m = (ind - 8) % 4;
	unsigned lg = g + 3;
	return ((size_t)1 << lg) + ((size_t)(m + 1) << (lg - 2));
}

unsigned sz_psz_ceil(size_t npages) {
	mp_assert(npages > 0);
	if (npages <= 8)
		return (unsigned)(npages - 1);
	size_t x = npages - 1;
	unsigned lg = lg_floor(x);
	unsigned ind = 8 + (lg - 3) * 4 + (unsigned)((x >> (lg - 2)) & 3);
	return ind < EXTENT_NPSIZES ? ind : EXTENT_NPSIZES - 1;
}

unsigned sz_psz_floor(size_t npages) {
	unsigned ind = sz_psz_ceil(npages);
	if (psz_class_pages(ind) > npages)
		ind--;
	return ind;
}

size_t sz_sa2u(size_t size, size_t alignment) {
	mp_assert(alignment != 0 && (alignment & (alignment - 1)) == 0);
	if (alignment <= QUANTUM)
		return sz_s2u(size);
	if (size == 0)
		size = 1;
	if (alignment <= PAGE) {
		/* A small class that is a multiple of the alignment has
		 * naturally aligned regions in a page-aligned slab. */
		size_t ceil = ALIGNMENT_CEILING(size, alignment);
		if (ceil < size)
			return 0;
		size_t usize = sz_s2u(ceil);
		if (usize != 0 && usize <= SC_SMALL_MAXCLASS)
			return usize;
	}
	/* Large: a page-multiple class; the extent is carved aligned. */
	if (size > SC_LARGE_MAXCLASS || alignment > SC_LARGE_MAXCLASS)
		return 0;
	size_t usize = size <= SC_LARGE_MINCLASS ? SC_LARGE_MINCLASS
	    : sz_s2u(size);
	return usize;
}

/*
 * Slab size per class: the smallest run of pages that holds at least four
 * regions and 64 KiB (or SLAB_MAXREGS regions, the most a slab's bitmaps
 * hold, if that is less), preferring less than 1/64 waste; failing that,
 * the least waste up to 64 pages.  A slab's pages are touched only as its
 * regions are used, so a big slab costs little memory.  Big slabs matter
 * for speed: a class whose objects are spread over many small slabs keeps
 * switching its current slab (a slow path each time) as frees punch holes
 * in all of them.
 */
/*
 * Slabs of the profiler's cache hold sampled objects, one per 512 KiB
 * allocated by default: a big slab would pin pages for one or two of them.
 * The smallest run of pages that wastes at most 1/8 of itself (a 14 KiB
 * class: 4 pages, 1 region; 16 B: one page).
 */
static size_t prof_slab_pages(size_t size) {
	for (size_t pages = 1; pages < SZ_SLAB_MAX_PAGES; pages++) {
		size_t bytes = pages * PAGE;
		if (bytes >= size && (bytes % size) * 8 <= bytes)
			return pages;
	}
	return SZ_SLAB_MAX_PAGES;
}

static void slab_geometry(unsigned ind) {
	size_t size = sz_index2size_tab[ind];
	size_t min_bytes = SZ_SLAB_MIN_BYTES < SLAB_MAXREGS * size ?
	    SZ_SLAB_MIN_BYTES : SLAB_MAXREGS * size;
	size_t best_pages = 0, best_waste = SIZE_MAX;
	for (size_t pages = 1; pages <= SZ_SLAB_MAX_PAGES; pages++) {
		size_t bytes = pages * PAGE;
		if (bytes < min_bytes || bytes / size < 4)
			continue;
		if (bytes / size > SLAB_MAXREGS)
			break;
		size_t waste = bytes % size;
		if (waste * 64 <= bytes) {
			best_pages = pages;
			break;
		}
		/* Compare waste as a fraction of the slab. */
		if (best_pages == 0 || waste * (best_pages * PAGE) <
		    best_waste * bytes) {
			best_pages = pages;
			best_waste = waste;
		}
	}
	if (best_pages == 0)
		best_pages = (4 * size + PAGE - 1) / PAGE;
	sz_slab_size[ind] = (uint32_t)(best_pages * PAGE);
	sz_slab_nregs[ind] = (uint32_t)(best_pages * PAGE / size);
	sz_prof_slab_size[ind] = (uint32_t)(prof_slab_pages(size) * PAGE);
}

void sz_boot(void) {
	for (unsigned i = 0; i < SC_NSIZES; i++)
		sz_index2size_tab[i] = index2size_compute(i);
	for (size_t i = 0; i < SC_LOOKUP_LEN; i++)
		sz_size2index_tab[i] =
		    (uint8_t)sz_size2index_compute(i << LG_QUANTUM);
	for (unsigned i = 0; i < SC_NBINS; i++)
		slab_geometry(i);
	mp_assert(sz_index2size_tab[SC_NBINS - 1] == SC_SMALL_MAXCLASS);
	mp_assert(sz_index2size_tab[SC_NBINS] == SC_LARGE_MINCLASS);
	mp_assert(sz_index2size_tab[SC_NSIZES - 1] == SC_LARGE_MAXCLASS);
}
