/*
 * test/integration/mallctl_namespace.c - walks every name of the MALLCTL
 * NAMESPACE section of jemalloc 5.3's manual (jemalloc(3)), kept below as
 * data: name, type, mode and the configure switch it depends on, as the
 * manual gives them.  <i> is instantiated with 0, and with
 * MALLCTL_ARENAS_ALL where the manual allows it (stats.arenas.<i>.* and
 * arena.<i>.{initialized,purge,decay,dss}); arena.<i>.{reset,destroy}
 * with an arena of arenas.create; <j> with 0.  For each name:
 * mallctlnametomib succeeds, a read of the type's size succeeds (readable
 * names), one byte more or less is EINVAL, a write to an r- name is EPERM,
 * a read of a -w or -- name is EPERM, and the writes that change nothing
 * (the value just read, written back) succeed.  Failures are collected and
 * listed, so that one run names every name that is wrong.
 *
 * The .conf starts the profiler (prof:true), for the prof.* names that
 * need it; in a build without it (config.prof false) those names may
 * answer ENOENT, as in jemalloc built without --enable-prof.
 */
#include "../test_util.h"

typedef enum {
	NS_VOID, NS_BOOL, NS_UNSIGNED, NS_U32, NS_SIZE, NS_SSIZE, NS_U64,
	NS_I64, NS_STR, NS_PTR,
} ns_type_t;

static size_t ns_size(ns_type_t t) {
	switch (t) {
	case NS_VOID: return 0;
	case NS_BOOL: return sizeof(bool);
	case NS_UNSIGNED: return sizeof(unsigned);
	case NS_U32: return sizeof(uint32_t);
	case NS_SIZE: return sizeof(size_t);
	case NS_SSIZE: return sizeof(ssize_t);
	case NS_U64: return sizeof(uint64_t);
	case NS_I64: return sizeof(int64_t);
	case NS_STR: return sizeof(const char *);
	case NS_PTR: return sizeof(void *);
	}
	return 0;
}

/* The manual's modes: r-, rw, -w, -- (an action). */
typedef enum { NS_R, NS_RW, NS_W, NS_X } ns_mode_t;

/* The configure switch a name depends on (the manual's [--enable-*]);
 * stats and fill are always built here. */
typedef enum { NS_ANY, NS_STATS, NS_FILL, NS_PROF, NS_UTRACE, NS_XMALLOC }
    ns_config_t;

/* Flags: which <i> the manual allows, and what a test write may do. */
enum {
	NS_I_ALL = 1 << 0,      /* <i> also MALLCTL_ARENAS_ALL */
	NS_I_MANUAL = 1 << 1,   /* <i> an arena of arenas.create */
	NS_NO_WRITE = 1 << 2,   /* writing even the same value is not
	                         * harmless (or needs a special value) */
	NS_SPECIAL = 1 << 3,    /* checked by its own code below */
};

typedef struct {
	const char *name;
	ns_type_t type;
	ns_mode_t mode;
	ns_config_t config;
	unsigned flags;
} ns_row_t;

/* The manual's list, in its order (mutex counters are added by
 * ns_expand). */
