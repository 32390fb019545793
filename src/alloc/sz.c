/*
 * sz.c: size classes.  Quantum-spaced classes up to 128 bytes, then four
 * classes per doubling, so a block wastes at most 20% of itself.  Tables
 * turn small sizes into class indices with one load; larger sizes use a
 * few shifts.  Slab geometry per small class is chosen here too.
 *
 * The tables are constants, built by the compiler: the malloc fast path
 * reads them before it knows whether the library is initialised, so
 * nothing may write them at run time (when sz_boot filled them, two
 * threads' first calls raced: one read while the other wrote, a data race
 * ThreadSanitizer reported).  The arithmetic below (sz_size2index_compute,
 * sz_index2size_compute, sz_slab_geometry_compute) is the definition;
 * test/unit/sz.c checks every entry against it, and so does sz_boot in
 * debug builds.
 */
#include "malloc_prof/internal/internal.h"

#if LG_QUANTUM != 4 || LG_PAGE != 12
#error "the size class tables below are written for 16-byte quanta and 4 KiB pages"
#endif

/* Repeats M(i) for n consecutive constants from i (n a power of two). */
#define SZ_R1(M, i) M(i),
#define SZ_R2(M, i) SZ_R1(M, i) SZ_R1(M, (i) + 1)
#define SZ_R4(M, i) SZ_R2(M, i) SZ_R2(M, (i) + 2)
#define SZ_R8(M, i) SZ_R4(M, i) SZ_R4(M, (i) + 4)
#define SZ_R16(M, i) SZ_R8(M, i) SZ_R8(M, (i) + 8)
#define SZ_R32(M, i) SZ_R16(M, i) SZ_R16(M, (i) + 16)
#define SZ_R64(M, i) SZ_R32(M, i) SZ_R32(M, (i) + 32)
#define SZ_R128(M, i) SZ_R64(M, i) SZ_R64(M, (i) + 64)
#define SZ_R256(M, i) SZ_R128(M, i) SZ_R128(M, (i) + 128)
#define SZ_R512(M, i) SZ_R256(M, i) SZ_R256(M, (i) + 256)

/* index2size_compute as a constant expression (i < SC_NSIZES): group
 * g = (i - 8) / 4 holds 2^(g+7) + (m+1) * 2^(g+5), m = (i - 8) % 4.  The
 * quantum branch guards every shift count from going negative. */
#define SZ_I2S(i) ((i) < 8 ? (size_t)((i) + 1) << LG_QUANTUM :		\
    ((size_t)1 << (((i) - 8) / 4 + 7)) +					\
    ((size_t)(((i) - 8) % 4 + 1) << (((i) - 8) / 4 + 5)))

/* floor(log2(x)) for 128 <= x < 16384 (7 below that range). */
#define SZ_LG14(x) ((x) >= 8192 ? 13 : (x) >= 4096 ? 12 : (x) >= 2048 ? 11 \
    : (x) >= 1024 ? 10 : (x) >= 512 ? 9 : (x) >= 256 ? 8 : 7)
/* sz_size2index_compute(k << LG_QUANTUM) as a constant expression, for
 * k < SC_LOOKUP_LEN (sizes up to SC_LOOKUP_MAX < 16384). */
#define SZ_S2I_X(x) (8 + (SZ_LG14(x) - 7) * 4 + (((x) >> (SZ_LG14(x) - 2)) & 3))
#define SZ_S2I(k) ((k) <= 8 ? ((k) == 0 ? 0 : (k) - 1) :			\
    SZ_S2I_X((size_t)(k) * QUANTUM - 1))

#define SZ_I2S_ENTRY(i) SZ_I2S(i)
#define SZ_S2I_ENTRY(k) (uint8_t)SZ_S2I(k)

_Static_assert(SC_NSIZES == 128 + 64 + 32 + 4, "index2size initialiser");
const size_t sz_index2size_tab[SC_NSIZES] = {
	SZ_R128(SZ_I2S_ENTRY, 0)
	SZ_R64(SZ_I2S_ENTRY, 128)
	SZ_R32(SZ_I2S_ENTRY, 192)
	SZ_R4(SZ_I2S_ENTRY, 224)
};

_Static_assert(SC_LOOKUP_LEN == 512 + 256 + 128 + 1,
    "size2index initialiser");
