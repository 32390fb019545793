/*
 * ctl.c: mallctl, mallctlnametomib and mallctlbymib: jemalloc's named
 * tree of controls and statistics.
 *
 * The tree is plain static data.  A node either has children, looked up
 * by name, by number (an indexed level such as arena.<i>), or in the
 * options table (opt.<name>), or it is a leaf with a handler.  Handlers
 * are ordinary functions shared by kind: one reads a constant or variable
 * the node points at, one reads any opt.* row, one reads a field of the
 * stats snapshot at the offset stored in the node, and so on.  A MIB is
 * the path of child numbers (index levels store the index itself, and
 * opt.<name> stores the option's row).
 *
 * Statistics are served from a snapshot taken under ctl_mtx when "epoch"
 * is written (and once on first use), so that a set of values read
 * together is consistent.  The snapshot lives in static storage: no
 * allocation, whatever the number of arenas.  Only this file reads it
 * or takes ctl_mtx: malloc_stats_print's printer (stats.c) is handed a
 * copy (ctl_snapshot_copy), and mallinfo2 is here.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>

/* The glibc names (mallinfo2, mallinfo) exist only without a prefix, as
 * in malloc.c. */
#if MP_CAT(MP_PREFIX, 1) == 1
#define CTL_GLIBC_NAMES 1
#include <malloc.h>
#else
#define CTL_GLIBC_NAMES 0
#endif

/* ---------------------------------------------------------- snapshot */

static mp_mutex_t ctl_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_CTL);
static ctl_snapshot_t ctl_snap;          /* ctl_mtx */

MP_WARM bool ctl_boot(void) {
	mp_mutex_init(&ctl_mtx, LOCK_RANK_CTL);
	return false;
}

void ctl_prefork(void) {
	mp_mutex_lock(&ctl_mtx);
}

void ctl_postfork_parent(void) {
	mp_mutex_unlock(&ctl_mtx);
}

void ctl_postfork_child(void) {
	mp_mutex_postfork_child(&ctl_mtx);
}

/* acc += s, field by field (nthreads too: threads attached anywhere). */
static void ctl_stats_merge(arena_stats_t *acc, const arena_stats_t *s) {
	acc->mapped += s->mapped;
	acc->retained += s->retained;
	acc->pactive += s->pactive;
	acc->pdirty += s->pdirty;
	acc->pmuzzy += s->pmuzzy;
	acc->npurge += s->npurge;
	acc->nmadvise += s->nmadvise;
	acc->purged += s->purged;
	acc->muzzy_npurge += s->muzzy_npurge;
	acc->muzzy_nmadvise += s->muzzy_nmadvise;
	acc->muzzy_purged += s->muzzy_purged;
	acc->large_allocated += s->large_allocated;
	acc->large_nmalloc += s->large_nmalloc;
	acc->large_ndalloc += s->large_ndalloc;
	acc->slabs_cur += s->slabs_cur;
	acc->slabs_total += s->slabs_total;
	acc->cached_bytes += s->cached_bytes;
	acc->nthreads += s->nthreads;
	/* opt.hpa's pageslabs (hpa.c). */
	acc->hpa_npageslabs += s->hpa_npageslabs;
	acc->hpa_nhuge += s->hpa_nhuge;
	acc->hpa_nactive += s->hpa_nactive;
	acc->hpa_ndirty += s->hpa_ndirty;
	acc->hpa_npurge_passes += s->hpa_npurge_passes;
	acc->hpa_npurges += s->hpa_npurges;
	acc->hpa_nhugifies += s->hpa_nhugifies;
	acc->hpa_ndehugifies += s->hpa_ndehugifies;
	acc->hpa_sec_bytes += s->hpa_sec_bytes;
}

/* ------------------------------------------- per-class statistics */

/* The per-class tables of each arena that has existed, made at the first
 * refresh that sees it (metadata, kept: an index is never handed out
 * twice for long), and the merged one.  ctl_mtx. */
static ctl_arena_xsnap_t *ctl_xsnaps[ARENAS_MAX];
static ctl_arena_xsnap_t ctl_merged_x;

static uint64_t ctl_load(_Atomic uint64_t *c) {
	return atomic_load_explicit(c, memory_order_relaxed);
}

/* a - b, or 0: counters read one after another may cross (a free
 * counted before the read of its malloc's counter is not possible, but
 * another thread's is). */
static uint64_t ctl_diff(uint64_t a, uint64_t b) {
	return a > b ? a - b : 0;
}

/* Arena 0 is made at initialisation: its uptime, which the merged arena
 * takes too, is the library's, as jemalloc gives it. */
static uint64_t ctl_uptime(const arena_t *arena, uint64_t now) {
	return ctl_diff(now, arena->create_ns);
}

const char *const ctl_arena_mutex_names[CTL_ARENA_NMUTEXES] = {
	"large", "tcache_list", "shared_cache",
};

static mp_mutex_t *ctl_arena_mutex(arena_t *arena, unsigned k) {
	switch (k) {
	case CTL_MUTEX_LARGE: return &arena->mtx;
	case CTL_MUTEX_TCACHE_LIST: return &arena->orphans_mtx;
	default: return &arena->shared_mtx;
	}
}

/* Counters summed, maxima kept (jemalloc's merge of mutex stats). */
static void ctl_mutex_prof_merge(mp_mutex_prof_t *acc,
    const mp_mutex_prof_t *m) {
	acc->n_lock_ops += m->n_lock_ops;
	acc->n_wait_times += m->n_wait_times;
	acc->n_owner_switches += m->n_owner_switches;
	acc->n_spin_acquired += m->n_spin_acquired;
	acc->tot_wait_ns += m->tot_wait_ns;
	if (m->max_wait_ns > acc->max_wait_ns)
		acc->max_wait_ns = m->max_wait_ns;
	if (m->max_n_thds > acc->max_n_thds)
		acc->max_n_thds = m->max_n_thds;
}

/* ---------------------------------------------- library-wide locks */

/* stats.mutexes.<name>: jemalloc's global locks, in the order of the
 * children of stats.mutexes after "reset".  ctl's own and the background
 * thread's are known here; the profiler registers its own
 * (ctl_mutex_register: ctl calls no prof function), summed per name (its
 * backtrace table is sharded). */
const char *const ctl_gmutex_names[CTL_NGMUTEXES] = {
	"ctl", "background_thread", "prof", "prof_thds_data", "prof_dump",
	"prof_recent_alloc", "prof_recent_dump",
};
#define CTL_GMUTEX_REG_MAX 96
/* Written at boot only, by every process: in .data (MP_DATA), not on a
 * page of .bss of their own. */
static MP_DATA struct {
	unsigned which;
	mp_mutex_t *m;
} ctl_gmutex_reg[CTL_GMUTEX_REG_MAX];
static MP_DATA _Atomic unsigned ctl_gmutex_nreg;
/* base.c's lock: the library's metadata, which arena 0 (and so the
 * merged arena) carries, as its base statistics (ctl_mtx). */
static mp_mutex_prof_t ctl_base_mutex_snap;

MP_WARM bool ctl_mutex_register(const char *name, mp_mutex_t *m) {
	unsigned w = CTL_GMUTEX_PROF;
	while (w < CTL_NGMUTEXES && strcmp(name, ctl_gmutex_names[w]) != 0)
		w++;
	if (w == CTL_NGMUTEXES)
		return true;
	unsigned i = atomic_load(&ctl_gmutex_nreg);
	if (i >= CTL_GMUTEX_REG_MAX)
		return true;
	ctl_gmutex_reg[i].which = w;
	ctl_gmutex_reg[i].m = m;
	atomic_store(&ctl_gmutex_nreg, i + 1);
	return false;
}

/* Each read takes the lock once, as in ctl_xsnap_read. */
static void ctl_gmutex_refresh_locked(void) {
	memset(ctl_snap.gmutexes, 0, sizeof(ctl_snap.gmutexes));
	/* we hold ctl_mtx */
	mp_mutex_prof_copy_held(&ctl_mtx, &ctl_snap.gmutexes[CTL_GMUTEX_CTL]);
	mp_mutex_prof_read(background_thread_mutex(),
	    &ctl_snap.gmutexes[CTL_GMUTEX_BG]);
	unsigned n = atomic_load(&ctl_gmutex_nreg);
	for (unsigned i = 0; i < n; i++) {
		mp_mutex_prof_t m;
		mp_mutex_prof_read(ctl_gmutex_reg[i].m, &m);
		ctl_mutex_prof_merge(&ctl_snap.gmutexes[ctl_gmutex_reg[i].which],
		    &m);
	}
	mp_mutex_prof_read(base_mutex(), &ctl_base_mutex_snap);
}

/* --------------------------------------------- destroyed arenas' sum */

/* MALLCTL_ARENAS_DESTROYED (jemalloc's 4097): stats.arenas.4097.* is the
 * sum of the arenas arena.<i>.destroy has destroyed, merged at each
 * destroy (as jemalloc does, not at the next epoch): their counters;
 * what they held is 0, since they hold nothing.  Until a first destroy
 * the index does not exist (ENOENT) and arena.4097.initialized is
 * false.  ctl_mtx. */
#define CTL_ARENAS_DESTROYED (ARENAS_MAX + 1)
static bool ctl_destroyed_init;
static arena_stats_t ctl_destroyed;
static ctl_arena_xsnap_t ctl_destroyed_x;
static ctl_arena_xsnap_t ctl_destroyed_scratch;

/* x <- arena's per-class counters and the figures derived from them and
 * from its arena_stats_t s. */
static void ctl_xsnap_read(arena_t *arena, const arena_stats_t *s,
    ctl_arena_xsnap_t *x, uint64_t now) {
	memset(x, 0, sizeof(*x));
	for (unsigned j = 0; j < SC_NBINS; j++) {
		arena_bin_stats_t *bs = &arena->bstats[j];
		ctl_bin_snap_t *b = &x->bins[j];
		/* ndalloc first: a region is freed after it is taken. */
		b->ndalloc = ctl_load(&bs->ndalloc);
		b->nmalloc = ctl_load(&bs->nmalloc);
		/* Every malloc of the class, those served by cache bins
		 * included, as they were merged: a bin's own count reaches
		 * the arena at its fills, flushes and GC visits (tcache.c),
		 * so it lags as jemalloc's does.  Not a bound of nmalloc
		 * either way: a fill takes regions no request used yet. */
		b->nrequests = ctl_load(&bs->nrequests);
		b->nfills = ctl_load(&bs->nfills);
		b->nflushes = ctl_load(&bs->nflushes);
		b->nslabs = ctl_load(&bs->nslabs);
		b->nreslabs = ctl_load(&bs->nreslabs);
		uint64_t full = ctl_load(&bs->fullslabs);
		b->curslabs = (size_t)ctl_load(&bs->curslabs);
		b->curregs = (size_t)ctl_diff(b->nmalloc, b->ndalloc);
		b->nonfull_slabs = (size_t)ctl_diff(b->curslabs, full);
		x->small_allocated += b->curregs * sz_index2size(j);
		x->small_nmalloc += b->nmalloc;
		x->small_ndalloc += b->ndalloc;
		x->small_nrequests += b->nrequests;
		x->small_nfills += b->nfills;
		x->small_nflushes += b->nflushes;
	}
	for (unsigned j = 0; j < SC_NLEXTENTS; j++) {
		arena_lextent_stats_t *ls = &arena->lstats[j];
		ctl_lextent_snap_t *l = &x->lextents[j];
		l->ndalloc = ctl_load(&ls->ndalloc);
		l->nmalloc = ctl_load(&ls->nmalloc);
		l->nrequests = ctl_load(&ls->nrequests);
		l->curlextents = (size_t)ctl_diff(l->nmalloc, l->ndalloc);
		x->large_nrequests += l->nrequests;
	}
	x->large_nflushes = ctl_load(&arena->large_nflushes);
	x->uptime = ctl_uptime(arena, now);
	x->dirty_decay_ms = arena_dirty_decay_ms(arena);
	x->muzzy_decay_ms = arena_muzzy_decay_ms(arena);
	/* Metadata is the library's, not an arena's (base.c): arena 0
	 * carries it, so that the merged figures are the global ones. */
	if (arena->ind == 0) {
		x->base = base_mapped_bytes();
		x->metadata_thp = base_metadata_thp();
	}
	x->tcache_bytes = s->cached_bytes;
	x->resident = ((s->pactive + s->pdirty) << LG_PAGE) + x->base;
	x->muzzy_npurge = s->muzzy_npurge;
	x->muzzy_nmadvise = s->muzzy_nmadvise;
	x->muzzy_purged = s->muzzy_purged;
	/* Each read takes the lock once, counted as jemalloc counts its own
	 * reads. */
	for (unsigned k = 0; k < CTL_ARENA_NMUTEXES; k++)
		mp_mutex_prof_read(ctl_arena_mutex(arena, k), &x->mutexes[k]);
}

