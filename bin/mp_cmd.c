/*
 * bin/mp_cmd.c - running one malloc-prof command (mp_cmd_run), once
 * malloc-prof.c has read the command line: the pipeline shared by the
 * commands.  Read the profiles (heap_v2 or pprof, told apart by content),
 * symbolize every stack once per distinct address, drop the allocator's
 * own frames as jeprof does, merge the stacks by name (subtracting
 * --base), then print the command's report (mp_output.c); or, for
 * `pprof`, write the stacks as a profile.proto (mp_pprof.c).  `info`
 * prints what it read instead, and `svg` pipes the call graph to
 * Graphviz.
 */
#include "malloc-prof.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- symbolizing stacks */

/* jeprof's list of allocator entry points: a stack is cut at the
 * outermost of these (with everything inside it), so that it starts at
 * the program's own frame.  Prefixed names (mp_malloc of a
 * --with-prefix=mp_ build, jemalloc's je_ names, "_" variants) count. */
static const char *const mp_alloc_fns[] = {
	"malloc", "calloc", "free", "realloc", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "cfree", "mallocx", "rallocx",
	"xallocx", "dallocx", "sdallocx", "sdallocx_noflags",
	"malloc_default", "imalloc", "imalloc_body", "prof_alloc_prep",
	"prof_backtrace_impl", "prof_backtrace", "prof_tctx_create",
	"irallocx_prof", "do_rallocx", "ixallocx_prof", "newImpl",
	"fallbackNewImpl", "fallback_impl",
};

static bool mp_is_alloc_fn(const char *name) {
	static const char *const prefixes[] = { "", "_", "je_", "_je_", "mp_",
		"_mp_", "__libc_" };
	/* The function only: --lines adds " file:line". */
	size_t len = strcspn(name, " ");
	for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
		size_t pl = strlen(prefixes[p]);
		if (len < pl || strncmp(name, prefixes[p], pl) != 0)
			continue;
		for (size_t i = 0; i < sizeof(mp_alloc_fns) /
		    sizeof(mp_alloc_fns[0]); i++)
			if (strlen(mp_alloc_fns[i]) == len - pl &&
			    strncmp(name + pl, mp_alloc_fns[i], len - pl) == 0)
				return true;
	}
	return false;
}

/* Name ids of a pprof profile's named frames (its fnames), made once
 * each; with LINES "function file:line" when the profile has the line. */
typedef struct {
	uint32_t *id;		/* UINT32_MAX: not yet */
	uint8_t *alloc;
} mp_fnmap_t;

static uint32_t mp_fn_name(mp_fnmap_t *fm, mp_report_t *rep,
    const mp_profile_t *prof, uint32_t fn, bool lines, bool *alloc) {
	if (fm->id == NULL) {
		fm->id = mp_xmalloc(prof->nfnames * sizeof(*fm->id));
		fm->alloc = mp_xmalloc(prof->nfnames);
		memset(fm->id, 0xff, prof->nfnames * sizeof(*fm->id));
	}
	if (fm->id[fn] == UINT32_MAX) {
		const mp_fname_t *f = &prof->fnames[fn];
		if (lines && f->file[0] != '\0' && f->line > 0) {
			char *s = mp_xmalloc(strlen(f->name) + strlen(f->file) +
			    32);
			sprintf(s, "%s %s:%" PRId64, f->name, f->file, f->line);
			fm->id[fn] = mp_report_intern(rep, s);
			free(s);
		} else {
			fm->id[fn] = mp_report_intern(rep, f->name);
		}
		fm->alloc[fn] = mp_is_alloc_fn(f->name);
	}
	*alloc = fm->alloc[fn];
	return fm->id[fn];
}

/* Name ids of one profile's addresses: each distinct PC is looked up once
 * (stacks share most of their frames).  Frame 0 and the others differ
 * (pc vs pc - 1), hence the leaf bit in the key. */
typedef struct {
	uint64_t *key;
	uint32_t *id;
	uint8_t *alloc;		/* the name is an allocator entry point */
	size_t cap, n;
} mp_pcmap_t;

static uint32_t mp_pc_name(mp_pcmap_t *pm, mp_symbolizer_t *sym,
    mp_report_t *rep, const mp_profile_t *prof, uint64_t pc, bool leaf,
    bool *alloc) {
	if (2 * (pm->n + 1) > pm->cap) {
		size_t cap = pm->cap ? 2 * pm->cap : 4096;
		uint64_t *key = mp_xmalloc(cap * sizeof(*key));
		uint32_t *id = mp_xmalloc(cap * sizeof(*id));
		uint8_t *al = mp_xmalloc(cap);
		memset(id, 0xff, cap * sizeof(*id));
		for (size_t i = 0; i < pm->cap; i++) {
			if (pm->id[i] == UINT32_MAX)
				continue;
			size_t j = (pm->key[i] * 0x9e3779b97f4a7c15ull) >> 20 &
			    (cap - 1);
			while (id[j] != UINT32_MAX)
				j = (j + 1) & (cap - 1);
			key[j] = pm->key[i];
			id[j] = pm->id[i];
			al[j] = pm->alloc[i];
		}
		free(pm->key);
		free(pm->id);
		free(pm->alloc);
		pm->key = key;
		pm->id = id;
		pm->alloc = al;
		pm->cap = cap;
	}
	/* Addresses are at most 2^63 in practice: the top bit is free. */
	uint64_t k = pc ^ ((uint64_t)leaf << 63);
	size_t j = (k * 0x9e3779b97f4a7c15ull) >> 20 & (pm->cap - 1);
	for (; pm->id[j] != UINT32_MAX; j = (j + 1) & (pm->cap - 1)) {
		if (pm->key[j] == k) {
			*alloc = pm->alloc[j];
			return pm->id[j];
		}
	}
	const char *name = mp_sym_frame(sym, prof, pc, leaf);
	pm->key[j] = k;
	pm->id[j] = mp_report_intern(rep, name);
	pm->alloc[j] = mp_is_alloc_fn(name);
	pm->n++;
	*alloc = pm->alloc[j];
	return pm->id[j];
}

