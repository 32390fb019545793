/*
 * test/fuzz/http_request.c - libFuzzer target: the scrape endpoint's
 * request parser (src/prof/prof_http.c, prof_http_parse_request: request
 * line, headers, Content-Length; path and query by the route table,
 * prof_http_route_match in src/prof/prof_http_routes.c).
 *
 * Each input is the bytes a client sent (at most the server's 8192, as
 * it reads them).  Nothing may crash or read out of bounds, and the
 * parse must be one the server can act on: a known route, an error with
 * status 400, 404 or 405 (405 naming the methods allowed) and a one-line
 * printable message, a head length inside the input ending in its empty
 * line, a POST body length within the server's limit; and it must not
 * depend on when the bytes arrived: whatever was decided on a prefix
 * (the server answers as soon as it can) is what the whole input gives,
 * and a complete head gives the same without what follows it.  Built
 * and run by scripts/fuzz.sh (doc/reliability.md).
 */
#include "malloc_prof/internal/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REQ_MAX 8192	/* PROF_HTTP_REQ_MAX */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *buf, size_t len, const prof_http_req_t *r) {
	switch (r->route) {
	case PROF_HTTP_MORE:
		if (len >= REQ_MAX || r->head_len != 0)
			abort();
		return;
	case PROF_HTTP_ERROR:
		if ((r->status != 400 && r->status != 404 && r->status != 405) ||
		    (r->status == 405) != (r->allow != NULL) || r->why[0] == '\0')
			abort();
		for (const char *p = r->why; *p != '\0'; p++)
			if (*p < 0x20 || *p > 0x7e)
				abort();
		break;
	case PROF_HTTP_SYMBOL_POST:
		if (r->clen > 65536)
			abort();
		/* fall through */
	case PROF_HTTP_HEAP:
	case PROF_HTTP_ALLOCS:
		/* A delta's window: 1 to 300 s, pprof only. */
		if (r->seconds > 300 || (r->seconds != 0 && (r->debug ||
		    r->heap_v2)))
			abort();
		/* fall through */
	case PROF_HTTP_PEAK:
	case PROF_HTTP_LIFETIMES:
	case PROF_HTTP_FRAGMENTATION:
	case PROF_HTTP_STATS:
	case PROF_HTTP_SYMBOL_GET:
	case PROF_HTTP_INDEX:
		if (r->head_len == 0 || (r->route != PROF_HTTP_HEAP &&
		    r->route != PROF_HTTP_ALLOCS && r->seconds != 0))
			abort();
		break;
	default:
		abort();
	}
	if (r->head_len > len || (r->head_len != 0 &&
	    (r->head_len < 2 || buf[r->head_len - 1] != '\n')))
		abort();
}

/* The same answer (an error's head length, 0 when decided on the first
 * line, is not part of it). */
static bool same(const prof_http_req_t *a, const prof_http_req_t *b) {
	return a->route == b->route && a->status == b->status &&
	    a->allow == b->allow && strcmp(a->why, b->why) == 0 &&
	    (a->route == PROF_HTTP_ERROR || a->head_len == b->head_len) &&
	    a->heap_v2 == b->heap_v2 && a->clen == b->clen &&
	    a->debug == b->debug && a->seconds == b->seconds;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size > REQ_MAX)
		size = REQ_MAX;
	/* A copy of its own size: ASan catches a read past the end. */
	char *buf = malloc(size ? size : 1);
	if (buf == NULL)
		abort();
	memcpy(buf, data, size);
	prof_http_req_t whole, part;
	prof_http_parse_request(buf, size, REQ_MAX,
	    prof_http_route_match, &whole);
	check(buf, size, &whole);
	/* The head alone gives the same. */
	if (whole.head_len != 0) {
		prof_http_parse_request(buf, whole.head_len, REQ_MAX,
		    prof_http_route_match, &part);
		if (!same(&part, &whole))
			abort();
	}
	/* What was decided on a prefix stands. */
	size_t cuts[] = { size / 2, size - (size > 0), whole.head_len / 2 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		prof_http_parse_request(buf, cuts[i], REQ_MAX,
		    prof_http_route_match, &part);
		check(buf, cuts[i], &part);
		if (part.route != PROF_HTTP_MORE && !same(&part, &whole))
			abort();
	}
	free(buf);
	return 0;
}
