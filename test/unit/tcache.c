/*
 * test/unit/tcache.c - slab bookkeeping of the thread caches
 * (src/alloc/tcache.c).
 *
 * Most tests drive a cache of their own, made with tcache_init on a fresh
 * arena from arena_create, so that the arena's statistics count exactly
 * the slabs of that cache.  The main thread is the cache's only owner;
 * helper threads free into it with tcache_free_remote, the way free()
 * does for a slab another thread owns.  Checked: regions are distinct,
 * inside their slab's grid and naturally aligned; a slab's `used` is the
 * number of regions held (remote frees count until collected); empty
 * non-current slabs go back to the arena (or to the kept-empty list of a
 * thread cache); remote frees are collected; the `full` protocol brings a
 * parked slab back through the owner's inbox; flushing returns every empty
 * slab.  The last test runs 100k small allocations through the public API.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static arena_t *new_arena(void) {
	unsigned ind;
	assert_false(arena_create(&ind));
	arena_t *a = arena_get(ind, false);
	assert_non_null(a);
	return a;
}

/* Caches are immortal (a remote freer may push on the inbox at any
 * time), so they come from the metadata allocator. */
static tcache_t *new_tcache(arena_t *a, bool shared) {
	tcache_t *tc = base_alloc(sizeof(tcache_t));
	assert_non_null(tc);
	tcache_init(tc, a, shared);
	assert_ptr_equal(tc->arena, a);
	assert_int_equal(tc->shared, shared);
	return tc;
}

static arena_stats_t stats(arena_t *a) {
	arena_stats_t s;
	arena_stats_read(a, &s);
	return s;
}

/* A slab's owning cache, without its tag bits. */
static tcache_t *owner_of(extent_t *s) {
	return slab_owner(s);
}

static extent_t *slab_of(const void *p) {
	extent_t *s = pagemap_lookup(p);
	assert_non_null(s);
	assert_int_equal(s->kind, EXTENT_SLAB);
	return s;
}

/* Natural alignment of a class: its largest power-of-two divisor, at
 * most a page (slabs are page aligned). */
static size_t natural_align(size_t usize) {
	size_t a = usize & -usize;
	return a > PAGE ? PAGE : a;
}

static void *alloc_checked(tcache_t *tc, unsigned ind) {
	void *p = tcache_alloc_small(tc, ind);
	assert_non_null(p);
	extent_t *s = slab_of(p);
	size_t usize = sz_index2size(ind);
	MP_ASSERT(owner_of(s) == tc, "owner %p, cache %p",
	    (void *)owner_of(s), (void *)tc);
	assert_int_equal(s->szind, ind);
	assert_int_equal(s->usize, usize);
	assert_ptr_equal(s->arena, tc->arena);
	MP_ASSERT((char *)p >= s->addr && (char *)p + usize <= s->addr +
	    (size_t)s->nregs * usize, "%p outside slab %p", p,
	    (void *)s->addr);
	MP_ASSERT(((char *)p - s->addr) % usize == 0, "%p off the grid of "
	    "slab %p (size %zu)", p, (void *)s->addr, usize);
	MP_ASSERT(mp_is_aligned(p, natural_align(usize)), "%p (size %zu)",
	    p, usize);
	MP_ASSERT(s->used <= s->nregs, "used %u of %u", s->used, s->nregs);
	return p;
}

/* The owner's free as dalloc_impl makes it. */
static void free_local(tcache_t *tc, void *p) {
	assert_false(tcache_free_small(tc, slab_of(p), p));
}

/* Whether the slab has a region in its owner's free map. */
static bool has_free(const extent_t *s) {
	for (unsigned w = 0; w < SLAB_WORDS; w++) {
		if (s->free_bits[w] != 0)
			return true;
	}
	return false;
}

static bool remote_pending(extent_t *s) {
	for (unsigned w = 0; w < SLAB_WORDS; w++) {
		if (atomic_load(&s->remote_bits[w]) != 0)
			return true;
	}
	return false;
}

static int cmp_ptr(const void *a, const void *b) {
	uintptr_t x = (uintptr_t)*(void *const *)a;
	uintptr_t y = (uintptr_t)*(void *const *)b;
	return x < y ? -1 : x > y;
}

static unsigned list_len(const extent_t *head) {
	unsigned n = 0;
	for (; head != NULL; head = head->next)
		n++;
	return n;
}

/* --------------------------------------------------------- remote frees */

typedef struct {
	void **ptrs;
	size_t n;
} remote_job_t;

static void *remote_thread(void *arg) {
	remote_job_t *j = arg;
	for (size_t i = 0; i < j->n; i++) {
		extent_t *s = pagemap_lookup(j->ptrs[i]);
		MP_CHECK(s != NULL && s->kind == EXTENT_SLAB, "%p",
		    j->ptrs[i]);
		if (s != NULL)
			tcache_free_remote(s, j->ptrs[i]);
	}
	return NULL;
}

/* Frees ptrs[0..n) from another thread and waits for it. */
static void remote_free(void **ptrs, size_t n) {
	remote_job_t j = {ptrs, n};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, remote_thread, &j), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* --------------------------------------------------------------- tests */

