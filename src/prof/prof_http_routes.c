/*
 * prof_http_routes.c: what the scrape endpoint serves, apart from how it
 * serves it (prof_http.c: sockets, the poll loop, framing, sending).
 *
 *   GET /debug/pprof/         the index of what is served: HTML, and
 *                             with ?debug=1 a tab-separated text form
 *   GET /debug/pprof/heap     the pprof profile (?format=heap_v2 or
 *                             ?debug=1: jeprof's text)
 *   GET /debug/pprof/allocs   the same, alloc_space by default
 *                             (needs prof_accum)
 *   GET /debug/pprof/peak     the peak-heap profile (prof_peak), as heap
 *   GET /debug/pprof/lifetimes  the lifetime profile (prof_lifetime.c),
 *                             pprof only
 *   GET /debug/pprof/fragmentation  the fragmentation profile
 *                             (prof_frag.c), pprof only
 *   ?seconds=N on heap, allocs: the delta of the next N seconds, as Go's
 *                             net/http/pprof serves it (below)
 *   GET /debug/malloc/stats   malloc_stats_print's JSON
 *   GET, POST /debug/pprof/symbol   Go's symbol service: names of
 *                             addresses, which `go tool pprof` asks for
 *                             those it cannot name itself
 *
 * Two steps, because the server must know whether to read a body before
 * anything is answered: prof_http_route_match turns a request's method,
 * path and query into a route or an error page (while its head is
 * parsed), and prof_http_route_serve answers a complete request through
 * the server's response calls (prof_http_send_*).  Nothing served
 * changes the process.  A body is built into the server's buffer first
 * (profiles by prof_dump_to_fd, which serializes with every other dump)
 * and sent with its length once it is whole, so the status is known
 * before the first byte goes out.
 *
 * Deltas (?seconds=N, 1 <= N <= PROF_HTTP_DELTA_MAX_S): the first
 * snapshot is taken at once (prof_dump_delta_take), the request is
 * deferred N seconds (prof_http_defer: the server answers everyone else
 * meanwhile), then the second snapshot is taken and their difference
 * sent as pprof (prof_dump_delta_to_fd): per stack and thread, the
 * window's allocations (alloc_*) and the change of the live heap
 * (inuse_*, negative where it shrank), with time_nanos the second
 * snapshot's and duration_nanos the window's.  Without prof_accum the
 * window's allocations come from the accumulated counts samples always
 * add to, kept for the stacks whose samples are freed inside the window
 * while it is open (prof_accum_hold).
 */
#include "malloc_prof/internal/internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <unistd.h>

/* The longest delta window.  Go refuses windows longer than its server's
 * WriteTimeout; ours holds a snapshot (and the freed stacks' counts) per
 * waiting request, and scrapers ask for their interval (10 to 60 s). */
#define PROF_HTTP_DELTA_MAX_S 300
#define HTTP_STR_(x) #x
#define HTTP_STR(x) HTTP_STR_(x)

/* ------------------------------------------------------------ matching */

/* Whether query q[0..len) has name=value; *val, *vlen: its value. */
static bool http_query_get(const char *q, size_t len, const char *name,
    const char **val, size_t *vlen) {
	size_t nlen = strlen(name);
	const char *end = q + len;
	while (q < end) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		const char *pe = amp != NULL ? amp : end;
		if ((size_t)(pe - q) > nlen && memcmp(q, name, nlen) == 0 &&
		    q[nlen] == '=') {
			*val = q + nlen + 1;
			*vlen = (size_t)(pe - *val);
			return true;
		}
		q = pe + (amp != NULL);
	}
	return false;
}

/* ?name=N as a non-negative decimal number (at most max): 0 absent, 1
 * valid (*n set), -1 not a number or above max. */
static int http_query_num(const char *q, size_t len, const char *name,
    unsigned max, unsigned *n) {
	const char *v;
	size_t vlen;
	if (!http_query_get(q, len, name, &v, &vlen))
		return 0;
	unsigned long x = 0;
	if (vlen == 0 || vlen > 9)
		return -1;
	for (size_t i = 0; i < vlen; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (unsigned long)(v[i] - '0');
	}
	if (x > max)
		return -1;
	*n = (unsigned)x;
	return 1;
}

/* ?debug= and (unless index, where it means nothing) ?seconds= of a
 * profile path (peak: no deltas); false if req became an error page. */
