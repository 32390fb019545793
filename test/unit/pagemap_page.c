/*
 * test/unit/pagemap_page.c - pagemap_set_page, the inline one-page store
 * that splits and merges of extents use for their bounds (alloc.h), and
 * the bounds those splits and merges leave behind.
 *
 * pagemap_set_page must do what pagemap_set_range(addr, PAGE, e) does:
 * point the page at e, untagged, in the tree and in the flat tag table
 * (a stale tag there would send a free of that page to a cache bin), and
 * make the leaf when there is none.  The first tests work on a PROT_NONE
 * reservation of their own, as test/unit/pagemap.c does (its pages are no
 * one else's; every entry is cleared before the test ends).  The last one
 * carves and frees large blocks in a fresh arena so that free extents are
 * split and merged (split writes 3 pages and merge 3 since the inline
 * store: a free extent's first page is taken as mapping to it already),
 * and checks the bounds, the interior pages and the tags after each step.
 */
#include "../test_util.h"

#include <sys/mman.h>

#include "malloc_prof/internal/internal.h"

#define LEAF_SPAN ((size_t)PAGEMAP_LEAF_LEN << LG_PAGE)   /* bytes */

static char *res;          /* the reservation: three leaves' span */
static char *boundary;     /* its first leaf boundary */
static extent_t fakes[2];