static void test_regions_every_class(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, true);
	size_t maxn = 0;
	for (unsigned i = 0; i < SC_NBINS; i++)
		if (sz_slab_nregs[i] > maxn)
			maxn = sz_slab_nregs[i];
	void **p = malloc((2 * maxn + 3) * sizeof(void *));
	assert_non_null(p);
	mp_rng_t rng = {99};
	size_t cur_pages = 0;
	for (unsigned ind = 0; ind < SC_NBINS; ind++) {
		size_t usize = sz_index2size(ind), nregs = sz_slab_nregs[ind];
		size_t n = 2 * nregs + 3;
		extent_t *slabs[3] = {NULL, NULL, NULL};
		uint32_t count[3] = {0, 0, 0};
		for (size_t i = 0; i < n; i++) {
			p[i] = alloc_checked(tc, ind);
			/* A fresh slab hands out its regions in address
			 * order, so its pages are touched as they are
			 * used. */
			extent_t *s0 = slab_of(p[i]);
			size_t k0 = i % nregs;
			MP_ASSERT(p[i] == s0->addr + k0 * usize, "class %u: "
			    "region %zu at %p, expected %p", ind, i, p[i],
			    (void *)(s0->addr + k0 * usize));
			pattern_fill(p[i], usize, ((uint64_t)ind << 32) | i);
			extent_t *s = slab_of(p[i]);
			unsigned k = 0;
			while (k < 3 && slabs[k] != NULL && slabs[k] != s)
				k++;
			MP_ASSERT(k < 3, "class %u: more than 3 slabs", ind);
			slabs[k] = s;
			count[k]++;
		}
		/* Slabs fill in order: two full, the third holds three. */
		assert_int_equal(count[0], nregs);
		assert_int_equal(count[1], nregs);
		assert_int_equal(count[2], 3);
		tcache_bin_t *bin = &tc->bins[ind];
		assert_int_equal(bin->nslabs, 3);
		for (unsigned k = 0; k < 3; k++)
			MP_ASSERT(slabs[k]->used == count[k], "class %u slab %u:"
			    " used %u, holds %u", ind, k, slabs[k]->used,
			    count[k]);
		assert_ptr_equal(bin->partial, slabs[2]);
		assert_int_equal(slabs[2]->list, SLAB_LIST_PARTIAL);
		assert_int_equal(list_len(bin->full), 2);
		for (unsigned k = 0; k < 2; k++) {
			assert_int_equal(slabs[k]->list, SLAB_LIST_FULL);
			assert_int_equal(atomic_load(&slabs[k]->full), 1);
			assert_false(has_free(slabs[k]));
		}
		/* Distinct and non-overlapping; contents intact. */
		for (size_t i = 0; i < n; i++)
			MP_ASSERT(pattern_check(p[i], usize, ((uint64_t)ind <<
			    32) | i) == SIZE_MAX, "class %u region %zu "
			    "overwritten", ind, i);
		qsort(p, n, sizeof(void *), cmp_ptr);
		for (size_t i = 1; i < n; i++)
			MP_ASSERT((char *)p[i - 1] + usize <= (char *)p[i],
			    "class %u: %p and %p overlap", ind, p[i - 1],
			    p[i]);
		arena_stats_t st = stats(a);
		assert_int_equal(st.slabs_cur, 3 + ind);
		assert_int_equal(st.pactive, cur_pages + 3 * sz_slab_size[ind] /
		    PAGE);
		/* Free in random order: the two non-current slabs go back to
		 * the arena, the current one stays (empty).  Which one is
		 * current at the end depends on the order: in classes kept
		 * lowest slab first (slab.c), a slab back from the full list
		 * below the current one takes its place. */
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = mp_rng_below(&rng, i + 1);
			void *t = p[i];
			p[i] = p[j];
			p[j] = t;
		}
		for (size_t i = 0; i < n; i++)
			free_local(tc, p[i]);
		assert_int_equal(bin->nslabs, 1);
		assert_true(bin->partial == slabs[2] || (usize <= 4096 &&
		    (bin->partial == slabs[0] || bin->partial == slabs[1])));
		assert_null(bin->partial->next);
		assert_null(bin->full);
		assert_int_equal(bin->partial->used, 0);
		cur_pages += sz_slab_size[ind] / PAGE;
		st = stats(a);
		assert_int_equal(st.slabs_cur, 1 + ind);
		assert_int_equal(st.pactive, cur_pages);
	}
	free(p);
	tcache_flush(tc);
	arena_stats_t st = stats(a);
	assert_int_equal(st.slabs_cur, 0);
	assert_int_equal(st.pactive, 0);
	for (unsigned ind = 0; ind < SC_NBINS; ind++) {
		assert_int_equal(tc->bins[ind].nslabs, 0);
		assert_null(tc->bins[ind].partial);
	}
}

