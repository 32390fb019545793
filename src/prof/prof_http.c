/*
 * prof_http.c: the scrape endpoint (prof_http:HOST:PORT), a small HTTP/1.1
 * server on a thread of the allocator's own, so that continuous-profiling
 * agents (Parca, Pyroscope, Grafana Alloy, `go tool pprof`) can pull heap
 * profiles the way they pull them from Go services:
 *
 *   GET /debug/pprof/heap     the pprof profile (?format=heap_v2: jeprof)
 *   GET /debug/pprof/allocs   the same, alloc_space by default
 *                             (needs prof_accum)
 *   GET /debug/malloc/stats   malloc_stats_print's JSON
 *   GET, POST /debug/pprof/symbol   Go's symbol service: names of
 *                             addresses, which `go tool pprof` asks for
 *                             those it cannot name itself
 *
 * Nothing served changes the process.  Every response is built into a
 * memfd first (profiles by prof_dump_to_fd, which serializes with every
 * other dump), then sent with its Content-Length and `Connection: close`:
 * the status is known before the first byte goes out, and a slow client
 * never holds prof_dump_mtx.
 *
 * Bounds, so that no client can stall or exhaust it: requests (request
 * line and headers) of at most PROF_HTTP_REQ_MAX bytes; at most
 * PROF_HTTP_CONNS connections being read at once, the rest waiting in the
 * listen backlog; PROF_HTTP_TIMEOUT_MS to receive a whole request, and
 * each send bounded by SO_SNDTIMEO.  Responses are sent one at a time.
 * Writes use MSG_NOSIGNAL: a client that goes away gets no SIGPIPE sent
 * to the process.
 *
 * Like background_thread.c, the thread is started lazily, at a thread's
 * first slow-path allocation after initialisation (or the first read of
 * prof.http_port), never inside malloc_init, and with every signal
 * blocked.  It runs with its tsd->reentrancy raised for its whole life:
 * whatever it allocates is internal work, never sampled into the
 * program's profiles, and it fires no dump triggers.  After fork the
 * child does not run the endpoint (its port belongs to the parent); the
 * child closes its copies of the endpoint's descriptors.  No shutdown at
 * exit: the thread is detached and ends with the process.
 */
#include "malloc_prof/internal/internal.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROF_HTTP_REQ_MAX 8192          /* request line + headers */
#define PROF_HTTP_CONNS 8               /* connections read at once */
#define PROF_HTTP_BACKLOG 64
#define PROF_HTTP_TIMEOUT_MS 5000       /* to receive a request; per send */
#define PROF_HTTP_SEND_TOTAL_MS 30000   /* to send one response */
#define PROF_HTTP_LINGER_MS 200         /* reading what follows a reply */
#define PROF_HTTP_HOST_MAX 64
#define PROF_HTTP_SYM_BODY_MAX 65536    /* POST /debug/pprof/symbol */

char opt_prof_http[128] = "";

/*
 * State.  http_mtx guards every descriptor of the endpoint (listening
 * socket, connections, memfd) while it is created or closed, so that fork
 * (prefork takes it) sees each one either open and recorded or not at all,
 * and the child can close its copies.  http_port is what prof.http_port
 * reads: non-zero exactly while a thread serves in this process.
 * http_start_pending: the option asked for the endpoint and nobody has
 * tried to start it yet (cheap to check on allocation paths).
 */
static mp_mutex_t http_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_PROF_HTTP);
static _Atomic bool http_start_pending;
static _Atomic unsigned http_port;
static int http_lfd = -1;
static int http_body_fd = -1;

/* One connection whose request is being read: buf[0..len). */
typedef struct prof_http_conn_s {
	int fd;                          /* -1: free slot */
	size_t len;
	uint64_t deadline_ns;            /* the whole request by then */
	char buf[PROF_HTTP_REQ_MAX + 1];
} prof_http_conn_t;
static prof_http_conn_t http_conns[PROF_HTTP_CONNS];

/* Reused to copy bodies from the memfd to the socket. */
static char http_io_buf[65536];
/* The addresses of a POST /debug/pprof/symbol. */
static char http_sym_body[PROF_HTTP_SYM_BODY_MAX];

/* ------------------------------------------------------------- address */

