/*
 * stats.c: malloc_stats_print, as text or as one JSON object, in
 * jemalloc 5.3's layout: its section titles, its keys, its table headers
 * and column widths (per-bin and per-large-class tables included), so
 * that what reads jemalloc's report (Redis's and Valkey's MEMORY
 * MALLOC-STATS, scripts cutting the bin table by column, JSON readers
 * under "jemalloc") reads ours.  Everything printed comes from the
 * options table (conf.c), the size-class tables (sz.c), a few mallctl
 * names other files own (config.*, prof.*), and a fresh copy of the
 * statistics snapshot, which ctl.c takes under its lock and hands over
 * (ctl_snapshot_copy): this file takes no ctl lock and never reads ctl's
 * own snapshot.  The mutex tables have the locks this library has
 * (jemalloc's global ones, and per arena its lock, its cache list's and
 * its shared cache's); the per-bin rows have no mutex columns (bins have
 * no locks).  Destroyed arenas' sum is printed after the merged arena, as
 * jemalloc does, unless d.  With prof_stats the merged arenas' bin and
 * large tables have jemalloc's four prof_* columns (and JSON keys).  Left
 * out of jemalloc's report: the extents and HPA tables (opts e and h
 * change nothing).
 *
 * Output is formatted into a 4 KiB stack buffer and handed to the
 * caller's write_cb in chunks, so printing never calls malloc (the copy
 * is metadata memory, mapped for the print).  No lock is held while
 * printing, since the copy is ours alone: a callback may itself call
 * mallctl (or malloc) without deadlocking, and a new epoch it takes does
 * not show in the rest of the report.
 */
#include "malloc_prof/internal/internal.h"

#define STATS_BUF_SIZE 4096
#define STATS_JSON_DEPTH 8

typedef struct stats_out_s {
	void (*write_cb)(void *, const char *);
	void *cbopaque;
	mp_buf_t w;              /* over buf, flushed by stats_flush */
	unsigned depth;          /* JSON nesting */
	bool nonempty[STATS_JSON_DEPTH]; /* a member was written at depth */
	char buf[STATS_BUF_SIZE];
} stats_out_t;

/* What the opts letters leave in. */
typedef struct stats_sel_s {
	bool json;               /* J */
	bool general;            /* g omits version, config, opt, arenas.* */
	bool merged;             /* m omits the merged arena stats */
	bool unmerged;           /* a omits the per-arena stats */
	bool bins;               /* b omits the bin classes */
	bool large;              /* l omits the large classes */
	bool mutex;              /* x omits the mutex tables */
	bool destroyed;          /* d omits the destroyed arenas' sum */
} stats_sel_t;

int MP_PUBLIC(mallctl)(const char *name, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen);

static void stats_write_default(void *cbopaque, const char *s) {
	mp_write(s);
}

/* The buffered writer's sink: one NUL-terminated chunk to write_cb. */
static bool stats_flush(void *ctx, const char *p, size_t n) {
	stats_out_t *out = ctx;
	(void)n;
	out->write_cb(out->cbopaque, p);
	return false;
}

static void stats_putc(stats_out_t *out, char c) {
	mp_buf_putc(&out->w, c);
}

static void stats_printf(stats_out_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void stats_printf(stats_out_t *out, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_buf_vprintf(&out->w, fmt, ap);
	va_end(ap);
}

/* ----------------------------------------------------------------- JSON */

static void stats_json_indent(stats_out_t *out) {
	stats_putc(out, '\n');
	for (unsigned i = 0; i < out->depth; i++)
		stats_putc(out, '\t');
}

/* s as a JSON string literal: quotes, backslashes and control bytes are
 * escaped. */
static void stats_json_string(stats_out_t *out, const char *s) {
	stats_putc(out, '"');
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			stats_putc(out, '\\');
			stats_putc(out, (char)c);
		} else if (c < 0x20) {
			stats_printf(out, "\\u%04x", c);
		} else {
			stats_putc(out, (char)c);
		}
	}
	stats_putc(out, '"');
}

/* Start a member (key != NULL) or an array element: separator, newline,
 * indentation, key. */
static void stats_json_member(stats_out_t *out, const char *key) {
	if (out->nonempty[out->depth])
		stats_putc(out, ',');
	out->nonempty[out->depth] = true;
	stats_json_indent(out);
	if (key != NULL) {
		stats_json_string(out, key);
		stats_printf(out, ": ");
	}
}

static void stats_json_open(stats_out_t *out, const char *key, char bracket) {
	stats_json_member(out, key);
	stats_putc(out, bracket);
	mp_assert(out->depth + 1 < STATS_JSON_DEPTH);
	out->depth++;
	out->nonempty[out->depth] = false;
}

static void stats_json_close(stats_out_t *out, char bracket) {
	bool had_members = out->nonempty[out->depth];
	out->depth--;
	if (had_members)
		stats_json_indent(out);
	stats_putc(out, bracket);
}

static void stats_json_u64(stats_out_t *out, const char *key, uint64_t v) {
	stats_json_member(out, key);
	stats_printf(out, "%llu", (unsigned long long)v);
}

static void stats_json_i64(stats_out_t *out, const char *key, int64_t v) {
	stats_json_member(out, key);
	stats_printf(out, "%lld", (long long)v);
}

static void stats_json_bool(stats_out_t *out, const char *key, bool v) {
	stats_json_member(out, key);
	stats_printf(out, "%s", v ? "true" : "false");
}

static void stats_json_str(stats_out_t *out, const char *key,
    const char *v) {
	stats_json_member(out, key);
	stats_json_string(out, v);
}

/* ------------------------------------------------------------ mallctl */

/* A value read through mallctl (config.*, prof.*, arenas.*: the names
 * other files own); false if the name does not answer. */
static bool stats_ctl(const char *name, void *v, size_t len) {
	size_t l = len;
	return MP_PUBLIC(mallctl)(name, v, &l, NULL, 0) == 0 && l == len;
}

/* ------------------------------------------------------------- tables */

