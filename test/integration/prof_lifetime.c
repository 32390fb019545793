/*
 * test/integration/prof_lifetime.c - the lifetime profile
 * (prof.lifetimes.dump, GET /debug/pprof/lifetimes).
 *
 * prof_lifetime.conf: prof:true,lg_prof_sample:0 (every allocation is a
 * sample, so counts are exact), prof_time_resolution:high, and the
 * endpoint on an ephemeral port.  short_site allocates and frees at once
 * in a loop; long_site keeps its objects across one 1.1 s sleep, frees
 * half and keeps half.  Nothing depends on the machine's speed: a free
 * "at once" may take longer than 1 ms on a loaded machine, so short_site
 * must have >= 90% of its objects in the buckets up to 100 ms, and
 * long_site all of its freed objects in ">1s" (they lived through the
 * sleep, whatever the load) and the kept ones in "live".  prof.reset
 * starts the counts over; threads churning while dumps are taken are
 * all counted; NULL dumps to an automatic .l0.pb.gz name; the
 * endpoint serves the profile.
 */
#include "../test_util.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define SHORT_N 2000
#define LONG_N 40

void short_site(void);
void *long_site(void);

#define USE(p) __asm__ volatile("" : : "r"(p) : "memory")

MP_SITE void short_site(void) {
	void *p = malloc(96);
	USE(p);
	free(p);
}

MP_SITE void *long_site(void) {
	void *p = malloc(200);
	USE(p);
	return p;
}

static char tmpdir[256];

static bool leaf_in(const mp_pprof_t *pp, const mp_pp_sample_t *s,
    uintptr_t lo, uintptr_t hi) {
	if (s->nlocs == 0)
		return false;
	const mp_pp_loc_t *l = mp_pprof_loc(pp, s->locs[0]);
	return l != NULL && l->address >= lo && l->address < hi;
}

static const char *label_of(const mp_pp_sample_t *s, const char *key) {
	for (size_t j = 0; j < s->nlabels && j < MP_PP_LABELS; j++) {
		if (strcmp(s->lkey[j], key) == 0)
			return s->lstr[j];
	}
	return NULL;
}

static const char *const buckets[] = {"<1ms", "1-10ms", "10-100ms",
    "100ms-1s", ">1s", "live"};
#define NB 6

/* Objects per bucket of the samples whose leaf is in fn. */
static void site_buckets(const mp_pprof_t *pp, const void *fn,
    int64_t out[NB]) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	int objs = mp_pprof_type(pp, "alloc_objects");
	assert_true(objs >= 0);
	memset(out, 0, NB * sizeof(out[0]));
	for (size_t i = 0; i < pp->nsamples; i++) {
		const mp_pp_sample_t *s = &pp->samples[i];
		if (!leaf_in(pp, s, lo, hi))
			continue;
		const char *b = label_of(s, "lifetime");
		MP_ASSERT(b != NULL, "a sample without the lifetime label");
		int k;
		for (k = 0; k < NB && strcmp(buckets[k], b) != 0; k++)
			;
		MP_ASSERT(k < NB, "unknown bucket \"%s\"", b);
		out[k] += s->vals[objs];
	}
}

static void *kept[LONG_N];

