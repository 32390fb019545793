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
/* The statistics snapshot served by stats.* and printed by stats.c.  It
 * changes only under ctl_lock, when "epoch" is written (ctl_refresh) or
 * on first use (ctl_snapshot_ensure_locked).  Static: no allocation. */
typedef struct ctl_arena_snap_s {
	bool initialized;        /* the arena existed; stats are valid */
	arena_stats_t stats;
} ctl_arena_snap_t;
typedef struct ctl_snapshot_s {
	uint64_t epoch;          /* refreshes so far; 0: never taken */
	size_t allocated;        /* sum over threads of allocated - dealloc. */
	size_t active;           /* pages in slabs and large blocks */
	size_t metadata;         /* base_mapped_bytes() */
	size_t resident;         /* active + dirty + metadata */
	size_t mapped;           /* mapped - retained + metadata */
	size_t retained;
	unsigned narenas;        /* narenas_total at the refresh */
	arena_stats_t merged;    /* sum over the arenas (index 4096) */
	ctl_arena_snap_t arenas[ARENAS_MAX];
} ctl_snapshot_t;
extern ctl_snapshot_t ctl_snap;
void ctl_lock(void);
void ctl_unlock(void);
void ctl_refresh(void);                  /* new snapshot, epoch + 1 */
void ctl_refresh_locked(void);
void ctl_snapshot_ensure_locked(void);   /* take the first one if needed */

/* ----------------------------------------------------------------- stats.c */
void stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
    const char *opts);
void stats_print_atexit(void);

#endif /* MP_INTERNAL_CTL_H */
