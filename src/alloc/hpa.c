/*
 * hpa.c: the hugepage allocator (opt.hpa, jemalloc's HPA).  With hpa:true
 * every arena with the default extent hooks (automatic or manual, with
 * or without dss, as jemalloc 5.3 decides) takes its unguarded page runs of up to
 * hpa_slab_max_alloc bytes (slabs and small large blocks) from pageslabs
 * instead of its extent sets: mappings of HUGEPAGE bytes at
 * HUGEPAGE-aligned addresses, each with a bitmap of its active, dirty and
 * touched pages (alloc.h states the invariants).
 *
 * Why: the kernel backs a 2 MiB-aligned range with one huge page (one TLB
 * entry instead of 512) only if the whole range is mapped alike.  The
 * ordinary extents scatter small runs over unaligned mappings; here they
 * are packed densely (a run goes to the pageslab whose longest free run
 * is the smallest that fits, first fit inside it), so that most pageslabs
 * are nearly full, and get MADV_HUGEPAGE once their active pages reach
 * hpa_hugification_threshold (after hpa_hugify_delay_ms), while emptier
 * ones can give their pages back.  Free pages stay dirty until the dirty
 * pages of the arena's pageslabs exceed hpa_dirty_mult x the active ones
 * (checked at most every hpa_min_purge_interval_ms): then the pageslabs
 * with the most dirty pages are purged (MADV_DONTNEED), each dehugified
 * first (MADV_NOHUGEPAGE): purging part of a huge page would split it
 * anyway, and the kernel could refill the hole with a huge page again.
 * dirty_decay_ms:0 purges freed pageslab pages at once, as it does the
 * extents'; arena.<i>.purge (a forced decay) purges them all.
 *
 * Deferred work: while the background thread is enabled (hpa_deferral,
 * set by background_thread.c) hugifications and purges by the ratio are
 * its work, as jemalloc defers them (deferral_allowed): the paths here
 * only say when the work is due (hpa_work_due) and the thread runs
 * hpa_deferred_work_locked.  Otherwise they run inline, as above.
 *
 * In front of the pageslabs sits the small extent cache (hpa_sec_*,
 * jemalloc's SEC): a freed run of up to hpa_sec_max_alloc keeps its
 * record and its pages (still active in the pageslab) in a bin per page
 * count of the freeing thread's shard, and is handed out again before
 * the pageslabs are searched, because a bin pop is cheaper than the
 * bitmap work and keeps a just-freed run's pages where they are; a shard
 * past hpa_sec_max_bytes gives whole bins back down to
 * hpa_sec_bytes_after_flush.
 *
 * Guarded or aligned runs, larger ones, and arenas with hooks of their
 * own keep extent.c's path (dss applies to that path only); an extent carved here names its
 * pageslab (extent_t.hpa_ps) and extent.c sends its free, expansion and
 * shrinking here.  This file uses neither extent.c nor arena.c (they call
 * it): extent.c sets the records' owner and gives them back, and arena.c
 * decides which runs come here (hpa_eligible).  A pageslab is kept mapped
 * when empty (retain), or unmapped once empty and purged with
 * retain:false, and by arena.<i>.destroy.  Everything, the cache
 * included, runs under arena->mtx, like extent.c (fork takes it).
 */
#include "malloc_prof/internal/internal.h"

bool opt_hpa = false;
size_t opt_hpa_slab_max_alloc = (size_t)64 << 10;
size_t opt_hpa_hugification_threshold = HUGEPAGE * 95 / 100;
size_t opt_hpa_hugify_delay_ms = 10 * 1000;
size_t opt_hpa_min_purge_interval_ms = 5 * 1000;
uint32_t opt_hpa_dirty_mult = (uint32_t)1 << 14;        /* 0.25 */

/* The small extent cache (jemalloc 5.3's sec_opts and defaults). */
size_t opt_hpa_sec_nshards = 4;
size_t opt_hpa_sec_max_alloc = (size_t)32 << 10;
size_t opt_hpa_sec_max_bytes = (size_t)256 << 10;
size_t opt_hpa_sec_bytes_after_flush = (size_t)128 << 10;
size_t opt_hpa_sec_batch_fill_extra = 0;

/* Deferral (jemalloc's deferral_allowed): background_thread.c sets it
 * while the background thread is enabled and points hpa_work_due at its
 * wake-up, so that this file does not depend on it. */
_Atomic bool hpa_deferral;

static void work_due_none(uint64_t due_ns) {
	(void)due_ns;
}
void (*hpa_work_due)(uint64_t due_ns) = work_due_none;