static int setup(void **state) {
	(void)state;
	if (malloc_init())
		return -1;
	void *p = mmap(NULL, 3 * LEAF_SPAN, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	res = p;
	boundary = (char *)ALIGNMENT_CEILING((uintptr_t)res + PAGE, LEAF_SPAN);
	for (unsigned i = 0; i < 2; i++) {
		fakes[i].kind = EXTENT_LARGE;
		fakes[i].size = PAGE;
		fakes[i].szind = SC_NBINS + 1;
	}
	return 0;
}

static pagemap_leaf_t *leaf_of(const void *p) {
	return atomic_load(&pagemap_root[((uintptr_t)p >> LG_PAGE) >>
	    PAGEMAP_LEAF_BITS]);
}

/* The tree's entry and the flat table's tag both follow the store. */
static void test_sets_entry_and_clears_tag(void **state) {
	(void)state;
	char *pg = boundary + 5 * PAGE;
	assert_false(pagemap_set_class(pg, PAGE, &fakes[0]));
	assert_int_equal(pagemap_lookup_entry(pg) & PAGEMAP_TAG_MASK,
	    SC_NBINS + 2);
	if (pagemap_tags_pages != 0)
		assert_int_equal(pagemap_lookup_tag(pg), SC_NBINS + 2);
	pagemap_set_page(pg, &fakes[1]);
	assert_ptr_equal(pagemap_lookup(pg), &fakes[1]);
	assert_int_equal(pagemap_lookup_entry(pg) & PAGEMAP_TAG_MASK, 0);
	/* A tag left in the table would let free push this page's
	 * pointers on a cache bin. */
	assert_int_equal(pagemap_lookup_tag(pg), 0);
	/* Its neighbours are untouched. */
	assert_null(pagemap_lookup(pg - PAGE));
	assert_null(pagemap_lookup(pg + PAGE));
	pagemap_set_page(pg, NULL);
	assert_null(pagemap_lookup(pg));
	assert_int_equal(pagemap_lookup_entry(pg), 0);
}

/* A page whose leaf does not exist yet: the store makes it. */
static void test_makes_missing_leaf(void **state) {
	(void)state;
	char *pg = boundary + LEAF_SPAN + 7 * PAGE;
	bool had = leaf_of(pg) != NULL;
	pagemap_set_page(pg, &fakes[0]);
	assert_non_null(leaf_of(pg));
	assert_ptr_equal(pagemap_lookup(pg), &fakes[0]);
	pagemap_set_page(pg, NULL);
	assert_null(pagemap_lookup(pg));
	/* Only informative: another test may have made the leaf. */
	(void)had;
}

/* pagemap_set_bounds goes through the one-page store: both ends, and a
 * one-page extent's single page. */
static void test_bounds(void **state) {
	(void)state;
	extent_t e = {0};
	e.addr = boundary - 3 * PAGE;       /* across the leaf boundary */
	e.size = 6 * PAGE;
	assert_false(pagemap_set_bounds(&e));
	assert_ptr_equal(pagemap_lookup(e.addr), &e);
	assert_ptr_equal(pagemap_lookup(e.addr + e.size - 1), &e);
	for (size_t off = PAGE; off + PAGE < e.size; off += PAGE)
		assert_null(pagemap_lookup(e.addr + off));
	pagemap_set_page(e.addr, NULL);
	pagemap_set_page(e.addr + e.size - PAGE, NULL);
	e.size = PAGE;
	assert_false(pagemap_set_bounds(&e));
	assert_ptr_equal(pagemap_lookup(e.addr), &e);
	assert_null(pagemap_lookup(e.addr + PAGE));
	pagemap_set_page(e.addr, NULL);
}

/* The page map around every free extent of arena a: its bounds map to
 * it untagged, its interior pages to NULL or to it, and no page of it
 * carries a tag in the flat table. */
static void check_free_extents(arena_t *a, unsigned step) {
	for (unsigned k = 0; k < EXTENT_NFREE_KINDS; k++) {
		for (extent_t *e = a->sets[k].lru_head; e != NULL;
		    e = e->lru_next) {
			MP_ASSERT(pagemap_lookup_entry(e->addr) ==
			    (uintptr_t)e && pagemap_lookup_entry(e->addr +
			    e->size - PAGE) == (uintptr_t)e,
			    "step %u: bounds of free %p+%zu", step,
			    (void *)e->addr, e->size);
			for (size_t off = 0; off < e->size; off += PAGE) {
				uintptr_t x = pagemap_lookup_entry(e->addr +
				    off);
				MP_ASSERT(x == 0 || x == (uintptr_t)e,
				    "step %u: page %zu of free %p+%zu maps "
				    "to %#lx", step, off / PAGE,
				    (void *)e->addr, e->size,
				    (unsigned long)x);
				MP_ASSERT(pagemap_lookup_tag(e->addr + off) == 0,
				    "step %u: page %zu of free %p+%zu "
				    "tagged", step, off / PAGE,
				    (void *)e->addr, e->size);
			}
		}
	}
}

/* Blocks of 1-5 pages carved from one free run and freed in an order
 * that merges each with its left, its right or both neighbours. */
static void test_split_merge_bounds(void **state) {
	(void)state;
	unsigned ind;
	assert_false(arena_create(&ind));
	arena_t *a = arena_get(ind, false);
	assert_non_null(a);
	/* No purge between the steps. */
	atomic_store(&a->dirty_decay_ms, -1);
	enum { N = 12 };
	static const unsigned order[N] = {1, 3, 2, 6, 8, 7, 0, 11, 5, 9, 4,
	    10};
	char *p[N];
	unsigned step = 0;
	for (unsigned i = 0; i < N; i++) {
		size_t usize = sz_index2size(SC_NBINS + i % 5);
		p[i] = arena_large_alloc(a, usize, PAGE, false);
		assert_non_null(p[i]);
		extent_t *e = pagemap_lookup(p[i]);
		assert_non_null(e);
		assert_int_equal(e->kind, EXTENT_LARGE);
		assert_ptr_equal(pagemap_lookup(p[i] + usize - 1), e);
		check_free_extents(a, step++);
	}
	for (unsigned i = 0; i < N; i++) {
		arena_large_dalloc(pagemap_lookup(p[order[i]]));
		check_free_extents(a, step++);
	}
	/* Everything merged back: one dirty run per mapping touched. */
	assert_non_null(a->sets[EXTENT_FREE_DIRTY].lru_head);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sets_entry_and_clears_tag),
		cmocka_unit_test(test_makes_missing_leaf),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_split_merge_bounds),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
