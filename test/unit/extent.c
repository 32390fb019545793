/*
 * test/unit/extent.c - extents inside an arena (src/alloc/extent.c, through the
 * large-block and slab API of src/alloc/arena.c).
 *
 * Every test works on a fresh arena from arena_create, which no thread
 * uses, so its statistics and free sets hold exactly what the test did.
 * After each step check_arena() walks the arena's free sets and checks
 * their invariants: the kind, bucket and bitmap of every free extent, its
 * bounds in the page map, maximality (no free neighbour of the same kind
 * in the same mapping), the page counts, clean extents reading as zero,
 * and that every mapped page is active, dirty, muzzy or retained.
 *
 * Decay is switched off for the duration (dirty_decay_ms -1) so that only
 * the explicit arena_decay calls purge; options are restored afterwards.
 */
#include "../test_util.h"

#include <sys/mman.h>

#include "malloc_prof/internal/internal.h"

static ssize_t saved_dirty, saved_muzzy;
static bool saved_retain;

static int setup(void **state) {
	(void)state;
	if (malloc_init())
		return -1;
	saved_dirty = opt_dirty_decay_ms;
	saved_muzzy = opt_muzzy_decay_ms;
	saved_retain = opt_retain;
	return 0;
}

static int test_setup(void **state) {
	(void)state;
	opt_dirty_decay_ms = -1;
	opt_muzzy_decay_ms = 0;
	opt_retain = true;
	return 0;
}

static int test_teardown(void **state) {
	(void)state;
	opt_dirty_decay_ms = saved_dirty;
	opt_muzzy_decay_ms = saved_muzzy;
	opt_retain = saved_retain;
	return 0;
}

static arena_t *new_arena(void) {
	unsigned ind;
	assert_false(arena_create(&ind));
	arena_t *a = arena_get(ind, false);
	assert_non_null(a);
	assert_int_equal(a->ind, ind);
	return a;
}

static arena_stats_t stats(arena_t *a) {
	arena_stats_t s;
	arena_stats_read(a, &s);
	return s;
}

/* ---------------------------------------------------- invariant walk */

static char why[512];
static bool walk_ok;

/* The size-class tag of p's page-map entry: szind + 1, or 0. */
static unsigned page_tag(const void *p) {
	return (unsigned)(pagemap_lookup_entry(p) & PAGEMAP_TAG_MASK);
}

/* The tag a block of class szind carries on its first page. */
static unsigned class_tag(unsigned szind) {
	return szind + 1 <= PAGEMAP_TAG_MASK ? szind + 1 : 0;
}

#define WALK_CHECK(cond, ...) do {					\
	if (walk_ok && !(cond)) {					\
		walk_ok = false;					\
		int n_ = snprintf(why, sizeof(why), "%s: ", #cond);	\
		if (n_ > 0 && (size_t)n_ < sizeof(why))			\
			snprintf(why + n_, sizeof(why) - (size_t)n_,	\
			    __VA_ARGS__);				\
	}								\
} while (0)

static bool same_kind_neighbour(const extent_t *e, const extent_t *x,
    bool left) {
	if (x == NULL || x->kind != e->kind || x->map_addr != e->map_addr)
		return false;
	return left ? x->addr + x->size == e->addr
	    : x->addr == e->addr + e->size;
}