static bool http_digits(const char *s, size_t len) {
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
	}
	return true;
}

/*
 * Parse HOST:PORT (v[0..len)) into *ss.  HOST is a numeric IPv4 address,
 * a bracketed IPv6 one, or empty (127.0.0.1); PORT is 0..65535 (0: any
 * free port).  No name lookup: resolving would need the resolver inside
 * the allocator.  true on error, with why[] saying what is wrong.
 */
static bool http_addr_parse(const char *v, size_t len,
    struct sockaddr_storage *ss, socklen_t *sslen, char *why,
    size_t whysize) {
	const char *host, *port;
	size_t hlen, plen;
	bool v6 = false;
	if (len > 0 && v[0] == '[') {
		const char *close = memchr(v, ']', len);
		if (close == NULL || close + 1 == v + len || close[1] != ':') {
			mp_snprintf(why, whysize, "expected [IPV6]:PORT, e.g. "
			    "[::1]:6060");
			return true;
		}
		host = v + 1;
		hlen = (size_t)(close - host);
		port = close + 2;
		v6 = true;
	} else {
		const char *colon = NULL;
		for (size_t i = 0; i < len; i++) {
			if (v[i] == ':')
				colon = v + i;
		}
		if (colon == NULL) {
			mp_snprintf(why, whysize, "expected HOST:PORT, e.g. "
			    "127.0.0.1:6060 (or :6060 for 127.0.0.1)");
			return true;
		}
		host = v;
		hlen = (size_t)(colon - v);
		port = colon + 1;
		if (memchr(host, ':', hlen) != NULL) {
			mp_snprintf(why, whysize, "an IPv6 address must be in "
			    "brackets, e.g. [::1]:6060");
			return true;
		}
	}
	plen = (size_t)(v + len - port);
	unsigned long p = 0;
	bool port_ok = http_digits(port, plen) && plen <= 5;
	for (size_t i = 0; port_ok && i < plen; i++)
		p = p * 10 + (unsigned long)(port[i] - '0');
	if (!port_ok || p > 65535) {
		mp_snprintf(why, whysize, "the port must be a number from 0 "
		    "to 65535 (0: any free port)");
		return true;
	}
	char h[PROF_HTTP_HOST_MAX];
	if (hlen >= sizeof(h) || (v6 && hlen == 0)) {
		mp_snprintf(why, whysize, "\"%.*s\" is not a numeric IPv4 or "
		    "IPv6 address", (int)(hlen < 32 ? hlen : 32), host);
		return true;
	}
	memcpy(h, host, hlen);
	h[hlen] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)p);
		if (inet_pton(AF_INET6, h, &a->sin6_addr) != 1) {
			mp_snprintf(why, whysize, "\"%s\" is not a numeric "
			    "IPv6 address", h);
			return true;
		}
		*sslen = sizeof(*a);
		return false;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)p);
	if (inet_pton(AF_INET, hlen == 0 ? "127.0.0.1" : h,
	    &a->sin_addr) != 1) {
		mp_snprintf(why, whysize, "\"%s\" is not a numeric IPv4 "
		    "address (host names are not resolved: give e.g. "
		    "127.0.0.1:6060 or [::1]:6060)", h);
		return true;
	}
	*sslen = sizeof(*a);
	return false;
}

bool prof_http_conf_check(const char *v, size_t len, char *why,
    size_t whysize) {
	if (len == 0)
		return false;           /* off */
	struct sockaddr_storage ss;
	socklen_t sslen;
	char w[200];
	if (!http_addr_parse(v, len, &ss, &sslen, w, sizeof(w)))
		return false;
	mp_snprintf(why, whysize, "%s; the endpoint is not started", w);
	return true;
}

/* ------------------------------------------------------------ sending */

/* Send all of p[0..n) before deadline_ns; false if the client is gone,
 * stalled past SO_SNDTIMEO, or the deadline passed. */
