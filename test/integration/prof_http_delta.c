/*
 * test/integration/prof_http_delta.c - the scrape endpoint's deltas
 * (?seconds=N on /debug/pprof/heap and /allocs, Go's net/http/pprof
 * semantics) and its index (/debug/pprof/).
 *
 * prof_http_delta.conf: prof:true,lg_prof_sample:10,
 * prof_http:127.0.0.1:0,prof_http_timeout_ms:60000 - without prof_accum,
 * so the allocs delta can only come from the samples taken in the window.
 *
 * A window: the test sends the delta request, waits until the index says
 * the window is open (its first snapshot is taken), then allocates at
 * site B (kept), allocates and frees at site C, frees what site D
 * allocated before, and has another request (the heap) answered while
 * the window is still open.  The delta holds B (allocated and live), C
 * (allocated, not live), D (live bytes negative), and not A, which
 * allocated before the window and did nothing in it; time_nanos and
 * duration_nanos are set.  Nothing depends on the machine's speed: every
 * wait is bounded by MP_WAIT_S, and a window that closed before the test
 * had done its part in it (a very slow machine) is retried with a longer
 * one rather than judged.  Bad N (letters, negative, zero, a fraction,
 * past the 300 s limit, on the peak profile, with debug or heap_v2) is a
 * one-line 400; a ninth delta while eight wait is 503; clients that hang
 * up cancel their windows, and so does a forked child (which has no
 * endpoint) for its copies; a prof.reset inside a window is a 500 naming
 * it (the snapshots do not compare).  The index lists the profiles in HTML and in
 * its text form (?debug=1), whose heap count matches the sampled
 * stacks; ?debug=1 on the heap is jeprof's text.
 */
#include "../test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define NOBJ 300

void delta_site_a(void **objs, size_t n);
void delta_site_b(void **objs, size_t n);
void delta_site_c(size_t n);
void delta_site_d(void **objs, size_t n);

MP_SITE void delta_site_a(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(4096 + i % 512));
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void delta_site_b(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(4096 + i % 512));
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void delta_site_c(size_t n) {
	for (size_t i = 0; i < n; i++) {
		void *p = malloc(opaque_size(4096 + i % 512));
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

MP_SITE void delta_site_d(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(4096 + i % 512));
	}
	__asm__ volatile("" : : : "memory");
}

static void *objs_a[NOBJ], *objs_b[NOBJ], *objs_d[NOBJ];

/* ---- the client (as prof_http.c's) */

typedef struct {
	int status;              /* 0: no valid response */
	char head[4096];
	uint8_t *body;
	size_t len;
	char err[160];
} resp_t;

static void resp_free(resp_t *r) {
	free(r->body);
	r->body = NULL;
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
		r->status = 0;
	}
}

static bool header_has(const resp_t *r, const char *line) {
	return strstr(r->head, line) != NULL;
}

static unsigned http_port(void) {
	unsigned port = 0;
	size_t sz = sizeof(port);
	assert_int_equal(mallctl("prof.http_port", &port, &sz, NULL, 0), 0);
	assert_true(port > 0 && port < 65536);
	return port;
}

/* Connect and send GET path; the connection, to read the answer from. */
static int send_get(const char *path) {
	int fd = mp_connect_loopback(AF_INET, http_port(), 10);
	MP_ASSERT(fd >= 0, "connect: %s", strerror(errno));
	char req[512];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: "
	    "127.0.0.1\r\n\r\n", path);
	MP_ASSERT(send_all(fd, req, (size_t)n), "send: %s", strerror(errno));
	return fd;
}

static void get(const char *path, resp_t *r) {
	memset(r, 0, sizeof(*r));
	int fd = send_get(path);
	read_response(fd, r);
	close(fd);
}

