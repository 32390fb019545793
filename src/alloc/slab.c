/*
 * slab.c: the slabs a cache owns (tcache_t, types.h), the regions in them
 * and the ways back to them.  Per small class, a cache has a partial list
 * (its head is the current slab, which hands out regions in address
 * order from its free_bits) and a full list; emptied slabs wait on a
 * short empty list for reuse, then go back to the arena.  A region goes
 * home by its owner setting its bit in free_bits, or by anyone else
 * setting it in the slab's remote bitmap (one atomic or per word), which
 * the owner collects when the current slab runs dry.  Slabs that fill up
 * are parked on the full list and come back when a free lands in them,
 * through the owner's inbox (the `full` protocol in types.h).
 *
 * The thread caches (tcache.c) call in here for fills, flushes and GC;
 * the arenas' shared caches and the profiler's cache use the same code
 * under arena->shared_mtx and arena->prof_cache_mtx.  Functions named
 * tcache_* here are the entry points for a cache's small regions, named
 * by what they serve.
 */
#include "malloc_prof/internal/internal.h"

/* ---- statistics (stats.arenas.<i>.bins.<j>, types.h) ----
 * Counted where regions or slabs change hands, against the slab's arena;
 * relaxed atomics, since the owners of one arena's slabs are many
 * threads.  Nothing here runs per cached malloc or free. */

static arena_bin_stats_t *slab_bstats(const extent_t *slab) {
	return &slab->arena->bstats[slab->szind];
}

static void slab_stat_add(_Atomic uint64_t *c, uint64_t n) {
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static void slab_stat_sub(_Atomic uint64_t *c, uint64_t n) {
	atomic_fetch_sub_explicit(c, n, memory_order_relaxed);
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
 * up and parked again after a region or two), unless it lies below the
 * current slab in a class kept lowest first (slab_current). */
#define SLAB_LOWEST_SCAN 64
#define SLAB_LOWEST_MAX_SIZE 4096

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
	if (e->usize <= SLAB_LOWEST_MAX_SIZE && bin->partial != NULL &&
	    e->addr < bin->partial->addr) {
		partial_push(bin, e);
		return;
	}
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
			mp_misuse("free", "double free of", slab_region(slab,
			    w, (unsigned)__builtin_ctzll(twice)), "");
			bits &= ~twice;
		}
		slab->free_bits[w] |= bits;
		if (bits != 0 && w < slab->free_word)
			slab->free_word = (uint8_t)w;
		n += util_popcount64(bits);
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
	arena_bin_stats_t *bs = slab_bstats(slab);
	slab_stat_add(&bs->nmalloc, got);
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

/* Bytes of the emptied slabs all arenas' prof_caches keep, changed
 * under each cache's own lock (hence atomic): the share of the heap they
 * may keep past their floor is one for all of them (slab_prof_keep).  In
 * .data (MP_DATA): on a page of .bss of its own, the first samples made
 * that page resident (test/integration/prof_data_pages). */
static MP_DATA _Atomic size_t prof_cache_kept_bytes;

size_t slab_prof_kept_bytes(void) {
	return atomic_load_explicit(&prof_cache_kept_bytes,
	    memory_order_relaxed);
}

/* slab onto tc's list of emptied slabs, and off it: the counts with the
 * list. */
static void slab_empty_push(tcache_t *tc, extent_t *slab) {
	slab->list = SLAB_LIST_EMPTY;
	list_push(&tc->empty, slab);
	tc->nempty++;
	tc->empty_pages += (uint32_t)(slab->size >> LG_PAGE);
	if (tc->small_slabs)
		atomic_fetch_add_explicit(&prof_cache_kept_bytes, slab->size,
		    memory_order_relaxed);
}

static void slab_empty_remove(tcache_t *tc, extent_t *slab) {
	list_remove(&tc->empty, slab);
	tc->nempty--;
	tc->empty_pages -= (uint32_t)(slab->size >> LG_PAGE);
	if (tc->small_slabs)
		atomic_fetch_sub_explicit(&prof_cache_kept_bytes, slab->size,
		    memory_order_relaxed);
}

/*
 * Whether a prof_cache keeps an emptied slab: up to
 * PROF_CACHE_EMPTY_SLABS_MAX slabs, of PROF_CACHE_EMPTY_BYTES each
 * (its floor), and past that while all the prof_caches keep no more than
 * a share of the active heap together (types.h; the heap is read only
 * past the floor, which a small program's samples never pass).  A share
 * per cache let N arenas whose threads sample keep N shares: 25% of the
 * heap with 256 arenas.  To make room, the slabs kept longest go back to
 * the arena, not the new one: what is kept then shrinks with the heap at
 * the next sample's free (it stayed at the share of the largest heap
 * before), and holds the sizes freed lately (midsize at scale 1: 2,087 of
 * 12,530 set-ups for small samples took a slab from the arena, 2,190 of
 * 12,725 when the new slab went).  Only the cache's own slabs can go (the
 * others' are under their own locks): past its floor and still over the
 * share with none of its own left, it keeps nothing.
 */
