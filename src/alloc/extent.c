/*
 * extent.c: page runs inside an arena.  Free extents sit in three sets by
 * state (dirty: resident; muzzy: MADV_FREE'd; clean: purged or never used,
 * reads as zero), bucketed by page-count class.  Allocation carves from the
 * smallest fitting bucket, preferring dirty pages (no page faults), then
 * muzzy, then clean, then a new mapping; for a zeroed large block (and
 * any of 4 MiB or more: arena.c asks for the cap), a dirty extent too
 * small may be completed with the clean pages beside it (mixed_scan),
 * pages that would be faulted in take the oldest dirty pages' page
 * tables (move_dirty), and dirty pages past the arena's resident cap are
 * purged (resident_cap).  Freeing coalesces
 * with free neighbours of the same state found through the page map.
 * Decay purges what has stayed dirty longer than dirty_decay_ms, and a
 * free dirty run of oversize_threshold bytes or more is purged at once.
 * New mappings get opt.thp's advice.
 * Everything here runs under arena->mtx.
 *
 * An arena with extent hooks of its own (arena.<i>.extent_hooks) gets
 * and gives back its pages through them instead of os.c: mapping, the
 * return of whole free extents (dalloc, else decommit, else purge),
 * purges, and every split and merge of its extents ask the hooks first;
 * the default hooks are os.c's calls, and an arena that has them takes
 * the direct path (doc/design.md, "Extent hooks").
 *
 * With opt.hpa, an automatic arena's small unguarded runs come from
 * hpa.c's pageslabs instead (extent_alloc_hpa_locked, called by arena.c);
 * an extent whose hpa_ps is set is sent there when freed or resized, and
 * decay passes purge the pageslabs too.
 *
 * Invariants: a free extent is maximal (no free neighbour of the same state
 * in the same mapping); extents never span two OS mappings, so a whole
 * mapping can be unmapped when retain is off.
 */
#include "malloc_prof/internal/internal.h"

#define GROW_MIN ((size_t)2 << 20)
#define GROW_MAX ((size_t)64 << 20)
/* Resident pages allowed past an arena's peak in use, as a fraction of
 * that peak and at least (pages) RESIDENT_SLACK_MIN: see resident_cap. */
#define RESIDENT_SLACK_DIV 32
#define RESIDENT_SLACK_MIN (((size_t)8 << 20) >> LG_PAGE)

/* Large and free extents name this as owner: it is no thread's cache, so
 * no extent the page map reaches has a NULL owner. */
tcache_t extent_large_owner;

/* oversize_threshold in effect (set by arena_boot; SIZE_MAX: off), the
 * huge arena's index (0: none; the automatic arenas are below it) and
 * its pages in use (set by arena.c under its lock). */
size_t extent_oversize = SIZE_MAX;
unsigned extent_huge_ind;
_Atomic size_t extent_huge_used;

/* Give a record back to base.c's pool, with kind and owner in a state no
 * fast path accepts: a stale page-map hit on a recycled record must never
 * look like a live slab. */
static void extent_record_free(extent_t *e) {
	atomic_store_explicit(&e->owner, &extent_large_owner,
	    memory_order_relaxed);
	e->kind = EXTENT_FREE_CLEAN;
	base_extent_free(e);
}

/* opt.dss: each arena's dss mode when made (arena.<i>.dss changes it). */
unsigned opt_dss = DSS_DISABLED;
const char *const dss_mode_names[DSS_NMODES] = {
	"disabled", "primary", "secondary",
};
/* The mode of arenas made from now on (arena.<MALLCTL_ARENAS_ALL>.dss);
 * opt.dss until changed. */
_Atomic unsigned arena_dss_default = DSS_DISABLED;
/* arena.<i>.dss of each arena index: the default alloc hook knows its
 * arena by index only, and extent.c looks no arena up (arena.c uses this
 * file, not the reverse). */
static _Atomic uint8_t extent_dss_modes[ARENAS_MAX];

unsigned extent_dss_get(unsigned ind) {
	if (ind >= ARENAS_MAX)
		return arena_dss_default;
	return atomic_load_explicit(&extent_dss_modes[ind],
	    memory_order_relaxed);
}

/* Stored only when it changes: arena 0's default, stored at boot, made
 * the page resident in every process. */
void extent_dss_set(unsigned ind, unsigned mode) {
	if (ind < ARENAS_MAX && atomic_load_explicit(&extent_dss_modes[ind],
	    memory_order_relaxed) != (uint8_t)mode)
		atomic_store_explicit(&extent_dss_modes[ind], (uint8_t)mode,
		    memory_order_relaxed);
}

/* ---- extent hooks ---- */

/* The default hooks: what the arenas do without hooks, callable by a
 * user who wraps them.  opt.dss / arena.<i>.dss pick sbrk before or
 * after mmap; pages from the break are never unmapped. */
static void *hook_alloc_default(extent_hooks_t *h, void *new_addr,
    size_t size, size_t align, bool *zero, bool *commit, unsigned ind) {
	(void)h;
	if (size == 0 || size % PAGE != 0 || align == 0 ||
	    (align & (align - 1)) != 0 || (uintptr_t)new_addr % PAGE != 0)
		return NULL;
	if (align < PAGE)
		align = PAGE;
	unsigned dss = extent_dss_get(ind);
	void *p = NULL;
	if (new_addr != NULL) {
		if ((uintptr_t)new_addr % align == 0)
			p = os_map_at(new_addr, size);
	} else {
		if (dss == DSS_PRIMARY)
			p = os_dss_alloc(size, align);
		if (p == NULL)
			p = os_map(size, align);
		if (p == NULL && dss == DSS_SECONDARY)
			p = os_dss_alloc(size, align);
	}
	if (p == NULL)
		return NULL;
	if (!os_in_dss(p))
		os_thp_apply(p, size, (os_thp_t)opt_thp);
	*zero = true;
	*commit = true;
	return p;
}

/* With retain (the default) pages are kept, as jemalloc's default
 * dalloc keeps them: "true" asks the arena to purge and retain them. */
static bool hook_dalloc_default(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h; (void)committed; (void)ind;
	if (opt_retain || os_in_dss(addr))
		return true;
	os_unmap(addr, size);
	return false;
}

static void hook_destroy_default(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	(void)h; (void)committed; (void)ind;
	if (!os_in_dss(addr))
		os_unmap(addr, size);
}

static bool hook_commit_default(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	(void)h; (void)size; (void)ind;
	return os_commit((char *)addr + off, len);
}

static bool hook_decommit_default(extent_hooks_t *h, void *addr,
    size_t size, size_t off, size_t len, unsigned ind) {
	(void)h; (void)size; (void)ind;
	return os_decommit((char *)addr + off, len);
}

static bool hook_purge_lazy_default(extent_hooks_t *h, void *addr,
    size_t size, size_t off, size_t len, unsigned ind) {
	(void)h; (void)size; (void)ind;
	return os_purge_lazy((char *)addr + off, len);
}

static bool hook_purge_forced_default(extent_hooks_t *h, void *addr,
    size_t size, size_t off, size_t len, unsigned ind) {
	(void)h; (void)size; (void)ind;
	return os_purge_forced((char *)addr + off, len);
}

/* Linux mappings split and coalesce freely. */
static bool hook_split_default(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	(void)h; (void)addr; (void)size; (void)size_a; (void)size_b;
	(void)committed; (void)ind;
	return false;
}

static bool hook_merge_default(extent_hooks_t *h, void *addr_a,
    size_t size_a, void *addr_b, size_t size_b, bool committed,
    unsigned ind) {
	(void)h; (void)size_a; (void)size_b; (void)committed; (void)ind;
	/* jemalloc's rule: the break and mmap'd pages never merge. */
	return os_in_dss(addr_a) != os_in_dss(addr_b);
}

