/*
 * prof_http_routes.c: what the scrape endpoint serves, apart from how it
 * serves it (prof_http.c: sockets, the poll loop, framing, sending).
 *
 *   GET /debug/pprof/heap     the pprof profile (?format=heap_v2: jeprof)
 *   GET /debug/pprof/allocs   the same, alloc_space by default
 *                             (needs prof_accum)
 *   GET /debug/pprof/peak     the peak-heap profile (prof_peak), as heap
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
 */
#include "malloc_prof/internal/internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <unistd.h>

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
		req->route = HTTP_PATH_IS("/debug/pprof/heap") ?
		    PROF_HTTP_HEAP : HTTP_PATH_IS("/debug/pprof/peak") ?
		    PROF_HTTP_PEAK : PROF_HTTP_ALLOCS;
	} else if (HTTP_PATH_IS("/debug/malloc/stats")) {
		req->route = PROF_HTTP_STATS;
	} else {
		prof_http_req_error(req, 404, "not found: %.*s (served: "
		    "/debug/pprof/heap, /debug/pprof/allocs, "
		    "/debug/pprof/peak, /debug/pprof/symbol, "
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

/* GET /debug/pprof/heap, /allocs (alloc: sample_type alloc_space) or
 * /peak; the format was checked by prof_http_route_match. */
static void http_serve_profile(prof_http_resp_t *r, bool alloc, bool peak,
    bool heap_v2) {
	prof_format_t format = heap_v2 ? PROF_FORMAT_HEAP_V2 :
	    PROF_FORMAT_PPROF;
	if (!http_prof_active()) {
		prof_http_send_error(r, 403, "heap profiling not active");
		return;
	}
	if (alloc && !opt_prof_accum) {
		prof_http_send_error(r, 404, "allocation profiles need "
		    "prof_accum:true in " MP_CONF_ENV " (freed samples are "
		    "not counted)");
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
		    req->route == PROF_HTTP_PEAK, req->heap_v2);
		break;
	case PROF_HTTP_STATS:
		http_serve_stats(r);
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
