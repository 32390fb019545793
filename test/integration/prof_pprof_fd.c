/*
 * test/integration/prof_pprof_fd.c - prof.dump_fd, and pprof values at a
 * real sampling rate.
 *
 * prof_pprof_fd.conf: prof:true,lg_prof_sample:10,prof_accum:true,
 * prof_format:pprof.  Profiles written to a pipe, a memfd and a socket
 * are read back and decoded; at 2^10 the values are unbiased estimates,
 * and their totals must equal what jeprof computes (test_util.h's
 * mp_heap_unbias, per stack, rounded) from a heap_v2 dump of the same
 * moment, for inuse and alloc.  A closed, negative, read-only or broken
 * (pipe without reader) descriptor fails with EFAULT and one message line
 * naming the cause, and the next dump works.  When `go` is installed,
 * `go tool pprof -top` names the biggest call site first and `-raw`
 * lists the four sample types; without it that test skips.
 */
#include "../test_util.h"

#include <sys/mman.h>
#include <sys/socket.h>

static char tmpdir[256];

#define NSMALL 4000
#define NBIG 20

void fd_small_site(void **objs, size_t n);
void fd_big_site(void **objs, size_t n);

MP_SITE void fd_small_site(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(100 + i % 200));
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void fd_big_site(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(100000));
	}
	__asm__ volatile("" : : : "memory");
}

static void *small[NSMALL], *big[NBIG];

static int dump_fd(int fd) {
	return mallctl("prof.dump_fd", NULL, NULL, (void *)&fd, sizeof(fd));
}

static int set_format(const char *f) {
	return mallctl("prof.format", NULL, NULL, (void *)&f, sizeof(f));
}

static int setup(void **state) {
	(void)state;
	fd_small_site(small, NSMALL);
	fd_big_site(big, NBIG);
	/* Half of the small ones go: alloc > inuse. */
	for (size_t i = 0; i < NSMALL; i += 2) {
		free(small[i]);
		small[i] = NULL;
	}
	return 0;
}

static void decode_fd(int fd, mp_pprof_t *pp) {
	size_t n;
	uint8_t *b = mp_read_fd_all(fd, &n);
	bool ok = mp_pprof_decode(b, n, pp);
	free(b);
	MP_ASSERT(ok, "fd %d (%zu bytes): %s", fd, n, pp->err);
}

/* jeprof's totals from a heap_v2 dump: each stack scaled, rounded. */
static void jeprof_totals(const mp_heap_t *h, int64_t out[4]) {
	memset(out, 0, 4 * sizeof(out[0]));
	for (size_t i = 0; i < h->nstacks; i++) {
		const mp_cnts_t *c = &h->stacks[i].total;
		double n, s;
		mp_heap_unbias(c->co, c->cb, h->rate, &n, &s);
		out[0] += llround(n);
		out[1] += llround(s);
		mp_heap_unbias(c->ao, c->ab, h->rate, &n, &s);
		out[2] += llround(n);
		out[3] += llround(s);
	}
}