static bool http_send_all(int fd, const char *p, size_t n,
    uint64_t deadline_ns) {
	while (n > 0) {
		if (os_now_ns() > deadline_ns)
			return false;
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static const char *http_reason(int status) {
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 500: return "Internal Server Error";
	}
	return "Error";
}

/* The response: headers (`extra`: more header lines, each ending in
 * \r\n), then the body from text (if not NULL) or from the first
 * body_len bytes of the memfd. */
static void http_respond_ex(int fd, int status, const char *ctype,
    const char *extra, const char *text, size_t body_len) {
	uint64_t deadline = os_now_ns() +
	    (uint64_t)PROF_HTTP_SEND_TOTAL_MS * 1000000u;
	char head[512];
	if (text != NULL)
		body_len = strlen(text);
	int n = mp_snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n"
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "%s"
	    "Cache-Control: no-store\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "Connection: close\r\n\r\n", status, http_reason(status), ctype,
	    body_len, extra);
	if (!http_send_all(fd, head, (size_t)n, deadline))
		return;
	if (text != NULL) {
		(void)http_send_all(fd, text, body_len, deadline);
		return;
	}
	for (size_t off = 0; off < body_len;) {
		size_t want = body_len - off;
		if (want > sizeof(http_io_buf))
			want = sizeof(http_io_buf);
		ssize_t r = pread(http_body_fd, http_io_buf, want, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		if (!http_send_all(fd, http_io_buf, (size_t)r, deadline))
			return;
		off += (size_t)r;
	}
}

static void http_respond(int fd, int status, const char *ctype,
    const char *text, size_t body_len) {
	http_respond_ex(fd, status, ctype, "", text, body_len);
}

/* An error response: one line of text; `extra` header lines. */
static void http_error_ex(int fd, int status, const char *extra,
    const char *fmt, va_list ap) {
	char line[512];
	int n = mp_vsnprintf(line, sizeof(line) - 1, fmt, ap);
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n] = '\n';
	line[n + 1] = '\0';
	http_respond_ex(fd, status, "text/plain; charset=utf-8", extra, line,
	    0);
}