/* acc += x, field by field; the decay times and uptime are set by the
 * caller. */
static void ctl_xsnap_merge(ctl_arena_xsnap_t *acc,
    const ctl_arena_xsnap_t *x) {
	for (unsigned j = 0; j < SC_NBINS; j++) {
		ctl_bin_snap_t *a = &acc->bins[j];
		const ctl_bin_snap_t *b = &x->bins[j];
		a->nmalloc += b->nmalloc;
		a->ndalloc += b->ndalloc;
		a->nrequests += b->nrequests;
		a->nfills += b->nfills;
		a->nflushes += b->nflushes;
		a->nslabs += b->nslabs;
		a->nreslabs += b->nreslabs;
		a->curregs += b->curregs;
		a->curslabs += b->curslabs;
		a->nonfull_slabs += b->nonfull_slabs;
	}
	for (unsigned j = 0; j < SC_NLEXTENTS; j++) {
		acc->lextents[j].nmalloc += x->lextents[j].nmalloc;
		acc->lextents[j].ndalloc += x->lextents[j].ndalloc;
		acc->lextents[j].nrequests += x->lextents[j].nrequests;
		acc->lextents[j].curlextents += x->lextents[j].curlextents;
	}
	acc->small_allocated += x->small_allocated;
	acc->small_nmalloc += x->small_nmalloc;
	acc->small_ndalloc += x->small_ndalloc;
	acc->small_nrequests += x->small_nrequests;
	acc->small_nfills += x->small_nfills;
	acc->small_nflushes += x->small_nflushes;
	acc->large_nrequests += x->large_nrequests;
	acc->large_nfills += x->large_nfills;
	acc->large_nflushes += x->large_nflushes;
	acc->base += x->base;
	acc->internal += x->internal;
	acc->resident += x->resident;
	acc->metadata_thp += x->metadata_thp;
	acc->extent_avail += x->extent_avail;
	acc->tcache_bytes += x->tcache_bytes;
	acc->abandoned_vm += x->abandoned_vm;
	acc->muzzy_npurge += x->muzzy_npurge;
	acc->muzzy_nmadvise += x->muzzy_nmadvise;
	acc->muzzy_purged += x->muzzy_purged;
	for (unsigned k = 0; k < CTL_ARENA_NMUTEXES; k++)
		ctl_mutex_prof_merge(&acc->mutexes[k], &x->mutexes[k]);
}

/* Add arena's counters to the destroyed arenas' sum (ctl_mtx held), with
 * the arena reset and its caches flushed: what it holds, 0 by then, is
 * not carried. */
static void ctl_destroyed_read_locked(arena_t *arena, arena_stats_t *s,
    ctl_arena_xsnap_t *x) {
	arena_stats_read(arena, s);
	s->mapped = s->retained = s->pactive = s->pdirty = s->pmuzzy = 0;
	s->large_allocated = s->slabs_cur = s->cached_bytes = 0;
	s->nthreads = 0;
	ctl_xsnap_read(arena, s, x, os_now_ns());
	for (unsigned j = 0; j < SC_NBINS; j++) {
		x->bins[j].curregs = x->bins[j].curslabs = 0;
		x->bins[j].nonfull_slabs = 0;
	}
	for (unsigned j = 0; j < SC_NLEXTENTS; j++)
		x->lextents[j].curlextents = 0;
	x->small_allocated = 0;
	x->base = x->internal = x->resident = x->metadata_thp = 0;
	x->extent_avail = x->tcache_bytes = x->abandoned_vm = 0;
	x->uptime = 0;
}

static void ctl_destroyed_add_locked(const arena_stats_t *s,
    const ctl_arena_xsnap_t *x) {
	ctl_stats_merge(&ctl_destroyed, s);
	ctl_xsnap_merge(&ctl_destroyed_x, x);
	ctl_destroyed_x.dirty_decay_ms = x->dirty_decay_ms;
	ctl_destroyed_x.muzzy_decay_ms = x->muzzy_decay_ms;
	ctl_destroyed_init = true;
}

/* The snapshot of stats.arenas.<i> for i an arena, MALLCTL_ARENAS_ALL or
 * MALLCTL_ARENAS_DESTROYED (ctl_mtx held; the index was checked by
 * ctl_stats_arena_bad_index). */
static const arena_stats_t *ctl_stats_at(size_t i) {
	if (i == ARENAS_MAX)
		return &ctl_snap.merged;
	if (i == CTL_ARENAS_DESTROYED)
		return &ctl_destroyed;
	return &ctl_snap.arenas[i].stats;
}

static const ctl_arena_xsnap_t *ctl_x_at(size_t i) {
	if (i == ARENAS_MAX)
		return ctl_snap.merged_x;
	if (i == CTL_ARENAS_DESTROYED)
		return &ctl_destroyed_x;
	return ctl_snap.arenas[i].x;
}

static void ctl_refresh_locked(void) {
	unsigned n = atomic_load(&narenas_total);
	if (n > ARENAS_MAX)
		n = ARENAS_MAX;
	arena_stats_t *m = &ctl_snap.merged;
	memset(m, 0, sizeof(*m));
	ctl_arena_xsnap_t *mx = &ctl_merged_x;
	memset(mx, 0, sizeof(*mx));
	ctl_snap.merged_x = mx;
	uint64_t now = os_now_ns();
	for (unsigned i = 0; i < n; i++) {
		ctl_arena_snap_t *as = &ctl_snap.arenas[i];
		arena_t *arena = arena_get(i, false);
		as->initialized = arena != NULL;
		as->x = NULL;
		if (arena == NULL) {
			memset(&as->stats, 0, sizeof(as->stats));
			continue;
		}
		arena_stats_read(arena, &as->stats);
		ctl_stats_merge(m, &as->stats);
		if (ctl_xsnaps[i] == NULL)
			ctl_xsnaps[i] = base_alloc(sizeof(ctl_arena_xsnap_t));
		if (ctl_xsnaps[i] != NULL) {
			as->x = ctl_xsnaps[i];
			ctl_xsnap_read(arena, &as->stats, as->x, now);
			ctl_xsnap_merge(mx, as->x);
			if (i == 0)
				mx->uptime = as->x->uptime;
		}
	}
	/* The merged arena's decay times: what new arenas get. */
	mx->dirty_decay_ms = arena_decay_ms_resolve(
	    atomic_load(&arena_dirty_decay_ms_default), true);
	mx->muzzy_decay_ms = arena_decay_ms_resolve(
	    atomic_load(&arena_muzzy_decay_ms_default), false);
	ctl_snap.zero_reallocs = atomic_load_explicit(&malloc_zero_reallocs,
	    memory_order_relaxed);
	mp_mutex_prof_copy_held(&ctl_mtx, &ctl_snap.mutex_ctl); /* we hold it */
	ctl_gmutex_refresh_locked();
	ctl_snap.destroyed = ctl_destroyed;
	ctl_snap.destroyed_x = ctl_destroyed_init ? &ctl_destroyed_x : NULL;
	uint64_t allocated, deallocated;
	tsd_totals(&allocated, &deallocated);
	/* Another thread's free can be counted before its malloc is: the
	 * difference may be briefly negative. */
	ctl_snap.allocated = allocated > deallocated ?
	    (size_t)(allocated - deallocated) : 0;
	ctl_snap.metadata = base_mapped_bytes();
	ctl_snap.metadata_thp = base_metadata_thp();
	ctl_snap.active = m->pactive << LG_PAGE;
	ctl_snap.resident = ctl_snap.active + (m->pdirty << LG_PAGE) +
	    ctl_snap.metadata;
	ctl_snap.mapped = m->mapped - m->retained + ctl_snap.metadata;
	ctl_snap.retained = m->retained;
	ctl_snap.narenas = n;
	ctl_snap.epoch++;
}

static void ctl_snapshot_ensure_locked(void) {
	if (ctl_snap.epoch == 0)
		ctl_refresh_locked();
}

/*
 * The block is mapped after the refresh, under ctl_mtx, so that the
 * snapshot's metadata does not count it (stats print what they printed
 * when no copy was made).  It is far above base_malloc's 4 KiB classes,
 * so it is mapped on its own and ctl_snapshot_free unmaps it: a print
 * leaves stats.metadata as it found it.  Only the arenas that exist are
 * copied; the pages of the rest are never touched.
 */
ctl_snapshot_t *ctl_snapshot_copy(void) {
	mp_mutex_lock(&ctl_mtx);
	ctl_refresh_locked();
	/* The tables follow the snapshot: slot i for arena i, then the
	 * merged one, then the destroyed arenas' sum (if any). */
	size_t size = sizeof(ctl_snapshot_t) + ((size_t)ctl_snap.narenas + 2) *
	    sizeof(ctl_arena_xsnap_t);
	ctl_snapshot_t *copy = base_malloc(size);
	if (copy != NULL) {
		ctl_arena_xsnap_t *xs = (ctl_arena_xsnap_t *)(copy + 1);
		memcpy(copy, &ctl_snap, offsetof(ctl_snapshot_t, arenas));
		memcpy(copy->arenas, ctl_snap.arenas, ctl_snap.narenas *
		    sizeof(ctl_snap.arenas[0]));
		copy->copy_size = size;
		for (unsigned i = 0; i < ctl_snap.narenas; i++) {
			if (ctl_snap.arenas[i].x == NULL)
				continue;
			xs[i] = *ctl_snap.arenas[i].x;
			copy->arenas[i].x = &xs[i];
		}
		xs[ctl_snap.narenas] = *ctl_snap.merged_x;
		copy->merged_x = &xs[ctl_snap.narenas];
		if (ctl_snap.destroyed_x != NULL) {
			xs[ctl_snap.narenas + 1] = *ctl_snap.destroyed_x;
			copy->destroyed_x = &xs[ctl_snap.narenas + 1];
		}
	}
	mp_mutex_unlock(&ctl_mtx);
	return copy;
}

void ctl_snapshot_free(ctl_snapshot_t *copy) {
	base_free(copy, copy->copy_size);
}

/* -------------------------------------------------------------- nodes */

static size_t ctl_type_size(ctl_type_t type) {
	switch (type) {
	case CTL_T_BOOL: return sizeof(bool);
	case CTL_T_UNSIGNED: return sizeof(unsigned);
	case CTL_T_SIZE: return sizeof(size_t);
	case CTL_T_U64: return sizeof(uint64_t);
	case CTL_T_STR: return sizeof(const char *);
	case CTL_T_U64P: return sizeof(uint64_t *);
	case CTL_T_SSIZE: return sizeof(ssize_t);
	case CTL_T_NONE: break;
	}
	mp_not_reached();
}

/* ----------------------------------------------------- access helpers */

/*
 * Hand a value of `len` bytes to the caller, jemalloc's way: nothing if
 * there is nowhere to put it; with a wrong *oldlenp, copy what fits, say
 * how much, and fail with EINVAL.
 */
int ctl_read(void *oldp, size_t *oldlenp, const void *v, size_t len) {
	if (oldp == NULL || oldlenp == NULL)
		return 0;
	if (*oldlenp != len) {
		size_t n = *oldlenp < len ? *oldlenp : len;
		memcpy(oldp, v, n);
		*oldlenp = n;
		return EINVAL;
	}
	memcpy(oldp, v, len);
	return 0;
}

/* A read whose size is wrong: rw nodes check it before changing state. */
bool ctl_oldlen_bad(void *oldp, size_t *oldlenp, size_t len) {
	return oldp != NULL && oldlenp != NULL && *oldlenp != len;
}

