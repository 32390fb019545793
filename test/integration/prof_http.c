/*
 * test/integration/prof_http.c - the scrape endpoint (prof_http).
 *
 * prof_http.conf: prof:true,prof_accum:true,lg_prof_sample:10,
 * prof_http:127.0.0.1:0,prof_http_timeout_ms:60000.  A small HTTP client
 * written here (no curl) reads prof.http_port and GETs every path: status, headers
 * (Content-Type, Content-Length equal to the body, Connection: close) and
 * body (pprof decoded with test_util.h's reader: sample types, inuse
 * totals, the test's call site; heap_v2 text; stats JSON; the peak
 * profile of /debug/pprof/peak in both formats).  Errors: 404,
 * 405 with Allow, 400 for garbage, a bad request line, an oversized head
 * and an unknown format, every error body one line; 403 once prof.active
 * is false.  /debug/pprof/symbol names addresses the way Go's does, for
 * `go tool pprof`; a POST's framing (two different Content-Lengths,
 * Transfer-Encoding: 400) and its one body buffer (503 while taken).
 * Robustness (prof_http.conf gives clients 60 s to send a request, so
 * that "not answered yet" proves "not waited for" on any machine): a
 * silent client, or 64 idle ones, delay no scrape; 1,000 connections
 * leave at most the per-address cap open while allocation goes on and
 * memory stays bounded; the timeout (408) in children with 2 s and
 * 0.3 s; a client that goes away mid-response kills nothing (no SIGPIPE:
 * the thread blocks signals and sends with MSG_NOSIGNAL; without both
 * this test dies), 50 concurrent requests while threads allocate all get
 * valid profiles, a forked child has no endpoint while the parent keeps
 * serving.  Children started with other options check: prof_accum:false
 * gives /debug/pprof/allocs 404; an IPv6 [::1] endpoint; bad values
 * (names, missing port, port range, unbracketed IPv6, a port in use)
 * print one error line, start nothing, and the process goes on.  Without
 * the profiler built in, prof.http_port is ENOENT and the option is
 * refused with one line.
 */
#include "../test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define NSITE 300

void http_site(void **objs, size_t n);

MP_SITE void http_site(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(4096 + i % 512));
	}
	__asm__ volatile("" : : : "memory");
}

static void *site_objs[NSITE];

/* ---- the client */

typedef struct {
	int status;              /* 0: no valid response */
	char head[4096];         /* status line and headers */
	uint8_t *body;
	size_t len;
	char err[160];
} resp_t;

static void resp_free(resp_t *r) {
	free(r->body);
	r->body = NULL;
}

/* A connection to the server on loopback; -1 on error. */
static int connect_to(int family, unsigned port) {
	return mp_connect_loopback(family, port, 10);
}

static bool send_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Read a whole response from fd (until EOF) and parse it.  Thread-safe:
 * failures go to r->err, not to cmocka. */
static void read_response(int fd, resp_t *r) {
	size_t n;
	uint8_t *all = mp_read_fd_all(fd, &n);
	uint8_t *end = NULL;
	for (size_t i = 0; i + 3 < n; i++) {
		if (memcmp(all + i, "\r\n\r\n", 4) == 0) {
			end = all + i;
			break;
		}
	}
	if (end == NULL || (size_t)(end - all) >= sizeof(r->head)) {
		snprintf(r->err, sizeof(r->err), "no response head in %zu "
		    "bytes", n);
		free(all);
		return;
	}
	size_t hl = (size_t)(end - all);
	memcpy(r->head, all, hl);
	r->head[hl] = '\0';
	r->len = n - hl - 4;
	r->body = malloc(r->len + 1);
	memcpy(r->body, end + 4, r->len);
	r->body[r->len] = '\0';
	free(all);
	if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1) {
		snprintf(r->err, sizeof(r->err), "bad status line");
		r->status = 0;
	}
}

/* The value of header `name` (case as sent), or NULL; in a static
 * buffer per response. */
static const char *header(const resp_t *r, const char *name, char *buf,
    size_t size) {
	size_t nl = strlen(name);
	const char *p = strstr(r->head, "\r\n");
	while (p != NULL) {
		p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ') {
				v++;
			}
			const char *e = strstr(v, "\r\n");
			size_t l = e != NULL ? (size_t)(e - v) : strlen(v);
			if (l >= size) {
				l = size - 1;
			}
			memcpy(buf, v, l);
			buf[l] = '\0';
			return buf;
		}
		p = strstr(p, "\r\n");
	}
	return NULL;
}

/* Send a raw request, read the response. */
static void request_raw(int family, unsigned port, const char *req, size_t len,
    resp_t *r) {
	memset(r, 0, sizeof(*r));
	int fd = connect_to(family, port);
	if (fd < 0) {
		snprintf(r->err, sizeof(r->err), "connect: %s",
		    strerror(errno));
		return;
	}
	if (!send_all(fd, req, len)) {
		snprintf(r->err, sizeof(r->err), "send: %s", strerror(errno));
	}
	read_response(fd, r);
	close(fd);
}

static void get(unsigned port, const char *path, resp_t *r) {
	char req[512];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: "
	    "127.0.0.1\r\nUser-Agent: prof_http-test\r\n\r\n", path);
	request_raw(AF_INET, port, req, (size_t)n, r);
}

/* Checks every response has: Content-Length matching, Connection:
 * close; returns an error text or NULL (thread-safe). */
