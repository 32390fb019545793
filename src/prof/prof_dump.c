/*
 * prof_dump.c: heap profile dumps: the files and names dumps go to, the
 * triggers that write them (prof.dump, lg_prof_interval, prof.gdump,
 * prof_final) and the exit leak report.
 *
 * The peak-heap profile (prof_peak) is a snapshot kept from the moment the
 * samples' live bytes were highest, written by the same writers.
 *
 * A dump copies what it prints before formatting anything (prof_snap.c
 * takes the snapshot, under the profiler's locks) and hands it to the
 * writer of the dump's format (dump_write): heap_v2 in prof_heap_v2.c,
 * pprof in prof_pprof.c, which share the snapshot and never call each
 * other.
 * Formatting and write(2) happen with no profiler lock held but
 * prof_dump_mtx, which only orders dumps among themselves (and ranks
 * before the locks the snapshot takes).  Every buffer comes from base_malloc
 * and every message is formatted with mp_snprintf: nothing here calls
 * malloc or stdio, so a dump never recurses into the allocator.
 *
 * Messages are never printed while prof_dump_mtx is held: the
 * malloc_message hook may allocate, and an allocation may trigger a dump.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>     /* rename */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* prefix + ".<pid>.<seq>.m<seq>.heap" (two u64 and a pid). */
#define DUMP_PATH_MAX (sizeof(opt_prof_prefix) + 64)
#define DUMP_ERR_MAX (DUMP_PATH_MAX + 256)
/* Trigger failures print the first one, then at most one line per: */
#define DUMP_FAIL_QUIET_NS ((uint64_t)10 * 1000000000)

/* One dump at a time; guards everything below up to the triggers. */
static mp_mutex_t prof_dump_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_PROF_DUMP);
/* prof.prefix, once written; until then opt_prof_prefix is used. */
static char dump_prefix[sizeof(opt_prof_prefix)];
static bool dump_prefix_set;
/* File name sequence numbers: one shared, one per kind. */
static uint64_t dump_seq, dump_mseq, dump_iseq, dump_useq, dump_pseq;
static uint64_t dump_oseq;
static uint64_t dump_lseq, dump_fragseq;
/* Every dump is pprof whatever prof.format says (the lifetime and the
 * fragmentation profiles, which heap_v2 cannot express: labels, sample
 * types of their own). */
static bool dump_pprof_only;
/* Every dump is heap_v2 whatever prof.format says (the dump at an
 * allocation failure: pprof's encoder needs memory). */
static bool dump_heap_v2_only;
/* Rate limit of the failures of automatic (i, u) dumps. */
static uint64_t dump_fail_count;
static uint64_t dump_fail_suppressed;
static uint64_t dump_fail_last_ns;

/* Triggers (lock-free). */
static _Atomic uint64_t idump_accum;
_Atomic size_t prof_gdump_high;

typedef enum {
	DUMP_NAMED,          /* prof.dump with a file name */
	DUMP_M,              /* prof.dump without one */
	DUMP_I,              /* lg_prof_interval */
	DUMP_U,              /* prof.gdump */
	DUMP_F,              /* prof_final */
	DUMP_P,              /* the peak: prof.peak.dump, prof_final */
	DUMP_O,              /* prof_oom_dump */
	DUMP_L,              /* prof.lifetimes.dump (always pprof) */
	DUMP_FRAG,           /* prof.fragmentation.dump (always pprof) */
} dump_kind_t;

/* ------------------------------------------------------------ writing */

/* s to fd in `format` (not CURRENT), with prof_dump_mtx held: the one
 * place that picks a format's writer, so the two never call each other.
 * sample_type is pprof's default sample type (NULL: inuse_space).  0, or
 * the errno of the failure (ENOMEM, with *whyp naming what ran out). */
static int dump_write(const dump_snap_t *s, int fd, prof_format_t format,
    const char *sample_type, const char **whyp) {
	*whyp = NULL;
	if (format == PROF_FORMAT_PPROF) {
		int e = 0;
		if (prof_pprof_write(s, fd, sample_type, &e, whyp) && e == 0)
			e = ENOMEM;
		return e;
	}
	return prof_heap_v2_write(s, fd, whyp);
}

/* The OS error text, without allocating (GNU strerror_r). */
const char *prof_dump_strerror(int err, char *buf, size_t size) {
	return strerror_r(err, buf, size);
}

/* ------------------------------------------------------------- files */

/*
 * Where a dump goes.  Automatic names are predictable (prefix, pid,
 * sequence numbers), so in a shared directory another user can plant a
 * file or a symbolic link at the next one, and a process running as root
 * would write its profile over whatever the link names.  So:
 *   - an automatic name is created, never opened (O_EXCL fails on any
 *     existing name, a link included, without following it); a name that
 *     exists is skipped for the next sequence number, at most
 *     DUMP_NAME_TRIES times, and the message names it;
 *   - a named dump refuses a final symbolic link unless
 *     prof_dump_follow_symlinks is set (then the link is resolved first);
 *     a regular file is written under a fresh temporary name beside it
 *     and renamed over the name once complete, so that a failed dump
 *     leaves the previous file as it was and no partial one, and rename
 *     replaces a link planted meanwhile instead of following it; anything
 *     else there (/dev/null, a FIFO) is written in place;
 *   - a failed dump removes what it created.
 */
#define DUMP_NAME_TRIES 1024
/* A named dump's temporary name: "<name>.tmp.<pid>.<n>". */
#define DUMP_TMP_SUFFIX_MAX 48
#define DUMP_TMP_TRIES 16

bool opt_prof_dump_follow_symlinks = false;

