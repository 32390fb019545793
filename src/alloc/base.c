/*
 * base.c: memory for the allocator's own metadata (extent_t records,
 * thread caches, arenas).  A bump allocator over 2 MiB mappings that are
 * never returned, plus a free list recycling extent_t records.  Metadata is
 * counted in stats.metadata, never in stats.allocated, and cannot recurse
 * into malloc.
 *
 * The profiler's blocks (base_malloc) are carved from bump regions of
 * their own, never from the allocator's: once the OS refuses mappings
 * (RLIMIT_AS, overcommit), the extent records a slab or a split needs
 * still come from what the allocator's region has left, exactly as in a
 * process without the profiler, while the profiler runs out on its own
 * and drops samples (prof.dropped_samples).  When both shared one region,
 * a profiled process could fail to carve a slab that an unprofiled one
 * would have: the profiler had taken the last of the region.
 *
 * Transparent huge pages: opt.thp applies to the bump chunks as to every
 * mapping, and metadata_thp advises them MADV_HUGEPAGE (always: from the
 * start; auto: once 20 MiB are mapped), as jemalloc advises its base
 * blocks.  The profiler's big blocks, mapped on their own and unmapped
 * when freed, are left to opt.thp's default.
 */
#include "malloc_prof/internal/internal.h"

#define BASE_CHUNK ((size_t)2 << 20)
/* metadata_thp:auto turns huge pages on with the chunk mapped once this
 * much metadata is: jemalloc's base of arena 0, which like this one
 * serves the whole process, switches on its fifth block, after 20 MiB
 * (blocks of 2, 4, 6 and 8 MiB).  Below it THP would mostly add resident
 * memory to a small process. */
#define BASE_AUTO_THP_MAPPED ((size_t)20 << 20)

/* The head of every bump chunk: the chunks are listed so that advice can
 * be given to those mapped before it was decided (base_thp_boot, the
 * auto switch). */
typedef struct base_chunk_s {
	struct base_chunk_s *next;
	size_t size;
} base_chunk_t;
#define BASE_CHUNK_HEAD ALIGNMENT_CEILING(sizeof(base_chunk_t), \
    (size_t)CACHELINE)

/* A bump region over BASE_CHUNK mappings (base_mtx). */
typedef struct {
	char *cur, *end;
	base_chunk_t *chunk;     /* the chunk cur is in */
} base_region_t;

static mp_mutex_t base_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_BASE);
static base_region_t base_meta;          /* the allocator's (base_mtx) */
static base_region_t base_prof;          /* the profiler's (base_mtx) */
static size_t base_mapped;               /* bytes mapped (base_mtx) */
static extent_t *base_extents_free;      /* recycled records (base_mtx) */
/* Transparent huge pages (base_mtx): every bump chunk, newest first;
 * whether the options were applied (base_thp_boot) and whether chunks
 * get MADV_HUGEPAGE now; the huge pages the advised chunks' used bytes
 * span (stats.metadata_thp, counted as jemalloc counts its n_thp). */
static base_chunk_t *base_chunks;
static size_t base_chunks_mapped;
static bool base_thp_booted;
static bool base_thp_on;
static size_t base_thp_pages;

bool base_boot(void) {
	mp_mutex_init(&base_mtx, LOCK_RANK_BASE);
	return false;
}

/* metadata_thp takes effect only where the kernel gives huge pages on
 * request (mode madvise), as in jemalloc: with "always" they come anyway,
 * with "never" not at all. */
static bool base_thp_madvise(void) {
	return opt_metadata_thp != METADATA_THP_DISABLED &&
	    os_thp_system() == OS_THP_DEFAULT;
}

/* Huge pages spanned by the first `used` bytes of a chunk. */
static size_t base_hp(size_t used) {
	return HUGEPAGE_CEILING(used) >> LG_HUGEPAGE;
}

static size_t base_chunk_used(const base_chunk_t *c) {
	const base_region_t *rs[2] = { &base_meta, &base_prof };
	for (unsigned i = 0; i < 2; i++) {
		if (rs[i]->chunk == c)
			return (size_t)(rs[i]->cur - (const char *)c);
	}
	return c->size;        /* retired: its tail is a few bytes */
}

/* Advise every chunk mapped so far and count its huge pages. */
static void base_thp_switch_locked(void) {
	base_thp_on = true;
	for (base_chunk_t *c = base_chunks; c != NULL; c = c->next) {
		os_pages_huge(c, c->size, true);
		base_thp_pages += base_hp(base_chunk_used(c));
	}
}

