/*
 * test/unit/pagemap.c - the page map (src/alloc/pagemap.c).
 *
 * The allocator's own pages live in the same map, so every test works on
 * pages of a PROT_NONE reservation made here (no one else can map there
 * while it is held) and points them at fake extent_t records; every entry
 * set is cleared again before the test ends, and the reservation is never
 * released, so no stale entry can outlive its test.  The reservation spans
 * six leaves' worth of address space (a leaf covers 2^PAGEMAP_LEAF_BITS
 * pages).  Counting from the first leaf boundary inside it, `boundary`:
 * the leaves before and after it are used by the range tests, the leaf at
 * boundary + 2 leaves only by the concurrent-creation test, and the two
 * after that only by test_prepare, so those two tests usually see leaves
 * that do not exist yet.
 */
#include "../test_util.h"

#include <sys/mman.h>

#include "malloc_prof/internal/internal.h"

#define LEAF_SPAN ((size_t)PAGEMAP_LEAF_LEN << LG_PAGE)   /* bytes */

static char *res;          /* the reservation */
static size_t res_size;
static char *boundary;     /* the first leaf boundary inside it */
static extent_t fakes[4];

static int setup(void **state) {
	(void)state;
	if (malloc_init())
		return -1;
	res_size = 6 * LEAF_SPAN;
	void *p = mmap(NULL, res_size, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	res = p;
	boundary = (char *)ALIGNMENT_CEILING((uintptr_t)res + PAGE, LEAF_SPAN);
	if (boundary + 5 * LEAF_SPAN > res + res_size)
		return -1;
	for (unsigned i = 0; i < 4; i++) {
		fakes[i].kind = EXTENT_LARGE;
		fakes[i].size = PAGE;
	}
	return 0;
}

static pagemap_leaf_t *root_of(const void *p) {
	return atomic_load(&pagemap_root[((uintptr_t)p >> LG_PAGE) >>
	    PAGEMAP_LEAF_BITS]);
}

/* Every page of [a, a + n pages) maps to e (checked at first, middle and
 * last byte of each page). */
static void expect_range(const char *a, size_t npages, extent_t *e) {
	for (size_t i = 0; i < npages; i++) {
		const char *pg = a + i * PAGE;
		MP_ASSERT(pagemap_lookup(pg) == e, "page %zu (%p): %p, "
		    "expected %p", i, (void *)pg, (void *)pagemap_lookup(pg),
		    (void *)e);
		MP_ASSERT(pagemap_lookup(pg + PAGE / 2) == e, "page %zu mid", i);
		MP_ASSERT(pagemap_lookup(pg + PAGE - 1) == e, "page %zu end",
		    i);
	}
}

static void test_constants(void **state) {
	(void)state;
	assert_int_equal(PAGEMAP_KEY_BITS, 48 - LG_PAGE);
	assert_int_equal(PAGEMAP_LEAF_BITS + PAGEMAP_ROOT_BITS,
	    PAGEMAP_KEY_BITS);
	assert_int_equal(PAGEMAP_LEAF_LEN * PAGEMAP_ROOT_LEN,
	    (size_t)1 << PAGEMAP_KEY_BITS);
	assert_int_equal(sizeof(pagemap_leaf_t),
	    PAGEMAP_LEAF_LEN * sizeof(extent_t *));
}

static void test_never_set_is_null(void **state) {
	(void)state;
	/* Nothing of ours is set yet: every page, sampled densely around the
	 * boundary and sparsely elsewhere, reads NULL. */
	for (size_t off = 0; off < res_size; off += 61 * PAGE)
		MP_ASSERT(pagemap_lookup(res + off) == NULL, "offset %zu", off);
	expect_range(boundary - 64 * PAGE, 128, NULL);
	expect_range(res, 16, NULL);
	expect_range(res + res_size - 16 * PAGE, 16, NULL);
	assert_null(pagemap_lookup(NULL));
	assert_null(pagemap_lookup((void *)(uintptr_t)1));
	assert_null(pagemap_lookup((void *)(uintptr_t)PAGE));
}

static void test_single_page(void **state) {
	(void)state;
	char *a = res + 10 * PAGE;
	assert_false(pagemap_set_range(a, PAGE, &fakes[0]));
	expect_range(a, 1, &fakes[0]);
	/* Neighbours untouched. */
	assert_null(pagemap_lookup(a - 1));
	assert_null(pagemap_lookup(a - PAGE));
	assert_null(pagemap_lookup(a + PAGE));
	/* Overwrite, then clear. */
	assert_false(pagemap_set_range(a, PAGE, &fakes[1]));
	expect_range(a, 1, &fakes[1]);
	assert_false(pagemap_set_range(a, PAGE, NULL));
	expect_range(a - PAGE, 3, NULL);
}

static void test_range(void **state) {
	(void)state;
	char *a = res + 100 * PAGE;
	assert_false(pagemap_set_range(a, 37 * PAGE, &fakes[0]));
	expect_range(a, 37, &fakes[0]);
	assert_null(pagemap_lookup(a - 1));
	assert_null(pagemap_lookup(a + 37 * PAGE));
	/* A sub-range overwritten with another extent. */
	assert_false(pagemap_set_range(a + 10 * PAGE, 5 * PAGE, &fakes[1]));
	expect_range(a, 10, &fakes[0]);
	expect_range(a + 10 * PAGE, 5, &fakes[1]);
	expect_range(a + 15 * PAGE, 22, &fakes[0]);
	/* A zero-length set writes nothing. */
	assert_false(pagemap_set_range(a + 40 * PAGE, 0, &fakes[2]));
	assert_null(pagemap_lookup(a + 40 * PAGE));
	/* Clearing part of it, then all of it. */
	assert_false(pagemap_set_range(a, 10 * PAGE, NULL));
	expect_range(a, 10, NULL);
	expect_range(a + 10 * PAGE, 5, &fakes[1]);
	assert_false(pagemap_set_range(a, 37 * PAGE, NULL));
	expect_range(a - PAGE, 39, NULL);
}

static void test_range_across_leaf_boundary(void **state) {
	(void)state;
	char *a = boundary - 3 * PAGE;
	assert_false(pagemap_set_range(a, 7 * PAGE, &fakes[2]));
	/* Both leaves exist and are different. */
	pagemap_leaf_t *l0 = root_of(boundary - PAGE), *l1 = root_of(boundary);
	assert_non_null(l0);
	assert_non_null(l1);
	assert_ptr_not_equal(l0, l1);
	expect_range(a, 7, &fakes[2]);
	assert_null(pagemap_lookup(a - 1));
	assert_null(pagemap_lookup(a + 7 * PAGE));
	/* The entries sit where the two-level layout says. */
	uintptr_t kb = (uintptr_t)boundary >> LG_PAGE;
	assert_int_equal(kb & (PAGEMAP_LEAF_LEN - 1), 0);
	assert_ptr_equal(atomic_load(&(*l1)[0]), &fakes[2]);
	assert_ptr_equal(atomic_load(&(*l1)[3]), &fakes[2]);
	assert_null(atomic_load(&(*l1)[4]));
	assert_ptr_equal(atomic_load(&(*l0)[PAGEMAP_LEAF_LEN - 1]), &fakes[2]);
	assert_ptr_equal(atomic_load(&(*l0)[PAGEMAP_LEAF_LEN - 3]), &fakes[2]);
	assert_null(atomic_load(&(*l0)[PAGEMAP_LEAF_LEN - 4]));
	/* Ending exactly at the boundary / starting exactly at it. */
	assert_false(pagemap_set_range(a, 7 * PAGE, NULL));
	assert_false(pagemap_set_range(boundary - 2 * PAGE, 2 * PAGE,
	    &fakes[0]));
	assert_false(pagemap_set_range(boundary, 2 * PAGE, &fakes[1]));
	expect_range(boundary - 2 * PAGE, 2, &fakes[0]);
	expect_range(boundary, 2, &fakes[1]);
	assert_null(pagemap_lookup(boundary - 3 * PAGE));
	assert_null(pagemap_lookup(boundary + 2 * PAGE));
	assert_false(pagemap_set_range(boundary - 2 * PAGE, 4 * PAGE, NULL));
	expect_range(boundary - 3 * PAGE, 6, NULL);
	/* One range over a whole leaf and a bit on both sides. */
	assert_false(pagemap_set_range(boundary - PAGE, LEAF_SPAN + 2 * PAGE,
	    &fakes[3]));
	expect_range(boundary - PAGE, 2, &fakes[3]);
	expect_range(boundary + LEAF_SPAN - PAGE, 2, &fakes[3]);
	for (size_t i = 0; i < PAGEMAP_LEAF_LEN; i += 4099)
		MP_ASSERT(pagemap_lookup(boundary + i * PAGE) == &fakes[3],
		    "page %zu of the leaf", i);
	assert_null(pagemap_lookup(boundary - 2 * PAGE));
	assert_null(pagemap_lookup(boundary + LEAF_SPAN + PAGE));
	assert_false(pagemap_set_range(boundary - 2 * PAGE,
	    LEAF_SPAN + 4 * PAGE, NULL));
	expect_range(boundary - 3 * PAGE, 6, NULL);
	expect_range(boundary + LEAF_SPAN - 3 * PAGE, 6, NULL);
}

static void test_set_bounds(void **state) {
	(void)state;
	extent_t e;
	memset(&e, 0, sizeof(e));
	e.kind = EXTENT_LARGE;
	/* Five pages: first and last only. */
	e.addr = res + 200 * PAGE;
	e.size = 5 * PAGE;
	assert_false(pagemap_set_bounds(&e));
	expect_range(e.addr, 1, &e);
	expect_range(e.addr + PAGE, 3, NULL);
	expect_range(e.addr + 4 * PAGE, 1, &e);
	assert_null(pagemap_lookup(e.addr - 1));
	assert_null(pagemap_lookup(e.addr + e.size));
	assert_false(pagemap_set_range(e.addr, e.size, NULL));
	/* Two pages: both. */
	e.size = 2 * PAGE;
	assert_false(pagemap_set_bounds(&e));
	expect_range(e.addr, 2, &e);
	assert_null(pagemap_lookup(e.addr + 2 * PAGE));
	assert_false(pagemap_set_range(e.addr, e.size, NULL));
	/* One page. */
	e.size = PAGE;
	assert_false(pagemap_set_bounds(&e));
	expect_range(e.addr, 1, &e);
	assert_null(pagemap_lookup(e.addr + PAGE));
	assert_null(pagemap_lookup(e.addr - PAGE));
	assert_false(pagemap_set_range(e.addr, e.size, NULL));
	/* Across the leaf boundary: the bounds land in different leaves. */
	e.addr = boundary - 2 * PAGE;
	e.size = 6 * PAGE;
	assert_false(pagemap_set_bounds(&e));
	expect_range(e.addr, 1, &e);
	expect_range(e.addr + PAGE, 4, NULL);
	expect_range(e.addr + 5 * PAGE, 1, &e);
	assert_false(pagemap_set_range(e.addr, e.size, NULL));
	expect_range(e.addr, 6, NULL);
}

static void test_prepare(void **state) {
	(void)state;
	/* A range across the boundary of two leaves no other test uses. */
	char *b = boundary + 4 * LEAF_SPAN;
	char *start = b - 2 * PAGE;
	bool fresh = root_of(b - PAGE) == NULL && root_of(b) == NULL;
	if (!fresh)
		printf("# leaves exist already: creation not observed\n");
	assert_false(pagemap_prepare(start, 4 * PAGE));
	assert_non_null(root_of(b - PAGE));
	assert_non_null(root_of(b));
	/* Preparing creates no entries. */
	expect_range(start - PAGE, 6, NULL);
	/* A single page, the last of a leaf: only that leaf is needed. */
	assert_false(pagemap_prepare(b - PAGE, PAGE));
	/* The whole reservation. */
	assert_false(pagemap_prepare(res, res_size));
	for (size_t off = 0; off < res_size; off += LEAF_SPAN / 2)
		assert_non_null(root_of(res + off));
	assert_non_null(root_of(res + res_size - PAGE));
	expect_range(boundary - 4 * PAGE, 8, NULL);
	/* Beyond the 48-bit space it fails. */
	assert_true(pagemap_prepare((void *)((uintptr_t)1 << 48), PAGE));
	assert_true(pagemap_prepare((void *)(((uintptr_t)1 << 48) - PAGE),
	    2 * PAGE));
}

static void test_above_48_bits(void **state) {
	(void)state;
	static const uintptr_t addrs[] = {
		(uintptr_t)1 << 48, ((uintptr_t)1 << 48) + PAGE,
		(uintptr_t)1 << 52, (uintptr_t)1 << 63,
		0xffff800000000000u, 0xffffffffffff0000u, UINTPTR_MAX,
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(addrs); i++)
		MP_ASSERT(pagemap_lookup((void *)addrs[i]) == NULL, "%#lx",
		    (unsigned long)addrs[i]);
	/* Setting there fails and writes nothing. */
	assert_true(pagemap_set_range((void *)((uintptr_t)1 << 48), PAGE,
	    &fakes[0]));
	assert_null(pagemap_lookup((void *)((uintptr_t)1 << 48)));
	/* A range that would run past the top fails as a whole: its first
	 * page, which is inside the space, is not written either. */
	char *top = (char *)(((uintptr_t)1 << 48) - PAGE);
	assert_null(pagemap_lookup(top));
	assert_true(pagemap_set_range(top, 2 * PAGE, &fakes[0]));
	assert_null(pagemap_lookup(top));
	/* The last page of the space is still a valid key; an address with
	 * bits above 48 never aliases it. */
	assert_false(pagemap_set_range(top, PAGE, &fakes[1]));
	assert_ptr_equal(pagemap_lookup(top), &fakes[1]);
	assert_ptr_equal(pagemap_lookup(top + PAGE - 1), &fakes[1]);
	assert_null(pagemap_lookup(top + PAGE));
	assert_null(pagemap_lookup(top + ((uintptr_t)1 << 48)));
	assert_null(pagemap_lookup((void *)UINTPTR_MAX));
	assert_false(pagemap_set_range(top, PAGE, NULL));
	assert_null(pagemap_lookup(top));
}

/* --------------------------------------------- concurrent leaf creation */

#define NTHREADS 8
static pthread_barrier_t barrier;
static char *race_base;
static extent_t race_fakes[NTHREADS];

static void *race_thread(void *arg) {
	unsigned i = (unsigned)(uintptr_t)arg;
	pthread_barrier_wait(&barrier);
	char *pg = race_base + (size_t)i * 977 * PAGE;
	MP_CHECK(!pagemap_set_range(pg, 3 * PAGE, &race_fakes[i]), "set %u",
	    i);
	return NULL;
}

static void test_concurrent_leaf_creation(void **state) {
	(void)state;
	/* A leaf only this test uses (if it exists already, the writes must
	 * land all the same). */
	race_base = boundary + 2 * LEAF_SPAN;
	if (root_of(race_base) != NULL)
		printf("# leaf exists already: no creation race\n");
	pthread_barrier_init(&barrier, NULL, NTHREADS);
	pthread_t th[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, race_thread,
		    (void *)(uintptr_t)i), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&barrier);
	assert_int_equal(atomic_load(&mp_failures), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		expect_range(race_base + (size_t)i * 977 * PAGE, 3,
		    &race_fakes[i]);
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_false(pagemap_set_range(race_base + (size_t)i * 977 *
		    PAGE, 3 * PAGE, NULL));
	for (unsigned i = 0; i < NTHREADS; i++)
		expect_range(race_base + (size_t)i * 977 * PAGE, 3, NULL);
}

/* The allocator's own entries obey the map's invariants. */
static void test_allocator_entries(void **state) {
	(void)state;
	char *small = LAUNDER(malloc(100));
	char *large = LAUNDER(malloc(100 * MP_KiB));
	assert_non_null(small);
	assert_non_null(large);
	extent_t *s = pagemap_lookup(small);
	assert_non_null(s);
	assert_int_equal(s->kind, EXTENT_SLAB);
	assert_true(small >= s->addr && small < s->addr + s->size);
	/* Every page of a slab maps to it. */
	for (size_t off = 0; off < s->size; off += PAGE)
		assert_ptr_equal(pagemap_lookup(s->addr + off), s);
	extent_t *l = pagemap_lookup(large);
	assert_non_null(l);
	assert_int_equal(l->kind, EXTENT_LARGE);
	assert_ptr_equal(l->addr, large);
	assert_ptr_equal(pagemap_lookup(large + l->size - 1), l);
	/* Interior pages of a large block: NULL or the block. */
	for (size_t off = PAGE; off + PAGE < l->size; off += PAGE) {
		extent_t *x = pagemap_lookup(large + off);
		assert_true(x == NULL || x == l);
	}
	free(small);
	free(large);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_constants),
		cmocka_unit_test(test_never_set_is_null),
		cmocka_unit_test(test_single_page),
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_range_across_leaf_boundary),
		cmocka_unit_test(test_set_bounds),
		cmocka_unit_test(test_above_48_bits),
		cmocka_unit_test(test_concurrent_leaf_creation),
		cmocka_unit_test(test_prepare),
		cmocka_unit_test(test_allocator_entries),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
