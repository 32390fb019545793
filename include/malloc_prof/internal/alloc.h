/*
 * alloc.h: the allocator's cross-file prototypes (src/alloc/), grouped by
 * the file that defines them, plus the small inline helpers the fast
 * paths are built from (size classes, the page map, the cache bins).
 * It uses sys.h only; ctl.h and prof.h are built on it.
 */
#ifndef MP_INTERNAL_ALLOC_H
#define MP_INTERNAL_ALLOC_H

#include "malloc_prof/internal/sys.h"

/* ------------------------------------------------ options (set by conf.c) */
/* The allocator's options.  They are defined beside the options table in
 * conf.c, which parses them; the allocator only reads them. */
typedef enum {
	ZERO_REALLOC_FREE = 0,   /* glibc: free and return NULL */
	ZERO_REALLOC_ALLOC,      /* treat as malloc(0) */
	ZERO_REALLOC_ABORT,
} zero_realloc_t;
/* percpu_arena's values, in the order of conf.c's names. */
typedef enum {
	PERCPU_ARENA_DISABLED = 0,
	PERCPU_ARENA_PERCPU,     /* one arena per CPU */
	PERCPU_ARENA_PHYCPU,     /* hyperthread siblings share one */
} percpu_arena_t;
extern bool opt_abort_conf;
extern bool opt_confirm_conf;
extern unsigned opt_narenas;             /* 0: 4 per CPU */
extern unsigned opt_percpu_arena;        /* percpu_arena_t */
extern bool opt_tcache;
extern size_t opt_tcache_max;
extern ssize_t opt_dirty_decay_ms;
extern ssize_t opt_muzzy_decay_ms;
extern bool opt_retain;
/* Largest log2 ratio of a reused dirty extent to the request (extent.c). */
extern size_t opt_lg_extent_max_active_fit;
extern const char *opt_junk;             /* "false", "true", "alloc", "free" */
extern bool opt_junk_alloc;              /* derived from opt_junk */
extern bool opt_junk_free;
extern bool opt_zero;
extern unsigned opt_zero_realloc;        /* zero_realloc_t */
extern bool opt_stats_print;
extern char opt_stats_print_opts[64];
/* Transparent huge pages and the huge arena (jemalloc 5.3's options). */
extern unsigned opt_thp;                 /* os_thp_t: user data mappings */
extern size_t opt_thp_heap_min;          /* bytes; 0: no automatic advice */
typedef enum {
	METADATA_THP_DISABLED = 0,
	METADATA_THP_AUTO,
	METADATA_THP_ALWAYS,
} metadata_thp_t;
extern unsigned opt_metadata_thp;        /* metadata_thp_t: base chunks */
extern size_t opt_oversize_threshold;    /* 0: no huge arena */
/* jemalloc 5.3's remaining options that act here (conf.c; issue 18):
 * the tcache knobs size the cache bins (tcache.c) and pace the thread
 * events (tsd.c), from which stats_interval prints (stats.c). */
extern bool opt_xmalloc;                 /* abort instead of NULL on OOM */
extern ssize_t opt_stats_interval;       /* bytes; -1: off */
extern char opt_stats_interval_opts[64];
extern unsigned opt_tcache_nslots_small_min;
extern unsigned opt_tcache_nslots_small_max;
extern unsigned opt_tcache_nslots_large;
extern ssize_t opt_lg_tcache_nslots_mul;
extern size_t opt_tcache_gc_incr_bytes;  /* the thread event interval */
extern size_t opt_tcache_gc_delay_bytes;
extern unsigned opt_lg_tcache_flush_small_div;
extern unsigned opt_lg_tcache_flush_large_div;
extern bool opt_lg_tcache_flush_large_div_given;
extern bool opt_experimental_infallible_new;

/* -------------------------------------------------------------------- sz.c */
/* Constant tables (built at compile time: the fast path reads them before
 * initialisation, see sz.c); the *_compute functions define them. */
extern const uint8_t sz_size2index_tab[SC_LOOKUP_LEN];
extern const size_t sz_index2size_tab[SC_NSIZES];
extern const uint32_t sz_slab_size[SC_NBINS];    /* bytes per slab */
extern const uint32_t sz_slab_nregs[SC_NBINS];
/* Slabs of the profiler's cache: as small as waste allows (see sz.c). */
extern const uint32_t sz_prof_slab_size[SC_NBINS];
/* Slab geometry bounds (see sz_slab_geometry_compute in sz.c): the
 * least bytes of a slab of class size `size`. */
#define SZ_SLAB_MIN_BYTES(size) ((size) <= 256 ? (size_t)64 << 10 :	\
    (size) <= 1024 ? (size_t)16 << 10 : (size) <= 4096 ?		\
    (size_t)32 << 10 : (size_t)64 << 10)
#define SZ_SLAB_MAX_PAGES 64
void sz_boot(void);                              /* debug: checks the tables */
unsigned sz_size2index_compute(size_t size);     /* size <= LARGE_MAXCLASS */
size_t sz_index2size_compute(unsigned ind);      /* ind < SC_NSIZES */
void sz_slab_geometry_compute(unsigned ind, uint32_t *slab_size,
    uint32_t *nregs, uint32_t *prof_slab_size);  /* ind < SC_NBINS */
/* slab_sizes (conf.c): parse "lo-hi:pages|..." (true: malformed); with
 * pages non-NULL, set pages[ind] (0: the table's size) for every small
 * class.  sz_slab_pages_conf is written only by conf_boot, before any
 * slab exists; the slow paths read the slab size through the getters. */
bool sz_slab_sizes_parse(const char *s, size_t len, uint32_t *pages);
extern uint32_t sz_slab_pages_conf[SC_NBINS];
uint32_t sz_slab_size_get(unsigned ind);         /* bytes per slab */
uint32_t sz_slab_nregs_get(unsigned ind);
unsigned sz_psz_floor(size_t npages);            /* page-count class */
unsigned sz_psz_ceil(size_t npages);

/* size -> class index; size must be <= SC_LARGE_MAXCLASS. */
MP_INLINE unsigned sz_size2index(size_t size) {
	if (likely(size <= SC_LOOKUP_MAX))
		return sz_size2index_tab[(size + (QUANTUM - 1)) >> LG_QUANTUM];
	return sz_size2index_compute(size);
}
MP_INLINE size_t sz_index2size(unsigned ind) {
	return sz_index2size_tab[ind];
}
/* Usable size for a request, 0 when the request cannot be satisfied. */
MP_INLINE size_t sz_s2u(size_t size) {
	if (unlikely(size > SC_LARGE_MAXCLASS))
		return 0;
	return sz_index2size(sz_size2index(size));
}
/* Usable size for a request with alignment (a power of two); 0 on
 * overflow.  Small classes whose size is a multiple of the alignment have
 * naturally aligned regions, so small aligned requests stay small. */