static int dump_open(const char *path, int flags) {
	int fd;
	do {
		fd = open(path, flags | O_WRONLY | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	} while (fd < 0 && errno == EINTR);
	return fd;
}

/* A named dump's buffers, apart: automatic dumps run inside malloc, on
 * threads whose stacks may be small. */
typedef struct dump_named_buf_s {
	char tmp[PATH_MAX + DUMP_TMP_SUFFIX_MAX];
	char resolved[PATH_MAX];
} dump_named_buf_t;

/* The file a dump is being written to. */
typedef struct dump_file_s {
	int fd;
	const char *path;        /* the name the dump ends up under */
	const char *tmp;         /* the name written, then renamed to path;
				  * NULL: written in place */
	bool created;            /* path was made by this dump */
} dump_file_t;

/* One dump's outcome, for the messages printed once prof_dump_mtx is
 * released. */
typedef struct dump_result_s {
	const char *path;        /* the file (tried), for the messages */
	char name[DUMP_PATH_MAX];        /* an automatic name */
	char taken[DUMP_PATH_MAX];       /* the first automatic name skipped */
	unsigned ntaken;                 /* automatic names skipped */
	char err[DUMP_ERR_MAX];          /* why it failed */
	bool off;                        /* automatic, and prof_prefix "" */
} dump_result_t;

static void dump_err(char *err, size_t errsize, const char *what,
    const char *path, int e) {
	char ebuf[128];
	mp_snprintf(err, errsize, "cannot %s \"%s\": %s", what, path,
	    prof_dump_strerror(e, ebuf, sizeof(ebuf)));
}

/* Open a named dump (see above).  True with err[] filled on failure. */
static bool dump_open_named(dump_file_t *f, const char *name,
    dump_named_buf_t *buf, char *err, size_t errsize) {
	struct stat st;
	f->path = name;
	f->tmp = NULL;
	f->created = false;
	bool exists = lstat(name, &st) == 0;
	if (exists && S_ISLNK(st.st_mode)) {
		if (!opt_prof_dump_follow_symlinks) {
			mp_snprintf(err, errsize, "cannot write \"%s\": it "
			    "is a symbolic link, not followed (a dump would "
			    "overwrite the file it points to; "
			    "prof_dump_follow_symlinks:true allows it)", name);
			return true;
		}
		if (realpath(name, buf->resolved) == NULL) {
			dump_err(err, errsize, "resolve the symbolic link",
			    name, errno);
			return true;
		}
		f->path = buf->resolved;
		exists = lstat(f->path, &st) == 0;
	}
	if (exists && !S_ISREG(st.st_mode)) {
		/* A device or a FIFO: written as it is, never replaced. */
		f->fd = dump_open(f->path, 0);
		if (f->fd < 0) {
			dump_err(err, errsize, "open", f->path, errno);
			return true;
		}
		return false;
	}
	if (strlen(f->path) + DUMP_TMP_SUFFIX_MAX > sizeof(buf->tmp)) {
		dump_err(err, errsize, "open", f->path, ENAMETOOLONG);
		return true;
	}
	int e = EEXIST;
	for (unsigned i = 0; i < DUMP_TMP_TRIES && e == EEXIST; i++) {
		mp_snprintf(buf->tmp, sizeof(buf->tmp), "%s.tmp.%" PRIu64
		    ".%u", f->path, (uint64_t)getpid(), i);
		f->fd = dump_open(buf->tmp, O_CREAT | O_EXCL);
		if (f->fd >= 0) {
			f->tmp = buf->tmp;
			return false;
		}
		e = errno;
	}
	/* Name the file asked for: the temporary name is ours. */
	dump_err(err, errsize, "open", f->path, e);
	return true;
}

/*
 * Create the next free automatic name of `kind` in r->name (see above),
 * counting the names skipped in r->ntaken.  True with r->err filled on
 * failure; r->off when automatic dumps are off (empty prefix).
 */
static bool dump_name_locked(dump_kind_t kind, char *path, size_t size);
static bool dump_open_auto(dump_file_t *f, dump_kind_t kind,
    dump_result_t *r) {
	f->fd = -1;
	f->path = r->name;
	f->tmp = NULL;
	f->created = true;
	r->path = r->name;
	for (unsigned i = 0; i < DUMP_NAME_TRIES; i++) {
		if (!dump_name_locked(kind, r->name, sizeof(r->name))) {
			r->off = true;
			return false;
		}
		f->fd = dump_open(r->name, O_CREAT | O_EXCL);
		if (f->fd >= 0)
			return false;
		if (errno != EEXIST) {
			dump_err(r->err, sizeof(r->err), "open", r->name,
			    errno);
			return true;
		}
		if (r->ntaken++ == 0)
			memcpy(r->taken, r->name, sizeof(r->taken));
	}
	mp_snprintf(r->err, sizeof(r->err), "cannot create a dump file: "
	    "\"%s\" and the next %u names exist (files or links put there "
	    "by someone else?); none was written through", r->taken,
	    DUMP_NAME_TRIES - 1);
	return true;
}

/*
 * Write the snapshot to the opened file and close it: a temporary name is
 * renamed over the final one, a failure removes what the dump created.
 * True with err[] filled on failure.
 */
static bool dump_file_write(dump_file_t *f, const dump_snap_t *s,
    prof_format_t format, char *err, size_t errsize) {
	char ebuf[128];
	const char *why;
	int werr = dump_write(s, f->fd, format, NULL, &why);
	/* close can report a delayed write error (NFS, quota); EINTR still
	 * closes the descriptor on Linux. */
	if (close(f->fd) != 0 && errno != EINTR && werr == 0)
		werr = errno;
	f->fd = -1;
	if (werr == 0 && f->tmp != NULL && rename(f->tmp, f->path) != 0) {
		int e = errno;
		unlink(f->tmp);
		dump_err(err, errsize, "rename the complete dump to", f->path,
		    e);
		return true;
	}
	if (werr == 0)
		return false;
	if (f->tmp != NULL)
		unlink(f->tmp);
	else if (f->created)
		unlink(f->path);
	mp_snprintf(err, errsize, "cannot write \"%s\": %s", f->path,
	    why != NULL ? why : prof_dump_strerror(werr, ebuf, sizeof(ebuf)));
	return true;
}

/* ------------------------------------------------------------- naming */

/* Indexed by prof_format_t. */
const char *const prof_format_names[PROF_FORMAT_COUNT] = {
	"heap_v2", "pprof",
};
unsigned opt_prof_format = PROF_FORMAT_HEAP_V2;
/* prof.format, once written; until then opt_prof_format is used. */
static prof_format_t dump_format;
static bool dump_format_set;

static prof_format_t dump_format_locked(void) {
	if (dump_heap_v2_only)
		return PROF_FORMAT_HEAP_V2;
	if (dump_pprof_only)
		return PROF_FORMAT_PPROF;
	return dump_format_set ? dump_format : (prof_format_t)opt_prof_format;
}

static const char *dump_suffix_locked(void) {
	return dump_format_locked() == PROF_FORMAT_PPROF ? "pb.gz" : "heap";
}

static const char *dump_prefix_locked(void) {
	return dump_prefix_set ? dump_prefix : opt_prof_prefix;
}

/* The automatic name of a dump of `kind`; false if the prefix is empty
 * (automatic dumps are off).  Counters advance even if the write then
 * fails, as in jemalloc. */
static bool dump_name_locked(dump_kind_t kind, char *path, size_t size) {
	const char *prefix = dump_prefix_locked();
	if (prefix[0] == '\0')
		return false;
	const char *sfx = dump_suffix_locked();
	uint64_t pid = (uint64_t)getpid();
	uint64_t seq = dump_seq++;
	switch (kind) {
	case DUMP_M:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".m%" PRIu64
		    ".%s", prefix, pid, seq, dump_mseq++, sfx);
		break;
	case DUMP_I:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".i%" PRIu64
		    ".%s", prefix, pid, seq, dump_iseq++, sfx);
		break;
	case DUMP_U:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".u%" PRIu64
		    ".%s", prefix, pid, seq, dump_useq++, sfx);
		break;
	case DUMP_F:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".f.%s",
		    prefix, pid, seq, sfx);
		break;
	case DUMP_P:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".p%" PRIu64
		    ".%s", prefix, pid, seq, dump_pseq++, sfx);
		break;
	case DUMP_O:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".o%" PRIu64
		    ".%s", prefix, pid, seq, dump_oseq++, sfx);
		break;
	case DUMP_L:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".l%" PRIu64
		    ".%s", prefix, pid, seq, dump_lseq++, sfx);
		break;
	case DUMP_FRAG:
		mp_snprintf(path, size, "%s.%" PRIu64 ".%" PRIu64 ".frag%"
		    PRIu64 ".%s", prefix, pid, seq, dump_fragseq++, sfx);
		break;
	case DUMP_NAMED:
		mp_not_reached();
	}
	return true;
}

