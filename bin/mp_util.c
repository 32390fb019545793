/*
 * bin/mp_util.c - what every file of malloc-prof uses: its one-line
 * messages, allocations that end the run when memory runs out, and string
 * copies.  It depends on no other file of the tool, so the others (and the
 * fuzz targets built from them, test/fuzz/bin_stubs.c) can all use it.
 */
#include "malloc-prof.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *mp_progname = "malloc-prof";

/* ---- messages: one line, "malloc-prof: " first */
static void mp_vmsg(const char *fmt, va_list ap) {
	fflush(stdout);
	fprintf(stderr, "%s: ", mp_progname);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* Weak: the fuzz targets' stubs (test/fuzz/bin_stubs.c) define their own,
 * which count the messages and check that each is one line instead of
 * printing them. */
__attribute__((weak)) void mp_err(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_vmsg(fmt, ap);
	va_end(ap);
}

__attribute__((weak)) void mp_warn(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_vmsg(fmt, ap);
	va_end(ap);
}

/* ---- memory: running out is reported and ends the run */
static void *mp_oom(size_t n) {
	mp_err("out of memory (%zu bytes): the profile or the symbol tables "
	    "are too large for this machine", n);
	exit(MP_EXIT_USAGE);
}

void *mp_xmalloc(size_t n) {
	void *p = malloc(n ? n : 1);
	return p ? p : mp_oom(n);
}

void *mp_xcalloc(size_t n, size_t size) {
	void *p = calloc(n ? n : 1, size ? size : 1);
	return p ? p : mp_oom(n * size);
}

void *mp_xrealloc(void *p, size_t n) {
	void *q = realloc(p, n ? n : 1);
	return q ? q : mp_oom(n);
}

/* ---- strings */
char *mp_xstrdup(const char *s) {
	return mp_xstrndup(s, strlen(s));
}

char *mp_xstrndup(const char *s, size_t n) {
	char *p = mp_xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void mp_printable(char *s) {
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}
