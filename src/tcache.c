/*
 * tcache.c: thread caches.  A cache owns slabs, one bin of them per small
 * size class, and a few freed large blocks per large class up to
 * tcache_max.  Allocation pops the current slab's free list; the owner's
 * frees push on it; other threads' frees push on the slab's atomic remote
 * list, which the owner collects when the current slab runs dry.  Slabs
 * that fill up are parked on a full list and come back when a free lands
 * in them (see the `full` protocol in types.h).  Caches of exited threads
 * become orphans that the next new thread adopts, and decay reclaims their
 * free memory meanwhile.
 *
 * The arena's shared cache uses the same code under arena->shared_mtx.
 */
#include "malloc_prof/internal/internal.h"

/* Never has a free region: stands in for "no current slab" in tsd. */
extent_t extent_empty_slab;

/* Bytes of large blocks one cache may hold. */
#define TCACHE_LARGE_BUDGET(max) ((max) * 4 > ((size_t)1 << 20) ? \
    (max) * 4 : ((size_t)1 << 20))

void tcache_init(tcache_t *tc, arena_t *arena, bool shared) {
	memset(tc, 0, sizeof(*tc));
	tc->arena = arena;
	tc->shared = shared;
}

/* ---- slab lists (owner-private, doubly linked through prev/next) ---- */

static void list_remove(extent_t **head, extent_t *e) {
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		*head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	e->prev = e->next = NULL;
}

static void list_push(extent_t **head, extent_t *e) {
	e->prev = NULL;
	e->next = *head;
	if (*head != NULL)
		(*head)->prev = e;
	*head = e;
}

/* The partial list also keeps its tail: a slab that comes back from the
 * full list goes to the end, so that it gathers more free regions before
 * it is current again (at the front it would be the emptiest slab, taken
 * up and parked again after a region or two). */
static void partial_remove(tcache_bin_t *bin, extent_t *e) {
	if (bin->partial_tail == e)
		bin->partial_tail = e->prev;
	list_remove(&bin->partial, e);
}

static void partial_push(tcache_bin_t *bin, extent_t *e) {
	list_push(&bin->partial, e);
	if (bin->partial_tail == NULL)
		bin->partial_tail = e;
}

static void partial_append(tcache_bin_t *bin, extent_t *e) {
	extent_t *tail = bin->partial_tail;
	if (tail == NULL) {
		partial_push(bin, e);
		return;
	}
	e->prev = tail;
	e->next = NULL;
	tail->next = e;
	bin->partial_tail = e;
}

/* Make tsd's mirror of bin ind name the bin's current slab, moving the
 * SLAB_CURRENT_BIAS from the old current slab to the new one. */
static void mirror_update(tcache_t *tc, unsigned ind) {
	if (tc->bin_slab == NULL)
		return;
	extent_t *old = tc->bin_slab[ind];
	extent_t *cur = tc->bins[ind].partial;
	if (cur == NULL)
		cur = &extent_empty_slab;
	if (cur == old)
		return;
	if (old != &extent_empty_slab)
		old->used -= SLAB_CURRENT_BIAS;
	if (cur != &extent_empty_slab)
		cur->used += SLAB_CURRENT_BIAS;
	tc->bin_slab[ind] = cur;
}

/* Drop bin ind's current slab from the mirror (and its bias), so that
 * a flush may release it when it is empty. */
static void mirror_clear(tcache_t *tc, unsigned ind) {
	if (tc->bin_slab == NULL)
		return;
	extent_t *old = tc->bin_slab[ind];
	if (old != &extent_empty_slab)
		old->used -= SLAB_CURRENT_BIAS;
	tc->bin_slab[ind] = &extent_empty_slab;
}

/* ---- slab state ---- */

/* Set or clear owner tag bits; only the owner may call it. */
static void slab_tag(extent_t *slab, uintptr_t tags, bool set) {
	uintptr_t o = (uintptr_t)atomic_load_explicit(&slab->owner,
	    memory_order_relaxed);
	o = set ? o | tags : o & ~tags;
	atomic_store_explicit(&slab->owner, (tcache_t *)o,
	    memory_order_relaxed);
}

/* Move a slab between lists' states; SLAB_TAG_FULL follows list ==
 * SLAB_LIST_FULL. */
static void slab_list_set(extent_t *slab, uint8_t list) {
	if ((slab->list == SLAB_LIST_FULL) != (list == SLAB_LIST_FULL))
		slab_tag(slab, SLAB_TAG_FULL, list == SLAB_LIST_FULL);
	slab->list = list;
}

/* Move the regions other threads freed onto the local list.  The count
 * comes with the list (REMOTE_COUNT_SHIFT), so only a slab that still has
 * local free regions walks the remote ones to link them in front. */