/* Dumps run with the thread's reentrancy raised: should anything in
 * them allocate (a locale's strerror text), it is neither sampled nor
 * able to trigger a dump of its own. */
static void dump_enter(void) {
	mp_tsd.reentrancy++;
	mp_mutex_lock(&prof_dump_mtx);
}

static void dump_leave(void) {
	mp_mutex_unlock(&prof_dump_mtx);
	mp_tsd.reentrancy--;
}

/* Close and remove what a dump that could not be written created. */
static void dump_file_abandon(dump_file_t *f) {
	close(f->fd);
	f->fd = -1;
	if (f->tmp != NULL)
		unlink(f->tmp);
	else if (f->created)
		unlink(f->path);
}

/*
 * Collect the snapshot and write it to the opened file; true with r->err
 * filled on failure.  With keep, the snapshot is kept there for the
 * caller to release when *kept says it was taken (also if the write
 * failed).
 */
static bool dump_file_fill(dump_file_t *f, dump_result_t *r,
    prof_format_t format, dump_snap_t *keep, bool *kept) {
	dump_snap_t local, *s = keep != NULL ? keep : &local;
	const char *why;
	if (kept != NULL)
		*kept = false;
	if (prof_snap_collect(s, &why)) {
		dump_file_abandon(f);
		mp_snprintf(r->err, sizeof(r->err), "cannot write \"%s\": "
		    "%s", f->path, why);
		return true;
	}
	bool fail = dump_file_write(f, s, format, r->err, sizeof(r->err));
	if (kept != NULL)
		*kept = true;
	else
		prof_snap_release(s);
	return fail;
}

static void dump_result_init(dump_result_t *r) {
	r->path = NULL;
	r->name[0] = r->taken[0] = r->err[0] = '\0';
	r->ntaken = 0;
	r->off = false;
}

/*
 * One dump under prof_dump_mtx: open the file (a named one, or the next
 * automatic name of kind), copy, write; or write `from`, a snapshot taken
 * already (the peak).  True on failure with r->err filled; r->off when
 * automatic dumps are off.
 */
static bool dump_locked(dump_kind_t kind, const char *filename,
    dump_named_buf_t *buf, const dump_snap_t *from, dump_result_t *r) {
	dump_file_t f;
	dump_result_init(r);
	if (kind == DUMP_NAMED) {
		r->path = filename;
		if (dump_open_named(&f, filename, buf, r->err,
		    sizeof(r->err)))
			return true;
		r->path = f.path;
	} else if (dump_open_auto(&f, kind, r) || r->off) {
		return !r->off;
	}
	if (from != NULL)
		return dump_file_write(&f, from, dump_format_locked(), r->err,
		    sizeof(r->err));
	return dump_file_fill(&f, r, dump_format_locked(), NULL, NULL);
}

/* The line about automatic names skipped: "" if none was. */
static void dump_taken_note(const dump_result_t *r, char *buf,
    size_t size) {
	buf[0] = '\0';
	if (r->ntaken == 0 || r->err[0] != '\0')
		return;
	if (r->ntaken == 1)
		mp_snprintf(buf, size, "\"%s\" exists (put there by someone "
		    "else?): not written through; the dump is \"%s\"",
		    r->taken, r->path);
	else
		mp_snprintf(buf, size, "\"%s\" and %u more names exist (put "
		    "there by someone else?): not written through; the dump "
		    "is \"%s\"", r->taken, r->ntaken - 1, r->path);
}

/* ------------------------------------------------------------ prof.dump */

static bool peak_ready_locked(const char **whyp);
static const dump_snap_t *peak_snap_locked(void);

/* What a dump writes: the heap of now, the peak kept, the lifetime
 * profile (prof_lifetime.c; always pprof) or a profile made by a build
 * callback (prof_frag.c's fragmentation profile; always pprof: a
 * callback, because prof_frag.c calls this file). */
typedef enum {
	DUMP_SRC_NOW,
	DUMP_SRC_PEAK,
	DUMP_SRC_LIFE,
	DUMP_SRC_BUILT
} dump_src_t;

/* The snapshot a dump of src writes, made ready (prof_dump_mtx held):
 * *from is NULL for the heap of now (the caller collects it), else the
 * peak or *life, made here; src_done_locked releases what this made.
 * true with *whyp set if there is none to write. */
static bool src_ready_locked(dump_src_t src, prof_dump_build_t *build,
    dump_snap_t *life, const dump_snap_t **from, const char **whyp) {
	*from = NULL;
	if (src == DUMP_SRC_PEAK) {
		if (peak_ready_locked(whyp))
			return true;
		*from = peak_snap_locked();
	} else if (src == DUMP_SRC_LIFE) {
		dump_snap_t live;
		if (prof_snap_collect(&live, whyp))
			return true;
		bool fail = prof_lifetime_collect(life, &live,
		    prof_samples_foreach, prof_shards_lock_all,
		    prof_shards_unlock_all, prof_life_part, prof_nshards,
		    prof_time_ns(), whyp);
		prof_snap_release(&live);
		if (fail)
			return true;
		*from = life;
		dump_pprof_only = true;
	} else if (src == DUMP_SRC_BUILT) {
		if (build(life, whyp))
			return true;
		*from = life;
		dump_pprof_only = true;
	}
	return false;
}