static bool deferred(void) {
	return atomic_load_explicit(&hpa_deferral, memory_order_relaxed);
}

/* Pageslabs looked at in a bin for the fullest: a bound on the work of
 * a pick, the bins' heads being the pageslabs changed last. */
#define HPA_PICK_SCAN 8

/* ---- bitmaps of HPA_NPAGES bits ---- */

/* The bits of [from, from + n) that fall in word from / 64 (n > 0), and
 * how many they are. */
static uint64_t word_mask(size_t from, size_t n, size_t *k) {
	size_t b = from % 64;
	*k = 64 - b < n ? 64 - b : n;
	return (*k == 64 ? ~(uint64_t)0 : (((uint64_t)1 << *k) - 1)) << b;
}

static void bits_set(uint64_t *w, size_t from, size_t n) {
	for (size_t k; n > 0; from += k, n -= k)
		w[from / 64] |= word_mask(from, n, &k);
}

static void bits_clear(uint64_t *w, size_t from, size_t n) {
	for (size_t k; n > 0; from += k, n -= k)
		w[from / 64] &= ~word_mask(from, n, &k);
}

static size_t bits_count(const uint64_t *w, size_t from, size_t n) {
	size_t c = 0;
	for (size_t k; n > 0; from += k, n -= k)
		c += util_popcount64(w[from / 64] & word_mask(from, n, &k));
	return c;
}

/* The first index >= i whose bit is `set`, else HPA_NPAGES. */
static size_t bit_find(const uint64_t *w, size_t i, bool set) {
	while (i < HPA_NPAGES) {
		uint64_t x = set ? w[i / 64] : ~w[i / 64];
		x >>= i % 64;
		if (x != 0) {
			size_t j = i + (size_t)__builtin_ctzll(x);
			return j < HPA_NPAGES ? j : HPA_NPAGES;
		}
		i = (i / 64 + 1) * 64;
	}
	return HPA_NPAGES;
}

/* The last index <= i whose bit is `set`, else SIZE_MAX (none). */
static size_t bit_find_rev(const uint64_t *w, size_t i, bool set) {
	for (;;) {
		uint64_t x = set ? w[i / 64] : ~w[i / 64];
		unsigned b = (unsigned)(i % 64);
		x &= b == 63 ? ~(uint64_t)0 : ((uint64_t)2 << b) - 1;
		if (x != 0)
			return (i / 64) * 64 + 63 - (size_t)__builtin_clzll(x);
		if (i < 64)
			return SIZE_MAX;
		i = (i / 64) * 64 - 1;
	}
}

/* The free run holding [from, from + n) once those pages are free. */
static size_t ps_free_run_around(const hpa_ps_t *ps, size_t from, size_t n) {
	size_t lo = from == 0 ? SIZE_MAX : bit_find_rev(ps->active, from - 1,
	    true);
	size_t start = lo == SIZE_MAX ? 0 : lo + 1;
	return bit_find(ps->active, from + n, true) - start;
}

static uint32_t ps_longest_free(const hpa_ps_t *ps) {
	size_t best = 0;
	for (size_t i = bit_find(ps->active, 0, false); i < HPA_NPAGES;) {
		size_t end = bit_find(ps->active, i, true);
		if (end - i > best)
			best = end - i;
		i = bit_find(ps->active, end, false);
	}
	return (uint32_t)best;
}

/* The lowest run of n free pages (the caller knows one exists); *len:
 * the length of the free run it starts. */
static size_t ps_first_fit(const hpa_ps_t *ps, size_t n, size_t *len) {
	for (size_t i = bit_find(ps->active, 0, false); i < HPA_NPAGES;) {
		size_t end = bit_find(ps->active, i, true);
		if (end - i >= n) {
			*len = end - i;
			return i;
		}
		i = bit_find(ps->active, end, false);
	}
	mp_not_reached();
}

/* ---- the placement rule ---- */

/* Insert ps with its longest free run known (ps->lfr): the callers
 * below keep it up to date from the run they changed, as a walk of the
 * bitmap on every change cost bench's midsize 5% of its instructions. */
static void psset_insert_known(hpa_shard_t *s, hpa_ps_t *ps) {
	uint32_t b = ps->lfr;
	mp_assert(b == ps_longest_free(ps));
	ps->prev = NULL;
	ps->next = s->bins[b];
	if (ps->next != NULL)
		ps->next->prev = ps;
	s->bins[b] = ps;
	s->nonempty[b / 64] |= (uint64_t)1 << (b % 64);
}

void hpa_psset_insert(hpa_shard_t *s, hpa_ps_t *ps) {
	ps->lfr = ps_longest_free(ps);
	psset_insert_known(s, ps);
}