/* A new chunk: opt.thp applies as to any mapping (jemalloc's base_map),
 * then metadata_thp, switching `auto` on past its threshold. */
static void base_chunk_advise_locked(base_chunk_t *c) {
	if (!base_thp_booted)
		return;
	os_thp_apply(c, c->size, (os_thp_t)opt_thp);
	if (!base_thp_madvise())
		return;
	if (!base_thp_on && opt_metadata_thp == METADATA_THP_AUTO &&
	    base_chunks_mapped - c->size >= BASE_AUTO_THP_MAPPED) {
		base_thp_switch_locked();       /* includes c */
		return;
	}
	if (base_thp_on) {
		os_pages_huge(c, c->size, true);
		base_thp_pages += base_hp(BASE_CHUNK_HEAD);
	}
}

void base_thp_boot(void) {
	mp_mutex_lock(&base_mtx);
	if (!base_thp_booted) {
		base_thp_booted = true;
		for (base_chunk_t *c = base_chunks; c != NULL; c = c->next)
			os_thp_apply(c, c->size, (os_thp_t)opt_thp);
		if (base_thp_madvise() &&
		    (opt_metadata_thp == METADATA_THP_ALWAYS ||
		    base_chunks_mapped >= BASE_AUTO_THP_MAPPED))
			base_thp_switch_locked();
	}
	mp_mutex_unlock(&base_mtx);
}

size_t base_metadata_thp(void) {
	mp_mutex_lock(&base_mtx);
	size_t ret = base_thp_pages;
	mp_mutex_unlock(&base_mtx);
	return ret;
}

static void *base_alloc_locked(base_region_t *r, size_t size) {
	size = ALIGNMENT_CEILING(size, (size_t)CACHELINE);
	if ((size_t)(r->end - r->cur) < size) {
		size_t need = BASE_CHUNK_HEAD + size;
		if (need < size)
			return NULL;
		/* Huge-page sized and aligned when metadata may use huge
		 * pages, as jemalloc maps its base blocks. */
		bool huge = opt_metadata_thp != METADATA_THP_DISABLED;
		size_t chunk = need > BASE_CHUNK ? (huge ?
		    HUGEPAGE_CEILING(need) : PAGE_CEILING(need)) : BASE_CHUNK;
		if (chunk < need)
			return NULL;
		char *p = os_map(chunk, huge ? HUGEPAGE : PAGE);
		if (p == NULL)
			return NULL;
		base_mapped += chunk;
		base_chunks_mapped += chunk;
		base_chunk_t *c = (base_chunk_t *)p;
		c->size = chunk;
		c->next = base_chunks;
		base_chunks = c;
		/* The tail of the old chunk is abandoned: a few bytes. */
		r->chunk = c;
		r->cur = p + BASE_CHUNK_HEAD;
		r->end = p + chunk;
		base_chunk_advise_locked(c);
	}
	void *ret = r->cur;
	if (base_thp_on) {
		size_t off = (size_t)(r->cur - (char *)r->chunk);
		base_thp_pages += base_hp(off + size) - base_hp(off);
	}
	r->cur += size;
	return ret;
}

/* Fresh mappings read as zero, and nothing is ever freed back into the
 * bump region, so no memset is needed. */
void *base_alloc(size_t size) {
	mp_mutex_lock(&base_mtx);
	void *ret = base_alloc_locked(&base_meta, size);
	mp_mutex_unlock(&base_mtx);
	return ret;
}

extent_t *base_extent_alloc(void) {
	mp_mutex_lock(&base_mtx);
	extent_t *e = base_extents_free;
	if (e != NULL) {
		base_extents_free = e->next;
		mp_mutex_unlock(&base_mtx);
		memset(e, 0, sizeof(*e));
		return e;
	}
	e = base_alloc_locked(&base_meta, sizeof(extent_t));
	mp_mutex_unlock(&base_mtx);
	return e;
}

void base_extent_free(extent_t *e) {
	mp_mutex_lock(&base_mtx);
	e->next = base_extents_free;
	base_extents_free = e;
	mp_mutex_unlock(&base_mtx);
}

size_t base_mapped_bytes(void) {
	mp_mutex_lock(&base_mtx);
	size_t ret = base_mapped;
	mp_mutex_unlock(&base_mtx);
	return ret;
}