extent_hooks_t extent_hooks_default = {
	hook_alloc_default,
	hook_dalloc_default,
	hook_destroy_default,
	hook_commit_default,
	hook_decommit_default,
	hook_purge_lazy_default,
	hook_purge_forced_default,
	hook_split_default,
	hook_merge_default,
};

static extent_hooks_t *hooks_of(arena_t *arena) {
	return atomic_load_explicit(&arena->hooks, memory_order_relaxed);
}

/* Drop a free extent's bounds from the page map and its record: its
 * pages are no longer the arena's. */
static void extent_forget(arena_t *arena, extent_t *e) {
	pagemap_set_page(e->addr, NULL);
	pagemap_set_page(e->addr + e->size - PAGE, NULL);
	arena->stats.mapped -= e->size;
	extent_record_free(e);
}

/* Give back pages the arena no longer wants: dalloc, else destroy (the
 * arena could not keep them: out of metadata). */
static void hook_give_back(arena_t *arena, void *addr, size_t size,
    bool committed) {
	extent_hooks_t *h = hooks_of(arena);
	if (h->dalloc != NULL && !h->dalloc(h, addr, size, committed,
	    arena->ind))
		return;
	if (h->destroy != NULL)
		h->destroy(h, addr, size, committed, arena->ind);
}

/* true: the hooks refuse to split e at `lead` bytes / to merge a and b
 * (the arena then keeps them as they are).  Out of line: the arenas with
 * the default hooks only pay the test before the call. */
static MP_COLD bool split_refused_hooked(const extent_t *e, size_t lead) {
	arena_t *arena = e->arena;
	extent_hooks_t *h = hooks_of(arena);
	return h->split == NULL || h->split(h, e->addr, e->size, lead,
	    e->size - lead, !e->decommitted, arena->ind);
}

static MP_COLD bool merge_refused_hooked(const extent_t *a,
    const extent_t *b) {
	arena_t *arena = a->arena;
	extent_hooks_t *h = hooks_of(arena);
	return h->merge == NULL || h->merge(h, a->addr, a->size, b->addr,
	    b->size, !a->decommitted, arena->ind);
}

static inline bool merge_refused(const extent_t *a, const extent_t *b) {
	return unlikely(extent_hooks_custom(a->arena)) &&
	    merge_refused_hooked(a, b);
}

/* Recommit a decommitted extent before its pages are used again (they
 * read as zero after).  true: the hook failed. */
static bool extent_commit(arena_t *arena, extent_t *e) {
	if (!e->decommitted)
		return false;
	extent_hooks_t *h = hooks_of(arena);
	if (h->commit == NULL || h->commit(h, e->addr, e->size, 0, e->size,
	    arena->ind))
		return true;
	e->decommitted = false;
	e->zeroed = true;
	return false;
}

void extent_set_init(extent_set_t *set) {
	memset(set, 0, sizeof(*set));
}

/* Link e after `after` in the set's decay list (NULL: at the head). */
static void lru_link(extent_set_t *set, extent_t *e, extent_t *after) {
	e->lru_prev = after;
	e->lru_next = after != NULL ? after->lru_next : set->lru_head;
	if (e->lru_next != NULL)
		e->lru_next->lru_prev = e;
	else
		set->lru_tail = e;
	if (after != NULL)
		after->lru_next = e;
	else
		set->lru_head = e;
}

/*
 * Insert e in its size bucket and in the decay list after `after`, which
 * the caller knows to be the right place (a split remainder or a merge
 * result takes the place of the piece whose free time it kept).  The
 * decay list is ordered by free_ns, oldest first, so decay can stop at
 * the first extent not yet due.
 */
static void set_insert_after(extent_set_t *set, extent_t *e,
    extent_t *after) {
	unsigned ind = sz_psz_floor(e->size >> LG_PAGE);
	e->prev = NULL;
	e->next = set->heads[ind];
	if (e->next != NULL)
		e->next->prev = e;
	set->heads[ind] = e;
	set->nonempty[ind / 64] |= (uint64_t)1 << (ind % 64);
	set->npages += e->size >> LG_PAGE;
	lru_link(set, e, after);
}

/* Insert e where its free time belongs: at the tail for what was freed
 * now, the common case; older times walk back.  Callers that know the
 * place use set_insert_after: walking back from the tail over a long
 * list on every split or merge cost logsizes 4% of its time. */
static void set_insert(extent_set_t *set, extent_t *e) {
	extent_t *after = set->lru_tail;
	while (after != NULL && after->free_ns > e->free_ns)
		after = after->lru_prev;
	set_insert_after(set, e, after);
}

static void set_remove(extent_set_t *set, extent_t *e) {
	unsigned ind = sz_psz_floor(e->size >> LG_PAGE);
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		set->heads[ind] = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	if (set->heads[ind] == NULL)
		set->nonempty[ind / 64] &= ~((uint64_t)1 << (ind % 64));
	set->npages -= e->size >> LG_PAGE;
	if (e->lru_prev != NULL)
		e->lru_prev->lru_next = e->lru_next;
	else
		set->lru_head = e->lru_next;
	if (e->lru_next != NULL)
		e->lru_next->lru_prev = e->lru_prev;
	else
		set->lru_tail = e->lru_prev;
}

static bool fits(const extent_t *e, size_t size, size_t align) {
	uintptr_t start = ALIGNMENT_CEILING((uintptr_t)e->addr, align);
	return start + size <= (uintptr_t)e->addr + e->size &&
	    start >= (uintptr_t)e->addr;
}

/* opt.lg_extent_max_active_fit (jemalloc's rule): a dirty extent more than
 * 2^N times the request is not split for it, so that small requests do not
 * scatter over a big run of resident pages that a big request could reuse
 * whole; they take other pages and the big run decays.  Clean and muzzy
 * extents have no limit, as in jemalloc. */
size_t opt_lg_extent_max_active_fit = 6;

/* Smallest bucket whose every member fits; else a bounded scan of the
 * bucket just below it, whose members may or may not fit.  lg_max: the
 * largest log2 ratio of the extent to the request (64: any). */
static extent_t *set_fit(extent_set_t *set, size_t size, size_t align,
    size_t lg_max) {
	size_t worst = size + align - PAGE;
	unsigned ind = sz_psz_ceil(worst >> LG_PAGE);
	for (unsigned w = ind / 64; w < (EXTENT_NPSIZES + 63) / 64; w++) {
		uint64_t bits = set->nonempty[w];
		if (w == ind / 64)
			bits &= ~(uint64_t)0 << (ind % 64);
		if (bits != 0) {
			extent_t *e = set->heads[w * 64 + __builtin_ctzll(bits)];
			/* Buckets above hold bigger extents still. */
			if (lg_max < 63 && (e->size >> lg_max) > worst)
				return NULL;
			return e;
		}
	}
	if (ind > 0) {
		unsigned n = 0;
		for (extent_t *e = set->heads[ind - 1]; e != NULL && n < 32;
		    e = e->next, n++) {
			if (fits(e, size, align))
				return e;
		}
	}
	return NULL;
}

/* Split e at `lead` bytes: e keeps [addr, addr+lead), the result holds the
 * rest.  Both get their bounds in the page map.  NULL if out of metadata. */
