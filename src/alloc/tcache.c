/*
 * tcache.c: thread caches.  A cache owns slabs, one bin of them per small
 * size class, and a few freed large blocks per large class up to
 * tcache_max.  In front of the slabs, a thread's cache has a cache bin
 * per small class (tsd->bin_cur, types.h): a stack of pointers that malloc
 * pops and free pushes.  A dry bin is filled with half its slots from the
 * current slab's bitmap; an overflowing one gives its older half back,
 * each region to its own slab: the owner's regions set their bits in the
 * slab's free_bits, other owners' in its remote bitmap (one atomic or per
 * word), which the owner collects when the current slab runs dry.  Slabs that fill up are
 * parked on a full list and come back when a free lands in them (see the
 * `full` protocol in types.h).  Caches of exited threads become orphans
 * that the next new thread adopts, and decay reclaims their free memory
 * meanwhile.
 *
 * The arena's shared cache uses the same slab code under arena->shared_mtx
 * (it has no cache bins).
 */
#include "malloc_prof/internal/internal.h"

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

/* ---- slab state ---- */

static unsigned slab_nwords(const extent_t *slab) {
	return (slab->nregs + 63) / 64;
}

/* Region `bit` of bitmap word w. */
static char *slab_region(const extent_t *slab, unsigned w, unsigned bit) {
	return slab->addr + (size_t)(w * 64 + bit) * slab->usize;
}

/* Collect the regions other threads freed into free_bits.  One word at a
 * time: no region is read or written. */
static bool slab_collect_remote(extent_t *slab) {
	unsigned nwords = slab_nwords(slab);
	uint32_t n = 0;
	for (unsigned w = 0; w < nwords; w++) {
		/* A plain load first: the exchange is a locked instruction,
		 * and most words have nothing. */
		if (atomic_load_explicit(&slab->remote_bits[w],
		    memory_order_relaxed) == 0)
			continue;
		uint64_t bits = atomic_exchange_explicit(&slab->remote_bits[w],
		    0, memory_order_acquire);
		uint64_t twice = bits & slab->free_bits[w];
		if (unlikely(twice != 0)) {
			/* Freed by another thread and by the owner: report
			 * it, count it once. */
			malloc_misuse("free", "double free of", slab_region(slab,
			    w, (unsigned)__builtin_ctzll(twice)));
			bits &= ~twice;
		}
		slab->free_bits[w] |= bits;
		if (bits != 0 && w < slab->free_word)
			slab->free_word = (uint8_t)w;
		n += (uint32_t)__builtin_popcountll(bits);
	}
	mp_assert(slab->used >= n);
	slab->used -= n;
	return n != 0;
}

static bool slab_remote_pending(extent_t *slab) {
	unsigned nwords = slab_nwords(slab);
	for (unsigned w = 0; w < nwords; w++) {
		if (atomic_load(&slab->remote_bits[w]) != 0)
			return true;
	}
	return false;
}

/* Take up to n free regions of the slab, lowest addresses first (a fresh
 * slab's pages are touched in order, as they are used). */
static unsigned slab_take(extent_t *slab, void **out, unsigned n) {
	unsigned nwords = slab_nwords(slab), got = 0;
	unsigned w = slab->free_word;
	for (; w < nwords; w++) {
		uint64_t bits = slab->free_bits[w];
		while (bits != 0 && got < n) {
			unsigned b = (unsigned)__builtin_ctzll(bits);
			bits &= bits - 1;
			out[got++] = slab_region(slab, w, b);
		}
		slab->free_bits[w] = bits;
		if (got == n && bits != 0)
			break;
	}
	slab->free_word = (uint8_t)w;
	slab->used += got;
	return got;
}

static bool slab_has_free(const extent_t *slab) {
	unsigned nwords = slab_nwords(slab);
	for (unsigned w = slab->free_word; w < nwords; w++) {
		if (slab->free_bits[w] != 0)
			return true;
	}
	return false;
}