/* After pages [from, from + n) of ps were freed. */
static void lfr_grew(hpa_ps_t *ps, size_t from, size_t n) {
	size_t run = ps_free_run_around(ps, from, n);
	if (run > ps->lfr)
		ps->lfr = (uint32_t)run;
}

void hpa_psset_remove(hpa_shard_t *s, hpa_ps_t *ps) {
	uint32_t b = ps->lfr;
	if (ps->prev != NULL)
		ps->prev->next = ps->next;
	else
		s->bins[b] = ps->next;
	if (ps->next != NULL)
		ps->next->prev = ps->prev;
	if (s->bins[b] == NULL)
		s->nonempty[b / 64] &= ~((uint64_t)1 << (b % 64));
	ps->prev = ps->next = NULL;
}

hpa_ps_t *hpa_psset_pick(hpa_shard_t *s, size_t npages) {
	if (npages == 0 || npages > HPA_NPAGES)
		return NULL;
	for (size_t w = npages / 64; w < (HPA_NPAGES + 1 + 63) / 64; w++) {
		uint64_t bits = s->nonempty[w];
		if (w == npages / 64)
			bits &= ~(uint64_t)0 << (npages % 64);
		if (bits == 0)
			continue;
		hpa_ps_t *best = s->bins[w * 64 + (size_t)__builtin_ctzll(bits)];
		unsigned seen = 0;
		for (hpa_ps_t *p = best->next; p != NULL &&
		    ++seen < HPA_PICK_SCAN; p = p->next) {
			if (p->nactive > best->nactive)
				best = p;
		}
		return best;
	}
	return NULL;
}

/* ---- pageslabs ---- */

static size_t hugify_threshold_pages(void) {
	return (opt_hpa_hugification_threshold + PAGE - 1) >> LG_PAGE;
}

static uint64_t ms_to_ns(size_t ms) {
	return ms > UINT64_MAX / 1000000u ? UINT64_MAX : (uint64_t)ms * 1000000u;
}

static hpa_ps_t *ps_new(arena_t *arena, hpa_shard_t *s) {
	char *addr = os_map(HUGEPAGE, HUGEPAGE);
	if (addr == NULL)
		return NULL;
	hpa_ps_t *ps = s->spare;
	if (ps != NULL)
		s->spare = ps->next;
	else
		ps = base_alloc(sizeof(*ps));
	if (ps == NULL || pagemap_prepare(addr, HUGEPAGE)) {
		if (ps != NULL) {
			ps->next = s->spare;
			s->spare = ps;
		}
		os_unmap(addr, HUGEPAGE);
		return NULL;
	}
	memset(ps, 0, sizeof(*ps));
	ps->addr = addr;
	ps->lfr = (uint32_t)HPA_NPAGES;
	ps->all_next = s->all;
	if (s->all != NULL)
		s->all->all_prev = ps;
	s->all = ps;
	arena->stats.mapped += HUGEPAGE;
	arena->stats.hpa_npageslabs++;
	psset_insert_known(s, ps);
	return ps;
}

/* An empty, purged pageslab with retain:false: back to the OS. */
static void ps_unmap(arena_t *arena, hpa_shard_t *s, hpa_ps_t *ps) {
	mp_assert(ps->nactive == 0 && ps->ndirty == 0);
	hpa_psset_remove(s, ps);
	if (ps->all_prev != NULL)
		ps->all_prev->all_next = ps->all_next;
	else
		s->all = ps->all_next;
	if (ps->all_next != NULL)
		ps->all_next->all_prev = ps->all_prev;
	if (ps->hugify_pending)
		s->npending--;
	if (ps->huge)
		arena->stats.hpa_nhuge--;
	os_unmap(ps->addr, HUGEPAGE);
	arena->stats.mapped -= HUGEPAGE;
	arena->stats.hpa_npageslabs--;
	ps->next = s->spare;
	s->spare = ps;
}

static void ps_hugify(arena_t *arena, hpa_shard_t *s, hpa_ps_t *ps) {
	if (ps->hugify_pending) {
		ps->hugify_pending = false;
		s->npending--;
	}
	if (ps->huge || ps->hugify_failed)
		return;
	if (os_pages_huge(ps->addr, HUGEPAGE, true)) {
		ps->hugify_failed = true;
		return;
	}
	ps->huge = true;
	arena->stats.hpa_nhuge++;
	arena->stats.hpa_nhugifies++;
}

/* After ps gained active pages: dense enough, it is hugified now or
 * once hpa_hugify_delay_ms has passed. */