static const char *resp_problem(const resp_t *r, char *buf, size_t size) {
	char v[128];
	if (r->status == 0) {
		snprintf(buf, size, "no response: %s", r->err);
		return buf;
	}
	const char *cl = header(r, "Content-Length", v, sizeof(v));
	if (cl == NULL || strtoull(cl, NULL, 10) != r->len) {
		snprintf(buf, size, "Content-Length %s, body %zu bytes",
		    cl != NULL ? cl : "missing", r->len);
		return buf;
	}
	const char *c = header(r, "Connection", v, sizeof(v));
	if (c == NULL || strcmp(c, "close") != 0) {
		snprintf(buf, size, "Connection: %s", c != NULL ? c :
		    "missing");
		return buf;
	}
	return NULL;
}

#define CHECK_RESP(r, want_status) do {					\
	char pb_[256];							\
	const char *p_ = resp_problem((r), pb_, sizeof(pb_));		\
	MP_ASSERT(p_ == NULL, "%s", p_);				\
	MP_ASSERT((r)->status == (want_status), "status %d, want %d: "	\
	    "%.200s", (r)->status, (want_status), (char *)(r)->body);	\
} while (0)

static void check_type(const resp_t *r, const char *want) {
	char v[128];
	const char *t = header(r, "Content-Type", v, sizeof(v));
	MP_ASSERT(t != NULL && strncmp(t, want, strlen(want)) == 0,
	    "Content-Type %s, want %s", t != NULL ? t : "missing", want);
}

/* An error response: text/plain, one line, containing `what`. */
static void check_error(const resp_t *r, int status, const char *what) {
	CHECK_RESP(r, status);
	check_type(r, "text/plain");
	const char *b = (const char *)r->body;
	MP_ASSERT(r->len > 1 && b[r->len - 1] == '\n' &&
	    memchr(b, '\n', r->len - 1) == NULL, "not one line: \"%s\"", b);
	MP_ASSERT(strstr(b, what) != NULL, "want \"%s\" in \"%s\"", what, b);
}

/* Whether fd has anything to read (data, EOF or an error) right now:
 * whether the server answered or closed it. */
static bool has_news(int fd) {
	struct pollfd p = {fd, POLLIN, 0};
	return poll(&p, 1, 0) > 0;
}

static unsigned http_port(void) {
	unsigned port = 0;
	size_t sz = sizeof(port);
	int r = mallctl("prof.http_port", &port, &sz, NULL, 0);
	assert_int_equal(r, 0);
	assert_true(port > 0 && port < 65536);
	return port;
}

/* A pprof body: decodes, the four types, the default, inuse > 0, and
 * (with site) a sample whose leaf is in http_site.  Thread-safe. */
static bool profile_ok(const resp_t *r, const char *def, bool site, char *why,
    size_t size) {
	mp_pprof_t pp;
	if (!mp_pprof_decode(r->body, r->len, &pp)) {
		snprintf(why, size, "decode (%zu bytes): %.150s", r->len,
		    pp.err);
		mp_pprof_free(&pp);
		return false;
	}
	bool ok = true;
	int in = mp_pprof_type(&pp, "inuse_space");
	if (pp.ntypes != 4 || in < 0 || mp_pprof_type(&pp, "alloc_space") < 0
	    || strcmp(pp.default_type, def) != 0) {
		snprintf(why, size, "%zu sample types, default %s", pp.ntypes,
		    pp.default_type);
		ok = false;
	}
	int64_t inuse = 0;
	bool found = false;
	uintptr_t lo, hi;
	mp_fn_range((void *)http_site, &lo, &hi);
	for (size_t i = 0; ok && i < pp.nsamples; i++) {
		const mp_pp_sample_t *s = &pp.samples[i];
		inuse += s->vals[in];
		for (size_t k = 0; k < s->nlocs && k < 4; k++) {
			const mp_pp_loc_t *l = mp_pprof_loc(&pp, s->locs[k]);
			if (l != NULL && l->address >= lo &&
			    l->address < hi && s->vals[in] > 0) {
				found = true;
			}
		}
	}
	if (ok && inuse <= 0) {
		snprintf(why, size, "inuse_space total %" PRId64, inuse);
		ok = false;
	}
	if (ok && site && !found) {
		snprintf(why, size, "no sample of http_site in %zu samples",
		    pp.nsamples);
		ok = false;
	}
	mp_pprof_free(&pp);
	return ok;
}

/* ---- the tests */

static int setup(void **state) {
	(void)state;
	http_site(site_objs, NSITE);
	return 0;
}

static void test_port_and_option(void **state) {
	(void)state;
	unsigned port = http_port();
	assert_int_equal(http_port(), port);
	const char *v = NULL;
	size_t sz = sizeof(v);
	assert_int_equal(mallctl("opt.prof_http", (void *)&v, &sz, NULL, 0),
	    0);
	assert_string_equal(v, "127.0.0.1:0");
	/* Read-only. */
	assert_int_equal(mallctl("prof.http_port", NULL, NULL, &port,
	    sizeof(port)), EPERM);
}

static void test_heap(void **state) {
	(void)state;
	resp_t r;
	get(http_port(), "/debug/pprof/heap", &r);
	CHECK_RESP(&r, 200);
	check_type(&r, "application/octet-stream");
	char why[256];
	MP_ASSERT(profile_ok(&r, "inuse_space", true, why, sizeof(why)),
	    "%s", why);
	resp_free(&r);

	/* Unknown parameters are ignored; format=pprof is the default. */
	get(http_port(), "/debug/pprof/heap?gc=1&format=pprof&x",
	    &r);
	CHECK_RESP(&r, 200);
	MP_ASSERT(profile_ok(&r, "inuse_space", true, why, sizeof(why)),
	    "%s", why);
	resp_free(&r);

	/* jeprof text. */
	get(http_port(), "/debug/pprof/heap?debug=0&format=heap_v2", &r);
	CHECK_RESP(&r, 200);
	check_type(&r, "text/plain");
	MP_ASSERT(strncmp((char *)r.body, "heap_v2/1024\n", 13) == 0,
	    "%.100s", (char *)r.body);
	assert_non_null(strstr((char *)r.body, "MAPPED_LIBRARIES:"));
	resp_free(&r);
}