static extent_t *split(extent_t *e, size_t lead) {
	extent_t *trail = base_extent_alloc();
	if (trail == NULL)
		return NULL;
	if (unlikely(extent_hooks_custom(e->arena)) &&
	    split_refused_hooked(e, lead)) {
		base_extent_free(trail);
		return NULL;
	}
	atomic_store_explicit(&trail->owner, &extent_large_owner,
	    memory_order_relaxed);
	trail->addr = e->addr + lead;
	trail->size = e->size - lead;
	trail->arena = e->arena;
	trail->kind = e->kind;
	trail->map_addr = e->map_addr;
	trail->map_size = e->map_size;
	trail->zeroed = e->zeroed;
	trail->decommitted = e->decommitted;
	trail->free_ns = e->free_ns;
	e->size = lead;
	/* A free extent's first page maps to it already, untagged: only
	 * the new bounds are written (3 pages rather than 4, in every trim
	 * of a free extent).  A block in use (a shrink, a freed block's
	 * clean tail) has its first page rewritten, untagged, as before. */
	if (e->kind >= EXTENT_NFREE_KINDS)
		pagemap_set_page(e->addr, e);
	mp_assert(pagemap_lookup_entry(e->addr) == (uintptr_t)e);
	if (lead > PAGE)
		pagemap_set_page(e->addr + lead - PAGE, e);
	pagemap_set_bounds(trail);
	return trail;
}

/* The extent whose bound page p is, NULL if none or if its entry has a
 * class tag: a slab's page or a large block's first page, in use, which
 * mergeable would refuse after reading its record (a line of its own,
 * which nothing else on the free path reads: bench's midsize, whose heap
 * is mostly live, read one at most of its arena frees). */
static extent_t *neighbour_lookup(const void *p) {
	uintptr_t entry = pagemap_lookup_entry(p);
	return (entry & PAGEMAP_TAG_MASK) != 0 ? NULL :
	    pagemap_entry_extent(entry);
}

static bool mergeable(const extent_t *a, const extent_t *b) {
	return a != NULL && b != NULL && a->kind == b->kind &&
	    a->kind < EXTENT_NFREE_KINDS && a->arena == b->arena &&
	    a->map_addr == b->map_addr && a->addr + a->size == b->addr &&
	    a->decommitted == b->decommitted;
}

/* Merge b (right) into a (left); b's record is freed. */
static void merge(extent_t *a, extent_t *b) {
	/* a is free (mergeable): its first page maps to it, untagged, and
	 * stays; the two inner bounds are cleared, b's last page is a's. */
	mp_assert(pagemap_lookup_entry(a->addr) == (uintptr_t)a);
	if (a->size > PAGE)
		pagemap_set_page(a->addr + a->size - PAGE, NULL);
	if (b->size > PAGE)
		pagemap_set_page(b->addr, NULL);
	a->size += b->size;
	a->zeroed = a->zeroed && b->zeroed;
	if (b->free_ns < a->free_ns)
		a->free_ns = b->free_ns;
	pagemap_set_page(a->addr + a->size - PAGE, a);
	extent_record_free(b);
}

/*
 * Put a free extent (kind already set) in its set, merging neighbours.
 * The merged extent keeps the oldest free time of its pieces (merge), so
 * it takes the decay-list place of the oldest piece already in the set.
 */
static extent_t *insert_coalesce(arena_t *arena, extent_t *e) {
	extent_set_t *set = &arena->sets[e->kind];
	extent_t *place = NULL;          /* decay-list predecessor to use */
	bool have_place = false;
	uint64_t oldest = e->free_ns;
	if (e->addr != e->map_addr) {
		extent_t *prev = neighbour_lookup(e->addr - 1);
		if (mergeable(prev, e) && !merge_refused(prev, e)) {
			if (prev->free_ns <= oldest) {
				oldest = prev->free_ns;
				place = prev->lru_prev;
				have_place = true;
			}
			set_remove(set, prev);
			merge(prev, e);
			e = prev;
		}
	}
	if (e->addr + e->size != e->map_addr + e->map_size) {
		extent_t *next = neighbour_lookup(e->addr + e->size);
		if (mergeable(e, next) && !merge_refused(e, next)) {
			if (have_place && place == next)
				place = next->lru_prev;
			if (next->free_ns <= oldest) {
				place = next->lru_prev;
				have_place = true;
			}
			set_remove(set, next);
			merge(e, next);
		}
	}
	if (have_place)
		set_insert_after(set, e, place);
	else
		set_insert(set, e);
	return e;
}

/* ---- huge pages for big, reused heaps (opt.thp_heap_min) ---- */

/*
 * Under thp:default on a kernel whose THP mode is madvise, nothing gets
 * huge pages unless advised.  A big heap that is reused gains from them
 * (fewer TLB misses: bench's reallocgrow 0.84 x the CPU, logsizes 0.88;
 * midsize 0.92 at scale 1 but 1.06-1.11 at half scale, on a VM whose
 * fresh huge pages were slow to fault), a small one only rounds its pages up to 2 MiB
 * (simple's peak RSS doubled under thp:always), and one whose pages are
 * purged and faulted again pays a 2 MiB fault each time.  With
 * opt.thp_heap_min set (0, off, by default: doc/performance.md, "Huge
 * pages where a heap is big"), an arena's mappings get MADV_HUGEPAGE once
 * it has had that many bytes in use, and the advice is taken back
 * (MADV_NOHUGEPAGE) for good once it purges repeatedly: THP_STRIKES
 * purge passes in a row, each after fewer pages allocated than its peak
 * in use (less than one turn of the heap between purges: counted in
 * pages, not time, so that a slow machine judges as a fast one).
 * Mappings grown for a request of THP_BIG_REQUEST or more are never
 * advised (frag's and largezero's big blocks: their peaks rose when they
 * were), nor the huge arena's, which purges at once.  Only the first
 * THP_MAPS mappings an arena grows are tracked (its first 700 MiB or so:
 * grow doubles them to 64 MiB); later ones are left alone.  With the
 * option at 0 the table below is never touched.
 */
#define THP_SIZE ((size_t)2 << 20)
#define THP_BIG_REQUEST ((size_t)256 << 10)
#define THP_MAPS 16
#define THP_STRIKES 4

enum {
	THP_WAIT = 0,   /* below opt.thp_heap_min (or not eligible) */
	THP_ON,         /* its tracked mappings are advised */
	THP_OFF,        /* advice taken back: it purges repeatedly */
};

/* Per arena index, under the arena's lock (extent.c looks no arena up,
 * and arena_t is shared with the other modules: a table of its own, as
 * extent_dss_modes).  Zero-filled: THP_WAIT, nothing tracked. */
typedef struct {
	uint8_t state;
	uint8_t strikes;
	uint8_t nmaps;
	size_t since;           /* pages allocated since the last purge */
	struct {
		char *addr;
		size_t size;
	} maps[THP_MAPS];
} thp_arena_t;

static thp_arena_t thp_arenas[ARENAS_MAX];

/* Whether the automatic advice applies to this arena at all. */
static bool thp_auto(const arena_t *arena) {
	return opt_thp_heap_min != 0 && opt_thp == OS_THP_DEFAULT &&
	    os_thp_system() == OS_THP_DEFAULT &&
	    (extent_huge_ind == 0 || arena->ind != extent_huge_ind);
}

/* A mapping just grown that may be advised: tracked, and advised at
 * once when the arena is past the threshold (not after the advice was
 * taken back). */
static void thp_track(arena_t *arena, char *addr, size_t size) {
	thp_arena_t *t = &thp_arenas[arena->ind];
	if (t->state == THP_OFF || t->nmaps == THP_MAPS)
		return;
	t->maps[t->nmaps].addr = addr;
	t->maps[t->nmaps].size = size;
	t->nmaps++;
	if (t->state == THP_ON)
		os_pages_huge(addr, size, true);
}

/* The arena reached a new peak in use: advise its mappings once it
 * passes opt.thp_heap_min. */
