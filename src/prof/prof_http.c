/*
 * prof_http.c: the scrape endpoint (prof_http:HOST:PORT), a small HTTP/1.1
 * server on a thread of the allocator's own, so that continuous-profiling
 * agents (Parca, Pyroscope, Grafana Alloy, `go tool pprof`) can pull heap
 * profiles the way they pull them from Go services.  This file is the
 * server: the listening socket, the poll loop over connections, their
 * caps and deadlines, the request's framing (prof_http_parse_request) and
 * sending; what is served, and the route table, are prof_http_routes.c's,
 * handed to prof_http_boot (the server names no route).
 *
 * The server hands a route its parsed request (and a POST's body) and
 * gives it a narrow way to answer (prof_http_send_*).  A body longer
 * than a line (a profile, the statistics, symbols) is built into a memfd
 * first, then sent with its Content-Length and `Connection: close`: the
 * status is known before the first byte goes out, and a slow client
 * never holds prof_dump_mtx.
 *
 * Bounds, so that no client can stall or exhaust it.  One thread serves
 * everything: one poll over the listening socket and every open
 * connection, each with a buffer of its own, so that no connection waits
 * for another's request.  A request (request line, headers and a POST's
 * body) must arrive within opt_prof_http_timeout_ms of connecting, its
 * head in at most PROF_HTTP_REQ_MAX bytes.  At most PROF_HTTP_CONNS
 * connections are open, PROF_HTTP_PER_ADDR of them from one address;
 * past either, an old connection is dropped (http_victim: of the
 * address that holds the most), so a newcomer always gets in and a flood
 * from one address costs that address, not the others.  Responses are built
 * only once a request is complete, and sent one at a time (synchronously:
 * the body lives in the one memfd), each send bounded by SO_SNDTIMEO
 * (PROF_HTTP_SEND_STALL_MS without progress) and the whole response by
 * PROF_HTTP_SEND_TOTAL_MS: a client that does not read holds the thread
 * that long at most.  Writes use MSG_NOSIGNAL: a client that goes away
 * gets no SIGPIPE sent to the process.
 *
 * A route may answer later (prof_http_defer: a delta profile's window of
 * N seconds): its connection is parked in WAIT, without a buffer, with
 * the time to answer as its deadline, and the loop serves everyone else
 * meanwhile; at the deadline the route is called back to answer, or to
 * let go of its state if the client hung up.  At most PROF_HTTP_WAITS
 * are parked, and a parked connection is never dropped to make room.
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
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROF_HTTP_REQ_MAX 8192          /* request line + headers */
#define PROF_HTTP_CONNS 256             /* connections open at once */
#define PROF_HTTP_PER_ADDR 128          /* ... from one address (IPv6: /64) */
#define PROF_HTTP_BACKLOG 128
#define PROF_HTTP_ACCEPT_BATCH 64       /* accepts per turn of the loop */
#define PROF_HTTP_SEND_STALL_MS 2000    /* a send without progress */
#define PROF_HTTP_SEND_TOTAL_MS 10000   /* to send one response */
#define PROF_HTTP_LINGER_MS 200         /* reading what follows a reply */
#define PROF_HTTP_LINGER_MAX 262144     /* ... at most this much */
#define PROF_HTTP_HOST_MAX 64

char opt_prof_http[128] = "";
unsigned opt_prof_http_timeout_ms = 2000;

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
/* The routes (prof_http_boot's arguments): what a request asks for, and
 * its answer.  In .data: every process's boot writes them, and in .bss
 * they made a page of their own resident. */
static PROF_DATA prof_http_match_fn *http_match;
static PROF_DATA prof_http_serve_fn *http_serve;