static void test_pipe_matches_heap_v2(void **state) {
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	/* Room for the whole profile: the dump is read after the heap_v2
	 * one, so that nothing is allocated (and sampled) in between. */
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	char heap[512];
	snprintf(heap, sizeof(heap), "%s/same.heap", tmpdir);
	assert_int_equal(dump_fd(p[1]), 0);
	assert_int_equal(set_format("heap_v2"), 0);
	assert_int_equal(mp_prof_dump(heap), 0);
	assert_int_equal(set_format("pprof"), 0);
	close(p[1]);
	mp_pprof_t pp;
	decode_fd(p[0], &pp);
	close(p[0]);
	mp_heap_t h;
	MP_HEAP_PARSE(heap, &h);

	assert_int_equal(pp.ntypes, 4);
	assert_string_equal(pp.type[0], "inuse_objects");
	assert_string_equal(pp.type[1], "inuse_space");
	assert_string_equal(pp.type[2], "alloc_objects");
	assert_string_equal(pp.unit[2], "count");
	assert_string_equal(pp.type[3], "alloc_space");
	assert_string_equal(pp.unit[3], "bytes");
	assert_int_equal(pp.period, 1024);
	assert_int_equal(h.rate, 1024);
	assert_string_equal(pp.default_type, "inuse_space");
	/* No prof_symbolize: no function table, pprof names them. */
	assert_int_equal(pp.nfns, 0);

	int64_t want[4], got[4] = {0, 0, 0, 0};
	jeprof_totals(&h, want);
	assert_int_equal(pp.nsamples, h.nstacks);
	for (size_t i = 0; i < pp.nsamples; i++) {
		assert_int_equal(pp.samples[i].nvals, 4);
		for (int k = 0; k < 4; k++) {
			got[k] += pp.samples[i].vals[k];
		}
	}
	for (int k = 0; k < 4; k++) {
		MP_ASSERT(got[k] == want[k], "%s: pprof %" PRId64 ", jeprof %"
		    PRId64, pp.type[k], got[k], want[k]);
	}
	/* The estimates are estimates of what the test holds: the big
	 * site's 2 MB within a few percent (nearly all sampled). */
	assert_true(got[1] > (int64_t)(NBIG * 100000) * 9 / 10);
	assert_true(got[3] > got[1]);
	mp_pprof_free(&pp);
	mp_heap_free(&h);
}

static void test_memfd_and_socket(void **state) {
	(void)state;
	int m = memfd_create("mp_pprof", MFD_CLOEXEC);
	assert_true(m >= 0);
	assert_int_equal(dump_fd(m), 0);
	assert_true(lseek(m, 0, SEEK_SET) == 0);
	mp_pprof_t pp;
	decode_fd(m, &pp);
	assert_true(pp.nsamples >= 2);
	mp_pprof_free(&pp);
	close(m);

	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    sv), 0);
	int sz = 1 << 20;
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	assert_int_equal(dump_fd(sv[0]), 0);
	close(sv[0]);
	decode_fd(sv[1], &pp);
	assert_true(pp.nsamples >= 2);
	mp_pprof_free(&pp);
	close(sv[1]);

	/* heap_v2 goes to descriptors too. */
	m = memfd_create("mp_heap", MFD_CLOEXEC);
	assert_true(m >= 0);
	assert_int_equal(set_format("heap_v2"), 0);
	assert_int_equal(dump_fd(m), 0);
	assert_int_equal(set_format("pprof"), 0);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", m);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_true(h.nstacks >= 2);
	mp_heap_free(&h);
	close(m);
}

/* One call that must fail with EFAULT and print exactly one line that
 * names the descriptor and contains `why`. */
static void check_bad_fd(int fd, const char *why) {
	mp_msgs_start();
	int r = dump_fd(fd);
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	assert_int_equal(mp_msgs_lines, 1);
	char head[96];
	snprintf(head, sizeof(head), "<malloc_prof>: prof.dump_fd: cannot "
	    "write to fd %d: ", fd);
	MP_ASSERT(strncmp(mp_msgs, head, strlen(head)) == 0, "%s", mp_msgs);
	MP_ASSERT(strstr(mp_msgs, why) != NULL, "want \"%s\": %s", why,
	    mp_msgs);
}