/* ---- --tag: labels of pprof samples (thread.prof.label, thread_id,
 * thread_name) */

typedef struct {
	const char *key;	/* --tag's KEY, klen bytes */
	size_t klen;
	const char *value;	/* KEY=VALUE's VALUE; NULL: group by KEY */
	uint32_t *ids;		/* group: the root frames "KEY=VALUE" made */
	size_t nids, cap;
} mp_tag_t;

static void mp_tag_init(mp_tag_t *t, const char *tag) {
	memset(t, 0, sizeof(*t));
	if (tag == NULL)
		return;
	const char *eq = strchr(tag, '=');
	t->key = tag;
	t->klen = eq != NULL ? (size_t)(eq - tag) : strlen(tag);
	t->value = eq != NULL ? eq + 1 : NULL;
}

static bool mp_tag_is(const mp_tag_t *t, const char *key) {
	return strlen(key) == t->klen && memcmp(key, t->key, t->klen) == 0;
}

/* The value of the label T->key of pprof sample S, or NULL. */
static const char *mp_stack_label(const mp_stack_t *s, const char *key,
    size_t klen) {
	for (uint32_t k = 0; k < s->nlabels; k++) {
		if (strlen(s->labels[k].key) == klen &&
		    memcmp(s->labels[k].key, key, klen) == 0)
			return s->labels[k].value;
	}
	return NULL;
}

/* heap_v2 has the labels thread_id and thread_name only, from its tN
 * lines: the value of T's key for thread UID (NULL: unnamed), written
 * to BUF if need be. */
static const char *mp_heap_thread_label(const mp_tag_t *t,
    const mp_profile_t *prof, uint64_t uid, char *buf, size_t size) {
	if (mp_tag_is(t, "thread_id")) {
		snprintf(buf, size, "%" PRIu64, uid);
		return buf;
	}
	for (size_t i = 0; i < prof->nthreads; i++) {
		if (prof->threads[i].uid == uid)
			return prof->threads[i].name[0] != '\0' ?
			    prof->threads[i].name : NULL;
	}
	return NULL;
}

/* The id of the root frame "KEY=VALUE" (VALUE NULL: "(none)"). */
static uint32_t mp_tag_root(mp_tag_t *t, mp_report_t *rep, const char *value) {
	size_t vlen = value != NULL ? strlen(value) : 6;
	char *name = mp_xmalloc(t->klen + vlen + 2);
	snprintf(name, t->klen + vlen + 2, "%.*s=%s", (int)t->klen, t->key,
	    value != NULL ? value : "(none)");
	uint32_t id = mp_report_intern(rep, name);
	free(name);
	for (size_t i = 0; i < t->nids; i++)
		if (t->ids[i] == id)
			return id;
	if (t->nids == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 16;
		t->ids = mp_xrealloc(t->ids, t->cap * sizeof(*t->ids));
	}
	t->ids[t->nids++] = id;
	return id;
}

/* A stack's share under --tag: its values and its label's value. */
typedef struct {
	double val[MP_NVALUES];
	const char *label;
	char buf[24];
} mp_part_t;

/* THREAD >= 0: only what thread tTHREAD allocated (its lines of each
 * stack, unbiased the same way, or a pprof sample's thread_id label), as
 * jeprof's --thread.  TAG: --tag's filter or grouping (a root frame
 * KEY=VALUE above each stack).  PP (the pprof command) gets every stack
 * too, without the allocator's frames. */