/* An error response: the status, text/plain, one line containing what. */
static void check_error(const char *path, int status, const char *what) {
	resp_t r;
	get(path, &r);
	const char *b = r.body != NULL ? (const char *)r.body : "";
	MP_ASSERT(r.status == status, "%s: status %d, want %d: %s", path,
	    r.status, status, b);
	MP_ASSERT(header_has(&r, "Content-Type: text/plain"), "%s", r.head);
	MP_ASSERT(r.len > 1 && b[r.len - 1] == '\n' &&
	    memchr(b, '\n', r.len - 1) == NULL, "not one line: \"%s\"", b);
	MP_ASSERT(strstr(b, what) != NULL, "%s: want \"%s\" in \"%s\"", path,
	    what, b);
	resp_free(&r);
}

/* The index's count of open delta windows (its text form). */
static unsigned windows_open(void) {
	resp_t r;
	get("/debug/pprof/?debug=1", &r);
	MP_ASSERT(r.status == 200, "index: status %d", r.status);
	const char *p = strstr((const char *)r.body, "# delta windows open: ");
	MP_ASSERT(p != NULL, "%s", (char *)r.body);
	unsigned n = (unsigned)atoi(p + 22);
	resp_free(&r);
	return n;
}

/* Wait (bounded) until the index shows want windows open. */
static void wait_windows(unsigned want) {
	uint64_t t0 = mp_now_ns();
	unsigned n;
	while ((n = windows_open()) != want) {
		MP_ASSERT(!mp_waited_too_long(t0), "%u windows open after "
		    "%d s, want %u", n, MP_WAIT_S, want);
		mp_sleep_ms(10);
	}
}

/* ---- reading a delta */

typedef struct {
	int64_t alloc, inuse;    /* alloc_space, inuse_space */
	size_t nsamples;
} site_sum_t;

/* The values of the samples whose first frames hold fn. */
static site_sum_t site_sum(const mp_pprof_t *pp, const void *fn) {
	site_sum_t s = {0, 0, 0};
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	int ia = mp_pprof_type(pp, "alloc_space");
	int iu = mp_pprof_type(pp, "inuse_space");
	for (size_t i = 0; i < pp->nsamples; i++) {
		const mp_pp_sample_t *smp = &pp->samples[i];
		for (size_t k = 0; k < smp->nlocs && k < 4; k++) {
			const mp_pp_loc_t *l = mp_pprof_loc(pp, smp->locs[k]);
			if (l != NULL && l->address >= lo && l->address < hi) {
				s.alloc += ia >= 0 ? smp->vals[ia] : 0;
				s.inuse += iu >= 0 ? smp->vals[iu] : 0;
				s.nsamples++;
				break;
			}
		}
	}
	return s;
}

/*
 * One window of `seconds` on path: what the test does inside it (B, C,
 * D and a heap request) and the delta read back into *pp.  false if the
 * window closed before the test had done its part (then nothing is
 * judged, and B's objects are freed).
 */
static bool delta_window(const char *path, unsigned seconds, mp_pprof_t *pp,
    uint64_t *wall0, uint64_t *wall1) {
	char url[128];
	snprintf(url, sizeof(url), "%s?seconds=%u", path, seconds);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	*wall0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	int fd = send_get(url);
	wait_windows(1);
	delta_site_b(objs_b, NOBJ);
	delta_site_c(NOBJ);
	mp_free_all(objs_d, NOBJ);
	/* Another request is served while the window is open. */
	resp_t h;
	get("/debug/pprof/heap", &h);
	MP_ASSERT(h.status == 200, "heap during the window: %d", h.status);
	resp_free(&h);
	bool in_time = windows_open() == 1;
	resp_t r;
	memset(&r, 0, sizeof(r));
	read_response(fd, &r);
	close(fd);
	clock_gettime(CLOCK_REALTIME, &ts);
	*wall1 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	MP_ASSERT(r.status == 200, "%s: status %d: %s", url, r.status,
	    r.body != NULL ? (char *)r.body : r.err);
	MP_ASSERT(header_has(&r, "Content-Type: application/octet-stream"),
	    "%s", r.head);
	bool ok = mp_pprof_decode(r.body, r.len, pp);
	MP_ASSERT(ok, "decode (%zu bytes): %s", r.len, pp->err);
	resp_free(&r);
	if (!in_time) {
		mp_pprof_free(pp);
		mp_free_all(objs_b, NOBJ);
		delta_site_d(objs_d, NOBJ);
	}
	return in_time;
}

