/*
 * stats.c: malloc_stats_print, as text or as one JSON object, in
 * jemalloc's spirit.  Everything printed comes from the options table
 * (conf.c), the size-class tables (sz.c) and a fresh copy of the
 * statistics snapshot, which ctl.c takes under its lock and hands over
 * (ctl_snapshot_copy): this file takes no ctl lock and never reads ctl's
 * own snapshot.
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
} stats_sel_t;

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

/* ----------------------------------------------------------- sections */

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
	stats_printf(out, "  opt.%s: %s%s%s\n", opt->name, quote ? "\"" : "",
	    v, quote ? "\"" : "");
}

static void stats_general_text(stats_out_t *out) {
	stats_printf(out, "Version: \"%s\"\n", MP_VERSION);
	stats_printf(out, "Build-time option settings\n");
	stats_printf(out, "  config.debug: %s\n",
	    config_debug ? "true" : "false");
	stats_printf(out, "  config.prof: %s\n",
	    config_prof ? "true" : "false");
	stats_printf(out, "  config.prefix: \"%s\"\n", MP_PREFIX_STR);
	stats_printf(out, "Run-time option settings\n");
	for (unsigned i = 0; i < conf_nopts; i++)
		stats_opt_text(out, &conf_opts[i]);
	stats_printf(out, "Arenas: %u\n", atomic_load(&narenas_total));
	stats_printf(out, "Quantum size: %zu\n", QUANTUM);
	stats_printf(out, "Page size: %zu\n", PAGE);
	stats_printf(out, "Maximum thread-cached size class: %zu\n",
	    opt_tcache_max);
	stats_printf(out, "Number of bin size classes: %u\n", SC_NBINS);
	stats_printf(out, "Number of large size classes: %u\n",
	    (unsigned)SC_NLEXTENTS);
}

static void stats_arena_text(stats_out_t *out, const arena_stats_t *s) {
	stats_printf(out, "  assigned threads: %u\n", (unsigned)s->nthreads);
	stats_printf(out, "  pages: active: %zu, dirty: %zu, muzzy: %zu\n",
	    s->pactive, s->pdirty, s->pmuzzy);
	stats_printf(out, "  mapped: %zu, retained: %zu\n", s->mapped,
	    s->retained);
	stats_printf(out, "  dirty purging: npurge: %llu, nmadvise: %llu, "
	    "purged: %llu\n", (unsigned long long)s->npurge,
	    (unsigned long long)s->nmadvise, (unsigned long long)s->purged);
	stats_printf(out, "  large: allocated: %zu, nmalloc: %llu, "
	    "ndalloc: %llu\n", s->large_allocated,
	    (unsigned long long)s->large_nmalloc,
	    (unsigned long long)s->large_ndalloc);
	stats_printf(out, "  small: curslabs: %zu, nslabs: %llu\n",
	    s->slabs_cur, (unsigned long long)s->slabs_total);
}

static void stats_arena_json(stats_out_t *out, const char *key,
    const arena_stats_t *s) {
	stats_json_open(out, key, '{');
	stats_json_u64(out, "nthreads", s->nthreads);
	stats_json_u64(out, "pactive", s->pactive);
	stats_json_u64(out, "pdirty", s->pdirty);
	stats_json_u64(out, "pmuzzy", s->pmuzzy);
	stats_json_u64(out, "mapped", s->mapped);
	stats_json_u64(out, "retained", s->retained);
	stats_json_u64(out, "dirty_npurge", s->npurge);
	stats_json_u64(out, "dirty_nmadvise", s->nmadvise);
	stats_json_u64(out, "dirty_purged", s->purged);
	stats_json_open(out, "large", '{');
	stats_json_u64(out, "allocated", s->large_allocated);
	stats_json_u64(out, "nmalloc", s->large_nmalloc);
	stats_json_u64(out, "ndalloc", s->large_ndalloc);
	stats_json_close(out, '}');
	stats_json_open(out, "small", '{');
	stats_json_u64(out, "curslabs", s->slabs_cur);
	stats_json_u64(out, "nslabs", s->slabs_total);
	stats_json_close(out, '}');
	stats_json_close(out, '}');
}