mp_mutex_t *base_mutex(void) {
	return &base_mtx;
}

void base_prefork(void) {
	pthread_mutex_lock(&base_mtx.lock);
}

void base_postfork_parent(void) {
	pthread_mutex_unlock(&base_mtx.lock);
}

void base_postfork_child(void) {
	mp_mutex_postfork_child(&base_mtx);
}

/*
 * Freeable metadata for the profiler.  Blocks up to BASE_SMALL_MAX bytes
 * are rounded to 64-byte classes and recycled through per-class free
 * lists (the first word links them) and carved from base_prof, the
 * profiler's own bump region; larger ones are mapped on their own.
 * Memory never goes back to the heap the program allocates from, so the
 * profiler cannot appear in its own profile.
 *
 * Most samples create and free a record, and many a tctx and a gctx too,
 * so each thread first recycles through a stash of its own (no lock):
 * classes below BASE_STASH_CLASSES, at most BASE_STASH_BYTES in all, given
 * back at thread exit.  A block may be freed by another thread than the
 * one that took it; it simply joins that thread's stash.
 */
#define BASE_NCLASSES (BASE_SMALL_MAX / CACHELINE)
#define BASE_STASH_BYTES 4096
static void *base_free_lists[BASE_NCLASSES];     /* base_mtx */

static tsd_t *base_stash_tsd(size_t cls) {
	tsd_t *tsd = &mp_tsd;
	return cls < BASE_STASH_CLASSES && tsd->state == TSD_NOMINAL ? tsd
	    : NULL;
}

void *base_malloc(size_t size) {
	if (size == 0)
		size = 1;
	if (size > BASE_SMALL_MAX) {
		size_t mapped = PAGE_CEILING(size);
		if (mapped < size)
			return NULL;
		void *p = os_map(mapped, PAGE);
		if (p != NULL) {
			mp_mutex_lock(&base_mtx);
			base_mapped += mapped;
			mp_mutex_unlock(&base_mtx);
		}
		return p;
	}
	size_t cls = (size - 1) / CACHELINE;
	size_t bytes = (cls + 1) * CACHELINE;
	tsd_t *tsd = base_stash_tsd(cls);
	void *p;
	if (tsd != NULL && (p = tsd->base_stash[cls]) != NULL) {
		tsd->base_stash[cls] = *(void **)p;
		tsd->base_stash_bytes -= (uint32_t)bytes;
	} else {
		mp_mutex_lock(&base_mtx);
		p = base_free_lists[cls];
		if (p == NULL) {
			/* fresh: zero */
			p = base_alloc_locked(&base_prof, bytes);
			mp_mutex_unlock(&base_mtx);
			return p;
		}
		base_free_lists[cls] = *(void **)p;
		mp_mutex_unlock(&base_mtx);
	}
	memset(p, 0, bytes);
	return p;
}

void base_free(void *p, size_t size) {
	if (p == NULL)
		return;
	if (size == 0)
		size = 1;
	if (size > BASE_SMALL_MAX) {
		size_t mapped = PAGE_CEILING(size);
		os_unmap(p, mapped);
		mp_mutex_lock(&base_mtx);
		base_mapped -= mapped;
		mp_mutex_unlock(&base_mtx);
		return;
	}
	size_t cls = (size - 1) / CACHELINE;
	size_t bytes = (cls + 1) * CACHELINE;
	tsd_t *tsd = base_stash_tsd(cls);
	if (tsd != NULL && tsd->base_stash_bytes + bytes <= BASE_STASH_BYTES) {
		*(void **)p = tsd->base_stash[cls];
		tsd->base_stash[cls] = p;
		tsd->base_stash_bytes += (uint32_t)bytes;
		return;
	}
	mp_mutex_lock(&base_mtx);
	*(void **)p = base_free_lists[cls];
	base_free_lists[cls] = p;
	mp_mutex_unlock(&base_mtx);
}

void base_stash_flush(tsd_t *tsd) {
	mp_mutex_lock(&base_mtx);
	for (size_t cls = 0; cls < BASE_STASH_CLASSES; cls++) {
		void *p;
		while ((p = tsd->base_stash[cls]) != NULL) {
			tsd->base_stash[cls] = *(void **)p;
			*(void **)p = base_free_lists[cls];
			base_free_lists[cls] = p;
		}
	}
	tsd->base_stash_bytes = 0;
	mp_mutex_unlock(&base_mtx);
}