/*
 * jemalloc's table rows: each column printed in its own width (the
 * width includes the blanks before the value), right-justified unless
 * said otherwise, with no separator.  The widths below are jemalloc
 * 5.3's, so that programs that cut its tables by column (Redis's MEMORY
 * MALLOC-STATS readers) cut ours the same way.
 */
static void stats_col_u(stats_out_t *out, int width, uint64_t v) {
	stats_printf(out, "%*llu", width, (unsigned long long)v);
}

static void stats_col_s(stats_out_t *out, int width, const char *v) {
	stats_printf(out, "%*s", width, v);
}

/* Events per second over the uptime, as jemalloc computes it. */
static uint64_t stats_rate(uint64_t v, uint64_t uptime_ns) {
	uint64_t sec = uptime_ns / 1000000000u;
	if (uptime_ns == 0 || v == 0)
		return 0;
	return sec == 0 ? v : v / sec;
}

/* Used regions over available ones, "0.xyz" or "1" (jemalloc's util
 * column); " race" when the counters crossed. */
static void stats_util(size_t used, size_t avail, char buf[8]) {
	if (avail == 0) {
		mp_snprintf(buf, 8, "1");
		return;
	}
	if (used > avail) {
		mp_snprintf(buf, 8, " race");
		return;
	}
	unsigned n = (unsigned)((uint64_t)used * 1000 / avail);
	if (n >= 1000)
		mp_snprintf(buf, 8, "1");
	else
		mp_snprintf(buf, 8, "0.%03u", n);
}

/* ----------------------------------------------------- general section */

/* config.* in jemalloc's order: name, and whether it is a string. */
static const struct {
	const char *name;
	bool str;
} stats_config[] = {
	{"cache_oblivious", false}, {"debug", false}, {"fill", false},
	{"lazy_lock", false}, {"malloc_conf", true},
	{"opt_safety_checks", false}, {"prof", false},
	{"prof_libgcc", false}, {"prof_libunwind", false}, {"stats", false},
	{"utrace", false}, {"xmalloc", false}, {"prefix", true},
};

/* An option that can be changed at run time, and the name that says its
 * current value (jemalloc's notes beside the opt lines). */
static const char *stats_opt_mutable(const char *opt) {
	if (strcmp(opt, "dirty_decay_ms") == 0)
		return "arenas.dirty_decay_ms";
	if (strcmp(opt, "muzzy_decay_ms") == 0)
		return "arenas.muzzy_decay_ms";
	if (strcmp(opt, "background_thread") == 0)
		return "background_thread";
	return NULL;
}

/* An option's value, typed for JSON (strings quoted) or as text. */
static void stats_opt_json(stats_out_t *out, const conf_opt_t *opt) {
	switch (opt->type) {
	case CONF_BOOL:
		stats_json_bool(out, opt->name, *(const bool *)opt->var);
		break;
	case CONF_UNSIGNED:
		stats_json_u64(out, opt->name, *(const unsigned *)opt->var);
		break;
	case CONF_SIZE_T:
		stats_json_u64(out, opt->name, *(const size_t *)opt->var);
		break;
	case CONF_SSIZE_T:
		stats_json_i64(out, opt->name, *(const ssize_t *)opt->var);
		break;
	case CONF_STRING:
	case CONF_ENUM:
		stats_json_str(out, opt->name, conf_opt_str(opt));
		break;
	}
}

static void stats_opt_text(stats_out_t *out, const conf_opt_t *opt) {
	char v[128];
	conf_opt_format(opt, v, sizeof(v));
	bool quote = opt->type == CONF_STRING || opt->type == CONF_ENUM;
	stats_printf(out, "  opt.%s: %s%s%s", opt->name, quote ? "\"" : "",
	    v, quote ? "\"" : "");
	const char *alt = stats_opt_mutable(opt->name);
	if (alt != NULL && opt->type == CONF_SSIZE_T) {
		ssize_t cur;
		if (stats_ctl(alt, &cur, sizeof(cur)))
			stats_printf(out, " (%s: %zd)", alt, cur);
	} else if (alt != NULL && opt->type == CONF_BOOL) {
		bool cur;
		if (stats_ctl(alt, &cur, sizeof(cur)))
			stats_printf(out, " (%s: %s)", alt,
			    cur ? "true" : "false");
	}
	stats_printf(out, "\n");
}

/* The prof.* settings jemalloc prints, when the profiler answers. */
static void stats_prof_general(stats_out_t *out, bool json) {
	bool tai, active, gdump;
	uint64_t interval;
	ssize_t lg_sample;
	if (!stats_ctl("prof.thread_active_init", &tai, sizeof(tai)) ||
	    !stats_ctl("prof.active", &active, sizeof(active)) ||
	    !stats_ctl("prof.gdump", &gdump, sizeof(gdump)) ||
	    !stats_ctl("prof.interval", &interval, sizeof(interval)) ||
	    !stats_ctl("prof.lg_sample", &lg_sample, sizeof(lg_sample)))
		return;
	if (json) {
		stats_json_open(out, "prof", '{');
		stats_json_bool(out, "thread_active_init", tai);
		stats_json_bool(out, "active", active);
		stats_json_bool(out, "gdump", gdump);
		stats_json_u64(out, "interval", interval);
		stats_json_i64(out, "lg_sample", lg_sample);
		stats_json_close(out, '}');
		return;
	}
	stats_printf(out, "Profiling settings\n");
	stats_printf(out, "  prof.thread_active_init: %s\n",
	    tai ? "true" : "false");
	stats_printf(out, "  prof.active: %s\n", active ? "true" : "false");
	stats_printf(out, "  prof.gdump: %s\n", gdump ? "true" : "false");
	stats_printf(out, "  prof.interval: %llu\n",
	    (unsigned long long)interval);
	stats_printf(out, "  prof.lg_sample: %zd\n", lg_sample);
}

static unsigned stats_nhbins(void) {
	unsigned n = SC_NBINS;
	if (!stats_ctl("arenas.nhbins", &n, sizeof(n)))
		n = SC_NBINS;
	return n;
}