static void src_done_locked(dump_src_t src, dump_snap_t *life,
    const dump_snap_t *from) {
	if ((src == DUMP_SRC_LIFE || src == DUMP_SRC_BUILT) && from != NULL) {
		prof_snap_release(life);
		dump_pprof_only = false;
	}
}

/* prof.dump, prof.peak.dump, prof.lifetimes.dump and
 * prof.fragmentation.dump (src, build), named `what` in messages. */
static bool dump_file_cmd(const char *what, const char *filename,
    dump_src_t src, prof_dump_build_t *build) {
	dump_result_t r;
	dump_named_buf_t *buf = NULL;
	char note[DUMP_ERR_MAX + 64];
	if (filename != NULL && filename[0] == '\0') {
		mp_error("%s: the file name is empty", what);
		return true;
	}
	if (filename != NULL) {
		buf = base_malloc(sizeof(*buf));
		if (buf == NULL) {
			mp_error("%s: cannot write \"%s\": out of memory for "
			    "the file names", what, filename);
			return true;
		}
	}
	const char *why = NULL;
	dump_result_init(&r);
	dump_enter();
	const dump_snap_t *from;
	dump_snap_t life;
	bool fail = src_ready_locked(src, build, &life, &from, &why);
	if (!fail)
		fail = dump_locked(filename != NULL ? DUMP_NAMED : src ==
		    DUMP_SRC_PEAK ? DUMP_P : src == DUMP_SRC_LIFE ? DUMP_L :
		    src == DUMP_SRC_BUILT ? DUMP_FRAG : DUMP_M, filename, buf,
		    from, &r);
	src_done_locked(src, &life, from);
	dump_leave();
	if (buf != NULL)
		base_free(buf, sizeof(*buf));
	if (why != NULL) {
		mp_error("%s: %s", what, why);
		return true;
	}
	if (r.off) {
		mp_error("%s: no file name given and prof_prefix is empty",
		    what);
		return true;
	}
	dump_taken_note(&r, note, sizeof(note));
	if (note[0] != '\0')
		mp_error("%s: %s", what, note);
	if (fail)
		mp_error("%s: %s", what, r.err);
	return fail;
}

bool prof_dump_file(const char *filename) {
	return dump_file_cmd("prof.dump", filename, DUMP_SRC_NOW, NULL);
}

prof_format_t prof_dump_format_get(void) {
	dump_enter();
	prof_format_t f = dump_format_locked();
	dump_leave();
	return f;
}

void prof_dump_format_set(prof_format_t format) {
	mp_assert(format >= 0 && format < PROF_FORMAT_COUNT);
	dump_enter();
	dump_format = format;
	dump_format_set = true;
	dump_leave();
}

/*
 * A dump to an open descriptor (prof.dump_fd, and the entry point for an
 * HTTP endpoint).  The descriptor and the request are checked before the
 * snapshot is taken, so that a closed or read-only one costs nothing.
 * SIGPIPE is blocked in this thread while writing: a pipe or socket whose
 * reader went away fails the call with EPIPE instead of killing the
 * process.  A SIGPIPE that the write raised is taken back; one that was
 * already pending is left for the program.  Prints nothing: the caller
 * reports err[] its own way.
 */
static bool dump_fd_common(int fd, prof_format_t format,
    const char *sample_type, dump_src_t src, prof_dump_build_t *build,
    char *err, size_t errsize) {
	char ebuf[128];
	int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0) {
		mp_snprintf(err, errsize, "cannot write to fd %d: %s", fd,
		    prof_dump_strerror(EBADF, ebuf, sizeof(ebuf)));
		return true;
	}
	if ((fl & O_ACCMODE) == O_RDONLY) {
		mp_snprintf(err, errsize, "cannot write to fd %d: it is open "
		    "read-only", fd);
		return true;
	}
	if (src == DUMP_SRC_LIFE && sample_type != NULL &&
	    strcmp(sample_type, "alloc_objects") != 0 &&
	    strcmp(sample_type, "alloc_space") != 0) {
		mp_snprintf(err, errsize, "\"%s\" is not a sample type of "
		    "the lifetime profile: expected alloc_objects, alloc_space",
		    sample_type);
		return true;
	}
	if ((src == DUMP_SRC_NOW || src == DUMP_SRC_PEAK) &&
	    sample_type != NULL &&
	    !prof_snap_sample_type_ok(sample_type)) {
		mp_snprintf(err, errsize, "\"%s\" is not a sample type of "
		    "this profile: expected inuse_objects, inuse_space%s",
		    sample_type, opt_prof_accum ? ", alloc_objects, "
		    "alloc_space" : " (alloc_* need prof_accum:true)");
		return true;
	}
	sigset_t pipe_set, old_set, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigemptyset(&pending);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE) == 1;

	dump_enter();
	if (format == PROF_FORMAT_CURRENT)
		format = dump_format_locked();
	if (src == DUMP_SRC_LIFE || src == DUMP_SRC_BUILT)
		format = PROF_FORMAT_PPROF;
	dump_snap_t s, life;
	const dump_snap_t *from;
	const char *why = NULL;
	bool fail = src_ready_locked(src, build, &life, &from, &why) ||
	    (from == NULL && prof_snap_collect(&s, &why));
	if (fail) {
		mp_snprintf(err, errsize, "cannot write to fd %d: %s", fd, why);
	} else {
		int e = dump_write(from != NULL ? from : &s, fd, format,
		    sample_type, &why);
		if (from == NULL)
			prof_snap_release(&s);
		src_done_locked(src, &life, from);
		if (e != 0) {
			fail = true;
			mp_snprintf(err, errsize, "cannot write to fd %d: %s",
			    fd, why != NULL ? why : prof_dump_strerror(e, ebuf,
			    sizeof(ebuf)));
		}
	}
	dump_leave();

	if (!was_pending) {
		struct timespec zero = {0, 0};
		sigpending(&pending);
		if (sigismember(&pending, SIGPIPE) == 1)
			(void)sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	return fail;
}

bool prof_dump_to_fd(int fd, prof_format_t format, const char *sample_type,
    char *err, size_t errsize) {
	return dump_fd_common(fd, format, sample_type, DUMP_SRC_NOW, NULL, err,
	    errsize);
}