static const ns_row_t ns_rows[] = {
	{"version", NS_STR, NS_R, NS_ANY, 0},
	{"epoch", NS_U64, NS_RW, NS_ANY, 0},
	{"background_thread", NS_BOOL, NS_RW, NS_ANY, 0},
	{"max_background_threads", NS_SIZE, NS_RW, NS_ANY, 0},
	{"config.cache_oblivious", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.debug", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.fill", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.lazy_lock", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.malloc_conf", NS_STR, NS_R, NS_ANY, 0},
	{"config.prof", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.prof_libgcc", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.prof_libunwind", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.stats", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.utrace", NS_BOOL, NS_R, NS_ANY, 0},
	{"config.xmalloc", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.abort", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.confirm_conf", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.abort_conf", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.cache_oblivious", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.metadata_thp", NS_STR, NS_R, NS_ANY, 0},
	{"opt.trust_madvise", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.retain", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.dss", NS_STR, NS_R, NS_ANY, 0},
	{"opt.narenas", NS_UNSIGNED, NS_R, NS_ANY, 0},
	{"opt.oversize_threshold", NS_SIZE, NS_R, NS_ANY, 0},
	{"opt.percpu_arena", NS_STR, NS_R, NS_ANY, 0},
	{"opt.background_thread", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.max_background_threads", NS_SIZE, NS_R, NS_ANY, 0},
	{"opt.dirty_decay_ms", NS_SSIZE, NS_R, NS_ANY, 0},
	{"opt.muzzy_decay_ms", NS_SSIZE, NS_R, NS_ANY, 0},
	{"opt.lg_extent_max_active_fit", NS_SIZE, NS_R, NS_ANY, 0},
	{"opt.stats_print", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.stats_print_opts", NS_STR, NS_R, NS_ANY, 0},
	{"opt.stats_interval", NS_I64, NS_R, NS_ANY, 0},
	{"opt.stats_interval_opts", NS_STR, NS_R, NS_ANY, 0},
	{"opt.junk", NS_STR, NS_R, NS_FILL, 0},
	{"opt.zero", NS_BOOL, NS_R, NS_FILL, 0},
	{"opt.utrace", NS_BOOL, NS_R, NS_UTRACE, 0},
	{"opt.xmalloc", NS_BOOL, NS_R, NS_XMALLOC, 0},
	{"opt.tcache", NS_BOOL, NS_R, NS_ANY, 0},
	{"opt.tcache_max", NS_SIZE, NS_R, NS_ANY, 0},
	{"opt.thp", NS_STR, NS_R, NS_ANY, 0},
	{"opt.prof", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.prof_prefix", NS_STR, NS_R, NS_PROF, 0},
	{"opt.prof_active", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.prof_thread_active_init", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.lg_prof_sample", NS_SIZE, NS_R, NS_PROF, 0},
	{"opt.prof_accum", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.lg_prof_interval", NS_SSIZE, NS_R, NS_PROF, 0},
	{"opt.prof_gdump", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.prof_final", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.prof_leak", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.prof_leak_error", NS_BOOL, NS_R, NS_PROF, 0},
	{"opt.zero_realloc", NS_STR, NS_R, NS_ANY, 0},
	{"thread.arena", NS_UNSIGNED, NS_RW, NS_ANY, 0},
	{"thread.allocated", NS_U64, NS_R, NS_STATS, 0},
	{"thread.allocatedp", NS_PTR, NS_R, NS_STATS, 0},
	{"thread.deallocated", NS_U64, NS_R, NS_STATS, 0},
	{"thread.deallocatedp", NS_PTR, NS_R, NS_STATS, 0},
	{"thread.peak.read", NS_U64, NS_R, NS_STATS, 0},
	{"thread.peak.reset", NS_VOID, NS_X, NS_STATS, 0},
	{"thread.tcache.enabled", NS_BOOL, NS_RW, NS_ANY, 0},
	{"thread.tcache.flush", NS_VOID, NS_X, NS_ANY, 0},
	/* "r- or -w": read, or write a new name. */
	{"thread.prof.name", NS_STR, NS_RW, NS_PROF, NS_SPECIAL},
	{"thread.prof.active", NS_BOOL, NS_RW, NS_PROF, 0},
	{"thread.idle", NS_VOID, NS_X, NS_ANY, 0},
	{"tcache.create", NS_UNSIGNED, NS_R, NS_ANY, NS_SPECIAL},
	{"tcache.flush", NS_UNSIGNED, NS_W, NS_ANY, NS_SPECIAL},
	{"tcache.destroy", NS_UNSIGNED, NS_W, NS_ANY, NS_SPECIAL},
	{"arena.<i>.initialized", NS_BOOL, NS_R, NS_ANY, NS_I_ALL},
	{"arena.<i>.decay", NS_VOID, NS_X, NS_ANY, NS_I_ALL},
	{"arena.<i>.purge", NS_VOID, NS_X, NS_ANY, NS_I_ALL},
	{"arena.<i>.reset", NS_VOID, NS_X, NS_ANY, NS_I_MANUAL},
	{"arena.<i>.destroy", NS_VOID, NS_X, NS_ANY, NS_I_MANUAL},
	{"arena.<i>.dss", NS_STR, NS_RW, NS_ANY, NS_I_ALL},
	{"arena.<i>.dirty_decay_ms", NS_SSIZE, NS_RW, NS_ANY, 0},
	{"arena.<i>.muzzy_decay_ms", NS_SSIZE, NS_RW, NS_ANY, 0},
	{"arena.<i>.retain_grow_limit", NS_SIZE, NS_RW, NS_ANY, 0},
	{"arena.<i>.extent_hooks", NS_PTR, NS_RW, NS_ANY, 0},
	{"arenas.narenas", NS_UNSIGNED, NS_R, NS_ANY, 0},
	{"arenas.dirty_decay_ms", NS_SSIZE, NS_RW, NS_ANY, 0},
	{"arenas.muzzy_decay_ms", NS_SSIZE, NS_RW, NS_ANY, 0},
	{"arenas.quantum", NS_SIZE, NS_R, NS_ANY, 0},
	{"arenas.page", NS_SIZE, NS_R, NS_ANY, 0},
	{"arenas.tcache_max", NS_SIZE, NS_R, NS_ANY, 0},
	{"arenas.nbins", NS_UNSIGNED, NS_R, NS_ANY, 0},
	{"arenas.nhbins", NS_UNSIGNED, NS_R, NS_ANY, 0},
	/* Here <i> is a size class: 0 only. */
	{"arenas.bin.<i>.size", NS_SIZE, NS_R, NS_ANY, 0},
	{"arenas.bin.<i>.nregs", NS_U32, NS_R, NS_ANY, 0},
	{"arenas.bin.<i>.slab_size", NS_SIZE, NS_R, NS_ANY, 0},
	{"arenas.nlextents", NS_UNSIGNED, NS_R, NS_ANY, 0},
	{"arenas.lextent.<i>.size", NS_SIZE, NS_R, NS_ANY, 0},
	/* (unsigned, extent_hooks_t *): read the index, write the hooks. */
	{"arenas.create", NS_UNSIGNED, NS_RW, NS_ANY, NS_SPECIAL},
	/* (unsigned, void *): write a pointer, read its arena. */
	{"arenas.lookup", NS_UNSIGNED, NS_RW, NS_ANY, NS_SPECIAL},
	{"prof.thread_active_init", NS_BOOL, NS_RW, NS_PROF, 0},
	{"prof.active", NS_BOOL, NS_RW, NS_PROF, 0},
	/* Writing a name dumps a profile: only the errors are checked. */
	{"prof.dump", NS_STR, NS_W, NS_PROF, NS_NO_WRITE},
	{"prof.prefix", NS_STR, NS_W, NS_PROF, NS_SPECIAL},
	{"prof.gdump", NS_BOOL, NS_RW, NS_PROF, 0},
	{"prof.reset", NS_SIZE, NS_W, NS_PROF, NS_SPECIAL},
	{"prof.lg_sample", NS_SIZE, NS_R, NS_PROF, 0},
	{"prof.interval", NS_U64, NS_R, NS_PROF, 0},
	{"stats.allocated", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.active", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.metadata", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.metadata_thp", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.resident", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.mapped", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.retained", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.zero_reallocs", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.background_thread.num_threads", NS_SIZE, NS_R, NS_STATS, 0},
	{"stats.background_thread.num_runs", NS_U64, NS_R, NS_STATS, 0},
	{"stats.background_thread.run_interval", NS_U64, NS_R, NS_STATS, 0},
	{"stats.mutexes.reset", NS_VOID, NS_X, NS_STATS, 0},
	{"stats.arenas.<i>.dss", NS_STR, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.dirty_decay_ms", NS_SSIZE, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.muzzy_decay_ms", NS_SSIZE, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.nthreads", NS_UNSIGNED, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.uptime", NS_U64, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.pactive", NS_SIZE, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.pdirty", NS_SIZE, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.pmuzzy", NS_SIZE, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.mapped", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.retained", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.extent_avail", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.base", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.internal", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.metadata_thp", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.resident", NS_SIZE, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.dirty_npurge", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.dirty_nmadvise", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.dirty_purged", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.muzzy_npurge", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.muzzy_nmadvise", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.muzzy_purged", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.small.allocated", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.small.nmalloc", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.small.ndalloc", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.small.nrequests", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.small.nfills", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.small.nflushes", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.large.allocated", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.large.nmalloc", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.large.ndalloc", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.large.nrequests", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.large.nfills", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.large.nflushes", NS_U64, NS_R, NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nmalloc", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.ndalloc", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nrequests", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.curregs", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nfills", NS_U64, NS_R, NS_ANY, NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nflushes", NS_U64, NS_R, NS_ANY,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nslabs", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nreslabs", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.curslabs", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.bins.<j>.nonfull_slabs", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.extents.<j>.ndirty", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.extents.<j>.nmuzzy", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.extents.<j>.nretained", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.extents.<j>.dirty_bytes", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.extents.<j>.muzzy_bytes", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.extents.<j>.retained_bytes", NS_SIZE, NS_R,
	    NS_STATS, NS_I_ALL},
	{"stats.arenas.<i>.lextents.<j>.nmalloc", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.lextents.<j>.ndalloc", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.lextents.<j>.nrequests", NS_U64, NS_R, NS_STATS,
	    NS_I_ALL},
	{"stats.arenas.<i>.lextents.<j>.curlextents", NS_SIZE, NS_R, NS_STATS,
	    NS_I_ALL},
};

/* The mutex counters ({counter} of the manual), and the locks that have
 * them: global, per arena, per bin. */
static const struct {
	const char *name;
	ns_type_t type;
} ns_counters[] = {
	{"num_ops", NS_U64}, {"num_spin_acq", NS_U64}, {"num_wait", NS_U64},
	{"max_wait_time", NS_U64}, {"total_wait_time", NS_U64},
	{"max_num_thds", NS_U32}, {"num_owner_switch", NS_U64},
};
static const char *const ns_global_mutexes[] = {
	"ctl", "background_thread", "prof", "prof_thds_data", "prof_dump",
	"prof_recent_alloc", "prof_recent_dump",
};
static const char *const ns_arena_mutexes[] = {
	"large", "extent_avail", "extents_dirty", "extents_muzzy",
	"extents_retained", "decay_dirty", "decay_muzzy", "base",
	"tcache_list",
};

/* ns_rows and the mutex counters, names owned by a static pool. */
#define NS_MAX_ROWS 400
static ns_row_t ns_all[NS_MAX_ROWS];
static char ns_names[NS_MAX_ROWS][96];
static size_t ns_nall;

static void ns_add(const char *name, ns_type_t type, unsigned flags) {
	assert_true(ns_nall < NS_MAX_ROWS);
	snprintf(ns_names[ns_nall], sizeof(ns_names[0]), "%s", name);
	ns_all[ns_nall] = (ns_row_t){ns_names[ns_nall], type, NS_R, NS_STATS,
	    flags};
	ns_nall++;
}

static void ns_expand(void) {
	ns_nall = 0;
	for (size_t r = 0; r < MP_ARRAY_SIZE(ns_rows); r++) {
		assert_true(ns_nall < NS_MAX_ROWS);
		ns_all[ns_nall++] = ns_rows[r];
	}
	char name[96];
	for (size_t c = 0; c < MP_ARRAY_SIZE(ns_counters); c++) {
		for (size_t m = 0; m < MP_ARRAY_SIZE(ns_global_mutexes); m++) {
			snprintf(name, sizeof(name), "stats.mutexes.%s.%s",
			    ns_global_mutexes[m], ns_counters[c].name);
			ns_add(name, ns_counters[c].type, 0);
		}
		for (size_t m = 0; m < MP_ARRAY_SIZE(ns_arena_mutexes); m++) {
			snprintf(name, sizeof(name),
			    "stats.arenas.<i>.mutexes.%s.%s",
			    ns_arena_mutexes[m], ns_counters[c].name);
			ns_add(name, ns_counters[c].type, NS_I_ALL);
		}
		snprintf(name, sizeof(name), "stats.arenas.<i>.bins.<j>.mutex.%s",
		    ns_counters[c].name);
		ns_add(name, ns_counters[c].type, NS_I_ALL);
	}
}

/* ------------------------------------------------------------------------ */

/* The failures of one walk, listed at its end. */
static unsigned ns_nfail;

#define NS_FAIL(name, ...) do {						\
	ns_nfail++;							\
	if (ns_nfail <= 200) {						\
		print_error("# %s: ", (name));				\
		print_error(__VA_ARGS__);				\
		print_error("\n");					\
	}								\
} while (0)

static bool ns_config_on(ns_config_t c) {
	const char *name = NULL;
	switch (c) {
	case NS_ANY: return true;
	case NS_STATS: name = "config.stats"; break;
	case NS_FILL: name = "config.fill"; break;
	case NS_PROF: name = "config.prof"; break;
	case NS_UTRACE: name = "config.utrace"; break;
	case NS_XMALLOC: name = "config.xmalloc"; break;
	}
	bool v = false;
	size_t len = sizeof(v);
	return mallctl(name, &v, &len, NULL, 0) == 0 && v;
}

/* name with <i> and <j> replaced. */
static void ns_instantiate(char *out, size_t size, const char *name,
    unsigned i) {
	size_t k = 0;
	for (const char *p = name; *p != '\0' && k + 16 < size;) {
		if (strncmp(p, "<i>", 3) == 0) {
			k += (size_t)snprintf(out + k, size - k, "%u", i);
			p += 3;
		} else if (strncmp(p, "<j>", 3) == 0) {
			out[k++] = '0';
			p += 3;
		} else {
			out[k++] = *p++;
		}
	}
	out[k] = '\0';
}

/* The checks every name gets (its special cases excepted). */
static void ns_check(const ns_row_t *row, const char *name) {
	size_t size = ns_size(row->type);
	size_t mib[8], miblen = MP_ARRAY_SIZE(mib);
	int r = mallctlnametomib(name, mib, &miblen);
	if (r != 0) {
		if (!ns_config_on(row->config) && r == ENOENT)
			return;        /* not built in, as in jemalloc */
		NS_FAIL(name, "mallctlnametomib: %d (%s)", r, strerror(r));
		return;
	}
	/* A buffer big enough for every type, and a byte more. */
	union { uint64_t u; void *p; char c[16]; } v, w;
	memset(&v, 0, sizeof(v));
	size_t len;
	bool readable = row->mode == NS_R || row->mode == NS_RW;
	if (readable && !(row->flags & NS_SPECIAL)) {
		len = size;
		r = mallctlbymib(mib, miblen, &v, &len, NULL, 0);
		if (r == ENOENT && !ns_config_on(row->config))
			return;
		if (r != 0)
			NS_FAIL(name, "read of %zu bytes: %d (%s)", size, r,
			    strerror(r));
		else if (len != size)
			NS_FAIL(name, "read gave %zu bytes, not %zu", len,
			    size);
		len = size + 1;
		r = mallctlbymib(mib, miblen, &w, &len, NULL, 0);
		if (r != EINVAL)
			NS_FAIL(name, "read of %zu bytes: %d, not EINVAL",
			    size + 1, r);
		if (size > 1) {
			len = size - 1;
			r = mallctlbymib(mib, miblen, &w, &len, NULL, 0);
			if (r != EINVAL)
				NS_FAIL(name, "read of %zu bytes: %d, not "
				    "EINVAL", size - 1, r);
		}
	}
	switch (row->mode) {
	case NS_R:
		if (row->flags & NS_SPECIAL)
			break;
		r = mallctlbymib(mib, miblen, NULL, NULL, &v, size);
		if (r != EPERM)
			NS_FAIL(name, "write to r-: %d, not EPERM", r);
		break;
	case NS_RW:
		if (row->flags & (NS_SPECIAL | NS_NO_WRITE))
			break;
		/* The value read, written back: nothing changes. */
		r = mallctlbymib(mib, miblen, NULL, NULL, &v, size);
		if (r != 0)
			NS_FAIL(name, "write of the value read: %d (%s)", r,
			    strerror(r));
		r = mallctlbymib(mib, miblen, NULL, NULL, &v, size + 1);
		if (r != EINVAL)
			NS_FAIL(name, "write of %zu bytes: %d, not EINVAL",
			    size + 1, r);
		break;
	case NS_W:
		len = size;
		r = mallctlbymib(mib, miblen, &w, &len, NULL, 0);
		if (r != EPERM && !(r == ENOENT && !ns_config_on(row->config)))
			NS_FAIL(name, "read of -w: %d, not EPERM", r);
		r = mallctlbymib(mib, miblen, NULL, NULL, &v, size + 1);
		if (r != EINVAL && !(r == ENOENT &&
		    !ns_config_on(row->config)))
			NS_FAIL(name, "write of %zu bytes: %d, not EINVAL",
			    size + 1, r);
		break;
	case NS_X: {
		uint64_t x = 0;
		len = sizeof(x);
		r = mallctlbymib(mib, miblen, &x, &len, NULL, 0);
		if (r != EPERM)
			NS_FAIL(name, "read of --: %d, not EPERM", r);
		r = mallctlbymib(mib, miblen, NULL, NULL, &x, sizeof(x));
		if (r != EPERM)
			NS_FAIL(name, "write to --: %d, not EPERM", r);
		/* The action itself: each of them is harmless here
		 * (reset and destroy act on an arena of their own). */
		r = mallctlbymib(mib, miblen, NULL, NULL, NULL, 0);
		if (r != 0)
			NS_FAIL(name, "call: %d (%s)", r, strerror(r));
		break;
	}
	}
}

/* The names whose reads or writes take arguments of their own. */
static void ns_check_special(const ns_row_t *row) {
	const char *name = row->name;
	int r;
	size_t len;
	if (strcmp(name, "thread.prof.name") == 0) {
		if (!ns_config_on(NS_PROF))
			return;
		const char *old = NULL;
		len = sizeof(old);
		r = mallctl(name, &old, &len, NULL, 0);
		if (r != 0) {
			NS_FAIL(name, "read: %d", r);
			return;
		}
		const char *nm = "ns-walk";
		r = mallctl(name, NULL, NULL, (void *)&nm, sizeof(nm));
		if (r != 0)
			NS_FAIL(name, "write: %d", r);
		len = sizeof(old);
		r = mallctl(name, &old, &len, NULL, 0);
		if (r != 0 || old == NULL || strcmp(old, nm) != 0)
			NS_FAIL(name, "read back: %d %s", r,
			    old != NULL ? old : "(null)");
		len = sizeof(old) + 1;
		if (mallctl(name, &old, &len, NULL, 0) != EINVAL)
			NS_FAIL(name, "read of the wrong size not EINVAL");
		if (mallctl(name, NULL, NULL, (void *)&nm, sizeof(nm) + 1) !=
		    EINVAL)
			NS_FAIL(name, "write of the wrong size not EINVAL");
	} else if (strcmp(name, "tcache.create") == 0) {
		unsigned tc = 0;
		len = sizeof(tc);
		r = mallctl(name, &tc, &len, NULL, 0);
		if (r != 0) {
			NS_FAIL(name, "read: %d", r);
			return;
		}
		len = sizeof(tc) + 1;
		unsigned big[2];
		if (mallctl(name, big, &len, NULL, 0) != EINVAL)
			NS_FAIL(name, "read of the wrong size not EINVAL");
		if (mallctl(name, NULL, NULL, &tc, sizeof(tc)) != EPERM)
			NS_FAIL(name, "write to r- not EPERM");
		/* tcache.flush and tcache.destroy: -w, an index. */
		static const char *const w[] = {"tcache.flush",
		    "tcache.destroy"};
		for (size_t k = 0; k < MP_ARRAY_SIZE(w); k++) {
			len = sizeof(tc);
			unsigned x;
			if (mallctl(w[k], &x, &len, NULL, 0) != EPERM)
				NS_FAIL(w[k], "read of -w not EPERM");
			if (mallctl(w[k], NULL, NULL, &tc, sizeof(tc) + 1) !=
			    EINVAL)
				NS_FAIL(w[k], "write of the wrong size not "
				    "EINVAL");
			r = mallctl(w[k], NULL, NULL, &tc, sizeof(tc));
			if (r != 0)
				NS_FAIL(w[k], "write: %d", r);
		}
	} else if (strcmp(name, "arenas.create") == 0) {
		unsigned a = 0;
		len = sizeof(a) + 1;
		unsigned big[2];
		if (mallctl(name, big, &len, NULL, 0) != EINVAL)
			NS_FAIL(name, "read of the wrong size not EINVAL");
		void *hooks = NULL;
		len = sizeof(a);
		if (mallctl(name, &a, &len, &hooks, sizeof(hooks) + 1) !=
		    EINVAL)
			NS_FAIL(name, "write of the wrong size not EINVAL");
		len = sizeof(a);
		r = mallctl(name, &a, &len, NULL, 0);
		if (r != 0 || len != sizeof(a))
			NS_FAIL(name, "read: %d", r);
	} else if (strcmp(name, "arenas.lookup") == 0) {
		void *p = malloc(opaque_size(64));
		assert_non_null(p);
		unsigned a = UINT_MAX;
		len = sizeof(a);
		r = mallctl(name, &a, &len, &p, sizeof(p));
		if (r != 0 || len != sizeof(a) || a == UINT_MAX)
			NS_FAIL(name, "lookup: %d, arena %u", r, a);
		len = sizeof(a);
		if (mallctl(name, &a, &len, &p, sizeof(p) + 1) != EINVAL)
			NS_FAIL(name, "write of the wrong size not EINVAL");
		len = sizeof(a) + 1;
		unsigned big[2];
		if (mallctl(name, big, &len, &p, sizeof(p)) != EINVAL)
			NS_FAIL(name, "read of the wrong size not EINVAL");
		free(p);
	} else if (strcmp(name, "prof.prefix") == 0 ||
	    strcmp(name, "prof.reset") == 0) {
		if (!ns_config_on(NS_PROF))
			return;
		bool prefix = name[5] == 'p';
		union { const char *s; size_t z; } v;
		len = prefix ? sizeof(v.s) : sizeof(v.z);
		r = mallctl(prefix ? "opt.prof_prefix" : "prof.lg_sample",
		    &v, &len, NULL, 0);
		if (r != 0) {
			NS_FAIL(name, "reading its current value: %d", r);
			return;
		}
		size_t size = prefix ? sizeof(v.s) : sizeof(v.z);
		len = size;
		char buf[16];
		if (mallctl(name, buf, &len, NULL, 0) != EPERM)
			NS_FAIL(name, "read of -w not EPERM");
		if (mallctl(name, NULL, NULL, &v, size + 1) != EINVAL)
			NS_FAIL(name, "write of the wrong size not EINVAL");
		r = mallctl(name, NULL, NULL, &v, size);
		if (r != 0)
			NS_FAIL(name, "write of the current value: %d", r);
	}
}

static void test_namespace(void **state) {
	(void)state;
	ns_expand();
	/* An arena of its own for reset and destroy (destroy comes last
	 * in the manual's order of arena.<i>.*). */
	unsigned manual = 0;
	size_t len = sizeof(manual);
	assert_int_equal(mallctl("arenas.create", &manual, &len, NULL, 0), 0);
	void *keep = mallocx(100, MALLOCX_ARENA(manual) | MALLOCX_TCACHE_NONE);
	assert_non_null(keep);
	mp_epoch();
	unsigned nnames = 0;
	char name[128];
	for (size_t r = 0; r < ns_nall; r++) {
		const ns_row_t *row = &ns_all[r];
		if (row->flags & NS_SPECIAL) {
			ns_check_special(row);
			nnames++;
			continue;
		}
		unsigned is[2] = {0, MALLCTL_ARENAS_ALL};
		unsigned n = (row->flags & NS_I_ALL) ? 2 : 1;
		if (row->flags & NS_I_MANUAL)
			is[0] = manual;
		if (strstr(row->name, "<i>") == NULL)
			n = 1;
		for (unsigned k = 0; k < n; k++) {
			ns_instantiate(name, sizeof(name), row->name, is[k]);
			ns_check(row, name);
			nnames++;
		}
	}
	print_message("# %u names checked (%zu rows), %u failures\n", nnames,
	    ns_nall, ns_nfail);
	MP_ASSERT(ns_nfail == 0, "%u failures (listed above)", ns_nfail);
	/* keep was freed by arena.<manual>.destroy. */
}

static uint64_t ns_u64(const char *fmt, unsigned i) {
	uint64_t v = UINT64_MAX;
	size_t len = sizeof(v);
	int r = mallctl_fmt(&v, &len, NULL, 0, fmt, i);
	MP_ASSERT(r == 0, "%s (%u): %d", fmt, i, r);
	return v;
}

static size_t ns_sz(const char *fmt, unsigned i) {
	size_t v = SIZE_MAX;
	size_t len = sizeof(v);
	int r = mallctl_fmt(&v, &len, NULL, 0, fmt, i);
	MP_ASSERT(r == 0, "%s (%u): %d", fmt, i, r);
	return v;
}

static bool ns_initialized(unsigned i) {
	bool v = false;
	size_t len = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &len, NULL, 0,
	    "arena.%u.initialized", i), 0);
	return v;
}

/* One manual arena's life: n small and nlarge large blocks, half the
 * small ones freed, then destroyed; returns its index. */
static unsigned ns_arena_life(unsigned n, unsigned nlarge,
    uint64_t *small_nmalloc, uint64_t *large_nmalloc) {
	unsigned a;
	size_t len = sizeof(a);
	assert_int_equal(mallctl("arenas.create", &a, &len, NULL, 0), 0);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *ptrs[256];
	assert_true(n + nlarge <= MP_ARRAY_SIZE(ptrs));
	for (unsigned k = 0; k < n; k++) {
		ptrs[k] = mallocx(64, flags);
		assert_non_null(ptrs[k]);
	}
	for (unsigned k = 0; k < nlarge; k++) {
		ptrs[n + k] = mallocx(MP_MiB, flags);
		assert_non_null(ptrs[n + k]);
	}
	for (unsigned k = 0; k < n / 2; k++)
		dallocx(ptrs[k], MALLOCX_TCACHE_NONE);
	mp_epoch();
	*small_nmalloc = ns_u64("stats.arenas.%u.small.nmalloc", a);
	*large_nmalloc = ns_u64("stats.arenas.%u.large.nmalloc", a);
	assert_true(*small_nmalloc >= n);
	assert_int_equal(*large_nmalloc, nlarge);
	/* The rest are freed by the destroy. */
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.destroy",
	    a), 0);
	return a;
}

/* malloc_stats_print's report, into a static buffer. */
static char ns_report[1 << 20];
static size_t ns_report_len;

static void ns_report_cb(void *opaque, const char *s) {
	(void)opaque;
	size_t n = strlen(s);
	if (ns_report_len + n < sizeof(ns_report)) {
		memcpy(ns_report + ns_report_len, s, n + 1);
		ns_report_len += n;
	}
}

static const char *ns_print(const char *opts) {
	ns_report_len = 0;
	ns_report[0] = '\0';
	malloc_stats_print(ns_report_cb, NULL, opts);
	return ns_report;
}

/*
 * MALLCTL_ARENAS_DESTROYED (4097): absent until an arena is destroyed
 * (this test runs first), then the sum of the destroyed arenas'
 * counters, with nothing held.
 */
static void test_destroyed(void **state) {
	(void)state;
	const unsigned D = MALLCTL_ARENAS_DESTROYED;
	mp_epoch();
	assert_false(ns_initialized(D));
	uint64_t v;
	size_t len = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &len, NULL, 0,
	    "stats.arenas.%u.small.nmalloc", D), ENOENT);
	assert_null(strstr(ns_print(""), "Destroyed arenas stats:"));
	uint64_t sm1, lm1, sm2, lm2;
	unsigned a1 = ns_arena_life(100, 3, &sm1, &lm1);
	assert_true(ns_initialized(D));
	assert_false(ns_initialized(a1));
	mp_epoch();
	assert_int_equal(ns_u64("stats.arenas.%u.small.nmalloc", D), sm1);
	assert_int_equal(ns_u64("stats.arenas.%u.large.nmalloc", D), lm1);
	assert_int_equal(ns_sz("stats.arenas.%u.pactive", D), 0);
	assert_int_equal(ns_sz("stats.arenas.%u.mapped", D), 0);
	assert_int_equal(ns_sz("stats.arenas.%u.small.allocated", D), 0);
	assert_int_equal(ns_sz("stats.arenas.%u.large.allocated", D), 0);
	assert_int_equal(ns_sz("stats.arenas.%u.bins.0.curregs", D), 0);
	assert_int_equal(ns_sz("stats.arenas.%u.extents.0.dirty_bytes", D),
	    0);
	/* The index is reused, and the sum grows by the second life. */
	unsigned a2 = ns_arena_life(40, 2, &sm2, &lm2);
	assert_int_equal(a2, a1);
	mp_epoch();
	assert_int_equal(ns_u64("stats.arenas.%u.small.nmalloc", D),
	    sm1 + sm2);
	assert_int_equal(ns_u64("stats.arenas.%u.large.nmalloc", D),
	    lm1 + lm2);
	(void)ns_u64("stats.arenas.%u.mutexes.large.num_ops", D);
	/* malloc_stats_print shows the sum after the merged arena (text and
	 * JSON), unless d; and every global lock's row. */
	const char *r = ns_print("");
	assert_non_null(strstr(r, "Destroyed arenas stats:"));
	assert_non_null(strstr(r, "prof_thds_data"));
	assert_non_null(strstr(r, "background_thread"));
	assert_null(strstr(ns_print("d"), "Destroyed arenas stats:"));
	assert_non_null(strstr(ns_print("J"), "\"destroyed\": {"));
	assert_null(strstr(ns_print("Jd"), "\"destroyed\""));
	/* Other arena.4097 names find no arena. */
	ssize_t ms;
	len = sizeof(ms);
	assert_int_equal(mallctl_fmt(&ms, &len, NULL, 0,
	    "arena.%u.dirty_decay_ms", D), EFAULT);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.destroy",
	    D), EFAULT);
}