size_t sz_sa2u(size_t size, size_t alignment);

/* ------------------------------------------------------------------ base.c */
/* Metadata memory, never returned to the OS (it never shows up in
 * stats.allocated, only in stats.metadata). */
bool base_boot(void);
void *base_alloc(size_t size);                    /* zeroed, 64-aligned */
/* Freeable metadata (the profiler's tables and dumps, ctl's stats
 * snapshots, the scrape endpoint's buffers): size classes of 64 bytes up
 * to 4 KiB recycled on free lists, larger blocks mapped directly.  Zeroed.
 * Carved from chunks of its own: it never takes the memory base_alloc and
 * base_extent_alloc draw on. */
void *base_malloc(size_t size);
void base_free(void *p, size_t size);
/* Thread exit: give the thread's stash of freed blocks back (state is
 * TSD_DEAD by then, so later frees bypass the stash). */
void base_stash_flush(tsd_t *tsd);
extent_t *base_extent_alloc(void);                /* zeroed */
void base_extent_free(extent_t *e);
size_t base_mapped_bytes(void);
/* The metadata allocator's lock, for its counters (stats.arenas.0.
 * mutexes.base). */
mp_mutex_t *base_mutex(void);
/* stats.metadata_thp: huge pages' worth of the advised chunks in use. */
size_t base_metadata_thp(void);
/* opt.thp / opt.metadata_thp once the options are read (arena_boot):
 * advises the chunks mapped so far; later ones are advised when mapped. */
void base_thp_boot(void);
void base_prefork(void);
void base_postfork_parent(void);
void base_postfork_child(void);

/* --------------------------------------------------------------- pagemap.c */
/* Page number -> extent_t.  Two levels over a 48-bit address space: the
 * root is static, leaves are mapped on demand and never freed. */
#define PAGEMAP_KEY_BITS (48 - LG_PAGE)
#define PAGEMAP_LEAF_BITS (PAGEMAP_KEY_BITS / 2)
#define PAGEMAP_ROOT_BITS (PAGEMAP_KEY_BITS - PAGEMAP_LEAF_BITS)
#define PAGEMAP_ROOT_LEN ((size_t)1 << PAGEMAP_ROOT_BITS)
#define PAGEMAP_LEAF_LEN ((size_t)1 << PAGEMAP_LEAF_BITS)
typedef _Atomic(extent_t *) pagemap_leaf_t[PAGEMAP_LEAF_LEN];
extern _Atomic(pagemap_leaf_t *) pagemap_root[PAGEMAP_ROOT_LEN];
/*
 * An entry is an extent_t pointer whose low bits (free: extent_t is
 * cache-line aligned) may carry a size-class tag, szind + 1, meaning "p
 * is a block of class szind": on every page of a slab, and on the first
 * page of a large block whose class index is below PAGEMAP_TAG_MASK.
 * Every other entry has tag 0 (look at the extent).  The tag lets realloc
 * decide "same class, nothing to do" without touching the extent, a
 * second dependent cache miss (22% of realloc's time before).
 */
#define PAGEMAP_TAG_MASK ((uintptr_t)CACHELINE - 1)
_Static_assert(_Alignof(extent_t) >= CACHELINE, "page-map tags need "
    "cache-line aligned extents");
/* Point every page of [addr, addr + size) at e (NULL clears), untagged. */
bool pagemap_set_range(const void *addr, size_t size, extent_t *e);
/* Point every page of [addr, addr + size) at e, tagged with e's class. */
bool pagemap_set_class(const void *addr, size_t size, extent_t *e);
/* Point the first and last page of e at e (what coalescing looks up). */
bool pagemap_set_bounds(extent_t *e);
/* Create the leaves for a new mapping, so updates inside it cannot fail. */
bool pagemap_prepare(const void *addr, size_t size);

/* The raw entry of p's page (0 if none): extent pointer | tag. */
MP_INLINE uintptr_t pagemap_lookup_entry(const void *p) {
	uintptr_t key = (uintptr_t)p >> LG_PAGE;
	/* One shift serves the bound and the root index. */
	uintptr_t root_ind = key >> PAGEMAP_LEAF_BITS;
	if (unlikely(root_ind >= PAGEMAP_ROOT_LEN))
		return 0;
	pagemap_leaf_t *leaf = atomic_load_explicit(&pagemap_root[root_ind],
	    memory_order_acquire);
	if (unlikely(leaf == NULL))
		return 0;
	return (uintptr_t)atomic_load_explicit(
	    &(*leaf)[key & (PAGEMAP_LEAF_LEN - 1)], memory_order_relaxed);
}

/*
 * The flat copy of the tags (pagemap.c): a byte per page below 2^47;
 * pagemap_tags_pages is 0 until the table exists (and if it was refused).
 * Hidden, so that free reads them with one instruction each.  The bound
 * is read as a plain variable, so that the compiler folds it into the
 * compare: it is written once, after the table pointer, in
 * malloc_init_hard (pagemap_boot), which every thread's first call waits
 * for: no free can run before it.
 */
#define PAGEMAP_TAGS_PAGES ((uintptr_t)1 << (47 - LG_PAGE))
extern _Atomic(uint8_t *) pagemap_tags __attribute__((visibility("hidden")));
extern uintptr_t pagemap_tags_pages __attribute__((visibility("hidden")));
/* Reserve the table (malloc_init_hard, before any block exists). */
void pagemap_boot(void);

/* The class tag of p's page (0: none, or no table: ask the tree). */
MP_INLINE size_t pagemap_lookup_tag(const void *p) {
	uintptr_t key = (uintptr_t)p >> LG_PAGE;
	if (unlikely(key >= pagemap_tags_pages))
		return 0;
	const _Atomic uint8_t *tags = (const _Atomic uint8_t *)
	    atomic_load_explicit(&pagemap_tags, memory_order_relaxed);
	return atomic_load_explicit(&tags[key], memory_order_relaxed);
}

MP_INLINE extent_t *pagemap_entry_extent(uintptr_t entry) {
	return (extent_t *)(entry & ~PAGEMAP_TAG_MASK);
}

MP_INLINE extent_t *pagemap_lookup(const void *p) {
	return pagemap_entry_extent(pagemap_lookup_entry(p));
}

/*
 * Point the one page at addr at e (NULL clears), untagged, as
 * pagemap_set_range(addr, PAGE, e) does.  Inline for the bounds that
 * every split, merge and coalescing rewrites, several per large block
 * through the arena: set_entries' loops, leaf walk and register saves
 * for one page were 7.7% of reallocgrow's instructions.  A page without
 * a leaf (none in practice: a mapping's leaves are made with it,
 * pagemap_prepare) takes the general path, which makes it.
 */