/*
 * A connection, from accept to close:
 *   HEAD    its request line and headers arrive in buf[0..len);
 *   BODY    the head asked for a symbol POST: its body arrives in
 *           http_sym_body[0..have) (one connection at a time owns it);
 *   WAIT    a route deferred its answer (prof_http_defer: a delta
 *           profile's window) until deadline_ns; its state is in
 *           wait_state, nothing more is read, and a client that hangs
 *           up cancels it (as Go cancels the request's context);
 *   LINGER  answered and shut for writing: what the client still sends
 *           is read and dropped until it closes or deadline_ns, so that
 *           closing does not reset the connection before the client has
 *           read the response.
 * buf is base_malloc'd (PROF_HTTP_REQ_MAX bytes) at accept and given
 * back once the request is answered: memory for requests being read is
 * at most PROF_HTTP_CONNS buffers, and one (the spare) when nobody is
 * connected.
 */
typedef enum {
	HTTP_FREE,                       /* fd == -1 */
	HTTP_HEAD,
	HTTP_BODY,
	HTTP_WAIT,
	HTTP_LINGER
} http_state_t;

typedef struct prof_http_conn_s {
	int fd;                          /* -1: free slot */
	http_state_t state;
	uint64_t seq;                    /* accept order: lower is older */
	uint64_t deadline_ns;            /* HEAD, BODY: the whole request by
					  * then; LINGER: close by then */
	uint8_t addr[17];                /* family, then the peer's IPv4
					  * address or IPv6 /64 */
	char *buf;                       /* HEAD */
	size_t len;                      /* HEAD: bytes in buf; LINGER:
					  * bytes dropped */
	size_t clen;                     /* BODY: the body's length */
	size_t have;                     /* BODY: bytes of it received */
	void *wait_state;                /* WAIT: the route's */
} prof_http_conn_t;
static prof_http_conn_t http_conns[PROF_HTTP_CONNS];
/* The slots are marked free (fd -1) when the endpoint starts, not at
 * boot: 22 KiB of .bss that a process without the endpoint never
 * writes, so never makes resident (test/unit/http_conns_idle).  Read and
 * written under http_mtx or by the endpoint's thread, which exists only
 * after. */
static bool http_conns_ready;
static uint64_t http_seq;
/* A buffer kept from a closed connection for the next one (http_mtx). */
static char *http_spare_buf;
/* The connection in BODY, which owns http_sym_body; NULL: none. */
static prof_http_conn_t *http_sym_owner;
/* Connections in WAIT (at most PROF_HTTP_WAITS). */
static unsigned http_nwait;

/* Reused to copy bodies from the memfd to the socket. */
static char http_io_buf[65536];
/* The addresses of a POST /debug/pprof/symbol. */
static char http_sym_body[PROF_HTTP_BODY_MAX];

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
	case 503: return "Service Unavailable";
	}
	return "Error";
}

/* The head of a response into head[0..size): its length.  `extra`:
 * more header lines, each ending in \r\n. */
static int http_head(char *head, size_t size, int status, const char *ctype,
    const char *extra, size_t body_len) {
	return mp_snprintf(head, size, "HTTP/1.1 %d %s\r\n"
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "%s"
	    "Cache-Control: no-store\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "Connection: close\r\n\r\n", status, http_reason(status), ctype,
	    body_len, extra);
}

/* The response: the head, then the body from text (if not NULL) or from
 * the first body_len bytes of the memfd. */