/* Walks the free sets under arena->mtx; asserts after unlocking. */
static void check_arena_at(arena_t *a, int line) {
	walk_ok = true;
	mp_mutex_lock(&a->mtx);
	for (unsigned k = 0; k < EXTENT_NFREE_KINDS; k++) {
		extent_set_t *set = &a->sets[k];
		size_t npages = 0, n = 0, nlru = 0;
		for (unsigned b = 0; b < EXTENT_NPSIZES; b++) {
			bool bit = (set->nonempty[b / 64] >> (b % 64)) & 1;
			WALK_CHECK(bit == (set->heads[b] != NULL),
			    "kind %u bucket %u", k, b);
			for (extent_t *e = set->heads[b]; e != NULL;
			    e = e->next) {
				n++;
				npages += e->size >> LG_PAGE;
				WALK_CHECK(e->kind == k, "%p kind %u in set "
				    "%u", (void *)e->addr, e->kind, k);
				WALK_CHECK(e->arena == a, "%p", (void *)e->addr);
				WALK_CHECK(e->size > 0 && e->size % PAGE == 0 &&
				    (uintptr_t)e->addr % PAGE == 0, "%p+%zu",
				    (void *)e->addr, e->size);
				WALK_CHECK(sz_psz_floor(e->size >> LG_PAGE) ==
				    b, "%zu pages in bucket %u", e->size /
				    PAGE, b);
				WALK_CHECK(e->addr >= e->map_addr && e->addr +
				    e->size <= e->map_addr + e->map_size,
				    "%p+%zu outside its mapping %p+%zu",
				    (void *)e->addr, e->size,
				    (void *)e->map_addr, e->map_size);
				WALK_CHECK(atomic_load(&e->owner) ==
				    &extent_large_owner, "%p owner",
				    (void *)e->addr);
				WALK_CHECK(pagemap_lookup(e->addr) == e &&
				    pagemap_lookup(e->addr + e->size - 1) == e,
				    "bounds of %p+%zu", (void *)e->addr,
				    e->size);
				/* A free extent's pages carry no size class
				 * (realloc would take them for a block). */
				WALK_CHECK(page_tag(e->addr) == 0 &&
				    page_tag(e->addr + e->size - 1) == 0,
				    "free %p+%zu tagged %u/%u", (void *)e->addr,
				    e->size, page_tag(e->addr),
				    page_tag(e->addr + e->size - 1));
				if (e->addr != e->map_addr)
					WALK_CHECK(!same_kind_neighbour(e,
					    pagemap_lookup(e->addr - 1), true),
					    "%p+%zu (kind %u) has a free left "
					    "neighbour", (void *)e->addr,
					    e->size, k);
				if (e->addr + e->size != e->map_addr +
				    e->map_size)
					WALK_CHECK(!same_kind_neighbour(e,
					    pagemap_lookup(e->addr + e->size),
					    false), "%p+%zu (kind %u) has a "
					    "free right neighbour",
					    (void *)e->addr, e->size, k);
				/* Interior pages: NULL or this extent. */
				for (char *q = e->addr + PAGE; q + PAGE <
				    e->addr + e->size; q += PAGE) {
					extent_t *x = pagemap_lookup(q);
					WALK_CHECK(x == NULL || x == e, "page %p "
					    "inside free %p+%zu maps to %p",
					    (void *)q, (void *)e->addr, e->size,
					    (void *)x);
					if (x != NULL && x != e)
						break;
				}
				if (k == EXTENT_FREE_CLEAN && e->zeroed) {
					uint64_t w0, w1;
					memcpy(&w0, e->addr, 8);
					memcpy(&w1, e->addr + e->size - 8, 8);
					WALK_CHECK(w0 == 0 && w1 == 0, "clean %p+%zu "
					    "not zero", (void *)e->addr, e->size);
				}
			}
		}
		/* The decay list: every free extent once, oldest first (decay
		 * stops at the first one not yet due), linked both ways. */
		for (extent_t *e = set->lru_head; e != NULL && nlru <= n;
		    e = e->lru_next) {
			nlru++;
			WALK_CHECK(e->lru_next == NULL ||
			    e->lru_next->free_ns >= e->free_ns, "kind %u: "
			    "decay list out of order at %p (%" PRIu64 " ns "
			    "before %" PRIu64 ")", k, (void *)e->addr,
			    e->free_ns, e->lru_next->free_ns);
			WALK_CHECK((e->lru_next == NULL) ==
			    (set->lru_tail == e) && (e->lru_next == NULL ||
			    e->lru_next->lru_prev == e), "kind %u: decay "
			    "list links broken at %p", k, (void *)e->addr);
		}
		WALK_CHECK(npages == set->npages, "kind %u: %zu pages listed, "
		    "npages %zu", k, npages, set->npages);
		WALK_CHECK(nlru == n, "kind %u: %zu extents, %zu on the LRU",
		    k, n, nlru);
		WALK_CHECK((set->lru_head == NULL) == (n == 0), "kind %u", k);
	}
	mp_mutex_unlock(&a->mtx);
	if (!walk_ok)
		MP_FAIL("line %d: arena %u: %s", line, a->ind, why);
	arena_stats_t s = stats(a);
	MP_ASSERT(s.mapped % PAGE == 0 && s.retained % PAGE == 0, "line %d",
	    line);
	MP_ASSERT(s.mapped / PAGE == s.pactive + s.pdirty + s.pmuzzy +
	    s.retained / PAGE, "line %d: mapped %zu pages != active %zu + "
	    "dirty %zu + muzzy %zu + retained %zu", line, s.mapped / PAGE,
	    s.pactive, s.pdirty, s.pmuzzy, s.retained / PAGE);
}
#define check_arena(a) check_arena_at((a), __LINE__)

/* The large extent of a block, with its invariants checked. */
static extent_t *large_of(arena_t *a, void *p, size_t usize) {
	extent_t *e = pagemap_lookup(p);
	assert_non_null(e);
	assert_int_equal(e->kind, EXTENT_LARGE);
	assert_ptr_equal(e->addr, p);
	assert_int_equal(e->size, usize);
	assert_ptr_equal(e->arena, a);
	assert_int_equal(e->szind, sz_size2index(usize));
	assert_ptr_equal(atomic_load(&e->owner), &extent_large_owner);
	assert_ptr_equal(pagemap_lookup((char *)p + usize - PAGE), e);
	assert_ptr_equal(pagemap_lookup((char *)p + usize - 1), e);
	/* The first page says the class, the last one nothing: realloc
	 * trusts a tag only at the block's start. */
	MP_ASSERT(page_tag(p) == class_tag(e->szind), "%p (class %u): tag %u",
	    p, e->szind, page_tag(p));
	MP_ASSERT(page_tag((char *)p + usize - 1) == 0, "%p+%zu: last page "
	    "tagged %u", p, usize, page_tag((char *)p + usize - 1));
	return e;
}

static void *alloc_large(arena_t *a, size_t usize, size_t align, bool zero) {
	void *p = arena_large_alloc(a, usize, align, zero);
	assert_non_null(p);
	assert_true(mp_is_aligned(p, align > PAGE ? align : PAGE));
	large_of(a, p, usize);
	return p;
}

static void free_large(void *p) {
	extent_t *e = pagemap_lookup(p);
	assert_non_null(e);
	assert_int_equal(e->kind, EXTENT_LARGE);
	arena_large_dalloc(e);
}

/* The free extent containing page p, found from its first page. */
static extent_t *free_at(void *p) {
	extent_t *e = pagemap_lookup(p);
	assert_non_null(e);
	MP_ASSERT(e->kind < EXTENT_NFREE_KINDS, "%p: kind %u", p, e->kind);
	return e;
}

/* ------------------------------------------------------------ tests */

