/*
 * ctl.h: options, the mallctl tree and statistics printing (src/ctl/):
 * the options table and its parser, the tree's nodes and the statistics
 * snapshot, the printer.  Built on alloc.h.
 */
#ifndef MP_INTERNAL_CTL_H
#define MP_INTERNAL_CTL_H

#include "malloc_prof/internal/alloc.h"

/* ------------------------------------------------------------------ conf.c */
/* Parse every conf source (no allocation); report bad input on stderr. */
void conf_boot(void);

/* The options table (conf.c): one row per option drives the parser, the
 * opt.* mallctls and the option list of malloc_stats_print. */
typedef enum {
	CONF_BOOL,               /* bool */
	CONF_UNSIGNED,           /* unsigned, range [min, max] */
	CONF_SIZE_T,             /* size_t, range [min, max] */
	CONF_SSIZE_T,            /* ssize_t, range [min, max] */
	CONF_STRING,             /* char[bufsize]; reads as const char * */
	CONF_ENUM,               /* unsigned index into names; reads as the
	                          * name (const char *) */
} conf_type_t;
typedef struct conf_opt_s {
	const char *name;        /* key in MALLOC_CONF, opt.<name> */
	conf_type_t type;
	void *var;               /* the option variable */
	const char *def;         /* default, in conf syntax */
	intmax_t min, max;       /* integer types: inclusive range */
	size_t bufsize;          /* CONF_STRING: size of var */
	const char *const *names; /* CONF_ENUM: the accepted values */
	unsigned nnames;
	void (*on_set)(void);    /* derives dependent variables, or NULL */
	bool early;              /* applied in a first pass (abort_conf...) */
	bool prof;               /* a profiler option: absent (ENOENT, and an
	                          * error in conf) when !config_prof */
	/* CONF_STRING: rejects a value the type accepts but the option
	 * cannot use (true, with why[] filled); the option then goes back
	 * to its default.  NULL: no check. */
	bool (*check)(const char *v, size_t vlen, char *why, size_t whysize);
	const char *doc;         /* one line, for listings */
	/* An option accepted for jemalloc's sake that does nothing here
	 * (or not all it does there): why, said in one line when it is set
	 * to anything but its default.  NULL: it does what it says. */
	const char *note;
	/* opt.<name> reads these bytes instead of the row's own type, where
	 * jemalloc's read-out has another type than its conf syntax (a
	 * string parsed into a number).  NULL: the type's read-out. */
	const void *readout;
	size_t readout_size;
	/* Set true when a source sets the option, its default included (a
	 * value given is not the same as the default assumed), for the
	 * few options whose unset default behaves unlike jemalloc's value
	 * of the same number.  NULL: not tracked. */
	bool *given;
} conf_opt_t;
extern const conf_opt_t conf_opts[];
extern const unsigned conf_nopts;
extern const char *conf_file_path;       /* MP_CONF_FILE; tests change it */
/* The row named name[0..len), or NULL. */
const conf_opt_t *conf_opt_lookup(const char *name, size_t len);
/* false for a profiler row in a build without the profiler. */
MP_INLINE bool conf_opt_available(const conf_opt_t *opt) {
	return config_prof || !opt->prof;
}
/* CONF_STRING / CONF_ENUM rows: the current value as a string. */
const char *conf_opt_str(const conf_opt_t *opt);
/* The current value as text (like snprintf: returns the full length). */
int conf_opt_format(const conf_opt_t *opt, char *buf, size_t size);
/* Parse one conf string; true if anything in it was in error (each error
 * is reported on one line naming `source`). */
bool conf_parse(const char *source, const char *conf);
void conf_reset_defaults(void);

/* ------------------------------------------------------------------- ctl.c */
bool ctl_boot(void);
void ctl_prefork(void);
void ctl_postfork_parent(void);
void ctl_postfork_child(void);
/* The tree's nodes, shared with the files that register nodes of their
 * own (src/prof/prof_ctl.c).  The tree is plain static data: a node has
 * children (by name, by index, or the options table) or is a leaf with a
 * handler. */
typedef struct ctl_node_s ctl_node_t;

/* A leaf's handler.  mib holds the whole path (index components verbatim),
 * the rest are mallctl's arguments. */