static bool http_match_profile_query(prof_http_req_t *req, const char *query,
    size_t qlen, bool peak, bool index) {
	unsigned debug = 0, seconds = 0;
	if (http_query_num(query, qlen, "debug", 999999999u, &debug) < 0) {
		prof_http_req_error(req, 400, "invalid value for \"debug\": "
		    "expected a non-negative integer (1: the text form)");
		return false;
	}
	req->debug = debug > 0;
	if (index)
		return true;
	int sr = http_query_num(query, qlen, "seconds", 999999999u, &seconds);
	if (sr == 0)
		return true;
	if (sr < 0 || seconds == 0) {
		prof_http_req_error(req, 400, "invalid value for \"seconds\": "
		    "expected a positive integer (the delta's window, at most "
		    "%d)", PROF_HTTP_DELTA_MAX_S);
		return false;
	}
	if (seconds > PROF_HTTP_DELTA_MAX_S) {
		prof_http_req_error(req, 400, "seconds=%u is longer than the "
		    "endpoint's longest delta window, %d seconds", seconds,
		    PROF_HTTP_DELTA_MAX_S);
		return false;
	}
	if (peak) {
		prof_http_req_error(req, 400, "\"seconds\" is not supported "
		    "for the peak profile (deltas: heap and allocs)");
		return false;
	}
	if (req->debug || req->heap_v2) {
		prof_http_req_error(req, 400, "\"seconds\" and %s are "
		    "incompatible: a delta is served as pprof only",
		    req->debug ? "\"debug\"" : "format=heap_v2");
		return false;
	}
	req->seconds = seconds;
	return true;
}

/* 405, naming the methods the path takes. */
static void http_req_not_allowed(prof_http_req_t *req, const char *allow,
    const char *method, size_t mlen) {
	prof_http_req_error(req, 405, "method %.*s not allowed here (%s "
	    "only): the endpoint is read-only", (int)(mlen < 32 ? mlen : 32),
	    method, allow);
	req->allow = allow;
}

void prof_http_route_match(prof_http_req_t *req, const char *method,
    size_t mlen, const char *path, size_t plen, const char *query,
    size_t qlen, long long clen) {
	bool get = mlen == 3 && memcmp(method, "GET", 3) == 0;
	bool post = mlen == 4 && memcmp(method, "POST", 4) == 0;
#define HTTP_PATH_IS(s) (plen == sizeof(s) - 1 && memcmp(path, s,	\
	sizeof(s) - 1) == 0)
	if (HTTP_PATH_IS("/debug/pprof/symbol")) {
		if (get) {
			req->route = PROF_HTTP_SYMBOL_GET;
		} else if (post) {
			if (clen < 0) {
				prof_http_req_error(req, 400, "a POST needs a "
				    "valid Content-Length");
				return;
			}
			if (clen > PROF_HTTP_BODY_MAX) {
				prof_http_req_error(req, 400, "request body "
				    "too large: at most %d bytes of addresses",
				    PROF_HTTP_BODY_MAX);
				return;
			}
			req->route = PROF_HTTP_SYMBOL_POST;
			req->clen = (size_t)clen;
		} else {
			http_req_not_allowed(req, "GET, POST", method, mlen);
		}
		return;
	}
	if (!get) {
		http_req_not_allowed(req, "GET", method, mlen);
		return;
	}
	/* The lifetime and fragmentation profiles: pprof only, no query
	 * (no text form, no deltas). */
	if (HTTP_PATH_IS("/debug/pprof/lifetimes") ||
	    HTTP_PATH_IS("/debug/pprof/fragmentation")) {
		bool life = HTTP_PATH_IS("/debug/pprof/lifetimes");
		if (qlen != 0)
			prof_http_req_error(req, 400, "%s takes no query: it "
			    "is served as pprof only", life ?
			    "/debug/pprof/lifetimes" :
			    "/debug/pprof/fragmentation");
		else
			req->route = life ? PROF_HTTP_LIFETIMES :
			    PROF_HTTP_FRAGMENTATION;
		return;
	}
	if (HTTP_PATH_IS("/debug/pprof/heap") ||
	    HTTP_PATH_IS("/debug/pprof/allocs") ||
	    HTTP_PATH_IS("/debug/pprof/peak")) {
		const char *v;
		size_t vlen;
		if (http_query_get(query, qlen, "format", &v, &vlen)) {
			if (vlen == 7 && memcmp(v, "heap_v2", 7) == 0) {
				req->heap_v2 = true;
			} else if (!(vlen == 5 && memcmp(v, "pprof", 5) == 0)) {
				prof_http_req_error(req, 400, "unknown format "
				    "\"%.*s\": expected pprof (the default) "
				    "or heap_v2", (int)(vlen < 40 ? vlen : 40),
				    v);
				return;
			}
		}
		bool peak = HTTP_PATH_IS("/debug/pprof/peak");
		if (!http_match_profile_query(req, query, qlen, peak, false))
			return;
		req->route = HTTP_PATH_IS("/debug/pprof/heap") ?
		    PROF_HTTP_HEAP : peak ? PROF_HTTP_PEAK : PROF_HTTP_ALLOCS;
	} else if (HTTP_PATH_IS("/debug/pprof/") ||
	    HTTP_PATH_IS("/debug/pprof")) {
		if (!http_match_profile_query(req, query, qlen, false, true))
			return;
		req->route = PROF_HTTP_INDEX;
	} else if (HTTP_PATH_IS("/debug/malloc/stats")) {
		req->route = PROF_HTTP_STATS;
	} else {
		prof_http_req_error(req, 404, "not found: %.*s (served: "
		    "/debug/pprof/, /debug/pprof/heap, /debug/pprof/allocs, "
		    "/debug/pprof/peak, /debug/pprof/lifetimes, "
		    "/debug/pprof/fragmentation, /debug/pprof/symbol, "
		    "/debug/malloc/stats)",
		    (int)(plen < 100 ? plen : 100), path);
	}