static void stats_general_text(stats_out_t *out) {
	stats_printf(out, "Version: \"%s\"\n", MP_VERSION);
	stats_printf(out, "Build-time option settings\n");
	for (size_t i = 0; i < sizeof(stats_config) / sizeof(stats_config[0]);
	    i++) {
		char name[64];
		mp_snprintf(name, sizeof(name), "config.%s",
		    stats_config[i].name);
		if (stats_config[i].str) {
			const char *v;
			if (stats_ctl(name, &v, sizeof(v)))
				stats_printf(out, "  %s: \"%s\"\n", name, v);
		} else {
			bool v;
			if (stats_ctl(name, &v, sizeof(v)))
				stats_printf(out, "  %s: %s\n", name,
				    v ? "true" : "false");
		}
	}
	stats_printf(out, "Run-time option settings\n");
	for (unsigned i = 0; i < conf_nopts; i++) {
		if (conf_opt_available(&conf_opts[i]))
			stats_opt_text(out, &conf_opts[i]);
	}
	stats_prof_general(out, false);
	stats_printf(out, "Arenas: %u\n", atomic_load(&narenas_total));
	stats_printf(out, "Quantum size: %zu\n", QUANTUM);
	stats_printf(out, "Page size: %zu\n", PAGE);
	stats_printf(out, "Maximum thread-cached size class: %zu\n",
	    opt_tcache_max);
	stats_printf(out, "Number of bin size classes: %u\n", SC_NBINS);
	stats_printf(out, "Number of thread-cache bin size classes: %u\n",
	    stats_nhbins());
	stats_printf(out, "Number of large size classes: %u\n",
	    (unsigned)SC_NLEXTENTS);
}

static void stats_general_json(stats_out_t *out) {
	stats_json_str(out, "version", MP_VERSION);
	stats_json_open(out, "config", '{');
	for (size_t i = 0; i < sizeof(stats_config) / sizeof(stats_config[0]);
	    i++) {
		char name[64];
		mp_snprintf(name, sizeof(name), "config.%s",
		    stats_config[i].name);
		if (stats_config[i].str) {
			const char *v;
			if (stats_ctl(name, &v, sizeof(v)))
				stats_json_str(out, stats_config[i].name, v);
		} else {
			bool v;
			if (stats_ctl(name, &v, sizeof(v)))
				stats_json_bool(out, stats_config[i].name, v);
		}
	}
	stats_json_close(out, '}');
	stats_json_open(out, "opt", '{');
	for (unsigned i = 0; i < conf_nopts; i++) {
		if (conf_opt_available(&conf_opts[i]))
			stats_opt_json(out, &conf_opts[i]);
	}
	stats_json_close(out, '}');
	stats_prof_general(out, true);
}

/* "arenas": the size classes (JSON only in jemalloc's layout; the text
 * has them in the general lines above). */
static void stats_arenas_json(stats_out_t *out, const stats_sel_t *sel) {
	stats_json_open(out, "arenas", '{');
	stats_json_u64(out, "narenas", atomic_load(&narenas_total));
	ssize_t ms;
	if (stats_ctl("arenas.dirty_decay_ms", &ms, sizeof(ms)))
		stats_json_i64(out, "dirty_decay_ms", ms);
	if (stats_ctl("arenas.muzzy_decay_ms", &ms, sizeof(ms)))
		stats_json_i64(out, "muzzy_decay_ms", ms);
	stats_json_u64(out, "quantum", QUANTUM);
	stats_json_u64(out, "page", PAGE);
	stats_json_u64(out, "tcache_max", opt_tcache_max);
	stats_json_u64(out, "nbins", SC_NBINS);
	stats_json_u64(out, "nhbins", stats_nhbins());
	if (sel->bins) {
		stats_json_open(out, "bin", '[');
		for (unsigned i = 0; i < SC_NBINS; i++) {
			stats_json_open(out, NULL, '{');
			stats_json_u64(out, "size", sz_index2size(i));
			stats_json_u64(out, "nregs", sz_slab_nregs_get(i));
			stats_json_u64(out, "slab_size",
			    sz_slab_size_get(i));
			stats_json_u64(out, "nshards", 1);
			stats_json_close(out, '}');
		}
		stats_json_close(out, ']');
	}
	stats_json_u64(out, "nlextents", SC_NLEXTENTS);
	if (sel->large) {
		stats_json_open(out, "lextent", '[');
		for (unsigned i = 0; i < SC_NLEXTENTS; i++) {
			stats_json_open(out, NULL, '{');
			stats_json_u64(out, "size",
			    sz_index2size(SC_NBINS + i));
			stats_json_close(out, '}');
		}
		stats_json_close(out, ']');
	}
	stats_json_close(out, '}');
}

/* ------------------------------------------------------- arena section */

static void stats_decay_row(stats_out_t *out, const char *name, ssize_t ms,
    size_t npages, uint64_t sweeps, uint64_t madvises, uint64_t purged) {
	stats_col_s(out, 9, name);
	if (ms >= 0)
		stats_printf(out, "%6zd", ms);
	else
		stats_col_s(out, 6, "N/A");
	stats_col_u(out, 13, npages);
	stats_col_u(out, 13, sweeps);
	stats_col_u(out, 13, madvises);
	stats_col_u(out, 13, purged);
	stats_printf(out, "\n");
}

static void stats_count_row(stats_out_t *out, const char *title,
    size_t allocated, const uint64_t v[5], uint64_t uptime) {
	stats_printf(out, "%-21s", title);
	stats_col_u(out, 16, allocated);
	for (unsigned k = 0; k < 5; k++) {
		stats_col_u(out, 16, v[k]);
		stats_col_u(out, 10, stats_rate(v[k], uptime));
	}
	stats_printf(out, "\n");
}

static void stats_mem_row(stats_out_t *out, const char *title, size_t v) {
	char t[32];
	mp_snprintf(t, sizeof(t), "%s:", title);
	stats_printf(out, "%-21s", t);
	stats_col_u(out, 16, v);
	stats_printf(out, "\n");
}