typedef int ctl_handler_t(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

typedef enum {
	CTL_NAMED,       /* children looked up by name */
	CTL_INDEXED,     /* the next component is a number, checked by
	                  * bad_index; children[0] is the node for every
	                  * index */
	CTL_OPTS,        /* the next component names a row of conf_opts */
} ctl_kind_t;

/* Value types of the shared handlers. */
typedef enum {
	CTL_T_NONE,
	CTL_T_BOOL,      /* bool */
	CTL_T_UNSIGNED,  /* unsigned (also uint32_t fields) */
	CTL_T_SIZE,      /* size_t */
	CTL_T_U64,       /* uint64_t */
	CTL_T_STR,       /* const char * */
	CTL_T_U64P,      /* uint64_t * */
	CTL_T_SSIZE,     /* ssize_t */
} ctl_type_t;

/* What a node needs of the profiler: nothing, to be built in
 * (config_prof), or to be built in and started (opt_prof). */
typedef enum {
	CTL_PROF_ANY = 0,
	CTL_PROF_BUILT,
	CTL_PROF_STARTED,
} ctl_prof_need_t;

struct ctl_node_s {
	const char *name;
	ctl_kind_t kind;
	const ctl_node_t *children;
	unsigned nchildren;
	ctl_handler_t *handler;          /* leaves only */
	bool (*bad_index)(size_t i);     /* CTL_INDEXED: true if i is invalid */
	ctl_type_t type;                 /* for the shared handlers: */
	const void *ptr;                 /*   the variable read */
	size_t off;                      /*   or the field's offset */
	/* Profiler nodes: what the dispatcher checks once before the
	 * handler runs (ctl_prof_guard), and whether a refusal prints a
	 * line saying why. */
	ctl_prof_need_t prof;
	bool prof_hint;
};

#define CTL_MAX_DEPTH 8
#define CTL_CHILDREN(a)							\
	.children = (a), .nchildren = (unsigned)(sizeof(a) / sizeof((a)[0]))

/* Access helpers for handlers.  ctl_read hands a value of len bytes to
 * the caller, jemalloc's way (EINVAL, copying what fits, when *oldlenp is
 * wrong); ctl_oldlen_bad: a read whose size is wrong, checked by rw nodes
 * before they change state; ctl_writes / ctl_reads: whether the call
 * passes a new value / asks for the old one. */
int ctl_read(void *oldp, size_t *oldlenp, const void *v, size_t len);
bool ctl_oldlen_bad(void *oldp, size_t *oldlenp, size_t len);
bool ctl_writes(void *newp, size_t newlen);
bool ctl_reads(void *oldp, size_t *oldlenp);
/* Hang children under the named node at path ("prof", "thread.prof"),
 * which ctl.c leaves empty: how src/prof/ adds its nodes without ctl.c
 * naming them.  At boot, before any lookup; true if there is no such
 * node. */
bool ctl_register(const char *path, const ctl_node_t *children,
    unsigned nchildren);
/* Count lock m under stats.mutexes.<name> (one of jemalloc's global
 * names: "prof", "prof_thds_data", "prof_dump"); several locks under one
 * name are summed.  How src/prof/ shows its locks without ctl.c calling
 * it.  At boot; true for an unknown name or no room. */
bool ctl_mutex_register(const char *name, mp_mutex_t *m);

/* The statistics snapshot served by stats.* and mallinfo2.  ctl.c keeps
 * it in static storage and changes it only under its lock, when "epoch"
 * is written, on first use, and for mallinfo2 and malloc_stats_print,
 * which refresh first.  Nothing outside ctl.c reads it: stats.c prints a
 * copy. */
/* One small class of one arena (stats.arenas.<i>.bins.<j>), read from
 * arena_bin_stats_t: curregs is nmalloc - ndalloc, nonfull_slabs the
 * slabs held that are not on a full list. */
typedef struct ctl_bin_snap_s {
	uint64_t nmalloc, ndalloc, nrequests, nfills, nflushes, nslabs,
	    nreslabs;
	size_t curregs, curslabs, nonfull_slabs;
} ctl_bin_snap_t;
/* One large class (stats.arenas.<i>.lextents.<j>). */
typedef struct ctl_lextent_snap_s {
	uint64_t nmalloc, ndalloc, nrequests;
	size_t curlextents;
} ctl_lextent_snap_t;
/* What an arena's snapshot has beyond arena_stats_t: the per-class
 * tables, their sums (small.*, large.n{requests,fills,flushes}) and the
 * memory figures jemalloc gives per arena.  Kept apart (9 KiB an arena)
 * so that the snapshot does not reserve it for every possible arena. */
/* An arena's locks, in the order of the stats.arenas.<i>.mutexes.*
 * names: "large" is arena->mtx, which serves what jemalloc's large,
 * extents_* and decay_* locks do; "tcache_list" its list of exited
 * threads' caches; "shared_cache" the cache of uncached calls. */
enum { CTL_MUTEX_LARGE, CTL_MUTEX_TCACHE_LIST, CTL_MUTEX_SHARED_CACHE,
    CTL_ARENA_NMUTEXES };
extern const char *const ctl_arena_mutex_names[CTL_ARENA_NMUTEXES];
typedef struct ctl_arena_xsnap_s {
	size_t small_allocated;
	uint64_t small_nmalloc, small_ndalloc, small_nrequests, small_nfills,
	    small_nflushes;
	uint64_t large_nrequests, large_nfills, large_nflushes;
	uint64_t uptime;         /* ns since the arena (0, ALL: the library)
	                          * was made */
	ssize_t dirty_decay_ms, muzzy_decay_ms;
	size_t base, internal, resident, metadata_thp, extent_avail;
	size_t tcache_bytes, abandoned_vm;
	uint64_t muzzy_npurge, muzzy_nmadvise, muzzy_purged;
	mp_mutex_prof_t mutexes[CTL_ARENA_NMUTEXES];
	ctl_bin_snap_t bins[SC_NBINS];
	ctl_lextent_snap_t lextents[SC_NLEXTENTS];
} ctl_arena_xsnap_t;
/* jemalloc's global locks (stats.mutexes.<name>), in this order. */
enum { CTL_GMUTEX_CTL, CTL_GMUTEX_BG, CTL_GMUTEX_PROF, CTL_GMUTEX_PROF_THDS,
    CTL_GMUTEX_PROF_DUMP, CTL_GMUTEX_PROF_RECENT_ALLOC,
    CTL_GMUTEX_PROF_RECENT_DUMP, CTL_NGMUTEXES };
extern const char *const ctl_gmutex_names[CTL_NGMUTEXES];
typedef struct ctl_arena_snap_s {
	bool initialized;        /* the arena existed; stats are valid */
	arena_stats_t stats;
	ctl_arena_xsnap_t *x;    /* non-NULL when initialized */
} ctl_arena_snap_t;
typedef struct ctl_snapshot_s {
	uint64_t epoch;          /* refreshes so far; 0: never taken */
	size_t allocated;        /* sum over threads of allocated - dealloc. */
	size_t active;           /* pages in slabs and large blocks */
	size_t metadata;         /* base_mapped_bytes() */
	size_t metadata_thp;     /* base_metadata_thp() */
	size_t resident;         /* active + dirty + metadata */
	size_t mapped;           /* mapped - retained + metadata */
	size_t retained;
	size_t zero_reallocs;    /* realloc(non-NULL, 0) calls */
	mp_mutex_prof_t mutex_ctl; /* ctl_mtx's counters */
	mp_mutex_prof_t gmutexes[CTL_NGMUTEXES]; /* stats.mutexes.* */
	unsigned narenas;        /* narenas_total at the refresh */
	arena_stats_t merged;    /* sum over the arenas (index 4096) */
	ctl_arena_xsnap_t *merged_x;
	/* MALLCTL_ARENAS_DESTROYED (4097): the destroyed arenas' sum, when
	 * one was destroyed (destroyed_x non-NULL). */
	arena_stats_t destroyed;
	ctl_arena_xsnap_t *destroyed_x;
	size_t copy_size;        /* a copy's bytes (ctl_snapshot_free) */
	ctl_arena_snap_t arenas[ARENAS_MAX];
} ctl_snapshot_t;
/* A new snapshot (epoch + 1), copied out under the lock into metadata
 * memory (base_malloc) of its own: its reader holds no lock and may call
 * malloc or mallctl.  NULL if the memory cannot be had.  About 600 KiB
 * (ARENAS_MAX arenas), of which only the arenas that exist are copied,
 * followed by their per-class tables (9 KiB an arena, the merged one and
 * the destroyed arenas' sum), to which the copy's x pointers point. */
ctl_snapshot_t *ctl_snapshot_copy(void);
void ctl_snapshot_free(ctl_snapshot_t *copy);

/* ----------------------------------------------------------------- stats.c */
/* Print a fresh snapshot through write_cb (NULL: mp_write).  True if the
 * snapshot could not be copied (out of memory): one line on stderr, and
 * nothing through write_cb. */
bool stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
    const char *opts);
void stats_print_atexit(void);
/* A thread event (tsd.c) with opt_stats_interval >= 0: `allocated` is the
 * thread's counter; prints when all threads' bytes pass the interval. */
void stats_interval_event(uint64_t allocated);

#endif /* MP_INTERNAL_CTL_H */