bool prof_peak_dump_to_fd(int fd, prof_format_t format,
    const char *sample_type, char *err, size_t errsize) {
	return dump_fd_common(fd, format, sample_type, DUMP_SRC_PEAK, NULL,
	    err, errsize);
}

bool prof_lifetimes_dump_to_fd(int fd, const char *sample_type, char *err,
    size_t errsize) {
	return dump_fd_common(fd, PROF_FORMAT_PPROF, sample_type,
	    DUMP_SRC_LIFE, NULL, err, errsize);
}

/* ------------------------------------------------------------- deltas */

static uint64_t dump_wall_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool prof_dump_delta_take(dump_snap_t *s0, char *err, size_t errsize) {
	const char *why = NULL;
	/* Before the copy: what it copies is kept to the window's end. */
	prof_accum_hold();
	dump_enter();
	bool fail = prof_snap_collect_accum(s0, &why);
	dump_leave();
	if (fail) {
		prof_accum_release();
		mp_snprintf(err, errsize, "cannot take the first snapshot: %s",
		    why);
		return true;
	}
	s0->time_ns = dump_wall_ns();
	return false;
}

bool prof_dump_delta_to_fd(int fd, dump_snap_t *s0, const char *sample_type,
    char *err, size_t errsize) {
	char ebuf[128];
	const char *why = NULL;
	dump_snap_t s1, d;
	dump_enter();
	bool fail = prof_snap_collect_accum(&s1, &why);
	if (!fail) {
		s1.time_ns = dump_wall_ns();
		if (s0->epoch == UINT64_MAX || s1.epoch != s0->epoch ||
		    s1.lg_sample != s0->lg_sample) {
			why = "the profile was reset (prof.reset) during the "
			    "window";
			fail = true;
		} else {
			fail = prof_snap_delta(&d, s0, &s1, &why);
		}
		prof_snap_release(&s1);
	}
	if (!fail) {
		int e = dump_write(&d, fd, PROF_FORMAT_PPROF, sample_type,
		    &why);
		prof_snap_release(&d);
		if (e != 0) {
			fail = true;
			if (why == NULL)
				why = prof_dump_strerror(e, ebuf, sizeof(ebuf));
		}
	}
	dump_leave();
	if (fail)
		mp_snprintf(err, errsize, "%s", why);
	prof_dump_delta_drop(s0);
	return fail;
}

void prof_dump_delta_drop(dump_snap_t *s0) {
	prof_snap_release(s0);
	prof_accum_release();
}

bool prof_dump_fd(int fd) {
	char err[DUMP_ERR_MAX];
	bool fail = prof_dump_to_fd(fd, PROF_FORMAT_CURRENT, NULL, err,
	    sizeof(err));
	if (fail)
		mp_error("prof.dump_fd: %s", err);
	return fail;
}

bool prof_dump_prefix_set(const char *prefix) {
	size_t len = strlen(prefix);
	if (len >= sizeof(dump_prefix))
		return true;
	dump_enter();
	memcpy(dump_prefix, prefix, len + 1);
	dump_prefix_set = true;
	dump_leave();
	return false;
}

/* ------------------------------------------------------------------ peak */

/*
 * The peak-heap profile.  The sampler whose sample takes prof_live.bytes
 * to prof_peak_next copies the tables as a dump does (prof_snap_collect)
 * and keeps the copy in peak_snap; the next copy is due once the live
 * bytes pass that peak by prof_peak_growth.  Copies are thus taken on the
 * sampling slow path, at new peaks only: a heap that grows from one
 * sample's worth to N times that takes log(N) / log(growth) of them
 * (about 80 from 512 KiB to 1 GiB at 1.1), each as long as a dump's
 * snapshot, and the copy kept costs what a dump's snapshot costs, for as
 * long as the process lives.  A dump asked for while the heap is above
 * the kept peak takes a new copy first, so it never shows less than the
 * heap of the moment.  Guarded by prof_dump_mtx, but peak_bytes, which
 * prof.peak.bytes reads without waiting for a dump.
 */
bool opt_prof_peak = true;
char opt_prof_peak_growth[16] = "1.1";
MP_READ_MOSTLY _Atomic uint64_t prof_peak_next;
/* prof_peak_growth in 1/1024ths (1.1: 1126), from the option's text
 * (peak_growth; 0 until read). */
static PROF_DATA uint64_t peak_growth_1024;
static PROF_DATA dump_snap_t peak_snap;
static PROF_DATA bool peak_kept;
/* The previous copy's buffers, for the next copy, while they are of the
 * smallest size (a small table: no mapping per copy, and little memory
 * kept); bigger ones are given back. */
static PROF_DATA dump_snap_t peak_spare;
#define PEAK_SPARE_MAX ((size_t)64 << 10)
static PROF_DATA _Atomic uint64_t peak_bytes;

/* "1.1": digits, then optionally '.' and digits, as 1/1024ths; true if
 * it is not a number above 1 (by 1/1024 at least) and at most 1000. */
static bool peak_growth_parse(const char *v, size_t vlen, uint64_t *x1024) {
	uint64_t whole = 0, frac = 0, scale = 1;
	size_t i = 0;
	for (; i < vlen && v[i] >= '0' && v[i] <= '9'; i++) {
		whole = whole * 10 + (uint64_t)(v[i] - '0');
		if (whole > 1000)
			return true;
	}
	if (i == 0)
		return true;
	if (i < vlen) {
		if (v[i++] != '.' || i == vlen)
			return true;
		for (; i < vlen && v[i] >= '0' && v[i] <= '9'; i++) {
			if (scale < 1000000) {
				frac = frac * 10 + (uint64_t)(v[i] - '0');
				scale *= 10;
			}
		}
		if (i != vlen)
			return true;
	}
	uint64_t x = whole * 1024 + (frac * 1024 + scale / 2) / scale;
	if (x <= 1024 || x > (uint64_t)1000 * 1024)
		return true;
	*x1024 = x;
	return false;
}

bool prof_peak_growth_conf_check(const char *v, size_t vlen, char *why,
    size_t whysize) {
	uint64_t x;
	if (!peak_growth_parse(v, vlen, &x))
		return false;
	mp_snprintf(why, whysize, "expected a factor above 1 and at most "
	    "1000, such as 1.1 (a new peak profile each time the live heap "
	    "passes the last peak by 10%%)");
	return true;
}

/* The option's factor, read at the first copy (prof_dump_mtx held): the
 * table keeps a value its check accepted, or the default. */