static bool slab_prof_keep(tcache_t *tc, const extent_t *slab) {
	size_t own = ((size_t)tc->empty_pages << LG_PAGE) + slab->size;
	size_t all = slab_prof_kept_bytes() + slab->size;
	size_t share = 0;
	if (own > PROF_CACHE_EMPTY_BYTES)
		share = (arena_pactive_total() << LG_PAGE) >>
		    PROF_CACHE_EMPTY_LG_SHARE;
	for (;;) {
		bool over = own > PROF_CACHE_EMPTY_BYTES && all > share;
		if (!over && tc->nempty < PROF_CACHE_EMPTY_SLABS_MAX)
			return true;
		if (tc->nempty == 0)
			return false;
		extent_t *old = tc->empty;
		while (old->next != NULL)
			old = old->next;
		slab_empty_remove(tc, old);
		own -= old->size;
		all -= old->size;
		old->list = SLAB_LIST_NONE;
		arena_slab_dalloc(old->arena, old);
	}
}

static void slab_release(tcache_t *tc, extent_t *slab) {
	tc->bins[slab->szind].nslabs--;
	slab_stat_sub(&slab_bstats(slab)->curslabs, 1);
	slab->list = SLAB_LIST_NONE;
	if (tc->small_slabs ? slab_prof_keep(tc, slab) :
	    tc->nempty < TCACHE_EMPTY_SLABS_MAX && !tc->shared) {
		slab_empty_push(tc, slab);
		return;
	}
	arena_slab_dalloc(slab->arena, slab);
}

/* A fresh slab for class ind: a kept empty one of the same geometry, or
 * one from the arena.  Sampled regions must be freed through the
 * profiler: the prof_cache's slabs get no class tag, so that free never
 * puts them in a cache bin; an empty one of the same class is ready as
 * it is (every region free, untagged).  Out of line: it runs once a
 * slab, and inlined (with the kept pages' count) it cost
 * tcache_alloc_batch's region loop a register (midsize, profiling off:
 * +47K instructions, 12 a call). */
static MP_NOINLINE extent_t *slab_get(tcache_t *tc, unsigned ind) {
	size_t size = tc->small_slabs ? sz_prof_slab_size[ind]
	    : sz_slab_size_get(ind);
	extent_t *slab = NULL;
	for (extent_t *s = tc->empty; s != NULL; s = s->next) {
		if (s->size != size)
			continue;
		/* The prof_cache's kept slab of this very class if it has
		 * one: ready as it is, where another class's gets its
		 * geometry and free map again (not its pages' entries: they
		 * map to it untagged whatever the class).  Else the
		 * one of the smallest class: samples are taken per byte, so
		 * a class of bigger objects gets its next sample sooner
		 * (churn: 1,003 of 1,624 samples set one up again when the
		 * newest kept slab went instead). */
		if (!tc->small_slabs || s->szind == ind) {
			slab = s;
			break;
		}
		if (slab == NULL || s->szind < slab->szind)
			slab = s;
	}
	if (slab != NULL) {
		slab_empty_remove(tc, slab);
		if (!tc->small_slabs || slab->szind != ind)
			arena_slab_init(slab, ind, !tc->small_slabs);
	}
	if (slab == NULL) {
		slab = arena_slab_alloc(tc->arena, ind, size, !tc->small_slabs);
		if (slab == NULL)
			return NULL;
	}
	atomic_store_explicit(&slab->owner, tc, memory_order_release);
	arena_bin_stats_t *bs = slab_bstats(slab);
	slab_stat_add(&bs->nslabs, 1);
	slab_stat_add(&bs->curslabs, 1);
	return slab;
}

/*
 * Slabs whose `full` flag a remote freer cleared come back here.  Their
 * remote frees are collected on the way, and a slab that other threads
 * emptied entirely is released at once instead of waiting on partial for
 * its class's GC step (one class per thread event, 35 events for them
 * all): a thread that hands everything it made to another thread then
 * works in other classes would otherwise hold the pages it no longer
 * uses, which the freeing thread, mapping slabs of its own, cannot reuse
 * (issue 15 part 3; test/integration/xthread_rss).
 */
