/*
 * test/unit/realloc_dirty.c - where a large block that realloc grows
 * goes (src/alloc/malloc.c, ralloc_impl; extent.c, extent_expand_locked
 * with prefer_dirty): when the pages after it are clean (never touched,
 * or purged) and a free dirty extent elsewhere in its arena holds the
 * new size, and the arena's dirty pages are a quarter of its pages in use
 * or more, the block moves into the dirty pages instead of faulting the
 * clean ones in.  In bench's realloc, buffers at the edge of the touched
 * pages kept growing into new ones while megabytes of dirty pages sat
 * unused: a peak of 16.1-16.4 MB in about one run in three, 13.8-14.6 in
 * the others, for the same pages in use (doc/performance.md, "prss2").
 *
 * xallocx, whose contract is to grow in place or not at all, still takes
 * the clean pages.  A block the profiler sampled (its record in
 * extent->prof) is resized exactly as one it did not sample: in place
 * into a dirty neighbour, moved out of the way of clean pages.
 *
 * And the profiler's memory does not grow with sampled reallocs: each
 * resize gives its sample back before the block is sampled again, and
 * the records are recycled (the thread's spare records, base.c's free
 * lists), so 40,000 reallocs, every one sampled, leave base.c's mappings
 * (stats.metadata) as they were (with sample_dispose leaking its record
 * this case fails).
 *
 * The blocks live in an arena of the test's own (MALLOCX_ARENA, no
 * cache), laid out from the front of its first mapping; every layout the
 * checks rely on is asserted first.  realloc_dirty.conf: prof:true with
 * sampling off until a case turns it on (prof.active, prof_reset(0):
 * every allocation a sample).  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define KIB ((size_t)1 << 10)
#define BLOCK (64 * KIB)
#define HOLE (256 * KIB)
#define GROWN (128 * KIB)

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static int teardown(void **state) {
	(void)state;
	bool old;
	(void)mp_prof_switch("prof.active", false, &old);
	prof_reset(opt_lg_prof_sample);
	return 0;
}

/* Sampling on for every allocation, or off; false if the build or the
 * options have no profiler (the sampled cases skip). */
static bool sampling(bool on) {
	if (!config_prof || !opt_prof)
		return false;
	bool old;
	assert_int_equal(mp_prof_switch("prof.active", on, &old), 0);
	prof_reset(on ? 0 : opt_lg_prof_sample);
	return true;
}

static arena_t *new_arena(int *flags) {
	unsigned ind;
	assert_false(arena_create(&ind));
	arena_t *a = arena_get(ind, false);
	assert_non_null(a);
	*flags = MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE;
	return a;
}

static size_t retained(arena_t *a) {
	arena_stats_t s;
	arena_stats_read(a, &s);
	return s.retained;
}

static unsigned char *block(size_t size, int flags, unsigned char fill) {
	unsigned char *p = LAUNDER(mallocx(size, flags));
	assert_non_null(p);
	memset(p, fill, size);
	return p;
}

static void check_bytes(const unsigned char *p, size_t n, unsigned char v) {
	for (size_t i = 0; i < n; i++) {
		if (p[i] != v)
			fail_msg("byte %zu of %p is %u, expected %u", i,
			    (const void *)p, p[i], v);
	}
}

/* [lo][hole][mid][b], contiguous, then the hole freed: dirty pages away
 * from b, clean pages right after it (the rest of the first mapping). */
typedef struct {
	arena_t *a;
	int flags;
	unsigned char *lo, *hole, *mid, *b;
} layout_t;

static void layout_make(layout_t *l) {
	l->a = new_arena(&l->flags);
	l->lo = block(BLOCK, l->flags, 1);
	l->hole = block(HOLE, l->flags, 2);
	l->mid = block(BLOCK, l->flags, 3);
	l->b = block(BLOCK, l->flags, 4);
	MP_ASSERT(l->hole == l->lo + BLOCK && l->mid == l->hole + HOLE &&
	    l->b == l->mid + BLOCK, "blocks not laid out in a row: %p %p %p "
	    "%p", (void *)l->lo, (void *)l->hole, (void *)l->mid,
	    (void *)l->b);
	dallocx(l->hole, l->flags);
	extent_t *next = pagemap_lookup(l->b + BLOCK);
	MP_ASSERT(next != NULL && next->kind == EXTENT_FREE_CLEAN &&
	    next->size >= GROWN - BLOCK, "no clean free extent after the "
	    "block (%p)", (void *)next);
	extent_t *h = pagemap_lookup(l->hole);
	MP_ASSERT(h != NULL && h->kind == EXTENT_FREE_DIRTY &&
	    h->size == HOLE, "the hole is not one dirty extent (%p)",
	    (void *)h);
}

static void layout_free(layout_t *l, unsigned char *b) {
	dallocx(l->lo, l->flags);
	dallocx(l->mid, l->flags);
	dallocx(b, l->flags);
}

/* realloc's growth moves into the dirty hole: no clean page taken. */
static void grow_moves_to_dirty(bool sampled) {
	layout_t l;
	layout_make(&l);
	if (sampled)
		assert_non_null(pagemap_lookup(l.b)->prof);
	size_t clean = retained(l.a);
	unsigned char *q = LAUNDER(rallocx(l.b, GROWN, l.flags));
	assert_non_null(q);
	MP_ASSERT(q >= l.hole && q + GROWN <= l.hole + HOLE, "%s block grew "
	    "to %p, not into the dirty hole %p..%p (it was at %p)",
	    sampled ? "a sampled" : "an unsampled", (void *)q,
	    (void *)l.hole, (void *)(l.hole + HOLE), (void *)l.b);
	check_bytes(q, BLOCK, 4);
	MP_ASSERT(retained(l.a) == clean, "%zu clean bytes taken by the "
	    "growth", clean - retained(l.a));
	if (sampled)
		assert_non_null(pagemap_lookup(q)->prof);
	layout_free(&l, q);
}