MP_INLINE void pagemap_set_page(const void *addr, extent_t *e) {
	uintptr_t key = (uintptr_t)addr >> LG_PAGE;
	uintptr_t root_ind = key >> PAGEMAP_LEAF_BITS;
	pagemap_leaf_t *leaf = likely(root_ind < PAGEMAP_ROOT_LEN)
	    ? atomic_load_explicit(&pagemap_root[root_ind],
	    memory_order_acquire) : NULL;
	if (unlikely(leaf == NULL)) {
		pagemap_set_range(addr, PAGE, e);
		return;
	}
	if (likely(key < pagemap_tags_pages)) {
		/* A 0 over a 0 is not written (pagemap.c, tags_set). */
		_Atomic uint8_t *t = (_Atomic uint8_t *)atomic_load_explicit(
		    &pagemap_tags, memory_order_relaxed);
		if (atomic_load_explicit(&t[key], memory_order_relaxed) != 0)
			atomic_store_explicit(&t[key], 0,
			    memory_order_relaxed);
	}
	atomic_store_explicit(&(*leaf)[key & (PAGEMAP_LEAF_LEN - 1)], e,
	    memory_order_release);
}

/* ---------------------------------------------------------------- extent.c */
extern tcache_t extent_large_owner;      /* owner of large and free extents */
/* oversize_threshold, set by arena_boot: the threshold in effect
 * (SIZE_MAX when off: large blocks this big go to the huge arena, and free
 * dirty runs this big are purged at once in every arena); the huge
 * arena's index (0 when there is none; it follows the automatic arenas,
 * counted in narenas_total but never a thread's, made on first use); its
 * pages in use (pactive - ptail), which the automatic arenas' resident
 * caps count as theirs. */
extern size_t extent_oversize;
extern unsigned extent_huge_ind;
extern _Atomic size_t extent_huge_used;
/* Free-extent sets, splitting, coalescing, OS growth and purging.  All
 * under arena->mtx. */
void extent_set_init(extent_set_t *set);
/* Carve `size` bytes aligned to `align` (>= PAGE) for the caller, from
 * dirty, then muzzy, then clean extents, else a new mapping.  With `cap`
 * (zeroed large blocks), a dirty extent may be completed with the clean
 * pages beside it, the first `used` bytes (what the caller will touch)
 * going on dirty pages where they can, and before pages are faulted in,
 * dirty ones past the arena's resident cap are purged.  The result has
 * its bounds in the page map; its pages outside [*dirty_off, *dirty_off +
 * *dirty_len) read as zero. */
extent_t *extent_alloc_locked(arena_t *arena, size_t size, size_t used,
    bool cap, size_t align, size_t *dirty_off, size_t *dirty_len);
/* Before `used` bytes are faulted in elsewhere (the huge arena): purge
 * what the arena's resident cap asks, as extent_alloc_locked does. */
void extent_resident_cap_locked(arena_t *arena, size_t used);
/* Return an extent to the free sets (dirty), coalescing with neighbours. */
void extent_dalloc_locked(arena_t *arena, extent_t *e);
/* The same, with the caller's reading of os_now_ns() as its free time. */
void extent_dalloc_at_locked(arena_t *arena, extent_t *e, uint64_t now);
/* Grow e in place to new_size from the free extent right after it.  With
 * prefer_dirty, not from clean pages while a free dirty extent could hold
 * the whole new size (the caller moves the block there instead). */
bool extent_expand_locked(arena_t *arena, extent_t *e, size_t new_size,
    bool prefer_dirty, bool *zeroed_tail);
/* Shrink e to new_size, returning the tail to the free sets. */
bool extent_shrink_locked(arena_t *arena, extent_t *e, size_t new_size);
/* Purge what has been dirty (muzzy) longer than the decay time, or all of
 * it with force; returns pages purged. */
size_t extent_decay_locked(arena_t *arena, uint64_t now, bool force);
/* Extent hooks (doc/design.md, "Extent hooks").  The defaults map and
 * purge with the OS as the arenas do without hooks; an arena whose hooks
 * are these takes the direct path, with no call through them. */
extern extent_hooks_t extent_hooks_default;
MP_INLINE bool extent_hooks_custom(arena_t *arena) {
	return atomic_load_explicit(&arena->hooks, memory_order_relaxed) !=
	    &extent_hooks_default;
}
/* arena.<i>.destroy, after a reset: give every free extent back through
 * the hooks (dalloc, else destroy); the arena holds no pages after. */
void extent_destroy_all_locked(arena_t *arena);
/* arena.<i>.retain_grow_limit: the largest mapping growth asks for. */
size_t extent_grow_limit(arena_t *arena);
/* opt.dss / arena.<i>.dss modes (conf.c's names, in this order). */
typedef enum {
	DSS_DISABLED,
	DSS_PRIMARY,
	DSS_SECONDARY,
	DSS_NMODES
} dss_mode_t;
extern unsigned opt_dss;                 /* dss_mode_t */
extern const char *const dss_mode_names[DSS_NMODES];
extern _Atomic unsigned arena_dss_default;       /* set from opt.dss by arena_boot */
/* arena.<i>.dss: arena ind's mode (dss_mode_t), kept by extent.c. */
unsigned extent_dss_get(unsigned ind);
void extent_dss_set(unsigned ind, unsigned mode);

/* ------------------------------------------------------------------- hpa.c */
/*
 * opt.hpa: jemalloc's hugepage allocator.  An automatic arena (default
 * hooks, no dss) takes its page runs of up to hpa_slab_max_alloc bytes,
 * unguarded, from pageslabs: HUGEPAGE-long, HUGEPAGE-aligned mappings
 * that are hugified once dense and dehugified before a purge (doc/
 * design.md, "Hugepage allocator (hpa)").  Everything under arena->mtx.
 */
#define HPA_NPAGES (HUGEPAGE >> LG_PAGE)        /* pages per pageslab */
#define HPA_WORDS ((HPA_NPAGES + 63) / 64)
_Static_assert(LG_PAGE < LG_HUGEPAGE, "a pageslab holds more than one "
    "page");
/* The options (conf.c's rows); dirty_mult is 16.16 fixed point, as
 * jemalloc's fxp_t (UINT32_MAX: -1, no purging by the ratio). */
