/*
 * prof_ctl.c: the profiler's mallctl nodes, prof.* and thread.prof.*,
 * registered into ctl.c's tree at boot (prof_ctl_boot, from tsd.c's boot
 * list), so that ctl.c names none of them.
 *
 * jemalloc's rules: without the profiler built in every one of these is
 * ENOENT; built in but not started (opt.prof false) the switches read
 * false and refuse to be turned on (ENOENT), and the actions are ENOENT.
 * Those two refusals are checked once, by ctl.c's dispatcher, from each
 * node's `prof` flag (CTL_PROF_BUILT, CTL_PROF_STARTED): the handlers
 * below run only when the profiler is there.
 */
#include "malloc_prof/internal/internal.h"

#include <ctype.h>
#include <errno.h>

#define PROF_CTL_OFF_HINT "profiling is off: start the process with " \
	MP_CONF_ENV "=prof:true"

#define PROF_CTL_NPEAK 3
static const ctl_node_t prof_ctl_peak_children[PROF_CTL_NPEAK];
static const ctl_node_t prof_ctl_lifetimes_children[1];

/* What comes between "prof." and a node's name in messages. */
static const char *prof_ctl_group(const ctl_node_t *node) {
	if (node == prof_ctl_lifetimes_children)
		return "lifetimes.";
	return node >= prof_ctl_peak_children && node <
	    prof_ctl_peak_children + PROF_CTL_NPEAK ? "peak." : "";
}

/* A write-only node was read: say how to call it.  true: refuse (EPERM). */
static bool prof_ctl_write_only(const ctl_node_t *node, void *oldp,
    size_t *oldlenp) {
	if (!ctl_reads(oldp, oldlenp))
		return false;
	mp_error("prof.%s%s: write-only: pass the value in newp, with oldp "
	    "and oldlenp NULL", prof_ctl_group(node), node->name);
	return true;
}

/* The write of a write-only node whose value is an optional const char *
 * (none, or NULL: *out is NULL); 0 or the error to return. */
static int prof_ctl_write_str(const ctl_node_t *node, void *oldp,
    size_t *oldlenp, void *newp, size_t newlen, const char **out) {
	if (prof_ctl_write_only(node, oldp, oldlenp))
		return EPERM;
	*out = NULL;
	if ((newp != NULL && newlen != sizeof(*out)) ||
	    (newp == NULL && newlen != 0)) {
		mp_error("prof.%s%s: newlen is %zu: the value is a const char * "
		    "(newlen %zu)", prof_ctl_group(node), node->name, newlen,
		    sizeof(*out));
		return EINVAL;
	}
	if (newp != NULL)
		*out = *(const char *const *)newp;
	return 0;
}

/* rw: prof.active, prof.thread_active_init, prof.gdump: the atomic bool
 * at node->ptr.  A write returns the old value. */