static void test_used_and_release(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, true);
	/* A class above 4 KiB: a slab back from the full list goes behind
	 * the current one (below, it would become current: slab_lowest.c). */
	const unsigned ind = sz_size2index(8192);
	const size_t nregs = sz_slab_nregs[ind];
	void **p = malloc(nregs * sizeof(void *));
	assert_non_null(p);
	for (size_t i = 0; i < nregs; i++)
		p[i] = alloc_checked(tc, ind);
	extent_t *A = slab_of(p[0]);
	assert_int_equal(A->used, nregs);
	/* A is still current until the next allocation finds it empty. */
	assert_ptr_equal(tc->bins[ind].partial, A);
	void *b = alloc_checked(tc, ind);
	extent_t *B = slab_of(b);
	assert_ptr_not_equal(A, B);
	assert_int_equal(A->list, SLAB_LIST_FULL);
	assert_int_equal(atomic_load(&A->full), 1);
	assert_ptr_equal(tc->bins[ind].full, A);
	assert_ptr_equal(tc->bins[ind].partial, B);
	assert_int_equal(B->used, 1);

	/* The first local free brings A back behind the current slab. */
	free_local(tc, p[0]);
	assert_int_equal(A->used, nregs - 1);
	assert_int_equal(A->list, SLAB_LIST_PARTIAL);
	assert_int_equal(atomic_load(&A->full), 0);
	assert_null(tc->bins[ind].full);
	assert_ptr_equal(tc->bins[ind].partial, B);
	assert_ptr_equal(B->next, A);
	for (size_t i = 1; i < nregs; i++) {
		free_local(tc, p[i]);
		if (i + 1 < nregs)
			MP_ASSERT(A->used == nregs - 1 - i, "after %zu frees: "
			    "used %u", i + 1, A->used);
	}
	/* Empty and not current: returned to the arena. */
	char *a_addr = p[0];
	assert_int_equal(tc->bins[ind].nslabs, 1);
	assert_ptr_equal(tc->bins[ind].partial, B);
	assert_null(B->next);
	extent_t *fa = pagemap_lookup(a_addr);
	assert_non_null(fa);
	MP_ASSERT(fa->kind < EXTENT_NFREE_KINDS, "A's page: kind %u",
	    fa->kind);
	arena_stats_t st = stats(a);
	assert_int_equal(st.slabs_cur, 1);
	assert_int_equal(st.pactive, B->size / PAGE);

	/* The current slab stays even when empty, and is reused LIFO. */
	free_local(tc, b);
	assert_int_equal(B->used, 0);
	assert_ptr_equal(tc->bins[ind].partial, B);
	assert_int_equal(stats(a).slabs_cur, 1);
	void *b2 = alloc_checked(tc, ind);
	assert_ptr_equal(b2, b);
	assert_int_equal(B->used, 1);
	assert_int_equal(stats(a).slabs_total, 2);
	free_local(tc, b2);
	tcache_flush(tc);
	assert_int_equal(stats(a).pactive, 0);
	free(p);
}

static void test_remote_free_collected(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, true);
	const unsigned ind = 5;
	const size_t nregs = sz_slab_nregs[ind];
	void **p = malloc(nregs * sizeof(void *));
	assert_non_null(p);
	for (size_t i = 0; i < nregs; i++)
		p[i] = alloc_checked(tc, ind);
	extent_t *S = slab_of(p[0]);
	assert_int_equal(S->used, nregs);
	assert_false(has_free(S));
	assert_int_equal(atomic_load(&S->full), 0);

	void *r[3] = {p[7], p[nregs / 2], p[nregs - 1]};
	remote_free(r, 3);
	/* Remote frees count as used until collected; not parked, so no
	 * inbox traffic. */
	assert_int_equal(S->used, nregs);
	assert_true(remote_pending(S));
	assert_null(atomic_load(&tc->inbox));
	assert_int_equal(S->list, SLAB_LIST_PARTIAL);

	/* The next allocations collect them: the same regions come back. */
	void *q[3];
	for (unsigned i = 0; i < 3; i++) {
		q[i] = alloc_checked(tc, ind);
		assert_ptr_equal(slab_of(q[i]), S);
	}
	assert_false(remote_pending(S));
	assert_int_equal(S->used, nregs);
	qsort(q, 3, sizeof(void *), cmp_ptr);
	qsort(r, 3, sizeof(void *), cmp_ptr);
	for (unsigned i = 0; i < 3; i++)
		assert_ptr_equal(q[i], r[i]);
	assert_int_equal(tc->bins[ind].nslabs, 1);
	assert_int_equal(stats(a).slabs_total, 1);

	/* Remote frees mixed with local ones keep `used` right. */
	void *r2[2] = {p[0], p[1]};
	remote_free(r2, 2);
	free_local(tc, p[2]);
	assert_int_equal(S->used, nregs - 1);
	void *x = alloc_checked(tc, ind);
	assert_ptr_equal(x, p[2]);     /* local list first */
	assert_int_equal(S->used, nregs);
	void *y = alloc_checked(tc, ind);
	void *z = alloc_checked(tc, ind);
	assert_true((y == p[0] && z == p[1]) || (y == p[1] && z == p[0]));
	assert_int_equal(S->used, nregs);
	assert_int_equal(stats(a).slabs_total, 1);

	/* Remote frees collected while the local list is not empty (a
	 * flush does that): no region is lost. */
	free_local(tc, p[3]);
	free_local(tc, p[4]);
	void *r3[2] = {p[5], p[6]};
	remote_free(r3, 2);
	assert_int_equal(S->used, nregs - 2);
	tcache_flush(tc);
	assert_int_equal(S->used, nregs - 4);
	assert_false(remote_pending(S));
	void *back[4];
	for (unsigned i = 0; i < 4; i++) {
		back[i] = alloc_checked(tc, ind);
		assert_ptr_equal(slab_of(back[i]), S);
	}
	qsort(back, 4, sizeof(void *), cmp_ptr);
	void *want[4] = {p[3], p[4], p[5], p[6]};
	qsort(want, 4, sizeof(void *), cmp_ptr);
	for (unsigned i = 0; i < 4; i++)
		assert_ptr_equal(back[i], want[i]);
	assert_int_equal(S->used, nregs);
	assert_int_equal(stats(a).slabs_total, 1);

	/* Everything freed remotely: a flush collects and returns it. */
	remote_free(p, nregs);
	assert_int_equal(S->used, nregs);
	tcache_flush(tc);
	arena_stats_t st = stats(a);
	assert_int_equal(st.slabs_cur, 0);
	assert_int_equal(st.pactive, 0);
	free(p);
}