static void ps_dense_check(arena_t *arena, hpa_shard_t *s, hpa_ps_t *ps) {
	if (ps->huge || ps->hugify_pending || ps->hugify_failed ||
	    ps->nactive < hugify_threshold_pages())
		return;
	bool defer = deferred();
	if (opt_hpa_hugify_delay_ms == 0 && !defer) {
		ps_hugify(arena, s, ps);
		return;
	}
	uint64_t delay = ms_to_ns(opt_hpa_hugify_delay_ms), now = os_now_ns();
	ps->hugify_at = now > UINT64_MAX - delay ? UINT64_MAX : now + delay;
	ps->hugify_pending = true;
	if (s->npending++ == 0 || ps->hugify_at < s->hugify_next_ns)
		s->hugify_next_ns = ps->hugify_at;
	if (defer)
		hpa_work_due(ps->hugify_at);
}

/* After ps lost active pages: a pending hugification below the
 * threshold is called off (jemalloc's rule). */
static void ps_sparse_check(hpa_shard_t *s, hpa_ps_t *ps) {
	if (ps->hugify_pending && ps->nactive < hugify_threshold_pages()) {
		ps->hugify_pending = false;
		s->npending--;
	}
}

/* Hugify the pending pageslabs that are due; the walk over them all
 * happens only once the earliest is. */
static void hugify_due(arena_t *arena, hpa_shard_t *s, uint64_t now) {
	if (s->npending == 0 || now < s->hugify_next_ns)
		return;
	uint64_t next = UINT64_MAX;
	for (hpa_ps_t *ps = s->all; ps != NULL; ps = ps->all_next) {
		if (!ps->hugify_pending)
			continue;
		if (now >= ps->hugify_at)
			ps_hugify(arena, s, ps);
		else if (ps->hugify_at < next)
			next = ps->hugify_at;
	}
	s->hugify_next_ns = next;
}

/* Purge every dirty page of ps, dehugifying it first.  Returns the
 * pages purged. */
static size_t ps_purge(arena_t *arena, hpa_ps_t *ps) {
	if (ps->ndirty == 0)
		return 0;
	if (ps->huge) {
		os_pages_huge(ps->addr, HUGEPAGE, false);
		ps->huge = false;
		arena->stats.hpa_nhuge--;
		arena->stats.hpa_ndehugifies++;
	}
	ps->hugify_failed = false;
	size_t purged = 0;
	for (size_t i = bit_find(ps->dirty, 0, true); i < HPA_NPAGES;) {
		size_t end = bit_find(ps->dirty, i, false);
		bool unzeroed = os_purge_forced(ps->addr + (i << LG_PAGE),
		    (end - i) << LG_PAGE);
		bits_clear(ps->dirty, i, end - i);
		if (!unzeroed)
			bits_clear(ps->touched, i, end - i);
		purged += end - i;
		arena->stats.hpa_npurges++;
		arena->stats.nmadvise++;
		i = bit_find(ps->dirty, end, true);
	}
	mp_assert(purged == ps->ndirty);
	ps->ndirty = 0;
	arena->stats.hpa_ndirty -= purged;
	arena->stats.purged += purged;
	return purged;
}

/* Purge pageslabs, most dirty first (the unhugified on a tie), while
 * the dirty pages exceed hpa_dirty_mult x the active ones; with force,
 * all of them. */
static size_t purge_pass(arena_t *arena, hpa_shard_t *s, uint64_t now,
    bool force) {
	if (!force) {
		if (opt_hpa_dirty_mult == HPA_DIRTY_MULT_OFF)
			return 0;
		if (s->last_purge_ns != 0 && now >= s->last_purge_ns &&
		    now - s->last_purge_ns <
		    ms_to_ns(opt_hpa_min_purge_interval_ms))
			return 0;
	}
	size_t purged = 0;
	for (;;) {
		size_t limit = force ? 0 : (size_t)(((uint64_t)
		    arena->stats.hpa_nactive * opt_hpa_dirty_mult) >> 16);
		if (arena->stats.hpa_ndirty <= limit)
			break;
		hpa_ps_t *most = NULL;
		for (hpa_ps_t *ps = s->all; ps != NULL; ps = ps->all_next) {
			if (ps->ndirty != 0 && (most == NULL ||
			    ps->ndirty > most->ndirty ||
			    (ps->ndirty == most->ndirty && most->huge)))
				most = ps;
		}
		if (most == NULL)
			break;
		purged += ps_purge(arena, most);
		if (most->nactive == 0 && !opt_retain)
			ps_unmap(arena, s, most);
	}
	if (purged != 0) {
		arena->stats.hpa_npurge_passes++;
		s->last_purge_ns = now;
	}
	return purged;
}