extern bool opt_hpa;
extern size_t opt_hpa_slab_max_alloc;
extern size_t opt_hpa_hugification_threshold;   /* bytes */
extern size_t opt_hpa_hugify_delay_ms;
extern size_t opt_hpa_min_purge_interval_ms;
extern uint32_t opt_hpa_dirty_mult;
#define HPA_DIRTY_MULT_OFF UINT32_MAX
/* The small extent cache's (hpa_sec_nshards 0: none): freed runs of up
 * to max_alloc bytes kept per size in the freeing thread's shard and
 * handed out again before the pageslabs are searched; a shard over
 * max_bytes is flushed down to bytes_after_flush; a miss takes
 * batch_fill_extra more runs of its size into the cache. */
extern size_t opt_hpa_sec_nshards;
extern size_t opt_hpa_sec_max_alloc;
extern size_t opt_hpa_sec_max_bytes;
extern size_t opt_hpa_sec_bytes_after_flush;
extern size_t opt_hpa_sec_batch_fill_extra;

/*
 * One pageslab.  Invariants, by page: active (in an extent handed out),
 * dirty (free, resident: used since its last purge) and touched (may not
 * read zero) bits, with active & dirty == 0, dirty implies touched, and
 * active implies touched once the extent's user may have written it;
 * nactive and ndirty count the bits; lfr is the longest run of pages not
 * active, and the pageslab sits in its shard's bin lfr.  huge: advised
 * MADV_HUGEPAGE and not MADV_NOHUGEPAGE since; hugify_at: when a pending
 * hugification (dense, hpa_hugify_delay_ms not yet passed) is due.
 */
typedef struct hpa_ps_s hpa_ps_t;
struct hpa_ps_s {
	char *addr;
	uint64_t active[HPA_WORDS];
	uint64_t dirty[HPA_WORDS];
	uint64_t touched[HPA_WORDS];
	uint32_t nactive, ndirty, lfr;
	bool huge;
	bool hugify_pending;
	bool hugify_failed;             /* the kernel refused: not retried
	                                 * until the pageslab is purged */
	uint64_t hugify_at;
	hpa_ps_t *prev, *next;          /* bin list */
	hpa_ps_t *all_prev, *all_next;  /* every pageslab of the shard */
};

/* The small extent cache (opt.hpa_sec_*, jemalloc's SEC): one shard of
 * it.  bins[n - 1]: records of freed runs of n pages, whose pages stay
 * active in their pageslab, linked through next; bytes: their total;
 * flush_next: the bin the next flush starts with. */
typedef struct hpa_sec_shard_s {
	extent_t **bins;
	size_t bytes;
	size_t flush_next;
} hpa_sec_shard_t;

/* An arena's pageslabs (made at its first hpa allocation).  bins[n]:
 * the pageslabs whose longest free run is n pages (bins[0]: full ones),
 * nonempty: which bins have any.  Counters are in arena->stats.  sec:
 * the cache's sec_nshards shards of sec_npages bins (made at its first
 * use), holding sec_bytes in all. */
typedef struct hpa_shard_s {
	hpa_ps_t *bins[HPA_NPAGES + 1];
	uint64_t nonempty[(HPA_NPAGES + 1 + 63) / 64];
	hpa_ps_t *all;
	hpa_ps_t *spare;                /* records of unmapped pageslabs */
	uint32_t npending;              /* pageslabs with hugify_pending */
	uint64_t hugify_next_ns;        /* no pending one is due before */
	uint64_t last_purge_ns;         /* of the last purge by the ratio */
	hpa_sec_shard_t *sec;
	unsigned sec_nshards;
	size_t sec_npages;
	size_t sec_bytes;
} hpa_shard_t;

/* Whether a page run of `size` bytes of this arena comes from
 * pageslabs (arena.c asks, after opt_hpa, for unguarded runs): any arena
 * with the default hooks, automatic or manual (arenas.create), arena 0
 * included, as in jemalloc 5.3 (arena_new leaves out only custom hooks,
 * and arena 0, whose shard malloc_init_hard_a0_locked enables once it is
 * made); hooks set later turn it off as jemalloc's
 * arena_set_extent_hooks does.  An arena with dss keeps the extents. */
/* jemalloc 5.3's pa_alloc tries its HPA before the extents whatever the
 * arena's dss setting: dss decides only where the extents' pages come
 * from, and so it does here. */
MP_INLINE bool hpa_eligible(arena_t *arena, size_t size) {
	return size <= opt_hpa_slab_max_alloc && size <= HUGEPAGE &&
	    !extent_hooks_custom(arena);
}
/* Like extent_alloc_locked, for an eligible run; NULL: take the ordinary
 * path (out of memory or metadata).  extent_alloc_hpa_locked (extent.c)
 * is the callers' way in: it gives the record its owner. */
extent_t *hpa_alloc_locked(arena_t *arena, size_t size, size_t *dirty_off,
    size_t *dirty_len);
extent_t *extent_alloc_hpa_locked(arena_t *arena, size_t size,
    size_t *dirty_off, size_t *dirty_len);
/* extent_dalloc_at_locked (which then frees the record, unless
 * hpa_dalloc_locked returns true: the small extent cache keeps it),
 * extent_expand_locked, extent_shrink_locked for an extent with hpa_ps
 * set (extent.c sends them here). */
bool hpa_dalloc_locked(arena_t *arena, extent_t *e, uint64_t now);
bool hpa_expand_locked(arena_t *arena, extent_t *e, size_t new_size,
    bool *zeroed_tail);
bool hpa_shrink_locked(arena_t *arena, extent_t *e, size_t new_size);
/* A decay pass: due hugifications, and purges by hpa_dirty_mult, or of
 * every dirty page with force.  Returns the pages purged.  While the work
 * is deferred (hpa_deferral) only a forced pass does anything here. */
size_t hpa_decay_locked(arena_t *arena, uint64_t now, bool force);
/* Deferred work (jemalloc's with background_thread:true): while
 * hpa_deferral is set, hugifications and purges by hpa_dirty_mult are
 * left to the background thread, which background_thread.c wakes through
 * hpa_work_due(when) as work becomes due, and which runs
 * hpa_deferred_work_locked: what is due at `now`, then the time the next
 * work is due (UINT64_MAX: none). */
extern _Atomic bool hpa_deferral;
extern void (*hpa_work_due)(uint64_t due_ns);
uint64_t hpa_deferred_work_locked(arena_t *arena, uint64_t now);
/* Empty the small extent cache into the pageslabs (reset; a forced
 * decay pass does it too). */
void hpa_sec_flush_locked(arena_t *arena);
/* extent_destroy_all_locked: the cache flushed, every dirty page purged
 * and every empty pageslab unmapped. */