static void thp_check(arena_t *arena) {
	thp_arena_t *t = &thp_arenas[arena->ind];
	if ((arena->pused_peak << LG_PAGE) < opt_thp_heap_min ||
	    !thp_auto(arena) || t->state != THP_WAIT)
		return;
	t->state = THP_ON;
	t->strikes = 0;
	t->since = 0;
	for (unsigned i = 0; i < t->nmaps; i++)
		os_pages_huge(t->maps[i].addr, t->maps[i].size, true);
}

/* A purge pass (decay, the resident cap, a purge at free) that released
 * pages. */
static void thp_purged(arena_t *arena) {
	thp_arena_t *t = &thp_arenas[arena->ind];
	if (opt_thp_heap_min == 0 || t->state != THP_ON)
		return;
	t->strikes = t->since < arena->pused_peak ? t->strikes + 1 : 1;
	t->since = 0;
	if (t->strikes < THP_STRIKES)
		return;
	t->state = THP_OFF;
	for (unsigned i = 0; i < t->nmaps; i++)
		os_pages_huge(t->maps[i].addr, t->maps[i].size, false);
}

/* A tracked mapping unmapped (retain:false): its slot is free again. */
static void thp_untrack(arena_t *arena, const char *addr) {
	thp_arena_t *t = &thp_arenas[arena->ind];
	if (opt_thp_heap_min == 0)
		return;
	for (unsigned i = 0; i < t->nmaps; i++) {
		if (t->maps[i].addr == addr) {
			t->maps[i] = t->maps[--t->nmaps];
			return;
		}
	}
}

/* A new mapping through the arena's hooks (custom ones, or the defaults
 * when dss is on): `size` bytes aligned to `align`.  NULL if the hooks
 * cannot, or give memory that cannot be committed. */
static char *grow_hooked(arena_t *arena, size_t size, size_t align,
    bool *zeroed) {
	extent_hooks_t *h = hooks_of(arena);
	bool zero = false, commit = true;
	if (h->alloc == NULL)
		return NULL;
	char *addr = h->alloc(h, NULL, size, align, &zero, &commit,
	    arena->ind);
	if (addr == NULL)
		return NULL;
	if (!commit && (h->commit == NULL ||
	    h->commit(h, addr, size, 0, size, arena->ind))) {
		hook_give_back(arena, addr, size, false);
		return NULL;
	}
	*zeroed = zero;
	return addr;
}

/* A new mapping of at least size + alignment; with `exact` (the hooks
 * refused a split) of exactly `size` at `align`. */
static extent_t *grow(arena_t *arena, size_t size, size_t align,
    bool exact) {
	size_t want = size + (align > PAGE ? align - PAGE : 0);
	if (want < size)
		return NULL;
	/* A request bigger than the next chunk gets a chunk of the next
	 * doubling that holds it, not a mapping of its own size: extents of
	 * different mappings never coalesce, so big blocks each in a mapping
	 * of their own could not be combined when freed (bench's large, 1-32
	 * MiB blocks: peak RSS 1.49x jemalloc's).  Untouched pages cost
	 * only address space.  retain_grow_limit caps the chunks. */
	size_t limit = arena->grow_limit != 0 ? arena->grow_limit : GROW_MAX;
	size_t map_size = arena->grow_next;
	if (map_size > limit)
		map_size = limit;
	while (map_size < want && map_size < limit)
		map_size *= 2;
	if (map_size < want)
		map_size = want;
	bool hooked = extent_hooks_custom(arena) ||
	    extent_dss_get(arena->ind) != DSS_DISABLED;
	bool zeroed = true;
	char *addr;
	if (likely(!hooked)) {
		/* A mapping that may get huge pages starts on one: a kernel
		 * gives them only to whole aligned 2 MiB ranges. */
		bool track = size < THP_BIG_REQUEST && thp_auto(arena) &&
		    map_size % THP_SIZE == 0;
		addr = os_map(map_size, track ? THP_SIZE : PAGE);
		if (addr == NULL && map_size != want) {
			map_size = want;
			track = false;
			addr = os_map(map_size, PAGE);
		}
		if (addr == NULL)
			return NULL;
		/* opt.thp: the arenas' mappings are the user data (jemalloc
		 * advises what its default extent hooks map). */
		os_thp_apply(addr, map_size, (os_thp_t)opt_thp);
		if (track)
			thp_track(arena, addr, map_size);
	} else {
		/* The hooks get the alignment: with no split hook the
		 * result must need no trimming. */
		if (exact || hooks_of(arena)->split == NULL)
			map_size = size;
		else
			align = PAGE;
		addr = grow_hooked(arena, map_size, align, &zeroed);
		if (addr == NULL && map_size != size) {
			map_size = want;
			addr = grow_hooked(arena, map_size, PAGE, &zeroed);
		}
		if (addr == NULL)
			return NULL;
	}
	if (pagemap_prepare(addr, map_size)) {
		if (hooked)
			hook_give_back(arena, addr, map_size, true);
		else
			os_unmap(addr, map_size);
		return NULL;
	}
	extent_t *e = base_extent_alloc();
	if (e == NULL) {
		if (hooked)
			hook_give_back(arena, addr, map_size, true);
		else
			os_unmap(addr, map_size);
		return NULL;
	}
	atomic_store_explicit(&e->owner, &extent_large_owner,
	    memory_order_relaxed);
	e->addr = addr;
	e->size = map_size;
	e->arena = arena;
	e->kind = EXTENT_FREE_CLEAN;
	e->map_addr = addr;
	e->map_size = map_size;
	e->zeroed = zeroed;
	e->decommitted = false;
	e->free_ns = os_now_ns();
	pagemap_set_bounds(e);
	arena->stats.mapped += map_size;
	while (arena->grow_next <= map_size && arena->grow_next < limit)
		arena->grow_next *= 2;
	return e;
}

size_t extent_grow_limit(arena_t *arena) {
	return arena->grow_limit != 0 ? arena->grow_limit : GROW_MAX;
}

/*
 * Give the unused head and tail of a carved extent back to its set.  They
 * keep the extent's free time, so they go where it was in the decay list:
 * after *place, when the extent came from a set (have_place).
 */
static bool trim(arena_t *arena, extent_t *e, size_t size, size_t align,
    bool have_place, extent_t *place, extent_t **out) {
	extent_set_t *set = &arena->sets[e->kind];
	size_t lead = ALIGNMENT_CEILING((uintptr_t)e->addr, align) -
	    (uintptr_t)e->addr;
	if (lead != 0) {
		extent_t *rest = split(e, lead);
		if (rest == NULL) {
			*out = e;
			return true;
		}
		if (have_place)
			set_insert_after(set, e, place);
		else
			set_insert(set, e);
		e = rest;
	}
	if (e->size > size) {
		extent_t *tail = split(e, size);
		if (tail == NULL) {
			*out = e;
			return true;
		}
		if (have_place)
			set_insert_after(set, tail, place);
		else
			set_insert(set, tail);
	}
	*out = e;
	return false;
}

static extent_t *purge_one(arena_t *arena, extent_t *e, bool lazy);
static void resident_cap(arena_t *arena, size_t used);

void extent_resident_cap_locked(arena_t *arena, size_t used) {
	resident_cap(arena, used);
}

/*
 * Called before `used` bytes are faulted in because no dirty extent could
 * hold the request: if the arena's resident pages (in use and touched,
 * dirty, muzzy) would pass the most it ever had in use plus a slack,
 * purge dirty pages, oldest first, until they would not.  Without this
 * the free dirty runs that a run of bigger requests cannot use stay
 * resident until they decay while fresh pages are faulted in beside
 * them, and the peak RSS grows with the fragmentation rather than with
 * the program's peak (bench's largezero: 1.43x the live peak with decay
 * alone).  A purged page costs a fault when it is used again, so only
 * the excess goes, and a big extent only in part.
 */