static void test_full_protocol_remote(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, true);
	const unsigned ind = 8;    /* 160 bytes */
	const size_t nregs = sz_slab_nregs[ind];
	void **p = malloc(nregs * sizeof(void *));
	assert_non_null(p);
	for (size_t i = 0; i < nregs; i++)
		p[i] = alloc_checked(tc, ind);
	extent_t *S = slab_of(p[0]);
	void *t0 = alloc_checked(tc, ind);
	extent_t *T = slab_of(t0);
	/* S parked on the full list. */
	assert_int_equal(S->list, SLAB_LIST_FULL);
	assert_int_equal(atomic_load(&S->full), 1);
	assert_ptr_equal(tc->bins[ind].full, S);

	/* A remote free wins the flag and posts S to the owner's inbox. */
	void *r = p[nregs / 3];
	remote_free(&r, 1);
	assert_int_equal(atomic_load(&S->full), 0);
	assert_ptr_equal(atomic_load(&tc->inbox), S);
	assert_null(S->inbox_next);
	assert_int_equal(S->list, SLAB_LIST_FULL);   /* until drained */
	assert_int_equal(S->used, nregs);
	/* A second remote free does not post it again. */
	void *r2 = p[nregs / 2];
	remote_free(&r2, 1);
	assert_ptr_equal(atomic_load(&tc->inbox), S);
	assert_null(S->inbox_next);

	/* S is found again at a slow allocation (the inbox is drained) and
	 * its two regions are reused: after the rest of T, or before it when
	 * S lies below T (the class is kept lowest slab first, slab.c). */
	bool got_r = false, got_r2 = false;
	size_t from_t = 0;
	for (size_t i = 0; i < nregs - 1 + 2; i++) {
		void *q = alloc_checked(tc, ind);
		if (q == r) {
			got_r = true;
		} else if (q == r2) {
			got_r2 = true;
		} else {
			assert_ptr_equal(slab_of(q), T);
			from_t++;
		}
	}
	assert_true(got_r && got_r2);
	assert_int_equal(from_t, nregs - 1);
	assert_null(atomic_load(&tc->inbox));
	assert_int_equal(S->used, nregs);
	assert_int_equal(T->used, nregs);
	assert_int_equal(tc->bins[ind].nslabs, 2);
	assert_int_equal(stats(a).slabs_total, 2);
	tcache_flush(tc);   /* both still full of live regions */
	assert_int_equal(stats(a).slabs_cur, 2);
	free(p);
}