void hpa_destroy_locked(arena_t *arena);
/* arena_stats_read: pageslab pages into pdirty and retained. */
void hpa_stats_locked(arena_t *arena, arena_stats_t *out);
/* The placement rule, apart for the unit test: insert or remove a
 * pageslab (its lfr recomputed), and pick the one for a run of npages:
 * the smallest longest free run that fits (jemalloc's psset rule), the
 * fullest among the first few of that bin; NULL if none fits. */
void hpa_psset_insert(hpa_shard_t *s, hpa_ps_t *ps);
void hpa_psset_remove(hpa_shard_t *s, hpa_ps_t *ps);
hpa_ps_t *hpa_psset_pick(hpa_shard_t *s, size_t npages);
/* Parse a jemalloc fixed-point value ("0.25", "1"): digits, optionally a
 * '.' and more digits, below 65536.  false on success, *out 16.16. */
bool hpa_fxp_parse(const char *v, size_t vlen, uint32_t *out);

/* ------------------------------------------------------------------- san.c */
/* Guard pages: san_guard_large / san_guard_small (0: off; conf.c sets
 * them before any allocation). */
extern size_t opt_san_guard_large;
extern size_t opt_san_guard_small;
/* Whether this large carving (usize, align) gets guards: every Nth of the
 * thread's, default hooks and page alignment only. */
bool san_large_decide(arena_t *arena, size_t usize, size_t align);
/* Whether this slab carving gets guards: every Nth of the thread's. */
bool san_slab_decide(arena_t *arena);
/* e, carved 2 pages longer than the block, is narrowed to the block
 * between two PROT_NONE pages (false: the OS refused the protection;
 * narrowed all the same).  dirty_off and dirty_len: extent_alloc_locked's
 * dirty range of e. */
bool san_guard(extent_t *e, size_t dirty_off, size_t dirty_len);
/* Before e's free: widened back, guards unprotected. */
void san_unguard(extent_t *e);

/* ----------------------------------------------------------------- arena.c */
#define ARENAS_MAX 4096                  /* MALLCTL_ARENAS_ALL */
extern _Atomic(arena_t *) arenas[ARENAS_MAX];
extern unsigned narenas_auto;            /* arenas threads are spread over */
extern _Atomic unsigned narenas_total;   /* indices handed out so far */
/* cache_setup readies the caches a new arena embeds, before the arena is
 * published (tcache_arena_setup: arena.c calls no cache function). */
bool arena_boot(void (*cache_setup)(arena_t *arena));
arena_t *arena_get(unsigned ind, bool create);
/* A new thread's automatic arena, the thread counted in its nthreads. */
arena_t *arena_choose_auto(void);
/* percpu_arena: arenas [0, arena_percpu_limit) belong to CPUs (0: off).
 * Hidden, so that tsd_fetch tests it with one instruction. */
extern unsigned arena_percpu_limit __attribute__((visibility("hidden")));
/* The arena index of the CPU the caller runs on (percpu_arena on). */
unsigned arena_percpu_choose(void);
/* arenas.create, with the hooks to use (NULL: the defaults); the index
 * of a destroyed arena is reused first.  arena_create: the defaults. */
bool arena_create_hooked(unsigned *ind, extent_hooks_t *hooks);
bool arena_create(unsigned *ind);
/* arena.<i>.reset: free every allocation of manual arena `arena` (the
 * caches used with it flushed beforehand, as jemalloc requires). */
void arena_reset(arena_t *arena);
/* arena.<i>.destroy: reset, then give every page back through the
 * hooks; the index goes to the next arenas.create.  true: threads are
 * still attached to it. */
bool arena_destroy(arena_t *arena);
/* Set by tsd.c's boot list to prof_sample_free (alloc uses no prof
 * function): arena_reset's call for a sampled large block. */
extern void (*arena_large_unsample)(void *p, extent_t *e);
/* Slabs for the caches: a fresh slab for class ind (owner unset). */
/* class_tag: the slab's pages carry its class in the page map, so that
 * free's fast path takes its regions (false: the prof_cache's, whose
 * frees must reach the profiler). */
extent_t *arena_slab_alloc(arena_t *arena, unsigned ind, size_t size,
    bool class_tag);
void arena_slab_init(extent_t *slab, unsigned ind, bool class_tag);
void arena_slab_dalloc(arena_t *arena, extent_t *slab);
/* Pages of slabs and large blocks all arenas have out (the prof_cache
 * keeps empty slabs in proportion, slab.c). */
size_t arena_pactive_total(void);
/* Large blocks. usize is a large size class, align a power of two. */
/* cache_oblivious: a block aligned below a page starts a random number of
 * cache lines into an extent a page longer (arena.c; conf.c sets it). */
extern bool opt_cache_oblivious;
void *arena_large_alloc(arena_t *arena, size_t usize, size_t align,
    bool zero);
/* The same for calloc's request of `size` bytes (<= usize): zeroed
 * blocks are carved under the resident cap, and the class's tail past
 * the request holds no resident pages. */
void *arena_large_alloc_req(arena_t *arena, size_t usize, size_t align,
    bool zero, size_t size);
void arena_large_dalloc(extent_t *e);
/* In-place resize of a large block to usize; true if it could not.  With
 * prefer_dirty, growth refuses to fault in clean pages where a move could
 * reuse dirty ones (extent_expand_locked). */
bool arena_large_resize(extent_t *e, size_t usize, bool zero,
    bool prefer_dirty);
/* Decay (force: purge) the free extents only; tcache_arena_decay returns
 * what the arena's caches hold first. */
void arena_decay(arena_t *arena, bool force);
void arena_decay_tick(arena_t *arena);        /* cheap, from slow paths */
/*
 * Decay times, as opt.dirty_decay_ms / opt.muzzy_decay_ms: the defaults
 * of arenas made from now on (arenas.*_decay_ms) and one arena's own
 * (arena.<i>.*_decay_ms, copied from the default when it is made).  Until
 * a mallctl sets one, it holds ARENA_DECAY_MS_OPT, "the option's value":
 * the options never change after boot, except in the unit tests, which
 * set them to drive the arenas they make.
 */
#define ARENA_DECAY_MS_OPT (-(ssize_t)(SIZE_MAX >> 1) - 1)
extern _Atomic ssize_t arena_dirty_decay_ms_default;
extern _Atomic ssize_t arena_muzzy_decay_ms_default;
MP_INLINE ssize_t arena_decay_ms_resolve(ssize_t ms, bool dirty) {
	if (ms != ARENA_DECAY_MS_OPT)
		return ms;
	return dirty ? opt_dirty_decay_ms : opt_muzzy_decay_ms;
}
MP_INLINE ssize_t arena_dirty_decay_ms(arena_t *arena) {
	return arena_decay_ms_resolve(atomic_load_explicit(
	    &arena->dirty_decay_ms, memory_order_relaxed), true);
}
MP_INLINE ssize_t arena_muzzy_decay_ms(arena_t *arena) {
	return arena_decay_ms_resolve(atomic_load_explicit(
	    &arena->muzzy_decay_ms, memory_order_relaxed), false);
}
/* Change an arena's decay time; what is already older than the new time
 * is purged now. */