/*
 * prof_stats (jemalloc 5.3): its counts of sampled objects per class,
 * {req_sum, count} live and accumulated, join the merged arenas' bin and
 * large tables (text columns prof_live_requested, prof_live_count,
 * prof_accum_requested, prof_accum_count after nrequests' rate; the same
 * JSON keys) when the profiler runs with prof_stats, as jemalloc prints
 * them: only there, the counts being the process's, not an arena's.
 * Read through mallctl (prof.stats.*, prof_stats.c's names) at the print.
 */
typedef struct stats_prof_pair_s {
	uint64_t req_sum;
	uint64_t count;
} stats_prof_pair_t;

typedef struct stats_prof_row_s {
	stats_prof_pair_t live, accum;
} stats_prof_row_t;

static bool stats_prof_stats_on(void) {
	bool prof = false, on = false;
	return stats_ctl("opt.prof", &prof, sizeof(prof)) && prof &&
	    stats_ctl("opt.prof_stats", &on, sizeof(on)) && on;
}

/* Class j of group ("bins" or "lextents"); zeros if it does not answer. */
static stats_prof_row_t stats_prof_row(const char *group, unsigned j) {
	stats_prof_row_t r;
	char name[64];
	memset(&r, 0, sizeof(r));
	mp_snprintf(name, sizeof(name), "prof.stats.%s.%u.live", group, j);
	if (!stats_ctl(name, &r.live, sizeof(r.live)))
		memset(&r.live, 0, sizeof(r.live));
	mp_snprintf(name, sizeof(name), "prof.stats.%s.%u.accum", group, j);
	if (!stats_ctl(name, &r.accum, sizeof(r.accum)))
		memset(&r.accum, 0, sizeof(r.accum));
	return r;
}

static void stats_prof_header(stats_out_t *out) {
	stats_col_s(out, 21, "prof_live_requested");
	stats_col_s(out, 17, "prof_live_count");
	stats_col_s(out, 21, "prof_accum_requested");
	stats_col_s(out, 17, "prof_accum_count");
}

static void stats_prof_cols(stats_out_t *out, const stats_prof_row_t *r) {
	stats_col_u(out, 21, r->live.req_sum);
	stats_col_u(out, 17, r->live.count);
	stats_col_u(out, 21, r->accum.req_sum);
	stats_col_u(out, 17, r->accum.count);
}

static void stats_prof_json(stats_out_t *out, const stats_prof_row_t *r) {
	stats_json_u64(out, "prof_live_requested", r->live.req_sum);
	stats_json_u64(out, "prof_live_count", r->live.count);
	stats_json_u64(out, "prof_accum_requested", r->accum.req_sum);
	stats_json_u64(out, "prof_accum_count", r->accum.count);
}

static void stats_bins_text(stats_out_t *out, const ctl_arena_xsnap_t *x,
    bool prof) {
	uint64_t up = x->uptime;
	stats_printf(out, "bins:");
	stats_col_s(out, 15, "size");
	stats_col_s(out, 4, "ind");
	stats_col_s(out, 13, "allocated");
	stats_col_s(out, 13, "nmalloc");
	stats_col_s(out, 8, "(#/sec)");
	stats_col_s(out, 13, "ndalloc");
	stats_col_s(out, 8, "(#/sec)");
	stats_col_s(out, 13, "nrequests");
	stats_col_s(out, 10, "(#/sec)");
	if (prof)
		stats_prof_header(out);
	stats_col_s(out, 9, "nshards");
	stats_col_s(out, 13, "curregs");
	stats_col_s(out, 13, "curslabs");
	stats_col_s(out, 15, "nonfull_slabs");
	stats_col_s(out, 5, "regs");
	stats_col_s(out, 4, "pgs");
	stats_col_s(out, 1, " ");
	stats_col_s(out, 6, "util");
	stats_col_s(out, 13, "nfills");
	stats_col_s(out, 8, "(#/sec)");
	stats_col_s(out, 13, "nflushes");
	stats_col_s(out, 8, "(#/sec)");
	stats_col_s(out, 13, "nslabs");
	stats_col_s(out, 13, "nreslabs");
	stats_col_s(out, 8, "(#/sec)");
	stats_printf(out, "\n");
	bool in_gap = false;
	for (unsigned j = 0; j < SC_NBINS; j++) {
		const ctl_bin_snap_t *b = &x->bins[j];
		bool gap_prev = in_gap;
		stats_prof_row_t pr = {{0, 0}, {0, 0}};
		if (prof)
			pr = stats_prof_row("bins", j);
		/* Classes never used are left out, a run of them shown as
		 * "---", as jemalloc does (with prof_stats, those never
		 * sampled either). */
		in_gap = b->nslabs == 0 && (!prof || pr.accum.count == 0);
		if (gap_prev && !in_gap)
			stats_printf(out, "                     ---\n");
		if (in_gap)
			continue;
		size_t size = sz_index2size(j);
		char util[8];
		stats_util(b->curregs, (size_t)sz_slab_nregs_get(j) *
		    b->curslabs, util);
		stats_col_u(out, 20, size);
		stats_col_u(out, 4, j);
		stats_col_u(out, 13, (uint64_t)b->curregs * size);
		stats_col_u(out, 13, b->nmalloc);
		stats_col_u(out, 8, stats_rate(b->nmalloc, up));
		stats_col_u(out, 13, b->ndalloc);
		stats_col_u(out, 8, stats_rate(b->ndalloc, up));
		stats_col_u(out, 13, b->nrequests);
		stats_col_u(out, 10, stats_rate(b->nrequests, up));
		if (prof)
			stats_prof_cols(out, &pr);
		stats_col_u(out, 9, 1);
		stats_col_u(out, 13, b->curregs);
		stats_col_u(out, 13, b->curslabs);
		stats_col_u(out, 15, b->nonfull_slabs);
		stats_col_u(out, 5, sz_slab_nregs_get(j));
		stats_col_u(out, 4, sz_slab_size_get(j) / PAGE);
		stats_col_s(out, 1, " ");
		stats_col_s(out, 6, util);
		stats_col_u(out, 13, b->nfills);
		stats_col_u(out, 8, stats_rate(b->nfills, up));
		stats_col_u(out, 13, b->nflushes);
		stats_col_u(out, 8, stats_rate(b->nflushes, up));
		stats_col_u(out, 13, b->nslabs);
		stats_col_u(out, 13, b->nreslabs);
		stats_col_u(out, 8, stats_rate(b->nreslabs, up));
		stats_printf(out, "\n");
	}
	if (in_gap)
		stats_printf(out, "                     ---\n");
}