static uint64_t peak_growth(void) {
	if (peak_growth_1024 == 0) {
		uint64_t x = 1126;
		(void)peak_growth_parse(opt_prof_peak_growth,
		    strlen(opt_prof_peak_growth), &x);
		peak_growth_1024 = x;
	}
	return peak_growth_1024;
}

/* The live bytes that make the next peak: growth times `peak`, and more
 * than `peak` (saturating). */
static uint64_t peak_next_after(uint64_t peak) {
	uint64_t g = peak_growth();
	uint64_t hi = peak / 1024, lo = peak % 1024;
	if (hi > UINT64_MAX / g)
		return UINT64_MAX;
	uint64_t next = hi * g + lo * g / 1024;
	return next > peak ? next : peak + 1;
}

static void oom_reserve_fit_locked(const dump_snap_t *s);
/* prof_oom_dump's reserve was taken (or tried), at the first sample. */
static _Atomic bool oom_reserved;

/* Copy the tables as the new peak (prof_dump_mtx held).  Out of memory,
 * the peak kept stays, and the next try waits for a higher heap. */
static void peak_take_locked(void) {
	dump_snap_t s;
	const char *why;
	uint64_t live = atomic_load(&prof_live.bytes);
	if (prof_snap_collect_reusing(&s, &peak_spare, &why)) {
		atomic_store(&prof_peak_next, peak_next_after(live));
		return;
	}
	if (peak_kept) {
		if (peak_snap.gcap <= PEAK_SPARE_MAX)
			peak_spare = peak_snap;
		else
			prof_snap_release(&peak_snap);
	}
	peak_snap = s;
	peak_kept = true;
	oom_reserve_fit_locked(&s);
	uint64_t bytes = s.total.curbytes_unbiased;
	atomic_store(&peak_bytes, bytes);
	atomic_store(&prof_peak_next, peak_next_after(bytes > live ? bytes :
	    live));
}

void prof_peak_maybe(void) {
	/* The first sample comes here whatever the options: the reserve of
	 * prof_oom_dump is taken then. */
	if (opt_prof_oom_dump && !atomic_load_explicit(&oom_reserved,
	    memory_order_relaxed) && mp_mutex_trylock(&prof_dump_mtx)) {
		mp_tsd.reentrancy++;
		oom_reserve_fit_locked(NULL);
		mp_tsd.reentrancy--;
		mp_mutex_unlock(&prof_dump_mtx);
	}
	if (!opt_prof_peak) {
		/* Off: the mark starts at 0; no sample comes here again (once
		 * the reserve is taken: a dump may have held the lock). */
		if (!opt_prof_oom_dump || atomic_load_explicit(&oom_reserved,
		    memory_order_relaxed))
			atomic_store(&prof_peak_next, UINT64_MAX);
		return;
	}
	if (!mp_mutex_trylock(&prof_dump_mtx))
		return;         /* a dump is running: the next sample tries */
	mp_tsd.reentrancy++;
	if (atomic_load(&prof_live.bytes) >= atomic_load(&prof_peak_next))
		peak_take_locked();
	mp_tsd.reentrancy--;
	mp_mutex_unlock(&prof_dump_mtx);
}

/* Before a peak dump (prof_dump_mtx held): a peak at least as high as the
 * heap of now.  true with *whyp set if there is none to write. */
static bool peak_ready_locked(const char **whyp) {
	if (!opt_prof_peak) {
		*whyp = "prof_peak is off (start with " MP_CONF_ENV
		    "=prof:true,prof_peak:true)";
		return true;
	}
	if (!peak_kept || atomic_load(&prof_live.bytes) >
	    atomic_load(&peak_bytes))
		peak_take_locked();
	if (!peak_kept) {
		*whyp = "out of memory for the peak snapshot";
		return true;
	}
	return false;
}

static const dump_snap_t *peak_snap_locked(void) {
	return &peak_snap;
}

void prof_peak_reset(void) {
	if (!opt_prof_peak)
		return;
	dump_enter();
	if (peak_kept)
		prof_snap_release(&peak_snap);
	peak_kept = false;
	atomic_store(&peak_bytes, 0);
	peak_take_locked();
	dump_leave();
}

uint64_t prof_peak_bytes(void) {
	return atomic_load(&peak_bytes);
}

bool prof_peak_dump_file(const char *filename) {
	return dump_file_cmd("prof.peak.dump", filename, DUMP_SRC_PEAK, NULL);
}

bool prof_lifetimes_dump_file(const char *filename) {
	return dump_file_cmd("prof.lifetimes.dump", filename, DUMP_SRC_LIFE,
	    NULL);
}

/* ------------------------------------------------ built (prof_frag.c) */

bool prof_dump_built_to_fd(int fd, prof_dump_build_t *build,
    const char *sample_type, char *err, size_t errsize) {
	return dump_fd_common(fd, PROF_FORMAT_PPROF, sample_type,
	    DUMP_SRC_BUILT, build, err, errsize);
}

bool prof_dump_built_file(const char *what, const char *filename,
    prof_dump_build_t *build) {
	return dump_file_cmd(what, filename, DUMP_SRC_BUILT, build);
}

/* ------------------------------------------------------------------ oom */

/*
 * prof_oom_dump: when an allocation is about to fail because the OS
 * refused a mapping (os_map_refusals: ENOMEM from mmap, under RLIMIT_AS
 * or overcommit), write the current profile (.o<n>.heap) and the peak
 * (the next .p<n>.heap), once per process.  malloc.c calls in just before
 * returning NULL, where the call holds no allocator lock; a call from
 * inside the profiler (reentrancy) never dumps, so no profiler lock is
 * held either.
 *
 * Nothing is allocated on the way: the snapshot goes into buffers
 * reserved beforehand (oom_reserve: what does not fit is left out, and
 * the message says so), the file is written through a static buffer, in
 * heap_v2 whatever prof.format says (pprof's encoder needs memory), and
 * the peak is the copy kept already (or the current profile, if that is
 * higher).  The reserve is taken at the first sample and grown with the
 * peak copies (prof_peak) to twice the biggest copy's records and
 * threads: address space, whose pages are touched only by the dump
 * itself, and under RLIMIT_AS the process runs out that much earlier.
 * An allocation made while the dump runs (a malloc_message hook) finds
 * the flag taken and fails without dumping again.
 */
bool opt_prof_oom_dump = false;
#define OOM_RESERVE_MIN ((size_t)1 << 20)
#define OOM_RESERVE_THREADS_MIN ((size_t)64)
#define OOM_WBUF_SIZE ((size_t)64 << 10)
static dump_snap_t oom_reserve;          /* prof_dump_mtx */
static _Atomic bool oom_done;
static char oom_wbuf[OOM_WBUF_SIZE];     /* prof_dump_mtx */