static void test_large_alloc_geometry(void **state) {
	(void)state;
	arena_t *a = new_arena();
	arena_stats_t s0 = stats(a);
	assert_int_equal(s0.pactive, 0);
	assert_int_equal(s0.mapped, 0);
	assert_int_equal(s0.large_allocated, 0);
	static const size_t req[] = {
		16 * 1024, 20 * 1024, 32 * 1024, 100 * 1024, 16 * 1024,
		1 << 20, 3 << 20, 28 * 1024, 40 * 1024, 64 * 1024,
	};
	enum { N = sizeof(req) / sizeof(req[0]) };
	char *p[N];
	size_t u[N], total = 0;
	for (unsigned i = 0; i < N; i++) {
		u[i] = sz_s2u(req[i]);
		assert_true(u[i] >= SC_LARGE_MINCLASS && u[i] % PAGE == 0);
		p[i] = alloc_large(a, u[i], PAGE, false);
		pattern_fill(p[i], u[i], i + 1);
		total += u[i];
		arena_stats_t s = stats(a);
		assert_int_equal(s.pactive, total / PAGE);
		assert_int_equal(s.large_allocated, total);
		assert_int_equal(s.large_nmalloc, i + 1);
		check_arena(a);
	}
	/* Pairwise disjoint, and every block still holds its pattern. */
	for (unsigned i = 0; i < N; i++) {
		for (unsigned j = 0; j < N; j++)
			MP_ASSERT(i == j || p[i] + u[i] <= p[j] ||
			    p[j] + u[j] <= p[i], "blocks %u and %u overlap",
			    i, j);
		assert_int_equal(pattern_check(p[i], u[i], i + 1), SIZE_MAX);
	}
	for (unsigned i = 0; i < N; i++) {
		free_large(p[i]);
		total -= u[i];
		arena_stats_t s = stats(a);
		assert_int_equal(s.pactive, total / PAGE);
		assert_int_equal(s.large_allocated, total);
		assert_int_equal(s.large_ndalloc, i + 1);
		check_arena(a);
	}
	arena_stats_t s = stats(a);
	assert_int_equal(s.pactive, 0);
	assert_true(s.mapped >= (size_t)4 << 20);
	/* Freed blocks are dirty until purged. */
	assert_true(s.pdirty * PAGE >= (size_t)4 << 20);
}

static void test_coalesce(void **state) {
	(void)state;
	arena_t *a = new_arena();
	const size_t sz = SC_LARGE_MINCLASS;
	char *x = alloc_large(a, sz, PAGE, false);
	char *y = alloc_large(a, sz, PAGE, false);
	char *z = alloc_large(a, sz, PAGE, false);
	/* Carved one after the other from the fresh mapping. */
	assert_ptr_equal(y, x + sz);
	assert_ptr_equal(z, y + sz);
	/* A fence after z, so z's right neighbour is a block. */
	char *w = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(w, z + sz);
	check_arena(a);

	free_large(x);
	free_large(z);
	check_arena(a);
	extent_t *fx = free_at(x), *fz = free_at(z);
	assert_int_equal(fx->kind, EXTENT_FREE_DIRTY);
	assert_ptr_equal(fx->addr, x);
	assert_int_equal(fx->size, sz);
	assert_ptr_equal(fz->addr, z);
	assert_int_equal(fz->size, sz);
	assert_int_equal(stats(a).pdirty, 2 * sz / PAGE);

	/* Freeing the middle merges all three into one extent. */
	free_large(y);
	check_arena(a);
	extent_t *m = free_at(x);
	assert_int_equal(m->kind, EXTENT_FREE_DIRTY);
	assert_ptr_equal(m->addr, x);
	assert_int_equal(m->size, 3 * sz);
	assert_ptr_equal(pagemap_lookup(x + 3 * sz - PAGE), m);
	for (char *q = x + PAGE; q < x + 3 * sz - PAGE; q += PAGE) {
		extent_t *i = pagemap_lookup(q);
		MP_ASSERT(i == NULL || i == m, "interior page %p -> %p",
		    (void *)q, (void *)i);
	}
	/* The fence is untouched. */
	large_of(a, w, sz);
	arena_stats_t s = stats(a);
	assert_int_equal(s.pdirty, 3 * sz / PAGE);
	assert_int_equal(s.pactive, sz / PAGE);

	/* The merged extent serves a request of its exact size in place. */
	char *big = alloc_large(a, 3 * sz, PAGE, false);
	assert_ptr_equal(big, x);
	assert_int_equal(stats(a).pdirty, 0);
	free_large(big);
	/* Freeing the fence merges everything up to the clean tail (which
	 * differs in kind and stays apart). */
	free_large(w);
	check_arena(a);
	m = free_at(x);
	assert_int_equal(m->size, 4 * sz);
	extent_t *tail = free_at(x + 4 * sz);
	assert_int_equal(tail->kind, EXTENT_FREE_CLEAN);
	assert_ptr_equal(tail->addr, x + 4 * sz);
}

static void test_reuse_dirty_and_zero(void **state) {
	(void)state;
	arena_t *a = new_arena();
	const size_t sz = 64 * 1024;
	char *p = alloc_large(a, sz, PAGE, false);
	/* A fresh mapping reads as zero. */
	assert_int_equal(first_nonzero(p, sz), SIZE_MAX);
	memset(p, 0xab, sz);
	free_large(p);
	/* Dirty memory is reused first, contents untouched without zero. */
	char *q = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(q, p);
	assert_int_equal(first_not_byte(q, sz, 0xab), SIZE_MAX);
	free_large(q);
	/* With zero it is cleared. */
	q = alloc_large(a, sz, PAGE, true);
	assert_ptr_equal(q, p);
	assert_int_equal(first_nonzero(q, sz), SIZE_MAX);
	/* A smaller request carved from a dirty extent is zeroed too. */
	memset(q, 0xcd, sz);
	free_large(q);
	char *r = alloc_large(a, sz / 2, PAGE, true);
	assert_ptr_equal(r, p);
	assert_int_equal(first_nonzero(r, sz / 2), SIZE_MAX);
	/* The rest of the dirty extent kept its bytes (not zeroed early). */
	char *r2 = alloc_large(a, sz / 2, PAGE, false);
	assert_ptr_equal(r2, p + sz / 2);
	assert_int_equal(first_not_byte(r2, sz / 2, 0xcd), SIZE_MAX);
	free_large(r);
	free_large(r2);
	check_arena(a);
}