void arena_decay_ms_set(arena_t *arena, bool dirty, ssize_t ms);
void arena_stats_read(arena_t *arena, arena_stats_t *out);
/* Pages were freed (no arena lock held): background_thread_boot points it
 * at background_thread_notify; a no-op until then. */
extern void (*arena_pages_freed)(void);
void arena_prefork(void);
void arena_postfork_parent(void);
void arena_postfork_child(void);

/* ------------------------------------------------------ background_thread.c */
extern bool opt_background_thread;
extern size_t opt_max_background_threads;
bool background_thread_boot(void);                 /* after conf; true on error */
/* Start the thread if the option or the mallctl asked for it and it is not
 * running (cheap when not: one relaxed load).  From event paths with no
 * allocator lock held. */
void background_thread_start_pending(void);
/* background_thread mallctl: true if the thread could not be created. */
bool background_thread_set(bool enable, bool *was);
bool background_thread_enabled(void);
/* Pages were freed: wake the thread if it waits with nothing to purge. */
void background_thread_notify(void);
/* hpa_work_due's target: pageslab work (hpa.c) is due at due_ns; wakes
 * the thread if it would sleep past it.  Callable under an arena lock. */
void background_thread_hpa_due(uint64_t due_ns);
/* The background thread's lock, for its counters
 * (stats.mutexes.background_thread). */
mp_mutex_t *background_thread_mutex(void);
void background_thread_stats(size_t *nthreads, uint64_t *nruns,
    uint64_t *run_interval_ns);
void background_thread_prefork(void);
void background_thread_postfork_parent(void);
void background_thread_postfork_child(void);

/* ---------------------------------------------------------------- tcache.c */
void tcache_init(tcache_t *tc, arena_t *arena, bool shared);
/* A new arena's embedded caches (shared, prof_cache); given to
 * arena_boot, which calls it before it publishes an arena. */
void tcache_arena_setup(arena_t *arena);
/* Return what the arena's shared cache holds free. */
void tcache_arena_shared_flush(arena_t *arena);
/* arena.<i>.decay/purge, malloc_trim: return what the arena's shared
 * cache, prof_cache and orphans hold free, then arena_decay. */
void tcache_arena_decay(arena_t *arena, bool force);
/* A cache for a new thread: an orphan of `arena` if any, else a new one. */
tcache_t *tcache_adopt(arena_t *arena);
/* Thread exit: return what is free, park the rest as an orphan. */
void tcache_orphan(tcache_t *tc);
/* Turn the thread's cache bins (tsd) on over tc's slots (true: no memory
 * for them) / give every cached region back and turn the bins off. */
bool tcache_bins_attach(tcache_t *tc, tsd_t *tsd);
void tcache_bins_detach(tcache_t *tc);
/* Regions cached in / slots of cache bin ind of a cache whose bins are
 * on. */
MP_INLINE unsigned tcache_bin_count(const tcache_t *tc, unsigned ind) {
	return (unsigned)(tc->cb_empty[ind] - tc->cb_cur[ind]);
}
MP_INLINE unsigned tcache_bin_cap(const tcache_t *tc, unsigned ind) {
	return ((uint32_t)(uintptr_t)tc->cb_empty[ind] - tc->cb_full[ind]) /
	    sizeof(void *);
}
/* Cache bin ind of tc is full and a region is coming: make room (grow
 * the bin, or give its older half back to the slabs). */
void tcache_bin_overflow(tcache_t *tc, unsigned ind);
/* Cache bin ind of tc ran dry: fill half of it from the slabs and return
 * one region (NULL on OOM). */
void *tcache_bin_fill(tcache_t *tc, unsigned ind);
/* Give all but the `keep` most recently freed regions of bin ind back to
 * their slabs. */
void tcache_bin_flush(tcache_t *tc, unsigned ind, unsigned keep);
/* Large blocks up to opt_tcache_max: reuse a cached one / cache a freed
 * one.  alloc returns NULL when none is cached; dalloc true if not taken. */
void *tcache_alloc_large(tcache_t *tc, unsigned ind);
bool tcache_dalloc_large(tcache_t *tc, extent_t *e);
void tcache_flush(tcache_t *tc);         /* thread.tcache.flush */
/* The requests tc's bins and large classes served, not yet in its
 * arena's stats, go there now (nrequests: tcache.c). */
void tcache_requests_merge(tcache_t *tc);
void tcache_gc_step(tcache_t *tc);       /* one incremental GC step */
/* Reclaim free memory held by orphaned caches of `arena`. */
void tcache_orphans_collect(arena_t *arena, unsigned max);
/*
 * Explicit caches (tcache.create, tcache.flush, tcache.destroy,
 * MALLOCX_TCACHE(tc)): caches of no thread, numbered 0 .. TCACHES_MAX
 * (jemalloc's MALLOCX_TCACHE_MAX: the largest tc the flag's 12 bits
 * hold).  Any thread may use one, but never two threads at once: the
 * program promises it, as jemalloc asks, so they take no lock.  Each has
 * cache bins of its own, used through the functions below.
 */
#define TCACHES_MAX 4093
/* A new cache (the lowest destroyed index first); true: TCACHES_MAX + 1
 * exist, or no memory. */
bool tcaches_create(unsigned *ind);
tcache_t *tcaches_get(unsigned ind);     /* NULL: no live cache ind */
/* Return what cache ind holds / that, then free the index; true (nothing
 * done): no live cache ind. */
bool tcaches_flush(unsigned ind);
bool tcaches_destroy(unsigned ind);
/* Pop a region of class ind from tc's cache bin, filling it when dry
 * (NULL on OOM) / push p, giving the older half back when full. */
void *tcache_explicit_alloc_small(tcache_t *tc, unsigned ind);
void tcache_explicit_dalloc_small(tcache_t *tc, unsigned ind, void *p);

/* ------------------------------------------------------------------ slab.c */
/* Up to n regions of class ind from tc's slabs into out (the count got:
 * fewer only on OOM) / one region or NULL.  The shared caches call them
 * under arena->shared_mtx. */
unsigned tcache_alloc_batch(tcache_t *tc, unsigned ind, void **out,
    unsigned n);
void *tcache_alloc_small(tcache_t *tc, unsigned ind);
/* A slab's owning cache. */
MP_INLINE tcache_t *slab_owner(const extent_t *slab) {
	return atomic_load_explicit(&((extent_t *)slab)->owner,
	    memory_order_acquire);
}
/* Free by the owner: the region's bit back in free_bits; an emptied slab
 * other than the current one retires.  true (nothing done) if the region
 * was free already: a double free. */