/* stats.arenas.<i>.extents.<j>.*: the free extents by page-count class
 * add up to the arena's dirty and retained totals. */
static void test_extents(void **state) {
	(void)state;
	unsigned a;
	size_t len = sizeof(a);
	assert_int_equal(mallctl("arenas.create", &a, &len, NULL, 0), 0);
	ssize_t never = -1;
	assert_int_equal(mallctl_fmt(NULL, NULL, &never, sizeof(never),
	    "arena.%u.dirty_decay_ms", a), 0);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *p = mallocx(2 * MP_MiB, flags);
	void *q = mallocx(300 * MP_KiB, flags);
	assert_non_null(p);
	assert_non_null(q);
	memset(p, 1, 2 * MP_MiB);
	memset(q, 1, 300 * MP_KiB);
	dallocx(p, MALLOCX_TCACHE_NONE);
	size_t page = 0;
	MALLCTL_READ("arenas.page", page);
	static const char *const kinds[3] = {"dirty", "muzzy", "retained"};
	for (int round = 0; round < 2; round++) {
		mp_epoch();
		size_t n[3] = {0}, bytes[3] = {0};
		for (unsigned j = 0;; j++) {
			char name[96];
			size_t v;
			len = sizeof(v);
			snprintf(name, sizeof(name),
			    "stats.arenas.%u.extents.%u.ndirty", a, j);
			int r = mallctl(name, &v, &len, NULL, 0);
			if (r == ENOENT)
				break;
			assert_int_equal(r, 0);
			for (unsigned k = 0; k < 3; k++) {
				snprintf(name, sizeof(name),
				    "stats.arenas.%u.extents.%u.n%s", a, j,
				    kinds[k]);
				MALLCTL_READ(name, v);
				n[k] += v;
				snprintf(name, sizeof(name),
				    "stats.arenas.%u.extents.%u.%s_bytes", a, j,
				    kinds[k]);
				MALLCTL_READ(name, v);
				bytes[k] += v;
			}
		}
		size_t pdirty = ns_sz("stats.arenas.%u.pdirty", a);
		size_t pmuzzy = ns_sz("stats.arenas.%u.pmuzzy", a);
		size_t retained = ns_sz("stats.arenas.%u.retained", a);
		MP_ASSERT(bytes[0] == pdirty * page, "round %d: dirty %zu "
		    "bytes in extents, pdirty %zu", round, bytes[0], pdirty);
		MP_ASSERT(bytes[1] == pmuzzy * page, "round %d: muzzy %zu "
		    "bytes in extents, pmuzzy %zu", round, bytes[1], pmuzzy);
		MP_ASSERT(bytes[2] == retained, "round %d: retained %zu bytes "
		    "in extents, stats %zu", round, bytes[2], retained);
		if (round == 0) {
			/* The 2 MiB block freed, never purged: dirty. */
			MP_ASSERT(bytes[0] >= 2 * MP_MiB && n[0] >= 1,
			    "dirty: %zu extents, %zu bytes", n[0], bytes[0]);
			assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0,
			    "arena.%u.purge", a), 0);
		} else {
			assert_int_equal(bytes[0], 0);
			assert_int_equal(n[0], 0);
		}
	}
	dallocx(q, MALLOCX_TCACHE_NONE);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.destroy",
	    a), 0);
}

