/*
 * test/unit/prof_promote.c - sampled objects of the classes above a page
 * are promoted (malloc.c, alloc_promoted): each gets a block of the
 * smallest large class of its own, its record in the extent, instead of
 * a region of its arena's prof_cache, whose slabs of those classes held one
 * to three regions and were set up and released at nearly every sample.
 * What the program sees does not change: the usable size is the class's,
 * realloc within the class stays in place, the thread's counters of bytes
 * allocated and freed agree with malloc_usable_size, the block is as
 * aligned as asked (a request aligned past a cache line keeps the
 * prof_cache), and the profiler sees the object with its class's size.
 * Classes up to a page keep the prof_cache.
 *
 * prof_promote.conf: prof:true,lg_prof_sample:0 (every allocation is
 * sampled).  Nothing depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <pthread.h>

static uint64_t *allocatedp, *deallocatedp;

static int setup(void **state) {
	(void)state;
	if (malloc_init() || tsd_fetch() == NULL)
		return -1;
	size_t sz = sizeof(uint64_t *);
	if (mallctl("thread.allocatedp", &allocatedp, &sz, NULL, 0) != 0 ||
	    mallctl("thread.deallocatedp", &deallocatedp, &sz, NULL, 0) != 0)
		return -1;
	return 0;
}

static bool sampling(void) {
	return config_prof && opt_prof &&
	    atomic_load(&prof_active) && opt_lg_prof_sample == 0;
}

/* The calling thread's arena's, where its small samples go. */
static tcache_t *prof_cache(void) {
	return &tsd_fetch()->arena->prof_cache;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31 + seed);
}

static void check_fill(const unsigned char *p, size_t n, unsigned seed) {
	for (size_t i = 0; i < n; i++) {
		if (p[i] != (unsigned char)(i * 31 + seed))
			fail_msg("byte %zu of %zu changed", i, n);
	}
}

/* Classes above a page: a large block of their own, the record in the
 * extent, the class's usable size everywhere. */
static void test_promoted_above_a_page(void **state) {
	(void)state;
	if (!sampling())
		MP_SKIP("profiling not built in / not on / not every allocation");
	static const size_t sizes[] = {PAGE + 1, 5000, 6144, 7000, 8192,
	    10000, 12288, SC_SMALL_MAXCLASS};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t usize = sz_s2u(sizes[i]);
		uint64_t a0 = *allocatedp, d0 = *deallocatedp;
		unsigned char *p = LAUNDER(malloc(sizes[i]));
		assert_non_null(p);
		extent_t *e = pagemap_lookup(p);
		MP_ASSERT(e->kind == EXTENT_LARGE && e->size ==
		    SC_LARGE_MINCLASS && e->prof != NULL, "malloc(%zu): kind "
		    "%u, %zu bytes, record %p", sizes[i], (unsigned)e->kind,
		    e->size, e->prof);
		assert_int_equal(malloc_usable_size(p), usize);
		assert_int_equal(sallocx(p, 0), usize);
		assert_int_equal(*allocatedp - a0, usize);
		prof_sample_info_t info;
		assert_false(prof_sample_info(p, &info));
		assert_int_equal(info.usize, usize);
		fill(p, usize, (unsigned)i);
		/* Within the class: in place, as any block of the class
		 * (junk filling, debug builds' default, moves every
		 * realloc). */
		unsigned char *q = realloc(p, usize - 1);
		assert_non_null(q);
		if (!opt_junk_alloc)
			assert_ptr_equal(q, p);
		check_fill(q, usize - 1, (unsigned)i);
		assert_int_equal(malloc_usable_size(q), usize);
		/* A moved realloc freed p already. */
		d0 = *deallocatedp;
		free(q);
		assert_int_equal(*deallocatedp - d0, usize);
	}
}

/* A page and below: the prof_cache's slabs, as before. */
static void test_page_and_below_keep_prof_cache(void **state) {
	(void)state;
	if (!sampling())
		MP_SKIP("profiling not built in / not on / not every allocation");
	static const size_t sizes[] = {16, 64, 1000, 2560, 3584, PAGE};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		void *p = LAUNDER(malloc(sizes[i]));
		assert_non_null(p);
		extent_t *e = pagemap_lookup(p);
		assert_int_equal(e->kind, EXTENT_SLAB);
		assert_ptr_equal(slab_owner(e), prof_cache());
		assert_int_equal(malloc_usable_size(p), sz_s2u(sizes[i]));
		free(p);
	}
}

/* Aligned requests get what they ask for; past a cache line a
 * cache_oblivious block could not, so they keep the prof_cache. */
static void test_aligned(void **state) {
	(void)state;
	if (!sampling())
		MP_SKIP("profiling not built in / not on / not every allocation");
	static const size_t aligns[] = {16, 64, 128, 1024, PAGE};
	for (size_t i = 0; i < MP_ARRAY_SIZE(aligns); i++) {
		void *p = NULL;
		assert_int_equal(posix_memalign(&p, aligns[i], 6000), 0);
		MP_ASSERT(((uintptr_t)p & (aligns[i] - 1)) == 0, "%p is not "
		    "aligned to %zu", p, aligns[i]);
		extent_t *e = pagemap_lookup(p);
		bool promoted = aligns[i] <= (opt_cache_oblivious ? CACHELINE :
		    PAGE);
		assert_int_equal(e->kind, promoted ? EXTENT_LARGE :
		    EXTENT_SLAB);
		prof_sample_info_t info;
		assert_false(prof_sample_info(p, &info));
		assert_int_equal(malloc_usable_size(p), info.usize);
		free(p);
	}
}