static void test_allocs(void **state) {
	(void)state;
	resp_t r;
	get(http_port(), "/debug/pprof/allocs", &r);
	CHECK_RESP(&r, 200);
	check_type(&r, "application/octet-stream");
	char why[256];
	MP_ASSERT(profile_ok(&r, "alloc_space", true, why, sizeof(why)),
	    "%s", why);
	resp_free(&r);
}

/* The peak-heap profile: a pprof profile, and in heap_v2 one whose
 * total is at least the heap of now (the peak cannot be lower). */
static void test_peak(void **state) {
	(void)state;
	resp_t r;
	get(http_port(), "/debug/pprof/peak", &r);
	CHECK_RESP(&r, 200);
	check_type(&r, "application/octet-stream");
	char why[256];
	MP_ASSERT(profile_ok(&r, "inuse_space", true, why, sizeof(why)),
	    "%s", why);
	resp_free(&r);
	get(http_port(), "/debug/pprof/peak?format=heap_v2", &r);
	CHECK_RESP(&r, 200);
	MP_ASSERT(strncmp((char *)r.body, "heap_v2/1024\n", 13) == 0,
	    "%.100s", (char *)r.body);
	assert_non_null(strstr((char *)r.body, "MAPPED_LIBRARIES:"));
	resp_free(&r);
	uint64_t peak = 0;
	size_t len = sizeof(peak);
	assert_int_equal(mallctl("prof.peak.bytes", &peak, &len, NULL, 0), 0);
	assert_true(peak > 0);
}

static void test_stats(void **state) {
	(void)state;
	resp_t r;
	get(http_port(), "/debug/malloc/stats", &r);
	CHECK_RESP(&r, 200);
	check_type(&r, "application/json");
	const char *b = (const char *)r.body;
	assert_true(r.len > 100);
	assert_int_equal(b[0], '{');
	assert_non_null(strstr(b, "\"jemalloc\""));  /* jemalloc's layout */
	size_t e = r.len;
	while (e > 0 && (b[e - 1] == '\n' || b[e - 1] == ' ')) {
		e--;
	}
	assert_int_equal(b[e - 1], '}');
	/* Balanced braces and brackets outside strings. */
	int depth = 0;
	bool str = false;
	for (size_t i = 0; i < r.len; i++) {
		if (str) {
			if (b[i] == '\\') {
				i++;
			} else if (b[i] == '"') {
				str = false;
			}
			continue;
		}
		if (b[i] == '"') {
			str = true;
		} else if (b[i] == '{' || b[i] == '[') {
			depth++;
		} else if (b[i] == '}' || b[i] == ']') {
			depth--;
			assert_true(depth >= 0);
		}
	}
	assert_int_equal(depth, 0);
	assert_false(str);
	resp_free(&r);
}

/* What `go tool pprof` asks for the addresses it cannot name. */
static void test_symbol(void **state) {
	(void)state;
	unsigned port = http_port();
	resp_t r;
	char v[64];
	get(port, "/debug/pprof/symbol", &r);
	CHECK_RESP(&r, 200);
	assert_string_equal((char *)r.body, "num_symbols: 1\n");
	resp_free(&r);

	/* An address inside http_site (exported: -export-dynamic), one
	 * nowhere, and one that is not a number. */
	char body[128], req[512];
	int bl = snprintf(body, sizeof(body), "0x%lx+0x10+0xzz",
	    (unsigned long)((uintptr_t)http_site + 1));
	int n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol "
	    "HTTP/1.1\r\nContent-Type: application/octet-stream\r\n"
	    "Content-Length: %d\r\n\r\n%s", bl, body);
	request_raw(AF_INET, port, req, (size_t)n, &r);
	CHECK_RESP(&r, 200);
	char want[128];
	snprintf(want, sizeof(want), "num_symbols: 1\n0x%lx http_site\n",
	    (unsigned long)((uintptr_t)http_site + 1));
	assert_string_equal((char *)r.body, want);
	resp_free(&r);

	/* The body in a second packet. */
	int fd = connect_to(AF_INET, port);
	assert_true(fd >= 0);
	n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Content-Length: %d\r\n\r\n", bl);
	assert_true(send_all(fd, req, (size_t)n));
	mp_sleep_ms(50);
	assert_true(send_all(fd, body, (size_t)bl));
	read_response(fd, &r);
	close(fd);
	CHECK_RESP(&r, 200);
	assert_string_equal((char *)r.body, want);
	resp_free(&r);

	static const char nolen[] = "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "\r\n";
	request_raw(AF_INET, port, nolen, sizeof(nolen) - 1, &r);
	check_error(&r, 400, "Content-Length");
	resp_free(&r);
	/* Framing (RFC 9112 6.3): two lengths that differ are refused,
	 * whichever would have been believed; one length repeated is that
	 * length; no chunked bodies; a list is not a number. */
	n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", bl,
	    bl - 5, body);
	request_raw(AF_INET, port, req, (size_t)n, &r);
	check_error(&r, 400, "conflicting Content-Length");
	resp_free(&r);
	n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Content-Length: %d\r\ncontent-length:%d\r\n\r\n%s", bl, bl,
	    body);
	request_raw(AF_INET, port, req, (size_t)n, &r);
	CHECK_RESP(&r, 200);
	assert_string_equal((char *)r.body, want);
	resp_free(&r);
	n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Content-Length: %d, %d\r\n\r\n%s", bl, bl, body);
	request_raw(AF_INET, port, req, (size_t)n, &r);
	check_error(&r, 400, "invalid Content-Length");
	resp_free(&r);
	static const char chunked[] = "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
	    "0\r\n\r\n";
	request_raw(AF_INET, port, chunked, sizeof(chunked) - 1, &r);
	check_error(&r, 400, "Transfer-Encoding is not supported");
	resp_free(&r);
	static const char getdup[] = "GET /debug/pprof/heap HTTP/1.1\r\n"
	    "Content-Length: 0\r\nContent-Length: 1\r\n\r\n";
	request_raw(AF_INET, port, getdup, sizeof(getdup) - 1, &r);
	check_error(&r, 400, "conflicting Content-Length");
	resp_free(&r);

	/* A body that is slow to come delays no one; the one body buffer
	 * it holds meanwhile makes another POST 503 (Retry-After). */
	fd = connect_to(AF_INET, port);
	assert_true(fd >= 0);
	n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Content-Length: %d\r\n\r\n%.5s", bl, body);
	assert_true(send_all(fd, req, (size_t)n));
	get(port, "/debug/pprof/heap", &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
	assert_false(has_news(fd));
	n = snprintf(req, sizeof(req), "POST /debug/pprof/symbol HTTP/1.1\r\n"
	    "Content-Length: %d\r\n\r\n%s", bl, body);
	/* Until the server has read the first head (it has, in practice,
	 * since the scrape that followed it was answered). */
	for (int k = 0; k < 100; k++) {
		request_raw(AF_INET, port, req, (size_t)n, &r);
		if (r.status != 200) {
			break;
		}
		resp_free(&r);
		mp_sleep_ms(20);
	}
	check_error(&r, 503, "another symbol request");
	assert_non_null(header(&r, "Retry-After", v, sizeof(v)));
	resp_free(&r);
	assert_true(send_all(fd, body + 5, (size_t)bl - 5));
	read_response(fd, &r);
	close(fd);
	CHECK_RESP(&r, 200);
	assert_string_equal((char *)r.body, want);
	resp_free(&r);

	static const char put[] = "PUT /debug/pprof/symbol HTTP/1.1\r\n\r\n";
	request_raw(AF_INET, port, put, sizeof(put) - 1, &r);
	check_error(&r, 405, "not allowed");
	const char *allow = header(&r, "Allow", v, sizeof(v));
	assert_non_null(allow);
	assert_string_equal(allow, "GET, POST");
	resp_free(&r);
}

