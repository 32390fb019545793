/*
 * test/unit/slab_lowest.c - a cache's slabs of a class up to 4 KiB hand
 * out regions lowest slab first (src/alloc/slab.c, partial_lowest_first
 * and partial_append), so that the high slabs drain and go back to the
 * arena: the peak RSS of alloctest and larson (issue 15).
 *
 * In a fresh thread (no slabs of its own yet), six slabs of 1 KiB regions
 * are filled straight from the slabs (tcache_alloc_batch, no cache bin in
 * between), then one region of each is freed, highest slab first: the
 * order in which the slabs come back from the full list is the reverse of
 * their addresses.  Six single allocations must then take those regions
 * back in rising address order.  Before, the current slab came first and
 * the others in the order their frees brought them back (falling).  For a
 * class above 4 KiB the order is left as it was (the slab of the last
 * free comes last).
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define NSLABS 6
#define MAXREGS 64

struct run {
	size_t size;
	bool lowest_first;      /* the outcome expected */
	bool ok;
	char why[200];
};

static int by_addr_desc(const void *a, const void *b) {
	const extent_t *x = *(extent_t *const *)a, *y = *(extent_t *const *)b;
	return x->addr < y->addr ? 1 : x->addr > y->addr ? -1 : 0;
}

/* Fills NSLABS slabs of the class of r->size, frees one region of each
 * from the highest slab down, allocates NSLABS regions one by one and
 * compares the order they come back in with r->lowest_first. */
static void *run_slabs(void *arg) {
	struct run *r = arg;
	free(LAUNDER(malloc(16)));      /* attach: a cache of our own */
	tcache_t *tc = tsd_fetch()->tcache;
	const unsigned ind = sz_size2index(r->size);
	void *out[NSLABS * MAXREGS];
	extent_t *slab[NSLABS];
	void *freed[NSLABS];
	unsigned nslabs = 0, n = 0;
	/* Whole slabs: the class has no slab in this thread yet, so
	 * NSLABS * nregs regions fill NSLABS slabs exactly. */
	unsigned nregs = 0;
	do {
		void *p;
		if (tcache_alloc_batch(tc, ind, &p, 1) != 1) {
			snprintf(r->why, sizeof(r->why), "out of memory");
			return NULL;
		}
		extent_t *e = pagemap_lookup(p);
		if (nslabs == 0 || slab[nslabs - 1] != e) {
			if (nslabs == NSLABS || e->nregs > MAXREGS) {
				snprintf(r->why, sizeof(r->why), "slab %u of "
				    "%u regions", nslabs, e->nregs);
				return NULL;
			}
			nregs = e->nregs;
			slab[nslabs] = e;
			freed[nslabs++] = p;   /* each slab's first region */
		}
		out[n++] = p;
	} while (n < NSLABS * nregs);
	/* Free each slab's first region, the highest slab first. */
	extent_t *order[NSLABS];
	memcpy(order, slab, sizeof(order));
	qsort(order, NSLABS, sizeof(order[0]), by_addr_desc);
	for (unsigned i = 0; i < NSLABS; i++) {
		for (unsigned j = 0; j < NSLABS; j++) {
			if (slab[j] == order[i])
				tcache_free_small(tc, slab[j], freed[j]);
		}
	}
	/* Lowest first: the regions of order[NSLABS - 1], ..., order[0]. */
	r->ok = true;
	bool rising = true;
	void *back[NSLABS];
	for (unsigned i = 0; i < NSLABS; i++) {
		if (tcache_alloc_batch(tc, ind, &back[i], 1) != 1) {
			snprintf(r->why, sizeof(r->why), "out of memory");
			r->ok = false;
			return NULL;
		}
		extent_t *e = pagemap_lookup(back[i]);
		if (e != order[NSLABS - 1 - i])
			rising = false;
	}
	if (rising != r->lowest_first) {
		r->ok = false;
		snprintf(r->why, sizeof(r->why), "class %zu: regions %s back "
		    "lowest slab first (%p %p %p ...)", r->size,
		    rising ? "came" : "did not come", back[0], back[1],
		    back[2]);
	}
	for (unsigned i = 0; i < NSLABS; i++)
		tcache_free_small(tc, pagemap_lookup(back[i]), back[i]);
	for (unsigned i = 0; i < n; i++) {
		bool first = false;
		for (unsigned j = 0; j < NSLABS; j++)
			first |= out[i] == freed[j];
		if (!first)
			tcache_free_small(tc, pagemap_lookup(out[i]), out[i]);
	}
	return NULL;
}

static void check(size_t size, bool lowest_first) {
	struct run r = { .size = size, .lowest_first = lowest_first };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, run_slabs, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	MP_ASSERT(r.ok, "%s", r.why);
}

static void test_small_class_lowest_first(void **state) {
	(void)state;
	check(1024, true);
}

static void test_mid_class_lowest_first(void **state) {
	(void)state;
	check(4096, true);
}

static void test_above_4k_unchanged(void **state) {
	(void)state;
	check(8192, false);
}

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_class_lowest_first),
		cmocka_unit_test(test_mid_class_lowest_first),
		cmocka_unit_test(test_above_4k_unchanged),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