static void slab_release(tcache_t *tc, extent_t *slab) {
	tc->bins[slab->szind].nslabs--;
	slab->list = SLAB_LIST_NONE;
	if (tc->nempty < TCACHE_EMPTY_SLABS_MAX && !tc->shared) {
		slab->list = SLAB_LIST_EMPTY;
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
	extent_t *slab = NULL;
	for (extent_t *s = tc->empty; s != NULL; s = s->next) {
		if (s->size == size) {
			list_remove(&tc->empty, s);
			tc->nempty--;
			arena_slab_init(s, ind);
			slab = s;
			break;
		}
	}
	if (slab == NULL) {
		slab = arena_slab_alloc(tc->arena, ind, size);
		if (slab == NULL)
			return NULL;
	}
	/* Sampled regions must be freed through the profiler: no class
	 * tag, so that free never puts them in a cache bin. */
	if (tc->small_slabs)
		pagemap_set_range(slab->addr, slab->size, slab);
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
			s->list = SLAB_LIST_PARTIAL;
			partial_append(bin, s);
		}
		s = next;
	}
}

/* Park an exhausted slab on the full list.  Returns true if a remote free
 * raced in and the slab is usable again (then it stays on partial). */
static bool slab_park_full(tcache_bin_t *bin, extent_t *slab) {
	partial_remove(bin, slab);
	slab->list = SLAB_LIST_FULL;
	list_push(&bin->full, slab);
	atomic_store(&slab->full, 1);
	if (!slab_remote_pending(slab))
		return false;
	uint8_t one = 1;
	if (!atomic_compare_exchange_strong(&slab->full, &one, 0))
		return false;    /* the remote freer will send it back */
	list_remove(&bin->full, slab);
	slab->list = SLAB_LIST_PARTIAL;
	partial_push(bin, slab);
	return true;
}

/* The current slab of class ind with a free region in free_bits: the
 * partial list's head, after collecting remote frees and parking slabs
 * that have none, or a fresh slab.  NULL on OOM. */
static extent_t *slab_current(tcache_t *tc, unsigned ind) {
	tcache_bin_t *bin = &tc->bins[ind];
	inbox_drain(tc);
	extent_t *slab;
	while ((slab = bin->partial) != NULL) {
		if (slab_has_free(slab) || slab_collect_remote(slab))
			return slab;
		if (slab_park_full(bin, slab) && slab_collect_remote(slab))
			return slab;
	}
	slab = slab_get(tc, ind);
	if (slab == NULL)
		return NULL;
	slab->list = SLAB_LIST_PARTIAL;
	partial_push(bin, slab);
	bin->nslabs++;
	return slab;
}

unsigned tcache_alloc_batch(tcache_t *tc, unsigned ind, void **out,
    unsigned n) {
	unsigned got = 0;
	while (got < n) {
		extent_t *slab = slab_current(tc, ind);
		if (slab == NULL)
			break;
		got += slab_take(slab, out + got, n - got);
	}
	return got;
}

void *tcache_alloc_small(tcache_t *tc, unsigned ind) {
	/* The current slab's lowest free region, when its hint word has
	 * one; anything else (other words, remote frees, the inbox, a new
	 * slab) is the batch path's. */
	extent_t *slab = tc->bins[ind].partial;
	if (likely(slab != NULL && slab->free_word < SLAB_WORDS)) {
		unsigned w = slab->free_word;
		uint64_t bits = slab->free_bits[w];
		if (likely(bits != 0)) {
			unsigned b = (unsigned)__builtin_ctzll(bits);
			slab->free_bits[w] = bits & (bits - 1);
			slab->used++;
			return slab_region(slab, w, b);
		}
	}
	void *p;
	return tcache_alloc_batch(tc, ind, &p, 1) == 1 ? p : NULL;
}

/* Free regions q[0..n) of one slab by its owner.  Returns the number
 * found free already: double frees, not freed again, and reported here
 * when `func` names the entry point to blame. */
static unsigned slab_free_local(tcache_t *tc, extent_t *slab, void *const *q,
    unsigned n, const char *func) {
	unsigned twice = 0;
	for (unsigned k = 0; k < n; k++) {
		uint32_t i = slab_region_index(slab, q[k]);
		uint64_t bit = (uint64_t)1 << (i % 64);
		if (unlikely(slab->free_bits[i / 64] & bit)) {
			if (func != NULL)
				malloc_misuse(func, "double free of", q[k]);
			twice++;
			continue;
		}
		slab->free_bits[i / 64] |= bit;
		if (i / 64 < slab->free_word)
			slab->free_word = (uint8_t)(i / 64);
	}
	slab->used -= n - twice;
	/* If a remote freer flipped `full` first, the slab is on its way
	 * through our inbox and moves at inbox_drain. */
	tcache_bin_t *bin = &tc->bins[slab->szind];
	uint8_t one = 1;
	if (unlikely(slab->list == SLAB_LIST_FULL) &&
	    atomic_compare_exchange_strong(&slab->full, &one, 0)) {
		list_remove(&bin->full, slab);
		slab->list = SLAB_LIST_PARTIAL;
		partial_append(bin, slab);
	}
	/* Retire an empty slab unless it is the current one, which the next
	 * allocation would take up again. */
	if (slab->used == 0 && slab->list == SLAB_LIST_PARTIAL &&
	    bin->partial != slab) {
		partial_remove(bin, slab);
		slab_release(tc, slab);
	}
	return twice;
}