#undef HTTP_PATH_IS
}

/* ------------------------------------------------------------- serving */

typedef struct http_out_s {
	int fd;
	int err;                 /* first write error */
} http_out_t;

static void http_out_write(void *opaque, const char *s) {
	http_out_t *o = opaque;
	size_t n = strlen(s);
	while (n > 0 && o->err == 0) {
		ssize_t w = write(o->fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? errno : EIO;
			break;
		}
		s += w;
		n -= (size_t)w;
	}
}

/* Send what o wrote (what: its name in an error), or why it failed. */
static void http_out_send(prof_http_resp_t *r, const http_out_t *o,
    const char *what, const char *ctype) {
	if (o->err != 0) {
		char ebuf[128];
		prof_http_send_error(r, 500, "cannot write the %s: %s", what,
		    prof_dump_strerror(o->err, ebuf, sizeof(ebuf)));
		return;
	}
	prof_http_send_body(r, 200, ctype);
}

/* The emptied body buffer; -1 when there is none, r answered with why. */
static int http_body(prof_http_resp_t *r) {
	char err[256];
	int fd = prof_http_body_begin(err, sizeof(err));
	if (fd < 0)
		prof_http_send_error(r, 500, "%s", err);
	return fd;
}

static bool http_prof_active(void) {
	return config_prof && opt_prof &&
	    atomic_load_explicit(&prof_active, memory_order_relaxed);
}

/* A delta waiting for its window to end (prof_http_defer's state). */
typedef struct http_delta_s {
	dump_snap_t s0;
	bool alloc;              /* alloc_space by default */
} http_delta_t;

/* ?seconds=N on /heap or /allocs: the first snapshot now, the rest in
 * http_delta_finish once the server resumes the request. */
static void http_delta_start(prof_http_resp_t *r, bool alloc,
    unsigned seconds) {
	http_delta_t *d = base_malloc(sizeof(*d));
	if (d == NULL) {
		prof_http_send_error(r, 503, "out of memory for a delta "
		    "profile");
		return;
	}
	d->alloc = alloc;
	char err[256];
	if (prof_dump_delta_take(&d->s0, err, sizeof(err))) {
		base_free(d, sizeof(*d));
		prof_http_send_error(r, 500, "cannot take the delta profile: "
		    "%s", err);
		return;
	}
	if (prof_http_defer(r, (uint64_t)seconds * 1000000000u, d)) {
		prof_dump_delta_drop(&d->s0);
		base_free(d, sizeof(*d));
		prof_http_send_text(r, 503, "text/plain; charset=utf-8",
		    "Retry-After: 1\r\n", "too many delta profiles are being "
		    "taken (at most " HTTP_STR(PROF_HTTP_WAITS) " at once): "
		    "retry later\n");
	}
}