static void test_alignment(void **state) {
	(void)state;
	arena_t *a = new_arena();
	/* A dirty hole of exactly the size, suitably aligned, is reused even
	 * though its bucket is below the one every member of which fits
	 * (the bounded scan of the bucket below). */
	char *h = alloc_large(a, SC_LARGE_MINCLASS, 2 * PAGE, false);
	char *fence = alloc_large(a, SC_LARGE_MINCLASS, PAGE, false);
	assert_ptr_equal(fence, h + SC_LARGE_MINCLASS);
	free_large(h);
	assert_int_equal(free_at(h)->size, SC_LARGE_MINCLASS);
	char *h2 = alloc_large(a, SC_LARGE_MINCLASS, 2 * PAGE, false);
	assert_ptr_equal(h2, h);
	assert_int_equal(stats(a).pdirty, 0);
	free_large(h2);
	free_large(fence);
	check_arena(a);
	char *p[16];
	size_t al[16], n = 0, total = 0;
	for (size_t align = PAGE; align <= ((size_t)8 << 20); align <<= 1) {
		size_t usize = n % 2 ? SC_LARGE_MINCLASS : sz_s2u(40000);
		p[n] = alloc_large(a, usize, align, false);
		MP_ASSERT(mp_is_aligned(p[n], align), "%p not aligned to %zu",
		    (void *)p[n], align);
		pattern_fill(p[n], usize, align);
		al[n] = align;
		total += usize;
		n++;
		arena_stats_t s = stats(a);
		assert_int_equal(s.pactive, total / PAGE);
		assert_int_equal(s.large_allocated, total);
		check_arena(a);
	}
	for (size_t i = 0; i < n; i++) {
		size_t usize = i % 2 ? SC_LARGE_MINCLASS : sz_s2u(40000);
		assert_int_equal(pattern_check(p[i], usize, al[i]), SIZE_MAX);
		for (size_t j = 0; j < i; j++) {
			size_t uj = j % 2 ? SC_LARGE_MINCLASS : sz_s2u(40000);
			assert_true(p[i] + usize <= p[j] || p[j] + uj <= p[i]);
		}
	}
	for (size_t i = 0; i < n; i++) {
		free_large(p[i]);
		check_arena(a);
	}
	assert_int_equal(stats(a).pactive, 0);
	/* Once purged, each mapping is one clean extent again, and an
	 * 8 MiB aligned request fits in the free space without growing. */
	arena_decay(a, true);
	check_arena(a);
	size_t mapped = stats(a).mapped;
	assert_int_equal(stats(a).retained, mapped);
	char *q = alloc_large(a, SC_LARGE_MINCLASS, (size_t)8 << 20, false);
	assert_true(mp_is_aligned(q, (size_t)8 << 20));
	free_large(q);
	assert_int_equal(stats(a).mapped, mapped);
	check_arena(a);
}

static void test_resize_in_place(void **state) {
	(void)state;
	arena_t *a = new_arena();
	const size_t sz = SC_LARGE_MINCLASS;
	char *p = alloc_large(a, sz, PAGE, false);
	char *q = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(q, p + sz);
	pattern_fill(p, sz, 1);
	memset(q, 0x77, sz);
	free_large(q);
	extent_t *e = large_of(a, p, sz);

	/* Grow into the dirty neighbour, exactly its size: the new part is
	 * zeroed on request. */
	assert_false(arena_large_resize(e, 2 * sz, true, false));
	assert_ptr_equal(large_of(a, p, 2 * sz), e);
	for (char *x = p + PAGE; x < p + 2 * sz - PAGE; x += PAGE) {
		extent_t *i = pagemap_lookup(x);
		MP_ASSERT(i == NULL || i == e, "interior %p -> %p", (void *)x,
		    (void *)i);
	}
	assert_int_equal(pattern_check(p, sz, 1), SIZE_MAX);
	assert_int_equal(first_nonzero(p + sz, sz), SIZE_MAX);
	arena_stats_t s = stats(a);
	assert_int_equal(s.pactive, 2 * sz / PAGE);
	assert_int_equal(s.large_allocated, 2 * sz);
	assert_int_equal(s.pdirty, 0);
	check_arena(a);

	/* Grow into the clean rest of the mapping (split): reads zero. */
	size_t retained = s.retained;
	const size_t big = (size_t)1 << 20;
	assert_false(arena_large_resize(e, big, false, false));
	large_of(a, p, big);
	assert_int_equal(pattern_check(p, sz, 1), SIZE_MAX);
	assert_int_equal(first_nonzero(p + sz, big - sz), SIZE_MAX);
	s = stats(a);
	assert_int_equal(s.pactive, big / PAGE);
	assert_int_equal(s.large_allocated, big);
	assert_int_equal(s.retained, retained - (big - 2 * sz));
	extent_t *rest = free_at(p + big);
	assert_int_equal(rest->kind, EXTENT_FREE_CLEAN);
	assert_ptr_equal(rest->addr, p + big);
	check_arena(a);

	/* Shrink in place: the tail becomes a dirty free extent. */
	const size_t small = sz_s2u(20000);
	assert_false(arena_large_resize(e, small, false, false));
	large_of(a, p, small);
	assert_int_equal(pattern_check(p, sz, 1), SIZE_MAX);
	extent_t *t = free_at(p + small);
	assert_int_equal(t->kind, EXTENT_FREE_DIRTY);
	assert_ptr_equal(t->addr, p + small);
	assert_int_equal(t->size, big - small);
	s = stats(a);
	assert_int_equal(s.pactive, small / PAGE);
	assert_int_equal(s.large_allocated, small);
	assert_int_equal(s.pdirty, (big - small) / PAGE);
	check_arena(a);

	/* Same size: nothing to do, success. */
	assert_false(arena_large_resize(e, small, false, false));
	large_of(a, p, small);

	/* A live block right after: growing fails, nothing changes. */
	char *f = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(f, p + small);
	assert_true(arena_large_resize(e, small + PAGE, false, false));
	large_of(a, p, small);
	large_of(a, f, sz);
	assert_int_equal(stats(a).pactive, (small + sz) / PAGE);
	check_arena(a);

	/* A free neighbour too small: growing fails, the neighbour stays. */
	free_large(f);
	char *g = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(g, p + small);
	char *h = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(h, g + sz);
	free_large(g);
	assert_true(arena_large_resize(e, small + 2 * sz, false, false));
	large_of(a, p, small);
	extent_t *fg = free_at(g);
	assert_ptr_equal(fg->addr, g);
	assert_int_equal(fg->size, sz);
	/* ... but a partial grow into it works and leaves the rest free. */
	assert_false(arena_large_resize(e, small + PAGE, false, false));
	large_of(a, p, small + PAGE);
	extent_t *fr = free_at(g + PAGE);
	assert_ptr_equal(fr->addr, g + PAGE);
	assert_int_equal(fr->size, sz - PAGE);
	assert_int_equal(stats(a).large_allocated, small + PAGE + sz);
	check_arena(a);
	free_large(h);
	free_large(p);
	check_arena(a);
	assert_int_equal(stats(a).pactive, 0);
	assert_int_equal(stats(a).large_allocated, 0);
}