static void stats_lextents_text(stats_out_t *out,
    const ctl_arena_xsnap_t *x, bool prof) {
	uint64_t up = x->uptime;
	stats_printf(out, "large:");
	stats_col_s(out, 14, "size");
	stats_col_s(out, 4, "ind");
	stats_col_s(out, 13, "allocated");
	stats_col_s(out, 13, "nmalloc");
	stats_col_s(out, 8, "(#/sec)");
	stats_col_s(out, 13, "ndalloc");
	stats_col_s(out, 8, "(#/sec)");
	stats_col_s(out, 13, "nrequests");
	stats_col_s(out, 8, "(#/sec)");
	if (prof)
		stats_prof_header(out);
	stats_col_s(out, 13, "curlextents");
	stats_printf(out, "\n");
	bool in_gap = false;
	for (unsigned j = 0; j < SC_NLEXTENTS; j++) {
		const ctl_lextent_snap_t *l = &x->lextents[j];
		bool gap_prev = in_gap;
		in_gap = l->nrequests == 0;
		if (gap_prev && !in_gap)
			stats_printf(out, "                     ---\n");
		if (in_gap)
			continue;
		size_t size = sz_index2size(SC_NBINS + j);
		stats_col_u(out, 20, size);
		stats_col_u(out, 4, SC_NBINS + j);
		stats_col_u(out, 13, (uint64_t)l->curlextents * size);
		stats_col_u(out, 13, l->nmalloc);
		stats_col_u(out, 8, stats_rate(l->nmalloc, up));
		stats_col_u(out, 13, l->ndalloc);
		stats_col_u(out, 8, stats_rate(l->ndalloc, up));
		stats_col_u(out, 13, l->nrequests);
		stats_col_u(out, 8, stats_rate(l->nrequests, up));
		if (prof) {
			stats_prof_row_t pr = stats_prof_row("lextents", j);
			stats_prof_cols(out, &pr);
		}
		stats_col_u(out, 13, l->curlextents);
		stats_printf(out, "\n");
	}
	if (in_gap)
		stats_printf(out, "                     ---\n");
}

/* jemalloc's mutex tables: a header of its counters' columns, then a
 * row per lock. */
static void stats_mutex_header(stats_out_t *out) {
	static const struct {
		const char *title;
		int width;
	} cols[] = {
		{"n_lock_ops", 16}, {"(#/sec)", 8}, {"n_waiting", 16},
		{"(#/sec)", 8}, {"n_spin_acq", 16}, {"(#/sec)", 8},
		{"n_owner_switch", 16}, {"(#/sec)", 8},
		{"total_wait_ns", 16}, {"(#/sec)", 10}, {"max_wait_ns", 16},
		{"max_n_thds", 12},
	};
	stats_printf(out, "%-21s", "");
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		stats_col_s(out, cols[i].width, cols[i].title);
	stats_printf(out, "\n");
}

static void stats_mutex_row(stats_out_t *out, const char *name,
    const mp_mutex_prof_t *m, uint64_t up) {
	stats_printf(out, "%-21s", name);
	stats_col_u(out, 16, m->n_lock_ops);
	stats_col_u(out, 8, stats_rate(m->n_lock_ops, up));
	stats_col_u(out, 16, m->n_wait_times);
	stats_col_u(out, 8, stats_rate(m->n_wait_times, up));
	stats_col_u(out, 16, m->n_spin_acquired);
	stats_col_u(out, 8, stats_rate(m->n_spin_acquired, up));
	stats_col_u(out, 16, m->n_owner_switches);
	stats_col_u(out, 8, stats_rate(m->n_owner_switches, up));
	stats_col_u(out, 16, m->tot_wait_ns);
	stats_col_u(out, 10, stats_rate(m->tot_wait_ns, up));
	stats_col_u(out, 16, m->max_wait_ns);
	stats_col_u(out, 12, m->max_n_thds);
	stats_printf(out, "\n");
}

static void stats_mutex_json(stats_out_t *out, const char *name,
    const mp_mutex_prof_t *m) {
	stats_json_open(out, name, '{');
	stats_json_u64(out, "num_ops", m->n_lock_ops);
	stats_json_u64(out, "num_wait", m->n_wait_times);
	stats_json_u64(out, "num_spin_acq", m->n_spin_acquired);
	stats_json_u64(out, "num_owner_switch", m->n_owner_switches);
	stats_json_u64(out, "total_wait_time", m->tot_wait_ns);
	stats_json_u64(out, "max_wait_time", m->max_wait_ns);
	stats_json_u64(out, "max_num_thds", m->max_n_thds);
	stats_json_close(out, '}');
}

static const char *stats_dss(void) {
	const conf_opt_t *opt = conf_opt_lookup("dss", 3);
	return opt != NULL ? conf_opt_str(opt) : "disabled";
}

/* opt.hpa: the small extent cache's bytes and the pageslabs' counters
 * (hpa.c), in jemalloc's "HPA shard stats" place, after the arena's
 * memory rows. */