static void test_full_protocol_local_and_mixed(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, true);
	/* 256 bytes: a slab of several bitmap words, so that allocating from
	 * U passes a word boundary (a slow step that drains the inbox). */
	const unsigned ind = 11;
	const size_t nregs = sz_slab_nregs[ind];
	void **p = malloc(2 * nregs * sizeof(void *));
	assert_non_null(p);
	for (size_t i = 0; i < nregs; i++)
		p[i] = alloc_checked(tc, ind);
	extent_t *S = slab_of(p[0]);
	void **t = p + nregs;       /* T's regions */
	t[0] = alloc_checked(tc, ind);
	extent_t *T = slab_of(t[0]);
	assert_int_equal(S->list, SLAB_LIST_FULL);
	/* Parked: the tag sends the owner's frees off the fast path. */
	assert_int_equal(S->list, SLAB_LIST_FULL);
	assert_ptr_equal(owner_of(S), tc);

	/* The owner's own free brings a parked slab back at once. */
	void *x = p[3];
	free_local(tc, x);
	assert_int_equal(S->list, SLAB_LIST_PARTIAL);
	assert_ptr_equal(atomic_load(&S->owner), tc);   /* tag cleared */
	assert_int_equal(atomic_load(&S->full), 0);
	assert_null(tc->bins[ind].full);
	/* Behind T, or current if it lies below T (lowest slab first). */
	extent_t *first = S->addr < T->addr ? S : T;
	extent_t *second = first == S ? T : S;
	assert_ptr_equal(tc->bins[ind].partial, first);
	assert_ptr_equal(first->next, second);
	assert_null(atomic_load(&tc->inbox));
	/* T's other regions and x, x first when S is current. */
	size_t k = 1;
	for (size_t i = 0; i < nregs; i++) {
		void *q = alloc_checked(tc, ind);
		if (q == x) {
			assert_int_equal(k, first == S ? 1 : nregs);
			continue;
		}
		assert_ptr_equal(slab_of(q), T);
		assert_true(k < nregs);
		t[k++] = q;
	}
	assert_int_equal(k, nregs);
	assert_int_equal(S->used, nregs);
	assert_int_equal(stats(a).slabs_total, 2);

	/* Park S again (T is parked already, a third slab U is current). */
	void *u0 = alloc_checked(tc, ind);
	extent_t *U = slab_of(u0);
	assert_ptr_not_equal(U, S);
	assert_ptr_not_equal(U, T);
	assert_int_equal(S->list, SLAB_LIST_FULL);
	assert_int_equal(T->list, SLAB_LIST_FULL);
	/* Remote free first (S goes to the inbox), then a local free: the
	 * owner loses the flag race and leaves S where it is. */
	void *r = p[10];
	remote_free(&r, 1);
	assert_ptr_equal(atomic_load(&tc->inbox), S);
	void *y = p[11];
	free_local(tc, y);
	assert_int_equal(S->used, nregs - 1);     /* r still counted */
	assert_int_equal(S->list, SLAB_LIST_FULL);
	/* The next slow allocation drains the inbox, which collects S's
	 * remote free on the way; using up U then reaches S's regions, in
	 * address order. */
	size_t left = nregs - 1, from_u = 0, from_s = 0;
	void *qs[2] = {NULL, NULL};
	for (size_t i = 0; i < left + 2; i++) {
		void *q = alloc_checked(tc, ind);
		if (slab_of(q) == U) {
			from_u++;
			continue;
		}
		/* S's two, in address order: before the rest of U when S is
		 * below U (lowest slab first), after it otherwise. */
		assert_ptr_equal(slab_of(q), S);
		assert_true(from_s < 2);
		qs[from_s++] = q;
	}
	assert_int_equal(from_u, left);
	assert_true(S->list == SLAB_LIST_PARTIAL || S->list == SLAB_LIST_FULL);
	assert_ptr_equal(qs[0], r);
	assert_ptr_equal(qs[1], y);
	assert_int_equal(S->used, nregs);
	assert_int_equal(stats(a).slabs_total, 3);

	/* All of T freed remotely while parked: it comes back through the
	 * inbox and, being empty and not current, a flush returns it. */
	assert_int_equal(T->list, SLAB_LIST_FULL);
	assert_int_equal(T->used, nregs);
	char *t_addr = T->addr;
	remote_free(t, nregs);
	assert_ptr_equal(atomic_load(&tc->inbox), T);
	assert_int_equal(T->used, nregs);
	assert_int_equal(stats(a).slabs_cur, 3);
	tcache_flush(tc);
	assert_null(atomic_load(&tc->inbox));
	arena_stats_t st = stats(a);
	assert_int_equal(st.slabs_cur, 2);     /* S and U hold live regions */
	assert_int_equal(st.pactive, (S->size + U->size) / PAGE);
	extent_t *ft = pagemap_lookup(t_addr);
	assert_non_null(ft);
	MP_ASSERT(ft->kind < EXTENT_NFREE_KINDS, "T's page: kind %u",
	    ft->kind);
	assert_int_equal(tc->bins[ind].nslabs, 2);
	free(p);
}

/* Frees everything (some remotely) and checks that a flush returns every
 * slab; with some regions left live, only their slabs stay. */
static void test_flush_returns_empty_slabs(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, true);
	static const unsigned classes[] = {0, 7, 13, 20, 27, 34};
	enum { NC = sizeof(classes) / sizeof(classes[0]) };
	size_t n[NC], total = 0;
	for (unsigned c = 0; c < NC; c++) {
		n[c] = 3 * sz_slab_nregs[classes[c]] + 1;
		total += n[c];
	}
	void **p = malloc(total * sizeof(void *));
	unsigned *cls = malloc(total * sizeof(unsigned));
	assert_non_null(p);
	assert_non_null(cls);
	size_t k = 0;
	for (unsigned c = 0; c < NC; c++)
		for (size_t i = 0; i < n[c]; i++) {
			cls[k] = classes[c];
			p[k++] = alloc_checked(tc, classes[c]);
		}
	arena_stats_t st = stats(a);
	assert_int_equal(st.slabs_cur, 4 * NC);
	assert_true(st.pactive > 0);

	/* Keep every 50th region live, free half of the rest locally and
	 * the other half from another thread. */
	void **remote = malloc(total * sizeof(void *));
	void **keep = malloc(total * sizeof(void *));
	assert_non_null(remote);
	assert_non_null(keep);
	size_t nremote = 0, nkeep = 0;
	for (size_t i = 0; i < total; i++) {
		if (i % 50 == 0)
			keep[nkeep++] = p[i];
		else if (i % 2)
			free_local(tc, p[i]);
		else
			remote[nremote++] = p[i];
	}
	remote_free(remote, nremote);
	tcache_flush(tc);
	/* Only slabs with live regions remain. */
	extent_t *live[64];
	size_t nlive = 0, pages = 0;
	for (size_t i = 0; i < nkeep; i++) {
		extent_t *s = slab_of(keep[i]);
		size_t j = 0;
		while (j < nlive && live[j] != s)
			j++;
		if (j == nlive) {
			assert_true(nlive < 64);
			live[nlive++] = s;
			pages += s->size / PAGE;
		}
	}
	st = stats(a);
	assert_int_equal(st.slabs_cur, nlive);
	assert_int_equal(st.pactive, pages);
	for (size_t j = 0; j < nlive; j++)
		assert_false(remote_pending(live[j]));
	uint32_t used_sum = 0;
	for (size_t j = 0; j < nlive; j++)
		used_sum += live[j]->used;
	assert_int_equal(used_sum, nkeep);

	/* The last ones freed remotely, again: a flush returns everything. */
	remote_free(keep, nkeep);
	tcache_flush(tc);
	st = stats(a);
	assert_int_equal(st.slabs_cur, 0);
	assert_int_equal(st.pactive, 0);
	assert_null(atomic_load(&tc->inbox));
	for (unsigned i = 0; i < SC_NBINS; i++) {
		assert_int_equal(tc->bins[i].nslabs, 0);
		assert_null(tc->bins[i].partial);
		assert_null(tc->bins[i].full);
	}
	free(p);
	free(cls);
	free(remote);
	free(keep);
}