/* A delta on path, retried with longer windows on a slow machine. */
static void delta_run(const char *path, mp_pprof_t *pp, unsigned *secs,
    uint64_t *wall0, uint64_t *wall1) {
	static const unsigned windows[] = {2, 5, 15, 40};
	for (size_t i = 0; i < MP_ARRAY_SIZE(windows); i++) {
		*secs = windows[i];
		if (delta_window(path, windows[i], pp, wall0, wall1)) {
			return;
		}
		mp_write_line("window closed before the test was done in "
		    "it: retrying with a longer one");
	}
	MP_FAIL("every window closed before the test was done in it");
}

/* ---- the tests */

static int setup(void **state) {
	(void)state;
	delta_site_a(objs_a, NOBJ);
	delta_site_d(objs_d, NOBJ);
	return 0;
}

static void check_delta(const mp_pprof_t *pp, const char *def,
    unsigned secs, uint64_t wall0, uint64_t wall1) {
	MP_ASSERT(pp->ntypes == 4 && mp_pprof_type(pp, "alloc_space") >= 0 &&
	    mp_pprof_type(pp, "inuse_space") >= 0 &&
	    mp_pprof_type(pp, "alloc_objects") >= 0 &&
	    mp_pprof_type(pp, "inuse_objects") >= 0, "%zu sample types",
	    pp->ntypes);
	MP_ASSERT(strcmp(pp->default_type, def) == 0, "default %s, want %s",
	    pp->default_type, def);
	/* Go's: time_nanos the second snapshot's, duration the window. */
	MP_ASSERT(pp->duration_nanos >= (int64_t)secs * 1000000000 - 50000000
	    && (uint64_t)pp->duration_nanos <= wall1 - wall0 + 50000000,
	    "duration %" PRId64 " ns for a %u s window (%" PRIu64 " ns "
	    "around it)", pp->duration_nanos, secs, wall1 - wall0);
	MP_ASSERT((uint64_t)pp->time_nanos >= wall0 &&
	    (uint64_t)pp->time_nanos <= wall1, "time_nanos %" PRId64
	    " outside [%" PRIu64 ", %" PRIu64 "]", pp->time_nanos, wall0,
	    wall1);
	site_sum_t a = site_sum(pp, (void *)delta_site_a);
	site_sum_t b = site_sum(pp, (void *)delta_site_b);
	site_sum_t c = site_sum(pp, (void *)delta_site_c);
	site_sum_t d = site_sum(pp, (void *)delta_site_d);
	/* 300 objects of 4-4.5 KiB at lg_prof_sample:10: about 1,300
	 * samples a site, ~1.2 MiB; the estimates are within a few %. */
	MP_ASSERT(a.nsamples == 0, "site A (before the window) in the "
	    "delta: %zu samples, alloc %" PRId64 ", inuse %" PRId64,
	    a.nsamples, a.alloc, a.inuse);
	MP_ASSERT(b.alloc > 1000000 && b.inuse > 1000000 &&
	    b.alloc < 2000000 && b.inuse == b.alloc, "site B: alloc %" PRId64
	    ", inuse %" PRId64, b.alloc, b.inuse);
	MP_ASSERT(c.alloc > 1000000 && c.alloc < 2000000 && c.inuse == 0,
	    "site C: alloc %" PRId64 ", inuse %" PRId64, c.alloc, c.inuse);
	MP_ASSERT(d.alloc == 0 && d.inuse < -1000000 && d.inuse > -2000000,
	    "site D (freed in the window): alloc %" PRId64 ", inuse %"
	    PRId64, d.alloc, d.inuse);
}