/* The window is over (or, cancel, its client gone). */
static void http_delta_finish(prof_http_resp_t *r, http_delta_t *d,
    bool cancel) {
	int fd = cancel ? -1 : http_body(r);
	if (fd < 0) {
		prof_dump_delta_drop(&d->s0);
		base_free(d, sizeof(*d));
		return;
	}
	char err[256];
	bool fail = prof_dump_delta_to_fd(fd, &d->s0, d->alloc ?
	    "alloc_space" : NULL, err, sizeof(err));
	base_free(d, sizeof(*d));
	if (fail) {
		prof_http_send_error(r, 500, "cannot write the delta profile: "
		    "%s", err);
		return;
	}
	prof_http_send_body(r, 200, "application/octet-stream");
}

/* GET /debug/pprof/heap, /allocs (alloc: sample_type alloc_space) or
 * /peak; the query was checked by prof_http_route_match. */
static void http_serve_profile(prof_http_resp_t *r, bool alloc, bool peak,
    const prof_http_req_t *req) {
	prof_format_t format = req->heap_v2 || req->debug ?
	    PROF_FORMAT_HEAP_V2 : PROF_FORMAT_PPROF;
	if (!http_prof_active()) {
		prof_http_send_error(r, 403, "heap profiling not active");
		return;
	}
	if (req->seconds > 0) {
		http_delta_start(r, alloc, req->seconds);
		return;
	}
	if (alloc && !opt_prof_accum) {
		prof_http_send_error(r, 404, "allocation profiles need "
		    "prof_accum:true in " MP_CONF_ENV " (freed samples are "
		    "not counted), or a window: ?seconds=N");
		return;
	}
	if (peak && !opt_prof_peak) {
		prof_http_send_error(r, 404, "the peak profile needs "
		    "prof_peak:true in " MP_CONF_ENV);
		return;
	}
	int fd = http_body(r);
	if (fd < 0)
		return;
	char err[256];
	if (peak ? prof_peak_dump_to_fd(fd, format, NULL, err, sizeof(err)) :
	    prof_dump_to_fd(fd, format, alloc && format == PROF_FORMAT_PPROF ?
	    "alloc_space" : NULL, err, sizeof(err))) {
		prof_http_send_error(r, 500, "cannot write the profile: %s",
		    err);
		return;
	}
	prof_http_send_body(r, 200, format == PROF_FORMAT_PPROF ?
	    "application/octet-stream" : "text/plain; charset=utf-8");
}

/* GET /debug/pprof/lifetimes (prof_lifetime.c) and
 * /debug/pprof/fragmentation (prof_frag.c): profiles that exist only as
 * pprof. */
static void http_serve_pprof_only(prof_http_resp_t *r, bool lifetimes) {
	if (!http_prof_active()) {
		prof_http_send_error(r, 403, "heap profiling not active");
		return;
	}
	int fd = http_body(r);
	if (fd < 0)
		return;
	char err[256];
	if (lifetimes ? prof_lifetimes_dump_to_fd(fd, NULL, err, sizeof(err)) :
	    prof_dump_built_to_fd(fd, prof_frag_build, NULL, err,
	    sizeof(err))) {
		prof_http_send_error(r, 500, "cannot write the profile: %s",
		    err);
		return;
	}
	prof_http_send_body(r, 200, "application/octet-stream");
}

static void http_serve_stats(prof_http_resp_t *r) {
	int fd = http_body(r);
	if (fd < 0)
		return;
	http_out_t o = {fd, 0};
	/* true: no memory for the snapshot copy; an empty 200 would look
	 * like a process with no statistics. */
	if (stats_print(http_out_write, &o, "J")) {
		prof_http_send_error(r, 500, "cannot print the statistics: "
		    "out of memory");
		return;
	}
	http_out_send(r, &o, "statistics", "application/json");
}

/*
 * POST /debug/pprof/symbol, what `go tool pprof` asks for the addresses
 * it could not name from local binaries: the body (body[0..len), read by
 * the server like the head) is addresses joined by '+', the answer one
 * "0xADDR name" line per address that lies inside a function of the
 * dynamic symbol tables (dladdr1 with the symbol's size: the nearest
 * exported symbol before a static function is not its name).
 */