/* When a purge by hpa_dirty_mult is due (dirty pages over the limit,
 * and hpa_min_purge_interval_ms since the last), else UINT64_MAX. */
static uint64_t purge_next_ns(arena_t *arena, hpa_shard_t *s, uint64_t now) {
	if (opt_hpa_dirty_mult == HPA_DIRTY_MULT_OFF ||
	    arena->stats.hpa_ndirty <= (size_t)(((uint64_t)
	    arena->stats.hpa_nactive * opt_hpa_dirty_mult) >> 16))
		return UINT64_MAX;
	if (s->last_purge_ns == 0 || now < s->last_purge_ns)
		return now;
	uint64_t iv = ms_to_ns(opt_hpa_min_purge_interval_ms);
	return s->last_purge_ns > UINT64_MAX - iv ? UINT64_MAX :
	    s->last_purge_ns + iv;
}

/* After pages of ps turned dirty.  Deferred, the background thread is
 * told when the purge is due; dirty_decay_ms:0 purges at once either
 * way, as it does the extents. */
static void freed_pages(arena_t *arena, hpa_shard_t *s, uint64_t now) {
	bool now_all = arena_dirty_decay_ms(arena) == 0;
	if (deferred() && !now_all) {
		uint64_t due = purge_next_ns(arena, s, now);
		if (due != UINT64_MAX)
			hpa_work_due(due);
		return;
	}
	purge_pass(arena, s, now, now_all);
	hugify_due(arena, s, now);
}

/* A run of size bytes from the pageslabs into the record e; false if
 * no pageslab could be had.  Inlined, as is ps_dalloc: out of line, the
 * calls cost midsize (hpa:true) 0.3% of its instructions. */
MP_INLINE bool ps_alloc(arena_t *arena, hpa_shard_t *s, extent_t *e,
    size_t size, size_t *dirty_off, size_t *dirty_len) {
	size_t n = size >> LG_PAGE;
	hpa_ps_t *ps = hpa_psset_pick(s, n);
	if (ps == NULL && (ps = ps_new(arena, s)) == NULL)
		return false;
	size_t run, first = ps_first_fit(ps, n, &run);
	/* Old data lies between the first and the last touched page. */
	size_t lo = bit_find(ps->touched, first, true), hi = 0;
	if (lo >= first + n)
		lo = SIZE_MAX;
	else
		hi = bit_find_rev(ps->touched, first + n - 1, true) + 1;
	size_t ndirty = bits_count(ps->dirty, first, n);
	hpa_psset_remove(s, ps);
	bits_clear(ps->dirty, first, n);
	bits_set(ps->active, first, n);
	bits_set(ps->touched, first, n);
	ps->nactive += (uint32_t)n;
	ps->ndirty -= (uint32_t)ndirty;
	arena->stats.hpa_nactive += n;
	arena->stats.hpa_ndirty -= ndirty;
	/* Only carving the longest run can shorten it. */
	if (run == ps->lfr)
		ps->lfr = ps_longest_free(ps);
	psset_insert_known(s, ps);
	*dirty_off = lo == SIZE_MAX ? 0 : (lo - first) << LG_PAGE;
	*dirty_len = lo == SIZE_MAX ? 0 : (hi - lo) << LG_PAGE;
	e->addr = ps->addr + (first << LG_PAGE);
	e->size = size;
	e->arena = arena;
	e->kind = EXTENT_LARGE;
	e->map_addr = ps->addr;
	e->map_size = HUGEPAGE;
	e->zeroed = lo == SIZE_MAX;
	e->hpa_ps = ps;
	ps_dense_check(arena, s, ps);
	/* hugify_due's own test first: on most allocations a hugification
	 * is pending but not due, and the call would cost more. */
	if (s->npending != 0 && !deferred()) {
		uint64_t now = os_now_ns();
		if (now >= s->hugify_next_ns)
			hugify_due(arena, s, now);
	}
	return true;
}

/* The pages of e back to its pageslab (the record stays the caller's). */
MP_INLINE void ps_dalloc(arena_t *arena, hpa_shard_t *s, extent_t *e,
    uint64_t now) {
	hpa_ps_t *ps = e->hpa_ps;
	size_t first = (size_t)(e->addr - ps->addr) >> LG_PAGE;
	size_t n = e->size >> LG_PAGE;
	/* A large block's tail past clean_from was purged by arena.c. */
	size_t dirty = e->clean_from != 0 && e->clean_from < e->size ?
	    e->clean_from >> LG_PAGE : n;
	hpa_psset_remove(s, ps);
	bits_clear(ps->active, first, n);
	lfr_grew(ps, first, n);
	bits_set(ps->dirty, first, dirty);
	if (dirty < n && os_purge_zeroes())
		bits_clear(ps->touched, first + dirty, n - dirty);
	ps->nactive -= (uint32_t)n;
	ps->ndirty += (uint32_t)dirty;
	arena->stats.hpa_nactive -= n;
	arena->stats.hpa_ndirty += dirty;
	psset_insert_known(s, ps);
	ps_sparse_check(s, ps);
	freed_pages(arena, s, now);
}