const uint8_t sz_size2index_tab[SC_LOOKUP_LEN] = {
	SZ_R512(SZ_S2I_ENTRY, 0)
	SZ_R256(SZ_S2I_ENTRY, 512)
	SZ_R128(SZ_S2I_ENTRY, 768)
	SZ_R1(SZ_S2I_ENTRY, 896)
};

_Static_assert(SZ_I2S(SC_NBINS - 1) == SC_SMALL_MAXCLASS, "small max");
_Static_assert(SZ_I2S(SC_NBINS) == SC_LARGE_MINCLASS, "large min");
_Static_assert(SZ_I2S(SC_NSIZES - 1) == SC_LARGE_MAXCLASS, "large max");
_Static_assert(SZ_S2I(SC_LOOKUP_LEN - 1) == SC_NBINS - 1, "lookup max");

/*
 * Slab geometry per small class, B(index, slab pages, profiler's slab
 * pages): what sz_slab_geometry_compute gives (see there) for 4 KiB
 * pages, written out because its search is no constant expression.
 */
#define SZ_BINS(B)							\
	B(0, 2, 1) B(1, 4, 1) B(2, 6, 1) B(3, 8, 1) B(4, 10, 1)	\
	B(5, 12, 1) B(6, 14, 1) B(7, 16, 1) B(8, 16, 1) B(9, 16, 1)	\
	B(10, 16, 1) B(11, 16, 1) B(12, 4, 1) B(13, 4, 1)		\
	B(14, 4, 1) B(15, 4, 1) B(16, 5, 1) B(17, 4, 1)		\
	B(18, 4, 1) B(19, 4, 1) B(20, 10, 1) B(21, 8, 2)		\
	B(22, 8, 1) B(23, 8, 1) B(24, 10, 2) B(25, 9, 3)		\
	B(26, 8, 1) B(27, 8, 1) B(28, 19, 4) B(29, 18, 3)		\
	B(30, 16, 2) B(31, 16, 2) B(32, 20, 5) B(33, 18, 3)		\
	B(34, 21, 4)
#define SZ_SLAB_SIZE(i, pages, prof_pages) (uint32_t)((pages) * PAGE),
#define SZ_SLAB_NREGS(i, pages, prof_pages)				\
	(uint32_t)((pages) * PAGE / SZ_I2S(i)),
#define SZ_PROF_SLAB_SIZE(i, pages, prof_pages)				\
	(uint32_t)((prof_pages) * PAGE),

_Static_assert(SC_NBINS == 35, "SZ_BINS has a row per small class");
const uint32_t sz_slab_size[SC_NBINS] = {SZ_BINS(SZ_SLAB_SIZE)};
const uint32_t sz_slab_nregs[SC_NBINS] = {SZ_BINS(SZ_SLAB_NREGS)};
const uint32_t sz_prof_slab_size[SC_NBINS] = {SZ_BINS(SZ_PROF_SLAB_SIZE)};

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