/* Grow the reserve to fit twice s's records and threads (NULL: the
 * minimum), prof_dump_mtx held; a failure keeps the reserve there is. */
static void oom_reserve_fit_locked(const dump_snap_t *s) {
	if (!opt_prof_oom_dump)
		return;
	atomic_store_explicit(&oom_reserved, true, memory_order_relaxed);
	size_t g = s != NULL && s->glen > OOM_RESERVE_MIN / 2 ? 2 * s->glen :
	    OOM_RESERVE_MIN;
	size_t t = s != NULL && s->nthreads > OOM_RESERVE_THREADS_MIN / 2 ?
	    2 * s->nthreads : OOM_RESERVE_THREADS_MIN;
	if (oom_reserve.gcap < g) {
		char *b = base_malloc(g);
		if (b != NULL) {
			base_free(oom_reserve.gbuf, oom_reserve.gcap);
			oom_reserve.gbuf = b;
			oom_reserve.gcap = g;
		}
	}
	if (oom_reserve.tcap < t) {
		dump_thread_t *th = base_malloc(t * sizeof(*th));
		if (th != NULL) {
			base_free(oom_reserve.threads, oom_reserve.tcap *
			    sizeof(*th));
			oom_reserve.threads = th;
			oom_reserve.tcap = t;
		}
	}
}

/* One OOM dump file of kind (O or P) from s, prof_dump_mtx held.  true
 * with r->err filled on failure; r->off when automatic dumps are off. */
static bool oom_write_locked(dump_kind_t kind, const dump_snap_t *s,
    dump_result_t *r) {
	char ebuf[128];
	dump_file_t f;
	dump_result_init(r);
	if (dump_open_auto(&f, kind, r) || r->off)
		return !r->off;
	int werr = prof_heap_v2_write_buf(s, f.fd, oom_wbuf,
	    sizeof(oom_wbuf));
	if (close(f.fd) != 0 && errno != EINTR && werr == 0)
		werr = errno;
	if (werr == 0)
		return false;
	unlink(f.path);
	mp_snprintf(r->err, sizeof(r->err), "cannot write \"%s\": %s",
	    f.path, prof_dump_strerror(werr, ebuf, sizeof(ebuf)));
	return true;
}

void prof_oom_dump(void) {
	if (!config_prof || !opt_prof || !opt_prof_oom_dump ||
	    mp_tsd.reentrancy != 0 || mp_tsd.state != TSD_NOMINAL ||
	    os_map_refusals() == 0 ||
	    atomic_load_explicit(&oom_done, memory_order_relaxed) ||
	    atomic_exchange_explicit(&oom_done, true, memory_order_relaxed))
		return;
	int saved = errno;
	dump_result_t r, pr;
	dump_snap_t s;
	bool have = false, truncated = false, failed = false, pfailed = false;
	bool peak_is_now = false;
	const char *why = NULL;
	dump_enter();
	dump_heap_v2_only = true;
	dump_result_init(&r);
	dump_result_init(&pr);
	if (oom_reserve.gbuf == NULL) {
		why = "no memory was reserved for it (prof_oom_dump takes its "
		    "reserve at the first sample)";
	} else {
		(void)prof_snap_collect_fixed(&s, &oom_reserve, &truncated);
		have = true;
		failed = oom_write_locked(DUMP_O, &s, &r);
	}
	if (opt_prof_peak && !r.off) {
		const dump_snap_t *peak = NULL;
		if (peak_kept && (!have || atomic_load(&peak_bytes) >=
		    s.total.curbytes_unbiased))
			peak = &peak_snap;
		else if (have)
			peak = &s;
		peak_is_now = peak != NULL && peak == &s;
		if (peak != NULL)
			pfailed = oom_write_locked(DUMP_P, peak, &pr);
	}
	if (have)
		oom_reserve = s;        /* the buffers, for good */
	dump_heap_v2_only = false;
	dump_leave();

	if (why != NULL) {
		mp_error("out of memory: no profile written (prof_oom_dump): "
		    "%s", why);
	} else if (!r.off) {
		if (failed)
			mp_error("out of memory: profile (prof_oom_dump): %s",
			    r.err);
		else
			mp_error("out of memory: profile written to \"%s\"%s",
			    r.path, truncated ? " (not all of it: the stacks "
			    "or threads of the moment did not fit the memory "
			    "reserved for it)" : "");
	}
	if (pfailed)
		mp_error("out of memory: peak profile (prof_oom_dump): %s",
		    pr.err);
	else if (pr.path != NULL)
		mp_error("out of memory: peak profile written to \"%s\"%s",
		    pr.path, peak_is_now ? " (the heap of now is the peak)" :
		    "");
	errno = saved;
}

/* ------------------------------------------------------------- triggers */

/*
 * An automatic dump (interval or gdump).  The prefix being empty turns
 * these off silently; failures are reported the first time, then at
 * most once per 10 s with the number of failures not reported.
 */
static void dump_auto(dump_kind_t kind, const char *what) {
	dump_result_t r;
	char msg[DUMP_ERR_MAX + 128];
	dump_enter();
	bool fail = dump_locked(kind, NULL, NULL, NULL, &r);
	/* Names skipped on the way are not failures: always said. */
	char note[DUMP_ERR_MAX + 64];
	dump_taken_note(&r, note, sizeof(note));
	msg[0] = '\0';
	if (note[0] != '\0') {
		mp_snprintf(msg, sizeof(msg), "%s: %s", what, note);
	} else if (fail) {
		uint64_t now = os_now_ns();
		if (dump_fail_count++ == 0) {
			mp_snprintf(msg, sizeof(msg), "%s: %s (further "
			    "failures of automatic dumps are reported at most "
			    "every 10 s)", what, r.err);
			dump_fail_last_ns = now;
		} else if (now - dump_fail_last_ns >= DUMP_FAIL_QUIET_NS) {
			mp_snprintf(msg, sizeof(msg), "%s: %s (%" PRIu64
			    " more automatic dump failures since the last "
			    "report)", what, r.err, dump_fail_suppressed);
			dump_fail_suppressed = 0;
			dump_fail_last_ns = now;
		} else {
			dump_fail_suppressed++;
		}
	}
	dump_leave();
	if (msg[0] != '\0')
		mp_error("%s", msg);
}

/* Triggers fire only from plain allocation calls: not from inside the
 * profiler or a dump (reentrancy), where locks may be held. */