bool tcache_free_small(tcache_t *tc, extent_t *slab, void *p);
/* Free by anyone but the owner; true (nothing done) if p was already
 * freed and not yet collected: a double free. */
bool tcache_free_remote(extent_t *slab, void *p);
/* Region index of p in slab (p inside a region; no division). */
static inline uint32_t slab_region_index(const extent_t *slab,
    const void *p) {
	return (uint32_t)(((uint64_t)((const char *)p - slab->addr) *
	    slab->div_magic) >> 32);
}
/* Whether p's region sits freed in the slab's remote bitmap / in its
 * owner's free_bits (only the owner may ask: the map is not atomic). */
static inline bool slab_remote_freed(const extent_t *slab, const void *p) {
	uint32_t ind = slab_region_index(slab, p);
	return (atomic_load_explicit(&slab->remote_bits[ind / 64],
	    memory_order_acquire) >> (ind % 64)) & 1;
}
static inline bool slab_free_listed(const extent_t *slab, const void *p) {
	uint32_t ind = slab_region_index(slab, p);
	return (slab->free_bits[ind / 64] >> (ind % 64)) & 1;
}
/* Give regions q[0..n), which left a cache bin of tc, back to their
 * slabs. */
void slab_regions_return(tcache_t *tc, void *const *q, unsigned n);
/* Move the slabs that came back through tc's inbox to their partial
 * lists. */
void slab_inbox_drain(tcache_t *tc);
/* Collect remote frees into every slab of bin ind and release the empty
 * ones / give all but `keep` of the empty slabs back to the arena. */
void slab_bin_flush(tcache_t *tc, unsigned ind);
void slab_empty_flush(tcache_t *tc, uint32_t keep);
/* Bytes of emptied slabs all prof_caches keep now (for the tests). */
size_t slab_prof_kept_bytes(void);
/* The GC's visit of bin ind: slab_bin_flush if another thread freed into
 * the bin's slabs since the last visit. */
void slab_bin_gc(tcache_t *tc, unsigned ind);

/* ------------------------------------------------------------------- tsd.c */
extern __thread tsd_t mp_tsd __attribute__((tls_model("initial-exec")));
/* Hidden: the slow paths of malloc.c read it with one instruction, as
 * they did when it was defined beside them. */
extern bool malloc_initialized __attribute__((visibility("hidden")));
bool malloc_init(void);
tsd_t *tsd_fetch_slow(void);
/* percpu_arena: move the thread to the arena of the CPU it runs on. */
void tsd_arena_percpu(tsd_t *tsd);
/*
 * The calling thread's state, initialising the thread if needed.  Inline
 * so that the slow paths of malloc.c keep its first test in line.  With
 * percpu_arena, every slow-path entry (cache refills, large blocks, the
 * calls that bypass the cache, mallctl) first follows the thread to its
 * CPU's arena; the fast paths never come here.
 */
static inline tsd_t *tsd_fetch(void) {
	tsd_t *tsd = &mp_tsd;
	if (likely(tsd->state == TSD_NOMINAL)) {
		if (unlikely(arena_percpu_limit != 0))
			tsd_arena_percpu(tsd);
		return tsd;
	}
	return tsd_fetch_slow();
}
/* Sums of thread.allocated / thread.deallocated over all threads, live
 * and exited: their difference is stats.allocated. */
void tsd_totals(uint64_t *allocated, uint64_t *deallocated);
void tsd_tcache_set_enabled(tsd_t *tsd, bool enabled);
void tsd_tcache_flush(tsd_t *tsd);
bool tsd_arena_set(tsd_t *tsd, unsigned ind);
/* Redraw the calling thread's sampling wait now (thread.prof.active). */
void tsd_prof_redraw(tsd_t *tsd);
/* Draw the distance to the thread's next sample, counted from `from` (a
 * value of `allocated`); true if the thread is sampling. */
bool tsd_prof_wait_redraw(tsd_t *tsd, uint64_t from);
/* Crossing the event threshold: cache GC, decay, the thread.peak check
 * (malloc.c's slow path). */
void tsd_event(tsd_t *tsd);
/* Re-decide the thread's fast paths (hook.c, after hooks come or go). */
void tsd_fast_recompute(tsd_t *tsd);
/* thread.peak.read (after a check of the current value) and
 * thread.peak.reset. */
uint64_t tsd_peak_read(tsd_t *tsd);
void tsd_peak_reset(tsd_t *tsd);
/* Counters of the exited threads (and of calls made after a thread's
 * exit), folded in by tsd_totals. */
extern _Atomic uint64_t tsd_dead_allocated, tsd_dead_deallocated;
/* Whether the thread's cache bins are on. */
static inline bool tsd_cache_bins(const tsd_t *tsd) {
	return tsd->tcache != NULL && tsd->tcache->cb_cur == &tsd->bin_cur[1];
}
/* Counting for threads outside the registry (dead or never registered). */
static inline void tsd_count_alloc(tsd_t *tsd, size_t usize) {
	if (likely(tsd->state != TSD_DEAD))
		tsd->allocated += usize;
	else
		atomic_fetch_add(&tsd_dead_allocated, usize);
}

static inline void tsd_count_dalloc(tsd_t *tsd, size_t usize) {
	if (likely(tsd->state != TSD_DEAD))
		tsd->deallocated += usize;
	else
		atomic_fetch_add(&tsd_dead_deallocated, usize);
}

/* ------------------------------------------------------------------ hook.c */
/* jemalloc's experimental hooks (hooks_t of its hook.h, same layout and
 * argument conventions; the int types are jemalloc's hook_alloc_t,
 * hook_dalloc_t, hook_expand_t, below). */
enum {
	HOOK_ALLOC_MALLOC, HOOK_ALLOC_POSIX_MEMALIGN, HOOK_ALLOC_ALIGNED_ALLOC,
	HOOK_ALLOC_CALLOC, HOOK_ALLOC_MEMALIGN, HOOK_ALLOC_VALLOC,
	HOOK_ALLOC_MALLOCX, HOOK_ALLOC_REALLOC, HOOK_ALLOC_RALLOCX,
};
enum {
	HOOK_DALLOC_FREE, HOOK_DALLOC_DALLOCX, HOOK_DALLOC_SDALLOCX,
	HOOK_DALLOC_REALLOC, HOOK_DALLOC_RALLOCX,
};
enum { HOOK_EXPAND_REALLOC, HOOK_EXPAND_RALLOCX, HOOK_EXPAND_XALLOCX };
typedef void hook_alloc_fn(void *extra, int type, void *result,
    uintptr_t result_raw, uintptr_t args_raw[3]);