static void test_bad_fds(void **state) {
	(void)state;
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	close(fd);
	check_bad_fd(fd, "Bad file descriptor");
	check_bad_fd(-1, "Bad file descriptor");
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	check_bad_fd(fd, "read-only");
	close(fd);
	/* A pipe nobody reads: EPIPE, and no SIGPIPE kills or waits. */
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	check_bad_fd(p[1], "Broken pipe");
	close(p[1]);
	sigset_t pend;
	sigemptyset(&pend);
	assert_int_equal(sigpending(&pend), 0);
	assert_false(sigismember(&pend, SIGPIPE));
	/* /dev/full: the write error itself. */
	fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		check_bad_fd(fd, "No space left on device");
		close(fd);
	}
	/* Wrong calls. */
	int v = 1;
	size_t sz = sizeof(v);
	mp_msgs_start();
	assert_int_equal(mallctl("prof.dump_fd", NULL, NULL, NULL, 0), EINVAL);
	assert_int_equal(mallctl("prof.dump_fd", NULL, NULL, (void *)&v, 2),
	    EINVAL);
	assert_int_equal(mallctl("prof.dump_fd", (void *)&v, &sz, NULL, 0),
	    EPERM);
	mp_msgs_stop();
	assert_int_equal(mp_msgs_lines, 3);
	/* And the next dump works. */
	int m = memfd_create("mp_after", MFD_CLOEXEC);
	assert_true(m >= 0);
	assert_int_equal(dump_fd(m), 0);
	assert_true(lseek(m, 0, SEEK_SET) == 0);
	mp_pprof_t pp;
	decode_fd(m, &pp);
	mp_pprof_free(&pp);
	close(m);
}

/* Runs cmd, returns its output (malloc'd) or NULL. */
static char *run_capture(const char *cmd) {
	FILE *f = popen(cmd, "r");
	if (f == NULL) {
		return NULL;
	}
	mp_bytes_t b = {NULL, 0, 0};
	int c;
	while ((c = fgetc(f)) != EOF) {
		mp_bytes_put(&b, (uint8_t)c);
	}
	mp_bytes_put(&b, 0);
	if (pclose(f) != 0) {
		free(b.p);
		return NULL;
	}
	return (char *)b.p;
}

static void test_go_pprof(void **state) {
	(void)state;
	if (system("command -v go >/dev/null 2>&1") != 0) {
		MP_SKIP("go is not installed (Debian: golang-go)");
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/go.pb.gz", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "PPROF_TMPDIR='%s' go tool pprof "
	    "-symbolize=local -top -nodecount=5 '%s' 2>&1", tmpdir, path);
	char *out = run_capture(cmd);
	MP_ASSERT(out != NULL, "go tool pprof -top failed");
	/* The first row after the "flat flat%" header is the top function. */
	const char *hdr = strstr(out, "flat%");
	MP_ASSERT(hdr != NULL, "no table: %s", out);
	const char *row = strchr(hdr, '\n');
	assert_non_null(row);
	const char *eol = strchr(row + 1, '\n');
	size_t len = eol != NULL ? (size_t)(eol - row - 1) : strlen(row + 1);
	char first[256];
	snprintf(first, sizeof(first), "%.*s", (int)len, row + 1);
	MP_ASSERT(strstr(first, "fd_big_site") != NULL, "top row \"%s\"; "
	    "output:\n%s", first, out);
	free(out);

	snprintf(cmd, sizeof(cmd), "PPROF_TMPDIR='%s' go tool pprof -raw "
	    "'%s' 2>&1", tmpdir, path);
	out = run_capture(cmd);
	MP_ASSERT(out != NULL, "go tool pprof -raw failed");
	MP_ASSERT(strstr(out, "inuse_objects/count inuse_space/bytes[dflt] "
	    "alloc_objects/count alloc_space/bytes") != NULL, "%s", out);
	MP_ASSERT(strstr(out, "PeriodType: space bytes") != NULL, "%s", out);
	MP_ASSERT(strstr(out, "Period: 1024") != NULL, "%s", out);
	free(out);
}

int main(void) {
	mp_test_init(300);
	if (!MALLOC_PROF_CONFIG_PROF) {
		printf("1..1\nok 1 - no profiler in this build (prof_pprof "
		    "checks the ENOENT of prof.dump_fd)\n");
		return 0;
	}
	if (!mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_prof_pprof_fd")) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipe_matches_heap_v2),
		cmocka_unit_test(test_memfd_and_socket),
		cmocka_unit_test(test_bad_fds),
		cmocka_unit_test(test_go_pprof),
	};
	int r = cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
	mp_tmpdir_remove(tmpdir);
	return r;
}