static void http_respond_ex(int fd, int status, const char *ctype,
    const char *extra, const char *text, size_t body_len) {
	uint64_t deadline = os_now_ns() +
	    (uint64_t)PROF_HTTP_SEND_TOTAL_MS * 1000000u;
	char head[512];
	if (text != NULL)
		body_len = strlen(text);
	int n = http_head(head, sizeof(head), status, ctype, extra,
	    body_len);
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

/* A short error response (`line` ends in \n) in one send that never
 * waits: for a connection about to be closed to make room, whose send
 * buffer is empty (nothing was ever sent on it).  Best effort. */
static void http_send_now(int fd, int status, const char *line) {
	char msg[768];
	size_t len = strlen(line);
	int n = http_head(msg, sizeof(msg), status, "text/plain; "
	    "charset=utf-8", "", len);
	if (n < 0 || (size_t)n + len > sizeof(msg))
		return;
	memcpy(msg + n, line, len);
	(void)!send(fd, msg, (size_t)n + len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* ------------------------------------------------------------- bodies */

int prof_http_body_begin(char *why, size_t whysize) {
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
			return -1;
		}
	}
	if (ftruncate(http_body_fd, 0) != 0 ||
	    lseek(http_body_fd, 0, SEEK_SET) != 0) {
		mp_snprintf(why, whysize, "cannot buffer the response: %s",
		    prof_dump_strerror(errno, ebuf, sizeof(ebuf)));
		return -1;
	}
	return http_body_fd;
}

static size_t http_body_len(void) {
	off_t end = lseek(http_body_fd, 0, SEEK_CUR);
	return end > 0 ? (size_t)end : 0;
}

/* ---------------------------------------------------------- responses */

/* The connection a route answers on: the routes hold only the handle.
 * conn: the connection, when the route may defer its answer (not when
 * it is being resumed, or answered in passing). */
struct prof_http_resp_s {
	int fd;
	prof_http_conn_t *conn;
};

void prof_http_send_text(prof_http_resp_t *r, int status, const char *ctype,
    const char *extra, const char *text) {
	http_respond_ex(r->fd, status, ctype, extra, text, 0);
}

void prof_http_send_body(prof_http_resp_t *r, int status,
    const char *ctype) {
	http_respond_ex(r->fd, status, ctype, "", NULL, http_body_len());
}

void prof_http_send_error(prof_http_resp_t *r, int status,
    const char *fmt, ...) {
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = mp_vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n] = '\n';
	line[n + 1] = '\0';
	http_respond_ex(r->fd, status, "text/plain; charset=utf-8", "", line,
	    0);
}

/* ------------------------------------------------------------ requests */

static bool http_is_tchar(char c) {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || (c != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

#define HTTP_NUM_ABSENT (-1)
#define HTTP_NUM_BAD (-2)
#define HTTP_NUM_CONFLICT (-3)

/* The value of header `name` in the header lines hs[0..he), as a number,
 * or HTTP_NUM_ABSENT, HTTP_NUM_BAD (a value is not one decimal number),
 * HTTP_NUM_CONFLICT (lines with different values).  Lines repeating one
 * value count once: RFC 9112 6.3 lets a recipient take identical values
 * as one, and only a disagreement makes the framing ambiguous. */
static long long http_header_num(const char *hs, const char *he,
    const char *name) {
	size_t nlen = strlen(name);
	long long found = HTTP_NUM_ABSENT;
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
			if (d == v || d != le)
				return HTTP_NUM_BAD;
			if (found != HTTP_NUM_ABSENT && found != n)
				return HTTP_NUM_CONFLICT;
			found = n;
		}
		p = le + 1;
	}
	return found;
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

void prof_http_req_error(prof_http_req_t *req, int status,
    const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_vsnprintf(req->why, sizeof(req->why), fmt, ap);
	va_end(ap);
	req->route = PROF_HTTP_ERROR;
	req->status = status;
}

/* The complete head buf[0..head_len) (through the empty line). */
static void http_parse_head(const char *buf, size_t head_len,
    prof_http_match_fn *match, prof_http_req_t *req) {
	const char *nl = http_line_end(buf, head_len);
	size_t l1 = (size_t)(nl - buf);
	size_t l1_body = l1 > 0 && buf[l1 - 1] == '\r' ? l1 - 1 : l1;
	const char *method, *target;
	size_t mlen, tlen;
	if (!http_request_line(buf, l1_body, &method, &mlen, &target,
	    &tlen)) {
		prof_http_req_error(req, 400, "malformed request line: "
		    "expected \"GET /path HTTP/1.1\"");
		return;
	}
	/* Headers: from the line after the request line to the empty
	 * line (excluded). */
	const char *hs = nl + 1;
	const char *he = buf + head_len;
	he -= (he - hs >= 2 && he[-2] == '\r') ? 2 : 1;
	if (!http_headers_ok(hs, (size_t)(he - hs))) {
		prof_http_req_error(req, 400, "malformed header line");
		return;
	}
	/* The body's framing (RFC 9112 6.3), whatever the request: no
	 * chunked bodies, and one Content-Length that means one thing. */
	if (http_header_num(hs, he, "Transfer-Encoding") != HTTP_NUM_ABSENT) {
		prof_http_req_error(req, 400, "Transfer-Encoding is not "
		    "supported (no chunked request bodies): send "
		    "Content-Length");
		return;
	}
	long long clen = http_header_num(hs, he, "Content-Length");
	if (clen == HTTP_NUM_CONFLICT) {
		prof_http_req_error(req, 400, "conflicting Content-Length "
		    "headers: the body's length is ambiguous");
		return;
	}
	if (clen == HTTP_NUM_BAD) {
		prof_http_req_error(req, 400, "invalid Content-Length: "
		    "expected one decimal number");
		return;
	}
	/* What the request asks for is the routes' to say. */
	const char *q = memchr(target, '?', tlen);
	size_t plen = q != NULL ? (size_t)(q - target) : tlen;
	const char *query = q != NULL ? q + 1 : "";
	size_t qlen = q != NULL ? tlen - plen - 1 : 0;
	match(req, method, mlen, target, plen, query, qlen, clen);
}

void prof_http_parse_request(const char *buf, size_t len, size_t max,
    prof_http_match_fn *match, prof_http_req_t *req) {
	memset(req, 0, sizeof(*req));
	req->route = PROF_HTTP_MORE;
	size_t head = http_head_len(buf, len);
	if (head != 0) {
		req->head_len = head;
		http_parse_head(buf, head, match, req);
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
			prof_http_req_error(req, 400, "malformed request line: "
			    "expected \"GET /path HTTP/1.1\"");
			return;
		}
	}
	if (len >= max) {
		prof_http_req_error(req, 400, "request too large: the request "
		    "line and headers must fit in %zu bytes", max);
	}
}