static void mp_add_profile(mp_report_t *rep, mp_symbolizer_t *sym,
    const mp_profile_t *prof, int sign, int64_t thread, bool lines,
    mp_tag_t *tag, mp_pprof_out_t *pp) {
	mp_pcmap_t pm = { 0 };
	mp_fnmap_t fm = { 0 };
	uint32_t *frames = NULL;
	uint32_t cap = 0;
	bool heap_v2 = strcmp(prof->format, "heap_v2") == 0;
	/* heap_v2 has no labels but those of its tN lines. */
	bool by_thread_line = heap_v2 && tag->key != NULL &&
	    (mp_tag_is(tag, "thread_id") || mp_tag_is(tag, "thread_name"));
	if (heap_v2 && tag->key != NULL && !by_thread_line)
		mp_warn("\"%s\" is a heap_v2 dump: its only labels are "
		    "thread_id and thread_name (from its tN lines); --tag %.*s "
		    "%s (labels are written in pprof dumps, prof_format:pprof)",
		    prof->file, (int)tag->klen, tag->key, tag->value != NULL ?
		    "matches nothing in it" : "puts all of it under "
		    "\"(none)\"");
	mp_part_t *parts = NULL;
	size_t pcap = 0;
	for (size_t i = 0; i < prof->nstacks; i++) {
		const mp_stack_t *s = &prof->stacks[i];
		double tval[MP_NVALUES];
		const double *val = s->val;
		if (thread >= 0 && !heap_v2) {
			const char *id = mp_stack_label(s, "thread_id", 9);
			char want[24];
			snprintf(want, sizeof(want), "%" PRId64, thread);
			if (id == NULL || strcmp(id, want) != 0)
				continue;
		} else if (thread >= 0) {
			uint32_t t = 0;
			while (t < s->nthreads &&
			    s->threads[t].uid != (uint64_t)thread)
				t++;
			if (t == s->nthreads)
				continue;
			mp_unbias_cnt(prof->period, &s->threads[t].cnt, tval);
			val = tval;
		}
		/* The parts to add: the stack (one label value), or with
		 * --tag thread_id/thread_name on heap_v2 its tN lines. */
		size_t np = by_thread_line && thread < 0 ? s->nthreads : 1;
		if (np + 1 > pcap) {
			pcap = np + 1;
			parts = mp_xrealloc(parts, pcap * sizeof(*parts));
		}
		if (by_thread_line && thread < 0) {
			for (size_t k = 0; k < np; k++) {
				mp_unbias_cnt(prof->period,
				    &s->threads[k].cnt, parts[k].val);
				parts[k].label = mp_heap_thread_label(tag, prof,
				    s->threads[k].uid, parts[k].buf,
				    sizeof(parts[k].buf));
			}
		} else {
			memcpy(parts[0].val, val, sizeof(parts[0].val));
			parts[0].label = NULL;
			if (by_thread_line)
				parts[0].label = mp_heap_thread_label(tag, prof,
				    (uint64_t)thread, parts[0].buf,
				    sizeof(parts[0].buf));
			else if (tag->key != NULL)
				parts[0].label = mp_stack_label(s, tag->key,
				    tag->klen);
		}
		if (tag->value != NULL) {
			size_t kept = 0;
			for (size_t k = 0; k < np; k++)
				if (parts[k].label != NULL &&
				    strcmp(parts[k].label, tag->value) == 0)
					parts[kept++] = parts[k];
			np = kept;
			if (np == 0)
				continue;
		}
		if (s->npcs + 1 > cap) {
			cap = s->npcs + 1;
			frames = mp_xrealloc(frames, cap * sizeof(*frames));
		}
		/* Leaf first as read; cut = frames belonging to the
		 * allocator (up to and including the outermost entry
		 * point). */
		uint32_t cut = 0;
		for (uint32_t k = 0; k < s->npcs; k++) {
			bool alloc;
			if (s->fn != NULL && s->fn[k] != UINT32_MAX)
				frames[k] = mp_fn_name(&fm, rep, prof, s->fn[k],
				    lines, &alloc);
			else
				frames[k] = mp_pc_name(&pm, sym, rep, prof,
				    s->pcs[k], k == 0 || prof->exact_pcs,
				    &alloc);
			if (alloc)
				cut = k + 1;
		}
		/* The frames of an allocator library, innermost first, go
		 * too: unnamed internals of a stripped jemalloc would
		 * otherwise top every table.  (Frames a pprof profile names
		 * are not looked up in files.) */
		const mp_elf_t *lib = s->fn == NULL || s->fn[0] == UINT32_MAX ?
		    mp_sym_in_alloc_lib(sym, prof, s->pcs[0]) : NULL;
		if (lib != NULL) {
			uint32_t k = 1;
			while (k < s->npcs && (s->fn == NULL ||
			    s->fn[k] == UINT32_MAX) && mp_sym_in_alloc_lib(sym,
			    prof, s->pcs[k] - !prof->exact_pcs) == lib)
				k++;
			if (k > cut)
				cut = k;
		}
		if (cut == s->npcs)
			cut = 0;	/* nothing else: keep what there is */
		/* Root first. */
		uint32_t n = s->npcs - cut;
		for (uint32_t a = cut, b = s->npcs - 1; a < b; a++, b--) {
			uint32_t t = frames[a];
			frames[a] = frames[b];
			frames[b] = t;
		}
		for (size_t k = 0; k < np; k++) {
			if (tag->key == NULL || tag->value != NULL) {
				mp_report_add(rep, frames + cut, n,
				    parts[k].val, sign);
				continue;
			}
			/* Grouped: the root frame KEY=VALUE first (frames
			 * has room for one more). */
			memmove(frames + 1, frames + cut, n * sizeof(*frames));
			frames[0] = mp_tag_root(tag, rep, parts[k].label);
			mp_report_add(rep, frames, n + 1, parts[k].val, sign);
			memmove(frames + cut, frames + 1, n * sizeof(*frames));
		}
		if (pp != NULL)
			mp_pprof_out_sample(pp, prof, s, s->npcs - n, val, sign);
	}
	free(parts);
	free(frames);
	free(fm.id);
	free(fm.alloc);
	free(pm.key);
	free(pm.id);
	free(pm.alloc);
}