static bool dump_trigger_allowed(void) {
	return mp_tsd.reentrancy == 0 &&
	    atomic_load_explicit(&prof_active, memory_order_relaxed);
}

void prof_idump_maybe(size_t bytes) {
	if (opt_lg_prof_interval < 0 || !opt_prof)
		return;
	uint64_t interval = (uint64_t)1 << opt_lg_prof_interval;
	uint64_t a = atomic_fetch_add_explicit(&idump_accum, bytes,
	    memory_order_relaxed) + bytes;
	if (a < interval)
		return;
	/* Whoever brings the counter back under the interval dumps once. */
	uint64_t cur = atomic_load_explicit(&idump_accum,
	    memory_order_relaxed);
	for (;;) {
		if (cur < interval)
			return;
		if (atomic_compare_exchange_weak_explicit(&idump_accum, &cur,
		    cur % interval, memory_order_relaxed,
		    memory_order_relaxed))
			break;
	}
	if (dump_trigger_allowed())
		dump_auto(DUMP_I, "interval dump (lg_prof_interval)");
}

/* MP_WARM: every process with prof:true calls it as its heap grows, gdump
 * on or off, and it was the only function of its 64 KiB window of code that
 * one with prof_active:false ran (15 pages of its resident code). */
MP_WARM void prof_gdump_maybe(size_t active_pages) {
	if (!opt_prof)
		return;
	/* Not now (inside the profiler): leave the mark, so the next growth
	 * from a plain call dumps. */
	if (mp_tsd.reentrancy != 0)
		return;
	/* The mark follows every high, also while prof.gdump is off (as in
	 * jemalloc): turning it on later dumps only above the true maximum. */
	size_t high = atomic_load_explicit(&prof_gdump_high,
	    memory_order_relaxed);
	do {
		if (active_pages <= high)
			return;
	} while (!atomic_compare_exchange_weak_explicit(&prof_gdump_high,
	    &high, active_pages, memory_order_relaxed, memory_order_relaxed));
	if (atomic_load_explicit(&prof_gdump_enabled, memory_order_relaxed) &&
	    dump_trigger_allowed())
		dump_auto(DUMP_U, "gdump (prof.gdump)");
}

/* ------------------------------------------------------------ exit dump */

static const char *plural(uint64_t n) {
	return n == 1 ? "" : "s";
}

/*
 * The atexit handler of prof_final / prof_leak: the `f` dump, then the
 * leak summary computed jeprof's way from the raw totals of that same
 * snapshot (one scale from the average object size, as jemalloc's
 * prof_leakcheck does).
 */
void prof_final_dump(void) {
	if (!config_prof || !opt_prof)
		return;
	dump_result_t r;
	dump_file_t f;
	char note[DUMP_ERR_MAX + 64];
	bool wrote = false, kept = false;
	prof_format_t format;
	dump_snap_t s;
	const char *why = NULL;

	dump_enter();
	format = dump_format_locked();
	dump_result_init(&r);
	bool failed = dump_open_auto(&f, DUMP_F, &r);
	if (r.off && !opt_prof_leak) {
		dump_leave();
		return;
	}
	if (!failed && !r.off) {
		failed = dump_file_fill(&f, &r, format, &s, &kept);
		wrote = !failed;
	}
	/* The leak summary needs the snapshot even without a file. */
	if (!kept && opt_prof_leak)
		kept = !prof_snap_collect(&s, &why);
	/* The peak, beside it (prof_peak). */
	dump_result_t pr;
	const char *pwhy = NULL;
	bool pfailed = false;
	dump_result_init(&pr);
	if (opt_prof_peak && !r.off) {
		pfailed = peak_ready_locked(&pwhy) || dump_locked(DUMP_P, NULL,
		    NULL, peak_snap_locked(), &pr);
	}
	dump_leave();

	dump_taken_note(&r, note, sizeof(note));
	if (note[0] != '\0')
		mp_error("final dump (prof_final): %s", note);
	if (failed)
		mp_error("final dump (prof_final): %s", r.err);
	dump_taken_note(&pr, note, sizeof(note));
	if (note[0] != '\0')
		mp_error("final peak dump (prof_final): %s", note);
	if (pfailed)
		mp_error("final peak dump (prof_final): %s", pwhy != NULL ?
		    pwhy : pr.err);
	if (!kept) {
		if (opt_prof_leak)
			mp_error("leak check skipped: %s", why);
		return;
	}
	uint64_t curobjs = s.total.curobjs, curbytes = s.total.curbytes;
	size_t ncontexts = s.ncontexts;
	double R = (double)((uint64_t)1 << s.lg_sample);
	prof_snap_release(&s);
	if (!opt_prof_leak || curbytes == 0)
		return;

	double ratio = ((double)curbytes / (double)curobjs) / R;
	double scale = 1.0 / (1.0 - util_exp(-ratio));
	uint64_t bytes = prof_snap_round((double)curbytes * scale);
	uint64_t objs = prof_snap_round((double)curobjs * scale);
	mp_error("Leak approximation summary: ~%" PRIu64 " byte%s, ~%" PRIu64
	    " object%s, >= %zu context%s", bytes, plural(bytes), objs,
	    plural(objs), ncontexts, plural(ncontexts));
	if (wrote) {
		mp_error("Run %s on \"%s\" for leak detail",
		    format == PROF_FORMAT_PPROF ? "go tool pprof" : "jeprof",
		    r.path);
	} else if (r.off) {
		mp_error("No heap profile was written for leak detail: "
		    "prof_prefix is empty");
	} else {
		mp_error("No heap profile was written for leak detail: the "
		    "final dump failed (see above)");
	}
	if (opt_prof_leak_error) {
		mp_error("Exiting with error code because memory leaks were "
		    "detected");
		_exit(1);
	}
}

/* stats.mutexes.prof_dump (prof_ctl_boot). */
MP_WARM void prof_dump_mutex_register(void) {
	ctl_mutex_register("prof_dump", &prof_dump_mtx);
}

/* ----------------------------------------------------------------- fork */

void prof_dump_prefork(void) {
	prof_recent_dump_prefork();
	pthread_mutex_lock(&prof_dump_mtx.lock);
}

void prof_dump_postfork_parent(void) {
	pthread_mutex_unlock(&prof_dump_mtx.lock);
	prof_recent_dump_postfork_parent();
}

void prof_dump_postfork_child(void) {
	mp_mutex_postfork_child(&prof_dump_mtx);
	prof_recent_dump_postfork_child();
}
