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
 */
#include "malloc_prof/internal/internal.h"

#define BASE_CHUNK ((size_t)2 << 20)

/* A bump region over BASE_CHUNK mappings (base_mtx). */
typedef struct {
	char *cur, *end;
} base_region_t;

static mp_mutex_t base_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_BASE);
static base_region_t base_meta;          /* the allocator's (base_mtx) */
static base_region_t base_prof;          /* the profiler's (base_mtx) */
static size_t base_mapped;               /* bytes mapped (base_mtx) */
static extent_t *base_extents_free;      /* recycled records (base_mtx) */

bool base_boot(void) {
	mp_mutex_init(&base_mtx, LOCK_RANK_BASE);
	return false;
}

static void *base_alloc_locked(base_region_t *r, size_t size) {
	size = ALIGNMENT_CEILING(size, (size_t)CACHELINE);
	if ((size_t)(r->end - r->cur) < size) {
		size_t chunk = size > BASE_CHUNK ? PAGE_CEILING(size)
		    : BASE_CHUNK;
		char *p = os_map(chunk, PAGE);
		if (p == NULL)
			return NULL;
		base_mapped += chunk;
		/* The tail of the old chunk is abandoned: a few bytes. */
		r->cur = p;
		r->end = p + chunk;
	}
	void *ret = r->cur;
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
#define BASE_SMALL_MAX ((size_t)4096)
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