/* ---- the small extent cache ---- */

/* The thread's shard, 1-based (0: none picked yet): threads take the
 * shards in turn, as jemalloc gives each thread one for good. */
static __thread uint8_t sec_shard_tls __attribute__((tls_model(
    "initial-exec")));
static _Atomic unsigned sec_next_shard;

static bool sec_on(void) {
	return opt_hpa_sec_nshards != 0;
}

/* The largest run cached: whole pages, no more than a pageslab run. */
static size_t sec_max_pages(void) {
	size_t m = opt_hpa_sec_max_alloc < opt_hpa_slab_max_alloc ?
	    opt_hpa_sec_max_alloc : opt_hpa_slab_max_alloc;
	if (m > HUGEPAGE)
		m = HUGEPAGE;
	return m >> LG_PAGE;
}

/* The calling thread's shard, made with the arena's first use of the
 * cache; NULL out of metadata (the cache is then bypassed). */
static hpa_sec_shard_t *sec_shard(hpa_shard_t *s) {
	if (s->sec == NULL) {
		size_t nshards = opt_hpa_sec_nshards > 255 ? 255 :
		    opt_hpa_sec_nshards;
		size_t npages = sec_max_pages();
		hpa_sec_shard_t *sh = base_alloc(nshards * sizeof(*sh));
		extent_t **bins = base_alloc(nshards * npages *
		    sizeof(*bins));
		if (sh == NULL || bins == NULL || npages == 0)
			return NULL;
		for (size_t i = 0; i < nshards; i++) {
			sh[i].bins = bins + i * npages;
			sh[i].bytes = 0;
			sh[i].flush_next = 0;
		}
		s->sec_npages = npages;
		s->sec_nshards = (unsigned)nshards;
		s->sec = sh;
	}
	unsigned k = sec_shard_tls;
	if (k == 0) {
		k = atomic_fetch_add_explicit(&sec_next_shard, 1,
		    memory_order_relaxed) % 255 + 1;
		sec_shard_tls = (uint8_t)k;
	}
	return &s->sec[(k - 1) % s->sec_nshards];
}

/* Give a cached record's run back to its pageslab, and the record to
 * base.c. */
static void sec_release(arena_t *arena, hpa_shard_t *s, extent_t *e,
    uint64_t now) {
	ps_dalloc(arena, s, e, now);
	base_extent_free(e);
}

/* Empty whole bins, from where the last flush stopped, until the shard
 * holds no more than `keep` bytes (jemalloc's flush). */
static void sec_flush_shard(arena_t *arena, hpa_shard_t *s,
    hpa_sec_shard_t *sh, size_t keep, uint64_t now) {
	while (sh->bytes > keep) {
		size_t b = sh->flush_next;
		sh->flush_next = (b + 1) % s->sec_npages;
		for (extent_t *e = sh->bins[b], *n; e != NULL; e = n) {
			n = e->next;
			sh->bytes -= e->size;
			s->sec_bytes -= e->size;
			sec_release(arena, s, e, now);
		}
		sh->bins[b] = NULL;
	}
}

void hpa_sec_flush_locked(arena_t *arena) {
	hpa_shard_t *s = arena->hpa;
	if (s == NULL || s->sec == NULL)
		return;
	uint64_t now = os_now_ns();
	for (unsigned i = 0; i < s->sec_nshards; i++)
		sec_flush_shard(arena, s, &s->sec[i], 0, now);
}

/* A cached run of n pages from the shard, or NULL. */
static extent_t *sec_take(hpa_sec_shard_t *sh, hpa_shard_t *s, size_t n) {
	extent_t *e = sh->bins[n - 1];
	if (e == NULL)
		return NULL;
	sh->bins[n - 1] = e->next;
	sh->bytes -= e->size;
	s->sec_bytes -= e->size;
	return e;
}

static void sec_put(hpa_sec_shard_t *sh, hpa_shard_t *s, extent_t *e) {
	size_t n = e->size >> LG_PAGE;
	e->prev = NULL;
	e->next = sh->bins[n - 1];
	sh->bins[n - 1] = e;
	sh->bytes += e->size;
	s->sec_bytes += e->size;
}