static void test_errors(void **state) {
	(void)state;
	unsigned port = http_port();
	resp_t r;
	get(port, "/nope", &r);
	check_error(&r, 404, "not found");
	resp_free(&r);
	get(port, "/debug/pprof/heapx", &r);
	check_error(&r, 404, "not found");
	resp_free(&r);
	get(port, "/debug/pprof/heap?format=svg", &r);
	check_error(&r, 400, "unknown format");
	resp_free(&r);

	static const char post[] = "POST /debug/pprof/heap HTTP/1.1\r\n"
	    "Content-Length: 0\r\n\r\n";
	request_raw(AF_INET, port, post, sizeof(post) - 1, &r);
	check_error(&r, 405, "not allowed");
	char v[64];
	const char *allow = header(&r, "Allow", v, sizeof(v));
	assert_non_null(allow);
	assert_string_equal(allow, "GET");
	resp_free(&r);

	static const char garbage[] = "hello there\r\n\r\n";
	request_raw(AF_INET, port, garbage, sizeof(garbage) - 1, &r);
	check_error(&r, 400, "malformed request line");
	resp_free(&r);
	/* A bad first line is answered without waiting for the rest. */
	static const char binary[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\n";
	request_raw(AF_INET, port, binary, sizeof(binary) - 1, &r);
	check_error(&r, 400, "malformed request line");
	resp_free(&r);
	static const char badhdr[] = "GET /debug/pprof/heap HTTP/1.1\r\n"
	    "no colon here\r\n\r\n";
	request_raw(AF_INET, port, badhdr, sizeof(badhdr) - 1, &r);
	check_error(&r, 400, "malformed header");
	resp_free(&r);

	/* 9000 bytes of headers. */
	size_t big = 9000;
	char *req = malloc(big + 64);
	int n = snprintf(req, big + 64, "GET /debug/pprof/heap HTTP/1.1\r\n"
	    "X-Pad: ");
	memset(req + n, 'a', big);
	memcpy(req + n + big, "\r\n\r\n", 4);
	request_raw(AF_INET, port, req, (size_t)n + big + 4, &r);
	check_error(&r, 400, "request too large");
	resp_free(&r);
	/* Just under the limit is fine. */
	n = snprintf(req, big + 64, "GET /debug/malloc/stats HTTP/1.1\r\n"
	    "X-Pad: ");
	size_t pad = 8192 - (size_t)n - 4;
	memset(req + n, 'b', pad);
	memcpy(req + n + pad, "\r\n\r\n", 4);
	request_raw(AF_INET, port, req, (size_t)n + pad + 4, &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
	free(req);
}

/* Nothing a silent client does delays a scrape.  The deadline here is
 * prof_http_timeout_ms:60000 (prof_http.conf): the silent ones are still
 * open, unanswered, when the scrape comes back, which a server that read
 * them one after the other could not do.  408 itself: test_timeout. */
static void test_silent_client(void **state) {
	(void)state;
	unsigned port = http_port();
	int silent = connect_to(AF_INET, port);
	assert_true(silent >= 0);
	/* Say half a request too, on another connection. */
	int half = connect_to(AF_INET, port);
	assert_true(half >= 0);
	assert_true(send_all(half, "GET /debug/pprof/heap HTTP/1.1\r\n", 32));
	uint64_t t0 = mp_now_ns();
	resp_t r;
	get(port, "/debug/pprof/heap", &r);
	print_message("# scrape next to 2 silent clients: %.3f s\n",
	    (double)(mp_now_ns() - t0) / 1e9);
	CHECK_RESP(&r, 200);
	resp_free(&r);
	assert_false(has_news(silent));
	assert_false(has_news(half));
	/* The half request was kept: its end gets it answered. */
	assert_true(send_all(half, "\r\n", 2));
	read_response(half, &r);
	close(half);
	CHECK_RESP(&r, 200);
	char why[256];
	MP_ASSERT(profile_ok(&r, "inuse_space", true, why, sizeof(why)),
	    "%s", why);
	resp_free(&r);
	close(silent);
}

/* The case: 64 connections that each send part of a request
 * line and then nothing; three scrapes in a row all get their profile
 * while the 64 are still open and unanswered (their deadline is 60 s
 * here), so none of the scrapes waited for them, however fast or slow
 * the machine.  The times are printed for the record only. */
#define NIDLE 64

static void test_idle_connections(void **state) {
	(void)state;
	unsigned port = http_port();
	int idle[NIDLE];
	static const char part[] = "GET /debug/pprof/he";
	for (int i = 0; i < NIDLE; i++) {
		idle[i] = connect_to(AF_INET, port);
		assert_true(idle[i] >= 0);
		assert_true(send_all(idle[i], part, sizeof(part) - 1));
	}
	for (int k = 0; k < 3; k++) {
		uint64_t t0 = mp_now_ns();
		resp_t r;
		get(port, "/debug/pprof/heap", &r);
		print_message("# scrape %d: %.3f s\n", k + 1,
		    (double)(mp_now_ns() - t0) / 1e9);
		CHECK_RESP(&r, 200);
		char why[256];
		MP_ASSERT(profile_ok(&r, "inuse_space", true, why,
		    sizeof(why)), "scrape %d: %s", k + 1, why);
		resp_free(&r);
		int answered = 0;
		for (int i = 0; i < NIDLE; i++) {
			answered += has_news(idle[i]);
		}
		MP_ASSERT(answered == 0, "scrape %d: %d of the %d idle "
		    "connections answered or closed already", k + 1,
		    answered, NIDLE);
	}
	/* The server still holds every one, with what it said: the last
	 * one finishing its request gets the profile. */
	static const char rest[] = "ap HTTP/1.1\r\n\r\n";
	assert_true(send_all(idle[NIDLE - 1], rest, sizeof(rest) - 1));
	resp_t r;
	read_response(idle[NIDLE - 1], &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
	for (int i = 0; i < NIDLE; i++) {
		close(idle[i]);
	}
}

/*
 * 1,000 connections in a row, each saying part of a request and then
 * nothing, from 127.0.0.1 like everything here, while a thread keeps
 * allocating.  The server keeps at most PER_ADDR of one address open
 * (the oldest go first): once it has seen them all, at most PER_ADDR are
 * left open from the client's side, the newest among them; allocation
 * went on the whole time, a scrape still works, and the process's
 * memory grew by little (64 MiB: generous; the server's part is at most
 * 256 buffers of 8 KiB).
 */
#define NATTEMPTS 1000
#define PER_ADDR 128            /* PROF_HTTP_PER_ADDR, src/prof_http.c */

static atomic_bool churn_stop;
static atomic_size_t churn_ops;

static void *churn_main(void *arg) {
	(void)arg;
	void *keep[64];
	memset(keep, 0, sizeof(keep));
	size_t i = 0;
	while (!atomic_load(&churn_stop)) {
		size_t k = i++ % 64;
		free(keep[k]);
		keep[k] = malloc(opaque_size(16 + (i * 131) % 8000));
		MP_CHECK(keep[k] != NULL, "malloc");
		atomic_fetch_add(&churn_ops, 1);
	}
	for (size_t k = 0; k < 64; k++) {
		free(keep[k]);
	}
	return NULL;
}

/* Close, on our side, the connections the server closed; the number
 * still open. */
static size_t reap(int *fds, size_t n, size_t *dropped) {
	size_t open = 0;
	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0) {
			continue;
		}
		char buf[1024];
		ssize_t got;
		do {
			got = recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT);
		} while (got > 0);
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			open++;
			continue;
		}
		close(fds[i]);
		fds[i] = -1;
		(*dropped)++;
	}
	return open;
}

