/*
 * test/unit/prof_slab_pick.c - which kept slab of arena 0's prof_cache a
 * sample of a class with none of its own sets up again (slab.c,
 * slab_get): the one of the smallest class, since samples are taken per
 * byte and a class of bigger objects gets its next sample sooner; the
 * other classes keep theirs.  (It was the slab kept last, so the class
 * sampled last lost its slab at every miss: churn set up a slab again for
 * 1,003 of 1,624 samples, now 690 of 1,631.)
 *
 * prof_slab_pick.conf: prof:true; the rate is set with prof_reset(0)
 * (every allocation is a sample).  No check depends on the machine's
 * speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

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
	mp_mutex_lock(&a0->shared_mtx);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++)
		MP_ASSERT(on_empty_list(pc, e[i]), "the %zu-byte class's slab "
		    "was not kept", sizes[i]);
	mp_mutex_unlock(&a0->shared_mtx);
	void *q = LAUNDER(malloc(other));
	assert_non_null(q);
	extent_t *eq = pagemap_lookup(q);
	MP_ASSERT(eq == e[0], "a %zu-byte sample took slab %p, not the "
	    "16-byte class's %p (the %zu-byte class's: %p)", other,
	    (void *)eq, (void *)e[0], sizes[MP_ARRAY_SIZE(sizes) - 1],
	    (void *)e[MP_ARRAY_SIZE(sizes) - 1]);
	assert_int_equal(eq->szind, sz_size2index(other));
	mp_mutex_lock(&a0->shared_mtx);
	for (size_t i = 1; i < MP_ARRAY_SIZE(sizes); i++)
		MP_ASSERT(on_empty_list(pc, e[i]) &&
		    e[i]->szind == sz_size2index(sizes[i]), "the %zu-byte "
		    "class lost its kept slab", sizes[i]);
	mp_mutex_unlock(&a0->shared_mtx);
	free(q);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_smallest_class_set_up_again,
		    teardown),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