static void stats_hpa_text(stats_out_t *out, const arena_stats_t *s,
    uint64_t up) {
	static const char *const names[4] = {"Purge passes", "Purges",
	    "Hugifies", "Dehugifies"};
	uint64_t v[4] = {s->hpa_npurge_passes, s->hpa_npurges,
	    s->hpa_nhugifies, s->hpa_ndehugifies};
	stats_printf(out, "Bytes in small extent cache: %zu\n",
	    s->hpa_sec_bytes);
	stats_printf(out, "HPA shard stats:\n");
	for (unsigned k = 0; k < 4; k++)
		stats_printf(out, "  %s: %llu (%llu / sec)\n", names[k],
		    (unsigned long long)v[k],
		    (unsigned long long)stats_rate(v[k], up));
	stats_printf(out, "  pageslabs: %zu (%zu huge)\n", s->hpa_npageslabs,
	    s->hpa_nhuge);
	stats_printf(out, "  active pages: %zu, dirty pages: %zu\n",
	    s->hpa_nactive, s->hpa_ndirty);
}

static void stats_hpa_json(stats_out_t *out, const arena_stats_t *s) {
	stats_json_u64(out, "sec_bytes", s->hpa_sec_bytes);
	stats_json_open(out, "hpa_shard", '{');
	stats_json_u64(out, "npurge_passes", s->hpa_npurge_passes);
	stats_json_u64(out, "npurges", s->hpa_npurges);
	stats_json_u64(out, "nhugifies", s->hpa_nhugifies);
	stats_json_u64(out, "ndehugifies", s->hpa_ndehugifies);
	stats_json_u64(out, "npageslabs", s->hpa_npageslabs);
	stats_json_u64(out, "nhuge", s->hpa_nhuge);
	stats_json_u64(out, "nactive", s->hpa_nactive);
	stats_json_u64(out, "ndirty", s->hpa_ndirty);
	stats_json_close(out, '}');
}

/* prof: the merged arenas' tables, with prof_stats on (see above). */
static void stats_arena_text(stats_out_t *out, const stats_sel_t *sel,
    const arena_stats_t *s, const ctl_arena_xsnap_t *x, bool prof) {
	stats_printf(out, "assigned threads: %u\n", (unsigned)s->nthreads);
	if (x == NULL) {
		stats_printf(out, "(no memory for the per-class tables)\n");
		return;
	}
	uint64_t up = x->uptime;
	stats_printf(out, "uptime: %llu\n", (unsigned long long)up);
	stats_printf(out, "dss allocation precedence: \"%s\"\n", stats_dss());
	stats_printf(out, "decaying:  time       npages       sweeps     "
	    "madvises       purged\n");
	stats_decay_row(out, "dirty:", x->dirty_decay_ms, s->pdirty,
	    s->npurge, s->nmadvise, s->purged);
	stats_decay_row(out, "muzzy:", x->muzzy_decay_ms, s->pmuzzy,
	    x->muzzy_npurge, x->muzzy_nmadvise, x->muzzy_purged);
	stats_printf(out, "%-21s", "");
	stats_col_s(out, 16, "allocated");
	static const char *const titles[5] = {"nmalloc", "ndalloc",
	    "nrequests", "nfill", "nflush"};
	for (unsigned k = 0; k < 5; k++) {
		stats_col_s(out, 16, titles[k]);
		stats_col_s(out, 10, "(#/sec)");
	}
	stats_printf(out, "\n");
	uint64_t small[5] = {x->small_nmalloc, x->small_ndalloc,
	    x->small_nrequests, x->small_nfills, x->small_nflushes};
	uint64_t large[5] = {s->large_nmalloc, s->large_ndalloc,
	    x->large_nrequests, x->large_nfills, x->large_nflushes};
	uint64_t total[5];
	for (unsigned k = 0; k < 5; k++)
		total[k] = small[k] + large[k];
	stats_count_row(out, "small:", x->small_allocated, small, up);
	stats_count_row(out, "large:", s->large_allocated, large, up);
	stats_count_row(out, "total:", x->small_allocated +
	    s->large_allocated, total, up);
	stats_printf(out, "%-21s%16s\n", "", "");
	stats_mem_row(out, "active", s->pactive << LG_PAGE);
	stats_mem_row(out, "mapped", s->mapped);
	stats_mem_row(out, "retained", s->retained);
	stats_mem_row(out, "base", x->base);
	stats_mem_row(out, "internal", x->internal);
	stats_mem_row(out, "metadata_thp", x->metadata_thp);
	stats_mem_row(out, "tcache_bytes", x->tcache_bytes);
	stats_mem_row(out, "resident", x->resident);
	stats_mem_row(out, "abandoned_vm", x->abandoned_vm);
	stats_mem_row(out, "extent_avail", x->extent_avail);
	if (opt_hpa)
		stats_hpa_text(out, s, up);
	if (sel->mutex) {
		stats_mutex_header(out);
		for (unsigned k = 0; k < CTL_ARENA_NMUTEXES; k++)
			stats_mutex_row(out, ctl_arena_mutex_names[k],
			    &x->mutexes[k], up);
	}
	if (sel->bins)
		stats_bins_text(out, x, prof);
	if (sel->large)
		stats_lextents_text(out, x, prof);
}