/* The locks jemalloc names that this library has count their use: the
 * background thread's and the metadata allocator's are taken by each
 * refresh, the profiler's by its thread records (prof:true). */
static void test_global_mutexes(void **state) {
	(void)state;
	MALLCTL_CALL("stats.mutexes.reset");
	mp_epoch();
	mp_epoch();
	uint64_t bg = 0, base = 0, ctl = 0;
	MALLCTL_READ("stats.mutexes.background_thread.num_ops", bg);
	MALLCTL_READ("stats.arenas.0.mutexes.base.num_ops", base);
	MALLCTL_READ("stats.mutexes.ctl.num_ops", ctl);
	MP_ASSERT(bg >= 1 && base >= 1 && ctl >= 1, "after two refreshes: "
	    "background_thread %" PRIu64 ", base %" PRIu64 ", ctl %" PRIu64,
	    bg, base, ctl);
	/* Only arena 0 (and the sum) carries the library's base lock. */
	uint64_t base_all = 0;
	MALLCTL_READ("stats.arenas.4096.mutexes.base.num_ops", base_all);
	assert_int_equal(base_all, base);
	/* A reset zeroes them all (each later refresh takes each lock
	 * once more). */
	MALLCTL_CALL("stats.mutexes.reset");
	mp_epoch();
	uint64_t bg2 = UINT64_MAX;
	MALLCTL_READ("stats.mutexes.background_thread.num_ops", bg2);
	MP_ASSERT(bg2 <= 1, "background_thread after a reset: %" PRIu64,
	    bg2);
}

/* Something that could not be a name of the manual is ENOENT. */
static void test_unknown(void **state) {
	(void)state;
	static const char *const bad[] = {
		"versions", "opt.no_such_option", "arena.0", "arena.0.purge.x",
		"stats.arenas.0.bins.100000.nmalloc", "arenas.bin.100000.size",
		"stats.mutexes.no_such_lock.num_ops", "", ".", "arena..purge",
	};
	for (size_t k = 0; k < MP_ARRAY_SIZE(bad); k++) {
		uint64_t v;
		size_t len = sizeof(v);
		int r = mallctl(bad[k], &v, &len, NULL, 0);
		MP_ASSERT(r == ENOENT, "\"%s\": %d, not ENOENT", bad[k], r);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_destroyed),   /* first: see there */
		cmocka_unit_test(test_namespace),
		cmocka_unit_test(test_extents),
		cmocka_unit_test(test_global_mutexes),
		cmocka_unit_test(test_unknown),
	};
	return mp_run_tests(tests);
}