static bool slab_collect_remote(extent_t *slab) {
	/* A plain load first: the exchange is a locked instruction, and the
	 * cache GC asks every partial slab of a bin, most with nothing. */
	if (atomic_load_explicit(&slab->remote_free,
	    memory_order_relaxed) == 0)
		return false;
	uintptr_t word = atomic_exchange_explicit(&slab->remote_free, 0,
	    memory_order_acquire);
	if (word == 0)
		return false;
	void *list = (void *)(word & REMOTE_HEAD_MASK);
	uint32_t n = (uint32_t)(word >> REMOTE_COUNT_SHIFT);
	if (slab->free != NULL || config_debug) {
		uint32_t len = 1;
		void *tail = list;
		while (*(void **)tail != NULL) {
			tail = *(void **)tail;
			len++;
		}
		mp_assert(len == n);
		*(void **)tail = slab->free;
	}
	slab->free = list;
	mp_assert(slab->used >= n);
	slab->used -= n;
	return true;
}

/* Carve never-used regions into the free list, a page's worth at a time,
 * so a fresh slab costs page faults only as it is used. */
static bool slab_extend(extent_t *slab) {
	if (slab->bump >= slab->bump_end)
		return false;
	size_t usize = slab->usize;
	char *start = slab->bump;
	char *page_end = (char *)(((uintptr_t)start + PAGE) & ~PAGE_MASK);
	char *end = start + usize;
	while (end + usize <= page_end && end + usize <= slab->bump_end)
		end += usize;
	if (end > slab->bump_end)
		end = slab->bump_end;
	for (char *p = start; p + usize < end; p += usize)
		*(void **)p = p + usize;
	*(void **)(end - usize) = slab->free;
	slab->free = start;
	slab->bump = end;
	return true;
}

static void slab_release(tcache_t *tc, extent_t *slab) {
	tc->bins[slab->szind].nslabs--;
	slab_list_set(slab, SLAB_LIST_NONE);
	if (tc->nempty < TCACHE_EMPTY_SLABS_MAX && !tc->shared) {
		slab_list_set(slab, SLAB_LIST_EMPTY);
		list_push(&tc->empty, slab);
		tc->nempty++;
		return;
	}
	arena_slab_dalloc(slab->arena, slab);
}

/* A fresh slab for class ind: a kept empty one of the same geometry, or
 * one from the arena. */
static extent_t *slab_get(tcache_t *tc, unsigned ind) {
	size_t size = tc->small_slabs ? sz_prof_slab_size[ind]
	    : sz_slab_size[ind];
	for (extent_t *s = tc->empty; s != NULL; s = s->next) {
		if (s->size == size) {
			list_remove(&tc->empty, s);
			tc->nempty--;
			arena_slab_init(s, ind);
			atomic_store_explicit(&s->owner, tc,
			    memory_order_relaxed);
			return s;
		}
	}
	extent_t *slab = arena_slab_alloc(tc->arena, ind, size);
	if (slab != NULL)
		atomic_store_explicit(&slab->owner, tc, memory_order_release);
	return slab;
}

/* Slabs whose `full` flag a remote freer cleared come back here. */
static void inbox_drain(tcache_t *tc) {
	if (atomic_load_explicit(&tc->inbox, memory_order_relaxed) == NULL)
		return;
	extent_t *s = atomic_exchange_explicit(&tc->inbox, NULL,
	    memory_order_acquire);
	while (s != NULL) {
		extent_t *next = s->inbox_next;
		if (s->kind == EXTENT_SLAB && s->list == SLAB_LIST_FULL &&
		    slab_owner(s) == tc && atomic_load(&s->full) == 0) {
			tcache_bin_t *bin = &tc->bins[s->szind];
			list_remove(&bin->full, s);
			slab_list_set(s, SLAB_LIST_PARTIAL);
			partial_append(bin, s);
			mirror_update(tc, s->szind);
		}
		s = next;
	}
}

/* Park an exhausted slab on the full list.  Returns true if a remote free
 * raced in and the slab is usable again (then it stays on partial). */
static bool slab_park_full(tcache_bin_t *bin, extent_t *slab) {
	partial_remove(bin, slab);
	slab_list_set(slab, SLAB_LIST_FULL);
	list_push(&bin->full, slab);
	atomic_store(&slab->full, 1);
	if (atomic_load(&slab->remote_free) == 0)
		return false;
	uint8_t one = 1;
	if (!atomic_compare_exchange_strong(&slab->full, &one, 0))
		return false;    /* the remote freer will send it back */
	list_remove(&bin->full, slab);
	slab_list_set(slab, SLAB_LIST_PARTIAL);
	partial_push(bin, slab);
	return true;
}

