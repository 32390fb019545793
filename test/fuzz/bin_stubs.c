/*
 * test/fuzz/bin_stubs.c - the messages of malloc-prof's readers, for
 * their fuzz targets (heap_v2, pprof, elf, dwarf), and the checks on a
 * profile read.  The targets are built from the tool's files, mp_util.c
 * included; these mp_err and mp_warn take the place of its weak ones.
 *
 * Messages are not printed: each is formatted and checked to be one line
 * (the tool's errors are one line each, "malloc-prof: ..."), and counted
 * in fuzz_nerrs / fuzz_nwarns for the targets' checks.  Running out of
 * memory is mp_util.c's to report: libFuzzer's malloc limit reports a too
 * large allocation before that.
 */
#include "malloc-prof.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bin_stubs.h"

unsigned fuzz_nerrs, fuzz_nwarns;

static void fuzz_msg(const char *fmt, va_list ap) {
	char line[4096];
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	/* One line, not empty: a line end inside would split it. */
	if (n <= 0 || strpbrk(line, "\n\r") != NULL)
		abort();
}

void mp_err(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fuzz_msg(fmt, ap);
	va_end(ap);
	fuzz_nerrs++;
}

void mp_warn(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fuzz_msg(fmt, ap);
	va_end(ap);
	fuzz_nwarns++;
}

/* ---- the checks on a profile read without error */

#include <math.h>
#include <stdio.h>

/* A count the readers let through: within MP_COUNT_MAX, whatever its
 * sign. */
static void fuzz_check_count(double v) {
	if (!(fabs(v) <= (double)MP_COUNT_MAX))
		abort();
}

/* Every report on P minus P (its stacks named apart, below one common
 * root: the largest positive and negative sums two profiles can make)
 * adds up without failing (mp_report_finish) or overflowing (UBSan). */
static void fuzz_check_report(const mp_profile_t *p) {
	static FILE *null;
	if (null == NULL && (null = fopen("/dev/null", "w")) == NULL)
		abort();
	mp_report_t *rep = mp_report_new();
	uint32_t frames[8];
	for (int sign = 1; sign >= -1; sign -= 2) {
		for (size_t i = 0; i < p->nstacks; i++) {
			const mp_stack_t *s = &p->stacks[i];
			uint32_t n = 1;
			frames[0] = mp_report_intern(rep, "root");
			/* Few names: stacks merge, rows add many up. */
			for (uint32_t k = 0; k < s->npcs && n < 8; k++, n++) {
				char name[32];
				snprintf(name, sizeof(name), "%c%u",
				    sign > 0 ? 'p' : 'b',
				    (unsigned)(s->pcs[k] % 16));
				frames[n] = mp_report_intern(rep, name);
			}
			mp_report_add(rep, frames, n, s->val, sign);
		}
	}
	if (!mp_report_finish(rep, MP_INUSE_SPACE, NULL, NULL))
		abort();
	mp_out_top(rep, null, -1, true);
	mp_out_collapsed(rep, null);
	mp_out_leaks(rep, null, -1);
	mp_out_flamegraph(rep, null, "fuzz", true);
	mp_out_dot(rep, null, 80, true);
	mp_report_free(rep);
}

/* A string the tool prints in a line: no control characters. */
static void fuzz_check_str(const char *s) {
	if (s == NULL)
		abort();
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			abort();
}

void fuzz_check_profile(const mp_profile_t *p, bool ok) {
	/* A read says what is wrong in exactly one line, or nothing. */
	if (fuzz_nerrs != (ok ? 0u : 1u))
		abort();
	if (!ok)
		return;
	bool heap_v2 = p->format != NULL && strcmp(p->format, "heap_v2") == 0;
	if (p->format == NULL || (heap_v2 && !p->have_total))
		abort();
	if ((p->nstacks != 0 && p->stacks == NULL) ||
	    (p->nthreads != 0 && p->threads == NULL) ||
	    (p->nmaps != 0 && p->maps == NULL) ||
	    (p->nfnames != 0 && p->fnames == NULL))
		abort();
	if (p->sample_types != NULL)
		fuzz_check_str(p->sample_types);
	for (size_t i = 0; i < p->nthreads; i++) {
		fuzz_check_str(p->threads[i].name);
		if (p->threads[i].uid == UINT64_MAX)
			abort();
	}
	for (size_t i = 0; i < p->nfnames; i++) {
		fuzz_check_str(p->fnames[i].name);
		fuzz_check_str(p->fnames[i].file);
		if (p->fnames[i].name[0] == '\0')
			abort();
	}
	for (size_t i = 0; i < p->nmaps; i++) {
		const mp_mapping_t *m = &p->maps[i];
		fuzz_check_str(m->path);
		if (m->build_id != NULL)
			fuzz_check_str(m->build_id);
		if (m->perms[4] != '\0' ||
		    (i > 0 && p->maps[i - 1].start > m->start) ||
		    (heap_v2 && m->end < m->start))
			abort();
	}
	double total[MP_NVALUES] = { 0 };
	for (size_t i = 0; i < p->nstacks; i++) {
		const mp_stack_t *s = &p->stacks[i];
		/* Every stack has frames, and every frame index names a
		 * function of the profile (or none: UINT32_MAX). */
		if (s->npcs == 0 || s->pcs == NULL || (heap_v2 && s->fn != NULL))
			abort();
		for (uint32_t k = 0; s->fn != NULL && k < s->npcs; k++)
			if (s->fn[k] != UINT32_MAX && s->fn[k] >= p->nfnames)
				abort();
		/* heap_v2: each stack had its t* line before any tN. */
		if (heap_v2 && s->raw.v[0] == UINT64_MAX)
			abort();
		if (s->nthreads != 0 && s->threads == NULL)
			abort();
		for (int k = 0; k < MP_NVALUES; k++)
			if (!isfinite(s->val[k]) || (heap_v2 && s->val[k] < 0))
				abort();
		/* Counts as printed and unbiased (--thread's too), each and
		 * the stacks' total, within MP_COUNT_MAX. */
		for (int k = 0; k < MP_NVALUES; k++) {
			fuzz_check_count(s->val[k]);
			fuzz_check_count((double)s->raw.v[k]);
			total[k] += fabs(s->val[k]);
			fuzz_check_count(total[k]);
		}
		for (uint32_t t = 0; t < s->nthreads; t++) {
			double tval[MP_NVALUES];
			mp_unbias_cnt(p->period, &s->threads[t].cnt, tval);
			for (int k = 0; k < MP_NVALUES; k++)
				fuzz_check_count(tval[k]);
		}
		for (uint32_t k = 0; k < s->npcs; k++) {
			const mp_mapping_t *m = mp_profile_mapping(p, s->pcs[k]);
			if (m != NULL && (s->pcs[k] < m->start ||
			    s->pcs[k] >= m->end))
				abort();
		}
	}
	fuzz_check_report(p);
}