static void stats_arena_json(stats_out_t *out, const stats_sel_t *sel,
    const char *key, const arena_stats_t *s, const ctl_arena_xsnap_t *x,
    bool prof) {
	stats_json_open(out, key, '{');
	stats_json_u64(out, "nthreads", s->nthreads);
	if (x == NULL) {
		stats_json_close(out, '}');
		return;
	}
	stats_json_u64(out, "uptime_ns", x->uptime);
	stats_json_str(out, "dss", stats_dss());
	stats_json_i64(out, "dirty_decay_ms", x->dirty_decay_ms);
	stats_json_i64(out, "muzzy_decay_ms", x->muzzy_decay_ms);
	stats_json_u64(out, "pactive", s->pactive);
	stats_json_u64(out, "pdirty", s->pdirty);
	stats_json_u64(out, "pmuzzy", s->pmuzzy);
	stats_json_u64(out, "dirty_npurge", s->npurge);
	stats_json_u64(out, "dirty_nmadvise", s->nmadvise);
	stats_json_u64(out, "dirty_purged", s->purged);
	stats_json_u64(out, "muzzy_npurge", x->muzzy_npurge);
	stats_json_u64(out, "muzzy_nmadvise", x->muzzy_nmadvise);
	stats_json_u64(out, "muzzy_purged", x->muzzy_purged);
	stats_json_open(out, "small", '{');
	stats_json_u64(out, "allocated", x->small_allocated);
	stats_json_u64(out, "nmalloc", x->small_nmalloc);
	stats_json_u64(out, "ndalloc", x->small_ndalloc);
	stats_json_u64(out, "nrequests", x->small_nrequests);
	stats_json_u64(out, "nfills", x->small_nfills);
	stats_json_u64(out, "nflushes", x->small_nflushes);
	stats_json_close(out, '}');
	stats_json_open(out, "large", '{');
	stats_json_u64(out, "allocated", s->large_allocated);
	stats_json_u64(out, "nmalloc", s->large_nmalloc);
	stats_json_u64(out, "ndalloc", s->large_ndalloc);
	stats_json_u64(out, "nrequests", x->large_nrequests);
	stats_json_u64(out, "nfills", x->large_nfills);
	stats_json_u64(out, "nflushes", x->large_nflushes);
	stats_json_close(out, '}');
	stats_json_u64(out, "mapped", s->mapped);
	stats_json_u64(out, "retained", s->retained);
	stats_json_u64(out, "base", x->base);
	stats_json_u64(out, "internal", x->internal);
	stats_json_u64(out, "metadata_thp", x->metadata_thp);
	stats_json_u64(out, "tcache_bytes", x->tcache_bytes);
	stats_json_u64(out, "resident", x->resident);
	stats_json_u64(out, "abandoned_vm", x->abandoned_vm);
	stats_json_u64(out, "extent_avail", x->extent_avail);
	if (opt_hpa)
		stats_hpa_json(out, s);
	if (sel->mutex) {
		stats_json_open(out, "mutexes", '{');
		for (unsigned k = 0; k < CTL_ARENA_NMUTEXES; k++)
			stats_mutex_json(out, ctl_arena_mutex_names[k],
			    &x->mutexes[k]);
		stats_json_close(out, '}');
	}
	if (sel->bins) {
		stats_json_open(out, "bins", '[');
		for (unsigned j = 0; j < SC_NBINS; j++) {
			const ctl_bin_snap_t *b = &x->bins[j];
			stats_json_open(out, NULL, '{');
			stats_json_u64(out, "nmalloc", b->nmalloc);
			stats_json_u64(out, "ndalloc", b->ndalloc);
			stats_json_u64(out, "curregs", b->curregs);
			stats_json_u64(out, "nrequests", b->nrequests);
			if (prof) {
				stats_prof_row_t pr = stats_prof_row("bins",
				    j);
				stats_prof_json(out, &pr);
			}
			stats_json_u64(out, "nfills", b->nfills);
			stats_json_u64(out, "nflushes", b->nflushes);
			stats_json_u64(out, "nreslabs", b->nreslabs);
			stats_json_u64(out, "curslabs", b->curslabs);
			stats_json_u64(out, "nonfull_slabs", b->nonfull_slabs);
			stats_json_close(out, '}');
		}
		stats_json_close(out, ']');
	}
	if (sel->large) {
		stats_json_open(out, "lextents", '[');
		for (unsigned j = 0; j < SC_NLEXTENTS; j++) {
			stats_json_open(out, NULL, '{');
			if (prof) {
				stats_prof_row_t pr = stats_prof_row(
				    "lextents", j);
				stats_prof_json(out, &pr);
			}
			stats_json_u64(out, "curlextents",
			    x->lextents[j].curlextents);
			stats_json_close(out, '}');
		}
		stats_json_close(out, ']');
	}
	stats_json_close(out, '}');
}

/* jemalloc prints the merged arena only when there is more than one, or
 * when the per-arena stats are left out. */
static bool stats_show_merged(const stats_sel_t *sel,
    const ctl_snapshot_t *snap) {
	unsigned n = 0;
	for (unsigned i = 0; i < snap->narenas; i++)
		n += snap->arenas[i].initialized;
	return sel->merged && (n > 1 || !sel->unmerged);
}

static void stats_print_text(stats_out_t *out, const stats_sel_t *sel,
    const ctl_snapshot_t *snap) {
	stats_printf(out, "___ Begin jemalloc statistics ___\n");
	if (sel->general)
		stats_general_text(out);
	stats_printf(out, "Allocated: %zu, active: %zu, metadata: %zu "
	    "(n_thp %zu), resident: %zu, mapped: %zu, retained: %zu\n",
	    snap->allocated, snap->active, snap->metadata,
	    snap->metadata_thp, snap->resident,
	    snap->mapped, snap->retained);
	stats_printf(out, "Count of realloc(non-null-ptr, 0) calls: %zu\n",
	    snap->zero_reallocs);
	size_t bg_n;
	uint64_t bg_runs, bg_interval;
	background_thread_stats(&bg_n, &bg_runs, &bg_interval);
	stats_printf(out, "Background threads: %zu, num_runs: %llu, "
	    "run_interval: %llu ns\n", bg_n, (unsigned long long)bg_runs,
	    (unsigned long long)bg_interval);
	if (sel->mutex) {
		stats_mutex_header(out);
		for (unsigned k = 0; k < CTL_NGMUTEXES; k++)
			stats_mutex_row(out, ctl_gmutex_names[k],
			    &snap->gmutexes[k], snap->merged_x != NULL ?
			    snap->merged_x->uptime : 0);
	}
	if (sel->merged || sel->unmerged) {
		if (stats_show_merged(sel, snap)) {
			stats_printf(out, "Merged arenas stats:\n");
			stats_arena_text(out, sel, &snap->merged,
			    snap->merged_x, stats_prof_stats_on());
		}
		if (sel->destroyed && snap->destroyed_x != NULL) {
			stats_printf(out, "Destroyed arenas stats:\n");
			stats_arena_text(out, sel, &snap->destroyed,
			    snap->destroyed_x, false);
		}
		for (unsigned i = 0; sel->unmerged && i < snap->narenas; i++) {
			if (!snap->arenas[i].initialized)
				continue;
			stats_printf(out, "arenas[%u]:\n", i);
			stats_arena_text(out, sel, &snap->arenas[i].stats,
			    snap->arenas[i].x, false);
		}
	}
	stats_printf(out, "--- End jemalloc statistics ---\n");
}