/* msync fails with ENOMEM on an address range that is not mapped. */
static bool is_mapped(void *p) {
	return msync(p, PAGE, MS_ASYNC) == 0;
}

static void test_mappings_stay_apart(void **state) {
	(void)state;
	arena_t *a = new_arena();
	/* The first mapping is exactly 2 MiB, the next 4 MiB. */
	const size_t s1 = (size_t)2 << 20, s2 = (size_t)4 << 20;
	char *m1 = alloc_large(a, s1, PAGE, false);
	char *m2 = alloc_large(a, s2, PAGE, false);
	assert_int_equal(stats(a).mapped, s1 + s2);
	bool adjacent = m2 + s2 == m1 || m1 + s1 == m2;
	if (!adjacent)
		printf("# mappings not adjacent: merge check is weaker\n");
	/* A block that ends its mapping cannot grow, even into a free
	 * extent that happens to follow it in another mapping. */
	char *lo = m2 < m1 ? m2 : m1, *hi = m2 < m1 ? m1 : m2;
	size_t lo_size = lo == m1 ? s1 : s2;
	free_large(hi);
	assert_true(arena_large_resize(pagemap_lookup(lo), lo_size + PAGE,
	    false, false));
	large_of(a, lo, lo_size);
	free_large(lo);
	check_arena(a);
	/* Free and adjacent, but in different mappings: not merged. */
	assert_int_equal(free_at(m1)->size, s1);
	assert_int_equal(free_at(m2)->size, s2);
	arena_decay(a, true);
	check_arena(a);
	assert_int_equal(free_at(m1)->size, s1);
	assert_int_equal(free_at(m2)->size, s2);
	assert_int_equal(free_at(m1)->kind, EXTENT_FREE_CLEAN);
	arena_stats_t s = stats(a);
	assert_int_equal(s.pdirty, 0);
	assert_int_equal(s.retained, s1 + s2);

	/* Without retain, a purged whole mapping goes back to the OS. */
	char *b1 = alloc_large(a, s1, PAGE, false);
	char *b2 = alloc_large(a, s2, PAGE, false);
	assert_ptr_equal(b1, m1);
	assert_ptr_equal(b2, m2);
	free_large(b1);
	free_large(b2);
	opt_retain = false;
	arena_decay(a, true);
	opt_retain = true;
	s = stats(a);
	assert_int_equal(s.mapped, 0);
	assert_int_equal(s.retained, 0);
	assert_int_equal(s.pdirty, 0);
	assert_null(pagemap_lookup(m1));
	assert_null(pagemap_lookup(m1 + s1 - PAGE));
	assert_null(pagemap_lookup(m2));
	assert_null(pagemap_lookup(m2 + s2 - PAGE));
	assert_false(is_mapped(m1));
	assert_false(is_mapped(m2 + s2 - PAGE));
	check_arena(a);
	/* The arena grows again afterwards. */
	char *c = alloc_large(a, SC_LARGE_MINCLASS, PAGE, false);
	assert_true(stats(a).mapped > 0);
	free_large(c);
	check_arena(a);
}

/* A request bigger than the next chunk gets a chunk of the next doubling
 * that holds it, which later blocks share: freed, they coalesce. */