bool ctl_writes(void *newp, size_t newlen) {
	return newp != NULL || newlen != 0;
}

bool ctl_reads(void *oldp, size_t *oldlenp) {
	return oldp != NULL || oldlenp != NULL;
}

/* ------------------------------------------------------------ handlers */

#if MP_CONFIG_DEBUG
/* rw: debug.mmap_fail, fault injection (os_mmap_fail_set): a write of n
 * makes the nth OS mapping from now and every later one fail (0: off);
 * a read gives what is left (1: failing now). */
static int ctl_debug_mmap_fail(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	size_t old = os_mmap_fail_get();
	if (newp != NULL) {
		if (newlen != sizeof(size_t))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		os_mmap_fail_set(*(const size_t *)newp);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* r-: debug.mmap_failures, the mappings failed by debug.mmap_fail. */
static int ctl_debug_mmap_failures(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t n = os_mmap_fail_count();
	return ctl_read(oldp, oldlenp, &n, sizeof(n));
}
#endif

/* r-: the constant or variable at node->ptr. */
static int ctl_var_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	return ctl_read(oldp, oldlenp, node->ptr, ctl_type_size(node->type));
}

/* rw: any write takes a new snapshot; reads give the current epoch. */
static int ctl_epoch(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (newp != NULL && newlen != sizeof(uint64_t))
		return EINVAL;
	mp_mutex_lock(&ctl_mtx);
	if (newp != NULL)
		ctl_refresh_locked();
	else
		ctl_snapshot_ensure_locked();
	uint64_t epoch = ctl_snap.epoch;
	mp_mutex_unlock(&ctl_mtx);
	return ctl_read(oldp, oldlenp, &epoch, sizeof(epoch));
}

/* r-: opt.<name>, typed by the option's row (mib[1]). */
static int ctl_opt_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	const conf_opt_t *opt = &conf_opts[mib[1]];
	if (opt->readout != NULL)
		return ctl_read(oldp, oldlenp, opt->readout,
		    opt->readout_size);
	const char *s;
	switch (opt->type) {
	case CONF_BOOL:
		return ctl_read(oldp, oldlenp, opt->var, sizeof(bool));
	case CONF_UNSIGNED:
		return ctl_read(oldp, oldlenp, opt->var, sizeof(unsigned));
	case CONF_SIZE_T:
		return ctl_read(oldp, oldlenp, opt->var, sizeof(size_t));
	case CONF_SSIZE_T:
		return ctl_read(oldp, oldlenp, opt->var, sizeof(ssize_t));
	case CONF_STRING:
	case CONF_ENUM:
		s = conf_opt_str(opt);
		return ctl_read(oldp, oldlenp, &s, sizeof(s));
	}
	mp_not_reached();
}

/* rw: the calling thread's arena; a new index must name an arena that
 * has been handed out (EFAULT).  With percpu_arena the per-CPU arenas are
 * chosen by the CPU, not by the thread: moving to another of them is
 * EPERM, as jemalloc; an arena past them (manual, or automatic beyond
 * the per-CPU ones) is allowed, and ends the following of the CPU for
 * this thread. */