static size_t resident(void) {
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch);
	mallctl("epoch", &epoch, &sz, &epoch, sz);
	size_t res = 0;
	sz = sizeof(res);
	return mallctl("stats.resident", &res, &sz, NULL, 0) == 0 ? res : 0;
}

static void test_many_connections(void **state) {
	(void)state;
	unsigned port = http_port();
	/* Our side holds a few hundred sockets at most, the server's 256. */
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 4096 && rl.rlim_max > rl.rlim_cur) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	size_t rss0 = read_rss_bytes(), res0 = resident();
	atomic_store(&churn_stop, false);
	atomic_store(&churn_ops, 0);
	pthread_t churn;
	assert_int_equal(pthread_create(&churn, NULL, churn_main, NULL), 0);
	int *fds = malloc(NATTEMPTS * sizeof(*fds));
	assert_non_null(fds);
	size_t dropped = 0, max_open = 0, failed = 0;
	static const char part[] = "GET /debug/pprof/heap HTTP/1.1\r\nHost";
	for (size_t i = 0; i < NATTEMPTS; i++) {
		fds[i] = connect_to(AF_INET, port);
		if (fds[i] < 0 || !send_all(fds[i], part, sizeof(part) - 1)) {
			failed++;
		}
		if (i % 16 == 15) {
			size_t open = reap(fds, i + 1, &dropped);
			max_open = open > max_open ? open : max_open;
		}
	}
	size_t ops_storm = atomic_load(&churn_ops);
	assert_int_equal(failed, 0);

	resp_t r;
	get(port, "/debug/pprof/heap", &r);
	CHECK_RESP(&r, 200);
	char why[256];
	MP_ASSERT(profile_ok(&r, "inuse_space", true, why, sizeof(why)),
	    "%s", why);
	resp_free(&r);
	/* The server has accepted all of them by now (or will have soon:
	 * the bound only catches a server that never drops any). */
	size_t open = 0;
	for (int k = 0; k < 3000; k++) {
		open = reap(fds, NATTEMPTS, &dropped);
		if (open <= PER_ADDR) {
			break;
		}
		mp_sleep_ms(10);
	}
	print_message("# %d connections: %zu dropped by the server, %zu "
	    "left open (at most %zu seen open at once, backlog "
	    "included)\n", NATTEMPTS, dropped, open, max_open);
	MP_ASSERT(open <= PER_ADDR, "%zu connections still open, the "
	    "server keeps at most %d", open, PER_ADDR);
	assert_int_equal(dropped + open, NATTEMPTS);
	/* The oldest went first: the newest is still there. */
	assert_true(fds[NATTEMPTS - 1] >= 0);
	assert_false(has_news(fds[NATTEMPTS - 1]));

	atomic_store(&churn_stop, true);
	pthread_join(churn, NULL);
	MP_ASSERT(ops_storm > 0, "no allocation during the connections");
	assert_int_equal(atomic_load(&mp_failures), 0);
	size_t rss1 = read_rss_bytes(), res1 = resident();
	print_message("# resident: process %zu -> %zu KiB, allocator %zu -> "
	    "%zu KiB; %zu allocations meanwhile\n", rss0 >> 10, rss1 >> 10,
	    res0 >> 10, res1 >> 10, ops_storm);
	MP_ASSERT(rss0 != 0 && rss1 < rss0 + ((size_t)64 << 20),
	    "process resident %zu -> %zu bytes", rss0, rss1);
	MP_ASSERT(res1 < res0 + ((size_t)64 << 20),
	    "allocator resident %zu -> %zu bytes", res0, res1);
	for (size_t i = 0; i < NATTEMPTS; i++) {
		if (fds[i] >= 0) {
			close(fds[i]);
		}
	}
	free(fds);
	/* Still serving. */
	get(port, "/debug/malloc/stats", &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
}