static void test_buckets(void **state) {
	(void)state;
	for (int i = 0; i < LONG_N; i++)
		kept[i] = long_site();
	for (int i = 0; i < SHORT_N; i++)
		short_site();
	struct timespec ts = {1, 100000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	for (int i = 0; i < LONG_N / 2; i++)
		free(kept[i]);

	char path[512];
	snprintf(path, sizeof(path), "%s/named.pb.gz", tmpdir);
	const char *name = path;
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL,
	    (void *)&name, sizeof(name)), 0);
	mp_pprof_t pp;
	MP_PPROF_LOAD(path, &pp);
	assert_true(mp_pprof_type(&pp, "alloc_space") >= 0);
	int64_t sb[NB], lb[NB];
	site_buckets(&pp, (const void *)short_site, sb);
	site_buckets(&pp, (const void *)long_site, lb);
	int64_t short_fast = sb[0] + sb[1] + sb[2], short_all = 0;
	for (int k = 0; k < NB; k++)
		short_all += sb[k];
	MP_ASSERT(short_all == SHORT_N, "short_site: %lld objects, expected "
	    "%d", (long long)short_all, SHORT_N);
	MP_ASSERT(short_fast * 10 >= short_all * 9, "short_site: only %lld "
	    "of %lld objects freed within 100 ms", (long long)short_fast,
	    (long long)short_all);
	MP_ASSERT(sb[5] == 0, "short_site: %lld live", (long long)sb[5]);
	MP_ASSERT(lb[4] == LONG_N / 2 && lb[5] == LONG_N / 2 && lb[0] +
	    lb[1] + lb[2] + lb[3] == 0, "long_site: %lld >1s, %lld live, "
	    "%lld shorter", (long long)lb[4], (long long)lb[5],
	    (long long)(lb[0] + lb[1] + lb[2] + lb[3]));
	/* The freed ones carry their lifetimes: >= 1.1 s. */
	uintptr_t lo, hi;
	mp_fn_range((const void *)long_site, &lo, &hi);
	bool seen = false;
	for (size_t i = 0; i < pp.nsamples; i++) {
		const mp_pp_sample_t *s = &pp.samples[i];
		if (!leaf_in(&pp, s, lo, hi))
			continue;
		for (size_t j = 0; j < s->nlabels && j < MP_PP_LABELS; j++) {
			if (strcmp(s->lkey[j], "lifetime_min") == 0) {
				assert_true(s->lnum[j] >= 1100000000);
				seen = true;
			}
		}
	}
	assert_true(seen);
	mp_pprof_free(&pp);
	for (int i = LONG_N / 2; i < LONG_N; i++)
		free(kept[i]);
}

/* prof.reset starts the counts over: short_site's earlier frees are
 * gone, and an object sampled before the reset and freed after it is not
 * counted (its counts belong to the old epoch). */
static void test_reset(void **state) {
	(void)state;
	void *old = long_site();
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	free(old);
	for (int i = 0; i < 100; i++)
		short_site();
	char path[512];
	snprintf(path, sizeof(path), "%s/reset.pb.gz", tmpdir);
	const char *name = path;
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL,
	    (void *)&name, sizeof(name)), 0);
	mp_pprof_t pp;
	MP_PPROF_LOAD(path, &pp);
	int64_t sb[NB], lb[NB], n = 0;
	site_buckets(&pp, (const void *)short_site, sb);
	site_buckets(&pp, (const void *)long_site, lb);
	for (int k = 0; k < NB; k++) {
		n += sb[k];
		MP_ASSERT(lb[k] == 0, "long_site: %lld in %s after the reset",
		    (long long)lb[k], buckets[k]);
	}
	MP_ASSERT(n == 100, "short_site: %lld objects since the reset, "
	    "expected 100", (long long)n);
	mp_pprof_free(&pp);
}

/* Four threads churn at short_site while the main thread dumps: every
 * free is counted once (the table's lock), and the dumps are whole. */
#define CHURN_THREADS 4
#define CHURN_N 1000

static void *churn(void *arg) {
	(void)arg;
	for (int i = 0; i < CHURN_N; i++)
		short_site();
	return NULL;
}

static void test_threads(void **state) {
	(void)state;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	pthread_t t[CHURN_THREADS];
	for (int i = 0; i < CHURN_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/during.pb.gz", tmpdir);
	const char *name = path;
	for (int i = 0; i < 5; i++)
		assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL,
		    (void *)&name, sizeof(name)), 0);
	for (int i = 0; i < CHURN_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	snprintf(path, sizeof(path), "%s/threads.pb.gz", tmpdir);
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL,
	    (void *)&name, sizeof(name)), 0);
	mp_pprof_t pp;
	MP_PPROF_LOAD(path, &pp);
	int64_t sb[NB], n = 0;
	site_buckets(&pp, (const void *)short_site, sb);
	for (int k = 0; k < NB; k++)
		n += sb[k];
	MP_ASSERT(n == CHURN_THREADS * CHURN_N, "short_site: %lld objects, "
	    "expected %d", (long long)n, CHURN_THREADS * CHURN_N);
	mp_pprof_free(&pp);
}