/* A thread's (non-shared) cache keeps up to TCACHE_EMPTY_SLABS_MAX empty
 * slabs and reuses them for any class of the same slab size. */
static void test_kept_empty_slabs(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, false);
	const unsigned ind = 2;
	const size_t nregs = sz_slab_nregs[ind];
	const size_t nslabs = TCACHE_EMPTY_SLABS_MAX + 2;
	size_t n = nslabs * nregs;
	void **p = malloc(n * sizeof(void *));
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = alloc_checked(tc, ind);
	assert_int_equal(stats(a).slabs_total, nslabs);
	/* The last slab is current; the others fill the empty list, then
	 * overflow to the arena. */
	for (size_t i = 0; i < n; i++)
		free_local(tc, p[i]);
	assert_int_equal(tc->nempty, TCACHE_EMPTY_SLABS_MAX);
	assert_int_equal(list_len(tc->empty), TCACHE_EMPTY_SLABS_MAX);
	for (extent_t *s = tc->empty; s != NULL; s = s->next) {
		assert_int_equal(s->list, SLAB_LIST_EMPTY);
		assert_int_equal(s->used, 0);
		assert_ptr_equal(owner_of(s), tc);
	}
	assert_int_equal(tc->bins[ind].nslabs, 1);
	arena_stats_t st = stats(a);
	assert_int_equal(st.slabs_cur, 1 + TCACHE_EMPTY_SLABS_MAX);

	/* Another class with the same slab size reuses a kept slab. */
	unsigned other = SC_NBINS;
	for (unsigned i = 0; i < SC_NBINS; i++)
		if (i != ind && sz_slab_size[i] == sz_slab_size[ind]) {
			other = i;
			break;
		}
	if (other < SC_NBINS) {
		void *q = alloc_checked(tc, other);
		extent_t *s = slab_of(q);
		assert_int_equal(s->szind, other);
		assert_int_equal(s->usize, sz_index2size(other));
		assert_int_equal(s->nregs, sz_slab_nregs[other]);
		assert_int_equal(tc->nempty, TCACHE_EMPTY_SLABS_MAX - 1);
		assert_int_equal(stats(a).slabs_total, nslabs);
		/* Every page of the reused slab maps to it. */
		for (size_t off = 0; off < s->size; off += PAGE)
			assert_ptr_equal(pagemap_lookup(s->addr + off), s);
		free_local(tc, q);
	}
	/* Refilling the class takes the kept slabs before the arena's. */
	size_t kept = tc->nempty;
	for (size_t i = 0; i < (kept + 1) * nregs; i++)
		p[i] = alloc_checked(tc, ind);
	assert_int_equal(tc->nempty, 0);
	assert_int_equal(stats(a).slabs_total, nslabs);
	for (size_t i = 0; i < (kept + 1) * nregs; i++)
		free_local(tc, p[i]);
	/* A GC step gives back one kept slab at a time, keeping one (the
	 * step's bin is pointed at an unused class so that it releases no
	 * slab of its own). */
	size_t before = tc->nempty;
	assert_true(before >= 2);
	assert_true(ind != SC_NBINS - 1 && other != SC_NBINS - 1);
	tc->gc_bin = SC_NBINS - 1;
	tcache_gc_step(tc);
	assert_int_equal(tc->nempty, before - 1);
	/* A flush returns everything. */
	tcache_flush(tc);
	assert_int_equal(tc->nempty, 0);
	assert_null(tc->empty);
	st = stats(a);
	assert_int_equal(st.slabs_cur, 0);
	assert_int_equal(st.pactive, 0);
	free(p);
}