/* A cached record handed out again: as ps_alloc leaves a new one; the
 * whole run may hold old data. */
static void sec_reuse(arena_t *arena, extent_t *e, size_t *dirty_off,
    size_t *dirty_len) {
	char *addr = e->addr;
	size_t size = e->size;
	hpa_ps_t *ps = e->hpa_ps;
	memset(e, 0, sizeof(*e));
	e->addr = addr;
	e->size = size;
	e->arena = arena;
	e->kind = EXTENT_LARGE;
	e->map_addr = ps->addr;
	e->map_size = HUGEPAGE;
	e->hpa_ps = ps;
	*dirty_off = 0;
	*dirty_len = size;
}

extent_t *hpa_alloc_locked(arena_t *arena, size_t size, size_t *dirty_off,
    size_t *dirty_len) {
	mp_assert(size % PAGE == 0 && size > 0 && size <= HUGEPAGE);
	hpa_shard_t *s = arena->hpa;
	if (s == NULL) {
		s = base_alloc(sizeof(*s));
		if (s == NULL)
			return NULL;
		arena->hpa = s;
	}
	size_t n = size >> LG_PAGE;
	hpa_sec_shard_t *sh = sec_on() && n <= sec_max_pages() ?
	    sec_shard(s) : NULL;
	extent_t *e = sh != NULL ? sec_take(sh, s, n) : NULL;
	if (e != NULL) {
		sec_reuse(arena, e, dirty_off, dirty_len);
		pagemap_set_bounds(e);
		return e;
	}
	e = base_extent_alloc();
	if (e == NULL)
		return NULL;
	if (!ps_alloc(arena, s, e, size, dirty_off, dirty_len)) {
		base_extent_free(e);
		return NULL;
	}
	pagemap_set_bounds(e);
	/* A miss fills the bin with batch_fill_extra more runs, as far as
	 * the shard's bound allows. */
	for (size_t k = 0; sh != NULL && k < opt_hpa_sec_batch_fill_extra &&
	    sh->bytes + size <= opt_hpa_sec_max_bytes; k++) {
		extent_t *x = base_extent_alloc();
		size_t off, len;
		if (x == NULL)
			break;
		if (!ps_alloc(arena, s, x, size, &off, &len)) {
			base_extent_free(x);
			break;
		}
		sec_put(sh, s, x);
	}
	return e;
}

/* Clear the page map's entries of e: no lookup reaches a record that
 * the cache holds or that is gone. */
static void pagemap_clear(extent_t *e) {
	/* A slab's every page maps to it, a large block's two ends. */
	if (e->kind == EXTENT_SLAB) {
		pagemap_set_range(e->addr, e->size, NULL);
	} else {
		pagemap_set_page(e->addr, NULL);
		pagemap_set_page(e->addr + e->size - PAGE, NULL);
	}
}

bool hpa_dalloc_locked(arena_t *arena, extent_t *e, uint64_t now) {
	hpa_shard_t *s = arena->hpa;
	size_t n = e->size >> LG_PAGE;
	pagemap_clear(e);
	hpa_sec_shard_t *sh = sec_on() && n <= sec_max_pages() ?
	    sec_shard(s) : NULL;
	if (sh != NULL) {
		/* A purged tail (clean_from) is dirty again once reused:
		 * the record forgets it. */
		e->clean_from = 0;
		sec_put(sh, s, e);
		if (sh->bytes > opt_hpa_sec_max_bytes)
			sec_flush_shard(arena, s, sh,
			    opt_hpa_sec_bytes_after_flush, now);
		return true;
	}
	ps_dalloc(arena, s, e, now);
	e->hpa_ps = NULL;
	return false;
}

bool hpa_expand_locked(arena_t *arena, extent_t *e, size_t new_size,
    bool *zeroed_tail) {
	hpa_shard_t *s = arena->hpa;
	hpa_ps_t *ps = e->hpa_ps;
	size_t first = (size_t)(e->addr - ps->addr) >> LG_PAGE;
	size_t n = e->size >> LG_PAGE, m = (new_size - e->size) >> LG_PAGE;
	if (first + n + m > HPA_NPAGES)
		return true;
	size_t run = bit_find(ps->active, first + n, true) - (first + n);
	if (run < m)
		return true;
	bool touched = bits_count(ps->touched, first + n, m) != 0;
	size_t ndirty = bits_count(ps->dirty, first + n, m);
	hpa_psset_remove(s, ps);
	bits_clear(ps->dirty, first + n, m);
	bits_set(ps->active, first + n, m);
	bits_set(ps->touched, first + n, m);
	ps->nactive += (uint32_t)m;
	ps->ndirty -= (uint32_t)ndirty;
	arena->stats.hpa_nactive += m;
	arena->stats.hpa_ndirty -= ndirty;
	if (run == ps->lfr)
		ps->lfr = ps_longest_free(ps);
	psset_insert_known(s, ps);
	*zeroed_tail = !touched;
	pagemap_set_page(e->addr + e->size - PAGE, NULL);
	e->size = new_size;
	pagemap_set_bounds(e);
	ps_dense_check(arena, s, ps);
	return false;
}