static int ctl_thread_arena(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	tsd_t *tsd = tsd_fetch();
	unsigned old = tsd->arena != NULL ? tsd->arena->ind : 0;
	if (newp != NULL) {
		if (newlen != sizeof(unsigned))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		unsigned ind = *(const unsigned *)newp;
		if (ind >= atomic_load(&narenas_total))
			return EFAULT;
		if (ind != old && ind < arena_percpu_limit)
			return EPERM;
		if (tsd_arena_set(tsd, ind))
			return EFAULT;
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* r-: a uint64_t counter of the calling thread's tsd at node->off, or
 * (CTL_T_U64P) a pointer to it. */
static int ctl_thread_counter(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t *field = (uint64_t *)((char *)tsd_fetch() + node->off);
	if (node->type == CTL_T_U64P)
		return ctl_read(oldp, oldlenp, &field, sizeof(field));
	uint64_t v = *field;
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* rw: whether the calling thread uses its cache. */
static int ctl_thread_tcache_enabled(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	tsd_t *tsd = tsd_fetch();
	bool old = tsd->tcache_enabled;
	if (newp != NULL) {
		if (newlen != sizeof(bool))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		tsd_tcache_set_enabled(tsd, *(const bool *)newp);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* rw: background_thread, the purging thread (background_thread.c).  A
 * write returns the old value; EAGAIN if the thread cannot be created. */
static int ctl_background_thread(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	bool old = background_thread_enabled();
	if (newp != NULL) {
		if (newlen != sizeof(bool))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		if (background_thread_set(*(const bool *)newp, &old))
			return EAGAIN;
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* rw: max_background_threads, jemalloc's limit on its purging threads.
 * One thread does all the purging here, so the limit in effect is 1
 * (opt.max_background_threads, set so at boot): 1 may be written, and, as
 * in jemalloc, 0 or more than the option is EINVAL. */
static int ctl_max_background_threads(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	size_t old = opt_max_background_threads;
	if (newp != NULL) {
		if (newlen != sizeof(size_t))
			return EINVAL;
		size_t v = *(const size_t *)newp;
		if (v == 0 || v > opt_max_background_threads)
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* r-: stats.background_thread.*, read live; node->off picks the value
 * (0 num_threads, 1 num_runs, 2 run_interval). */
static int ctl_stats_background_thread(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t nthreads;
	uint64_t v[2];
	background_thread_stats(&nthreads, &v[0], &v[1]);
	if (node->off == 0)
		return ctl_read(oldp, oldlenp, &nthreads, sizeof(nthreads));
	return ctl_read(oldp, oldlenp, &v[node->off - 1], sizeof(v[0]));
}

/* --: return the calling thread's cached memory to its arena. */
static int ctl_thread_tcache_flush(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp) || ctl_writes(newp, newlen))
		return EPERM;
	tsd_t *tsd = tsd_fetch();
	if (!tsd->tcache_enabled || tsd->tcache == NULL)
		return EFAULT;
	tsd_tcache_flush(tsd);
	return 0;
}

/* r-: thread.peak.read, the calling thread's peak of allocated -
 * deallocated since its last thread.peak.reset (or its start), checked at
 * its events and now (tsd.c says how fine that is). */
static int ctl_thread_peak_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t v = tsd_peak_read(tsd_fetch());
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* --: thread.peak.reset, the peak starts again from the current value. */
static int ctl_thread_peak_reset(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp) || ctl_writes(newp, newlen))
		return EPERM;
	tsd_peak_reset(tsd_fetch());
	return 0;
}

/*
 * --: thread.idle, the caller will not allocate for a while: give its
 * cached memory back (as thread.tcache.flush, but no error without a
 * cache), and purge its arena if no other thread is attached to it (as
 * arena.<i>.purge), since then nobody is about to reuse those pages.
 * jemalloc leaves which clean-ups run unspecified; its own purge
 * condition (more arenas than twice the CPUs) is a proxy for the same
 * thing, an arena shared by few threads.
 */
static int ctl_thread_idle(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp) || ctl_writes(newp, newlen))
		return EPERM;
	tsd_t *tsd = tsd_fetch();
	if (tsd->tcache_enabled && tsd->tcache != NULL)
		tsd_tcache_flush(tsd);
	arena_t *arena = tsd->arena;
	if (arena != NULL && atomic_load(&arena->nthreads) <= 1)
		tcache_arena_decay(arena, true);
	return 0;
}

static int ctl_arenas_narenas(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	unsigned n = atomic_load(&narenas_total);
	return ctl_read(oldp, oldlenp, &n, sizeof(n));
}

/* arenas.bin.<i>.* and arenas.lextent.<i>.size: the index is mib[2]. */
static int ctl_arenas_bin_size(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t v = sz_index2size((unsigned)mib[2]);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

static int ctl_arenas_bin_nregs(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint32_t v = sz_slab_nregs_get((unsigned)mib[2]);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

static int ctl_arenas_bin_slab_size(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t v = sz_slab_size_get((unsigned)mib[2]);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

static int ctl_arenas_lextent_size(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t v = sz_index2size((unsigned)(SC_NBINS + mib[2]));
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: arenas.nhbins, the size classes a thread cache keeps: every small
 * class (whatever tcache_max) and the large ones up to tcache_max. */
static int ctl_arenas_nhbins(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	unsigned n = SC_NBINS;
	while (n < SC_NBINS + TCACHE_NLARGE && sz_index2size(n) <=
	    opt_tcache_max)
		n++;
	return ctl_read(oldp, oldlenp, &n, sizeof(n));
}

/*
 * arenas.lookup: write a pointer (void *), read the index (unsigned) of
 * the arena its block came from.  EINVAL, as jemalloc, for a wrong
 * newlen, for no pointer, and for a pointer that is not inside a block
 * this allocator handed out (unknown page: stack, static, another
 * allocator's; or a free extent).  Sampled small objects live in arena
 * 0's profiler slabs and read 0.
 */
static int ctl_arenas_lookup(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (newp == NULL || newlen != sizeof(void *))
		return EINVAL;
	const char *p = *(void *const *)newp;
	extent_t *e = pagemap_lookup(p);
	if (e == NULL || (e->kind != EXTENT_SLAB && e->kind != EXTENT_LARGE) ||
	    p < e->addr || p >= e->addr + e->size || e->arena == NULL)
		return EINVAL;
	unsigned ind = e->arena->ind;
	return ctl_read(oldp, oldlenp, &ind, sizeof(ind));
}

/*
 * Decay times (node->off: 1 dirty, 0 muzzy).  A value is accepted in the
 * option's range (its conf row: -1 never, 0 at once, up to a max); out of
 * range is EFAULT, as jemalloc.
 */
static bool ctl_decay_ms_bad(ssize_t ms, bool dirty) {
	const char *name = dirty ? "dirty_decay_ms" : "muzzy_decay_ms";
	const conf_opt_t *opt = conf_opt_lookup(name, strlen(name));
	return ms < opt->min || ms > opt->max;
}

/* The common half of the *_decay_ms nodes: a read only (no newp) gives
 * old; a write whose size, old-value buffer or time is wrong gives its
 * error; either way the result, >= 0.  -1: a valid write, whose time is
 * *ms, for the caller to apply before it returns old. */
static int ctl_decay_ms_new(void *oldp, size_t *oldlenp, const void *newp,
    size_t newlen, ssize_t old, bool dirty, ssize_t *ms) {
	if (newp == NULL)
		return ctl_read(oldp, oldlenp, &old, sizeof(old));
	if (newlen != sizeof(ssize_t))
		return EINVAL;
	if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
		return ctl_read(oldp, oldlenp, &old, sizeof(old));
	*ms = *(const ssize_t *)newp;
	return ctl_decay_ms_bad(*ms, dirty) ? EFAULT : -1;
}

/* rw: arenas.dirty_decay_ms / muzzy_decay_ms, the times arenas made from
 * now on start with (automatic arenas included, made when a first thread
 * picks them); opt.* keeps the value the process started with. */
static int ctl_arenas_decay_ms(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	bool dirty = node->off != 0;
	_Atomic ssize_t *def = dirty ? &arena_dirty_decay_ms_default :
	    &arena_muzzy_decay_ms_default;
	ssize_t old = arena_decay_ms_resolve(atomic_load(def), dirty), ms;
	int r = ctl_decay_ms_new(oldp, oldlenp, newp, newlen, old, dirty, &ms);
	if (r >= 0)
		return r;
	atomic_store(def, ms);
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* rw: make a new manual arena and say its index; the value written, if
 * any, is the extent_hooks_t * it is to use (jemalloc's type). */
static int ctl_arenas_create(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	extent_hooks_t *hooks = NULL;
	if (newp != NULL) {
		if (newlen != sizeof(extent_hooks_t *))
			return EINVAL;
		hooks = *(extent_hooks_t *const *)newp;
	}
	if (ctl_oldlen_bad(oldp, oldlenp, sizeof(unsigned)))
		return EINVAL;
	/* Custom hooks are called through hook.c's wrapper, so that they
	 * may allocate. */
	if (hooks != NULL && (hooks = hook_extent_wrap(hooks)) == NULL)
		return EAGAIN;
	unsigned ind;
	if (arena_create_hooked(&ind, hooks))
		return EAGAIN;
	return ctl_read(oldp, oldlenp, &ind, sizeof(ind));
}

/* arena.<i>.purge / decay: i (mib[1]) is an arena or MALLCTL_ARENAS_ALL;
 * an index handed out but whose arena was never made has nothing to do. */
static int ctl_arena_decay_common(const size_t *mib, void *oldp,
    size_t *oldlenp, void *newp, size_t newlen, bool force) {
	if (ctl_reads(oldp, oldlenp) || ctl_writes(newp, newlen))
		return EPERM;
	unsigned n = atomic_load(&narenas_total);
	if (mib[1] == ARENAS_MAX) {
		for (unsigned i = 0; i < n; i++) {
			arena_t *arena = arena_get(i, false);
			if (arena != NULL)
				tcache_arena_decay(arena, force);
		}
		return 0;
	}
	if (mib[1] >= n)
		return ENOENT;
	arena_t *arena = arena_get((unsigned)mib[1], false);
	if (arena != NULL)
		tcache_arena_decay(arena, force);
	return 0;
}

/* r-: arena.<i>.initialized, whether arena i has been made (an index of
 * arenas.create or an automatic one no thread took yet may not be);
 * MALLCTL_ARENAS_ALL stands for the arenas that are, as in jemalloc, and
 * MALLCTL_ARENAS_DESTROYED for the destroyed ones' sum (true once one
 * was destroyed). */
static int ctl_arena_initialized(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	bool v = mib[1] == ARENAS_MAX ||
	    arena_get((unsigned)mib[1], false) != NULL;
	if (mib[1] == CTL_ARENAS_DESTROYED) {
		mp_mutex_lock(&ctl_mtx);
		v = ctl_destroyed_init;
		mp_mutex_unlock(&ctl_mtx);
	}
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* rw: arena.<i>.dirty_decay_ms / muzzy_decay_ms, arena i's own, in
 * effect at once (arena_decay_ms_set).  EFAULT, as jemalloc, for
 * MALLCTL_ARENAS_ALL and an arena not made yet. */
static int ctl_arena_decay_ms(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	bool dirty = node->off != 0;
	arena_t *arena = mib[1] == ARENAS_MAX ? NULL :
	    arena_get((unsigned)mib[1], false);
	if (arena == NULL)
		return EFAULT;
	ssize_t old = dirty ? arena_dirty_decay_ms(arena) :
	    arena_muzzy_decay_ms(arena), ms;
	int r = ctl_decay_ms_new(oldp, oldlenp, newp, newlen, old, dirty, &ms);
	if (r >= 0)
		return r;
	arena_decay_ms_set(arena, dirty, ms);
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

static int ctl_arena_purge(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	return ctl_arena_decay_common(mib, oldp, oldlenp, newp, newlen, true);
}

static int ctl_arena_decay(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	return ctl_arena_decay_common(mib, oldp, oldlenp, newp, newlen,
	    false);
}

/* ---- arena.<i> lifecycle: extent hooks, reset, destroy, dss,
 * retain_grow_limit (types and error codes as jemalloc 5.3's) ---- */

/* The arena of an index for the lifecycle nodes: NULL for
 * MALLCTL_ARENAS_ALL and an index without an arena (EFAULT); automatic
 * ones are made on first use, as jemalloc's arena_init. */
static arena_t *ctl_lifecycle_arena(const size_t *mib) {
	return mib[1] == ARENAS_MAX ? NULL : arena_get((unsigned)mib[1], true);
}

/* rw: the arena's extent_hooks_t *; a write installs new ones (NULL:
 * EINVAL) and reads back the old.  Custom hooks are stored as hook.c's
 * wrapper of them (so that they may allocate) and read back as given.
 * The hook arena, which serves those allocations, keeps the defaults
 * (EFAULT). */
static int ctl_arena_extent_hooks(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	arena_t *arena = ctl_lifecycle_arena(mib);
	if (arena == NULL)
		return EFAULT;
	extent_hooks_t *old = hook_extent_unwrap(atomic_load(&arena->hooks));
	if (newp != NULL) {
		if (newlen != sizeof(extent_hooks_t *) ||
		    *(extent_hooks_t *const *)newp == NULL)
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		if (arena == atomic_load(&hook_extent_arena))
			return EFAULT;
		extent_hooks_t *h = hook_extent_wrap(
		    *(extent_hooks_t *const *)newp);
		if (h == NULL)
			return EAGAIN;
		mp_mutex_lock(&arena->mtx);
		old = hook_extent_unwrap(atomic_load(&arena->hooks));
		atomic_store(&arena->hooks, h);
		mp_mutex_unlock(&arena->mtx);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* --: arena.<i>.reset (off 0) and destroy (off 1).  EPERM for a read or
 * a value, EFAULT for an arena that is not a manual one (or, for
 * destroy, that threads are still attached to). */
static int ctl_arena_reset_destroy(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp) || ctl_writes(newp, newlen))
		return EPERM;
	arena_t *arena = mib[1] == ARENAS_MAX ? NULL :
	    arena_get((unsigned)mib[1], false);
	if (arena == NULL || !arena->manual ||
	    arena == atomic_load(&hook_extent_arena))
		return EFAULT;
	if (node->off != 0 && atomic_load(&arena->nthreads) != 0)
		return EFAULT;
	tcache_arena_shared_flush(arena);
	tcache_orphans_collect(arena, UINT32_MAX);
	if (node->off == 0) {
		arena_reset(arena);
		return 0;
	}
	/* Its counters join the destroyed arenas' sum, read once it is
	 * reset (arena_destroy's reset then has nothing left to do) and
	 * before its record can be reused by an arenas.create. */
	mp_mutex_lock(&ctl_mtx);
	arena_reset(arena);
	arena_stats_t s;
	ctl_destroyed_read_locked(arena, &s, &ctl_destroyed_scratch);
	bool failed = arena_destroy(arena);
	if (!failed)
		ctl_destroyed_add_locked(&s, &ctl_destroyed_scratch);
	mp_mutex_unlock(&ctl_mtx);
	return failed ? EFAULT : 0;
}

/* rw: arena.<i>.dss, a const char * (disabled|primary|secondary); for
 * MALLCTL_ARENAS_ALL the mode of arenas made from now on (opt.dss keeps
 * the start-up value).  An unknown name: EINVAL; NULL: no change. */
static int ctl_arena_dss(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	bool all = mib[1] == ARENAS_MAX;
	arena_t *arena = all ? NULL : ctl_lifecycle_arena(mib);
	if (!all && arena == NULL)
		return EFAULT;
	unsigned cur = all ? arena_dss_default : extent_dss_get(arena->ind);
	const char *old = dss_mode_names[cur];
	if (newp != NULL) {
		if (newlen != sizeof(const char *))
			return EINVAL;
		/* A NULL name changes nothing, as in jemalloc. */
		const char *name = *(const char *const *)newp;
		unsigned m = cur;
		if (name != NULL) {
			m = DSS_NMODES;
			for (unsigned i = 0; i < DSS_NMODES; i++) {
				if (strcmp(name, dss_mode_names[i]) == 0)
					m = i;
			}
		}
		if (m == DSS_NMODES)
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		if (all)
			arena_dss_default = m;
		else
			extent_dss_set(arena->ind, m);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* rw: arena.<i>.retain_grow_limit (size_t), the largest mapping the
 * arena's growth asks for, rounded down to pages; under a page: EFAULT,
 * as jemalloc. */
static int ctl_arena_retain_grow_limit(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	arena_t *arena = ctl_lifecycle_arena(mib);
	if (arena == NULL)
		return EFAULT;
	mp_mutex_lock(&arena->mtx);
	size_t old = extent_grow_limit(arena);
	mp_mutex_unlock(&arena->mtx);
	if (newp != NULL) {
		if (newlen != sizeof(size_t))
			return EINVAL;
		size_t limit = *(const size_t *)newp;
		if (limit < PAGE)
			return EFAULT;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		mp_mutex_lock(&arena->mtx);
		arena->grow_limit = limit & ~(size_t)(PAGE - 1);
		mp_mutex_unlock(&arena->mtx);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* r-: a size_t total of the snapshot at node->off. */
static int ctl_stats_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t v;
	mp_mutex_lock(&ctl_mtx);
	ctl_snapshot_ensure_locked();
	memcpy(&v, (const char *)&ctl_snap + node->off, sizeof(v));
	mp_mutex_unlock(&ctl_mtx);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: a field of arena mib[2]'s snapshot (or of the merged one for
 * MALLCTL_ARENAS_ALL) at node->off, of node->type. */
static int ctl_stats_arena_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t buf;        /* big enough for every field type */
	size_t len = ctl_type_size(node->type);
	mp_mutex_lock(&ctl_mtx);
	ctl_snapshot_ensure_locked();
	const arena_stats_t *s = ctl_stats_at(mib[2]);
	memcpy(&buf, (const char *)s + node->off, len);
	mp_mutex_unlock(&ctl_mtx);
	return ctl_read(oldp, oldlenp, &buf, len);
}

/*
 * The per-class tree below stats.arenas.<i> (and the figures kept with
 * it, ctl_arena_xsnap_t): a field of arena mib[2]'s table, or of the
 * merged one, at node->off, of node->type; for bins.<j> and
 * lextents.<j> (node->ptr: which), of entry mib[4].  EAGAIN if the table
 * could not be made (no metadata memory).
 */
enum { CTL_X_ARENA, CTL_X_BIN, CTL_X_LEXTENT };
static const int ctl_x_bin = CTL_X_BIN, ctl_x_lextent = CTL_X_LEXTENT;

static int ctl_stats_arena_x_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t buf;        /* big enough for every field type */
	size_t len = ctl_type_size(node->type);
	int which = node->ptr != NULL ? *(const int *)node->ptr : CTL_X_ARENA;
	mp_mutex_lock(&ctl_mtx);
	ctl_snapshot_ensure_locked();
	const ctl_arena_xsnap_t *x = ctl_x_at(mib[2]);
	if (x == NULL) {
		mp_mutex_unlock(&ctl_mtx);
		return EAGAIN;
	}
	const char *p = (const char *)x;
	if (which == CTL_X_BIN)
		p = (const char *)&x->bins[mib[4]];
	else if (which == CTL_X_LEXTENT)
		p = (const char *)&x->lextents[mib[4]];
	memcpy(&buf, p + node->off, len);
	mp_mutex_unlock(&ctl_mtx);
	return ctl_read(oldp, oldlenp, &buf, len);
}

/* r-: stats.arenas.<i>.dss, the arena's sbrk precedence (arena.<i>.dss);
 * for MALLCTL_ARENAS_ALL, that of arenas made from now on. */
static int ctl_stats_arena_dss(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	unsigned m = mib[2] == ARENAS_MAX ? arena_dss_default :
	    extent_dss_get((unsigned)mib[2]);
	const char *v = dss_mode_names[m < DSS_NMODES ? m : 0];
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* --: stats.mutexes.reset, zero the profiling counters of every lock
 * stats.mutexes.* and stats.arenas.<i>.mutexes.* show (the next
 * snapshot shows it). */
static int ctl_stats_mutexes_reset(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp) || ctl_writes(newp, newlen))
		return EPERM;
	mp_mutex_prof_reset(&ctl_mtx);
	mp_mutex_prof_reset(background_thread_mutex());
	mp_mutex_prof_reset(base_mutex());
	unsigned nreg = atomic_load(&ctl_gmutex_nreg);
	for (unsigned i = 0; i < nreg; i++)
		mp_mutex_prof_reset(ctl_gmutex_reg[i].m);
	unsigned n = atomic_load(&narenas_total);
	for (unsigned i = 0; i < n && i < ARENAS_MAX; i++) {
		arena_t *arena = arena_get(i, false);
		for (unsigned k = 0; arena != NULL && k < CTL_ARENA_NMUTEXES;
		    k++)
			mp_mutex_prof_reset(ctl_arena_mutex(arena, k));
	}
	return 0;
}

/* r-: a lock's counter (node->off into mp_mutex_prof_t, node->type):
 * stats.mutexes.<m>.* (a MIB of 4, m being mib[2] - 1 in the order of
 * ctl_gmutex_names), or stats.arenas.<i>.mutexes.<m>.*, m being mib[4]
 * (the order of ctl_arena_mutex_names, then jemalloc's other names). */
enum { CTL_ARENA_MUTEX_BASE = CTL_ARENA_NMUTEXES + 6 };
static int ctl_stats_mutex_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t buf;
	size_t len = ctl_type_size(node->type);
	mp_mutex_lock(&ctl_mtx);
	ctl_snapshot_ensure_locked();
	static const mp_mutex_prof_t none;
	const mp_mutex_prof_t *m = &none;
	if (miblen != 6) {
		m = &ctl_snap.gmutexes[mib[2] - 1];
	} else {
		const ctl_arena_xsnap_t *x = ctl_x_at(mib[2]);
		if (x == NULL) {
			mp_mutex_unlock(&ctl_mtx);
			return EAGAIN;
		}
		/* jemalloc's extents_*, decay_* and extent_avail locks are
		 * all arena->mtx here; base is the library's one. */
		if (mib[4] < CTL_ARENA_NMUTEXES)
			m = &x->mutexes[mib[4]];
		else if (mib[4] != CTL_ARENA_MUTEX_BASE)
			m = &x->mutexes[CTL_MUTEX_LARGE];
		else if (mib[2] == 0 || mib[2] == ARENAS_MAX)
			m = &ctl_base_mutex_snap;
		else
			m = &none;
	}
	memcpy(&buf, (const char *)m + node->off, len);
	mp_mutex_unlock(&ctl_mtx);
	return ctl_read(oldp, oldlenp, &buf, len);
}

/*
 * r-: stats.arenas.<i>.extents.<j>.*, the free extents of page-count
 * class j (mib[4]) in arena i (the sum for MALLCTL_ARENAS_ALL, none for
 * MALLCTL_ARENAS_DESTROYED): node->off is the kind (0 dirty, 1 muzzy,
 * 2 retained, which are the clean ones here), + 3 for bytes rather than
 * extents.  Counted under each arena's lock when read, not kept per
 * epoch: keeping 200 classes x 6 counts per arena up to date would cost
 * every extent operation.
 */
static size_t ctl_extents_count(arena_t *arena, unsigned j, unsigned off) {
	static const unsigned kinds[3] = {
		EXTENT_FREE_DIRTY, EXTENT_FREE_MUZZY, EXTENT_FREE_CLEAN,
	};
	size_t v = 0;
	mp_mutex_lock(&arena->mtx);
	for (const extent_t *e = arena->sets[kinds[off % 3]].heads[j];
	    e != NULL; e = e->next)
		v += off < 3 ? 1 : e->size;
	mp_mutex_unlock(&arena->mtx);
	return v;
}

static int ctl_stats_arena_extents(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t v = 0;
	unsigned n = atomic_load(&narenas_total);
	for (unsigned i = 0; i < n && mib[2] != CTL_ARENAS_DESTROYED; i++) {
		if (mib[2] != ARENAS_MAX && mib[2] != i)
			continue;
		arena_t *arena = arena_get(i, false);
		if (arena != NULL)
			v += ctl_extents_count(arena, (unsigned)mib[4],
			    (unsigned)node->off);
	}
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: stats.arenas.<i>.bins.<j>.mutex.*: 0, of node->type.  No lock
 * guards a size class here (a slab belongs to one thread's cache, or to
 * the arena's shared cache, counted as mutexes.shared_cache). */
static int ctl_stats_zero_read(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t zero = 0;
	return ctl_read(oldp, oldlenp, &zero, ctl_type_size(node->type));
}

/* ------------------------------------------ experimental.utilization */

/*
 * What jemalloc's inspect_extent_util_stats_get reports for a pointer:
 * the extent's free regions, its regions and its size in bytes; a large
 * block is 0, 1, its size; a pointer into no block of ours 0, 0, 0.  A
 * slab's free regions are those neither held nor in a cache bin: its
 * owner's free map and the regions other threads gave back that the
 * owner has not collected yet.  The owner's counts are read without its
 * cooperation: exact from the owning thread (Valkey's defragmenter runs
 * in the thread that allocated), a moment's picture from another.
 */
typedef struct ctl_util_s {
	size_t nfree, nregs, size;
} ctl_util_t;
typedef struct ctl_util_verbose_s {
	void *slabcur_addr;
	size_t nfree, nregs, size, bin_nfree, bin_nregs;
} ctl_util_verbose_t;

static extent_t *ctl_util_extent(const void *p) {
	extent_t *e = p != NULL ? pagemap_lookup(p) : NULL;
	if (e == NULL || (e->kind != EXTENT_SLAB && e->kind != EXTENT_LARGE) ||
	    (const char *)p < e->addr || (const char *)p >= e->addr + e->size)
		return NULL;
	return e;
}

static void ctl_util_get(const void *p, ctl_util_t *u) {
	extent_t *e = ctl_util_extent(p);
	memset(u, 0, sizeof(*u));
	if (e == NULL)
		return;
	u->size = e->size;
	if (e->kind != EXTENT_SLAB) {
		u->nregs = 1;
		return;
	}
	uint32_t nregs = e->nregs;
	uint32_t used = __atomic_load_n(&e->used, __ATOMIC_RELAXED);
	uint32_t remote = 0;
	for (unsigned w = 0; w < (nregs + 63) / 64; w++)
		remote += util_popcount64(atomic_load_explicit(
		    &e->remote_bits[w], memory_order_relaxed));
	u->nregs = nregs;
	u->nfree = used >= nregs ? remote : nregs - used + remote;
	if (u->nfree > nregs)
		u->nfree = nregs;
}

/* rw: experimental.utilization.query.  Write one pointer, read a
 * ctl_util_verbose_t (jemalloc's inspect_extent_util_stats_verbose_t):
 * the extent's figures, the arena's for the size class (free and total
 * regions over its slabs, from the live counters) and the address of the
 * owning cache's current slab of that class (NULL for a large block, or
 * a slab no thread owns).  EINVAL for a missing argument or a wrong
 * size. */
static int ctl_util_query(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (newp == NULL || oldp == NULL || oldlenp == NULL ||
	    newlen != sizeof(void *) ||
	    *oldlenp != sizeof(ctl_util_verbose_t))
		return EINVAL;
	const void *p = *(void *const *)newp;
	ctl_util_t u;
	ctl_util_get(p, &u);
	ctl_util_verbose_t v;
	memset(&v, 0, sizeof(v));
	v.nfree = u.nfree;
	v.nregs = u.nregs;
	v.size = u.size;
	extent_t *e = ctl_util_extent(p);
	if (e != NULL && e->kind == EXTENT_SLAB && e->arena != NULL) {
		arena_bin_stats_t *bs = &e->arena->bstats[e->szind];
		uint64_t nd = ctl_load(&bs->ndalloc);
		uint64_t curregs = ctl_diff(ctl_load(&bs->nmalloc), nd);
		uint64_t total = ctl_load(&bs->curslabs) *
		    (uint64_t)sz_slab_nregs_get(e->szind);
		v.bin_nregs = (size_t)total;
		v.bin_nfree = (size_t)ctl_diff(total, curregs);
		tcache_t *owner = slab_owner(e);
		if (owner != NULL && owner != &extent_large_owner) {
			extent_t *cur = __atomic_load_n(
			    &owner->bins[e->szind].partial, __ATOMIC_RELAXED);
			if (cur != NULL)
				v.slabcur_addr = cur->addr;
		}
	}
	memcpy(oldp, &v, sizeof(v));
	return 0;
}

/* rw: experimental.utilization.batch_query.  Write n pointers, read n
 * ctl_util_t (jemalloc's inspect_extent_util_stats_t), in order.  EINVAL
 * unless n > 0 and *oldlenp is exactly n of them. */
static int ctl_util_batch_query(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	size_t n = newlen / sizeof(void *);
	if (newp == NULL || oldp == NULL || oldlenp == NULL || newlen == 0 ||
	    newlen != n * sizeof(void *) || *oldlenp != n * sizeof(ctl_util_t))
		return EINVAL;
	void *const *ptrs = newp;
	ctl_util_t *out = oldp;
	for (size_t i = 0; i < n; i++) {
		ctl_util_t u;
		ctl_util_get(ptrs[i], &u);
		memcpy(&out[i], &u, sizeof(u));
	}
	return 0;
}

/* r-: experimental.arenas.<i>.pactivep, a pointer to arena i's count of
 * active pages (size_t), which the program may read at any time without
 * a mallctl (it changes under the arena's lock; a read is a moment's
 * picture).  EFAULT for an arena not made yet or MALLCTL_ARENAS_ALL. */
static int ctl_experimental_pactivep(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	arena_t *arena = mib[2] == ARENAS_MAX ? NULL :
	    arena_get((unsigned)mib[2], false);
	if (arena == NULL)
		return EFAULT;
	size_t *p = &arena->stats.pactive;
	return ctl_read(oldp, oldlenp, &p, sizeof(p));
}

/* ------------------------------------------------------ index checks */

static bool ctl_bin_bad_index(size_t i) {
	return i >= SC_NBINS;
}

static bool ctl_lextent_bad_index(size_t i) {
	return i >= SC_NLEXTENTS;
}

/* stats.arenas.<i>.extents.<j>: a page-count class (sz_psz_floor). */
static bool ctl_psz_bad_index(size_t i) {
	return i >= EXTENT_NPSIZES;
}

/* arena.<i>: any index handed out, MALLCTL_ARENAS_ALL, or
 * MALLCTL_ARENAS_DESTROYED (whose only node is initialized: the others
 * find no arena there, EFAULT or ENOENT). */
static bool ctl_arena_bad_index(size_t i) {
	return i != ARENAS_MAX && i != CTL_ARENAS_DESTROYED &&
	    i >= atomic_load(&narenas_total);
}

/* stats.arenas.<i>: an arena that existed at the last refresh,
 * MALLCTL_ARENAS_ALL for the sum, or MALLCTL_ARENAS_DESTROYED once an
 * arena was destroyed. */
static bool ctl_stats_arena_bad_index(size_t i) {
	if (i == ARENAS_MAX)
		return false;
	mp_mutex_lock(&ctl_mtx);
	ctl_snapshot_ensure_locked();
	bool bad = i == CTL_ARENAS_DESTROYED ? !ctl_destroyed_init :
	    i >= ctl_snap.narenas || !ctl_snap.arenas[i].initialized;
	mp_mutex_unlock(&ctl_mtx);
	return bad;
}

/* ---------------------------------------------------------------- tree */

_Static_assert(sizeof(unsigned) == sizeof(uint32_t),
    "arena_stats_t.nthreads is read as an unsigned");

static const char *const ctl_version = MP_VERSION;
static const char *const ctl_prefix = MP_PREFIX_STR;
static const size_t ctl_quantum = QUANTUM;
static const size_t ctl_page = PAGE;
static const unsigned ctl_nbins = SC_NBINS;
static const unsigned ctl_nlextents = SC_NLEXTENTS;

/*
 * config.*: what jemalloc's configure switches would have been for this
 * library.  Always built in: junk/zero filling (fill), statistics
 * (stats) and cache-oblivious large blocks (cache_oblivious: arena.c
 * offsets a large block by a random number of cache lines when
 * opt.cache_oblivious is on).  Never: a lazily taken lock (lazy_lock: our
 * locks are always taken), utrace(2) tracing (utrace), and libgcc's or
 * libunwind's unwinder (the profiler has its own frame-pointer and
 * .eh_frame walkers).  malloc_conf: no configure option compiles a
 * default options string into the library (an application's own
 * `malloc_conf` symbol is read at start-up instead, conf.c), so "".
 * xmalloc: true, as opt.xmalloc exists (a run-time option here, off by
 * default).  opt_safety_checks: false, jemalloc's release-build checks
 * (sized-free mismatch, redzones) are debug-build checks here.
 */
#define CTL_CONFIG_BOOL(n, v)						\
	{ .name = (n), .handler = ctl_var_read, .type = CTL_T_BOOL,	\
	  .ptr = (v) ? &ctl_true : &ctl_false }
static const bool ctl_true = true, ctl_false = false;
static const char *const ctl_config_malloc_conf = "";

static const ctl_node_t ctl_config_children[] = {
	{ .name = "debug", .handler = ctl_var_read, .type = CTL_T_BOOL,
	  .ptr = &config_debug },
	{ .name = "prof", .handler = ctl_var_read, .type = CTL_T_BOOL,
	  .ptr = &config_prof },
	{ .name = "prefix", .handler = ctl_var_read, .type = CTL_T_STR,
	  .ptr = &ctl_prefix },
	CTL_CONFIG_BOOL("cache_oblivious", true),
	CTL_CONFIG_BOOL("fill", true),
	CTL_CONFIG_BOOL("lazy_lock", false),
	{ .name = "malloc_conf", .handler = ctl_var_read, .type = CTL_T_STR,
	  .ptr = &ctl_config_malloc_conf },
	CTL_CONFIG_BOOL("opt_safety_checks", false),
	CTL_CONFIG_BOOL("prof_libgcc", false),
	CTL_CONFIG_BOOL("prof_libunwind", false),
	CTL_CONFIG_BOOL("stats", true),
	CTL_CONFIG_BOOL("utrace", false),
	CTL_CONFIG_BOOL("xmalloc", true),
};

/* Every opt.<name>: the row is mib[1]. */
static const ctl_node_t ctl_opt_leaf = {
	.name = "", .handler = ctl_opt_read,
};

static const ctl_node_t ctl_thread_peak_children[] = {
	{ .name = "read", .handler = ctl_thread_peak_read },
	{ .name = "reset", .handler = ctl_thread_peak_reset },
};

static const ctl_node_t ctl_thread_tcache_children[] = {
	{ .name = "enabled", .handler = ctl_thread_tcache_enabled },
	{ .name = "flush", .handler = ctl_thread_tcache_flush },
};

/* Non-const: src/prof/ hangs thread.prof's children here (ctl_register). */
static ctl_node_t ctl_thread_children[] = {
	{ .name = "arena", .handler = ctl_thread_arena },
	{ .name = "allocated", .handler = ctl_thread_counter,
	  .type = CTL_T_U64, .off = offsetof(tsd_t, allocated) },
	{ .name = "allocatedp", .handler = ctl_thread_counter,
	  .type = CTL_T_U64P, .off = offsetof(tsd_t, allocated) },
	{ .name = "deallocated", .handler = ctl_thread_counter,
	  .type = CTL_T_U64, .off = offsetof(tsd_t, deallocated) },
	{ .name = "deallocatedp", .handler = ctl_thread_counter,
	  .type = CTL_T_U64P, .off = offsetof(tsd_t, deallocated) },
	{ .name = "tcache", CTL_CHILDREN(ctl_thread_tcache_children) },
	{ .name = "prof" },             /* prof_ctl.c registers them */
	{ .name = "peak", CTL_CHILDREN(ctl_thread_peak_children) },
	{ .name = "idle", .handler = ctl_thread_idle },
};

static const ctl_node_t ctl_arenas_bin_i_children[] = {
	{ .name = "size", .handler = ctl_arenas_bin_size },
	{ .name = "nregs", .handler = ctl_arenas_bin_nregs },
	{ .name = "slab_size", .handler = ctl_arenas_bin_slab_size },
};
static const ctl_node_t ctl_arenas_bin_i[] = {
	{ .name = "", CTL_CHILDREN(ctl_arenas_bin_i_children) },
};

static const ctl_node_t ctl_arenas_lextent_i_children[] = {
	{ .name = "size", .handler = ctl_arenas_lextent_size },
};
static const ctl_node_t ctl_arenas_lextent_i[] = {
	{ .name = "", CTL_CHILDREN(ctl_arenas_lextent_i_children) },
};

static const ctl_node_t ctl_arenas_children[] = {
	{ .name = "narenas", .handler = ctl_arenas_narenas },
	{ .name = "quantum", .handler = ctl_var_read, .type = CTL_T_SIZE,
	  .ptr = &ctl_quantum },
	{ .name = "page", .handler = ctl_var_read, .type = CTL_T_SIZE,
	  .ptr = &ctl_page },
	{ .name = "tcache_max", .handler = ctl_var_read, .type = CTL_T_SIZE,
	  .ptr = &opt_tcache_max },
	{ .name = "nbins", .handler = ctl_var_read, .type = CTL_T_UNSIGNED,
	  .ptr = &ctl_nbins },
	{ .name = "bin", .kind = CTL_INDEXED,
	  .bad_index = ctl_bin_bad_index, CTL_CHILDREN(ctl_arenas_bin_i) },
	{ .name = "nlextents", .handler = ctl_var_read,
	  .type = CTL_T_UNSIGNED, .ptr = &ctl_nlextents },
	{ .name = "lextent", .kind = CTL_INDEXED,
	  .bad_index = ctl_lextent_bad_index,
	  CTL_CHILDREN(ctl_arenas_lextent_i) },
	{ .name = "create", .handler = ctl_arenas_create },
	{ .name = "nhbins", .handler = ctl_arenas_nhbins },
	{ .name = "lookup", .handler = ctl_arenas_lookup },
	{ .name = "dirty_decay_ms", .handler = ctl_arenas_decay_ms,
	  .off = 1 },
	{ .name = "muzzy_decay_ms", .handler = ctl_arenas_decay_ms,
	  .off = 0 },
};

static const ctl_node_t ctl_arena_i_children[] = {
	{ .name = "purge", .handler = ctl_arena_purge },
	{ .name = "decay", .handler = ctl_arena_decay },
	{ .name = "initialized", .handler = ctl_arena_initialized },
	{ .name = "dirty_decay_ms", .handler = ctl_arena_decay_ms,
	  .off = 1 },
	{ .name = "muzzy_decay_ms", .handler = ctl_arena_decay_ms,
	  .off = 0 },
	{ .name = "extent_hooks", .handler = ctl_arena_extent_hooks },
	{ .name = "reset", .handler = ctl_arena_reset_destroy, .off = 0 },
	{ .name = "destroy", .handler = ctl_arena_reset_destroy, .off = 1 },
	{ .name = "dss", .handler = ctl_arena_dss },
	{ .name = "retain_grow_limit",
	  .handler = ctl_arena_retain_grow_limit },
};
static const ctl_node_t ctl_arena_i[] = {
	{ .name = "", CTL_CHILDREN(ctl_arena_i_children) },
};

#define CTL_ARENA_STAT(n, t, field)					\
	{ .name = (n), .handler = ctl_stats_arena_read, .type = (t),	\
	  .off = offsetof(arena_stats_t, field) }

/* Fields of the per-class tables (ctl_arena_xsnap_t) and their
 * entries. */
#define CTL_ARENA_X(n, t, field)					\
	{ .name = (n), .handler = ctl_stats_arena_x_read, .type = (t),	\
	  .off = offsetof(ctl_arena_xsnap_t, field) }
#define CTL_ARENA_BIN(n, t, field)					\
	{ .name = (n), .handler = ctl_stats_arena_x_read, .type = (t),	\
	  .ptr = &ctl_x_bin, .off = offsetof(ctl_bin_snap_t, field) }
#define CTL_ARENA_LEXTENT(n, t, field)					\
	{ .name = (n), .handler = ctl_stats_arena_x_read, .type = (t),	\
	  .ptr = &ctl_x_lextent, .off = offsetof(ctl_lextent_snap_t, field) }

static const ctl_node_t ctl_stats_arenas_i_large_children[] = {
	CTL_ARENA_STAT("allocated", CTL_T_SIZE, large_allocated),
	CTL_ARENA_STAT("nmalloc", CTL_T_U64, large_nmalloc),
	CTL_ARENA_STAT("ndalloc", CTL_T_U64, large_ndalloc),
	CTL_ARENA_X("nrequests", CTL_T_U64, large_nrequests),
	CTL_ARENA_X("nfills", CTL_T_U64, large_nfills),
	CTL_ARENA_X("nflushes", CTL_T_U64, large_nflushes),
};

static const ctl_node_t ctl_stats_arenas_i_small_children[] = {
	CTL_ARENA_STAT("curslabs", CTL_T_SIZE, slabs_cur),
	CTL_ARENA_STAT("nslabs", CTL_T_U64, slabs_total),
	CTL_ARENA_X("allocated", CTL_T_SIZE, small_allocated),
	CTL_ARENA_X("nmalloc", CTL_T_U64, small_nmalloc),
	CTL_ARENA_X("ndalloc", CTL_T_U64, small_ndalloc),
	CTL_ARENA_X("nrequests", CTL_T_U64, small_nrequests),
	CTL_ARENA_X("nfills", CTL_T_U64, small_nfills),
	CTL_ARENA_X("nflushes", CTL_T_U64, small_nflushes),
};

#define CTL_ZERO_STAT(n, t)						\
	{ .name = (n), .handler = ctl_stats_zero_read, .type = (t) }
static const ctl_node_t ctl_stats_bin_mutex_children[] = {
	CTL_ZERO_STAT("num_ops", CTL_T_U64),
	CTL_ZERO_STAT("num_wait", CTL_T_U64),
	CTL_ZERO_STAT("num_spin_acq", CTL_T_U64),
	CTL_ZERO_STAT("num_owner_switch", CTL_T_U64),
	CTL_ZERO_STAT("total_wait_time", CTL_T_U64),
	CTL_ZERO_STAT("max_wait_time", CTL_T_U64),
	CTL_ZERO_STAT("max_num_thds", CTL_T_UNSIGNED),
};

static const ctl_node_t ctl_stats_arenas_i_bins_j_children[] = {
	CTL_ARENA_BIN("nmalloc", CTL_T_U64, nmalloc),
	CTL_ARENA_BIN("ndalloc", CTL_T_U64, ndalloc),
	CTL_ARENA_BIN("nrequests", CTL_T_U64, nrequests),
	CTL_ARENA_BIN("curregs", CTL_T_SIZE, curregs),
	CTL_ARENA_BIN("nfills", CTL_T_U64, nfills),
	CTL_ARENA_BIN("nflushes", CTL_T_U64, nflushes),
	CTL_ARENA_BIN("nslabs", CTL_T_U64, nslabs),
	CTL_ARENA_BIN("nreslabs", CTL_T_U64, nreslabs),
	CTL_ARENA_BIN("curslabs", CTL_T_SIZE, curslabs),
	CTL_ARENA_BIN("nonfull_slabs", CTL_T_SIZE, nonfull_slabs),
	{ .name = "mutex", CTL_CHILDREN(ctl_stats_bin_mutex_children) },
};
static const ctl_node_t ctl_stats_arenas_i_bins_j[] = {
	{ .name = "", CTL_CHILDREN(ctl_stats_arenas_i_bins_j_children) },
};

#define CTL_EXTENTS_STAT(n, o)						\
	{ .name = (n), .handler = ctl_stats_arena_extents,		\
	  .type = CTL_T_SIZE, .off = (o) }
static const ctl_node_t ctl_stats_arenas_i_extents_j_children[] = {
	CTL_EXTENTS_STAT("ndirty", 0),
	CTL_EXTENTS_STAT("nmuzzy", 1),
	CTL_EXTENTS_STAT("nretained", 2),
	CTL_EXTENTS_STAT("dirty_bytes", 3),
	CTL_EXTENTS_STAT("muzzy_bytes", 4),
	CTL_EXTENTS_STAT("retained_bytes", 5),
};
static const ctl_node_t ctl_stats_arenas_i_extents_j[] = {
	{ .name = "", CTL_CHILDREN(ctl_stats_arenas_i_extents_j_children) },
};

static const ctl_node_t ctl_stats_arenas_i_lextents_j_children[] = {
	CTL_ARENA_LEXTENT("nmalloc", CTL_T_U64, nmalloc),
	CTL_ARENA_LEXTENT("ndalloc", CTL_T_U64, ndalloc),
	CTL_ARENA_LEXTENT("nrequests", CTL_T_U64, nrequests),
	CTL_ARENA_LEXTENT("curlextents", CTL_T_SIZE, curlextents),
};
static const ctl_node_t ctl_stats_arenas_i_lextents_j[] = {
	{ .name = "", CTL_CHILDREN(ctl_stats_arenas_i_lextents_j_children) },
};

#define CTL_MUTEX_STAT(n, t, field)					\
	{ .name = (n), .handler = ctl_stats_mutex_read, .type = (t),	\
	  .off = offsetof(mp_mutex_prof_t, field) }
/* jemalloc's counters of a lock (its mutex_prof_data_t names). */
static const ctl_node_t ctl_stats_mutex_children[] = {
	CTL_MUTEX_STAT("num_ops", CTL_T_U64, n_lock_ops),
	CTL_MUTEX_STAT("num_wait", CTL_T_U64, n_wait_times),
	CTL_MUTEX_STAT("num_spin_acq", CTL_T_U64, n_spin_acquired),
	CTL_MUTEX_STAT("num_owner_switch", CTL_T_U64, n_owner_switches),
	CTL_MUTEX_STAT("total_wait_time", CTL_T_U64, tot_wait_ns),
	CTL_MUTEX_STAT("max_wait_time", CTL_T_U64, max_wait_ns),
	CTL_MUTEX_STAT("max_num_thds", CTL_T_UNSIGNED, max_n_thds),
};
static const ctl_node_t ctl_stats_arenas_i_mutexes_children[] = {
	{ .name = "large", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "tcache_list", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "shared_cache", CTL_CHILDREN(ctl_stats_mutex_children) },
	/* jemalloc's other arena locks: what they guard is under
	 * arena->mtx here ("large"), but base (ctl_stats_mutex_read). */
	{ .name = "extent_avail", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "extents_dirty", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "extents_muzzy", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "extents_retained",
	  CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "decay_dirty", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "decay_muzzy", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "base", CTL_CHILDREN(ctl_stats_mutex_children) },
};
_Static_assert(sizeof(ctl_stats_arenas_i_mutexes_children) /
    sizeof(ctl_stats_arenas_i_mutexes_children[0]) ==
    CTL_ARENA_MUTEX_BASE + 1,
    "the arena locks in ctl_arena_mutex_names' order, then jemalloc's "
    "other names, base last");

/* stats.arenas.<i>.hpa_shard: opt.hpa's pageslabs (hpa.c).  jemalloc
 * 5.3's four counters, and the state jemalloc splits by slab kind in one
 * figure each (nhuge: hugified now). */
static const ctl_node_t ctl_stats_arenas_i_hpa_shard_children[] = {
	CTL_ARENA_STAT("npageslabs", CTL_T_SIZE, hpa_npageslabs),
	CTL_ARENA_STAT("nhuge", CTL_T_SIZE, hpa_nhuge),
	CTL_ARENA_STAT("nactive", CTL_T_SIZE, hpa_nactive),
	CTL_ARENA_STAT("ndirty", CTL_T_SIZE, hpa_ndirty),
	CTL_ARENA_STAT("npurge_passes", CTL_T_U64, hpa_npurge_passes),
	CTL_ARENA_STAT("npurges", CTL_T_U64, hpa_npurges),
	CTL_ARENA_STAT("nhugifies", CTL_T_U64, hpa_nhugifies),
	CTL_ARENA_STAT("ndehugifies", CTL_T_U64, hpa_ndehugifies),
};

static const ctl_node_t ctl_stats_arenas_i_children[] = {
	CTL_ARENA_STAT("nthreads", CTL_T_UNSIGNED, nthreads),
	CTL_ARENA_STAT("pactive", CTL_T_SIZE, pactive),
	CTL_ARENA_STAT("pdirty", CTL_T_SIZE, pdirty),
	CTL_ARENA_STAT("pmuzzy", CTL_T_SIZE, pmuzzy),
	CTL_ARENA_STAT("mapped", CTL_T_SIZE, mapped),
	CTL_ARENA_STAT("retained", CTL_T_SIZE, retained),
	CTL_ARENA_STAT("dirty_npurge", CTL_T_U64, npurge),
	CTL_ARENA_STAT("dirty_nmadvise", CTL_T_U64, nmadvise),
	CTL_ARENA_STAT("dirty_purged", CTL_T_U64, purged),
	{ .name = "large", CTL_CHILDREN(ctl_stats_arenas_i_large_children) },
	{ .name = "small", CTL_CHILDREN(ctl_stats_arenas_i_small_children) },
	CTL_ARENA_X("muzzy_npurge", CTL_T_U64, muzzy_npurge),
	CTL_ARENA_X("muzzy_nmadvise", CTL_T_U64, muzzy_nmadvise),
	CTL_ARENA_X("muzzy_purged", CTL_T_U64, muzzy_purged),
	{ .name = "dss", .handler = ctl_stats_arena_dss },
	CTL_ARENA_X("dirty_decay_ms", CTL_T_SSIZE, dirty_decay_ms),
	CTL_ARENA_X("muzzy_decay_ms", CTL_T_SSIZE, muzzy_decay_ms),
	CTL_ARENA_X("uptime", CTL_T_U64, uptime),
	CTL_ARENA_X("base", CTL_T_SIZE, base),
	CTL_ARENA_X("internal", CTL_T_SIZE, internal),
	CTL_ARENA_X("resident", CTL_T_SIZE, resident),
	CTL_ARENA_X("metadata_thp", CTL_T_SIZE, metadata_thp),
	CTL_ARENA_X("extent_avail", CTL_T_SIZE, extent_avail),
	CTL_ARENA_X("tcache_bytes", CTL_T_SIZE, tcache_bytes),
	CTL_ARENA_X("abandoned_vm", CTL_T_SIZE, abandoned_vm),
	{ .name = "bins", .kind = CTL_INDEXED,
	  .bad_index = ctl_bin_bad_index,
	  CTL_CHILDREN(ctl_stats_arenas_i_bins_j) },
	{ .name = "lextents", .kind = CTL_INDEXED,
	  .bad_index = ctl_lextent_bad_index,
	  CTL_CHILDREN(ctl_stats_arenas_i_lextents_j) },
	{ .name = "extents", .kind = CTL_INDEXED,
	  .bad_index = ctl_psz_bad_index,
	  CTL_CHILDREN(ctl_stats_arenas_i_extents_j) },
	{ .name = "mutexes",
	  CTL_CHILDREN(ctl_stats_arenas_i_mutexes_children) },
	{ .name = "hpa_shard",
	  CTL_CHILDREN(ctl_stats_arenas_i_hpa_shard_children) },
	/* opt.hpa's small extent cache (hpa.c): jemalloc 5.3's one name. */
	CTL_ARENA_STAT("hpa_sec_bytes", CTL_T_SIZE, hpa_sec_bytes),
};
static const ctl_node_t ctl_stats_arenas_i[] = {
	{ .name = "", CTL_CHILDREN(ctl_stats_arenas_i_children) },
};

#define CTL_STAT(n, field)						\
	{ .name = (n), .handler = ctl_stats_read, .type = CTL_T_SIZE,	\
	  .off = offsetof(ctl_snapshot_t, field) }

static const ctl_node_t ctl_stats_background_thread_children[] = {
	{ .name = "num_threads", .handler = ctl_stats_background_thread,
	  .type = CTL_T_SIZE, .off = 0 },
	{ .name = "num_runs", .handler = ctl_stats_background_thread,
	  .type = CTL_T_U64, .off = 1 },
	{ .name = "run_interval", .handler = ctl_stats_background_thread,
	  .type = CTL_T_U64, .off = 2 },
};

static const ctl_node_t ctl_stats_mutexes_children[] = {
	{ .name = "reset", .handler = ctl_stats_mutexes_reset },
	/* In ctl_gmutex_names' order. */
	{ .name = "ctl", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "background_thread",
	  CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "prof", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "prof_thds_data", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "prof_dump", CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "prof_recent_alloc",
	  CTL_CHILDREN(ctl_stats_mutex_children) },
	{ .name = "prof_recent_dump",
	  CTL_CHILDREN(ctl_stats_mutex_children) },
};

static const ctl_node_t ctl_stats_children[] = {
	CTL_STAT("allocated", allocated),
	CTL_STAT("active", active),
	CTL_STAT("metadata", metadata),
	CTL_STAT("metadata_thp", metadata_thp),
	CTL_STAT("resident", resident),
	CTL_STAT("mapped", mapped),
	CTL_STAT("retained", retained),
	{ .name = "background_thread",
	  CTL_CHILDREN(ctl_stats_background_thread_children) },
	{ .name = "arenas", .kind = CTL_INDEXED,
	  .bad_index = ctl_stats_arena_bad_index,
	  CTL_CHILDREN(ctl_stats_arenas_i) },
	CTL_STAT("zero_reallocs", zero_reallocs),
	{ .name = "mutexes", CTL_CHILDREN(ctl_stats_mutexes_children) },
};

#if MP_CONFIG_DEBUG
static const ctl_node_t ctl_debug_children[] = {
	{ .name = "mmap_fail", .handler = ctl_debug_mmap_fail },
	{ .name = "mmap_failures", .handler = ctl_debug_mmap_failures },
};
#endif

/* ---- tcache.*: explicit caches (tcache.c), for MALLOCX_TCACHE(tc) ----
 * Types and error codes as jemalloc 5.3's; where jemalloc's behaviour is
 * undefined (an index never created, or destroyed) these give EFAULT. */

/* r-: make a cache and say its index.  With no room for exactly an
 * unsigned nothing is made, *oldlenp becomes 0 and the call EINVAL;
 * EFAULT when TCACHES_MAX + 1 caches exist or there is no memory. */
static int ctl_tcache_create(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	if (oldp == NULL || oldlenp == NULL || *oldlenp != sizeof(unsigned)) {
		if (oldlenp != NULL)
			*oldlenp = 0;
		return EINVAL;
	}
	unsigned ind;
	if (tcaches_create(&ind))
		return EFAULT;
	return ctl_read(oldp, oldlenp, &ind, sizeof(ind));
}

/* -w: tcache.flush (off 0) returns what cache <index> holds to the
 * arenas; tcache.destroy (off 1) also frees the index for a later
 * create.  The index is written, an unsigned (EINVAL without one);
 * reading gives EPERM, an index that names no live cache EFAULT. */
static int ctl_tcache_action(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp))
		return EPERM;
	if (newp == NULL || newlen != sizeof(unsigned))
		return EINVAL;
	unsigned ind = *(const unsigned *)newp;
	bool failed = node->off != 0 ? tcaches_destroy(ind) :
	    tcaches_flush(ind);
	return failed ? EFAULT : 0;
}

static const ctl_node_t ctl_tcache_children[] = {
	{ .name = "create", .handler = ctl_tcache_create },
	{ .name = "flush", .handler = ctl_tcache_action },
	{ .name = "destroy", .handler = ctl_tcache_action, .off = 1 },
};

/* ------------------------------------------------ experimental.* (hooks) */

/* -w: experimental.hooks.install: newp a hooks_t (jemalloc's layout,
 * hook_set_t), oldp the handle for remove.  EINVAL without both or with
 * wrong sizes (checked before installing: no handle is lost), EAGAIN
 * when HOOK_MAX sets are installed. */
static int ctl_hooks_install(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (oldp == NULL || oldlenp == NULL || newp == NULL ||
	    newlen != sizeof(hook_set_t) || *oldlenp != sizeof(void *))
		return EINVAL;
	void *handle = hook_install((const hook_set_t *)newp);
	if (handle == NULL)
		return EAGAIN;
	return ctl_read(oldp, oldlenp, &handle, sizeof(handle));
}

/* -w: experimental.hooks.remove: newp the handle install gave; EINVAL for
 * NULL or a handle that is not installed. */
static int ctl_hooks_remove(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp))
		return EPERM;
	if (newp == NULL || newlen != sizeof(void *))
		return EINVAL;
	void *handle = *(void *const *)newp;
	if (handle == NULL || hook_remove(handle))
		return EINVAL;
	return 0;
}

/* -w: experimental.hooks.safety_check_abort: newp a void (*)(const char *)
 * called instead of abort() on a failed safety check (NULL: abort
 * again). */
static int ctl_hooks_safety_check_abort(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	typedef void abort_fn_t(const char *);
	if (ctl_reads(oldp, oldlenp))
		return EPERM;
	if (newp == NULL || newlen != sizeof(abort_fn_t *))
		return EINVAL;
	abort_fn_t *fn;
	memcpy(&fn, newp, sizeof(fn));
	hook_safety_abort_set(fn);
	return 0;
}

/* rw: experimental.thread.activity_callback: the calling thread's
 * {callback, uctx}, called at its thread events with its allocated and
 * deallocated counters (jemalloc's activity_callback_thunk_t). */
static int ctl_thread_activity_callback(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	hook_activity_thunk_t old = hook_activity_get();
	if (newp != NULL) {
		if (newlen != sizeof(hook_activity_thunk_t))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		hook_activity_thunk_t t;
		memcpy(&t, newp, sizeof(t));
		hook_activity_set(t);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

static const ctl_node_t ctl_experimental_hooks_children[] = {
	{ .name = "install", .handler = ctl_hooks_install },
	{ .name = "remove", .handler = ctl_hooks_remove },
	{ .name = "safety_check_abort",
	  .handler = ctl_hooks_safety_check_abort },
};

static const ctl_node_t ctl_experimental_thread_children[] = {
	{ .name = "activity_callback",
	  .handler = ctl_thread_activity_callback },
};

/* experimental.*: the names of it that programs use (Valkey's
 * defragmenter). */
static const ctl_node_t ctl_experimental_utilization_children[] = {
	{ .name = "query", .handler = ctl_util_query },
	{ .name = "batch_query", .handler = ctl_util_batch_query },
};
static const ctl_node_t ctl_experimental_arenas_i_children[] = {
	{ .name = "pactivep", .handler = ctl_experimental_pactivep },
};
static const ctl_node_t ctl_experimental_arenas_i[] = {
	{ .name = "", CTL_CHILDREN(ctl_experimental_arenas_i_children) },
};
/* Non-const: src/prof/ hangs prof_recent's children here. */
static ctl_node_t ctl_experimental_children[] = {
	{ .name = "hooks", CTL_CHILDREN(ctl_experimental_hooks_children) },
	{ .name = "prof_recent" },      /* prof_ctl.c registers them */
	{ .name = "thread", CTL_CHILDREN(ctl_experimental_thread_children) },
	/* Valkey's defragmenter (stats block). */
	{ .name = "utilization",
	  CTL_CHILDREN(ctl_experimental_utilization_children) },
	{ .name = "arenas", .kind = CTL_INDEXED,
	  .bad_index = ctl_arena_bad_index,
	  CTL_CHILDREN(ctl_experimental_arenas_i) },
};

/* Non-const: src/prof/ hangs prof's children here (ctl_register). */
static ctl_node_t ctl_root_children[] = {
	{ .name = "version", .handler = ctl_var_read, .type = CTL_T_STR,
	  .ptr = &ctl_version },
	{ .name = "epoch", .handler = ctl_epoch },
	{ .name = "background_thread", .handler = ctl_background_thread },
	{ .name = "max_background_threads",
	  .handler = ctl_max_background_threads },
	{ .name = "config", CTL_CHILDREN(ctl_config_children) },
	{ .name = "opt", .kind = CTL_OPTS },
	{ .name = "thread", CTL_CHILDREN(ctl_thread_children) },
	{ .name = "tcache", CTL_CHILDREN(ctl_tcache_children) },
	{ .name = "arenas", CTL_CHILDREN(ctl_arenas_children) },
	{ .name = "arena", .kind = CTL_INDEXED,
	  .bad_index = ctl_arena_bad_index, CTL_CHILDREN(ctl_arena_i) },
	{ .name = "stats", CTL_CHILDREN(ctl_stats_children) },
	{ .name = "prof" },             /* prof_ctl.c registers them */
	{ .name = "experimental", CTL_CHILDREN(ctl_experimental_children) },
#if MP_CONFIG_DEBUG
	{ .name = "debug", CTL_CHILDREN(ctl_debug_children) },
#endif
};

static const ctl_node_t ctl_root = {
	.name = "", CTL_CHILDREN(ctl_root_children),
};

/* ------------------------------------------------------------ lookups */

/* Decimal index component; false if it is not one (or overflows). */
static bool ctl_parse_index(const char *s, size_t len, size_t *out) {
	size_t v = 0;
	if (len == 0 || len > 19)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (size_t)(s[i] - '0');
	}
	*out = v;
	return true;
}

/*
 * Walk `name` from the root, storing at most *depthp components in mib.
 * On success *nodep is the node reached and *depthp the components
 * stored: either the name's leaf, or (when *depthp runs out first) an
 * inner node, for a partial MIB.  A name that stops at an inner node or
 * goes on past a leaf is ENOENT.
 */
static int ctl_lookup(const char *name, size_t *mib, size_t *depthp,
    const ctl_node_t **nodep) {
	const ctl_node_t *node = &ctl_root;
	const char *p = name;
	size_t max = *depthp;
	for (size_t i = 0; i < max; i++) {
		const char *dot = strchr(p, '.');
		size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
		if (len == 0)
			return ENOENT;
		switch (node->kind) {
		case CTL_NAMED: {
			unsigned j;
			for (j = 0; j < node->nchildren; j++) {
				const char *cn = node->children[j].name;
				if (strncmp(cn, p, len) == 0 && cn[len] == '\0')
					break;
			}
			if (j == node->nchildren)
				return ENOENT;
			mib[i] = j;
			node = &node->children[j];
			break;
		}
		case CTL_INDEXED: {
			size_t ind;
			if (!ctl_parse_index(p, len, &ind) ||
			    node->bad_index(ind))
				return ENOENT;
			mib[i] = ind;
			node = &node->children[0];
			break;
		}
		case CTL_OPTS: {
			const conf_opt_t *opt = conf_opt_lookup(p, len);
			if (opt == NULL || !conf_opt_available(opt))
				return ENOENT;
			mib[i] = (size_t)(opt - conf_opts);
			node = &ctl_opt_leaf;
			break;
		}
		}
		if (node->handler != NULL) {
			if (dot != NULL)
				return ENOENT;
			*depthp = i + 1;
			*nodep = node;
			return 0;
		}
		if (dot == NULL)
			return ENOENT;
		p = dot + 1;
	}
	*nodep = node;
	return 0;
}

/* Follow a MIB; ENOENT unless it ends exactly at a leaf. */
static const ctl_node_t *ctl_bymib_node(const size_t *mib, size_t miblen) {
	const ctl_node_t *node = &ctl_root;
	for (size_t i = 0; i < miblen; i++) {
		if (node->handler != NULL)
			return NULL;
		switch (node->kind) {
		case CTL_NAMED:
			if (mib[i] >= node->nchildren)
				return NULL;
			node = &node->children[mib[i]];
			break;
		case CTL_INDEXED:
			if (node->bad_index(mib[i]))
				return NULL;
			node = &node->children[0];
			break;
		case CTL_OPTS:
			if (mib[i] >= conf_nopts ||
			    !conf_opt_available(&conf_opts[mib[i]]))
				return NULL;
			node = &ctl_opt_leaf;
			break;
		}
	}
	return node->handler != NULL ? node : NULL;
}

/* ---------------------------------------------------- registration */

MP_WARM bool ctl_register(const char *path, const ctl_node_t *children,
    unsigned nchildren) {
	const ctl_node_t *node = &ctl_root;
	const char *p = path;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
		const ctl_node_t *next = NULL;
		for (unsigned i = 0; node->kind == CTL_NAMED &&
		    i < node->nchildren; i++) {
			const char *n = node->children[i].name;
			if (strlen(n) == len && memcmp(n, p, len) == 0)
				next = &node->children[i];
		}
		if (next == NULL)
			return true;
		node = next;
		if (dot == NULL)
			break;
		p = dot + 1;
	}
	/* The registration slots are in the non-const arrays above. */
	ctl_node_t *slot = (ctl_node_t *)(uintptr_t)node;
	slot->children = children;
	slot->nchildren = nchildren;
	return false;
}

/*
 * The one check of a profiler node's needs, before its handler runs
 * (jemalloc's rules): without the profiler built in every prof.* and
 * thread.prof.* control is ENOENT; built in but not started (opt.prof
 * false) the CTL_PROF_STARTED nodes are ENOENT.  The failures a user
 * cannot guess the cause of (prof_hint) also print one line saying it.
 */
#define CTL_PROF_OFF_HINT "profiling is off: start the process with " \
	MP_CONF_ENV "=prof:true"
#define CTL_PROF_NONE_HINT "this build has no profiler (configured with " \
	"--disable-prof; config.prof is false)"

static int ctl_prof_guard(const ctl_node_t *node) {
	if (node->prof == CTL_PROF_ANY)
		return 0;
	if (!config_prof) {
		if (node->prof_hint)
			mp_error("prof.%s: " CTL_PROF_NONE_HINT, node->name);
		return ENOENT;
	}
	if (node->prof == CTL_PROF_STARTED && !opt_prof) {
		if (node->prof_hint)
			mp_error("prof.%s: " CTL_PROF_OFF_HINT, node->name);
		return ENOENT;
	}
	return 0;
}

/* ----------------------------------------------------- public entries */

MP_EXPORT int MP_PUBLIC(mallctl)(const char *name, void *oldp,
    size_t *oldlenp, void *newp, size_t newlen) {
	if (malloc_init())
		return EAGAIN;
	if (name == NULL)
		return ENOENT;
	size_t mib[CTL_MAX_DEPTH];
	size_t depth = CTL_MAX_DEPTH;
	const ctl_node_t *node;
	int ret = ctl_lookup(name, mib, &depth, &node);
	if (ret != 0)
		return ret;
	if (node->handler == NULL)
		return ENOENT;
	ret = ctl_prof_guard(node);
	if (ret != 0)
		return ret;
	return node->handler(node, mib, depth, oldp, oldlenp, newp, newlen);
}

MP_EXPORT int MP_PUBLIC(mallctlnametomib)(const char *name, size_t *mibp,
    size_t *miblenp) {
	if (malloc_init())
		return EAGAIN;
	if (name == NULL || mibp == NULL || miblenp == NULL)
		return EINVAL;
	size_t depth = *miblenp;
	const ctl_node_t *node;
	int ret = ctl_lookup(name, mibp, &depth, &node);
	if (ret == 0)
		*miblenp = depth;
	return ret;
}

MP_EXPORT int MP_PUBLIC(mallctlbymib)(const size_t *mib, size_t miblen,
    void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (malloc_init())
		return EAGAIN;
	if (mib == NULL && miblen != 0)
		return ENOENT;
	const ctl_node_t *node = ctl_bymib_node(mib, miblen);
	if (node == NULL)
		return ENOENT;
	int ret = ctl_prof_guard(node);
	if (ret != 0)
		return ret;
	return node->handler(node, mib, miblen, oldp, oldlenp, newp, newlen);
}

/* glibc's statistics calls: here, because they read the snapshot. */
#if CTL_GLIBC_NAMES
MP_EXPORT struct mallinfo2 mallinfo2(void) {
	struct mallinfo2 mi;
	memset(&mi, 0, sizeof(mi));
	if (malloc_init())
		return mi;
	/* The same numbers as stats.mapped, stats.allocated, stats.active. */
	mp_mutex_lock(&ctl_mtx);
	ctl_refresh_locked();
	mi.arena = ctl_snap.mapped;
	mi.uordblks = ctl_snap.allocated;
	mi.fordblks = ctl_snap.active > ctl_snap.allocated ?
	    ctl_snap.active - ctl_snap.allocated : 0;
	mp_mutex_unlock(&ctl_mtx);
	return mi;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
MP_EXPORT struct mallinfo mallinfo(void) {
	struct mallinfo2 m2 = mallinfo2();
	struct mallinfo mi;
	memset(&mi, 0, sizeof(mi));
	mi.arena = (int)m2.arena;
	mi.uordblks = (int)m2.uordblks;
	mi.fordblks = (int)m2.fordblks;
	return mi;
}
#pragma GCC diagnostic pop
#endif