/* Freed large blocks kept by a cache: LIFO per class, bounded. */
static void test_large_cache(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, false);
	const size_t usize = SC_LARGE_MINCLASS;
	const unsigned ind = sz_size2index(usize);
	void *p[TCACHE_LARGE_SLOTS + 1];
	for (unsigned i = 0; i <= TCACHE_LARGE_SLOTS; i++) {
		p[i] = arena_large_alloc(a, usize, PAGE, false);
		assert_non_null(p[i]);
	}
	assert_null(tcache_alloc_large(tc, ind));
	for (unsigned i = 0; i < TCACHE_LARGE_SLOTS; i++)
		assert_false(tcache_dalloc_large(tc, pagemap_lookup(p[i])));
	/* Full: the next one is refused. */
	assert_true(tcache_dalloc_large(tc, pagemap_lookup(p[TCACHE_LARGE_SLOTS])));
	assert_int_equal(tc->large_bytes, TCACHE_LARGE_SLOTS * usize);
	/* Cached blocks stay active in the arena. */
	assert_int_equal(stats(a).pactive,
	    (TCACHE_LARGE_SLOTS + 1) * usize / PAGE);
	assert_ptr_equal(tcache_alloc_large(tc, ind), p[TCACHE_LARGE_SLOTS - 1]);
	assert_int_equal(tc->large_bytes, (TCACHE_LARGE_SLOTS - 1) * usize);
	/* Bigger than tcache_max: refused. */
	size_t big = sz_s2u(opt_tcache_max + 1);
	void *b = arena_large_alloc(a, big, PAGE, false);
	assert_non_null(b);
	assert_true(tcache_dalloc_large(tc, pagemap_lookup(b)));
	arena_large_dalloc(pagemap_lookup(b));
	arena_large_dalloc(pagemap_lookup(p[TCACHE_LARGE_SLOTS - 1]));
	arena_large_dalloc(pagemap_lookup(p[TCACHE_LARGE_SLOTS]));
	/* A flush returns the cached ones. */
	tcache_flush(tc);
	assert_int_equal(tc->large_bytes, 0);
	arena_stats_t st = stats(a);
	assert_int_equal(st.pactive, 0);
	assert_int_equal(st.large_allocated, 0);
}

/* The cache GC visits every large class, the last ones included (it
 * took the large class as the bin index modulo TCACHE_NLARGE, and with
 * fewer bins than large classes never reached the last two). */
static void test_gc_trims_every_large_class(void **state) {
	(void)state;
	arena_t *a = new_arena();
	tcache_t *tc = new_tcache(a, false);
	extent_t *e[TCACHE_NLARGE];
	for (unsigned li = 0; li < TCACHE_NLARGE; li++) {
		size_t usize = sz_index2size(SC_NBINS + li);
		void *p = arena_large_alloc(a, usize, PAGE, false);
		assert_non_null(p);
		e[li] = pagemap_lookup(p);
		/* Cached and unused since the last visit (low water 1), as
		 * tcache_dalloc_large would leave it with a big tcache_max. */
		tc->large[li].slots[0] = e[li];
		tc->large[li].n = 1;
		tc->large[li].low_water = 1;
		tc->large_bytes += usize;
	}
	for (unsigned step = 0; step < SC_NBINS * TCACHE_NLARGE; step++)
		tcache_gc_step(tc);
	for (unsigned li = 0; li < TCACHE_NLARGE; li++)
		MP_ASSERT(tc->large[li].n == 0, "large class %u (%zu bytes) "
		    "still caches %u", li, sz_index2size(SC_NBINS + li),
		    tc->large[li].n);
	assert_int_equal(tc->large_bytes, 0);
	assert_int_equal(stats(a).large_allocated, 0);
}

/* -------------------------------------------------- the public API */

#define NSMALL 100000
static struct {
	char *p;
	size_t size;
	uint64_t id;
} blocks[NSMALL];

static void test_public_random_order(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	assert_non_null(tsd->tcache);
	arena_t *arena = tsd->arena;
	tcache_flush(tsd->tcache);
	arena_stats_t s0 = stats(arena);
	mp_rng_t rng = {2024};
	for (size_t i = 0; i < NSMALL; i++) {
		uint64_t r = mp_rng_below(&rng, 100);
		size_t sz = r < 90 ? 1 + mp_rng_below(&rng, 256)
		    : r < 99 ? 257 + mp_rng_below(&rng, 1792)
		    : 2049 + mp_rng_below(&rng, SC_SMALL_MAXCLASS - 2048);
		char *p = LAUNDER((char *)malloc(sz));
		assert_non_null(p);
		extent_t *e = pagemap_lookup(p);
		MP_ASSERT(e != NULL && e->kind == EXTENT_SLAB &&
		    e->usize == sz_s2u(sz) && owner_of(e) == tsd->tcache, "malloc(%zu) = %p", sz, (void *)p);
		blocks[i].p = p;
		blocks[i].size = sz;
		blocks[i].id = i * 0x9e3779b97f4a7c15ull;
		memcpy(p, &blocks[i].id, sz < 8 ? sz : 8);
		if (sz >= 16)
			memcpy(p + sz - 8, &blocks[i].id, 8);
	}
	arena_stats_t s1 = stats(arena);
	assert_true(s1.pactive > s0.pactive);
	for (size_t i = NSMALL - 1; i > 0; i--) {
		size_t j = mp_rng_below(&rng, i + 1);
		__typeof__(blocks[0]) t = blocks[i];
		blocks[i] = blocks[j];
		blocks[j] = t;
	}
	size_t bad = 0;
	for (size_t i = 0; i < NSMALL; i++) {
		char *p = LAUNDER(blocks[i].p);
		size_t sz = blocks[i].size;
		if (memcmp(p, &blocks[i].id, sz < 8 ? sz : 8) != 0)
			bad++;
		if (sz >= 16 && memcmp(p + sz - 8, &blocks[i].id, 8) != 0)
			bad++;
		free(p);
	}
	assert_int_equal(bad, 0);
	tcache_flush(tsd->tcache);
	arena_stats_t s2 = stats(arena);
	printf("# pactive: start %zu, peak %zu, end %zu pages; slabs %zu "
	    "-> %zu\n", s0.pactive, s1.pactive, s2.pactive, s0.slabs_cur,
	    s2.slabs_cur);
	MP_ASSERT(s2.pactive <= s0.pactive + 8, "pactive %zu pages after, "
	    "%zu before", s2.pactive, s0.pactive);
	MP_ASSERT(s2.slabs_cur <= s0.slabs_cur + 1, "slabs %zu after, %zu "
	    "before", s2.slabs_cur, s0.slabs_cur);
}