void slab_inbox_drain(tcache_t *tc) {
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
			slab_collect_remote(s);
			if (s->used == 0) {
				slab_release(tc, s);
			} else {
				s->list = SLAB_LIST_PARTIAL;
				partial_append(bin, s);
			}
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
	slab_stat_add(&slab_bstats(slab)->fullslabs, 1);
	atomic_store(&slab->full, 1);
	if (!slab_remote_pending(slab))
		return false;
	uint8_t one = 1;
	if (!atomic_compare_exchange_strong(&slab->full, &one, 0))
		return false;    /* the remote freer will send it back */
	list_remove(&bin->full, slab);
	slab->list = SLAB_LIST_PARTIAL;
	partial_push(bin, slab);
	slab_stat_sub(&slab_bstats(slab)->fullslabs, 1);
	return true;
}

/*
 * Lowest slab first (jemalloc's choice of a bin's next slab): when the
 * current slab runs dry, the partial slab of the lowest address of the
 * first SLAB_LOWEST_SCAN becomes current, and a slab back from the full
 * list that lies below the current one takes its place.  Taking regions
 * from the low slabs leaves the high ones to drain under random frees
 * until they are empty and go back to the arena, instead of the slabs a
 * class needed at its busiest moment all staying resident, each a little
 * used (alloctest's peak 13.2 -> 11.6 MB, larson's 7.9 -> 7.55).  Only
 * for classes up to SLAB_LOWEST_MAX_SIZE: the slabs above are 64-86 KiB
 * and share the arena with mid-size large blocks, and emptying them more
 * often left realloc's arena with dirty runs that its growing buffers
 * did not fit (14.5 -> 16.1 MB with every class).
 */
static void partial_lowest_first(tcache_bin_t *bin) {
	extent_t *low = bin->partial;
	if (low == NULL || low->usize > SLAB_LOWEST_MAX_SIZE)
		return;
	unsigned k = 0;
	for (extent_t *s = low->next; s != NULL && k < SLAB_LOWEST_SCAN;
	    s = s->next, k++) {
		if (s->addr < low->addr)
			low = s;
	}
	if (low != bin->partial) {
		partial_remove(bin, low);
		partial_push(bin, low);
	}
}

/* The current slab of class ind with a free region in free_bits: the
 * partial list's lowest slab, after collecting remote frees and parking
 * slabs that have none, or a fresh slab.  NULL on OOM. */
