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
 * up again for 1,003 of 1,624 samples, now 690 of 1,631).  In a big heap
 * the byte cap is a share of the heap (PROF_CACHE_EMPTY_LG_SHARE), so
 * that many samples live at once, their number going up and down, take
 * the slabs their predecessors left rather than the arena's (brief
 * pslab: midsize sent 777 of 1,013 small samples' slabs to the arena and
 * back with 16 KiB).  That share is one for all arenas' prof_caches,
 * past a floor each.
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

/* What the prof_cache may keep now: the larger of the fixed floor and the
 * heap's share (slab.c, slab_prof_keep). */
static size_t keep_cap(void) {
	size_t share = (arena_pactive_total() << LG_PAGE) >>
	    PROF_CACHE_EMPTY_LG_SHARE;
	return share > PROF_CACHE_EMPTY_BYTES ? share : PROF_CACHE_EMPTY_BYTES;
}

/* Samples in many classes, some of multi-page slabs, all freed: what the
 * cache keeps stays within both caps, and no empty slab stays current. */
static void test_kept_slabs_capped(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	/* Classes up to a page: above it samples are promoted
	 * (prof_promote). */
	static const size_t sizes[] = {16, 48, 96, 160, 320, 640, 1280, 2560,
	    3072, 3584, 4096, 24, 200, 448};
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
	size_t cap = keep_cap();
	MP_ASSERT(slab_bytes > cap, "%zu bytes of slabs, cap %zu", slab_bytes,
	    cap);
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
	    bytes <= cap && empty_current == 0,
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

static uint64_t arena_slabs_made(arena_t *arena) {
	mp_mutex_lock(&arena->mtx);
	uint64_t n = arena->stats.slabs_total;
	mp_mutex_unlock(&arena->mtx);
	return n;
}

/* A big heap's samples: SWING samples of a class of one region a
 * one-page slab (4 KiB) live at once, then freed one by one, round after
 * round.  With a heap of SWING pages << PROF_CACHE_EMPTY_LG_SHARE the
 * cache keeps every slab the last round emptied, and later rounds take
 * no slab from the arena (with the fixed 16 KiB it kept 4 and set up
 * SWING - 4 from the arena every round); what it keeps stays within the
 * heap's share, and shrinks with the heap. */
#define SWING 12
#define SWING_ROUNDS 10
static void test_big_heap_keeps_swings(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	arena_t *a0 = arena_get(0, false);
	tcache_t *pc = &a0->prof_cache;
	unsigned ind = sz_size2index(4096);
	assert_int_equal(sz_prof_slab_size[ind], PAGE);
	assert_true(SWING * PAGE > PROF_CACHE_EMPTY_BYTES &&
	    SWING <= PROF_CACHE_EMPTY_SLABS_MAX);
	/* The heap, never touched (its pages are not resident). */
	size_t heap = ((size_t)SWING * PAGE) << PROF_CACHE_EMPTY_LG_SHARE;
	void *big = LAUNDER(malloc(heap));
	assert_non_null(big);
	MP_ASSERT(keep_cap() >= SWING * PAGE, "a heap of %zu pages keeps %zu "
	    "bytes", arena_pactive_total(), keep_cap());
	prof_reset(0);
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	tcache_arena_decay(a0, false);     /* no kept slab to start with */
	uint64_t made = 0;
	for (int r = 0; r < SWING_ROUNDS; r++) {
		void *p[SWING];
		if (r == 1)
			made = arena_slabs_made(a0);
		for (int i = 0; i < SWING; i++) {
			p[i] = LAUNDER(malloc(4096));
			assert_non_null(p[i]);
			extent_t *e = pagemap_lookup(p[i]);
			MP_ASSERT(slab_owner(e) == pc && e->nregs == 1,
			    "round %d: sample %p not alone in a prof_cache "
			    "slab", r, p[i]);
		}
		for (int i = 0; i < SWING; i++)
			free(p[i]);
	}
	uint64_t more = arena_slabs_made(a0) - made;
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	uint32_t nempty = pc->nempty, pages = pc->empty_pages;
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	MP_ASSERT(more == 0, "%d rounds of %d samples took %llu slabs from "
	    "the arena after the first", SWING_ROUNDS - 1, SWING,
	    (unsigned long long)more);
	MP_ASSERT(nempty == SWING && pages == SWING &&
	    (size_t)pages * PAGE <= keep_cap(), "the prof_cache keeps %u "
	    "slabs of %u pages, cap %zu bytes", (unsigned)nempty,
	    (unsigned)pages, keep_cap());
	/* The heap gone, the next sample's free gives the slabs kept longest
	 * back, down to the floor, and keeps its own. */
	free(big);
	void *q = LAUNDER(malloc(4096));
	assert_non_null(q);
	extent_t *eq = pagemap_lookup(q);
	assert_ptr_equal(slab_owner(eq), pc);
	free(q);
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	nempty = pc->nempty;
	pages = pc->empty_pages;
	bool kept = on_empty_list(pc, eq);
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	MP_ASSERT(kept && (size_t)pages * PAGE <= keep_cap() &&
	    nempty == pages, "the heap freed, the prof_cache keeps %u slabs "
	    "of %u pages (cap %zu bytes), the last one %s", (unsigned)nempty,
	    (unsigned)pages, keep_cap(), kept ? "among them" : "not");
	prof_reset(opt_lg_prof_sample);
	/* The arena's decay gives the slabs back. */
	tcache_arena_decay(a0, false);
	mp_mutex_lite_lock(&a0->prof_cache_mtx);
	nempty = pc->nempty;
	pages = pc->empty_pages;
	mp_mutex_lite_unlock(&a0->prof_cache_mtx);
	assert_int_equal(nempty, 0);
	assert_int_equal(pages, 0);
}

/* SWING one-region samples at a time, twice, in a thread bound to arena
 * (long)arg, whose prof_cache serves them. */
static void *swing_on_arena(void *arg) {
	tsd_t *tsd = tsd_fetch();
	assert_non_null(tsd);
	assert_false(tsd_arena_set(tsd, (unsigned)(uintptr_t)arg));
	free(LAUNDER(malloc(64)));  /* the next event redraws the wait */
	for (int r = 0; r < 2; r++) {
		void *p[SWING];
		for (int i = 0; i < SWING; i++) {
			p[i] = LAUNDER(malloc(4096));
			assert_non_null(p[i]);
		}
		for (int i = 0; i < SWING; i++)
			free(p[i]);
	}
	return NULL;
}

static size_t kept_bytes(arena_t *a) {
	mp_mutex_lite_lock(&a->prof_cache_mtx);
	size_t bytes = (size_t)a->prof_cache.empty_pages << LG_PAGE;
	mp_mutex_lite_unlock(&a->prof_cache_mtx);
	return bytes;
}

/* The share of a big heap is one for all arenas' prof_caches: threads on
 * three arenas, one after the other, each with SWING samples live at a
 * time (a share's worth), keep the share and two floors in all, not
 * three shares (each cache kept a share of its own before); the count of
 * kept bytes agrees with the caches' lists, and is 0 once they gave
 * their slabs back. */
static void test_arenas_share_the_share(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	enum { NARENAS = 3 };
	arena_t *a[NARENAS + 1];
	for (unsigned i = 0; i <= NARENAS; i++) {
		a[i] = arena_get(i, true);
		assert_non_null(a[i]);
		tcache_arena_decay(a[i], false);
	}
	assert_int_equal(slab_prof_kept_bytes(), 0);
	size_t heap = ((size_t)SWING * PAGE) << PROF_CACHE_EMPTY_LG_SHARE;
	void *big = LAUNDER(malloc(heap));
	assert_non_null(big);
	prof_reset(0);
	for (unsigned i = 1; i <= NARENAS; i++) {
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, swing_on_arena,
		    (void *)(uintptr_t)i), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
	}
	size_t total = 0, first = kept_bytes(a[1]);
	for (unsigned i = 0; i <= NARENAS; i++)
		total += kept_bytes(a[i]);
	size_t bound = keep_cap() + (NARENAS - 1) * PROF_CACHE_EMPTY_BYTES;
	MP_ASSERT(first >= SWING * PAGE && total <= bound &&
	    slab_prof_kept_bytes() == total, "kept: %zu bytes by the first "
	    "arena, %zu by all (counted %zu), bound %zu (a share of %zu)",
	    first, total, slab_prof_kept_bytes(), bound, keep_cap());
	prof_reset(opt_lg_prof_sample);
	free(big);
	for (unsigned i = 0; i <= NARENAS; i++)
		tcache_arena_decay(a[i], false);
	assert_int_equal(slab_prof_kept_bytes(), 0);
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
		cmocka_unit_test_teardown(test_big_heap_keeps_swings,
		    teardown),
		cmocka_unit_test_teardown(test_arenas_share_the_share,
		    teardown),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