void *tcache_alloc_small_slow(tcache_t *tc, unsigned ind) {
	tcache_bin_t *bin = &tc->bins[ind];
	inbox_drain(tc);
	extent_t *slab;
	while ((slab = bin->partial) != NULL) {
		if (slab->free != NULL || slab_extend(slab) ||
		    slab_collect_remote(slab))
			goto pop;
		if (slab_park_full(bin, slab)) {
			slab_collect_remote(slab);
			if (slab->free != NULL)
				goto pop;
		}
	}
	slab = slab_get(tc, ind);
	if (slab == NULL) {
		mirror_update(tc, ind);
		return NULL;
	}
	slab_list_set(slab, SLAB_LIST_PARTIAL);
	partial_push(bin, slab);
	bin->nslabs++;
	slab_extend(slab);
pop:
	mirror_update(tc, ind);
	void *p = slab->free;
	slab->free = *(void **)p;
	slab->used++;
	return p;
}

void tcache_free_small_slow(tcache_t *tc, extent_t *slab) {
	tcache_bin_t *bin = &tc->bins[slab->szind];
	/* Retire an empty slab unless it is the current one (only the
	 * shared caches, which have no mirror and so no bias, get here with
	 * the current slab). */
	if (slab->used == 0 && slab->list == SLAB_LIST_PARTIAL &&
	    bin->partial != slab) {
		partial_remove(bin, slab);
		slab_release(tc, slab);
	}
}

void tcache_free_small_full(tcache_t *tc, extent_t *slab, void *p) {
	*(void **)p = slab->free;
	slab->free = p;
	slab->used--;
	/* If a remote freer flipped `full` first, the slab is on its way
	 * through our inbox and keeps its tag until inbox_drain. */
	uint8_t one = 1;
	if (slab->list == SLAB_LIST_FULL &&
	    atomic_compare_exchange_strong(&slab->full, &one, 0)) {
		tcache_bin_t *bin = &tc->bins[slab->szind];
		list_remove(&bin->full, slab);
		slab_list_set(slab, SLAB_LIST_PARTIAL);
		partial_append(bin, slab);
		mirror_update(tc, slab->szind);
	}
	if (slab->used == 0)
		tcache_free_small_slow(tc, slab);
}

void tcache_free_remote(extent_t *slab, void *p) {
	uintptr_t top = atomic_load_explicit(&slab->remote_free,
	    memory_order_relaxed), next;
	do {
		*(void **)p = (void *)(top & REMOTE_HEAD_MASK);
		next = (uintptr_t)p | ((top & ~REMOTE_HEAD_MASK) + REMOTE_ONE);
	} while (!atomic_compare_exchange_weak(&slab->remote_free, &top,
	    next));
	if (atomic_load(&slab->full) == 0)
		return;
	uint8_t one = 1;
	if (!atomic_compare_exchange_strong(&slab->full, &one, 0))
		return;
	tcache_t *owner = slab_owner(slab);
	if (owner == NULL || owner == &extent_large_owner)
		return;
	extent_t *first = atomic_load_explicit(&owner->inbox,
	    memory_order_relaxed);
	do {
		slab->inbox_next = first;
	} while (!atomic_compare_exchange_weak_explicit(&owner->inbox, &first,
	    slab, memory_order_release, memory_order_relaxed));
}

/* ---- large blocks ---- */

void *tcache_alloc_large(tcache_t *tc, unsigned ind) {
	unsigned li = ind - SC_NBINS;
	if (li >= TCACHE_NLARGE)
		return NULL;
	tcache_large_t *c = &tc->large[li];
	if (c->n == 0)
		return NULL;
	extent_t *e = c->slots[--c->n];
	if (c->n < c->low_water)
		c->low_water = c->n;
	tc->large_bytes -= e->size;
	return e->addr;
}

bool tcache_dalloc_large(tcache_t *tc, extent_t *e) {
	unsigned li = e->szind - SC_NBINS;
	if (e->size > opt_tcache_max || li >= TCACHE_NLARGE || e->prof != NULL)
		return true;
	tcache_large_t *c = &tc->large[li];
	if (c->n == TCACHE_LARGE_SLOTS || tc->large_bytes + e->size >
	    TCACHE_LARGE_BUDGET(opt_tcache_max))
		return true;
	c->slots[c->n++] = e;
	tc->large_bytes += e->size;
	return false;
}

static void large_flush(tcache_t *tc, unsigned li, uint32_t keep) {
	tcache_large_t *c = &tc->large[li];
	while (c->n > keep) {
		extent_t *e = c->slots[--c->n];
		tc->large_bytes -= e->size;
		arena_large_dalloc(e);
	}
	c->low_water = c->n;
}