static void http_serve_symbol(prof_http_resp_t *r, const char *body,
    size_t len) {
	int fd = http_body(r);
	if (fd < 0)
		return;
	http_out_t o = {fd, 0};
	http_out_write(&o, "num_symbols: 1\n");
	const char *p = body, *end = body + len;
	while (p < end && o.err == 0) {
		const char *plus = memchr(p, '+', (size_t)(end - p));
		const char *te = plus != NULL ? plus : end;
		uintptr_t a = 0;
		const char *d = p;
		if (te - d > 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'X'))
			d += 2;
		bool ok = d < te && te - d <= 16;
		for (; ok && d < te; d++) {
			char ch = *d;
			unsigned v = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0') :
			    ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10) :
			    ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) :
			    16u;
			ok = v < 16;
			a = a << 4 | v;
		}
		Dl_info info;
		const ElfW(Sym) *sym = NULL;
		if (ok && a != 0 && dladdr1((void *)a, &info, (void **)&sym,
		    RTLD_DL_SYMENT) != 0 && info.dli_sname != NULL &&
		    sym != NULL && a >= (uintptr_t)info.dli_saddr &&
		    a < (uintptr_t)info.dli_saddr + sym->st_size) {
			char line[320];
			mp_snprintf(line, sizeof(line), "0x%lx %.256s\n",
			    (unsigned long)a, info.dli_sname);
			http_out_write(&o, line);
		}
		p = te + (plus != NULL);
	}
	http_out_send(r, &o, "symbols", "text/plain; charset=utf-8");
}

/*
 * GET /debug/pprof/: what is served, as Go's index lists its profiles
 * (count, name, link, description).  Counts are the backtraces the
 * profile of now would hold ("-": not served as it stands).  The HTML
 * links to each profile's text form (?debug=1), as Go's does; debug: the
 * same table as tab-separated text, a header line first.
 */
typedef struct http_index_row_s {
	const char *name, *path, *link, *desc;
} http_index_row_t;

static const http_index_row_t http_index_rows[] = {
	{"allocs", "/debug/pprof/allocs", "/debug/pprof/allocs?debug=1",
	    "A sampling of all past allocations (needs prof_accum:true); "
	    "?seconds=N: those of the next N seconds (any prof_accum)"},
	{"heap", "/debug/pprof/heap", "/debug/pprof/heap?debug=1",
	    "A sampling of the live objects; ?seconds=N: the allocations "
	    "of the next N seconds and the change of the live heap"},
	{"peak", "/debug/pprof/peak", "/debug/pprof/peak?debug=1",
	    "The live objects sampled when the heap was highest (needs "
	    "prof_peak:true)"},
	{"lifetimes", "/debug/pprof/lifetimes", "/debug/pprof/lifetimes",
	    "The sampled allocations of each stack by how long they lived "
	    "(label lifetime; pprof only: no text form)"},
	{"fragmentation", "/debug/pprof/fragmentation",
	    "/debug/pprof/fragmentation",
	    "The unused space of the slabs each live sampled object keeps, "
	    "by its size class (pprof only: no text form)"},
	{"symbol", "/debug/pprof/symbol", "/debug/pprof/symbol",
	    "Function names of addresses, for go tool pprof (POST them "
	    "joined by +)"},
	{"stats", "/debug/malloc/stats", "/debug/malloc/stats",
	    "The allocator's statistics (malloc_stats_print's JSON)"},
};

