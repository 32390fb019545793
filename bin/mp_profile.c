/*
 * bin/mp_profile.c - the heap_v2 reader of malloc-prof: the dumps written
 * by libmalloc_prof and by jemalloc (doc/profiling.md, "The dump format").
 * mp_profile_read tells them from pprof profiles by content and hands
 * those to mp_pprof.c, which fills the same model.
 *
 * A dump is a header `heap_v2/R`, the process total `t*:` and one line per
 * thread, then one `@ pc...` block per stack with its `t*:` and `tN:`
 * lines, then a blank line, `MAPPED_LIBRARIES:` and /proc/PID/maps.  The
 * reader is strict about what it needs (numbers, the order of the lines)
 * and says which line is wrong, because a damaged profile must not turn
 * into plausible-looking numbers.  It is independent of the test-side
 * reader in test/test_util.h on purpose: the product cannot depend on test
 * code, and the two check each other.
 *
 * Counts are unbiased exactly as jeprof does for heap_v2 (AdjustSamples):
 * each stack line (n, s) is multiplied by 1 / (1 - e^(-(s/n)/R)).  Our
 * profiler and jemalloc both print lines pre-transformed so that this
 * scaling gives the unbiased totals; raw counts (jemalloc's
 * prof_unbias:false, older versions) get jeprof's classic estimate.
 * A count past MP_COUNT_MAX (2^62), as printed or unbiased, or stacks
 * adding up past it, cannot come from a heap: the line is damage, and
 * refusing it keeps every later sum within int64_t.
 */
#include "malloc-prof.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The reader's cursor: one line at a time, never past END. */
typedef struct {
	const char *file;
	const char *p, *end;
	const char *line, *eol;	/* current line, without its '\n' */
	size_t lineno;
	bool complete;		/* the current line ended with '\n' */
} mp_cursor_t;

static bool mp_next_line(mp_cursor_t *c) {
	if (c->p >= c->end)
		return false;
	c->line = c->p;
	const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	c->complete = nl != NULL;
	c->eol = nl ? nl : c->end;
	c->p = nl ? nl + 1 : c->end;
	c->lineno++;
	/* A CR before the newline (a file passed through Windows) is
	 * harmless: jeprof drops it too. */
	if (c->eol > c->line && c->eol[-1] == '\r')
		c->eol--;
	return true;
}

static void mp_bad_line(const mp_cursor_t *c, const char *what) {
	int len = (int)(c->eol - c->line);
	if (len > 60)
		len = 60;
	/* The excerpt, printable: the error stays one line. */
	char found[61];
	memcpy(found, c->line, (size_t)len);
	found[len] = '\0';
	mp_printable(found);
	if (!c->complete) {
		mp_err("\"%s\" is truncated at line %zu (the last line is "
		    "incomplete): the dump was cut short; take it again",
		    c->file, c->lineno);
		return;
	}
	mp_err("\"%s\" line %zu: expected %s, found \"%s\": the profile is "
	    "damaged; take the dump again", c->file, c->lineno, what, found);
}