static void test_big_request_shares_chunk(void **state) {
	(void)state;
	arena_t *a = new_arena();
	const size_t big = (size_t)20 << 20, small = (size_t)3 << 20;
	char *p = alloc_large(a, big, PAGE, false);
	assert_int_equal(stats(a).mapped, (size_t)32 << 20);
	assert_int_equal(a->grow_next, (size_t)64 << 20);
	char *q = alloc_large(a, small, PAGE, false);
	assert_int_equal(stats(a).mapped, (size_t)32 << 20);
	assert_ptr_equal(pagemap_lookup(q)->map_addr,
	    pagemap_lookup(p)->map_addr);
	free_large(p);
	free_large(q);
	check_arena(a);
	/* The two dirty blocks merge; the never-used tail is clean. */
	assert_int_equal(free_at(p)->size, big + small);
	arena_decay(a, true);
	check_arena(a);
	assert_int_equal(free_at(p)->size, (size_t)32 << 20);
}

/* Whether this kernel takes MADV_FREE (else lazy purging is forced). */
static bool madv_free_works(void) {
#ifdef MADV_FREE
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	bool ok = madvise(p, PAGE, MADV_FREE) == 0;
	munmap(p, PAGE);
	return ok;
#else
	return false;
#endif
}

static void test_decay(void **state) {
	(void)state;
	arena_t *a = new_arena();
	const size_t sz = (size_t)1 << 20;
	char *p = alloc_large(a, sz, PAGE, false);
	memset(p, 0x5c, sz);
	free_large(p);
	arena_stats_t s0 = stats(a);
	assert_int_equal(s0.pdirty, sz / PAGE);
	assert_true(s0.retained > 0);
	check_arena(a);

	/* Forced decay: dirty -> clean, merged with the clean rest. */
	arena_decay(a, true);
	arena_stats_t s1 = stats(a);
	assert_int_equal(s1.pdirty, 0);
	assert_int_equal(s1.pmuzzy, 0);
	assert_int_equal(s1.retained, s0.retained + sz);
	assert_int_equal(s1.mapped, s0.mapped);
	assert_int_equal(s1.npurge, s0.npurge + 1);
	assert_int_equal(s1.purged, s0.purged + sz / PAGE);
	assert_true(s1.nmadvise > s0.nmadvise);
	extent_t *c = free_at(p);
	assert_int_equal(c->kind, EXTENT_FREE_CLEAN);
	assert_true(c->zeroed);
	assert_int_equal(c->size, s1.retained);
	check_arena(a);
	/* Purged memory reads as zero, without asking for zero. */
	char *q = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(q, p);
	assert_int_equal(first_nonzero(q, sz), SIZE_MAX);
	/* Nothing dirty: a second forced decay purges nothing. */
	memset(q, 0x11, sz);
	arena_decay(a, true);
	assert_int_equal(stats(a).npurge, s1.npurge);
	assert_int_equal(first_not_byte(q, sz, 0x11), SIZE_MAX);

	/* Timed decay through muzzy: dirty older than dirty_decay_ms goes
	 * muzzy (MADV_FREE), and muzzy goes clean when forced. */
	free_large(q);
	opt_dirty_decay_ms = 1;
	opt_muzzy_decay_ms = -1;
	mp_sleep_ms(5);
	arena_decay(a, false);
	arena_stats_t s2 = stats(a);
	assert_int_equal(s2.pdirty, 0);
	if (madv_free_works())
		assert_int_equal(s2.pmuzzy, sz / PAGE);
	else
		printf("# MADV_FREE unavailable: purged to clean\n");
	check_arena(a);
	/* Muzzy memory is reused before clean memory and zeroed on request. */
	if (s2.pmuzzy != 0) {
		char *r = alloc_large(a, sz, PAGE, true);
		assert_ptr_equal(r, p);
		assert_int_equal(first_nonzero(r, sz), SIZE_MAX);
		assert_int_equal(stats(a).pmuzzy, 0);
		free_large(r);
		mp_sleep_ms(5);
		arena_decay(a, false);
		assert_int_equal(stats(a).pmuzzy, sz / PAGE);
	}
	opt_dirty_decay_ms = -1;
	arena_decay(a, true);
	arena_stats_t s3 = stats(a);
	assert_int_equal(s3.pmuzzy, 0);
	assert_int_equal(s3.pdirty, 0);
	assert_int_equal(s3.retained, s3.mapped);
	check_arena(a);

	/* dirty_decay_ms:0 purges at once on free. */
	opt_dirty_decay_ms = 0;
	opt_muzzy_decay_ms = 0;
	char *z = alloc_large(a, sz, PAGE, false);
	memset(z, 0x22, sz);
	free_large(z);
	arena_stats_t s4 = stats(a);
	assert_int_equal(s4.pdirty, 0);
	assert_int_equal(s4.retained, s4.mapped);
	opt_dirty_decay_ms = -1;
	z = alloc_large(a, sz, PAGE, false);
	assert_int_equal(first_nonzero(z, sz), SIZE_MAX);
	free_large(z);
	check_arena(a);
}

/*
 * Timed decay purges every extent that has been dirty longer than
 * dirty_decay_ms, whatever order things happened in.  Run on a synthetic
 * clock: extent_decay_locked is called with `now` chosen from the free
 * times the extents recorded, so the outcome does not depend on timing.
 * Here the old extent is the unused remainder of a dirty extent that an
 * allocation was carved from: its pages have been dirty since the first
 * free, so they are due, while a younger extent freed later is not.
 */
