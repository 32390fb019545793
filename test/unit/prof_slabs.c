/*
 * test/unit/prof_slabs.c - the slabs of arena 0's prof_cache, where
 * sampled small objects live (slab.c, slab_release): emptied slabs are
 * kept for the next samples up to PROF_CACHE_EMPTY_SLABS_MAX slabs and
 * PROF_CACHE_EMPTY_BYTES, so that two samples live at once no longer
 * send a slab to the arena and back at every sample (brief pcost3), a
 * sample takes the kept slab of its own class first (no set-up), what
 * is kept stays within the caps, and a class with no kept slab of its
 * own sets up the smallest class's again (samples are per byte: a class
 * of bigger objects is sampled again sooner; it was the slab kept last,
 * so the class sampled last lost its slab at every miss: churn set one
 * up again for 1,003 of 1,624 samples, now 690 of 1,631).
 *
 * Their lock is the cache's own lite lock, not arena 0's shared_mtx.
 *
 * prof_slabs.conf: prof:true; the rate is set with prof_reset(0) (every
 * allocation is a sample).  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define ROUNDS 100

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static int teardown(void **state) {
	(void)state;
	prof_reset(opt_lg_prof_sample);
	tcache_arena_decay(arena_get(0, false), false);
	return 0;
}

static bool on_empty_list(tcache_t *tc, const extent_t *slab) {
	for (const extent_t *s = tc->empty; s != NULL; s = s->next) {
		if (s == slab)
			return true;
	}
	return false;
}

/* Two samples of two classes live at once, then freed, over and over:
 * both emptied slabs are kept (one was, and the other went to the arena
 * at every round), and each class takes its own slab again. */
static void test_two_live_samples_keep_slabs(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	arena_t *a0 = arena_get(0, false);
	tcache_t *pc = &a0->prof_cache;
	prof_reset(0);
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	tcache_arena_decay(a0, false);     /* no kept slab to start with */
	extent_t *first[2] = {NULL, NULL};
	for (int r = 0; r < ROUNDS; r++) {
		void *a = LAUNDER(malloc(40));
		void *b = LAUNDER(malloc(300));
		assert_non_null(a);
		assert_non_null(b);
		extent_t *ea = pagemap_lookup(a), *eb = pagemap_lookup(b);
		MP_ASSERT(slab_owner(ea) == pc && slab_owner(eb) == pc &&
		    ea != eb, "round %d: samples %p, %p not in two prof_cache "
		    "slabs", r, a, b);
		if (r == 0) {
			first[0] = ea;
			first[1] = eb;
		} else {
			/* Each class takes its own kept slab back, with no
			 * set-up (the other one was pushed last). */
			MP_ASSERT(ea == first[0] && eb == first[1], "round %d: "
			    "slabs %p, %p, kept %p, %p", r, (void *)ea,
			    (void *)eb, (void *)first[0], (void *)first[1]);
		}
		free(a);
		free(b);
		mp_mutex_lite_lock(&a0->prof_cache_mtx);
		bool kept = on_empty_list(pc, ea) && on_empty_list(pc, eb);
		uint32_t nempty = pc->nempty;
		mp_mutex_lite_unlock(&a0->prof_cache_mtx);
		MP_ASSERT(kept, "round %d: an emptied slab left the prof_cache "
		    "(%u kept)", r, (unsigned)nempty);
	}
}

/* Samples in many classes, some of multi-page slabs, all freed: what the
 * cache keeps stays within both caps, and no empty slab stays current. */
static void test_kept_slabs_capped(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	static const size_t sizes[] = {16, 48, 96, 160, 320, 640, 1280, 2560,
	    5120, 10240, 14336, 24, 200, 448};
	arena_t *a0 = arena_get(0, false);
	tcache_t *pc = &a0->prof_cache;
	prof_reset(0);
	free(LAUNDER(malloc(64)));
	tcache_arena_decay(a0, false);
	void *p[MP_ARRAY_SIZE(sizes)];
	size_t slab_bytes = 0;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		p[i] = LAUNDER(malloc(sizes[i]));
		assert_non_null(p[i]);
		extent_t *e = pagemap_lookup(p[i]);
		assert_ptr_equal(slab_owner(e), pc);
		slab_bytes += e->size;
	}
	/* More than the cap was in use, so the cap is what limits. */
	assert_true(slab_bytes > PROF_CACHE_EMPTY_BYTES);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		free(p[i]);
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	size_t bytes = 0;
	unsigned n = 0, empty_current = 0;
	for (const extent_t *s = pc->empty; s != NULL; s = s->next) {
		bytes += s->size;
		n++;
	}
	for (unsigned ind = 0; ind < SC_NBINS; ind++) {
		for (extent_t *s = pc->bins[ind].partial; s != NULL;
		    s = s->next)
			empty_current += s->used == 0;
	}
	uint32_t nempty = pc->nempty;
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	MP_ASSERT(n == nempty && n >= 2 && n <= PROF_CACHE_EMPTY_SLABS_MAX &&
	    bytes <= PROF_CACHE_EMPTY_BYTES && empty_current == 0,
	    "the prof_cache keeps %u slabs (count %u) of %zu bytes, %u empty "
	    "current ones", n, (unsigned)nempty, bytes, empty_current);
	/* The arena's decay gives them all back. */
	tcache_arena_decay(a0, false);
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	nempty = pc->nempty;
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	assert_int_equal(nempty, 0);
}