static void test_client_goes_away(void **state) {
	(void)state;
	unsigned port = http_port();
	/* Half of them close right after sending the request (the
	 * response's first send draws a reset, the next one EPIPE), the
	 * others after reading a few bytes with a tiny receive buffer. */
	for (int i = 0; i < 10; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fd >= 0);
		int small = 1024;
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		struct sockaddr_in a;
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)),
		    0);
		static const char req[] = "GET /debug/malloc/stats HTTP/1.1"
		    "\r\n\r\n";
		assert_true(send_all(fd, req, sizeof(req) - 1));
		if (i % 2 == 1) {
			char buf[16];
			(void)!recv(fd, buf, sizeof(buf), 0);
		}
		close(fd);
	}
	/* Still alive, still serving. */
	resp_t r;
	get(port, "/debug/pprof/heap", &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
	sigset_t pend;
	sigemptyset(&pend);
	assert_int_equal(sigpending(&pend), 0);
	assert_false(sigismember(&pend, SIGPIPE));
}

/* ---- concurrency */

#define NCLIENTS 50
#define NALLOCATORS 4

static atomic_bool stop_alloc;
static unsigned conc_port;

static void *allocator_main(void *arg) {
	(void)arg;
	void *keep[64];
	memset(keep, 0, sizeof(keep));
	size_t i = 0;
	while (!atomic_load(&stop_alloc)) {
		size_t k = i++ % 64;
		free(keep[k]);
		keep[k] = malloc(opaque_size(16 + (i * 37) % 20000));
		MP_CHECK(keep[k] != NULL, "malloc");
	}
	for (size_t k = 0; k < 64; k++) {
		free(keep[k]);
	}
	return NULL;
}

static void *client_main(void *arg) {
	size_t i = (size_t)(uintptr_t)arg;
	resp_t r;
	get(conc_port, i % 5 == 4 ? "/debug/pprof/allocs" :
	    "/debug/pprof/heap", &r);
	char pb[256];
	const char *p = resp_problem(&r, pb, sizeof(pb));
	MP_CHECK(p == NULL, "client %zu: %s", i, p);
	MP_CHECK(r.status == 200, "client %zu: status %d", i, r.status);
	char why[256];
	if (r.status == 200) {
		MP_CHECK(profile_ok(&r, i % 5 == 4 ? "alloc_space" :
		    "inuse_space", true, why, sizeof(why)), "client %zu: %s",
		    i, why);
	}
	resp_free(&r);
	return NULL;
}