/* ---------------------------------------------------------- connections */

/* c no longer needs its buffer: keep it for the next connection or give
 * it back.  http_mtx held. */
static void http_buf_release_locked(prof_http_conn_t *c) {
	if (c->buf == NULL)
		return;
	if (http_spare_buf == NULL)
		http_spare_buf = c->buf;
	else
		base_free(c->buf, PROF_HTTP_REQ_MAX);
	c->buf = NULL;
}

/* Close c and free its slot.  http_mtx held. */
static void http_close_locked(prof_http_conn_t *c) {
	close(c->fd);
	c->fd = -1;
	c->state = HTTP_FREE;
	http_buf_release_locked(c);
	if (http_sym_owner == c)
		http_sym_owner = NULL;
}

static void http_close(prof_http_conn_t *c) {
	mp_mutex_lock(&http_mtx);
	http_close_locked(c);
	mp_mutex_unlock(&http_mtx);
}

/* c has its answer: shut it for writing and linger (see the states). */
static void http_done(prof_http_conn_t *c) {
	(void)shutdown(c->fd, SHUT_WR);
	mp_mutex_lock(&http_mtx);
	http_buf_release_locked(c);
	if (http_sym_owner == c)
		http_sym_owner = NULL;
	mp_mutex_unlock(&http_mtx);
	c->state = HTTP_LINGER;
	c->len = 0;
	c->deadline_ns = os_now_ns() +
	    (uint64_t)PROF_HTTP_LINGER_MS * 1000000u;
	/* Give back the memory of the last body. */
	if (http_body_fd >= 0)
		(void)ftruncate(http_body_fd, 0);
}

/* The symbol POST's body is all in http_sym_body: answer. */
static void http_body_done(prof_http_conn_t *c) {
	prof_http_resp_t r = {c->fd, NULL};
	prof_http_req_t req = {.route = PROF_HTTP_SYMBOL_POST,
	    .clen = c->clen};
	http_serve(&r, &req, http_sym_body, c->have);
	http_done(c);
}

/* The head of a symbol POST is complete in c->buf: move what came of its
 * body to http_sym_body and read the rest there. */