static void http_error(int fd, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void http_error(int fd, int status, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	http_error_ex(fd, status, "", fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------- bodies */

/* Empty the memfd (created on first use); false with why[] on error. */
static bool http_body_reset(char *why, size_t whysize) {
	char ebuf[128];
	if (http_body_fd < 0) {
		mp_mutex_lock(&http_mtx);
		http_body_fd = memfd_create("malloc_prof_http", MFD_CLOEXEC);
		int err = errno;
		mp_mutex_unlock(&http_mtx);
		if (http_body_fd < 0) {
			mp_snprintf(why, whysize, "cannot buffer the response "
			    "(memfd_create): %s",
			    prof_dump_strerror(err, ebuf, sizeof(ebuf)));
			return false;
		}
	}
	if (ftruncate(http_body_fd, 0) != 0 ||
	    lseek(http_body_fd, 0, SEEK_SET) != 0) {
		mp_snprintf(why, whysize, "cannot buffer the response: %s",
		    prof_dump_strerror(errno, ebuf, sizeof(ebuf)));
		return false;
	}
	return true;
}

static size_t http_body_len(void) {
	off_t end = lseek(http_body_fd, 0, SEEK_CUR);
	return end > 0 ? (size_t)end : 0;
}

typedef struct http_stats_out_s {
	int fd;
	int err;                 /* first write error */
} http_stats_out_t;

static void http_stats_write(void *opaque, const char *s) {
	http_stats_out_t *o = opaque;
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

/* ------------------------------------------------------------ requests */

static bool http_is_tchar(char c) {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || (c != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

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

static bool http_prof_active(void) {
	return config_prof && opt_prof &&
	    atomic_load_explicit(&prof_active, memory_order_relaxed);
}

/* GET /debug/pprof/heap or /allocs (alloc: sample_type alloc_space);
 * the format was checked by prof_http_parse_request. */
static void http_serve_profile(int fd, bool alloc, bool heap_v2) {
	prof_format_t format = heap_v2 ? PROF_FORMAT_HEAP_V2 :
	    PROF_FORMAT_PPROF;
	if (!http_prof_active()) {
		http_error(fd, 403, "heap profiling not active");
		return;
	}
	if (alloc && !opt_prof_accum) {
		http_error(fd, 404, "allocation profiles need prof_accum:true "
		    "in " MP_CONF_ENV " (freed samples are not counted)");
		return;
	}
	char err[256];
	if (!http_body_reset(err, sizeof(err))) {
		http_error(fd, 500, "%s", err);
		return;
	}
	if (prof_dump_to_fd(http_body_fd, format, alloc && format ==
	    PROF_FORMAT_PPROF ? "alloc_space" : NULL, err, sizeof(err))) {
		http_error(fd, 500, "cannot write the profile: %s", err);
		return;
	}
	http_respond(fd, 200, format == PROF_FORMAT_PPROF ?
	    "application/octet-stream" : "text/plain; charset=utf-8", NULL,
	    http_body_len());
}

static void http_serve_stats(int fd) {
	char err[256];
	if (!http_body_reset(err, sizeof(err))) {
		http_error(fd, 500, "%s", err);
		return;
	}
	http_stats_out_t o = {http_body_fd, 0};
	stats_print(http_stats_write, &o, "J");
	if (o.err != 0) {
		char ebuf[128];
		http_error(fd, 500, "cannot write the statistics: %s",
		    prof_dump_strerror(o.err, ebuf, sizeof(ebuf)));
		return;
	}
	http_respond(fd, 200, "application/json", NULL, http_body_len());
}

/* The value of header `name` in the header lines hs[0..he), as a number;
 * -1 if absent, -2 if not a number. */
static long long http_header_num(const char *hs, const char *he,
    const char *name) {
	size_t nlen = strlen(name);
	for (const char *p = hs; p < he;) {
		const char *nl = memchr(p, '\n', (size_t)(he - p));
		const char *le = nl != NULL ? nl : he;
		if ((size_t)(le - p) > nlen && strncasecmp(p, name, nlen) == 0 &&
		    p[nlen] == ':') {
			const char *v = p + nlen + 1;
			while (v < le && (*v == ' ' || *v == '\t'))
				v++;
			long long n = 0;
			const char *d = v;
			while (d < le && *d >= '0' && *d <= '9' && n < (1LL << 40))
				n = n * 10 + (*d++ - '0');
			while (d < le && (*d == ' ' || *d == '\t' || *d == '\r'))
				d++;
			return d == v || d != le ? -2 : n;
		}
		p = le + 1;
	}
	return -1;
}

/*
 * POST /debug/pprof/symbol, what `go tool pprof` asks for the addresses
 * it could not name from local binaries: the body is addresses joined by
 * '+', the answer one "0xADDR name" line per address that lies inside a
 * function of the dynamic symbol tables (dladdr1 with the symbol's size:
 * the nearest exported symbol before a static function is not its
 * name).  Reading the body blocks the other connections for at most the
 * request's time left; its length clen (Content-Length) was checked by
 * prof_http_parse_request: at most PROF_HTTP_SYM_BODY_MAX.
 */
static void http_serve_symbol(prof_http_conn_t *c, size_t head_len,
    size_t clen) {
	int fd = c->fd;
	/* What came with the head, then the rest. */
	size_t have = c->len - head_len;
	if (have > (size_t)clen)
		have = (size_t)clen;
	memcpy(http_sym_body, c->buf + head_len, have);
	while (have < (size_t)clen) {
		uint64_t now = os_now_ns();
		if (now >= c->deadline_ns) {
			http_error(fd, 408, "the request did not arrive within "
			    "%d ms", PROF_HTTP_TIMEOUT_MS);
			return;
		}
		struct pollfd pfd = {fd, POLLIN, 0};
		int r = poll(&pfd, 1, (int)((c->deadline_ns - now) /
		    1000000u) + 1);
		if (r < 0 && errno != EINTR)
			return;
		if (r <= 0)
			continue;
		ssize_t n = recv(fd, http_sym_body + have, (size_t)clen - have,
		    MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return;         /* gone */
		have += (size_t)n;
	}
	char err[256];
	if (!http_body_reset(err, sizeof(err))) {
		http_error(fd, 500, "%s", err);
		return;
	}
	http_stats_out_t o = {http_body_fd, 0};
	http_stats_write(&o, "num_symbols: 1\n");
	const char *p = http_sym_body, *end = http_sym_body + have;
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
			http_stats_write(&o, line);
		}
		p = te + (plus != NULL);
	}
	if (o.err != 0) {
		char ebuf[128];
		http_error(fd, 500, "cannot write the symbols: %s",
		    prof_dump_strerror(o.err, ebuf, sizeof(ebuf)));
		return;
	}
	http_respond(fd, 200, "text/plain; charset=utf-8", NULL,
	    http_body_len());
}

/*
 * Check the request line buf[0..len) (without its line end): METHOD SP
 * TARGET SP HTTP/1.x, tokens and printable characters only.  Sets the
 * method and target; false if malformed.
 */
static bool http_request_line(const char *buf, size_t len,
    const char **method, size_t *mlen, const char **target, size_t *tlen) {
	size_t i = 0;
	while (i < len && http_is_tchar(buf[i]))
		i++;
	if (i == 0 || i > 32 || i >= len || buf[i] != ' ')
		return false;
	*method = buf;
	*mlen = i;
	size_t t = ++i;
	while (i < len && buf[i] > ' ' && buf[i] < 0x7f)
		i++;
	if (i == t || i >= len || buf[i] != ' ')
		return false;
	*target = buf + t;
	*tlen = i - t;
	i++;
	return len - i == 8 && memcmp(buf + i, "HTTP/1.", 7) == 0 &&
	    buf[i + 7] >= '0' && buf[i + 7] <= '9';
}

/* Header lines buf[0..len), each ending in \n: "name: value". */
static bool http_headers_ok(const char *buf, size_t len) {
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			return false;
		const char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
		const char *q = p;
		while (q < le && http_is_tchar(*q))
			q++;
		if (q == p || q == le || *q != ':')
			return false;
		for (; q < le; q++) {
			unsigned char c = (unsigned char)*q;
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return false;
		}
		p = nl + 1;
	}
	return true;
}

/* End of the first line of buf[0..len) (the '\n'), or NULL. */
static const char *http_line_end(const char *buf, size_t len) {
	return memchr(buf, '\n', len);
}

/* Length of the head (through the empty line) if buf[0..len) holds one,
 * else 0. */
static size_t http_head_len(const char *buf, size_t len) {
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static void http_req_error(prof_http_req_t *req, int status,
    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void http_req_error(prof_http_req_t *req, int status,
    const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_vsnprintf(req->why, sizeof(req->why), fmt, ap);
	va_end(ap);
	req->route = PROF_HTTP_ERROR;
	req->status = status;
}

/* 405, naming the methods the path takes. */
static void http_req_not_allowed(prof_http_req_t *req, const char *allow,
    const char *method, size_t mlen) {
	http_req_error(req, 405, "method %.*s not allowed here (%s only): "
	    "the endpoint is read-only", (int)(mlen < 32 ? mlen : 32), method,
	    allow);
	req->allow = allow;
}

/* The complete head buf[0..head_len) (through the empty line). */
static void http_parse_head(const char *buf, size_t head_len,
    prof_http_req_t *req) {
	const char *nl = http_line_end(buf, head_len);
	size_t l1 = (size_t)(nl - buf);
	size_t l1_body = l1 > 0 && buf[l1 - 1] == '\r' ? l1 - 1 : l1;
	const char *method, *target;
	size_t mlen, tlen;
	if (!http_request_line(buf, l1_body, &method, &mlen, &target,
	    &tlen)) {
		http_req_error(req, 400, "malformed request line: expected "
		    "\"GET /path HTTP/1.1\"");
		return;
	}
	/* Headers: from the line after the request line to the empty
	 * line (excluded). */
	const char *hs = nl + 1;
	const char *he = buf + head_len;
	he -= (he - hs >= 2 && he[-2] == '\r') ? 2 : 1;
	if (!http_headers_ok(hs, (size_t)(he - hs))) {
		http_req_error(req, 400, "malformed header line");
		return;
	}
	bool get = mlen == 3 && memcmp(method, "GET", 3) == 0;
	bool post = mlen == 4 && memcmp(method, "POST", 4) == 0;
	const char *q = memchr(target, '?', tlen);
	size_t plen = q != NULL ? (size_t)(q - target) : tlen;
	const char *query = q != NULL ? q + 1 : "";
	size_t qlen = q != NULL ? tlen - plen - 1 : 0;
#define HTTP_PATH_IS(s) (plen == sizeof(s) - 1 && memcmp(target, s,	\
	sizeof(s) - 1) == 0)
	if (HTTP_PATH_IS("/debug/pprof/symbol")) {
		if (get) {
			req->route = PROF_HTTP_SYMBOL_GET;
		} else if (post) {
			if (http_header_num(hs, he, "Transfer-Encoding") != -1) {
				http_req_error(req, 400, "chunked request "
				    "bodies are not supported: send "
				    "Content-Length");
				return;
			}
			long long clen = http_header_num(hs, he,
			    "Content-Length");
			if (clen < 0) {
				http_req_error(req, 400, "a POST needs a valid "
				    "Content-Length");
				return;
			}
			if (clen > PROF_HTTP_SYM_BODY_MAX) {
				http_req_error(req, 400, "request body too "
				    "large: at most %d bytes of addresses",
				    PROF_HTTP_SYM_BODY_MAX);
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
	    HTTP_PATH_IS("/debug/pprof/allocs")) {
		const char *v;
		size_t vlen;
		if (http_query_get(query, qlen, "format", &v, &vlen)) {
			if (vlen == 7 && memcmp(v, "heap_v2", 7) == 0) {
				req->heap_v2 = true;
			} else if (!(vlen == 5 && memcmp(v, "pprof", 5) == 0)) {
				http_req_error(req, 400, "unknown format "
				    "\"%.*s\": expected pprof (the default) "
				    "or heap_v2", (int)(vlen < 40 ? vlen : 40),
				    v);
				return;
			}
		}
		req->route = HTTP_PATH_IS("/debug/pprof/heap") ?
		    PROF_HTTP_HEAP : PROF_HTTP_ALLOCS;
	} else if (HTTP_PATH_IS("/debug/malloc/stats")) {
		req->route = PROF_HTTP_STATS;
	} else {
		http_req_error(req, 404, "not found: %.*s (served: "
		    "/debug/pprof/heap, /debug/pprof/allocs, "
		    "/debug/pprof/symbol, /debug/malloc/stats)",
		    (int)(plen < 100 ? plen : 100), target);
	}
#undef HTTP_PATH_IS
}

void prof_http_parse_request(const char *buf, size_t len, size_t max,
    prof_http_req_t *req) {
	memset(req, 0, sizeof(*req));
	req->route = PROF_HTTP_MORE;
	size_t head = http_head_len(buf, len);
	if (head != 0) {
		req->head_len = head;
		http_parse_head(buf, head, req);
		return;
	}
	/* A complete first line that is not a request: say so now. */
	const char *nl = http_line_end(buf, len);
	const char *method, *target;
	size_t mlen, tlen;
	if (nl != NULL) {
		size_t l1 = (size_t)(nl - buf);
		if (l1 > 0 && buf[l1 - 1] == '\r')
			l1--;
		if (!http_request_line(buf, l1, &method, &mlen, &target,
		    &tlen)) {
			http_req_error(req, 400, "malformed request line: "
			    "expected \"GET /path HTTP/1.1\"");
			return;
		}
	}
	if (len >= max) {
		http_req_error(req, 400, "request too large: the request line "
		    "and headers must fit in %zu bytes", max);
	}
}

/* The request in c->buf is complete (head_len > 0: its head, through the
 * empty line) or cannot become one: answer it. */
static void http_handle(prof_http_conn_t *c, const prof_http_req_t *req) {
	int fd = c->fd;
	switch (req->route) {
	case PROF_HTTP_MORE:
		break;
	case PROF_HTTP_ERROR:
		if (req->allow != NULL) {
			char extra[64], line[sizeof(req->why) + 1];
			mp_snprintf(extra, sizeof(extra), "Allow: %s\r\n",
			    req->allow);
			mp_snprintf(line, sizeof(line), "%s\n", req->why);
			http_respond_ex(fd, 405, "text/plain; charset=utf-8",
			    extra, line, 0);
		} else {
			http_error(fd, req->status, "%s", req->why);
		}
		break;
	case PROF_HTTP_HEAP:
	case PROF_HTTP_ALLOCS:
		http_serve_profile(fd, req->route == PROF_HTTP_ALLOCS,
		    req->heap_v2);
		break;
	case PROF_HTTP_STATS:
		http_serve_stats(fd);
		break;
	case PROF_HTTP_SYMBOL_GET:
		http_respond(fd, 200, "text/plain; charset=utf-8",
		    "num_symbols: 1\n", 0);
		break;
	case PROF_HTTP_SYMBOL_POST:
		http_serve_symbol(c, req->head_len, req->clen);
		break;
	}
}

/* Done with c: stop sending, read (and drop) what the client still sends
 * for a moment, so that closing does not reset the connection before
 * the client has read the response; then close. */
static void http_finish(prof_http_conn_t *c) {
	(void)shutdown(c->fd, SHUT_WR);
	uint64_t until = os_now_ns() +
	    (uint64_t)PROF_HTTP_LINGER_MS * 1000000u;
	size_t drained = 0;
	for (;;) {
		uint64_t now = os_now_ns();
		if (now >= until || drained > sizeof(http_io_buf) * 4)
			break;
		struct pollfd pfd = {c->fd, POLLIN, 0};
		int r = poll(&pfd, 1, (int)((until - now) / 1000000u) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		ssize_t n = recv(c->fd, http_io_buf, sizeof(http_io_buf),
		    MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		drained += (size_t)n;
	}
	mp_mutex_lock(&http_mtx);
	close(c->fd);
	c->fd = -1;
	mp_mutex_unlock(&http_mtx);
	c->len = 0;
	/* Give back the memory of the last body. */
	if (http_body_fd >= 0)
		(void)ftruncate(http_body_fd, 0);
}

/* Data arrived on c: read it, and answer once the request is whole (or
 * clearly bad). */
static void http_read(prof_http_conn_t *c) {
	ssize_t n = recv(c->fd, c->buf + c->len, PROF_HTTP_REQ_MAX - c->len,
	    MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		/* Gone before the request was complete. */
		http_finish(c);
		return;
	}
	c->len += (size_t)n;
	prof_http_req_t req;
	prof_http_parse_request(c->buf, c->len, PROF_HTTP_REQ_MAX, &req);
	if (req.route == PROF_HTTP_MORE)
		return;
	http_handle(c, &req);
	http_finish(c);
}

static void http_accept(void) {
	prof_http_conn_t *c = NULL;
	for (unsigned i = 0; i < PROF_HTTP_CONNS && c == NULL; i++) {
		if (http_conns[i].fd < 0)
			c = &http_conns[i];
	}
	if (c == NULL)
		return;
	mp_mutex_lock(&http_mtx);
	int fd = accept4(http_lfd, NULL, NULL, SOCK_CLOEXEC);
	int err = errno;
	if (fd >= 0)
		c->fd = fd;
	mp_mutex_unlock(&http_mtx);
	if (fd < 0) {
		/* Out of descriptors or memory: back off instead of
		 * spinning on a listen socket that stays readable. */
		if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
		    err == ENOMEM)
			poll(NULL, 0, 100);
		return;
	}
	/* Reads are non-blocking (poll, with the request's deadline);
	 * sends block, for this long at most each. */
	struct timeval tv = {PROF_HTTP_TIMEOUT_MS / 1000,
	    (PROF_HTTP_TIMEOUT_MS % 1000) * 1000};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->len = 0;
	c->deadline_ns = os_now_ns() +
	    (uint64_t)PROF_HTTP_TIMEOUT_MS * 1000000u;
}

static void *http_main(void *arg) {
	(void)arg;
	/* Internal work for the thread's whole life (see the top). */
	mp_tsd.reentrancy++;
	pthread_setname_np(pthread_self(), "mp_prof_http");
	for (;;) {
		struct pollfd pfd[1 + PROF_HTTP_CONNS];
		prof_http_conn_t *who[1 + PROF_HTTP_CONNS];
		nfds_t n = 0;
		bool room = false;
		uint64_t now = os_now_ns(), next = UINT64_MAX;
		for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
			prof_http_conn_t *c = &http_conns[i];
			if (c->fd < 0) {
				room = true;
				continue;
			}
			if (c->deadline_ns <= now) {
				http_error(c->fd, 408, "the request did not "
				    "arrive within %d ms",
				    PROF_HTTP_TIMEOUT_MS);
				http_finish(c);
				room = true;
				continue;
			}
			if (c->deadline_ns < next)
				next = c->deadline_ns;
			pfd[n].fd = c->fd;
			pfd[n].events = POLLIN;
			pfd[n].revents = 0;
			who[n++] = c;
		}
		if (room) {
			pfd[n].fd = http_lfd;
			pfd[n].events = POLLIN;
			pfd[n].revents = 0;
			who[n++] = NULL;
		}
		int timeout = next == UINT64_MAX ? -1 :
		    (int)((next - now) / 1000000u) + 1;
		int r = poll(pfd, n, timeout);
		if (r <= 0)
			continue;
		for (nfds_t i = 0; i < n; i++) {
			if (pfd[i].revents == 0)
				continue;
			if (who[i] == NULL)
				http_accept();
			else if (who[i]->fd >= 0)
				http_read(who[i]);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------ control */

bool prof_http_boot(void) {
	mp_mutex_init(&http_mtx, LOCK_RANK_PROF_HTTP);
	for (unsigned i = 0; i < PROF_HTTP_CONNS; i++)
		http_conns[i].fd = -1;
	atomic_store(&http_start_pending, config_prof &&
	    opt_prof_http[0] != '\0');
	return false;
}

/* Bind, listen and create the thread.  http_mtx held. */
static void http_start_locked(void) {
	struct sockaddr_storage ss;
	socklen_t sslen;
	char why[200], ebuf[128];
	if (http_addr_parse(opt_prof_http, strlen(opt_prof_http), &ss, &sslen,
	    why, sizeof(why))) {
		/* conf checked it: only if set some other way. */
		mp_error("prof_http: %s; the endpoint is not started", why);
		return;
	}
	const char *step = "socket";
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC |
	    SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd >= 0) {
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
		    sizeof(one));
		if (ss.ss_family == AF_INET6)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			    sizeof(one));
		step = "bind";
		if (bind(fd, (struct sockaddr *)&ss, sslen) == 0) {
			step = "listen";
			if (listen(fd, PROF_HTTP_BACKLOG) == 0)
				step = NULL;
		}
	}
	if (step == NULL) {
		sslen = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0)
			step = "getsockname";
	}
	if (step != NULL) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		mp_error("prof_http: cannot listen on %s (%s): %s; the "
		    "endpoint is not started", opt_prof_http, step,
		    prof_dump_strerror(err, ebuf, sizeof(ebuf)));
		return;
	}
	unsigned port = ss.ss_family == AF_INET6 ?
	    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) :
	    ntohs(((struct sockaddr_in *)&ss)->sin_port);
	http_lfd = fd;

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* Signals stay with the program's threads; what pthread_create
	 * allocates is the allocator's business, not a program sample. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	mp_tsd.reentrancy++;
	pthread_t t;
	int err = pthread_create(&t, &attr, http_main, NULL);
	mp_tsd.reentrancy--;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err != 0) {
		close(http_lfd);
		http_lfd = -1;
		mp_error("prof_http: cannot create the thread: %s; the "
		    "endpoint is not started",
		    prof_dump_strerror(err, ebuf, sizeof(ebuf)));
		return;
	}
	atomic_store(&http_port, port);
}

void prof_http_start_pending(void) {
	if (!atomic_load_explicit(&http_start_pending, memory_order_relaxed))
		return;
	/* Under the lock: a reader of prof.http_port that lost the race
	 * waits until the winner has bound the port. */
	mp_mutex_lock(&http_mtx);
	if (atomic_exchange(&http_start_pending, false))
		http_start_locked();
	mp_mutex_unlock(&http_mtx);
}

unsigned prof_http_port(void) {
	return atomic_load(&http_port);
}

void prof_http_prefork(void) {
	pthread_mutex_lock(&http_mtx.lock);
}

void prof_http_postfork_parent(void) {
	pthread_mutex_unlock(&http_mtx.lock);
}

/* The child has no endpoint thread; its copies of the descriptors would
 * keep the parent's connections (and port) open: close them. */
void prof_http_postfork_child(void) {
	mp_mutex_postfork_child(&http_mtx);
	if (http_lfd >= 0)
		close(http_lfd);
	http_lfd = -1;
	if (http_body_fd >= 0)
		close(http_body_fd);
	http_body_fd = -1;
	for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
		if (http_conns[i].fd >= 0)
			close(http_conns[i].fd);
		http_conns[i].fd = -1;
	}
	atomic_store(&http_port, 0);
	atomic_store(&http_start_pending, false);
}