static void test_concurrent(void **state) {
	(void)state;
	conc_port = http_port();
	atomic_store(&stop_alloc, false);
	pthread_t al[NALLOCATORS], cl[NCLIENTS];
	for (size_t i = 0; i < NALLOCATORS; i++) {
		assert_int_equal(pthread_create(&al[i], NULL, allocator_main,
		    NULL), 0);
	}
	for (size_t i = 0; i < NCLIENTS; i++) {
		assert_int_equal(pthread_create(&cl[i], NULL, client_main,
		    (void *)(uintptr_t)i), 0);
	}
	for (size_t i = 0; i < NCLIENTS; i++) {
		pthread_join(cl[i], NULL);
	}
	atomic_store(&stop_alloc, true);
	for (size_t i = 0; i < NALLOCATORS; i++) {
		pthread_join(al[i], NULL);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* A forked child has no endpoint (prof.http_port ENOENT); the parent
 * keeps its own. */
static void test_fork(void **state) {
	(void)state;
	unsigned port = http_port();
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		void *x = malloc(100);
		free(x);
		unsigned cport = 0;
		size_t sz = sizeof(cport);
		int r = mallctl("prof.http_port", &cport, &sz, NULL, 0);
		char msg[64];
		int n = snprintf(msg, sizeof(msg), "%d %u\n", r, cport);
		(void)!write(p[1], msg, (size_t)n);
		_exit(0);
	}
	close(p[1]);
	char buf[64];
	size_t n;
	uint8_t *out = mp_read_fd_all(p[0], &n);
	close(p[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	snprintf(buf, sizeof(buf), "%.*s", (int)n, (char *)out);
	free(out);
	int r = -1;
	assert_int_equal(sscanf(buf, "%d", &r), 1);
	assert_int_equal(r, ENOENT);
	/* The parent still serves. */
	resp_t resp;
	get(port, "/debug/pprof/heap", &resp);
	CHECK_RESP(&resp, 200);
	resp_free(&resp);
	assert_int_equal(http_port(), port);
}

static void test_inactive_403(void **state) {
	(void)state;
	unsigned port = http_port();
	bool old;
	assert_int_equal(mp_prof_switch("prof.active", false, &old), 0);
	resp_t r;
	get(port, "/debug/pprof/heap", &r);
	check_error(&r, 403, "heap profiling not active");
	resp_free(&r);
	get(port, "/debug/pprof/allocs", &r);
	check_error(&r, 403, "heap profiling not active");
	resp_free(&r);
	get(port, "/debug/malloc/stats", &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
	assert_int_equal(mp_prof_switch("prof.active", true, NULL), 0);
	get(port, "/debug/pprof/heap", &r);
	CHECK_RESP(&r, 200);
	resp_free(&r);
}

/* ---- children with other options */

typedef struct {
	int status;
	char out[4096];
	char err[4096];
	unsigned nlines;         /* of err */
} child_t;

/* This program as `--child MODE` with conf as its only options. */
static void run_child(const char *mode, const char *conf, child_t *c) {
	memset(c, 0, sizeof(*c));
	/* The child writes little to stdout: stderr is read first. */
	c->status = mp_run_child_conf(mode, conf, c->err, sizeof(c->err),
	    c->out, sizeof(c->out), NULL);
	for (const char *p = c->err; *p != '\0'; p++)
		c->nlines += *p == '\n';
}

/* The child's side: read its port, then GET `path` from it over
 * `family` if the endpoint runs; prints "r=<mallctl> port=<p>
 * status=<s> <first body line>". */
/* The child's side of test_timeout: a silent connection and one with
 * half a request; a scrape meanwhile; then what the two get and when.
 * Prints "r=<mallctl> status=<scrape> silent=<s> half=<s> ms=<elapsed>
 * <the silent one's body line>". */
static int child_silent(void) {
	unsigned port = 0;
	size_t sz = sizeof(port);
	int r = mallctl("prof.http_port", &port, &sz, NULL, 0);
	uint64_t t0 = mp_now_ns();
	int silent = connect_to(AF_INET, port);
	int half = connect_to(AF_INET, port);
	if (half >= 0) {
		send_all(half, "GET /debug/pprof/heap HTTP/1.1\r\n", 32);
	}
	resp_t g, a, b;
	get(port, "/debug/pprof/heap", &g);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (silent >= 0) {
		read_response(silent, &a);
	}
	uint64_t ms = (mp_now_ns() - t0) / 1000000;
	if (half >= 0) {
		read_response(half, &b);
	}
	printf("r=%d status=%d silent=%d half=%d ms=%" PRIu64 " %.*s\n", r,
	    g.status, a.status, b.status, ms, a.body != NULL ?
	    (int)strcspn((char *)a.body, "\n") : 0,
	    a.body != NULL ? (char *)a.body : "");
	fflush(stdout);
	return 0;
}

static int child_main(const char *mode) {
	if (strcmp(mode, "silent") == 0) {
		return child_silent();
	}
	int family = strcmp(mode, "get6") == 0 ? AF_INET6 : AF_INET;
	const char *path = strcmp(mode, "allocs") == 0 ?
	    "/debug/pprof/allocs" : "/debug/pprof/heap";
	void *p = malloc(100);
	free(p);
	unsigned port = 0;
	size_t sz = sizeof(port);
	int r = mallctl("prof.http_port", &port, &sz, NULL, 0);
	int status = 0;
	char line[200] = "";
	if (r == 0 && strcmp(mode, "port") != 0) {
		char req[256];
		int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\n\r\n",
		    path);
		resp_t resp;
		request_raw(family, port, req, (size_t)n, &resp);
		status = resp.status;
		if (resp.body != NULL) {
			snprintf(line, sizeof(line), "%.*s", (int)strcspn(
			    (char *)resp.body, "\n"), (char *)resp.body);
		}
		resp_free(&resp);
	}
	printf("r=%d port=%u status=%d %s\n", r, port, status, line);
	fflush(stdout);
	return 0;
}

static int child_r(const child_t *c) {
	int r = -1;
	const char *p = strstr(c->out, "r=");
	if (p != NULL) {
		r = atoi(p + 2);
	}
	return r;
}

static int child_status(const child_t *c) {
	const char *p = strstr(c->out, "status=");
	return p != NULL ? atoi(p + 7) : -1;
}

static void test_allocs_without_accum(void **state) {
	(void)state;
	child_t c;
	run_child("allocs", "prof:true,prof_http:127.0.0.1:0", &c);
	assert_true(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
	assert_int_equal(c.nlines, 0);
	assert_int_equal(child_r(&c), 0);
	MP_ASSERT(child_status(&c) == 404, "%s", c.out);
	assert_non_null(strstr(c.out, "prof_accum:true"));
	/* The heap works there. */
	run_child("heap", "prof:true,prof_http::0", &c);
	MP_ASSERT(child_status(&c) == 200, "%s", c.out);
	/* Profiling off: the endpoint runs, the heap is 403. */
	run_child("heap", "prof_http:127.0.0.1:0", &c);
	MP_ASSERT(child_status(&c) == 403, "%s", c.out);
	assert_non_null(strstr(c.out, "heap profiling not active"));
}

static void test_ipv6(void **state) {
	(void)state;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a;
	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	a.sin6_addr = in6addr_loopback;
	bool have6 = fd >= 0 && bind(fd, (struct sockaddr *)&a,
	    sizeof(a)) == 0;
	if (fd >= 0) {
		close(fd);
	}
	if (!have6) {
		MP_SKIP("no IPv6 loopback here");
	}
	child_t c;
	run_child("get6", "prof:true,prof_http:[::1]:0", &c);
	assert_int_equal(c.nlines, 0);
	assert_int_equal(child_r(&c), 0);
	MP_ASSERT(child_status(&c) == 200, "%s", c.out);
}

static int child_field(const child_t *c, const char *name) {
	const char *p = strstr(c->out, name);
	return p != NULL ? atoi(p + strlen(name)) : -1;
}

/* A request that has not arrived within prof_http_timeout_ms of
 * connecting gets 408, after that long and not before (the default,
 * 2000, and a value given); the scrape in between is served. */
static void test_timeout(void **state) {
	(void)state;
	static const struct {
		const char *conf;
		int ms;
	} runs[] = {
		{"prof:true,prof_http:127.0.0.1:0", 2000},
		{"prof:true,prof_http:127.0.0.1:0,prof_http_timeout_ms:300",
		    300},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(runs); i++) {
		child_t c;
		run_child("silent", runs[i].conf, &c);
		assert_true(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
		assert_int_equal(c.nlines, 0);
		MP_ASSERT(child_r(&c) == 0 && child_status(&c) == 200, "%s",
		    c.out);
		MP_ASSERT(child_field(&c, "silent=") == 408 &&
		    child_field(&c, "half=") == 408, "%s", c.out);
		char want[64];
		snprintf(want, sizeof(want), "did not arrive within %d ms",
		    runs[i].ms);
		MP_ASSERT(strstr(c.out, want) != NULL, "want \"%s\": %s", want,
		    c.out);
		/* The server's clock starts after ours: never sooner. */
		MP_ASSERT(child_field(&c, "ms=") >= runs[i].ms, "%s", c.out);
		print_message("# prof_http_timeout_ms %d: 408 after %d ms\n",
		    runs[i].ms, child_field(&c, "ms="));
	}
	/* Out of range: one line, the default stays. */
	child_t c;
	run_child("port", "prof:true,prof_http:127.0.0.1:0,"
	    "prof_http_timeout_ms:50", &c);
	assert_true(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
	MP_ASSERT(c.nlines == 1 && strstr(c.err, "prof_http_timeout_ms") !=
	    NULL, "%s", c.err);
	assert_int_equal(child_r(&c), 0);
}

static void check_bad(const char *value, const char *why) {
	char conf[256];
	snprintf(conf, sizeof(conf), "prof:true,prof_http:%s", value);
	child_t c;
	run_child("port", conf, &c);
	MP_ASSERT(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
	    "%s: the process did not go on", value);
	MP_ASSERT(c.nlines == 1, "%s: %u lines: %s", value, c.nlines, c.err);
	MP_ASSERT(strncmp(c.err, "<malloc_prof>: ", 15) == 0, "%s", c.err);
	MP_ASSERT(strstr(c.err, "prof_http") != NULL, "%s", c.err);
	MP_ASSERT(strstr(c.err, why) != NULL, "want \"%s\": %s", why, c.err);
	MP_ASSERT(child_r(&c) == ENOENT, "%s: %s", value, c.out);
}

static void test_bad_values(void **state) {
	(void)state;
	check_bad("localhost:6060", "not resolved");
	check_bad("127.0.0.1", "expected HOST:PORT");
	check_bad("127.0.0.1:65536", "0 to 65535");
	check_bad("127.0.0.1:-1", "0 to 65535");
	check_bad("127.0.0.1:", "0 to 65535");
	check_bad("::1:6060", "in brackets");
	check_bad("[::1]", "expected [IPV6]:PORT");
	check_bad("[::g]:80", "not a numeric IPv6");
	check_bad("1.2.3.4.5:80", "not a numeric IPv4");
	/* Valid but taken: the parent's own port. */
	char v[64];
	snprintf(v, sizeof(v), "127.0.0.1:%u", http_port());
	check_bad(v, "cannot listen");
}

/* --disable-prof: the option is refused like every prof option, and
 * prof.http_port does not exist. */
static void test_noprof(void **state) {
	(void)state;
	unsigned port;
	size_t sz = sizeof(port);
	assert_int_equal(mallctl("prof.http_port", &port, &sz, NULL, 0),
	    ENOENT);
	child_t c;
	run_child("port", "prof_http:127.0.0.1:0", &c);
	assert_true(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0);
	MP_ASSERT(c.nlines == 1, "%u lines: %s", c.nlines, c.err);
	assert_non_null(strstr(c.err, "\"prof_http\" is not available"));
	assert_int_equal(child_r(&c), ENOENT);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		return child_main(argv[2]);
	}
	mp_test_init(240);
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest noprof[] = {
			cmocka_unit_test(test_noprof),
		};
		return mp_run_tests(noprof);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_port_and_option),
		cmocka_unit_test(test_heap),
		cmocka_unit_test(test_allocs),
		cmocka_unit_test(test_peak),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_symbol),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_silent_client),
		cmocka_unit_test(test_idle_connections),
		cmocka_unit_test(test_client_goes_away),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_many_connections),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_allocs_without_accum),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_inactive_403),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