static void http_body_start(prof_http_conn_t *c, const prof_http_req_t *req) {
	if (http_sym_owner != NULL) {
		/* One body buffer: 64 KiB per connection would make the
		 * endpoint's memory a client's choice. */
		http_respond_ex(c->fd, 503, "text/plain; charset=utf-8",
		    "Retry-After: 1\r\n", "another symbol request is being "
		    "received: retry in a moment\n", 0);
		http_done(c);
		return;
	}
	size_t have = c->len - req->head_len;
	if (have > req->clen)
		have = req->clen;
	memcpy(http_sym_body, c->buf + req->head_len, have);
	http_sym_owner = c;
	c->state = HTTP_BODY;
	c->clen = req->clen;
	c->have = have;
	mp_mutex_lock(&http_mtx);
	http_buf_release_locked(c);
	mp_mutex_unlock(&http_mtx);
	if (have == req->clen)
		http_body_done(c);
}

static bool http_again(ssize_t n) {
	return n < 0 && (errno == EINTR || errno == EAGAIN ||
	    errno == EWOULDBLOCK);
}

/* Up to room bytes of c's request into dst: how many, or 0 when there is
 * nothing to do now (none ready, or the client gone before its request was
 * complete: then c is closed). */
static size_t http_recv(prof_http_conn_t *c, char *dst, size_t room) {
	ssize_t n = recv(c->fd, dst, room, MSG_DONTWAIT);
	if (http_again(n))
		return 0;
	if (n <= 0) {
		http_close(c);
		return 0;
	}
	return (size_t)n;
}

static void http_read_head(prof_http_conn_t *c) {
	size_t n = http_recv(c, c->buf + c->len, PROF_HTTP_REQ_MAX - c->len);
	if (n == 0)
		return;
	c->len += n;
	prof_http_req_t req;
	prof_http_parse_request(c->buf, c->len, PROF_HTTP_REQ_MAX, http_match,
	    &req);
	if (req.route == PROF_HTTP_MORE)
		return;
	if (req.route == PROF_HTTP_SYMBOL_POST) {
		http_body_start(c, &req);
		return;
	}
	prof_http_resp_t r = {c->fd, c};
	http_serve(&r, &req, NULL, 0);
	if (c->state != HTTP_WAIT)
		http_done(c);
}

/* BODY: clen > have. */
static void http_read_body(prof_http_conn_t *c) {
	size_t n = http_recv(c, http_sym_body + c->have, c->clen - c->have);
	if (n == 0)
		return;
	c->have += n;
	if (c->have == c->clen)
		http_body_done(c);
}

/* LINGER: drop what the client still sends; close at its EOF, or when it
 * sends more than anyone answered would. */
static void http_read_linger(prof_http_conn_t *c) {
	for (unsigned k = 0; k < 4; k++) {
		ssize_t n = recv(c->fd, http_io_buf, sizeof(http_io_buf),
		    MSG_DONTWAIT);
		if (http_again(n))
			return;
		if (n <= 0 || (c->len += (size_t)n) > PROF_HTTP_LINGER_MAX)
			break;
	}
	http_close(c);
}

/* Something (data, EOF or an error) is there to read on c: read it
 * without waiting, and answer once the request is complete (or clearly
 * bad). */
static void http_read(prof_http_conn_t *c) {
	switch (c->state) {
	case HTTP_HEAD:
		http_read_head(c);
		break;
	case HTTP_BODY:
		http_read_body(c);
		break;
	case HTTP_LINGER:
		http_read_linger(c);
		break;
	case HTTP_WAIT:                  /* not polled for reading */
	case HTTP_FREE:
		break;
	}
}

/* ---------------------------------------------------- deferred answers */

bool prof_http_defer(prof_http_resp_t *r, uint64_t wait_ns, void *state) {
	prof_http_conn_t *c = r->conn;
	if (c == NULL || http_nwait >= PROF_HTTP_WAITS)
		return true;
	http_nwait++;
	c->state = HTTP_WAIT;
	c->wait_state = state;
	c->deadline_ns = os_now_ns() + wait_ns;
	mp_mutex_lock(&http_mtx);
	http_buf_release_locked(c);
	mp_mutex_unlock(&http_mtx);
	return false;
}