static void resident_cap(arena_t *arena, size_t used) {
	size_t active = arena->stats.pactive - arena->ptail +
	    (used >> LG_PAGE);
	/* An automatic arena's big blocks live in the huge arena, which
	 * keeps no dirty pages: count them here, or the two arenas' peaks
	 * (reached at different times) and slacks would add up (the huge
	 * arena took large_rss's peak from 162 MiB to 179 for 152 live). */
	if (arena->ind < extent_huge_ind)
		active += atomic_load_explicit(&extent_huge_used,
		    memory_order_relaxed);
	size_t peak = arena->pused_peak > active ? arena->pused_peak
	    : active;
	size_t slack = peak / RESIDENT_SLACK_DIV;
	if (slack < RESIDENT_SLACK_MIN)
		slack = RESIDENT_SLACK_MIN;
	extent_set_t *dirty = &arena->sets[EXTENT_FREE_DIRTY];
	size_t resident = active + dirty->npages +
	    arena->sets[EXTENT_FREE_MUZZY].npages;
	if (resident <= peak + slack)
		return;
	size_t excess = resident - (peak + slack);
	if (dirty->lru_head != NULL)
		thp_purged(arena);
	while (excess > 0 && dirty->lru_head != NULL) {
		extent_t *e = dirty->lru_head;
		size_t pages = e->size >> LG_PAGE;
		if (pages > excess) {
			extent_t *place = e->lru_prev;
			set_remove(dirty, e);
			extent_t *tail = split(e, e->size -
			    (excess << LG_PAGE));
			set_insert_after(dirty, e, place);
			if (tail == NULL)
				break;
			set_insert_after(dirty, tail, e);
			e = tail;
			pages = excess;
		}
		purge_one(arena, e, false);
		excess -= pages;
	}
}

/* The clean free extent right before (after: false) or after e in its
 * mapping, else NULL. */
static extent_t *clean_neighbour(const extent_t *e, bool after) {
	extent_t *n;
	if (after) {
		if (e->addr + e->size == e->map_addr + e->map_size)
			return NULL;
		n = neighbour_lookup(e->addr + e->size);
	} else {
		if (e->addr == e->map_addr)
			return NULL;
		n = neighbour_lookup(e->addr - 1);
	}
	if (n == NULL || n->kind != EXTENT_FREE_CLEAN || !n->zeroed ||
	    n->decommitted ||
	    n->arena != e->arena || n->map_addr != e->map_addr)
		return NULL;
	return n;
}

/* Take `take` bytes of the clean extent n, next to e on side `after`,
 * into e (which is in no set).  False on success. */
static bool absorb(arena_t *arena, extent_t *e, extent_t *n, size_t take,
    bool after) {
	extent_set_t *set = &arena->sets[EXTENT_FREE_CLEAN];
	extent_t *place = n->lru_prev;
	set_remove(set, n);
	extent_t *piece = n;
	if (n->size > take) {
		extent_t *rest = split(n, after ? take : n->size - take);
		if (rest == NULL) {
			set_insert_after(set, n, place);
			return true;
		}
		if (after) {
			set_insert_after(set, rest, place);
		} else {
			set_insert_after(set, n, place);
			piece = rest;
		}
	}
	if (after) {
		pagemap_set_page(e->addr + e->size - PAGE, NULL);
		pagemap_set_page(piece->addr, NULL);
	} else {
		pagemap_set_page(piece->addr + piece->size - PAGE, NULL);
		pagemap_set_page(e->addr, NULL);
		e->addr = piece->addr;
	}
	e->size += piece->size;
	pagemap_set_bounds(e);
	extent_record_free(piece);
	return false;
}

#define MIXED_SCAN 32

/* What mixed_scan found. */
typedef struct {
	extent_t *tail;  /* smallest dirty extent >= used with clean pages
	                  * after it for the rest of size - used */
	extent_t *fit;   /* smallest one smaller than size, >= used, with
	                  * clean pages beside it for the rest of size */
	extent_t *part;  /* biggest one smaller than used, likewise */
} mixed_t;

/* Looks at most at MIXED_SCAN dirty extents, biggest first. */
static void mixed_scan(arena_t *arena, size_t size, size_t used,
    mixed_t *m) {
	extent_set_t *dirty = &arena->sets[EXTENT_FREE_DIRTY];
	unsigned seen = 0;
	m->tail = m->fit = m->part = NULL;
	for (int w = (EXTENT_NPSIZES + 63) / 64 - 1; w >= 0 &&
	    seen < MIXED_SCAN; w--) {
		uint64_t bits = dirty->nonempty[w];
		while (bits != 0 && seen < MIXED_SCAN) {
			unsigned b = 63 - (unsigned)__builtin_clzll(bits);
			bits &= ~((uint64_t)1 << b);
			for (extent_t *d = dirty->heads[w * 64 + b];
			    d != NULL && seen < MIXED_SCAN;
			    d = d->next, seen++) {
				extent_t *next = clean_neighbour(d, true);
				size_t after = next != NULL ? next->size : 0;
				if (d->size >= used && used < size &&
				    after >= size - used) {
					if (m->tail == NULL ||
					    d->size < m->tail->size)
						m->tail = d;
					continue;
				}
				if (d->size >= size)
					continue;
				extent_t *prev = clean_neighbour(d, false);
				if (d->size + after + (prev != NULL ?
				    prev->size : 0) < size)
					continue;
				if (d->size >= used) {
					if (m->fit == NULL ||
					    d->size < m->fit->size)
						m->fit = d;
				} else if (m->part == NULL ||
				    d->size > m->part->size) {
					m->part = d;
				}
			}
		}
	}
}

/*
 * Carve `size` bytes from the end of the dirty extent d (`used` bytes of
 * it) and the clean pages after it: the part the caller touches is
 * resident already and the tail is clean, so nothing is faulted in and
 * no dirty page is wasted on the tail; the rest of d stays dirty.
 */
static extent_t *mixed_take_tail(arena_t *arena, extent_t *d, size_t size,
    size_t used) {
	extent_set_t *set = &arena->sets[EXTENT_FREE_DIRTY];
	extent_t *place = d->lru_prev;
	set_remove(set, d);
	if (d->size > used) {
		extent_t *piece = split(d, d->size - used);
		set_insert_after(set, d, place);
		if (piece == NULL)
			return NULL;
		d = piece;
	}
	extent_t *next = clean_neighbour(d, true);
	if (next == NULL || absorb(arena, d, next, size - used, true)) {
		d->kind = EXTENT_FREE_DIRTY;
		insert_coalesce(arena, d);
		return NULL;
	}
	return d;
}

/*
 * Carve `size` bytes from the dirty extent d and the clean pages beside
 * it: the dirty pages are used (a memset of memory already resident)
 * and only the rest is faulted in.  Without this a block a little bigger
 * than every free dirty run takes all its pages fresh while the dirty
 * runs stay resident, unused.  The dirty part goes first where it can: a
 * program touches a block from its start.  The result's old data lies in
 * [*dirty_off, *dirty_off + *dirty_len).
 */
static extent_t *mixed_take(arena_t *arena, extent_t *d, size_t size,
    size_t *dirty_off, size_t *dirty_len) {
	set_remove(&arena->sets[EXTENT_FREE_DIRTY], d);
	size_t dsize = d->size, need = size - dsize;
	extent_t *next = clean_neighbour(d, true);
	if (next != NULL) {
		size_t take = next->size < need ? next->size : need;
		if (absorb(arena, d, next, take, true))
			goto fail;
		need -= take;
	}
	if (need != 0) {
		extent_t *prev = clean_neighbour(d, false);
		if (prev == NULL || absorb(arena, d, prev, need, false))
			goto fail;
	}
	*dirty_off = need;
	*dirty_len = dsize;
	return d;
fail:
	/* Some clean pages may have joined it: it is dirty as a whole, which
	 * only costs a memset. */
	d->kind = EXTENT_FREE_DIRTY;
	insert_coalesce(arena, d);
	return NULL;
}