/* allocs?seconds=N without prof_accum: the window's allocations. */
static void test_allocs_delta(void **state) {
	(void)state;
	mp_pprof_t pp;
	unsigned secs;
	uint64_t w0, w1;
	delta_run("/debug/pprof/allocs", &pp, &secs, &w0, &w1);
	check_delta(&pp, "alloc_space", secs, w0, w1);
	mp_pprof_free(&pp);
	/* Without a window, allocs still needs prof_accum. */
	check_error("/debug/pprof/allocs", 404, "?seconds=N");
	mp_free_all(objs_b, NOBJ);
	delta_site_d(objs_d, NOBJ);
	wait_windows(0);
}

static void test_heap_delta(void **state) {
	(void)state;
	mp_pprof_t pp;
	unsigned secs;
	uint64_t w0, w1;
	delta_run("/debug/pprof/heap", &pp, &secs, &w0, &w1);
	check_delta(&pp, "inuse_space", secs, w0, w1);
	mp_pprof_free(&pp);
	mp_free_all(objs_b, NOBJ);
	delta_site_d(objs_d, NOBJ);
}

static void test_bad_seconds(void **state) {
	(void)state;
	check_error("/debug/pprof/heap?seconds=abc", 400, "positive integer");
	check_error("/debug/pprof/heap?seconds=-1", 400, "positive integer");
	check_error("/debug/pprof/heap?seconds=0", 400, "positive integer");
	check_error("/debug/pprof/allocs?seconds=", 400, "positive integer");
	check_error("/debug/pprof/heap?seconds=1.5", 400, "positive integer");
	check_error("/debug/pprof/heap?seconds=99999999999", 400,
	    "positive integer");
	check_error("/debug/pprof/heap?seconds=301", 400, "300 seconds");
	check_error("/debug/pprof/peak?seconds=1", 400, "peak");
	check_error("/debug/pprof/heap?seconds=1&debug=1", 400,
	    "incompatible");
	check_error("/debug/pprof/heap?seconds=1&format=heap_v2", 400,
	    "incompatible");
	check_error("/debug/pprof/heap?debug=x", 400, "\"debug\"");
	/* None of them opened a window. */
	assert_int_equal(windows_open(), 0);
}

/* Eight windows wait; a ninth is refused; hanging up cancels them. */
static void test_window_limit(void **state) {
	(void)state;
	int fds[8];
	for (size_t i = 0; i < MP_ARRAY_SIZE(fds); i++) {
		fds[i] = send_get("/debug/pprof/heap?seconds=300");
	}
	wait_windows(8);
	resp_t r;
	get("/debug/pprof/allocs?seconds=1", &r);
	MP_ASSERT(r.status == 503, "ninth window: %d %s", r.status,
	    r.body != NULL ? (char *)r.body : "");
	MP_ASSERT(header_has(&r, "Retry-After: 1"), "%s", r.head);
	resp_free(&r);
	/* No answer yet on any of the eight. */
	for (size_t i = 0; i < MP_ARRAY_SIZE(fds); i++) {
		struct pollfd p = {fds[i], POLLIN, 0};
		assert_int_equal(poll(&p, 1, 0), 0);
		close(fds[i]);
	}
	wait_windows(0);
	/* The endpoint goes on as before. */
	get("/debug/pprof/heap", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
}

/* fork while a window is open: the child lets go of the window (its
 * snapshot and its hold on freed stacks' counts: the child has no
 * endpoint) and goes on allocating; the parent's window is unchanged. */
static void test_fork_in_window(void **state) {
	(void)state;
	int fd = send_get("/debug/pprof/heap?seconds=300");
	wait_windows(1);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *objs[NOBJ];
		delta_site_b(objs, NOBJ);
		mp_free_all(objs, NOBJ);
		delta_site_c(NOBJ);
		_exit(0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x",
	    st);
	assert_int_equal(windows_open(), 1);
	close(fd);
	wait_windows(0);
}

/* prof.reset inside a window: the two snapshots do not compare. */
static void test_reset_in_window(void **state) {
	(void)state;
	static const unsigned windows[] = {2, 5, 15, 40};
	for (size_t i = 0; i < MP_ARRAY_SIZE(windows); i++) {
		char url[64];
		snprintf(url, sizeof(url), "/debug/pprof/heap?seconds=%u",
		    windows[i]);
		int fd = send_get(url);
		wait_windows(1);
		assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0),
		    0);
		bool in_time = windows_open() == 1;
		resp_t r;
		memset(&r, 0, sizeof(r));
		read_response(fd, &r);
		close(fd);
		if (in_time) {
			MP_ASSERT(r.status == 500 && r.body != NULL &&
			    strstr((char *)r.body, "prof.reset") != NULL,
			    "%d %s", r.status, r.body != NULL ?
			    (char *)r.body : "");
			resp_free(&r);
			return;
		}
		resp_free(&r);
	}
	MP_FAIL("every window closed before the reset");
}