unsigned prof_http_waiting(void) {
	return http_nwait;
}

/* Take c's deferred state out of WAIT (the caller answers or closes). */
static void *http_wait_take(prof_http_conn_t *c) {
	void *state = c->wait_state;
	c->wait_state = NULL;
	c->state = HTTP_HEAD;
	http_nwait--;
	return state;
}

/* The route lets go of a deferred answer nobody will read. */
static void http_wait_cancel(prof_http_conn_t *c) {
	prof_http_req_t req = {.route = PROF_HTTP_RESUME,
	    .resume = http_wait_take(c), .cancel = true};
	prof_http_resp_t r = {-1, NULL};
	http_serve(&r, &req, NULL, 0);
}

/* c's wait is over: the route answers now. */
static void http_resume(prof_http_conn_t *c) {
	prof_http_req_t req = {.route = PROF_HTTP_RESUME,
	    .resume = http_wait_take(c)};
	prof_http_resp_t r = {c->fd, NULL};
	http_serve(&r, &req, NULL, 0);
	http_done(c);
}

/* Connections past their deadline: a request that is still incomplete
 * gets 408, a lingering connection is closed.  What arrived while the
 * thread was busy (sending a response, building a profile) is read first:
 * the deadline is the client's, not the thread's. */
static void http_expire(void) {
	uint64_t now = os_now_ns();
	for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
		prof_http_conn_t *c = &http_conns[i];
		if (c->fd < 0 || c->deadline_ns > now)
			continue;
		if (c->state == HTTP_LINGER) {
			http_close(c);
			continue;
		}
		if (c->state == HTTP_WAIT) {
			http_resume(c);
			continue;
		}
		http_read(c);
		if (c->fd < 0 || c->state == HTTP_LINGER)
			continue;
		prof_http_resp_t r = {c->fd, NULL};
		prof_http_send_error(&r, 408, "the request did not arrive "
		    "within %u ms", opt_prof_http_timeout_ms);
		http_done(c);
	}
}

/* The key connections are counted by: the family, then the IPv4 address
 * or the IPv6 /64 (one host may hold any number of addresses of its
 * /64). */
static void http_addr_key(const struct sockaddr_storage *ss,
    uint8_t key[17]) {
	memset(key, 0, 17);
	key[0] = (uint8_t)ss->ss_family;
	if (ss->ss_family == AF_INET) {
		memcpy(key + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(key + 1, &((const struct sockaddr_in6 *)ss)->sin6_addr,
		    8);
	}
}

/*
 * The connection to close so that one from `key` gets in, or NULL if it
 * fits: when key holds PROF_HTTP_PER_ADDR, key's oldest; else, in a full
 * table, the oldest answered (lingering) connection, or failing that the
 * oldest connection of the address that holds the most.  So a newcomer
 * always gets in, and a flood costs the flooding address first.  At most
 * PROF_HTTP_CONNS^2 comparisons, only when the table is full.
 */
static prof_http_conn_t *http_victim(const uint8_t *key) {
	prof_http_conn_t *oldest_same = NULL, *oldest_linger = NULL;
	unsigned same = 0, used = 0;
	for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
		prof_http_conn_t *c = &http_conns[i];
		if (c->fd < 0)
			continue;
		used++;
		/* A deferred answer is never dropped to make room: there are
		 * at most PROF_HTTP_WAITS of them. */
		if (c->state == HTTP_WAIT)
			continue;
		if (c->state == HTTP_LINGER && (oldest_linger == NULL ||
		    c->seq < oldest_linger->seq))
			oldest_linger = c;
		if (memcmp(c->addr, key, sizeof(c->addr)) == 0) {
			same++;
			if (oldest_same == NULL || c->seq < oldest_same->seq)
				oldest_same = c;
		}
	}
	if (same >= PROF_HTTP_PER_ADDR)
		return oldest_same;
	if (used < PROF_HTTP_CONNS)
		return NULL;
	if (oldest_linger != NULL)
		return oldest_linger;
	prof_http_conn_t *best = NULL;
	unsigned best_n = 0;
	for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
		prof_http_conn_t *c = &http_conns[i];
		if (c->state == HTTP_WAIT)
			continue;
		unsigned n = 0;
		bool oldest = true;
		for (unsigned j = 0; j < PROF_HTTP_CONNS && oldest; j++) {
			prof_http_conn_t *d = &http_conns[j];
			if (d->state == HTTP_WAIT ||
			    memcmp(d->addr, c->addr, sizeof(c->addr)) != 0)
				continue;
			n++;
			oldest = d->seq >= c->seq;
		}
		if (oldest && n > best_n) {
			best = c;
			best_n = n;
		}
	}
	return best;
}