static void test_decay_purges_by_age(void **state) {
	(void)state;
	arena_t *a = new_arena();
	const size_t sz = SC_LARGE_MINCLASS;
	char *d = alloc_large(a, 4 * sz, PAGE, false);
	char *f1 = alloc_large(a, sz, PAGE, false);
	char *b = alloc_large(a, sz, PAGE, false);
	char *f2 = alloc_large(a, sz, PAGE, false);
	assert_ptr_equal(f1, d + 4 * sz);
	assert_ptr_equal(b, f1 + sz);
	assert_ptr_equal(f2, b + sz);
	memset(d, 1, 4 * sz);
	memset(b, 2, sz);
	free_large(d);
	uint64_t t_old = free_at(d)->free_ns;
	mp_sleep_ms(2);
	free_large(b);
	uint64_t t_young = free_at(b)->free_ns;
	assert_true(t_young > t_old);
	/* Carve half of the old extent; the other half stays free and
	 * dirty since t_old (never handed out). */
	char *h = alloc_large(a, 2 * sz, PAGE, false);
	assert_ptr_equal(h, d);
	extent_t *rem = free_at(d + 2 * sz);
	assert_int_equal(rem->kind, EXTENT_FREE_DIRTY);
	assert_int_equal(rem->size, 2 * sz);
	assert_int_equal(stats(a).pdirty, 3 * sz / PAGE);
	check_arena(a);

	/* 1 ns past the old extent's deadline: it is due, the young one
	 * (freed at least 2 ms later) is not. */
	const ssize_t ms = 1000;
	uint64_t now = t_old + (uint64_t)ms * 1000000u + 1;
	assert_true(now - t_young < (uint64_t)ms * 1000000u);
	opt_dirty_decay_ms = ms;
	mp_mutex_lock(&a->mtx);
	size_t purged = extent_decay_locked(a, now, false);
	mp_mutex_unlock(&a->mtx);
	opt_dirty_decay_ms = -1;
	arena_stats_t s = stats(a);
	MP_ASSERT(s.pdirty == sz / PAGE && purged == 2 * sz / PAGE,
	    "dirty since %" PRIu64 " ns before `now`: %zu pages still dirty "
	    "(expected %zu: only the young extent), %zu purged",
	    now - t_old, s.pdirty, sz / PAGE, purged);
	extent_t *young = free_at(b);
	assert_int_equal(young->kind, EXTENT_FREE_DIRTY);
	assert_int_equal(free_at(d + 2 * sz)->kind, EXTENT_FREE_CLEAN);
	check_arena(a);

	/* Past the young one's deadline everything dirty goes. */
	opt_dirty_decay_ms = ms;
	mp_mutex_lock(&a->mtx);
	extent_decay_locked(a, t_young + (uint64_t)ms * 1000000u + 1, false);
	mp_mutex_unlock(&a->mtx);
	opt_dirty_decay_ms = -1;
	assert_int_equal(stats(a).pdirty, 0);
	check_arena(a);
	free_large(h);
	free_large(f1);
	free_large(f2);
	check_arena(a);
}

static void test_slab_extents(void **state) {
	(void)state;
	arena_t *a = new_arena();
	extent_t *s[SC_NBINS];
	size_t pages = 0;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		s[i] = arena_slab_alloc(a, i, sz_slab_size[i], true);
		assert_non_null(s[i]);
		assert_int_equal(s[i]->kind, EXTENT_SLAB);
		assert_int_equal(s[i]->size, sz_slab_size[i]);
		assert_int_equal(s[i]->szind, i);
		assert_int_equal(s[i]->usize, sz_index2size(i));
		assert_int_equal(s[i]->nregs, sz_slab_nregs[i]);
		assert_int_equal(s[i]->used, 0);
		/* Every region free, none remote. */
		for (unsigned w = 0; w < SLAB_WORDS; w++) {
			unsigned first = w * 64, n = s[i]->nregs > first ?
			    s[i]->nregs - first : 0;
			assert_int_equal(s[i]->free_bits[w], n >= 64 ?
			    ~(uint64_t)0 : ((uint64_t)1 << n) - 1);
			assert_int_equal(atomic_load(&s[i]->remote_bits[w]),
			    0);
		}
		assert_true(mp_is_aligned(s[i]->addr, PAGE));
		/* Every page maps to the slab, with its class. */
		for (size_t off = 0; off < s[i]->size; off += PAGE) {
			assert_ptr_equal(pagemap_lookup(s[i]->addr + off), s[i]);
			assert_int_equal(page_tag(s[i]->addr + off), i + 1);
		}
		pages += s[i]->size / PAGE;
		arena_stats_t st = stats(a);
		assert_int_equal(st.pactive, pages);
		assert_int_equal(st.slabs_cur, i + 1);
		assert_int_equal(st.slabs_total, i + 1);
		assert_int_equal(st.large_allocated, 0);
	}
	check_arena(a);
	/* A kept empty slab restarted for another class (tcache's slab_get)
	 * carries the new class on every page. */
	arena_slab_init(s[1], 3, true);
	for (size_t off = 0; off < s[1]->size; off += PAGE)
		assert_int_equal(page_tag(s[1]->addr + off), 3 + 1);
	arena_slab_init(s[1], 1, true);
	for (size_t off = 0; off < s[1]->size; off += PAGE)
		assert_int_equal(page_tag(s[1]->addr + off), 1 + 1);
	for (unsigned i = 0; i < SC_NBINS; i += 2) {
		char *addr = s[i]->addr;
		size_t size = s[i]->size;
		arena_slab_dalloc(a, s[i]);
		pages -= size / PAGE;
		/* Interior pages no longer point at a slab. */
		extent_t *f = free_at(addr);
		for (size_t off = 0; off < size; off += PAGE) {
			extent_t *x = pagemap_lookup(addr + off);
			MP_ASSERT(x == NULL || x == f, "page %zu of freed slab "
			    "%u -> %p", off / PAGE, i, (void *)x);
			MP_ASSERT(page_tag(addr + off) == 0, "page %zu of "
			    "freed slab %u tagged %u", off / PAGE, i,
			    page_tag(addr + off));
		}
	}
	check_arena(a);
	arena_stats_t st = stats(a);
	assert_int_equal(st.pactive, pages);
	assert_int_equal(st.slabs_cur, SC_NBINS / 2);
	/* The slabs carved from the arena's first mapping lie end to end. */
	unsigned n_first = 0;
	while (n_first < SC_NBINS && s[n_first]->map_addr == s[0]->map_addr)
		n_first++;
	MP_ASSERT(n_first >= 8, "only %u slabs in the first mapping", n_first);
	char *first = s[0]->addr;
	char *last = s[n_first - 1]->addr + s[n_first - 1]->size;
	for (unsigned i = 1; i < SC_NBINS; i += 2)
		arena_slab_dalloc(a, s[i]);
	/* Those merged into one dirty extent; no page of it points at the
	 * records of the slabs merged away. */
	extent_t *m = free_at(first);
	assert_int_equal(m->kind, EXTENT_FREE_DIRTY);
	assert_ptr_equal(m->addr, first);
	assert_ptr_equal(m->addr + m->size, last);
	for (char *q = first; q < last; q += PAGE) {
		extent_t *x = pagemap_lookup(q);
		MP_ASSERT(x == NULL || x == m, "page %p -> %p", (void *)q,
		    (void *)x);
	}
	st = stats(a);
	assert_int_equal(st.pactive, 0);
	assert_int_equal(st.slabs_cur, 0);
	assert_int_equal(st.slabs_total, SC_NBINS);
	check_arena(a);
}