static int ctl_prof_switch(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	_Atomic bool *var = (_Atomic bool *)(uintptr_t)node->ptr;
	bool old = opt_prof ? atomic_load(var) : false;
	if (newp != NULL) {
		if (newlen != sizeof(bool))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		bool v = *(const bool *)newp;
		if (!opt_prof) {
			/* Turning prof.active off is already true. */
			if (var == &prof_active && !v)
				return ctl_read(oldp, oldlenp, &old,
				    sizeof(old));
			if (var == &prof_active)
				mp_error("prof.active: " PROF_CTL_OFF_HINT);
			return ENOENT;
		}
		/* The wait's table first: a thread that reads prof.active
		 * true draws from it. */
		if (var == &prof_active && v && prof_zig_ensure()) {
			mp_error("prof.active: no memory for the sampling "
			    "wait's table");
			return EAGAIN;
		}
		old = atomic_exchange(var, v);
		if (var != &prof_gdump_enabled)
			prof_wait_gen_bump();
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* -w: prof.dump writes a heap profile to the given file, or (no value,
 * or NULL) to the next automatic name; prof.peak.dump (node->off 1) the
 * peak-heap profile (prof_peak), named <prefix>.<pid>.<seq>.p<n>.heap
 * when no name is given; prof.lifetimes.dump (node->off 2) the lifetime
 * profile (pprof), named <prefix>.<pid>.<seq>.l<n>.pb.gz. */
static int ctl_prof_dump(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	const char *filename;
	int err = prof_ctl_write_str(node, oldp, oldlenp, newp, newlen,
	    &filename);
	if (err != 0)
		return err;
	bool fail = node->off == 1 ? prof_peak_dump_file(filename) :
	    node->off == 2 ? prof_lifetimes_dump_file(filename) :
	    prof_dump_file(filename);
	return fail ? EFAULT : 0;
}

/* -w: write the current profile, in the current format, to an open file
 * descriptor (an int). */
static int ctl_prof_dump_fd(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (prof_ctl_write_only(node, oldp, oldlenp))
		return EPERM;
	if (newp == NULL || newlen != sizeof(int)) {
		mp_error("prof.dump_fd: newlen is %zu: the value is an int "
		    "file descriptor (newlen %zu)", newp == NULL ? (size_t)0 :
		    newlen, sizeof(int));
		return EINVAL;
	}
	return prof_dump_fd(*(const int *)newp) ? EFAULT : 0;
}

/* rw: the format of every dump from now on, as a const char *:
 * "heap_v2" or "pprof". */
static int ctl_prof_format(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	const char *old = prof_format_names[prof_dump_format_get()];
	if (ctl_writes(newp, newlen)) {
		const char *name;
		if (newp == NULL || newlen != sizeof(name)) {
			mp_error("prof.format: newlen is %zu: the value is a "
			    "const char * (newlen %zu)", newlen, sizeof(name));
			return EINVAL;
		}
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		name = *(const char *const *)newp;
		unsigned f = 0;
		while (f < PROF_FORMAT_COUNT && (name == NULL ||
		    strcmp(name, prof_format_names[f]) != 0))
			f++;
		if (f == PROF_FORMAT_COUNT) {
			mp_error("prof.format: \"%s\" is not a format: expected "
			    "\"heap_v2\" or \"pprof\"", name != NULL ? name :
			    "(null)");
			return EINVAL;
		}
		prof_dump_format_set((prof_format_t)f);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* -w: the prefix of automatic dump names from now on. */
static int ctl_prof_prefix(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	const char *prefix;
	int err = prof_ctl_write_str(node, oldp, oldlenp, newp, newlen,
	    &prefix);
	if (err != 0)
		return err;
	if (prefix == NULL) {
		mp_error("prof.prefix: no prefix given (the value is a NULL "
		    "pointer)");
		return EFAULT;
	}
	if (prof_dump_prefix_set(prefix)) {
		mp_error("prof.prefix: the prefix is %zu characters long; at "
		    "most %zu are supported", strlen(prefix),
		    sizeof(opt_prof_prefix) - 1);
		return EINVAL;
	}
	return 0;
}

/* -w: forget the counts of what was sampled so far; the value, if any,
 * is the new lg_prof_sample (clamped to 63). */
static int ctl_prof_reset(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp))
		return EPERM;
	size_t lg = atomic_load(&prof_lg_sample);
	if (newp != NULL) {
		if (newlen != sizeof(lg))
			return EINVAL;
		lg = *(const size_t *)newp;
		if (lg > 63)
			lg = 63;
	} else if (newlen != 0) {
		return EINVAL;
	}
	prof_reset(lg);
	prof_peak_reset();
	return 0;
}

/* -w, no value: the peak is the heap of now. */
static int ctl_prof_peak_reset(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (prof_ctl_write_only(node, oldp, oldlenp))
		return EPERM;
	if (newp != NULL || newlen != 0) {
		mp_error("prof.peak.reset: takes no value (newp NULL, newlen "
		    "0)");
		return EINVAL;
	}
	if (!opt_prof_peak) {
		mp_error("prof.peak.reset: prof_peak is off (start with "
		    MP_CONF_ENV "=prof:true,prof_peak:true)");
		return ENOENT;
	}
	prof_peak_reset();
	return 0;
}

/* r-: the live bytes the samples estimate at the peak kept (uint64_t;
 * 0 before the first sample or with prof_peak off). */
static int ctl_prof_peak_bytes(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t v = prof_peak_bytes();
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: the sampling rate in effect (readable with the profiler off). */
static int ctl_prof_lg_sample(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	size_t v = atomic_load(&prof_lg_sample);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: bytes between interval dumps, 0 when they are off. */
static int ctl_prof_interval(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t v = opt_lg_prof_interval < 0 ? 0 :
	    (uint64_t)1 << opt_lg_prof_interval;
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: samples the profiler dropped because its own memory (base_malloc)
 * ran out; the allocations themselves succeeded.  Readable with the
 * profiler off (it stays 0). */
static int ctl_prof_dropped_samples(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	uint64_t v = atomic_load(&prof_dropped);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

/* r-: the scrape endpoint's port; ENOENT when it is not running (no
 * prof_http option, it could not start, or a forked child).  Reading it
 * starts the endpoint if it is pending, so the port is known at once. */
static int ctl_prof_http_port(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_writes(newp, newlen))
		return EPERM;
	prof_http_start_pending();
	unsigned port = prof_http_port();
	if (port == 0)
		return ENOENT;
	return ctl_read(oldp, oldlenp, &port, sizeof(port));
}

/* thread.prof.name accepts what jemalloc does: printable characters,
 * spaces and tabs. */
static bool ctl_thread_name_ok(const char *name) {
	for (const unsigned char *p = (const unsigned char *)name; *p != '\0';
	    p++) {
		if (!isgraph(*p) && !isblank(*p))
			return false;
	}
	return true;
}

/* r- xor -w: the calling thread's name in dumps (15 characters kept). */
static int ctl_thread_prof_name(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	bool writes = ctl_writes(newp, newlen);
	if (writes && ctl_reads(oldp, oldlenp))
		return EPERM;
	const char *name = NULL;
	if (writes) {
		if (newp == NULL || newlen != sizeof(name))
			return EINVAL;
		name = *(const char *const *)newp;
		if (name == NULL || !ctl_thread_name_ok(name))
			return EINVAL;
	}
	prof_tdata_t *td = prof_tdata_get(tsd_fetch());
	if (td == NULL)
		return EAGAIN;
	if (writes) {
		size_t len = strnlen(name, PROF_THREAD_NAME_MAX - 1);
		prof_tdatas_lock();
		memcpy(td->name, name, len);
		memset(td->name + len, 0, PROF_THREAD_NAME_MAX - len);
		prof_tdatas_unlock();
		return 0;
	}
	/* The thread's own storage, as in jemalloc: only this thread
	 * changes it. */
	const char *cur = td->name;
	return ctl_read(oldp, oldlenp, &cur, sizeof(cur));
}

/* rw: the calling thread's label set, a const char *: a write of
 * "key=value" sets key ("key=" removes it; several pairs joined by ','),
 * of NULL clears every label; a read gives the set as "k1=v1,k2=v2"
 * (sorted by key; "" when empty), interned storage that stays valid for
 * the process's life; a read and a write in one call give the set from
 * before the write.  Samples carry the set the thread had (pprof
 * labels). */
static int ctl_thread_prof_label(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	tsd_t *tsd = tsd_fetch();
	const char *old = prof_labels_get(tsd);
	if (ctl_writes(newp, newlen)) {
		if (newp == NULL || newlen != sizeof(const char *)) {
			mp_error("thread.prof.label: newlen is %zu: the value "
			    "is a const char * \"key=value\" (newlen %zu)",
			    newp == NULL ? (size_t)0 : newlen,
			    sizeof(const char *));
			return EINVAL;
		}
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		char why[200];
		int err = prof_labels_apply(tsd, *(const char *const *)newp,
		    why, sizeof(why));
		if (err != 0) {
			mp_error("thread.prof.label: %s", why);
			return err;
		}
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* rw: whether the calling thread's allocations are sampled. */
static int ctl_thread_prof_active(const ctl_node_t *node,
    const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
    void *newp, size_t newlen) {
	if (!opt_prof) {
		if (newp != NULL)
			return ENOENT;
		bool old = false;
		return ctl_read(oldp, oldlenp, &old, sizeof(old));
	}
	tsd_t *tsd = tsd_fetch();
	prof_tdata_t *td = prof_tdata_get(tsd);
	if (td == NULL)
		return EAGAIN;
	bool old = atomic_load(&td->active);
	if (newp != NULL) {
		if (newlen != sizeof(bool))
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		old = atomic_exchange(&td->active, *(const bool *)newp);
		tsd_prof_redraw(tsd);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* rw: experimental.prof_recent.alloc_max, an ssize_t (-1: no limit);
 * lowering it drops the oldest records. */
static int ctl_prof_recent_max(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	ssize_t old = prof_recent_max_get();
	if (ctl_writes(newp, newlen)) {
		if (newlen != sizeof(ssize_t) || newp == NULL)
			return EINVAL;
		ssize_t max = *(const ssize_t *)newp;
		if (max < -1)
			return EINVAL;
		if (ctl_oldlen_bad(oldp, oldlenp, sizeof(old)))
			return ctl_read(oldp, oldlenp, &old, sizeof(old));
		old = prof_recent_max_set(max);
	}
	return ctl_read(oldp, oldlenp, &old, sizeof(old));
}

/* -w: experimental.prof_recent.alloc_dump, jemalloc's JSON of the
 * records through the program's callback: the value is jemalloc's pair
 * {write_cb, cbopaque}. */
typedef struct {
	void (*write_cb)(void *, const char *);
	void *cbopaque;
} prof_ctl_write_packet_t;

static int ctl_prof_recent_dump(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (ctl_reads(oldp, oldlenp)) {
		mp_error("experimental.prof_recent.alloc_dump: write-only: "
		    "pass {write_cb, cbopaque} in newp, with oldp and oldlenp "
		    "NULL");
		return EPERM;
	}
	if (newp == NULL || newlen != sizeof(prof_ctl_write_packet_t)) {
		mp_error("experimental.prof_recent.alloc_dump: newlen is %zu: "
		    "the value is {write_cb, cbopaque} (newlen %zu)",
		    newp == NULL ? (size_t)0 : newlen,
		    sizeof(prof_ctl_write_packet_t));
		return EINVAL;
	}
	const prof_ctl_write_packet_t *w = newp;
	if (w->write_cb == NULL) {
		mp_error("experimental.prof_recent.alloc_dump: write_cb is "
		    "NULL");
		return EINVAL;
	}
	if (prof_recent_dump(w->write_cb, w->cbopaque,
	    (uint64_t)1 << atomic_load(&prof_lg_sample),
	    prof_time_wall_offset())) {
		mp_error("experimental.prof_recent.alloc_dump: out of memory "
		    "for the output buffer");
		return EFAULT;
	}
	return 0;
}

/* ---------------------------------------------------------------- tree */

static const ctl_node_t prof_ctl_recent_children[] = {
	{ .name = "alloc_max", .handler = ctl_prof_recent_max,
	  .prof = CTL_PROF_STARTED },
	{ .name = "alloc_dump", .handler = ctl_prof_recent_dump,
	  .prof = CTL_PROF_STARTED },
};

static const ctl_node_t prof_ctl_thread_children[] = {
	{ .name = "name", .handler = ctl_thread_prof_name,
	  .prof = CTL_PROF_STARTED },
	{ .name = "active", .handler = ctl_thread_prof_active,
	  .prof = CTL_PROF_BUILT },
	{ .name = "label", .handler = ctl_thread_prof_label,
	  .prof = CTL_PROF_STARTED },
};

#define PROF_CTL_ACTION(n, h)						\
	{ .name = (n), .handler = (h), .prof = CTL_PROF_STARTED,	\
	  .prof_hint = true }

static const ctl_node_t prof_ctl_peak_children[PROF_CTL_NPEAK] = {
	{ .name = "dump", .handler = ctl_prof_dump, .off = 1,
	  .prof = CTL_PROF_STARTED, .prof_hint = true },
	PROF_CTL_ACTION("reset", ctl_prof_peak_reset),
	{ .name = "bytes", .handler = ctl_prof_peak_bytes,
	  .prof = CTL_PROF_STARTED },
};

static const ctl_node_t prof_ctl_lifetimes_children[1] = {
	{ .name = "dump", .handler = ctl_prof_dump, .off = 2,
	  .prof = CTL_PROF_STARTED, .prof_hint = true },
};

static const ctl_node_t prof_ctl_children[] = {
	{ .name = "thread_active_init", .handler = ctl_prof_switch,
	  .ptr = &prof_thread_active_init, .prof = CTL_PROF_BUILT },
	{ .name = "active", .handler = ctl_prof_switch, .ptr = &prof_active,
	  .prof = CTL_PROF_BUILT },
	PROF_CTL_ACTION("dump", ctl_prof_dump),
	PROF_CTL_ACTION("dump_fd", ctl_prof_dump_fd),
	PROF_CTL_ACTION("format", ctl_prof_format),
	{ .name = "gdump", .handler = ctl_prof_switch,
	  .ptr = &prof_gdump_enabled, .prof = CTL_PROF_BUILT },
	PROF_CTL_ACTION("prefix", ctl_prof_prefix),
	{ .name = "reset", .handler = ctl_prof_reset,
	  .prof = CTL_PROF_STARTED },
	{ .name = "interval", .handler = ctl_prof_interval,
	  .prof = CTL_PROF_BUILT },
	{ .name = "lg_sample", .handler = ctl_prof_lg_sample,
	  .prof = CTL_PROF_BUILT },
	{ .name = "http_port", .handler = ctl_prof_http_port,
	  .prof = CTL_PROF_BUILT },
	{ .name = "dropped_samples", .handler = ctl_prof_dropped_samples,
	  .prof = CTL_PROF_BUILT },
	{ .name = "peak", CTL_CHILDREN(prof_ctl_peak_children) },
	{ .name = "lifetimes", CTL_CHILDREN(prof_ctl_lifetimes_children) },
	/* prof_frag.c's. */
	{ .name = "stats", .children = prof_frag_ctl_stats,
	  .nchildren = PROF_FRAG_NSTATS },
	{ .name = "fragmentation", .children = prof_frag_ctl,
	  .nchildren = PROF_FRAG_NCTL },
};

MP_WARM bool prof_ctl_boot(void) {
	prof_dump_mutex_register();
	return ctl_register("prof", prof_ctl_children,
	    (unsigned)(sizeof(prof_ctl_children) /
	    sizeof(prof_ctl_children[0]))) ||
	    ctl_register("thread.prof", prof_ctl_thread_children,
	    (unsigned)(sizeof(prof_ctl_thread_children) /
	    sizeof(prof_ctl_thread_children[0]))) ||
	    ctl_register("experimental.prof_recent", prof_ctl_recent_children,
	    (unsigned)(sizeof(prof_ctl_recent_children) /
	    sizeof(prof_ctl_recent_children[0])));
}