static extent_t *slab_current(tcache_t *tc, unsigned ind) {
	tcache_bin_t *bin = &tc->bins[ind];
	slab_inbox_drain(tc);
	extent_t *slab, *was = bin->partial;
	while ((slab = bin->partial) != NULL) {
		if (slab_has_free(slab) || slab_collect_remote(slab))
			goto found;
		if (slab_park_full(bin, slab) && slab_collect_remote(slab))
			goto found;
		partial_lowest_first(bin);
	}
	slab = slab_get(tc, ind);
	if (slab == NULL)
		return NULL;
	slab->list = SLAB_LIST_PARTIAL;
	partial_push(bin, slab);
	bin->nslabs++;
found:
	/* jemalloc's nreslabs: the slab allocated from changed. */
	if (slab != was)
		slab_stat_add(&slab_bstats(slab)->nreslabs, 1);
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
			arena_bin_stats_t *bs = slab_bstats(slab);
			slab_stat_add(&bs->nmalloc, 1);
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
				mp_misuse(func, "double free of", q[k], "");
			twice++;
			continue;
		}
		slab->free_bits[i / 64] |= bit;
		if (i / 64 < slab->free_word)
			slab->free_word = (uint8_t)(i / 64);
	}
	slab->used -= n - twice;
	/* Counted per run of one slab (no state across runs: cheaper than
	 * adding up in the callers), before the slab may retire below. */
	slab_stat_add(&slab_bstats(slab)->ndalloc, n - twice);
	/* If a remote freer flipped `full` first, the slab is on its way
	 * through our inbox and moves at slab_inbox_drain. */
	tcache_bin_t *bin = &tc->bins[slab->szind];
	uint8_t one = 1;
	if (unlikely(slab->list == SLAB_LIST_FULL) &&
	    atomic_compare_exchange_strong(&slab->full, &one, 0)) {
		list_remove(&bin->full, slab);
		slab->list = SLAB_LIST_PARTIAL;
		partial_append(bin, slab);
		slab_stat_sub(&slab_bstats(slab)->fullslabs, 1);
	}
	/* Retire an empty slab unless it is the current one, which the next
	 * allocation would take up again; the prof_cache's current one too
	 * (its next allocation of the class may be far away: it takes the
	 * kept empty slab then). */
	if (slab->used == 0 && slab->list == SLAB_LIST_PARTIAL &&
	    (bin->partial != slab || tc->small_slabs)) {
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
	/* fullslabs counts the slabs whose `full` is set: whoever clears
	 * it takes the slab off the count (the slab cannot retire before
	 * its owner takes it from the inbox). */
	slab_stat_sub(&slab_bstats(slab)->fullslabs, 1);
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

/* Tell `owner` (read before the first or, with the class) that a slab of
 * class ind got remote frees; after the or, so that the owner's GC,
 * which clears the bit before it looks, sees the bits.  A load first: the
 * bit is mostly set already, and the line stays shared. */
static void slab_remote_mark(tcache_t *owner, unsigned ind) {
	if (owner == NULL || owner == &extent_large_owner)
		return;
	uint64_t bit = (uint64_t)1 << ind;
	if ((atomic_load_explicit(&owner->remote_classes,
	    memory_order_relaxed) & bit) == 0)
		atomic_fetch_or_explicit(&owner->remote_classes, bit,
		    memory_order_release);
}

/* The GC's visit of class ind: true if its slabs may hold remote frees
 * (and the mark is cleared for the next visit). */
static bool slab_remote_marked(tcache_t *tc, unsigned ind) {
	uint64_t bit = (uint64_t)1 << ind;
	if ((atomic_load_explicit(&tc->remote_classes, memory_order_relaxed) &
	    bit) == 0)
		return false;
	atomic_fetch_and_explicit(&tc->remote_classes, ~bit,
	    memory_order_acquire);
	return true;
}

_Static_assert(SC_NBINS <= 64, "remote_classes has a bit per class");

/* Free regions q[0..n) of one slab owned by another cache: one atomic or
 * per bitmap word they fall in.  Double frees are reported here. */
static void slab_free_remote(extent_t *slab, void *const *q, unsigned n) {
	unsigned k = 0, freed = 0;
	/* Before the first or: once its regions are free, the owner may
	 * retire the slab and its record become something else. */
	arena_bin_stats_t *bs = slab_bstats(slab);
	tcache_t *owner = slab_owner(slab);
	unsigned ind = slab->szind;
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
			mp_misuse("free", "double free of", slab_region(slab,
			    w, (unsigned)__builtin_ctzll(twice)), "");
		}
		freed += util_popcount64(mask & ~old);
		k = end;
	}
	slab_remote_mark(owner, ind);
	slab_stat_add(&bs->ndalloc, freed);
	if (atomic_load(&slab->full) != 0)
		slab_send_home(slab);
}

bool tcache_free_remote(extent_t *slab, void *p) {
	uint32_t i = slab_region_index(slab, p);
	uint64_t bit = (uint64_t)1 << (i % 64);
	arena_bin_stats_t *bs = slab_bstats(slab);   /* see slab_free_remote */
	tcache_t *owner = slab_owner(slab);
	unsigned ind = slab->szind;
	uint64_t old = atomic_fetch_or(&slab->remote_bits[i / 64], bit);
	if (unlikely(old & bit))
		return true;      /* already freed: a double free */
	slab_remote_mark(owner, ind);
	slab_stat_add(&bs->ndalloc, 1);
	if (atomic_load(&slab->full) != 0)
		slab_send_home(slab);
	return false;
}

/* ---- regions back from a cache bin, flushes ---- */

/* Give regions q[0..n), which left a cache bin of tc, back to their
 * slabs, a run of regions of one slab at a time (one page-map lookup and
 * one pass over the slab's state per run). */
void slab_regions_return(tcache_t *tc, void *const *q, unsigned n) {
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

void slab_bin_gc(tcache_t *tc, unsigned ind) {
	/* Local frees release an emptied slab at once (slab_free_local):
	 * only remote ones leave something for the walk to find. */
	if (slab_remote_marked(tc, ind))
		slab_bin_flush(tc, ind);
}

/* Collect remote frees into every slab of a bin and release the empty
 * ones.  A full-list slab is touched only after we win its `full` flag;
 * otherwise a remote freer owns the transition and it is in the inbox. */
void slab_bin_flush(tcache_t *tc, unsigned ind) {
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
			slab_stat_sub(&slab_bstats(s)->fullslabs, 1);
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

void slab_empty_flush(tcache_t *tc, uint32_t keep) {
	while (tc->nempty > keep) {
		extent_t *s = tc->empty;
		slab_empty_remove(tc, s);
		s->list = SLAB_LIST_NONE;
		arena_slab_dalloc(s->arena, s);
	}
}