static unsigned bin_count(const tsd_t *tsd, unsigned ind) {
	return tcache_bin_count(tsd->tcache, ind);
}

/* The thread's cache bin: free pushes the region, the next malloc of the
 * class pops the same one, and the slab does not see either (`used`
 * counts regions in bins).  A bin that overflows gives its older half
 * back to the slabs; a flush gives everything back and releases the
 * emptied slab. */
static void test_cache_bin(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	assert_non_null(tsd->tcache);
	assert_ptr_equal(tsd->tcache->cb_cur, &tsd->bin_cur[1]);
	const unsigned ind = sz_size2index(200);
	const unsigned cap = tcache_bin_cap(tsd->tcache, ind);
	assert_true(cap >= CACHE_BIN_MIN && cap <= CACHE_BIN_MAX);
	tcache_flush(tsd->tcache);
	assert_int_equal(bin_count(tsd, ind), 0);
	arena_stats_t s0 = stats(tsd->arena);

	void *p = LAUNDER(malloc(200));
	assert_non_null(p);
	extent_t *s = slab_of(p);
	/* The first malloc filled half the bin and took one. */
	assert_int_equal(bin_count(tsd, ind), cap / 2 - 1);
	uint32_t used = s->used;
	assert_true(used >= cap / 2);
	for (int i = 0; i < 1000; i++) {
		uint64_t events = tsd->event_count;
		unsigned n = bin_count(tsd, ind);
		free(p);
		assert_ptr_equal(*tsd->bin_cur[ind + 1], p);
		assert_int_equal(bin_count(tsd, ind), n + 1);
		void *q = LAUNDER(malloc(200));
		assert_ptr_equal(q, p);
		/* (A thread event's cache GC may give half the bin back.) */
		if (tsd->event_count == events)
			assert_int_equal(s->used, used);
		used = s->used;
	}

	/* Overflow: cap + 1 frees into a bin holding cap/2 - 1. */
	void **v = malloc((cap + 2) * sizeof(void *));
	assert_non_null(v);
	v[0] = p;
	for (unsigned i = 1; i < cap + 2; i++)
		v[i] = LAUNDER(malloc(200));
	for (unsigned i = 0; i < cap + 2; i++)
		free(LAUNDER(v[i]));
	assert_true(bin_count(tsd, ind) <= cap);
	assert_true(bin_count(tsd, ind) >= cap / 2);
	/* The newest stayed at the top. */
	assert_ptr_equal(*tsd->bin_cur[ind + 1], v[cap + 1]);
	free(v);

	tcache_flush(tsd->tcache);
	assert_int_equal(bin_count(tsd, ind), 0);
	assert_int_equal(stats(tsd->arena).slabs_cur, s0.slabs_cur);
}

static void *alloc_200(void *arg) {
	*(void **)arg = malloc(200);
	return NULL;
}

/* A region of another thread's slab freed here waits in this thread's bin
 * (the owner's slab sees nothing) and reaches the owner's remote bitmap
 * when the bin is flushed. */
static void test_cache_bin_foreign(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	const unsigned ind = sz_size2index(200);
	tcache_flush(tsd->tcache);
	void *p = NULL;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, alloc_200, &p), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_non_null(p);
	extent_t *s = slab_of(p);
	assert_ptr_not_equal(owner_of(s), tsd->tcache);
	assert_false(slab_remote_freed(s, p));
	free(p);
	assert_int_equal(bin_count(tsd, ind), 1);
	assert_false(slab_remote_freed(s, p));
	tcache_flush(tsd->tcache);
	assert_int_equal(bin_count(tsd, ind), 0);
	/* The exited thread's cache, an orphan now, collects only at some
	 * later thread event; none happened since. */
	assert_true(slab_remote_freed(s, p));
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regions_every_class),
		cmocka_unit_test(test_used_and_release),
		cmocka_unit_test(test_remote_free_collected),
		cmocka_unit_test(test_full_protocol_remote),
		cmocka_unit_test(test_full_protocol_local_and_mixed),
		cmocka_unit_test(test_flush_returns_empty_slabs),
		cmocka_unit_test(test_kept_empty_slabs),
		cmocka_unit_test(test_large_cache),
		cmocka_unit_test(test_gc_trims_every_large_class),
		cmocka_unit_test(test_public_random_order),
		cmocka_unit_test(test_cache_bin),
		cmocka_unit_test(test_cache_bin_foreign),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