/* NULL: an automatic name, <prefix>.<pid>.<seq>.l0.pb.gz. */
static void test_auto_name(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/auto", tmpdir);
	const char *p = prefix;
	assert_int_equal(mallctl("prof.prefix", NULL, NULL, (void *)&p,
	    sizeof(p)), 0);
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL, NULL, 0),
	    0);
	/* Write-only, as prof.dump. */
	const char *v;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("prof.lifetimes.dump", (void *)&v, &len,
	    NULL, 0), EPERM);
	DIR *d = opendir(tmpdir);
	assert_non_null(d);
	struct dirent *e;
	char found[512] = "";
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, "auto.", 5) == 0 && n > 9 &&
		    strcmp(e->d_name + n - 9, ".l0.pb.gz") == 0)
			snprintf(found, sizeof(found), "%s/%s", tmpdir,
			    e->d_name);
	}
	closedir(d);
	MP_ASSERT(found[0] != '\0', "no auto.*.l0.pb.gz in %s", tmpdir);
	mp_pprof_t pp;
	MP_PPROF_LOAD(found, &pp);
	assert_true(mp_pprof_type(&pp, "alloc_objects") >= 0);
	mp_pprof_free(&pp);
}

/* GET path on the endpoint: the whole response, malloc'd, *n its size. */
static uint8_t *http_get(const char *path, size_t *n) {
	unsigned port = 0;
	size_t sz = sizeof(port);
	assert_int_equal(mallctl("prof.http_port", &port, &sz, NULL, 0), 0);
	assert_true(port != 0);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
	    .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	char req[256];
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	assert_int_equal(write(fd, req, (size_t)len), len);
	uint8_t *b = mp_read_fd_all(fd, n);
	close(fd);
	return b;
}

/* GET /debug/pprof/lifetimes: 200 with a pprof body; the index lists
 * it; a query is refused. */
static void test_endpoint(void **state) {
	(void)state;
	size_t n;
	uint8_t *b = http_get("/debug/pprof/lifetimes", &n);
	MP_ASSERT(n > 12 && memcmp(b, "HTTP/1.1 200", 12) == 0,
	    "status: %.40s", (const char *)b);
	uint8_t *body = NULL;
	for (size_t i = 0; i + 4 <= n; i++) {
		if (memcmp(b + i, "\r\n\r\n", 4) == 0) {
			body = b + i + 4;
			break;
		}
	}
	assert_non_null(body);
	mp_pprof_t pp;
	bool ok = mp_pprof_decode(body, n - (size_t)(body - b), &pp);
	MP_ASSERT(ok, "body: %s", pp.err);
	assert_true(mp_pprof_type(&pp, "alloc_objects") >= 0);
	mp_pprof_free(&pp);
	free(b);

	b = http_get("/debug/pprof/?debug=1", &n);
	b = realloc(b, n + 1);
	assert_non_null(b);
	b[n] = '\0';
	MP_ASSERT(strstr((char *)b, "\nlifetimes\t-\t/debug/pprof/lifetimes\t")
	    != NULL, "the index has no lifetimes row: %.300s", (char *)b);
	free(b);

	b = http_get("/debug/pprof/lifetimes?debug=1", &n);
	MP_ASSERT(n > 12 && memcmp(b, "HTTP/1.1 400", 12) == 0,
	    "with a query: %.40s", (const char *)b);
	free(b);
}

static void test_no_profiler(void **state) {
	(void)state;
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL, NULL, 0),
	    ENOENT);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_auto_name),
		cmocka_unit_test(test_endpoint),
	};
	return mp_prof_test_main("mp_prof_lifetime", test_no_profiler, tests);
}