bool hpa_shrink_locked(arena_t *arena, extent_t *e, size_t new_size) {
	hpa_shard_t *s = arena->hpa;
	hpa_ps_t *ps = e->hpa_ps;
	size_t first = (size_t)(e->addr - ps->addr) >> LG_PAGE;
	size_t keep = new_size >> LG_PAGE, cut = (e->size - new_size) >> LG_PAGE;
	pagemap_set_range(e->addr + new_size, e->size - new_size, NULL);
	e->size = new_size;
	pagemap_set_bounds(e);
	hpa_psset_remove(s, ps);
	bits_clear(ps->active, first + keep, cut);
	lfr_grew(ps, first + keep, cut);
	bits_set(ps->dirty, first + keep, cut);
	ps->nactive -= (uint32_t)cut;
	ps->ndirty += (uint32_t)cut;
	arena->stats.hpa_nactive -= cut;
	arena->stats.hpa_ndirty += cut;
	psset_insert_known(s, ps);
	ps_sparse_check(s, ps);
	freed_pages(arena, s, os_now_ns());
	return false;
}

size_t hpa_decay_locked(arena_t *arena, uint64_t now, bool force) {
	hpa_shard_t *s = arena->hpa;
	if (s == NULL || (!force && deferred()))
		return 0;
	/* A forced pass (arena.<i>.purge, malloc_trim, destroy) empties
	 * the small extent cache first, as jemalloc's does. */
	if (force)
		hpa_sec_flush_locked(arena);
	hugify_due(arena, s, now);
	return purge_pass(arena, s, now, force);
}

uint64_t hpa_deferred_work_locked(arena_t *arena, uint64_t now) {
	hpa_shard_t *s = arena->hpa;
	if (s == NULL)
		return UINT64_MAX;
	hugify_due(arena, s, now);
	purge_pass(arena, s, now, false);
	uint64_t next = purge_next_ns(arena, s, now);
	if (s->npending != 0 && s->hugify_next_ns < next)
		next = s->hugify_next_ns;
	return next;
}

void hpa_destroy_locked(arena_t *arena) {
	hpa_shard_t *s = arena->hpa;
	if (s == NULL)
		return;
	hpa_sec_flush_locked(arena);
	purge_pass(arena, s, os_now_ns(), true);
	for (hpa_ps_t *ps = s->all, *n; ps != NULL; ps = n) {
		n = ps->all_next;
		if (ps->nactive == 0)
			ps_unmap(arena, s, ps);
	}
}

void hpa_stats_locked(arena_t *arena, arena_stats_t *out) {
	const arena_stats_t *st = &arena->stats;
	if (arena->hpa != NULL)
		out->hpa_sec_bytes = arena->hpa->sec_bytes;
	out->pdirty += st->hpa_ndirty;
	out->retained += (st->hpa_npageslabs * HPA_NPAGES - st->hpa_nactive -
	    st->hpa_ndirty) << LG_PAGE;
}

/* ---- options ---- */

MP_WARM bool hpa_fxp_parse(const char *v, size_t vlen, uint32_t *out) {
	size_t i = 0;
	uint64_t whole = 0, num = 0, den = 1;
	if (vlen == 0 || v[0] < '0' || v[0] > '9')
		return true;
	for (; i < vlen && v[i] >= '0' && v[i] <= '9'; i++) {
		whole = whole * 10 + (uint64_t)(v[i] - '0');
		if (whole >= 65536)
			return true;
	}
	if (i < vlen) {
		if (v[i] != '.' || i + 1 == vlen)
			return true;
		for (i++; i < vlen; i++) {
			if (v[i] < '0' || v[i] > '9')
				return true;
			/* Digits past the ninth are below the 16 bits. */
			if (den < 1000000000u) {
				num = num * 10 + (uint64_t)(v[i] - '0');
				den *= 10;
			}
		}
	}
	*out = (uint32_t)((whole << 16) + (num << 16) / den);
	return false;
}