/*
 * Moves of dirty pages into a block (move_dirty) take whole 2 MiB
 * granules at 2 MiB-aligned addresses: every mapping boundary a move
 * leaves (the kernel splits its areas at both ends of the source and of
 * the destination) then falls on the same lattice, so the areas a
 * long-running program accumulates are bounded by its mappings' size
 * over 2 MiB instead of growing with the number of moves; and the
 * kernel moves such granules a page-table page at a time.
 */
#define MOVE_GRAIN ((size_t)2 << 20)
#define MOVE_MAX 8                      /* moves per block */
/* No moves in an arena that maps more than this: the kernel's limit on
 * areas per process (vm.max_map_count, 65,530 by default) stays far
 * away, at most two areas per granule. */
#define MOVE_MAPPED_MAX ((size_t)16 << 30)

/* Set once the kernel refuses a move: from then on, purge and fault. */
static bool move_refused;

/*
 * Pages of a block (zeroed, or big) that would be faulted in, [from, to) of the
 * block at `base`: instead, while the cap purges old dirty pages
 * elsewhere, move the oldest dirty pages (their page tables: no copy, no
 * fault) into the range's whole granules, and the sources become clean.
 * A resident page costs a memset where a fault costs about a hundred
 * times as much (bench's largezero: 864,000 faults, 1.25 x tcmalloc's
 * time).  Returns the bytes moved, from *lo (an offset from base) on:
 * they hold old data.
 */
static size_t move_dirty(arena_t *arena, char *base, size_t from, size_t to,
    size_t *lo) {
	uintptr_t at = ALIGNMENT_CEILING((uintptr_t)base + from, MOVE_GRAIN);
	uintptr_t end = ((uintptr_t)base + to) & ~(MOVE_GRAIN - 1);
	*lo = at - (uintptr_t)base;
	if (move_refused || end <= at || arena->stats.mapped > MOVE_MAPPED_MAX)
		return 0;
	extent_set_t *dirty = &arena->sets[EXTENT_FREE_DIRTY];
	uintptr_t dst = at;
	unsigned moves = 0;
	extent_t *d = dirty->lru_head;
	while (d != NULL && dst < end && moves < MOVE_MAX) {
		extent_t *next = d->lru_next;
		uintptr_t a = ALIGNMENT_CEILING((uintptr_t)d->addr, MOVE_GRAIN);
		uintptr_t b = ((uintptr_t)d->addr + d->size) &
		    ~(MOVE_GRAIN - 1);
		if (b <= a) {
			d = next;
			continue;
		}
		size_t n = b - a < end - dst ? b - a : end - dst;
		/* Cut [a, a + n) out of d; the dirty pieces around it keep
		 * d's place in the decay list. */
		extent_t *place = d->lru_prev;
		set_remove(dirty, d);
		extent_t *mid = d;
		if (a > (uintptr_t)d->addr) {
			mid = split(d, a - (uintptr_t)d->addr);
			set_insert_after(dirty, d, place);
			if (mid == NULL)
				break;
			place = d;
		}
		if (mid->size > n) {
			extent_t *rest = split(mid, n);
			if (rest == NULL) {
				set_insert_after(dirty, mid, place);
				break;
			}
			set_insert_after(dirty, rest, place);
		}
		if (os_move_pages(mid->addr, (void *)dst, n)) {
			move_refused = true;
			set_insert_after(dirty, mid, place);
			break;
		}
		mid->kind = EXTENT_FREE_CLEAN;
		mid->zeroed = true;
		insert_coalesce(arena, mid);
		dst += n;
		moves++;
		d = next;
	}
	return dst - at;
}

/* Fill the pages of got's first `used` bytes that hold no old data
 * (outside [*dirty_off, + *dirty_len)) with moved dirty pages where
 * whole granules allow, and widen the old-data range over them: the gaps
 * it then spans are pages the program touches anyway. */
static void move_fill(arena_t *arena, extent_t *got, size_t used,
    size_t *dirty_off, size_t *dirty_len) {
	size_t dlo = *dirty_off, dhi = dlo + *dirty_len, lo, n;
	if (*dirty_len == 0) {
		n = move_dirty(arena, got->addr, 0, used, &lo);
		*dirty_off = n != 0 ? lo : 0;
		*dirty_len = n;
		return;
	}
	if (dhi < used && (n = move_dirty(arena, got->addr, dhi, used,
	    &lo)) != 0)
		dhi = lo + n;
	if (dlo > 0 && (n = move_dirty(arena, got->addr, 0, dlo, &lo)) != 0)
		dlo = lo;
	if (dhi > dlo) {
		*dirty_off = dlo;
		*dirty_len = dhi - dlo;
	}
}

/* opt.hpa: a run from a pageslab (hpa.c), its record owned as a large
 * or free extent's until a cache takes it: no extent the page map
 * reaches has a NULL owner. */
extent_t *extent_alloc_hpa_locked(arena_t *arena, size_t size,
    size_t *dirty_off, size_t *dirty_len) {
	extent_t *e = hpa_alloc_locked(arena, size, dirty_off, dirty_len);
	if (e != NULL)
		atomic_store_explicit(&e->owner, &extent_large_owner,
		    memory_order_relaxed);
	return e;
}