/* Close v to make room; a request being read is told why (without
 * waiting: see http_send_now).  http_mtx held. */
static void http_evict_locked(prof_http_conn_t *v) {
	if (v->state != HTTP_LINGER)
		http_send_now(v->fd, 503, "dropped to make room: too many "
		    "connections open (this was the oldest of its address)\n");
	http_close_locked(v);
}

/* fd was just accepted from ss: give it a slot and a buffer, making room
 * if needed.  http_mtx held. */
static void http_admit_locked(int fd, const struct sockaddr_storage *ss) {
	if (http_spare_buf == NULL) {
		http_send_now(fd, 503, "out of memory for one more "
		    "connection\n");
		close(fd);
		return;
	}
	uint8_t key[17];
	http_addr_key(ss, key);
	prof_http_conn_t *v = http_victim(key);
	if (v != NULL)
		http_evict_locked(v);
	prof_http_conn_t *c = NULL;
	for (unsigned i = 0; i < PROF_HTTP_CONNS && c == NULL; i++) {
		if (http_conns[i].fd < 0)
			c = &http_conns[i];
	}
	if (c == NULL) {                 /* http_victim made room */
		close(fd);
		return;
	}
	/* Reads do not wait (poll); sends block, without progress for this
	 * long at most. */
	struct timeval tv = {PROF_HTTP_SEND_STALL_MS / 1000,
	    (PROF_HTTP_SEND_STALL_MS % 1000) * 1000};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->fd = fd;
	c->state = HTTP_HEAD;
	c->seq = ++http_seq;
	c->deadline_ns = os_now_ns() +
	    (uint64_t)opt_prof_http_timeout_ms * 1000000u;
	memcpy(c->addr, key, sizeof(c->addr));
	c->buf = http_spare_buf;
	http_spare_buf = NULL;
	c->len = 0;
	c->clen = 0;
	c->have = 0;
	c->wait_state = NULL;
}

/* Accept what waits in the backlog, a batch at a time: the open
 * connections are read between batches, so a flood of newcomers does not
 * push out a request that has already arrived. */
static void http_accept(void) {
	for (unsigned k = 0; k < PROF_HTTP_ACCEPT_BATCH; k++) {
		struct sockaddr_storage ss;
		socklen_t sslen = sizeof(ss);
		/* Under http_mtx from accept to the slot: fork sees the
		 * descriptor recorded or not at all. */
		mp_mutex_lock(&http_mtx);
		if (http_spare_buf == NULL)
			http_spare_buf = base_malloc(PROF_HTTP_REQ_MAX);
		int fd = accept4(http_lfd, (struct sockaddr *)&ss, &sslen,
		    SOCK_CLOEXEC);
		int err = errno;
		if (fd >= 0)
			http_admit_locked(fd, &ss);
		mp_mutex_unlock(&http_mtx);
		if (fd >= 0)
			continue;
		/* Out of descriptors or memory: back off instead of
		 * spinning on a listen socket that stays readable. */
		if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
		    err == ENOMEM)
			poll(NULL, 0, 100);
		return;
	}
}

/* The poll set: the listening socket, then every open connection. */
static struct pollfd http_pfd[1 + PROF_HTTP_CONNS];
static prof_http_conn_t *http_who[1 + PROF_HTTP_CONNS];