bool tcache_free_small(tcache_t *tc, extent_t *slab, void *p) {
	return slab_free_local(tc, slab, &p, 1, NULL) != 0;
}

/* A remote freer found `full` set after its or: the first to flip it
 * hands the slab to its owner's inbox. */
static void slab_send_home(extent_t *slab) {
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

/* Free regions q[0..n) of one slab owned by another cache: one atomic or
 * per bitmap word they fall in.  Double frees are reported here. */
static void slab_free_remote(extent_t *slab, void *const *q, unsigned n) {
	unsigned k = 0;
	while (k < n) {
		uint32_t i = slab_region_index(slab, q[k]);
		unsigned w = i / 64;
		uint64_t mask = (uint64_t)1 << (i % 64);
		unsigned end = k + 1;
		for (; end < n; end++) {
			uint32_t j = slab_region_index(slab, q[end]);
			if (j / 64 != w || (mask & ((uint64_t)1 << (j % 64))))
				break;
			mask |= (uint64_t)1 << (j % 64);
		}
		uint64_t old = atomic_fetch_or(&slab->remote_bits[w], mask);
		if (unlikely(old & mask)) {
			uint64_t twice = old & mask;
			malloc_misuse("free", "double free of", slab_region(slab,
			    w, (unsigned)__builtin_ctzll(twice)));
		}
		k = end;
	}
	if (atomic_load(&slab->full) != 0)
		slab_send_home(slab);
}

bool tcache_free_remote(extent_t *slab, void *p) {
	uint32_t i = slab_region_index(slab, p);
	uint64_t bit = (uint64_t)1 << (i % 64);
	uint64_t old = atomic_fetch_or(&slab->remote_bits[i / 64], bit);
	if (unlikely(old & bit))
		return true;      /* already freed: a double free */
	if (atomic_load(&slab->full) != 0)
		slab_send_home(slab);
	return false;
}

/* ---- cache bins ---- */

/* Slots of class ind's cache bin: 32 KiB of regions, within bounds. */
static unsigned cache_bin_slots(unsigned ind) {
	size_t n = ((size_t)32 << 10) / sz_index2size(ind);
	if (n < CACHE_BIN_MIN)
		n = CACHE_BIN_MIN;
	if (n > CACHE_BIN_MAX)
		n = CACHE_BIN_MAX;
	return (unsigned)n;
}

/* Give regions q[0..n), which left a cache bin of tc, back to their
 * slabs, a run of regions of one slab at a time (one page-map lookup and
 * one pass over the slab's state per run). */
static void regions_return(tcache_t *tc, void *const *q, unsigned n) {
	unsigned k = 0;
	while (k < n) {
		extent_t *slab = pagemap_lookup(q[k]);
		uintptr_t lo = (uintptr_t)slab->addr;
		unsigned end = k + 1;
		while (end < n && (uintptr_t)q[end] - lo < slab->size)
			end++;
		/* A region freed twice into bins is reported late, and
		 * counted once. */
		if (slab_owner(slab) != tc)
			slab_free_remote(slab, q + k, end - k);
		else
			slab_free_local(tc, slab, q + k, end - k, "free");
		k = end;
	}
}

void tcache_bin_flush(tcache_t *tc, unsigned ind, unsigned keep) {
	unsigned have = tcache_bin_count(tc, ind);
	if (have <= keep)
		return;
	/* The oldest regions go; the most recently freed, likeliest still
	 * in this core's cache, stay. */
	void **cur = tc->cb_cur[ind], **empty = tc->cb_empty[ind];
	regions_return(tc, cur + keep, have - keep);
	memmove(empty - keep, cur, keep * sizeof(void *));
	tc->cb_cur[ind] = empty - keep;
}

void *tcache_bin_fill(tcache_t *tc, unsigned ind) {
	mp_assert(tcache_bin_count(tc, ind) == 0);
	unsigned n = tcache_bin_cap(tc, ind) / 2;
	void **empty = tc->cb_empty[ind];
	void **first = empty - n;
	/* Popped in the order the slab hands them out: address order. */
	unsigned got = tcache_alloc_batch(tc, ind, first, n);
	if (got == 0)
		return NULL;
	if (got < n)
		memmove(empty - got, first, got * sizeof(void *));
	tc->cb_cur[ind] = empty - got + 1;
	return empty[-(ptrdiff_t)got];
}

bool tcache_bins_attach(tcache_t *tc, tsd_t *tsd) {
	if (tc->cb_slots == NULL) {
		/* Each bin's slots and its NULL sentinel (base memory is
		 * zeroed, and no one ever writes a sentinel). */
		size_t total = 0;
		for (unsigned i = 0; i < SC_NBINS; i++)
			total += cache_bin_slots(i) + 1;
		tc->cb_slots = base_alloc(total * sizeof(void *));
		if (tc->cb_slots == NULL)
			return true;
	}
	void **slot = tc->cb_slots;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		tsd->bin_full[i + 1] = (uint32_t)(uintptr_t)slot;
		slot += cache_bin_slots(i);
		mp_assert(*slot == NULL);
		tc->cb_empty[i] = slot;
		tsd->bin_cur[i + 1] = slot;
		slot++;
	}
	tc->cb_cur = &tsd->bin_cur[1];
	tc->cb_full = &tsd->bin_full[1];
	return false;
}

