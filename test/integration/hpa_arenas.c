/*
 * test/integration/hpa_arenas.c - which arenas use opt.hpa's pageslabs
 * (issue 18), jemalloc 5.3's rule: every arena with the default extent
 * hooks, arena 0 and manual ones (arenas.create) included; an arena made
 * with hooks of its own keeps the extents, and one given hooks later
 * takes no more pageslab runs (those carved go back).  A manual arena's reset gives
 * its pageslab pages back (nothing active, small extent cache empty);
 * destroy unmaps its pageslabs (mincore says ENOMEM), and the index,
 * reused by the next arenas.create, takes pageslabs again.  An arena
 * with dss:primary still takes its small runs from pageslabs (jemalloc
 * 5.3's pa_alloc tries the HPA whatever dss says); dss applies to the
 * runs that go to the extents.
 */
#include "hpa_stats.h"

#include <sys/mman.h>

#define HP ((uintptr_t)2 << 20)
#define RUN (20 * 1024)
#define NRUN 64

static unsigned arena_make(extent_hooks_t *hooks) {
	unsigned ind = 0;
	size_t sz = sizeof(ind);
	extent_hooks_t *h = hooks;
	assert_int_equal(mallctl("arenas.create", &ind, &sz,
	    hooks != NULL ? &h : NULL, hooks != NULL ? sizeof(h) : 0), 0);
	return ind;
}

static void arena_call(unsigned a, const char *leaf) {
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.%s", a, leaf);
	MALLCTL_CALL(name);
}

static void *runs[NRUN];

/* Runs and small objects of the arena, by MALLOCX_ARENA. */
static void fill(unsigned a) {
	for (int i = 0; i < NRUN; i++) {
		runs[i] = mallocx(RUN, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
		assert_non_null(runs[i]);
		memset(LAUNDER(runs[i]), 0x33, RUN);
	}
}

static void test_arena0(void **state) {
	(void)state;
	unsigned zero = 0;
	MALLCTL_WRITE("thread.arena", zero);
	void *p = mallocx(RUN, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	assert_true(hpa_stat_size(0, "hpa_shard.nactive") >= RUN / 4096);
	dallocx(p, MALLOCX_TCACHE_NONE);
}

static void test_manual(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = arena_make(NULL);
	fill(a);
	MP_ASSERT(hpa_stat_size(a, "hpa_shard.nactive") >= NRUN * RUN / 4096,
	    "manual arena %u: %zu pageslab pages active", a,
	    hpa_stat_size(a, "hpa_shard.nactive"));
	assert_true(hpa_stat_size(a, "hpa_shard.npageslabs") >= 1);
	void *small = mallocx(64, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
	assert_non_null(small);
	/* reset: every allocation of the arena goes, and with them the
	 * pageslab pages (the small extent cache flushed too). */
	arena_call(a, "reset");
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), 0);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
	/* destroy: the pageslabs are unmapped. */
	fill(a);
	uintptr_t g = (uintptr_t)runs[0] & ~(HP - 1);
	static unsigned char vec[HP / 4096];
	assert_int_equal(mincore((void *)g, HP, vec), 0);
	for (int i = 0; i < NRUN; i++)
		dallocx(runs[i], MALLOCX_TCACHE_NONE);
	arena_call(a, "destroy");
	errno = 0;
	MP_ASSERT(mincore((void *)g, HP, vec) != 0 && errno == ENOMEM,
	    "pageslab %#lx still mapped after arena.%u.destroy",
	    (unsigned long)g, a);
	/* The index comes back, with pageslabs again. */
	unsigned b = arena_make(NULL);
	assert_int_equal(b, a);
	fill(b);
	assert_true(hpa_stat_size(b, "hpa_shard.nactive") >= NRUN * RUN / 4096);
	for (int i = 0; i < NRUN; i++)
		dallocx(runs[i], MALLOCX_TCACHE_NONE);
	arena_call(b, "destroy");
}

/* Hooks of its own (the defaults' functions, at another address): the
 * arena keeps the extents, as jemalloc's arena_new decides. */
static extent_hooks_t copy;

static void test_custom_hooks(void **state) {
	(void)state;
	extent_hooks_t *def = NULL;
	size_t sz = sizeof(def);
	assert_int_equal(mallctl("arena.0.extent_hooks", &def, &sz, NULL, 0),
	    0);
	copy = *def;
	unsigned a = arena_make(&copy);
	fill(a);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.npageslabs"), 0);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), 0);
	for (int i = 0; i < NRUN; i++)
		dallocx(runs[i], MALLOCX_TCACHE_NONE);
	/* The default hooks by their own address are the defaults. */
	unsigned b = arena_make(def);
	fill(b);
	assert_true(hpa_stat_size(b, "hpa_shard.nactive") >= NRUN * RUN / 4096);
	for (int i = 0; i < NRUN; i++)
		dallocx(runs[i], MALLOCX_TCACHE_NONE);
}

/* Hooks set later through arena.<i>.extent_hooks take the arena off the
 * pageslabs for new runs (jemalloc's arena_set_extent_hooks disables its
 * HPA); runs carved before still go back to them. */
static void test_hooks_later(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	extent_hooks_t *def = NULL;
	size_t sz = sizeof(def);
	assert_int_equal(mallctl("arena.0.extent_hooks", &def, &sz, NULL, 0),
	    0);
	copy = *def;
	unsigned a = arena_make(NULL);
	fill(a);
	size_t active = hpa_stat_size(a, "hpa_shard.nactive");
	assert_true(active >= NRUN * RUN / 4096);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.extent_hooks", a);
	extent_hooks_t *h = &copy;
	assert_int_equal(mallctl(name, NULL, NULL, &h, sizeof(h)), 0);
	void *later = mallocx(RUN, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
	assert_non_null(later);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), active);
	for (int i = 0; i < NRUN; i++)
		dallocx(runs[i], MALLOCX_TCACHE_NONE);
	arena_call(a, "purge");
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), 0);
	assert_int_equal(hpa_stat_size(a, "hpa_sec_bytes"), 0);
	dallocx(later, MALLOCX_TCACHE_NONE);
}

static void test_dss(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = arena_make(NULL);
	const char *primary = "primary";
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.dss", a);
	assert_int_equal(mallctl(name, NULL, NULL, &primary, sizeof(primary)),
	    0);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	char *brk0 = sbrk(0);
	char *run = mallocx(RUN, flags);
	assert_non_null(run);
	MP_ASSERT(hpa_stat_size(a, "hpa_shard.nactive") >= RUN / 4096,
	    "dss arena %u: %zu pageslab pages active", a,
	    hpa_stat_size(a, "hpa_shard.nactive"));
	/* A block above hpa_slab_max_alloc comes from the program break. */
	char *big = mallocx(3 * MP_MiB, flags);
	assert_non_null(big);
	char *brk1 = sbrk(0);
	MP_ASSERT(big >= brk0 && big + 3 * MP_MiB <= brk1,
	    "%p not in the break [%p, %p)", (void *)big, (void *)brk0,
	    (void *)brk1);
	MP_ASSERT(!(run >= brk0 && run < brk1), "run %p from the break",
	    (void *)run);
	dallocx(big, flags);
	dallocx(run, flags);
	arena_call(a, "destroy");
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arena0),
		cmocka_unit_test(test_manual),
		cmocka_unit_test(test_custom_hooks),
		cmocka_unit_test(test_dss),
		cmocka_unit_test(test_hooks_later),
	};
	return mp_run_tests(tests);
}