/* realloc out of the class, both ways: the bytes come along, and the
 * counters end with the last block's usable size. */
static void test_realloc_out_of_class(void **state) {
	(void)state;
	if (!sampling())
		MP_SKIP("profiling not built in / not on / not every allocation");
	uint64_t a0 = *allocatedp, d0 = *deallocatedp;
	unsigned char *p = LAUNDER(malloc(6000));
	assert_non_null(p);
	fill(p, 6000, 7);
	/* Up into a large class (resized in place or moved). */
	p = realloc(p, 40000);
	assert_non_null(p);
	check_fill(p, 6000, 7);
	fill(p, 40000, 8);
	/* Down into a promoted class again. */
	p = realloc(p, 9000);
	assert_non_null(p);
	check_fill(p, 9000, 8);
	assert_int_equal(malloc_usable_size(p), sz_s2u(9000));
	/* Down to a class of the prof_cache. */
	p = realloc(p, 100);
	assert_non_null(p);
	check_fill(p, 100, 8);
	assert_int_equal(*allocatedp - a0 - (*deallocatedp - d0),
	    malloc_usable_size(p));
	free(p);
	assert_int_equal(*allocatedp - a0, *deallocatedp - d0);
}

/* A buffer grown and shrunk at random across the small and large
 * classes, realloc's shortcuts included (a promoted block's page carries
 * the smallest large class: a size of that class must not stay in a
 * block of 5-14 KiB): its bytes come along every time. */
static void test_realloc_sequence(void **state) {
	(void)state;
	if (!sampling())
		MP_SKIP("profiling not built in / not on / not every allocation");
	uint64_t rng = 1;
	size_t n = 0;
	unsigned char *p = NULL;
	for (unsigned it = 0; it < 3000; it++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t r = (size_t)(rng >> 33);
		size_t m = it % 3 == 0 ? r % 40000 + 1 : n + 1 + r % 400;
		unsigned char *q = realloc(p, m);
		assert_non_null(q);
		MP_ASSERT(malloc_usable_size(q) >= m, "realloc to %zu: %zu "
		    "usable", m, malloc_usable_size(q));
		check_fill(q, n < m ? n : m, it);
		fill(q, m, it + 1);
		p = q;
		n = m;
	}
	free(p);
}

/*
 * A block promoted for a sample the profiler then does not take
 * (prof.active switched off between the two) is a large block like any
 * other: its usable size is its extent's, and the thread counts that.
 * Another thread switches prof.active while this one allocates; whichever
 * way each allocation goes, the counters must agree with the usable size,
 * and a calloc'ed block must be zero in all of it.
 */
static atomic_bool switching_done;

static void *switcher(void *arg) {
	(void)arg;
	bool on = false;
	while (!atomic_load(&switching_done)) {
		mallctl("prof.active", NULL, NULL, &on, sizeof(on));
		on = !on;
	}
	on = true;
	mallctl("prof.active", NULL, NULL, &on, sizeof(on));
	return NULL;
}

static void test_counters_agree_while_switching(void **state) {
	(void)state;
	if (!sampling())
		MP_SKIP("profiling not built in / not on / not every allocation");
	atomic_store(&switching_done, false);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, switcher, NULL), 0);
	for (int i = 0; i < 20000; i++) {
		uint64_t a0 = *allocatedp, d0 = *deallocatedp;
		size_t size = 5000 + (size_t)(i % 8) * 1000;
		/* Every other one zeroed: all its usable bytes must be, the
		 * blocks before it having been filled. */
		unsigned char *p = LAUNDER(i % 2 == 0 ? malloc(size) :
		    calloc(1, size));
		assert_non_null(p);
		size_t usable = malloc_usable_size(p);
		if (*allocatedp - a0 != usable)
			fail_msg("allocation %d: %zu usable, %llu counted", i,
			    usable, (unsigned long long)(*allocatedp - a0));
		for (size_t k = 0; i % 2 != 0 && k < usable; k++) {
			if (p[k] != 0)
				fail_msg("calloc %d: byte %zu of %zu usable is "
				    "%u", i, k, usable, p[k]);
		}
		memset(p, 0xa5, usable);
		free(p);
		if (*deallocatedp - d0 != usable)
			fail_msg("free %d: %zu usable, %llu counted", i, usable,
			    (unsigned long long)(*deallocatedp - d0));
	}
	atomic_store(&switching_done, true);
	assert_int_equal(pthread_join(t, NULL), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_promoted_above_a_page),
		cmocka_unit_test(test_page_and_below_keep_prof_cache),
		cmocka_unit_test(test_aligned),
		cmocka_unit_test(test_realloc_out_of_class),
		cmocka_unit_test(test_realloc_sequence),
		cmocka_unit_test(test_counters_agree_while_switching),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