/* ---- C++ names: c++filt, when installed, turns _Z... into source names.
 * One run for all the names; without c++filt they stay mangled. */
static void mp_demangle(mp_report_t *rep) {
	size_t n = mp_report_nnames(rep), count = 0;
	for (size_t i = 0; i < n; i++)
		count += strncmp(mp_report_name(rep, (uint32_t)i), "_Z", 2) == 0;
	if (count == 0)
		return;
	/* The names go through a file, not a pipe both ways: c++filt
	 * writes as it reads, and a full pipe each way would deadlock. */
	const char *tmpdir = getenv("TMPDIR");
	char inpath[4096];
	snprintf(inpath, sizeof(inpath), "%s/malloc-prof.XXXXXX",
	    tmpdir && tmpdir[0] ? tmpdir : "/tmp");
	int fd = mkstemp(inpath);
	if (fd < 0)
		return;
	unlink(inpath);
	FILE *f = fdopen(fd, "w+");
	if (f == NULL) {
		close(fd);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = mp_report_name(rep, (uint32_t)i);
		if (strncmp(name, "_Z", 2) == 0)	/* up to " file:line" */
			fprintf(f, "%.*s\n", (int)strcspn(name, " "), name);
	}
	if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return;
	}
	int out[2];
	if (pipe(out) != 0) {
		fclose(f);
		return;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fileno(f), 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addclose(&fa, out[0]);
	char *args[] = { "c++filt", NULL };
	pid_t pid;
	int r = posix_spawnp(&pid, "c++filt", &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	fclose(f);
	if (r != 0) {
		close(out[0]);
		return;
	}
	FILE *res = fdopen(out[0], "r");
	char *line = NULL;
	size_t cap = 0;
	for (size_t i = 0; res != NULL && i < n; i++) {
		const char *name = mp_report_name(rep, (uint32_t)i);
		if (strncmp(name, "_Z", 2) != 0)
			continue;
		ssize_t len = getline(&line, &cap, res);
		if (len <= 0)
			break;
		if (line[len - 1] == '\n')
			line[--len] = '\0';
		const char *rest = name + strcspn(name, " ");
		char *full = mp_xmalloc((size_t)len + strlen(rest) + 1);
		sprintf(full, "%s%s", line, rest);
		mp_report_rename(rep, (uint32_t)i, full);
		free(full);
	}
	free(line);
	if (res != NULL)
		fclose(res);
	else
		close(out[0]);
	waitpid(pid, NULL, 0);
}

/* ---- info */
static void mp_cmd_info(const mp_opts_t *o, mp_symbolizer_t *sym,
    mp_profile_t *profs) {
	for (int p = 0; p < o->nprofiles; p++) {
		const mp_profile_t *pr = &profs[p];
		int lg = -1;
		for (int b = 0; b < 64; b++)
			if (pr->period == (uint64_t)1 << b)
				lg = b;
		printf("%s:\n  format: %s, sample period %" PRIu64
		    " bytes", pr->file, pr->format, pr->period);
		if (lg >= 0)
			printf(" (lg_prof_sample %d)", lg);
		if (pr->sample_types != NULL)
			printf("\n  sample types: %s", pr->sample_types);
		if (pr->have_total)
			printf("\n  header t* (as printed): %" PRIu64
			    " objects, %" PRIu64 " bytes in use; %" PRIu64
			    " objects, %" PRIu64 " bytes allocated",
			    pr->total.v[MP_INUSE_OBJECTS],
			    pr->total.v[MP_INUSE_SPACE],
			    pr->total.v[MP_ALLOC_OBJECTS],
			    pr->total.v[MP_ALLOC_SPACE]);
		printf("\n");
		/* The readers bound each count (MP_COUNT_MAX): the casts
		 * and sums are exact. */
		double u[MP_NVALUES] = { 0 };
		int64_t raw[MP_NVALUES] = { 0 };
		for (size_t i = 0; i < pr->nstacks; i++) {
			for (int k = 0; k < MP_NVALUES; k++) {
				u[k] += pr->stacks[i].val[k];
				raw[k] = mp_sum(raw[k],
				    (int64_t)pr->stacks[i].raw.v[k]);
			}
		}
		printf("  stacks: %zu; as printed: %" PRId64 " objects, %" PRId64
		    " bytes in use\n", pr->nstacks, raw[MP_INUSE_OBJECTS],
		    raw[MP_INUSE_SPACE]);
		printf("  %s: %.0f objects, %.0f bytes "
		    "in use; %.0f objects, %.0f bytes allocated\n",
		    pr->sample_types != NULL ? "values (unbiased by the "
		    "writer)" : "unbiased (jeprof's scaling)",
		    u[MP_INUSE_OBJECTS], u[MP_INUSE_SPACE], u[MP_ALLOC_OBJECTS],
		    u[MP_ALLOC_SPACE]);
		printf("  threads: %zu\n", pr->nthreads);
		for (size_t i = 0; i < pr->nthreads; i++) {
			const mp_thread_t *t = &pr->threads[i];
			printf("    t%" PRIu64 ": %" PRIu64 " objects, %" PRIu64
			    " bytes in use%s%s%s\n", t->uid,
			    t->cnt.v[MP_INUSE_OBJECTS], t->cnt.v[MP_INUSE_SPACE],
			    t->name[0] ? " \"" : "", t->name,
			    t->name[0] ? "\"" : "");
		}
		if (!pr->have_maps) {
			printf("  mapped files: none (%s)\n",
			    pr->sample_types != NULL ? "no mappings in the "
			    "profile" : "no MAPPED_LIBRARIES section: frames "
			    "cannot be named");
			continue;
		}
		printf("  mapped files (executable mappings):\n");
		for (size_t i = 0; i < pr->nmaps; i++) {
			const mp_mapping_t *m = &pr->maps[i];
			if (m->perms[2] != 'x' || m->path[0] != '/')
				continue;
			bool dup = false;
			for (size_t j = 0; j < i && !dup; j++)
				dup = pr->maps[j].perms[2] == 'x' &&
				    strcmp(pr->maps[j].path, m->path) == 0;
			if (dup)
				continue;
			const char *why = NULL;
			const mp_elf_t *e = mp_sym_file(sym, m, &why);
			if (e == NULL) {
				printf("    %s%s: not read: %s\n", m->path,
				    m->deleted ? " (deleted)" : "", why);
				continue;
			}
			printf("    %s: found", m->path);
			if (strcmp(mp_elf_path(e), m->path) != 0)
				printf(" as %s", mp_elf_path(e));
			printf(", build ID %s, %zu functions",
			    mp_elf_build_id(e)[0] ? mp_elf_build_id(e) : "none",
			    mp_elf_nsyms(e));
			if (mp_elf_debug_file(e) != NULL)
				printf(", debug file %s", mp_elf_debug_file(e));
			printf("\n");
		}
	}
}

/* ---- output files */
static FILE *mp_open_output(const char *path) {
	if (path == NULL || strcmp(path, "-") == 0)
		return stdout;
	FILE *f = fopen(path, "w");
	if (f == NULL)
		mp_err("cannot create \"%s\": %s", path, strerror(errno));
	return f;
}

static bool mp_close_output(FILE *f, const char *path) {
	bool ok = !ferror(f);
	if (f == stdout)
		ok = fflush(f) == 0 && ok;
	else
		ok = fclose(f) == 0 && ok;
	if (!ok)
		mp_err("cannot write \"%s\": %s", path ? path : "standard output",
		    strerror(errno));
	return ok;
}

static int mp_no_dot(const char *why) {
	mp_err("cannot run \"dot\": %s: svg needs Graphviz (Debian: "
	    "apt-get install graphviz); without it use `malloc-prof "
	    "flamegraph` or `malloc-prof dot`", why);
	return MP_EXIT_USAGE;
}

/* Runs `dot -Tsvg [-o OUT]` on the call graph. */
static int mp_run_dot(const mp_opts_t *o, const mp_report_t *rep, bool bytes) {
	int fds[2];
	if (pipe(fds) != 0) {
		mp_err("cannot create a pipe: %s", strerror(errno));
		return MP_EXIT_USAGE;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	posix_spawn_file_actions_addclose(&fa, fds[1]);
	char *args[] = { "dot", "-Tsvg", "-o", (char *)o->output, NULL };
	if (o->output == NULL)
		args[2] = NULL;
	pid_t pid;
	int r = posix_spawnp(&pid, "dot", &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[0]);
	if (r != 0) {
		close(fds[1]);
		return mp_no_dot(strerror(r));
	}
	FILE *f = fdopen(fds[1], "w");
	if (f == NULL) {
		close(fds[1]);
		waitpid(pid, NULL, 0);
		mp_err("cannot write to dot: %s", strerror(errno));
		return MP_EXIT_USAGE;
	}
	/* Where the C library's spawn does not report a failed exec (under
	 * valgrind, say), the child exits 127 and the pipe has no reader:
	 * that must not kill us with SIGPIPE before we can say why. */
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	sigaction(SIGPIPE, &ignore, &old);
	mp_out_dot(rep, f, o->limit < 0 ? 80 : o->limit, bytes);
	fclose(f);
	sigaction(SIGPIPE, &old, NULL);
	int st = 0;
	bool reaped = waitpid(pid, &st, 0) == pid;
	if (reaped && WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return mp_no_dot("the command was not found (status 127)");
	if (!reaped || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		mp_err("dot failed (status %d): see its message above",
		    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		return MP_EXIT_USAGE;
	}
	return MP_EXIT_OK;
}

/* The pprof command's output: -o FILE, or standard output (not a
 * terminal: checked with the options). */
static int mp_pprof_write_file(const mp_opts_t *o, mp_pprof_out_t *pp,
    uint64_t period) {
	const char *path = o->output;
	int fd = 1;
	if (path != NULL && strcmp(path, "-") != 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0) {
			mp_err("cannot create \"%s\": %s", path,
			    strerror(errno));
			return MP_EXIT_USAGE;
		}
	} else {
		path = "standard output";
	}
	bool ok = mp_pprof_out_write(pp, period, fd, path);
	if (fd != 1 && close(fd) != 0 && ok) {
		mp_err("cannot write \"%s\": %s", path, strerror(errno));
		ok = false;
	}
	return ok ? MP_EXIT_OK : MP_EXIT_USAGE;
}

/* ---- temporary: heaptrack's "temporary allocations" from a lifetime
 * profile (prof.lifetimes.dump, GET /debug/pprof/lifetimes), whose
 * samples are (stack, bucket) pairs: alloc_objects and alloc_space split
 * by the string label lifetime, with the stack's mean lifetime of freed
 * samples as the number label lifetime_mean (ns); the live ones carry
 * their age at the dump as the string label age (same names), whose
 * oldest bucket the summary counts: memory held for more than 1 s. */

static const char *const mp_life_buckets[] = {
	"<1ms", "1-10ms", "10-100ms", "100ms-1s", ">1s", "live" };
#define MP_LIFE_NB 6
#define MP_LIFE_FRAMES 4

typedef struct {
	const mp_stack_t *s;	/* the first of its samples */
	double objs[MP_LIFE_NB], bytes[MP_LIFE_NB];
	double all_objs, short_objs, short_bytes;
	const char *mean;	/* lifetime_mean in ns (decimal), or NULL */
	uint32_t ids[MP_LIFE_FRAMES], nids;	/* names (shown rows) */
} mp_life_row_t;

static int mp_stack_cmp(const void *a, const void *b) {
	const mp_stack_t *x = *(const mp_stack_t *const *)a;
	const mp_stack_t *y = *(const mp_stack_t *const *)b;
	if (x->npcs != y->npcs)
		return x->npcs < y->npcs ? -1 : 1;
	for (uint32_t k = 0; k < x->npcs; k++)
		if (x->pcs[k] != y->pcs[k])
			return x->pcs[k] < y->pcs[k] ? -1 : 1;
	return 0;
}

static int mp_life_row_cmp(const void *a, const void *b) {
	const mp_life_row_t *x = a, *y = b;
	if (x->short_objs != y->short_objs)
		return x->short_objs > y->short_objs ? -1 : 1;
	if (x->short_bytes != y->short_bytes)
		return x->short_bytes > y->short_bytes ? -1 : 1;
	return 0;
}

/* The names of the stack's first MP_LIFE_FRAMES frames, innermost
 * first, interned in REP (so that they are demangled together). */
static uint32_t mp_life_names(mp_symbolizer_t *sym, const mp_profile_t *prof,
    const mp_stack_t *s, mp_report_t *rep, uint32_t *ids) {
	uint32_t n = 0;
	for (; n < s->npcs && n < MP_LIFE_FRAMES; n++)
		ids[n] = mp_report_intern(rep, s->fn != NULL &&
		    s->fn[n] != UINT32_MAX ? prof->fnames[s->fn[n]].name :
		    mp_sym_frame(sym, prof, s->pcs[n], n == 0 ||
		    prof->exact_pcs));
	return n;
}

static int mp_cmd_temporary(const mp_opts_t *o, mp_symbolizer_t *sym,
    const mp_profile_t *prof) {
	size_t nlife = 0;
	for (size_t i = 0; i < prof->nstacks; i++)
		nlife += mp_stack_label(&prof->stacks[i], "lifetime", 8) !=
		    NULL;
	if (nlife == 0) {
		mp_err("\"%s\" is not a lifetime profile (a %s profile%s%s%s "
		    "whose samples have no lifetime label): temporary reads "
		    "the profiles of prof.lifetimes.dump or GET "
		    "/debug/pprof/lifetimes", prof->file, prof->format,
		    prof->sample_types != NULL ? " of " : "",
		    prof->sample_types != NULL ? prof->sample_types : "",
		    prof->nstacks == 0 ? ", empty," : "");
		return MP_EXIT_USAGE;
	}
	int nshort = o->within == 1 ? 1 : o->within == 10 ? 2 :
	    o->within == 100 ? 3 : 4;
	const mp_stack_t **ord = mp_xcalloc(prof->nstacks, sizeof(*ord));
	for (size_t i = 0; i < prof->nstacks; i++)
		ord[i] = &prof->stacks[i];
	qsort(ord, prof->nstacks, sizeof(*ord), mp_stack_cmp);
	mp_life_row_t *rows = mp_xcalloc(prof->nstacks, sizeof(*rows));
	size_t nrows = 0;
	double all = 0, all_short = 0, live = 0, live_old = 0;
	bool aged = false;
	for (size_t i = 0; i < prof->nstacks; i++) {
		const mp_stack_t *s = ord[i];
		if (nrows == 0 || mp_stack_cmp(&ord[i], &rows[nrows - 1].s) != 0)
			rows[nrows++].s = s;
		mp_life_row_t *r = &rows[nrows - 1];
		const char *b = mp_stack_label(s, "lifetime", 8);
		int k = 0;
		while (b != NULL && k < MP_LIFE_NB &&
		    strcmp(b, mp_life_buckets[k]) != 0)
			k++;
		if (b == NULL || k == MP_LIFE_NB)
			continue;	/* not ours: counted nowhere */
		r->objs[k] += s->val[MP_ALLOC_OBJECTS];
		r->bytes[k] += s->val[MP_ALLOC_SPACE];
		if (k == MP_LIFE_NB - 1) {
			const char *age = mp_stack_label(s, "age", 3);
			live += s->val[MP_ALLOC_OBJECTS];
			aged |= age != NULL;
			if (age != NULL && strcmp(age, ">1s") == 0)
				live_old += s->val[MP_ALLOC_OBJECTS];
		}
		r->all_objs += s->val[MP_ALLOC_OBJECTS];
		if (k < nshort) {
			r->short_objs += s->val[MP_ALLOC_OBJECTS];
			r->short_bytes += s->val[MP_ALLOC_SPACE];
		}
		if (r->mean == NULL)
			r->mean = mp_stack_label(s, "lifetime_mean", 13);
	}
	for (size_t i = 0; i < nrows; i++) {
		all += rows[i].all_objs;
		all_short += rows[i].short_objs;
	}
	qsort(rows, nrows, sizeof(*rows), mp_life_row_cmp);
	size_t nshow = 0;
	while (nshow < nrows && rows[nshow].short_objs > 0 &&
	    (o->limit < 0 || nshow < (size_t)o->limit))
		nshow++;
	mp_report_t *names = mp_report_new();
	for (size_t i = 0; i < nshow; i++)
		rows[i].nids = mp_life_names(sym, prof, rows[i].s, names,
		    rows[i].ids);
	if (o->demangle)
		mp_demangle(names);
	FILE *f = mp_open_output(o->output);
	if (f == NULL) {
		mp_report_free(names);
		free(rows);
		free(ord);
		return MP_EXIT_USAGE;
	}
	const char *within = o->within == 1000 ? "1s" : o->within == 100 ?
	    "100ms" : o->within == 10 ? "10ms" : "1ms";
	fprintf(f, "%s: %.0f allocations (estimated from the samples), "
	    "%.0f (%.1f%%) freed within %s", prof->file, all, all_short,
	    all > 0 ? 100.0 * all_short / all : 0.0, within);
	/* Older profiles have no age on their live samples. */
	if (aged)
		fprintf(f, "; %.0f live, %.0f of them for more than 1s", live,
		    live_old);
	fprintf(f, "\n");
	fprintf(f, "%12s %7s %14s %12s %11s  %s\n", "temporary", "of site",
	    "temp bytes", "allocations", "mean life", "stack (innermost "
	    "first)");
	for (size_t i = 0; i < nshow; i++) {
		const mp_life_row_t *r = &rows[i];
		char mean[32] = "-";
		if (r->mean != NULL) {
			double ns = strtod(r->mean, NULL);
			if (ns < 1e3)
				snprintf(mean, sizeof(mean), "%.0fns", ns);
			else if (ns < 1e6)
				snprintf(mean, sizeof(mean), "%.1fus", ns / 1e3);
			else if (ns < 1e9)
				snprintf(mean, sizeof(mean), "%.1fms", ns / 1e6);
			else
				snprintf(mean, sizeof(mean), "%.2fs", ns / 1e9);
		}
		fprintf(f, "%12.0f %6.1f%% %14.0f %12.0f %11s ",
		    r->short_objs, 100.0 * r->short_objs / r->all_objs,
		    r->short_bytes, r->all_objs, mean);
		for (uint32_t k = 0; k < r->nids; k++)
			fprintf(f, "%s%s", k > 0 ? " < " : " ",
			    mp_report_name(names, r->ids[k]));
		fprintf(f, "%s\n", r->s->npcs > r->nids ? " < ..." : "");
	}
	if (nshow == 0 && (o->limit != 0 || nrows == 0))
		fprintf(f, "no sampled allocation was freed within %s\n",
		    within);
	mp_report_free(names);
	free(rows);
	free(ord);
	return mp_close_output(f, o->output) ? MP_EXIT_OK : MP_EXIT_USAGE;
}

static bool mp_compile(const char *opt, const char *re, regex_t *out) {
	int r = regcomp(out, re, REG_EXTENDED | REG_NOSUB);
	if (r != 0) {
		char buf[256];
		regerror(r, out, buf, sizeof(buf));
		mp_err("%s \"%s\": bad regular expression: %s", opt, re, buf);
		return false;
	}
	return true;
}

int mp_cmd_run(const mp_opts_t *o) {
	regex_t focus, ignore;
	bool have_focus = false, have_ignore = false;
	if (o->focus != NULL) {
		if (!mp_compile("--focus", o->focus, &focus))
			return MP_EXIT_USAGE;
		have_focus = true;
	}
	if (o->ignore != NULL) {
		if (!mp_compile("--ignore", o->ignore, &ignore)) {
			if (have_focus)
				regfree(&focus);
			return MP_EXIT_USAGE;
		}
		have_ignore = true;
	}
	int status = MP_EXIT_USAGE;
	mp_tag_t tag;
	mp_tag_init(&tag, o->tag);
	int nprof = o->nprofiles + (o->base != NULL);
	mp_profile_t *profs = mp_xcalloc((size_t)nprof, sizeof(*profs));
	int nread = 0;
	mp_symbolizer_t *sym = NULL;
	mp_report_t *rep = NULL;
	for (; nread < nprof; nread++) {
		const char *file = nread < o->nprofiles ?
		    o->profiles[nread] : o->base;
		if (!mp_profile_read(file, &profs[nread]))
			goto out;
	}
	/* pprof's functions carry file and line apart: always looked up. */
	sym = mp_sym_new(o->program, o->debug_dir,
	    o->lines || o->cmd == CMD_PPROF);
	if (o->cmd == CMD_INFO) {
		mp_cmd_info(o, sym, profs);
		status = MP_EXIT_OK;
		goto out;
	}
	if (o->cmd == CMD_TEMPORARY) {
		status = mp_cmd_temporary(o, sym, &profs[0]);
		goto out;
	}
	rep = mp_report_new();
	mp_pprof_out_t *pp = o->cmd == CMD_PPROF ? mp_pprof_out_new(sym) : NULL;
	for (int i = 0; i < nprof; i++)
		mp_add_profile(rep, sym, &profs[i], i < o->nprofiles ? 1 : -1,
		    o->thread, o->lines, &tag, pp);
	if (pp != NULL) {
		status = mp_pprof_write_file(o, pp, profs[0].period);
		mp_pprof_out_free(pp);
		goto out;
	}
	if (o->demangle)
		mp_demangle(rep);
	if (!mp_report_finish(rep, o->which, have_focus ? &focus : NULL,
	    have_ignore ? &ignore : NULL))
		goto out;
	bool bytes = o->which == MP_INUSE_SPACE || o->which == MP_ALLOC_SPACE;

	if (o->cmd == CMD_SVG) {
		status = mp_run_dot(o, rep, bytes);
		goto out;
	}
	FILE *f = mp_open_output(o->output);
	if (f == NULL)
		goto out;
	status = MP_EXIT_OK;
	switch (o->cmd) {
	case CMD_TOP:
	case CMD_DIFF:
		if (tag.key != NULL && tag.value == NULL) {
			bool *is_tag = mp_xcalloc(mp_report_nnames(rep) + 1,
			    sizeof(*is_tag));
			for (size_t k = 0; k < tag.nids; k++)
				is_tag[tag.ids[k]] = true;
			mp_out_top_tag(rep, f, o->limit, bytes, is_tag,
			    o->tag);
			free(is_tag);
		} else {
			mp_out_top(rep, f, o->limit, bytes);
		}
		break;
	case CMD_COLLAPSED:
		mp_out_collapsed(rep, f);
		break;
	case CMD_FLAMEGRAPH: {
		char title[512];
		if (o->title == NULL) {
			snprintf(title, sizeof(title), "%s: %s%s%s",
			    o->profiles[0],
			    o->which == MP_INUSE_SPACE ? "bytes in use" :
			    o->which == MP_INUSE_OBJECTS ? "objects in use" :
			    o->which == MP_ALLOC_SPACE ? "bytes allocated" :
			    "objects allocated", o->base ? ", growth since " :
			    "", o->base ? o->base : "");
		}
		mp_out_flamegraph(rep, f, o->title ? o->title : title, bytes);
		break;
	}
	case CMD_DOT:
		mp_out_dot(rep, f, o->limit < 0 ? 80 : o->limit, bytes);
		break;
	case CMD_LEAKS: {
		int64_t total = mp_report_total(rep);
		const mp_sample_t *s;
		size_t n = mp_report_samples(rep, &s);
		if (total > 0 && (uint64_t)total > o->max_bytes) {
			fprintf(f, "%" PRId64 " bytes in use in %zu stacks, "
			    "more than the %" PRIu64 " allowed (--max-bytes):\n",
			    total, n, o->max_bytes);
			mp_out_leaks(rep, f, o->limit);
			status = MP_EXIT_LEAKS;
		} else {
			fprintf(f, "%" PRId64 " bytes in use, within the %"
			    PRIu64 " allowed (--max-bytes)\n", total > 0 ?
			    total : 0, o->max_bytes);
		}
		break;
	}
	default:
		break;
	}
	if (!mp_close_output(f, o->output))
		status = MP_EXIT_USAGE;
out:
	if (rep != NULL)
		mp_report_free(rep);
	if (sym != NULL)
		mp_sym_free(sym);
	for (int i = 0; i < nread; i++)
		mp_profile_free(&profs[i]);
	free(profs);
	free(tag.ids);
	if (have_focus)
		regfree(&focus);
	if (have_ignore)
		regfree(&ignore);
	return status;
}