/* ---- flush, GC, orphans ---- */

/* Collect remote frees into every slab of a bin and release the empty
 * ones.  A full-list slab is touched only after we win its `full` flag;
 * otherwise a remote freer owns the transition and it is in the inbox. */
static void bin_flush(tcache_t *tc, unsigned ind) {
	tcache_bin_t *bin = &tc->bins[ind];
	mirror_clear(tc, ind);
	extent_t *s = bin->full;
	while (s != NULL) {
		extent_t *next = s->next;
		uint8_t one = 1;
		if (atomic_load(&s->remote_free) != 0 &&
		    atomic_compare_exchange_strong(&s->full, &one, 0)) {
			list_remove(&bin->full, s);
			slab_list_set(s, SLAB_LIST_PARTIAL);
			partial_push(bin, s);
		}
		s = next;
	}
	s = bin->partial;
	while (s != NULL) {
		extent_t *next = s->next;
		slab_collect_remote(s);
		if (s->used == 0) {
			partial_remove(bin, s);
			slab_release(tc, s);
		}
		s = next;
	}
	mirror_update(tc, ind);
}

static void empty_flush(tcache_t *tc, uint32_t keep) {
	while (tc->nempty > keep) {
		extent_t *s = tc->empty;
		list_remove(&tc->empty, s);
		tc->nempty--;
		slab_list_set(s, SLAB_LIST_NONE);
		arena_slab_dalloc(s->arena, s);
	}
}

void tcache_flush(tcache_t *tc) {
	inbox_drain(tc);
	for (unsigned i = 0; i < SC_NBINS; i++)
		bin_flush(tc, i);
	for (unsigned i = 0; i < TCACHE_NLARGE; i++)
		large_flush(tc, i, 0);
	empty_flush(tc, 0);
}

/* One step per thread event: a bin's remote frees and empty slabs, the
 * large blocks of one class that went unused since the last visit, and
 * one kept empty slab. */
void tcache_gc_step(tcache_t *tc) {
	inbox_drain(tc);
	unsigned i = tc->gc_bin++ % SC_NBINS;
	bin_flush(tc, i);
	unsigned li = i % TCACHE_NLARGE;
	tcache_large_t *c = &tc->large[li];
	if (c->low_water > 0)
		large_flush(tc, li, c->n - c->low_water + c->low_water / 4);
	c->low_water = c->n;
	if (tc->nempty > 1)
		empty_flush(tc, tc->nempty - 1);
}

tcache_t *tcache_adopt(arena_t *arena, extent_t **bin_slab) {
	mp_mutex_lock(&arena->orphans_mtx);
	tcache_t *tc = arena->orphans;
	if (tc != NULL) {
		arena->orphans = tc->orphan_next;
		arena->norphans--;
	}
	mp_mutex_unlock(&arena->orphans_mtx);
	if (tc == NULL) {
		tc = base_alloc(sizeof(tcache_t));
		if (tc == NULL)
			return NULL;
		tcache_init(tc, arena, false);
	}
	tc->orphan_next = NULL;
	tc->bin_slab = bin_slab;
	for (unsigned i = 0; i < SC_NBINS; i++)
		mirror_update(tc, i);
	return tc;
}

void tcache_orphan(tcache_t *tc) {
	for (unsigned i = 0; i < SC_NBINS; i++)
		mirror_clear(tc, i);
	tc->bin_slab = NULL;
	tcache_flush(tc);
	arena_t *arena = tc->arena;
	mp_mutex_lock(&arena->orphans_mtx);
	tc->orphan_next = arena->orphans;
	arena->orphans = tc;
	arena->norphans++;
	mp_mutex_unlock(&arena->orphans_mtx);
}

void tcache_orphans_collect(arena_t *arena, unsigned max) {
	if (__atomic_load_n(&arena->orphans, __ATOMIC_RELAXED) == NULL)
		return;
	mp_mutex_lock(&arena->orphans_mtx);
	if (max >= arena->norphans) {
		for (tcache_t *tc = arena->orphans; tc != NULL;
		    tc = tc->orphan_next)
			tcache_flush(tc);
	} else {
		/* Flush from the head and rotate what was flushed to the
		 * tail, so successive calls visit every orphan. */
		for (unsigned n = 0; n < max; n++) {
			tcache_t *tc = arena->orphans;
			tcache_flush(tc);
			arena->orphans = tc->orphan_next;
			tc->orphan_next = NULL;
			tcache_t **tail = &arena->orphans;
			while (*tail != NULL)
				tail = &(*tail)->orphan_next;
			*tail = tc;
		}
	}
	mp_mutex_unlock(&arena->orphans_mtx);
}