/* Decimal or (HEX) hexadecimal number at *S, at most up to END. */
static bool mp_parse_u64(const char **s, const char *end, bool hex,
    uint64_t *out) {
	const char *p = *s;
	uint64_t v = 0;
	int ndigits = 0;
	for (; p < end; p++, ndigits++) {
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (hex && *p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (hex && *p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			break;
		uint64_t base = hex ? 16 : 10;
		if (v > (UINT64_MAX - d) / base)
			return false;	/* overflow: not a count we wrote */
		v = v * base + d;
	}
	if (ndigits == 0)
		return false;
	*s = p;
	*out = v;
	return true;
}

static const char *mp_skip_spaces(const char *p, const char *end) {
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static bool mp_expect(const char **s, const char *end, const char *lit) {
	size_t n = strlen(lit);
	if ((size_t)(end - *s) < n || memcmp(*s, lit, n) != 0)
		return false;
	*s += n;
	return true;
}

/*
 * A counter line "  tID: objs: bytes [aobjs: abytes][ name]".  *UID is
 * UINT64_MAX for t*.  Spacing is taken loosely (as jeprof does); the
 * numbers and punctuation are not.
 */
static bool mp_parse_cnt(const mp_cursor_t *c, uint64_t *uid, mp_cnt_t *cnt,
    const char **rest) {
	const char *p = mp_skip_spaces(c->line, c->eol), *e = c->eol;
	if (!mp_expect(&p, e, "t"))
		return false;
	if (p < e && *p == '*') {
		*uid = UINT64_MAX;
		p++;
	} else if (!mp_parse_u64(&p, e, false, uid)) {
		return false;
	}
	if (!mp_expect(&p, e, ":"))
		return false;
	p = mp_skip_spaces(p, e);
	if (!mp_parse_u64(&p, e, false, &cnt->v[MP_INUSE_OBJECTS]) ||
	    !mp_expect(&p, e, ":"))
		return false;
	p = mp_skip_spaces(p, e);
	if (!mp_parse_u64(&p, e, false, &cnt->v[MP_INUSE_SPACE]))
		return false;
	p = mp_skip_spaces(p, e);
	if (!mp_expect(&p, e, "["))
		return false;
	p = mp_skip_spaces(p, e);
	if (!mp_parse_u64(&p, e, false, &cnt->v[MP_ALLOC_OBJECTS]) ||
	    !mp_expect(&p, e, ":"))
		return false;
	p = mp_skip_spaces(p, e);
	if (!mp_parse_u64(&p, e, false, &cnt->v[MP_ALLOC_SPACE]))
		return false;
	p = mp_skip_spaces(p, e);
	if (!mp_expect(&p, e, "]"))
		return false;
	*rest = p;
	return true;
}

void mp_unbias(uint64_t period, uint64_t objs, uint64_t bytes, double *uobjs,
    double *ubytes) {
	double n = (double)objs, s = (double)bytes;
	/* jeprof skips pairs with no objects; R = 0 never comes from a
	 * profiler, but must not divide by zero. */
	if (objs != 0 && period != 0) {
		double ratio = (s / n) / (double)period;
		double scale = 1.0 / (1.0 - exp(-ratio));
		if (isfinite(scale)) {
			n *= scale;
			s *= scale;
		}
	}
	*uobjs = n;
	*ubytes = s;
}

void mp_unbias_cnt(uint64_t period, const mp_cnt_t *cnt, double *val) {
	mp_unbias(period, cnt->v[MP_INUSE_OBJECTS], cnt->v[MP_INUSE_SPACE],
	    &val[MP_INUSE_OBJECTS], &val[MP_INUSE_SPACE]);
	mp_unbias(period, cnt->v[MP_ALLOC_OBJECTS], cnt->v[MP_ALLOC_SPACE],
	    &val[MP_ALLOC_OBJECTS], &val[MP_ALLOC_SPACE]);
}

static const char *const mp_value_names[MP_NVALUES] = {
	[MP_INUSE_OBJECTS] = "objects in use",
	[MP_INUSE_SPACE] = "bytes in use",
	[MP_ALLOC_OBJECTS] = "objects allocated",
	[MP_ALLOC_SPACE] = "bytes allocated",
};

/* A counter line's numbers as printed: more than MP_COUNT_MAX is not a
 * count a heap can have, and would wrap the sums. */
static bool mp_check_raw(const mp_cursor_t *c, const mp_cnt_t *cnt) {
	for (int k = 0; k < MP_NVALUES; k++) {
		if (cnt->v[k] <= MP_COUNT_MAX)
			continue;
		mp_err("\"%s\" line %zu: %" PRIu64 " %s cannot be real (more "
		    "than 2^62): the profile is damaged; take the dump again",
		    c->file, c->lineno, cnt->v[k], mp_value_names[k]);
		return false;
	}
	return true;
}

/* A stack line's unbiased values VAL (a small average size at a large
 * period scales a lot), added to TOTAL (the stacks so far; NULL for a
 * thread's line, which is part of its stack's). */
static bool mp_check_unbiased(const mp_cursor_t *c, uint64_t period,
    const double *val, double *total) {
	for (int k = 0; k < MP_NVALUES; k++) {
		/* Written so that NaN fails too. */
		if (!(val[k] <= (double)MP_COUNT_MAX)) {
			mp_err("\"%s\" line %zu: the counts unbias to %.3g %s "
			    "at sample period %" PRIu64 ", which cannot be real "
			    "(more than 2^62): the profile is damaged; take the "
			    "dump again", c->file, c->lineno, val[k],
			    mp_value_names[k], period);
			return false;
		}
		if (total == NULL)
			continue;
		total[k] += val[k];
		if (total[k] > (double)MP_COUNT_MAX) {
			mp_err("\"%s\" line %zu: the stacks up to this line "
			    "hold more than 2^62 %s, which cannot be real: the "
			    "profile is damaged; take the dump again", c->file,
			    c->lineno, mp_value_names[k]);
			return false;
		}
	}
	return true;
}

/* One /proc/PID/maps line: "start-end perms offset dev inode   path". */
static bool mp_parse_map(const mp_cursor_t *c, mp_mapping_t *m) {
	const char *p = c->line, *e = c->eol;
	if (!mp_parse_u64(&p, e, true, &m->start) || !mp_expect(&p, e, "-") ||
	    !mp_parse_u64(&p, e, true, &m->end) || m->end < m->start)
		return false;
	p = mp_skip_spaces(p, e);
	if (e - p < 4)
		return false;
	memcpy(m->perms, p, 4);
	m->perms[4] = '\0';
	p = mp_skip_spaces(p + 4, e);
	if (!mp_parse_u64(&p, e, true, &m->offset))
		return false;
	p = mp_skip_spaces(p, e);
	while (p < e && *p != ' ' && *p != '\t')	/* device */
		p++;
	p = mp_skip_spaces(p, e);
	if (!mp_parse_u64(&p, e, false, &m->inode))
		return false;
	p = mp_skip_spaces(p, e);
	size_t len = (size_t)(e - p);
	static const char deleted[] = " (deleted)";
	m->deleted = false;
	if (len >= sizeof(deleted) - 1 &&
	    memcmp(e - (sizeof(deleted) - 1), deleted, sizeof(deleted) - 1) == 0) {
		m->deleted = true;
		len -= sizeof(deleted) - 1;
	}
	m->path = mp_xstrndup(p, len);
	mp_printable(m->path);	/* shown in warnings (maps escapes them) */
	return true;
}

static int mp_map_cmp(const void *a, const void *b) {
	const mp_mapping_t *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

const mp_mapping_t *mp_profile_mapping(const mp_profile_t *prof, uint64_t pc) {
	size_t lo = 0, hi = prof->nmaps;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (prof->maps[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const mp_mapping_t *m = &prof->maps[lo - 1];
	return pc < m->end ? m : NULL;
}

static bool mp_profile_parse(mp_cursor_t *c, mp_profile_t *prof) {
	size_t cap_stacks = 0, cap_threads = 0, cap_maps = 0;
	uint64_t uid;
	mp_cnt_t cnt;
	double total[MP_NVALUES] = { 0 };	/* the stacks' unbiased values */
	const char *rest;

	if (!mp_next_line(c))
		goto not_heap;
	{
		const char *p = c->line;
		if (!mp_expect(&p, c->eol, "heap_v2/"))
			goto not_heap;
		if (!mp_parse_u64(&p, c->eol, false, &prof->period) ||
		    mp_skip_spaces(p, c->eol) != c->eol) {
			mp_bad_line(c, "\"heap_v2/<sample period>\"");
			return false;
		}
	}

	/* Header: the process total and the threads. */
	mp_stack_t *cur = NULL;
	bool in_maps = false;
	while (mp_next_line(c)) {
		const char *p = mp_skip_spaces(c->line, c->eol);
		if (in_maps) {
			if (p == c->eol)
				continue;
			mp_mapping_t m = { 0 };
			if (!mp_parse_map(c, &m)) {
				/* jeprof also accepts other lines here
				 * (build=...); what is not a maps line cannot
				 * name a file, so it is skipped. */
				if (!c->complete)
					goto truncated;
				continue;
			}
			if (!c->complete) {
				free(m.path);
				goto truncated;
			}
			if (prof->nmaps == cap_maps) {
				cap_maps = cap_maps ? 2 * cap_maps : 64;
				prof->maps = mp_xrealloc(prof->maps,
				    cap_maps * sizeof(*prof->maps));
			}
			prof->maps[prof->nmaps++] = m;
			continue;
		}
		if (p == c->eol) {
			if (!c->complete)
				goto truncated;
			continue;
		}
		if (mp_expect(&p, c->eol, "MAPPED_LIBRARIES:")) {
			if (cur != NULL && cur->raw.v[0] == UINT64_MAX)
				goto missing_total;
			in_maps = true;
			prof->have_maps = true;
			continue;
		}
		if (*p == '@') {
			if (!c->complete)
				goto truncated;
			if (cur != NULL && cur->raw.v[0] == UINT64_MAX)
				goto missing_total;
			if (prof->nstacks == cap_stacks) {
				cap_stacks = cap_stacks ? 2 * cap_stacks : 256;
				prof->stacks = mp_xrealloc(prof->stacks,
				    cap_stacks * sizeof(*prof->stacks));
			}
			cur = &prof->stacks[prof->nstacks++];
			memset(cur, 0, sizeof(*cur));
			cur->raw.v[0] = UINT64_MAX;	/* no t* line yet */
			size_t cap = 0;
			p++;
			for (;;) {
				p = mp_skip_spaces(p, c->eol);
				if (p == c->eol)
					break;
				uint64_t pc;
				if (!mp_expect(&p, c->eol, "0x") ||
				    !mp_parse_u64(&p, c->eol, true, &pc) ||
				    (p < c->eol && *p != ' ' && *p != '\t')) {
					mp_bad_line(c, "\"@ 0x<address> ...\"");
					return false;
				}
				if (cur->npcs == cap) {
					cap = cap ? 2 * cap : 16;
					cur->pcs = mp_xrealloc(cur->pcs,
					    cap * sizeof(*cur->pcs));
				}
				cur->pcs[cur->npcs++] = pc;
			}
			if (cur->npcs == 0) {
				mp_bad_line(c, "\"@ 0x<address> ...\"");
				return false;
			}
			continue;
		}
		if (!mp_parse_cnt(c, &uid, &cnt, &rest)) {
			mp_bad_line(c, "\"  t<thread>: <objects>: <bytes> "
			    "[<objects>: <bytes>]\"");
			return false;
		}
		if (!c->complete)
			goto truncated;
		if (!mp_check_raw(c, &cnt))
			return false;
		if (cur == NULL) {
			/* Header lines: t* then the threads, with names. */
			if (uid == UINT64_MAX) {
				prof->total = cnt;
				prof->have_total = true;
				continue;
			}
			if (prof->nthreads == cap_threads) {
				cap_threads = cap_threads ? 2 * cap_threads : 16;
				prof->threads = mp_xrealloc(prof->threads,
				    cap_threads * sizeof(*prof->threads));
			}
			mp_thread_t *t = &prof->threads[prof->nthreads++];
			t->uid = uid;
			t->cnt = cnt;
			rest = mp_skip_spaces(rest, c->eol);
			t->name = mp_xstrndup(rest, (size_t)(c->eol - rest));
			mp_printable(t->name);
			continue;
		}
		if (uid == UINT64_MAX) {
			if (cur->raw.v[0] != UINT64_MAX) {
				mp_bad_line(c, "one \"t*:\" line per stack");
				return false;
			}
			cur->raw = cnt;
			mp_unbias_cnt(prof->period, &cnt, cur->val);
			if (!mp_check_unbiased(c, prof->period, cur->val, total))
				return false;
		} else if (cur->raw.v[0] == UINT64_MAX) {
			mp_bad_line(c, "the stack's \"t*:\" line first");
			return false;
		}
		if (uid != UINT64_MAX) {
			/* Kept for --thread (most stacks have one or two),
			 * which unbiases it as the stack's line. */
			double tval[MP_NVALUES];
			mp_unbias_cnt(prof->period, &cnt, tval);
			if (!mp_check_unbiased(c, prof->period, tval, NULL))
				return false;
			cur->threads = mp_xrealloc(cur->threads,
			    (cur->nthreads + 1) * sizeof(*cur->threads));
			cur->threads[cur->nthreads++] = (mp_tcnt_t){ uid, cnt };
		}
	}
	if (cur != NULL && cur->raw.v[0] == UINT64_MAX)
		goto truncated;
	if (!prof->have_total) {
		mp_err("\"%s\" has no \"t*:\" total line after its heap_v2 "
		    "header: the profile is damaged or truncated; take the dump "
		    "again", c->file);
		return false;
	}
	if (prof->nmaps > 0)
		qsort(prof->maps, prof->nmaps, sizeof(*prof->maps), mp_map_cmp);
	return true;

not_heap:
	if (c->end - c->line >= 2 && (unsigned char)c->line[0] == 0x1f &&
	    (unsigned char)c->line[1] == 0x8b) {
		mp_err("\"%s\" is gzip-compressed (a pprof profile?): only "
		    "heap_v2 dumps can be read so far; give a dump written by "
		    "malloc_prof or jemalloc (prof.dump, prof_final)", c->file);
		return false;
	}
	mp_err("\"%s\" is not a heap profile: it does not start with "
	    "\"heap_v2/\" and is not a pprof profile; give a dump written by "
	    "malloc_prof or jemalloc (prof.dump, prof_final) or a pprof heap "
	    "profile", c->file);
	return false;
missing_total:
	mp_err("\"%s\" line %zu: the stack before this line has no \"t*:\" "
	    "line: the profile is damaged; take the dump again", c->file,
	    c->lineno);
	return false;
truncated:
	mp_err("\"%s\" is truncated at line %zu: the dump was cut short; take "
	    "it again", c->file, c->lineno);
	return false;
}

bool mp_profile_read(const char *file, mp_profile_t *prof) {
	memset(prof, 0, sizeof(*prof));
	prof->file = file;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		mp_err("cannot open \"%s\": %s", file, strerror(errno));
		return false;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		mp_err("cannot read \"%s\": %s", file,
		    errno ? strerror(errno) : "not a regular file");
		close(fd);
		return false;
	}
	if (st.st_size == 0) {
		mp_err("\"%s\" is empty: the dump was not written (disk full? "
		    "profiling off?); take it again", file);
		close(fd);
		return false;
	}
	/* Mapped read-only: the reader copies out only what it keeps. */
	void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd,
	    0);
	close(fd);
	if (data == MAP_FAILED) {
		mp_err("cannot read \"%s\": %s", file, strerror(errno));
		return false;
	}
	bool ok = mp_profile_read_mem(file, data, (size_t)st.st_size, prof);
	munmap(data, (size_t)st.st_size);
	return ok;
}

bool mp_profile_read_mem(const char *file, const uint8_t *data, size_t size,
    mp_profile_t *prof) {
	memset(prof, 0, sizeof(*prof));
	prof->file = file;
	/* By content, not by name: a heap_v2 dump is text starting with
	 * its header; anything else that walks as a protobuf Profile (or is
	 * gzipped) is read as pprof. */
	bool ok;
	if (size >= 8 && memcmp(data, "heap_v2/", 8) != 0 &&
	    mp_pprof_detect(data, size)) {
		ok = mp_pprof_read(file, data, size, prof);
	} else {
		mp_cursor_t c = { .file = file, .p = (const char *)data,
			.end = (const char *)data + size,
			.line = (const char *)data };
		prof->format = "heap_v2";
		ok = mp_profile_parse(&c, prof);
	}
	if (!ok)
		mp_profile_free(prof);
	return ok;
}

void mp_profile_free(mp_profile_t *prof) {
	for (size_t i = 0; i < prof->nthreads; i++)
		free(prof->threads[i].name);
	for (size_t i = 0; i < prof->nstacks; i++) {
		free(prof->stacks[i].pcs);
		free(prof->stacks[i].fn);
		free(prof->stacks[i].threads);
		for (uint32_t k = 0; k < prof->stacks[i].nlabels; k++) {
			free(prof->stacks[i].labels[k].key);
			free(prof->stacks[i].labels[k].value);
		}
		free(prof->stacks[i].labels);
	}
	for (size_t i = 0; i < prof->nfnames; i++) {
		free(prof->fnames[i].name);
		free(prof->fnames[i].file);
	}
	for (size_t i = 0; i < prof->nmaps; i++) {
		free(prof->maps[i].path);
		free(prof->maps[i].build_id);
	}
	free(prof->threads);
	free(prof->stacks);
	free(prof->fnames);
	free(prof->maps);
	free(prof->sample_types);
	memset(prof, 0, sizeof(*prof));
}

bool mp_file_is_elf(const char *file) {
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	char magic[4];
	bool elf = read(fd, magic, 4) == 4 && memcmp(magic, "\177ELF", 4) == 0;
	close(fd);
	return elf;
}