static void stats_print_text(stats_out_t *out, const stats_sel_t *sel,
    const ctl_snapshot_t *snap) {
	stats_printf(out, "___ Begin malloc_prof statistics ___\n");
	if (sel->general)
		stats_general_text(out);
	stats_printf(out, "Allocated: %zu, active: %zu, metadata: %zu, "
	    "resident: %zu, mapped: %zu, retained: %zu\n", snap->allocated,
	    snap->active, snap->metadata, snap->resident, snap->mapped,
	    snap->retained);
	size_t bg_n;
	uint64_t bg_runs, bg_interval;
	background_thread_stats(&bg_n, &bg_runs, &bg_interval);
	stats_printf(out, "Background threads: %zu, num_runs: %llu, "
	    "run_interval: %llu ns\n", bg_n, (unsigned long long)bg_runs,
	    (unsigned long long)bg_interval);
	if (sel->merged) {
		stats_printf(out, "Merged arenas stats:\n");
		stats_arena_text(out, &snap->merged);
	}
	if (sel->unmerged) {
		for (unsigned i = 0; i < snap->narenas; i++) {
			if (!snap->arenas[i].initialized)
				continue;
			stats_printf(out, "arenas[%u]:\n", i);
			stats_arena_text(out, &snap->arenas[i].stats);
		}
	}
	if (sel->bins) {
		stats_printf(out, "Bin size classes:\n");
		stats_printf(out, "  %12s %8s %10s\n", "size", "nregs",
		    "slab_size");
		for (unsigned i = 0; i < SC_NBINS; i++) {
			stats_printf(out, "  %12zu %8u %10u\n",
			    sz_index2size(i), sz_slab_nregs_get(i),
			    sz_slab_size_get(i));
		}
	}
	if (sel->large) {
		stats_printf(out, "Large size classes: %u, %zu .. %zu "
		    "(4 per doubling)\n", (unsigned)SC_NLEXTENTS,
		    sz_index2size(SC_NBINS), sz_index2size(SC_NSIZES - 1));
	}
	stats_printf(out, "--- End malloc_prof statistics ---\n");
}

static void stats_print_json(stats_out_t *out, const stats_sel_t *sel,
    const ctl_snapshot_t *snap) {
	stats_putc(out, '{');
	out->depth = 1;
	out->nonempty[1] = false;
	stats_json_open(out, "malloc_prof", '{');
	if (sel->general) {
		stats_json_str(out, "version", MP_VERSION);
		stats_json_open(out, "config", '{');
		stats_json_bool(out, "debug", config_debug);
		stats_json_bool(out, "prof", config_prof);
		stats_json_str(out, "prefix", MP_PREFIX_STR);
		stats_json_close(out, '}');
		stats_json_open(out, "opt", '{');
		for (unsigned i = 0; i < conf_nopts; i++)
			stats_opt_json(out, &conf_opts[i]);
		stats_json_close(out, '}');
	}
	if (sel->general || sel->bins || sel->large) {
		stats_json_open(out, "arenas", '{');
		if (sel->general) {
			stats_json_u64(out, "narenas",
			    atomic_load(&narenas_total));
			stats_json_u64(out, "quantum", QUANTUM);
			stats_json_u64(out, "page", PAGE);
			stats_json_u64(out, "tcache_max", opt_tcache_max);
			stats_json_u64(out, "nbins", SC_NBINS);
			stats_json_u64(out, "nlextents", SC_NLEXTENTS);
		}
		if (sel->bins) {
			stats_json_open(out, "bin", '[');
			for (unsigned i = 0; i < SC_NBINS; i++) {
				stats_json_open(out, NULL, '{');
				stats_json_u64(out, "size", sz_index2size(i));
				stats_json_u64(out, "nregs",
				    sz_slab_nregs_get(i));
				stats_json_u64(out, "slab_size",
				    sz_slab_size_get(i));
				stats_json_close(out, '}');
			}
			stats_json_close(out, ']');
		}
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
	stats_json_open(out, "stats", '{');
	stats_json_u64(out, "allocated", snap->allocated);
	stats_json_u64(out, "active", snap->active);
	stats_json_u64(out, "metadata", snap->metadata);
	stats_json_u64(out, "resident", snap->resident);
	stats_json_u64(out, "mapped", snap->mapped);
	stats_json_u64(out, "retained", snap->retained);
	size_t bg_n;
	uint64_t bg_runs, bg_interval;
	background_thread_stats(&bg_n, &bg_runs, &bg_interval);
	stats_json_open(out, "background_thread", '{');
	stats_json_u64(out, "num_threads", bg_n);
	stats_json_u64(out, "num_runs", bg_runs);
	stats_json_u64(out, "run_interval", bg_interval);
	stats_json_close(out, '}');
	stats_json_close(out, '}');
	if (sel->merged || sel->unmerged) {
		stats_json_open(out, "stats.arenas", '{');
		if (sel->merged)
			stats_arena_json(out, "merged", &snap->merged);
		if (sel->unmerged) {
			for (unsigned i = 0; i < snap->narenas; i++) {
				char key[16];
				if (!snap->arenas[i].initialized)
					continue;
				mp_snprintf(key, sizeof(key), "%u", i);
				stats_arena_json(out, key,
				    &snap->arenas[i].stats);
			}
		}
		stats_json_close(out, '}');
	}
	stats_json_close(out, '}');
	out->depth = 0;
	stats_printf(out, "\n}\n");
}

bool stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
    const char *opts) {
	stats_sel_t sel = {false, true, true, true, true, true};
	for (const char *o = opts; o != NULL && *o != '\0'; o++) {
		switch (*o) {
		case 'J': sel.json = true; break;
		case 'g': sel.general = false; break;
		case 'm': sel.merged = false; break;
		case 'a': sel.unmerged = false; break;
		case 'b': sel.bins = false; break;
		case 'l': sel.large = false; break;
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
 * next thread event (tsd_event, every tcache_gc_incr_bytes, 128 KiB by
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