/* Four one-page classes kept, freed smallest first (so the smallest's
 * slab is the list's last, the biggest's its first), then a fifth class
 * of the same slab size: it gets the 16-byte class's slab. */
static void test_smallest_class_set_up_again(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	static const size_t sizes[] = {16, 48, 96, 160};
	const size_t other = 320;
	arena_t *a0 = arena_get(0, false);
	tcache_t *pc = &a0->prof_cache;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		assert_int_equal(sz_prof_slab_size[sz_size2index(sizes[i])],
		    PAGE);
	assert_int_equal(sz_prof_slab_size[sz_size2index(other)], PAGE);
	assert_true(MP_ARRAY_SIZE(sizes) * PAGE <= PROF_CACHE_EMPTY_BYTES &&
	    MP_ARRAY_SIZE(sizes) <= PROF_CACHE_EMPTY_SLABS_MAX);
	prof_reset(0);
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	tcache_arena_decay(a0, false);     /* no kept slab to start with */
	void *p[MP_ARRAY_SIZE(sizes)];
	extent_t *e[MP_ARRAY_SIZE(sizes)];
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		p[i] = LAUNDER(malloc(sizes[i]));
		assert_non_null(p[i]);
		e[i] = pagemap_lookup(p[i]);
		assert_ptr_equal(slab_owner(e[i]), pc);
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		free(p[i]);
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		MP_ASSERT(on_empty_list(pc, e[i]), "the %zu-byte class's slab "
		    "was not kept", sizes[i]);
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	void *q = LAUNDER(malloc(other));
	assert_non_null(q);
	extent_t *eq = pagemap_lookup(q);
	MP_ASSERT(eq == e[0], "a %zu-byte sample took slab %p, not the "
	    "16-byte class's %p (the %zu-byte class's: %p)", other,
	    (void *)eq, (void *)e[0], sizes[MP_ARRAY_SIZE(sizes) - 1],
	    (void *)e[MP_ARRAY_SIZE(sizes) - 1]);
	assert_int_equal(eq->szind, sz_size2index(other));
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	for (size_t i = 1; i < MP_ARRAY_SIZE(sizes); i++)
		MP_ASSERT(on_empty_list(pc, e[i]) &&
		    e[i]->szind == sz_size2index(sizes[i]), "the %zu-byte "
		    "class lost its kept slab", sizes[i]);
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	free(q);
}

/* A sampled small region's allocation and free take the cache's own
 * lite lock, never arena 0's shared_mtx (the shared cache's glibc mutex,
 * 76 instructions a round trip, that they took before): its count of
 * acquisitions moves by two a round no more (only the arena's decay
 * flushes, a few in all), the cache lock's by two a round at least. */
static void test_samples_leave_shared_mtx_alone(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	arena_t *a0 = arena_get(0, false);
	prof_reset(0);
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	mp_mutex_prof_t shared0, cache0, shared1, cache1;
	mp_mutex_prof_read(&a0->shared_mtx, &shared0);
	mp_mutex_prof_read(&a0->prof_cache_mtx, &cache0);
	for (int r = 0; r < ROUNDS; r++) {
		void *p = LAUNDER(malloc(48));
		assert_non_null(p);
		MP_ASSERT(slab_owner(pagemap_lookup(p)) == &a0->prof_cache,
		    "round %d: %p is not a sampled region", r, p);
		free(p);
	}
	mp_mutex_prof_read(&a0->shared_mtx, &shared1);
	mp_mutex_prof_read(&a0->prof_cache_mtx, &cache1);
	MP_ASSERT(shared1.n_lock_ops - shared0.n_lock_ops < ROUNDS / 4,
	    "%d samples took arena 0's shared_mtx %llu times", ROUNDS,
	    (unsigned long long)(shared1.n_lock_ops - shared0.n_lock_ops));
	MP_ASSERT(cache1.n_lock_ops - cache0.n_lock_ops >= 2 * ROUNDS,
	    "%d samples took the prof_cache lock %llu times", ROUNDS,
	    (unsigned long long)(cache1.n_lock_ops - cache0.n_lock_ops));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_two_live_samples_keep_slabs,
		    teardown),
		cmocka_unit_test_teardown(test_kept_slabs_capped, teardown),
		cmocka_unit_test_teardown(test_smallest_class_set_up_again,
		    teardown),
		cmocka_unit_test_teardown(test_samples_leave_shared_mtx_alone,
		    teardown),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