extent_t *extent_alloc_locked(arena_t *arena, size_t size, size_t used,
    bool cap, size_t align, size_t *dirty_off, size_t *dirty_len) {
	mp_assert(size % PAGE == 0 && size > 0);
	if (align < PAGE)
		align = PAGE;
	if (used > size)
		used = size;
	/* The resident cap and the mixed carving split and merge freely:
	 * not for pages the hooks own. */
	if (cap && extent_hooks_custom(arena))
		cap = false;
	extent_t *e = NULL, *place = NULL, *got = NULL;
	bool capped = false;
	mixed_t m;
	*dirty_off = 0;
	*dirty_len = size;
	/* Dirty pages for what will be touched, clean ones for the rest:
	 * no page faults and no resident pages wasted on the tail. */
	if (cap && align == PAGE && used < size) {
		mixed_scan(arena, size, used, &m);
		if (m.tail != NULL && (got = mixed_take_tail(arena, m.tail,
		    size, used)) != NULL) {
			*dirty_len = used;
			goto done;
		}
		if (m.fit != NULL && (got = mixed_take(arena, m.fit, size,
		    dirty_off, dirty_len)) != NULL)
			goto done;
	}
	size_t galign = align;
	for (unsigned kind = 0; kind < EXTENT_NFREE_KINDS && e == NULL;
	    kind++) {
		if (cap && kind == EXTENT_FREE_DIRTY + 1) {
			/* Pages will be faulted in.  A clean block that
			 * old dirty pages can move into is capped after the
			 * move (below): what moved is no longer dirty. */
			if (align == PAGE) {
				mixed_scan(arena, size, size, &m);
				if (m.part != NULL && (got = mixed_take(arena,
				    m.part, size, dirty_off,
				    dirty_len)) != NULL) {
					capped = true;
					goto done;
				}
			}
			capped = true;
			/* A block that starts on a granule can take moved
			 * pages from its first byte (move_dirty), when there
			 * are dirty pages to move: else the alignment would
			 * only cost address space. */
			if (!move_refused && align < MOVE_GRAIN &&
			    used >= 2 * MOVE_GRAIN &&
			    arena->sets[EXTENT_FREE_DIRTY].npages >=
			    (MOVE_GRAIN >> LG_PAGE))
				galign = MOVE_GRAIN;
		}
		/* lg_extent_max_active_fit keeps a big dirty extent whole
		 * while muzzy pages can serve the request; before pages are
		 * faulted in (clean or new ones), split it after all: no
		 * more faults nor resident pages than without the limit
		 * (jemalloc would fault them in). */
		if (kind == EXTENT_FREE_CLEAN &&
		    opt_lg_extent_max_active_fit < 63 &&
		    ((arena->sets[EXTENT_FREE_DIRTY].npages << LG_PAGE) >>
		    opt_lg_extent_max_active_fit) > size &&
		    (e = set_fit(&arena->sets[EXTENT_FREE_DIRTY], size, align,
		    64)) != NULL) {
			galign = align;
			capped = false;
			place = e->lru_prev;
			set_remove(&arena->sets[EXTENT_FREE_DIRTY], e);
			break;
		}
		size_t lg_max = kind == EXTENT_FREE_DIRTY ?
		    opt_lg_extent_max_active_fit : 64;
		e = set_fit(&arena->sets[kind], size, galign, lg_max);
		if (e == NULL && galign != align) {
			e = set_fit(&arena->sets[kind], size, align, lg_max);
			if (e != NULL)
				galign = align;
		}
		if (e != NULL) {
			place = e->lru_prev;
			set_remove(&arena->sets[kind], e);
		}
	}
	bool have_place = e != NULL;
	if (e == NULL && (e = grow(arena, size, galign, false)) == NULL)
		return NULL;
	/* One call of trim, so that it stays inlined (a second one cost
	 * the large paths 36 instructions per malloc+free pair). */
	for (bool exact = false;; exact = true) {
		if (!trim(arena, e, size, galign, have_place, place, &got))
			break;
		/* Out of metadata, or the hooks would not split: put back
		 * what we hold; the hooks may still map the exact size. */
		insert_coalesce(arena, got);
		if (!extent_hooks_custom(arena) || exact ||
		    (e = grow(arena, size, galign, true)) == NULL)
			return NULL;
		have_place = false;
	}
	if (unlikely(got->decommitted) && extent_commit(arena, got)) {
		insert_coalesce(arena, got);
		return NULL;
	}
	if (got->kind == EXTENT_FREE_CLEAN && got->zeroed)
		*dirty_len = 0;
done:
	/* In use from here on: a neighbour freed concurrently must not see
	 * a free kind and coalesce with it once arena->mtx is dropped, nor
	 * may the extents that moves and the cap make clean below. */
	got->kind = EXTENT_LARGE;
	got->prev = got->next = NULL;
	if (cap && *dirty_len != size)
		move_fill(arena, got, used, dirty_off, dirty_len);
	if (capped)
		resident_cap(arena, used);
	size_t active = arena->stats.pactive - arena->ptail +
	    (used >> LG_PAGE);
	if (active > arena->pused_peak) {
		arena->pused_peak = active;
		thp_check(arena);
	}
	if (opt_thp_heap_min != 0)
		thp_arenas[arena->ind].since += size >> LG_PAGE;
	return got;
}

/*
 * purge_one for an arena with hooks of its own, jemalloc's cascade: lazy,
 * else the pages go back (dalloc), else they are decommitted, else purged
 * (forced, else lazy), and kept as clean (retained) extents.  A hook that
 * is NULL cannot; a page the hooks could not clear is not known zero.
 */
static extent_t *purge_hooked(arena_t *arena, extent_t *e, bool lazy) {
	extent_hooks_t *h = hooks_of(arena);
	unsigned ind = arena->ind;
	if (lazy && e->kind == EXTENT_FREE_DIRTY && h->purge_lazy != NULL &&
	    !h->purge_lazy(h, e->addr, e->size, 0, e->size, ind)) {
		e->kind = EXTENT_FREE_MUZZY;
		e->zeroed = false;
	} else if (h->dalloc != NULL && !h->dalloc(h, e->addr, e->size,
	    !e->decommitted, ind)) {
		extent_forget(arena, e);
		return NULL;
	} else {
		bool zeroed = e->decommitted;
		if (!zeroed && h->decommit != NULL && !h->decommit(h, e->addr,
		    e->size, 0, e->size, ind)) {
			e->decommitted = true;
			zeroed = true;
		}
		if (!zeroed && h->purge_forced != NULL &&
		    !h->purge_forced(h, e->addr, e->size, 0, e->size, ind))
			zeroed = true;
		if (!zeroed && h->purge_lazy != NULL)
			h->purge_lazy(h, e->addr, e->size, 0, e->size, ind);
		e->kind = EXTENT_FREE_CLEAN;
		e->zeroed = zeroed;
	}
	e->free_ns = os_now_ns();
	return insert_coalesce(arena, e);
}

/* dirty -> muzzy (lazy) or -> clean (forced); returns the new record. */
static extent_t *purge_one(arena_t *arena, extent_t *e, bool lazy) {
	set_remove(&arena->sets[e->kind], e);
	/* dirty_* and muzzy_* stats: by the state the pages leave. */
	if (e->kind == EXTENT_FREE_MUZZY) {
		arena->stats.muzzy_nmadvise++;
		arena->stats.muzzy_purged += e->size >> LG_PAGE;
	} else {
		arena->stats.nmadvise++;
		arena->stats.purged += e->size >> LG_PAGE;
	}
	if (unlikely(extent_hooks_custom(arena)))
		return purge_hooked(arena, e, lazy);
	if (lazy && !os_purge_lazy(e->addr, e->size)) {
		e->kind = EXTENT_FREE_MUZZY;
		e->zeroed = false;
	} else {
		/* Not known zero if MADV_DONTNEED does not zero here
		 * (opt.trust_madvise). */
		e->zeroed = !os_purge_forced(e->addr, e->size);
		e->kind = EXTENT_FREE_CLEAN;
	}
	e->free_ns = os_now_ns();
	e = insert_coalesce(arena, e);
	if (e->kind == EXTENT_FREE_CLEAN && !opt_retain &&
	    e->addr == e->map_addr && e->size == e->map_size &&
	    !os_in_dss(e->addr)) {
		set_remove(&arena->sets[EXTENT_FREE_CLEAN], e);
		pagemap_set_page(e->addr, NULL);
		pagemap_set_page(e->addr + e->size - PAGE, NULL);
		thp_untrack(arena, e->addr);
		os_unmap(e->addr, e->size);
		arena->stats.mapped -= e->size;
		extent_record_free(e);
		return NULL;
	}
	return e;
}

void extent_dalloc_locked(arena_t *arena, extent_t *e) {
	extent_dalloc_at_locked(arena, e, os_now_ns());
}