size_t sz_index2size_compute(unsigned ind) {
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
 * regions and SZ_SLAB_MIN_BYTES of the class (or SLAB_MAXREGS regions, the
 * most a slab's bitmaps hold, if that is less), preferring less than 1/64
 * waste; failing that, the least waste up to 64 pages.  Big slabs matter
 * for speed: a class whose objects are spread over many small slabs keeps
 * switching its current slab (a slow path each time) as frees punch holes
 * in all of them.  But a slab's touched pages stay resident, and a thread
 * holds a partly used slab of each class it uses, which in every arena
 * and for every class adds up: with 64 KiB for all, bench's alloctest (8
 * threads, a few live objects per class above 256 B) peaked at 1.12 x
 * jemalloc's RSS and larson (8 B-1 KiB) at 1.03 x.  So the classes from
 * 320 B to 1 KiB take 16 KiB and those to 4 KiB 32 KiB (8 to 64 and 8 to
 * 25 regions): alloctest -4%, larson -9%, within 1% of the instructions
 * (doc/performance.md, "Peak RSS, round 2").  Those up to 256 B keep 64
 * KiB (or 512 regions): batches of many small objects (glibc's
 * bench-malloc-simple) go through their slabs, and the larger classes
 * above 4 KiB hold few regions per slab as it is.
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

void sz_slab_geometry_compute(unsigned ind, uint32_t *slab_size,
    uint32_t *nregs, uint32_t *prof_slab_size) {
	size_t size = sz_index2size_compute(ind);
	size_t min_bytes = SZ_SLAB_MIN_BYTES(size) < SLAB_MAXREGS * size ?
	    SZ_SLAB_MIN_BYTES(size) : SLAB_MAXREGS * size;
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
	*slab_size = (uint32_t)(best_pages * PAGE);
	*nregs = (uint32_t)(best_pages * PAGE / size);
	*prof_slab_size = (uint32_t)(prof_slab_pages(size) * PAGE);
}

/*
 * Nothing to set up: the tables are constants.  Debug builds check them
 * against the arithmetic once (reads only, so a thread racing through
 * the malloc fast path meanwhile is no data race).
 */
void sz_boot(void) {
	if (!config_debug)
		return;
	for (unsigned i = 0; i < SC_NSIZES; i++)
		mp_assert(sz_index2size_tab[i] == sz_index2size_compute(i));
	for (size_t i = 0; i < SC_LOOKUP_LEN; i++)
		mp_assert(sz_size2index_tab[i] ==
		    sz_size2index_compute(i << LG_QUANTUM));
	for (unsigned i = 0; i < SC_NBINS; i++) {
		uint32_t slab, nregs, prof_slab;
		sz_slab_geometry_compute(i, &slab, &nregs, &prof_slab);
		mp_assert(sz_slab_size[i] == slab);
		mp_assert(sz_slab_nregs[i] == nregs);
		mp_assert(sz_prof_slab_size[i] == prof_slab);
	}
}

/*
 * slab_sizes: jemalloc's "lo-hi:pages|...", each segment giving the
 * classes whose size is in [lo, hi] slabs of `pages` pages; later
 * segments win.  As jemalloc does, the count is clamped to what a slab
 * of the class can be: at least the pages of one region, at most
 * SLAB_MAXREGS regions (the bitmaps' size) and SZ_SLAB_MAX_PAGES pages.
 * The geometry of every slab follows from its size (arena_slab_init), so
 * only the size chosen at slab_get changes.
 */
uint32_t sz_slab_pages_conf[SC_NBINS];

static bool sz_parse_num(const char **p, const char *end, size_t *v) {
	const char *s = *p;
	size_t n = 0;
	if (s == end || *s < '0' || *s > '9')
		return true;
	while (s < end && *s >= '0' && *s <= '9') {
		if (n > (SIZE_MAX - 9) / 10)
			return true;
		n = n * 10 + (size_t)(*s - '0');
		s++;
	}
	*p = s;
	*v = n;
	return false;
}

static uint32_t sz_slab_pages_clamp(unsigned ind, size_t pages) {
	size_t size = sz_index2size_compute(ind);
	size_t lo = (size + PAGE - 1) / PAGE;
	size_t hi = SLAB_MAXREGS * size / PAGE;
	if (hi > SZ_SLAB_MAX_PAGES)
		hi = SZ_SLAB_MAX_PAGES;
	if (hi < lo)
		hi = lo;
	return (uint32_t)(pages < lo ? lo : pages > hi ? hi : pages);
}

bool sz_slab_sizes_parse(const char *s, size_t len, uint32_t *pages) {
	const char *p = s, *end = s + len;
	if (pages != NULL)
		memset(pages, 0, SC_NBINS * sizeof(*pages));
	while (p < end) {
		size_t lo, hi, n;
		if (sz_parse_num(&p, end, &lo) || p == end || *p++ != '-' ||
		    sz_parse_num(&p, end, &hi) || p == end || *p++ != ':' ||
		    sz_parse_num(&p, end, &n) || lo > hi || n == 0)
			return true;
		if (p < end && *p++ != '|')
			return true;
		if (p == end && p[-1] == '|')
			return true;
		for (unsigned i = 0; pages != NULL && i < SC_NBINS; i++) {
			size_t size = sz_index2size_compute(i);
			if (size >= lo && size <= hi)
				pages[i] = sz_slab_pages_clamp(i, n);
		}
	}
	return false;
}

uint32_t sz_slab_size_get(unsigned ind) {
	uint32_t pages = sz_slab_pages_conf[ind];
	return pages != 0 ? pages * (uint32_t)PAGE : sz_slab_size[ind];
}

uint32_t sz_slab_nregs_get(unsigned ind) {
	return sz_slab_size_get(ind) / (uint32_t)sz_index2size_tab[ind];
}