static void http_serve_index(prof_http_resp_t *r, bool text) {
	int fd = http_body(r);
	if (fd < 0)
		return;
	bool on = config_prof && opt_prof;
	char counts[3][24];
	mp_snprintf(counts[0], sizeof(counts[0]), "%zu", on && opt_prof_accum ?
	    prof_snap_count(true) : 0);
	mp_snprintf(counts[1], sizeof(counts[1]), "%zu", on ?
	    prof_snap_count(false) : 0);
	if (!on || !opt_prof_accum)
		mp_snprintf(counts[0], sizeof(counts[0]), "-");
	if (!on)
		mp_snprintf(counts[1], sizeof(counts[1]), "-");
	mp_snprintf(counts[2], sizeof(counts[2]), "-");
	http_out_t o = {fd, 0};
	char wline[96];
	if (text) {
		http_out_write(&o, "# malloc_prof /debug/pprof/: name\tcount"
		    "\tpath\tdescription (count: backtraces in the profile "
		    "of now, - if none is served)\n");
		mp_snprintf(wline, sizeof(wline), "# delta windows open: %u "
		    "(at most %d)\n", prof_http_waiting(), PROF_HTTP_WAITS);
		http_out_write(&o, wline);
	} else {
		http_out_write(&o, "<!DOCTYPE html>\n<html>\n<head>\n"
		    "<meta charset=\"utf-8\">\n<title>/debug/pprof/</title>"
		    "\n<style>td { padding: 0 1em 0 0; } "
		    ".count { text-align: right; }</style>\n</head>\n<body>\n"
		    "<h1>/debug/pprof/</h1>\n<p>The heap profiles of this "
		    "process (malloc_prof), in pprof's format: "
		    "<code>go tool pprof http://HOST:PORT/debug/pprof/heap"
		    "</code>.  Each link is a profile's text form "
		    "(<code>?debug=1</code>: jeprof's heap_v2).  "
		    "<code>?seconds=N</code> on heap and allocs: a delta "
		    "of the next N seconds (at most "
		    HTTP_STR(PROF_HTTP_DELTA_MAX_S) ").</p>\n<table>\n"
		    "<thead><tr><td class=\"count\">Count</td><td>Profile"
		    "</td><td>Description</td></tr></thead>\n<tbody>\n");
	}
	for (size_t i = 0; i < sizeof(http_index_rows) /
	    sizeof(http_index_rows[0]); i++) {
		const http_index_row_t *row = &http_index_rows[i];
		const char *count = i < 3 ? counts[i] : "";
		char line[640];
		if (text) {
			mp_snprintf(line, sizeof(line), "%s\t%s\t%s\t%s\n",
			    row->name, i < 3 ? count : "-", row->path,
			    row->desc);
		} else {
			mp_snprintf(line, sizeof(line), "<tr><td class=\""
			    "count\">%s</td><td><a href=\"%s\">%s</a></td>"
			    "<td>%s</td></tr>\n", count, row->link, row->name,
			    row->desc);
		}
		http_out_write(&o, line);
	}
	if (!text) {
		mp_snprintf(wline, sizeof(wline), "</tbody>\n</table>\n<p>"
		    "Delta windows open: %u (at most %d).</p>\n",
		    prof_http_waiting(), PROF_HTTP_WAITS);
		http_out_write(&o, wline);
		http_out_write(&o, "</body>\n</html>\n");
	}
	http_out_send(r, &o, "index", text ? "text/plain; charset=utf-8" :
	    "text/html; charset=utf-8");
}

void prof_http_route_serve(prof_http_resp_t *r, const prof_http_req_t *req,
    const char *body, size_t body_len) {
	switch (req->route) {
	case PROF_HTTP_MORE:
		break;
	case PROF_HTTP_ERROR:
		if (req->allow != NULL) {
			char extra[64], line[sizeof(req->why) + 1];
			mp_snprintf(extra, sizeof(extra), "Allow: %s\r\n",
			    req->allow);
			mp_snprintf(line, sizeof(line), "%s\n", req->why);
			prof_http_send_text(r, 405, "text/plain; "
			    "charset=utf-8", extra, line);
		} else {
			prof_http_send_error(r, req->status, "%s", req->why);
		}
		break;
	case PROF_HTTP_HEAP:
	case PROF_HTTP_ALLOCS:
	case PROF_HTTP_PEAK:
		http_serve_profile(r, req->route == PROF_HTTP_ALLOCS,
		    req->route == PROF_HTTP_PEAK, req);
		break;
	case PROF_HTTP_LIFETIMES:
		http_serve_pprof_only(r, true);
		break;
	case PROF_HTTP_RESUME:
		http_delta_finish(r, req->resume, req->cancel);
		break;
	case PROF_HTTP_INDEX:
		http_serve_index(r, req->debug);
		break;
	case PROF_HTTP_STATS:
		http_serve_stats(r);
		break;
	case PROF_HTTP_FRAGMENTATION:
		http_serve_pprof_only(r, false);
		break;
	case PROF_HTTP_SYMBOL_GET:
		prof_http_send_text(r, 200, "text/plain; charset=utf-8", "",
		    "num_symbols: 1\n");
		break;
	case PROF_HTTP_SYMBOL_POST:
		http_serve_symbol(r, body, body_len);
		break;
	}
}