static void stats_print_json(stats_out_t *out, const stats_sel_t *sel,
    const ctl_snapshot_t *snap) {
	stats_putc(out, '{');
	out->depth = 1;
	out->nonempty[1] = false;
	stats_json_open(out, "jemalloc", '{');
	if (sel->general) {
		stats_general_json(out);
		stats_arenas_json(out, sel);
	}
	stats_json_open(out, "stats", '{');
	stats_json_u64(out, "allocated", snap->allocated);
	stats_json_u64(out, "active", snap->active);
	stats_json_u64(out, "metadata", snap->metadata);
	stats_json_u64(out, "metadata_thp", snap->metadata_thp);
	stats_json_u64(out, "resident", snap->resident);
	stats_json_u64(out, "mapped", snap->mapped);
	stats_json_u64(out, "retained", snap->retained);
	stats_json_u64(out, "zero_reallocs", snap->zero_reallocs);
	size_t bg_n;
	uint64_t bg_runs, bg_interval;
	background_thread_stats(&bg_n, &bg_runs, &bg_interval);
	stats_json_open(out, "background_thread", '{');
	stats_json_u64(out, "num_threads", bg_n);
	stats_json_u64(out, "num_runs", bg_runs);
	stats_json_u64(out, "run_interval", bg_interval);
	stats_json_close(out, '}');
	if (sel->mutex) {
		stats_json_open(out, "mutexes", '{');
		for (unsigned k = 0; k < CTL_NGMUTEXES; k++)
			stats_mutex_json(out, ctl_gmutex_names[k],
			    &snap->gmutexes[k]);
		stats_json_close(out, '}');
	}
	stats_json_close(out, '}');
	if (sel->merged || sel->unmerged) {
		stats_json_open(out, "stats.arenas", '{');
		if (stats_show_merged(sel, snap))
			stats_arena_json(out, sel, "merged", &snap->merged,
			    snap->merged_x, stats_prof_stats_on());
		if (sel->destroyed && snap->destroyed_x != NULL)
			stats_arena_json(out, sel, "destroyed",
			    &snap->destroyed, snap->destroyed_x, false);
		for (unsigned i = 0; sel->unmerged && i < snap->narenas; i++) {
			char key[16];
			if (!snap->arenas[i].initialized)
				continue;
			mp_snprintf(key, sizeof(key), "%u", i);
			stats_arena_json(out, sel, key,
			    &snap->arenas[i].stats, snap->arenas[i].x, false);
		}
		stats_json_close(out, '}');
	}
	stats_json_close(out, '}');
	out->depth = 0;
	stats_printf(out, "\n}\n");
}

bool stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
    const char *opts) {
	stats_sel_t sel = {false, true, true, true, true, true, true, true};
	/* jemalloc's letters; e and h select what is never printed here
	 * (see the top of the file), so they are accepted and change
	 * nothing. */
	for (const char *o = opts; o != NULL && *o != '\0'; o++) {
		switch (*o) {
		case 'J': sel.json = true; break;
		case 'g': sel.general = false; break;
		case 'm': sel.merged = false; break;
		case 'a': sel.unmerged = false; break;
		case 'b': sel.bins = false; break;
		case 'l': sel.large = false; break;
		case 'x': sel.mutex = false; break;
		case 'd': sel.destroyed = false; break;
		default: break;          /* jemalloc ignores the others too */
		}
	}
	/* 4 KiB on the stack; the struct is not zeroed, only its header. */
	stats_out_t out;
	out.write_cb = write_cb != NULL ? write_cb : stats_write_default;
	out.cbopaque = cbopaque;
	mp_buf_init(&out.w, out.buf, sizeof(out.buf), stats_flush, &out);
	out.depth = 0;
	out.nonempty[0] = false;

	ctl_snapshot_t *snap = ctl_snapshot_copy();
	if (snap == NULL) {
		mp_error("malloc_stats_print(): out of memory; nothing printed");
		return true;
	}
	if (sel.json)
		stats_print_json(&out, &sel, snap);
	else
		stats_print_text(&out, &sel, snap);
	mp_buf_flush(&out.w);
	ctl_snapshot_free(snap);
	return false;
}

void stats_print_atexit(void) {
	stats_print(NULL, NULL, opt_stats_print_opts);
}

/*
 * stats_interval: print every opt_stats_interval bytes allocated by all
 * threads together, as jemalloc does.  No work of its own on the malloc
 * paths: each thread adds what it allocated since its last event at its
 * next thread event (tsd_event, every tcache_gc_incr_bytes, 256 KiB by
 * default), so an interval is honoured to within about that much per
 * thread, and a thread without the malloc fast path (tcache:false, junk,
 * zero) has no events and does not count.  Whichever thread takes the
 * sum past the interval prints, outside every lock.
 */
static _Atomic uint64_t stats_interval_accum;
static __thread uint64_t stats_interval_last
    __attribute__((tls_model("initial-exec")));

void stats_interval_event(uint64_t allocated) {
	uint64_t d = allocated - stats_interval_last;
	stats_interval_last = allocated;
	uint64_t interval = opt_stats_interval > 0 ?
	    (uint64_t)opt_stats_interval : 1;
	uint64_t acc = atomic_fetch_add_explicit(&stats_interval_accum, d,
	    memory_order_relaxed) + d;
	if (acc < interval)
		return;
	/* One thread wins the crossing; the remainder counts on. */
	if (!atomic_compare_exchange_strong_explicit(&stats_interval_accum,
	    &acc, acc % interval, memory_order_relaxed, memory_order_relaxed))
		return;
	stats_print(NULL, NULL, opt_stats_interval_opts);
}

MP_EXPORT void MP_PUBLIC(malloc_stats_print)(void (*write_cb)(void *,
    const char *), void *cbopaque, const char *opts) {
	if (malloc_init())
		return;
	stats_print(write_cb, cbopaque, opts);
}