static void test_grow_moves_to_dirty(void **state) {
	(void)state;
	sampling(false);
	grow_moves_to_dirty(false);
}

static void test_sampled_grow_moves_to_dirty(void **state) {
	(void)state;
	if (!sampling(true))
		MP_SKIP("profiling not built in / not on");
	grow_moves_to_dirty(true);
}

/* xallocx grows in place or not at all: it takes the clean pages. */
static void test_xallocx_takes_clean(void **state) {
	(void)state;
	sampling(false);
	layout_t l;
	layout_make(&l);
	size_t clean = retained(l.a);
	assert_int_equal(xallocx(l.b, GROWN, 0, l.flags), GROWN);
	check_bytes(l.b, BLOCK, 4);
	assert_int_equal(retained(l.a), clean - (GROWN - BLOCK));
	layout_free(&l, l.b);
}

/* With few dirty pages (under a quarter of those in use) growth in place
 * takes the clean pages as before: no copy for a few pages. */
static void test_few_dirty_grows_in_place(void **state) {
	(void)state;
	sampling(false);
	int flags;
	arena_t *a = new_arena(&flags);
	unsigned char *big = block(2 * HOLE, flags, 5);
	unsigned char *hole = block(GROWN, flags, 6);
	unsigned char *b = block(BLOCK, flags, 7);
	MP_ASSERT(hole == big + 2 * HOLE && b == hole + GROWN, "blocks not "
	    "laid out in a row: %p %p %p", (void *)big, (void *)hole,
	    (void *)b);
	dallocx(hole, flags);           /* 32 dirty pages, 144 in use */
	size_t clean = retained(a);
	unsigned char *q = LAUNDER(rallocx(b, GROWN, flags));
	assert_ptr_equal(q, b);
	check_bytes(q, BLOCK, 7);
	assert_int_equal(retained(a), clean - (GROWN - BLOCK));
	dallocx(big, flags);
	dallocx(q, flags);
}

/* Into a dirty neighbour a block grows in place, sampled or not. */
static void grow_into_dirty_neighbour(bool sampled) {
	int flags;
	(void)new_arena(&flags);
	unsigned char *b = block(BLOCK, flags, 8);
	unsigned char *n = block(GROWN, flags, 9);
	unsigned char *end = block(BLOCK, flags, 10);
	MP_ASSERT(n == b + BLOCK && end == n + GROWN, "blocks not laid out "
	    "in a row: %p %p %p", (void *)b, (void *)n, (void *)end);
	dallocx(n, flags);
	if (sampled)
		assert_non_null(pagemap_lookup(b)->prof);
	unsigned char *q = LAUNDER(rallocx(b, GROWN, flags));
	MP_ASSERT(q == b, "%s block moved to %p instead of growing in place "
	    "at %p", sampled ? "a sampled" : "an unsampled", (void *)q,
	    (void *)b);
	check_bytes(q, BLOCK, 8);
	if (sampled)
		assert_non_null(pagemap_lookup(q)->prof);
	dallocx(q, flags);
	dallocx(end, flags);
}

static void test_grow_into_dirty_neighbour(void **state) {
	(void)state;
	sampling(false);
	grow_into_dirty_neighbour(false);
}

static void test_sampled_grow_into_dirty_neighbour(void **state) {
	(void)state;
	if (!sampling(true))
		MP_SKIP("profiling not built in / not on");
	grow_into_dirty_neighbour(true);
}

/* 40,000 sampled reallocs through small and large classes, one buffer
 * (the thread's own arena and cache): base.c maps nothing more after the
 * first 1,000 (a record leaked at each realloc would be 40,000 of them,
 * megabytes). */
static void test_sampled_reallocs_keep_profiler_memory(void **state) {
	(void)state;
	if (!sampling(true))
		MP_SKIP("profiling not built in / not on");
	unsigned char *p = LAUNDER(malloc(8));
	assert_non_null(p);
	size_t mapped = 0;
	for (unsigned i = 0; i < 41000; i++) {
		if (i == 1000)
			mapped = base_mapped_bytes();
		/* 8 B .. 96 KiB and back: every realloc changes class. */
		size_t size = (size_t)8 << (i % 14);
		p = LAUNDER(realloc(p, size));
		assert_non_null(p);
		p[size - 1] = (unsigned char)i;
	}
	extent_t *e = pagemap_lookup(p);
	assert_non_null(e);
	MP_ASSERT(e->kind == EXTENT_LARGE ? e->prof != NULL :
	    atomic_load(&e->nsampled) != 0, "the last block is not sampled");
	MP_ASSERT(base_mapped_bytes() == mapped, "base.c mapped %zu bytes "
	    "over 40,000 sampled reallocs", base_mapped_bytes() - mapped);
	free(p);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_grow_moves_to_dirty, teardown),
		cmocka_unit_test_teardown(test_sampled_grow_moves_to_dirty,
		    teardown),
		cmocka_unit_test_teardown(test_xallocx_takes_clean, teardown),
		cmocka_unit_test_teardown(test_few_dirty_grows_in_place,
		    teardown),
		cmocka_unit_test_teardown(test_grow_into_dirty_neighbour,
		    teardown),
		cmocka_unit_test_teardown(test_sampled_grow_into_dirty_neighbour,
		    teardown),
		cmocka_unit_test_teardown(
		    test_sampled_reallocs_keep_profiler_memory, teardown),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