/* Random allocations, frees and resizes: stats exact, invariants hold,
 * blocks never overlap (each carries its id in its first and last word). */
static void test_random_ops(void **state) {
	(void)state;
	arena_t *a = new_arena();
	enum { NLIVE = 40, NOPS = 1500 };
	struct { char *p; size_t size; uint64_t id; } live[NLIVE];
	unsigned nlive = 0;
	size_t total = 0;
	uint64_t nmalloc = 0, ndalloc = 0, next_id = 1;
	mp_rng_t rng = {4242};
	for (unsigned op = 0; op < NOPS; op++) {
		unsigned kind = (unsigned)mp_rng_below(&rng, 10);
		if (nlive == 0 || (kind < 4 && nlive < NLIVE)) {
			unsigned ind = SC_NBINS + (unsigned)mp_rng_below(&rng,
			    mp_rng_below(&rng, 4) == 0 ? 24 : 10);
			size_t usize = sz_index2size(ind);
			size_t align = PAGE << mp_rng_below(&rng, 6);
			bool zero = mp_rng_below(&rng, 3) == 0;
			char *p = alloc_large(a, usize, align, zero);
			if (zero)
				MP_ASSERT(first_nonzero(p, usize) == SIZE_MAX,
				    "op %u: zeroed block not zero", op);
			uint64_t id = next_id++;
			memcpy(p, &id, 8);
			memcpy(p + usize - 8, &id, 8);
			live[nlive].p = p;
			live[nlive].size = usize;
			live[nlive].id = id;
			nlive++;
			total += usize;
			nmalloc++;
		} else if (kind < 7) {
			unsigned i = (unsigned)mp_rng_below(&rng, nlive);
			uint64_t w0, w1;
			memcpy(&w0, live[i].p, 8);
			memcpy(&w1, live[i].p + live[i].size - 8, 8);
			MP_ASSERT(w0 == live[i].id && w1 == live[i].id,
			    "op %u: block %" PRIu64 " overwritten", op,
			    live[i].id);
			free_large(live[i].p);
			total -= live[i].size;
			ndalloc++;
			live[i] = live[--nlive];
		} else if (kind < 9) {
			unsigned i = (unsigned)mp_rng_below(&rng, nlive);
			extent_t *e = large_of(a, live[i].p, live[i].size);
			unsigned ind = SC_NBINS + (unsigned)mp_rng_below(&rng,
			    16);
			size_t usize = sz_index2size(ind);
			bool grow = usize > live[i].size;
			if (!arena_large_resize(e, usize, true, false)) {
				if (grow)
					MP_ASSERT(first_nonzero(live[i].p +
					    live[i].size, usize - live[i].size)
					    == SIZE_MAX, "op %u: grown tail "
					    "not zero", op);
				total = total - live[i].size + usize;
				live[i].size = usize;
				memcpy(live[i].p + usize - 8, &live[i].id, 8);
			} else {
				MP_ASSERT(grow, "op %u: shrink failed", op);
			}
			large_of(a, live[i].p, live[i].size);
		} else {
			arena_decay(a, mp_rng_below(&rng, 2) == 0);
		}
		arena_stats_t s = stats(a);
		MP_ASSERT(s.pactive == total / PAGE && s.large_allocated ==
		    total, "op %u: pactive %zu, large_allocated %zu, expected "
		    "%zu bytes", op, s.pactive, s.large_allocated, total);
		assert_int_equal(s.large_nmalloc, nmalloc);
		assert_int_equal(s.large_ndalloc, ndalloc);
		if (op % 10 == 0)
			check_arena(a);
	}
	while (nlive > 0) {
		free_large(live[--nlive].p);
	}
	check_arena(a);
	assert_int_equal(stats(a).pactive, 0);
	assert_int_equal(stats(a).large_allocated, 0);
	arena_decay(a, true);
	arena_stats_t s = stats(a);
	assert_int_equal(s.retained, s.mapped);
	check_arena(a);
}

#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		T(test_large_alloc_geometry),
		T(test_coalesce),
		T(test_reuse_dirty_and_zero),
		T(test_alignment),
		T(test_resize_in_place),
		T(test_mappings_stay_apart),
		T(test_big_request_shares_chunk),
		T(test_decay),
		T(test_decay_purges_by_age),
		T(test_slab_extents),
		T(test_random_ops),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