typedef void hook_dalloc_fn(void *extra, int type, void *address,
    uintptr_t args_raw[3]);
typedef void hook_expand_fn(void *extra, int type, void *address,
    size_t old_usize, size_t new_usize, uintptr_t result_raw,
    uintptr_t args_raw[4]);
typedef struct hook_set_s {
	hook_alloc_fn *alloc_hook;
	hook_dalloc_fn *dalloc_hook;
	hook_expand_fn *expand_hook;
	void *extra;
} hook_set_t;
#define HOOK_MAX 4               /* jemalloc's: EAGAIN past it */
/* Whether realloc (malloc.c) skips its shortcuts (junk:alloc, or hooks
 * installed); recomputed when either changes. */
extern _Atomic bool realloc_shortcut_off;
void realloc_shortcut_update(void);
/* experimental.thread.activity_callback's value. */
typedef struct hook_activity_thunk_s {
	void (*callback)(void *uctx, uint64_t allocated, uint64_t deallocated);
	void *uctx;
} hook_activity_thunk_t;
/* Sets installed: while non-zero every thread that has noticed runs
 * without fast paths, so that its calls reach the hooks. */
extern _Atomic unsigned hook_nactive;
static inline bool hook_active(void) {
	return atomic_load_explicit(&hook_nactive, memory_order_relaxed) != 0;
}
/* The handle, or NULL when HOOK_MAX sets are installed. */
void *hook_install(const hook_set_t *set);
bool hook_remove(void *handle);           /* true: no such handle */
/* A slow path or thread event: follow installs and removals made since
 * the thread last looked (its fast paths off / on).  Inline: two loads
 * and a compare on every slow-path allocation and free. */
extern _Atomic unsigned hook_gen;
extern __thread unsigned hook_gen_seen
    __attribute__((tls_model("initial-exec")));
void hook_thread_check_slow(tsd_t *tsd);
static inline void hook_thread_check(tsd_t *tsd) {
	if (unlikely(hook_gen_seen != atomic_load_explicit(&hook_gen,
	    memory_order_relaxed)))
		hook_thread_check_slow(tsd);
}
/* Suppress the hooks of nested calls: true if the caller now reports
 * (then hook_exit), false inside a hook or another report. */
bool hook_enter(void);
void hook_exit(void);
void hook_call_alloc(int type, void *result, uintptr_t result_raw,
    uintptr_t args[3]);
void hook_call_dalloc(int type, void *address, uintptr_t args[3]);
void hook_call_expand(int type, void *address, size_t old_usize,
    size_t new_usize, uintptr_t result_raw, uintptr_t args[4]);
/* experimental.hooks.safety_check_abort, and a failed check: the
 * program's function gets jemalloc's message (it may return); without
 * one, `ours` on stderr and abort(). */
void hook_safety_abort_set(void (*fn)(const char *));
void hook_safety_check_fail(const char *jemalloc_msg, const char *ours);
hook_activity_thunk_t hook_activity_get(void);
void hook_activity_set(hook_activity_thunk_t t);
void hook_activity_event(tsd_t *tsd);     /* tsd_event */
/*
 * Custom extent hooks that call back into the library (hook.c).  An
 * arena's custom hooks are called through a wrapper of trampolines,
 * which count the thread as inside an extent hook (hook_extent_depth)
 * for the call; the hooks still receive the program's extent_hooks_t *.
 * Inside, the thread's slow-path allocations skip its cache and come from
 * the hook arena (a hidden manual arena whose locks rank above every
 * other arena's), and its slow-path frees of small blocks go back as
 * remote frees: nothing that the hook's own arena lock, held by the
 * caller, could be needed for (jemalloc sends them to arena 0 instead,
 * holding no arena lock around its hooks).
 */
extern __thread unsigned hook_extent_depth
    __attribute__((tls_model("initial-exec")));
extern _Atomic(arena_t *) hook_extent_arena;
/* The hooks to store in an arena for the program's `user` (NULL if the
 * wrapper or the hook arena cannot be had); the default hooks as they
 * are.  Not with any lock held. */
extent_hooks_t *hook_extent_wrap(extent_hooks_t *user);
/* What the program gave for hooks an arena holds (they may be a wrapper). */
extent_hooks_t *hook_extent_unwrap(extent_hooks_t *h);

/* ------------------------------------------------- malloc.c and cxx.cpp */
/* stats.zero_reallocs: calls of realloc(non-NULL, 0). */
extern _Atomic size_t malloc_zero_reallocs;
/* The C++ operators (cxx.cpp, built when MP_CONFIG_CXX) reach the
 * allocator through these, defined in malloc.c; cxx.cpp repeats the
 * prototypes (it cannot include these C11 headers).  Hidden, like every
 * internal name. */
#define CXX_NEW 0                /* kinds of cxx_new_slow, the low bits */
#define CXX_NEW_ARRAY 1          /* of cxx.cpp's cxx_kind_t */
/* operator new / new[]: malloc's fast path; a miss tail-calls
 * cxx_new_slow. */
void *cxx_new(size_t size);
void *cxx_new_array(size_t size);
/* cxx.cpp: the allocation that missed, with the new-handler loop; throws
 * std::bad_alloc (C frames are never unwound: it is tail-called). */
void *cxx_new_slow(size_t size, unsigned kind);
/* An allocation whose profiler sample (if any) names `entry` as frame 0
 * and walks the stack from frame `fp`; NULL when out of memory. */
void *cxx_alloc(size_t size, size_t align, void *entry, uintptr_t fp);
/* experimental_infallible_new: operator new failed (hook.c): the safety
 * check failure (abort, or the program's hook, after which new returns
 * nullptr). */
void cxx_infallible_fail(size_t size);
/* free; free_aligned_sized, each with its fast path.  The sized deletes
 * without alignment are malloc.c's cxx_delete_sized, exported under their
 * mangled names. */
void cxx_free(void *p);
void cxx_free_aligned_sized(void *p, size_t align, size_t size);
/* Fills the sized frees' size -> class-tag table unless prof:true (from
 * malloc_init, before malloc_initialized is published); until then every
 * sized free takes the page map's path. */
void malloc_sized_boot(void);
/* Fill a thread's size -> class tag table (tsd's size_tags, which
 * malloc's fast path reads) before its fast paths are armed. */
void malloc_size_tags_copy(uint8_t *tags);

/* The junk bytes written over new and freed memory when junk is on. */
#define JUNK_ALLOC_BYTE 0xa5
#define JUNK_FREE_BYTE 0x5a

#endif /* MP_INTERNAL_ALLOC_H */