static void *http_main(void *arg) {
	(void)arg;
	/* Internal work for the thread's whole life (see the top). */
	mp_tsd.reentrancy++;
	pthread_setname_np(pthread_self(), "mp_prof_http");
	for (;;) {
		nfds_t n = 0;
		uint64_t next = UINT64_MAX;
		http_pfd[n] = (struct pollfd){http_lfd, POLLIN, 0};
		http_who[n++] = NULL;
		for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
			prof_http_conn_t *c = &http_conns[i];
			if (c->fd < 0)
				continue;
			if (c->deadline_ns < next)
				next = c->deadline_ns;
			/* WAIT: only a hang-up (POLLHUP, POLLERR are
			 * always reported). */
			http_pfd[n] = (struct pollfd){c->fd, c->state ==
			    HTTP_WAIT ? POLLRDHUP : POLLIN, 0};
			http_who[n++] = c;
		}
		uint64_t now = os_now_ns();
		int timeout = next == UINT64_MAX ? -1 : next <= now ? 0 :
		    (int)((next - now) / 1000000u) + 1;
		int r = poll(http_pfd, n, timeout);
		if (r < 0 && errno != EINTR)
			poll(NULL, 0, 100);     /* ENOMEM: back off */
		/* The connections first (handling one closes no other),
		 * then newcomers, then deadlines. */
		for (nfds_t i = 1; r > 0 && i < n; i++) {
			prof_http_conn_t *c = http_who[i];
			if (http_pfd[i].revents == 0 || c->fd != http_pfd[i].fd)
				continue;
			if (c->state == HTTP_WAIT) {
				/* The client hung up: nobody will read
				 * the answer. */
				http_wait_cancel(c);
				http_close(c);
			} else {
				http_read(c);
			}
		}
		if (r > 0 && http_pfd[0].revents != 0)
			http_accept();
		http_expire();
	}
	return NULL;
}

/* ------------------------------------------------------------ control */

MP_WARM bool prof_http_boot(prof_http_match_fn *match, prof_http_serve_fn *serve) {
	http_match = match;
	http_serve = serve;
	mp_mutex_init(&http_mtx, LOCK_RANK_PROF_HTTP);
	/* Stored only when it changes: a store of false made the page
	 * resident in every process. */
	bool pending = config_prof && opt_prof_http[0] != '\0';
	if (atomic_load(&http_start_pending) != pending)
		atomic_store(&http_start_pending, pending);
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
	if (!http_conns_ready) {
		for (unsigned i = 0; i < PROF_HTTP_CONNS; i++) {
			http_conns[i].fd = -1;
			http_conns[i].state = HTTP_FREE;
		}
		http_conns_ready = true;
	}

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

MP_WARM void prof_http_start_pending(void) {
	if (!atomic_load_explicit(&http_start_pending, memory_order_relaxed))
		return;
	/* Under the lock: a reader of prof.http_port that lost the race
	 * waits until the winner has bound the port. */
	mp_mutex_lock(&http_mtx);
	if (atomic_exchange(&http_start_pending, false))
		http_start_locked();
	mp_mutex_unlock(&http_mtx);
}

void prof_http_conns_extent(const void **addr, size_t *size) {
	*addr = http_conns;
	*size = sizeof(http_conns);
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
	for (unsigned i = 0; http_conns_ready && i < PROF_HTTP_CONNS; i++) {
		/* A deferred answer's state (a delta's snapshot and its
		 * hold) is the route's to let go of: the profiler's locks
		 * are usable again here (tsd.c's fork list). */
		if (http_conns[i].state == HTTP_WAIT)
			http_wait_cancel(&http_conns[i]);
		if (http_conns[i].fd >= 0)
			http_close_locked(&http_conns[i]);
	}
	http_nwait = 0;
	if (http_spare_buf != NULL)
		base_free(http_spare_buf, PROF_HTTP_REQ_MAX);
	http_spare_buf = NULL;
	http_sym_owner = NULL;
	atomic_store(&http_port, 0);
	atomic_store(&http_start_pending, false);
}