static void test_index(void **state) {
	(void)state;
	static const char *const names[] = {"allocs", "heap", "peak",
	    "symbol", "stats"};
	resp_t r;
	get("/debug/pprof/", &r);
	MP_ASSERT(r.status == 200, "index: %d", r.status);
	MP_ASSERT(header_has(&r, "Content-Type: text/html"), "%s", r.head);
	const char *b = (const char *)r.body;
	assert_non_null(strstr(b, "<table>"));
	assert_non_null(strstr(b, "</html>"));
	assert_non_null(strstr(b, "href=\"/debug/pprof/heap?debug=1\""));
	assert_non_null(strstr(b, "href=\"/debug/pprof/allocs?debug=1\""));
	for (size_t i = 0; i < MP_ARRAY_SIZE(names); i++) {
		char want[64];
		snprintf(want, sizeof(want), ">%s</a>", names[i]);
		MP_ASSERT(strstr(b, want) != NULL, "no %s in the index",
		    names[i]);
	}
	resp_free(&r);
	/* The same without the slash. */
	get("/debug/pprof", &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr((char *)r.body, ">heap</a>"));
	resp_free(&r);

	/* The text form: a row per profile; the heap's count is its
	 * stacks (A's and D's at least), allocs' is - (no prof_accum). */
	get("/debug/pprof/?debug=1", &r);
	MP_ASSERT(r.status == 200, "index text: %d", r.status);
	MP_ASSERT(header_has(&r, "Content-Type: text/plain"), "%s", r.head);
	b = (const char *)r.body;
	for (size_t i = 0; i < MP_ARRAY_SIZE(names); i++) {
		char want[64];
		snprintf(want, sizeof(want), "\n%s\t", names[i]);
		MP_ASSERT(strstr(b, want) != NULL, "no %s row: %s", names[i],
		    b);
	}
	const char *heap = strstr(b, "\nheap\t");
	long n = heap != NULL ? atol(heap + 6) : -1;
	MP_ASSERT(n >= 2, "heap count %ld: %s", n, b);
	assert_non_null(strstr(b, "\nallocs\t-\t/debug/pprof/allocs\t"));
	resp_free(&r);

	/* ?debug=1 on a profile: jeprof's text. */
	get("/debug/pprof/heap?debug=1", &r);
	assert_int_equal(r.status, 200);
	MP_ASSERT(strncmp((char *)r.body, "heap_v2/", 8) == 0, "%.60s",
	    (char *)r.body);
	resp_free(&r);
}

static void test_noprof(void **state) {
	(void)state;
	MP_SKIP("the profiler is not built in (no endpoint)");
}

int main(void) {
	mp_test_init(300);
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest noprof[] = {
			cmocka_unit_test(test_noprof),
		};
		return mp_run_tests(noprof);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_seconds),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_allocs_delta),
		cmocka_unit_test(test_heap_delta),
		cmocka_unit_test(test_window_limit),
		cmocka_unit_test(test_fork_in_window),
		cmocka_unit_test(test_reset_in_window),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