void tcache_bins_detach(tcache_t *tc) {
	if (tc->cb_cur == NULL)
		return;
	for (unsigned i = 0; i < SC_NBINS; i++) {
		tcache_bin_flush(tc, i, 0);
		tc->cb_cur[i] = NULL;
		tc->cb_full[i] = 0;
	}
	tc->cb_cur = NULL;
	tc->cb_full = NULL;
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
	extent_t *s = bin->full;
	while (s != NULL) {
		extent_t *next = s->next;
		uint8_t one = 1;
		if (slab_remote_pending(s) &&
		    atomic_compare_exchange_strong(&s->full, &one, 0)) {
			list_remove(&bin->full, s);
			s->list = SLAB_LIST_PARTIAL;
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
}

static void empty_flush(tcache_t *tc, uint32_t keep) {
	while (tc->nempty > keep) {
		extent_t *s = tc->empty;
		list_remove(&tc->empty, s);
		tc->nempty--;
		s->list = SLAB_LIST_NONE;
		arena_slab_dalloc(s->arena, s);
	}
}

void tcache_flush(tcache_t *tc) {
	if (tc->cb_cur != NULL) {
		for (unsigned i = 0; i < SC_NBINS; i++)
			tcache_bin_flush(tc, i, 0);
	}
	inbox_drain(tc);
	for (unsigned i = 0; i < SC_NBINS; i++)
		bin_flush(tc, i);
	for (unsigned i = 0; i < TCACHE_NLARGE; i++)
		large_flush(tc, i, 0);
	empty_flush(tc, 0);
}

/* One step per thread event: half of one cache bin, that class's remote
 * frees and empty slabs, the large blocks of one class that went unused
 * since the last visit, and one kept empty slab. */
void tcache_gc_step(tcache_t *tc) {
	inbox_drain(tc);
	uint32_t step = tc->gc_bin++;
	unsigned i = step % SC_NBINS;
	if (tc->cb_cur != NULL)
		tcache_bin_flush(tc, i, tcache_bin_count(tc, i) / 2);
	bin_flush(tc, i);
	/* Its own modulus: there are more large classes than bins. */
	unsigned li = step % TCACHE_NLARGE;
	tcache_large_t *c = &tc->large[li];
	if (c->low_water > 0)
		large_flush(tc, li, c->n - c->low_water + c->low_water / 4);
	c->low_water = c->n;
	if (tc->nempty > 1)
		empty_flush(tc, tc->nempty - 1);
}

tcache_t *tcache_adopt(arena_t *arena) {
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
	return tc;
}

void tcache_orphan(tcache_t *tc) {
	tcache_bins_detach(tc);
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