void extent_dalloc_at_locked(arena_t *arena, extent_t *e, uint64_t now) {
	/* Caches unmark what they give back (tcache.c); a record keeping the
	 * mark would read as cached when it is carved again. */
	mp_assert(e->list != LARGE_LIST_CACHED);
	/* opt.hpa: a run carved from a pageslab goes back to it (hpa.c). */
	if (unlikely(opt_hpa) && e->hpa_ps != NULL) {
		if (!hpa_dalloc_locked(arena, e, now))
			extent_record_free(e);
		return;
	}
	extent_t *clean = NULL;
	if (e->kind == EXTENT_LARGE && e->clean_from != 0 &&
	    e->clean_from < e->size) {
		/* Its tail was purged by the caller: it goes back clean.
		 * Out of records, the whole block goes back dirty. */
		clean = split(e, e->clean_from);
	}
	e->clean_from = 0;
	if (e->kind == EXTENT_SLAB) {
		/* Interior pages of a slab point at it; free extents keep
		 * only their bounds, untagged. */
		pagemap_set_range(e->addr, e->size, NULL);
		pagemap_set_bounds(e);
	} else {
		pagemap_set_page(e->addr, e);  /* drop the class tag */
	}
	atomic_store_explicit(&e->owner, &extent_large_owner,
	    memory_order_relaxed);
	e->kind = EXTENT_FREE_DIRTY;
	e->zeroed = false;
	e->prof = NULL;
	e->free_ns = now;
	e = insert_coalesce(arena, e);
	if (clean != NULL) {
		atomic_store_explicit(&clean->owner, &extent_large_owner,
		    memory_order_relaxed);
		clean->kind = EXTENT_FREE_CLEAN;
		clean->zeroed = os_purge_zeroes();  /* arena_large_dalloc's */
		clean->clean_from = 0;
		clean->prof = NULL;
		clean->free_ns = now;
		insert_coalesce(arena, clean);
	}
	if (arena_dirty_decay_ms(arena) == 0) {
		thp_purged(arena);
		purge_one(arena, e, arena_muzzy_decay_ms(arena) != 0);
	} else if (e->size >= extent_oversize && !opt_background_thread &&
	    arena_muzzy_decay_ms(arena) != -1 &&
	    arena_dirty_decay_ms(arena) != -1) {
		/* oversize_threshold: a free run this big is purged now in
		 * every arena, as jemalloc's extent_record does, unless
		 * decay is off ("-1: never") or a background thread purges
		 * on time (as later jemalloc versions leave it to it). */
		thp_purged(arena);
		purge_one(arena, e, false);
	}
}

bool extent_expand_locked(arena_t *arena, extent_t *e, size_t new_size,
    bool prefer_dirty, bool *zeroed_tail) {
	if (unlikely(opt_hpa) && e->hpa_ps != NULL)
		return hpa_expand_locked(arena, e, new_size, zeroed_tail);
	size_t need = new_size - e->size;
	if (e->addr + e->size == e->map_addr + e->map_size)
		return true;
	extent_t *next = neighbour_lookup(e->addr + e->size);
	if (next == NULL || next->kind >= EXTENT_NFREE_KINDS ||
	    next->arena != arena || next->map_addr != e->map_addr ||
	    next->addr != e->addr + e->size || next->size < need)
		return true;
	/* Clean pages would be faulted in here while dirty ones that the
	 * block could move to sit unused: a buffer at the edge of the
	 * touched pages kept growing into new ones (bench's realloc: 3.5-4.0
	 * MB of clean pages taken by growth in place in its runs of the high
	 * peak, 16.1-16.4 MB, against 0.7-0.9 in the others, 13.8-14.6 MB,
	 * for the same pages in use).  Only while the dirty pages are a
	 * quarter of those in use or more: fewer are not worth the copy. */
	if (prefer_dirty && next->kind == EXTENT_FREE_CLEAN &&
	    (arena->sets[EXTENT_FREE_DIRTY].npages << 2) >=
	    arena->stats.pactive &&
	    set_fit(&arena->sets[EXTENT_FREE_DIRTY], new_size, PAGE,
	    opt_lg_extent_max_active_fit) != NULL)
		return true;
	extent_set_t *set = &arena->sets[next->kind];
	extent_t *place = next->lru_prev;
	set_remove(set, next);
	if (next->size > need) {
		extent_t *rest = split(next, need);
		if (rest == NULL) {
			set_insert_after(set, next, place);
			return true;
		}
		set_insert_after(set, rest, place);
	}
	/* The hooks see the split of the free extent, then the merge of
	 * the piece, as jemalloc calls them. */
	if (unlikely((extent_hooks_custom(arena) && merge_refused(e, next)) ||
	    (next->decommitted && extent_commit(arena, next)))) {
		insert_coalesce(arena, next);
		return true;
	}
	*zeroed_tail = next->kind == EXTENT_FREE_CLEAN && next->zeroed;
	pagemap_set_page(e->addr + e->size - PAGE, NULL);
	pagemap_set_page(next->addr, NULL);
	e->size = new_size;
	pagemap_set_bounds(e);
	extent_record_free(next);
	return false;
}

bool extent_shrink_locked(arena_t *arena, extent_t *e, size_t new_size) {
	if (unlikely(opt_hpa) && e->hpa_ps != NULL)
		return hpa_shrink_locked(arena, e, new_size);
	extent_t *tail = split(e, new_size);
	if (tail == NULL)
		return true;
	tail->kind = EXTENT_LARGE;    /* a block being freed */
	extent_dalloc_locked(arena, tail);
	return false;
}

size_t extent_decay_locked(arena_t *arena, uint64_t now, bool force) {
	size_t purged = 0;
	ssize_t dirty_ms = arena_dirty_decay_ms(arena);
	ssize_t muzzy_ms = arena_muzzy_decay_ms(arena);
	const struct {
		unsigned kind;
		ssize_t ms;
		bool lazy;
	} steps[2] = {
		{EXTENT_FREE_DIRTY, dirty_ms, !force && muzzy_ms != 0},
		{EXTENT_FREE_MUZZY, muzzy_ms, false},
	};
	for (unsigned s = 0; s < 2; s++) {
		extent_set_t *set = &arena->sets[steps[s].kind];
		if (!force && steps[s].ms < 0)
			continue;
		uint64_t age = force ? 0 : (uint64_t)steps[s].ms * 1000000u;
		size_t step_purged = 0;
		while (set->lru_head != NULL && (force ||
		    (now >= set->lru_head->free_ns &&
		    now - set->lru_head->free_ns >= age))) {
			extent_t *e = set->lru_head;
			step_purged += e->size >> LG_PAGE;
			purge_one(arena, e, steps[s].lazy);
		}
		/* A pass that purged something, per state (jemalloc's
		 * dirty_npurge and muzzy_npurge). */
		if (step_purged != 0 && s == 0)
			arena->stats.npurge++;
		else if (step_purged != 0)
			arena->stats.muzzy_npurge++;
		purged += step_purged;
	}
	if (purged != 0)
		thp_purged(arena);
	/* opt.hpa: the pageslabs' dirty pages follow hpa_dirty_mult, or
	 * all go with force (hpa.c). */
	if (unlikely(opt_hpa))
		purged += hpa_decay_locked(arena, now, force);
	return purged;
}

/*
 * arena.<i>.destroy, after arena_reset: every page is free.  A forced
 * purge offers each free extent to dalloc (purge_hooked; the default
 * hooks keep them with retain on), then what is left is destroyed: the
 * hooks' destroy, or an unmap with the defaults.
 */
void extent_destroy_all_locked(arena_t *arena) {
	extent_decay_locked(arena, os_now_ns(), true);
	/* opt.hpa: the pageslabs go too (hpa.c). */
	if (unlikely(opt_hpa))
		hpa_destroy_locked(arena);
	extent_hooks_t *h = hooks_of(arena);
	for (unsigned k = 0; k < EXTENT_NFREE_KINDS; k++) {
		extent_set_t *set = &arena->sets[k];
		while (set->lru_head != NULL) {
			extent_t *e = set->lru_head;
			set_remove(set, e);
			if (h->destroy != NULL)
				h->destroy(h, e->addr, e->size, !e->decommitted,
				    arena->ind);
			extent_forget(arena, e);
		}
	}
	arena->grow_next = GROW_MIN;
	/* Its mappings are gone: the index may serve a new arena. */
	if (opt_thp_heap_min != 0)
		memset(&thp_arenas[arena->ind], 0, sizeof(thp_arenas[0]));
}
