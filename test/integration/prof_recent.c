/*
 * test/integration/prof_recent.c - the recent sampled allocations
 * (prof_recent_alloc_max, experimental.prof_recent.alloc_max and
 * experimental.prof_recent.alloc_dump), jemalloc's interface.
 *
 * prof_recent.conf: prof:true,lg_prof_sample:0,prof_recent_alloc_max:4,
 * so every allocation is sampled and the records are exact.  Checked:
 * the limit reads back through opt.* and experimental.*; a write returns
 * the old limit; the dump is JSON (python3's json module reads it) with
 * jemalloc's keys; the last allocations before a dump are its last
 * records, in order, with their sizes (usable sizes: the size asked for
 * is not kept), thread, a trace whose first
 * program frame is in the allocating function, and for the one freed,
 * "released" and the free's thread, time and trace (in the freeing
 * function), also when the freeing thread never sampled; lowering the
 * limit drops the oldest; 0 keeps none, -1 no limit; at the limit a
 * record taken over keeps nothing of its object's free; the two locks'
 * counters (stats.mutexes.prof_recent_alloc, prof_recent_dump) count;
 * bad values and a read are refused.
 */
#include "../test_util.h"

#include <sys/wait.h>

typedef struct {
	void (*write_cb)(void *, const char *);
	void *cbopaque;
} write_packet_t;

static bool mp_have_python3(void) {
	return system("python3 -c pass >/dev/null 2>&1") == 0;
}

static char out[1 << 20];
static size_t out_len;

static void out_cb(void *opaque, const char *s) {
	(void)opaque;
	size_t n = strlen(s);
	if (out_len + n < sizeof(out)) {
		memcpy(out + out_len, s, n);
		out_len += n;
		out[out_len] = '\0';
	}
}

static int dump(void) {
	out_len = 0;
	out[0] = '\0';
	write_packet_t w = {out_cb, NULL};
	return mallctl("experimental.prof_recent.alloc_dump", NULL, NULL, &w,
	    sizeof(w));
}

void *recent_site(size_t size);
void recent_free_site(void *p);

MP_SITE void *recent_site(size_t size) {
	void *p = malloc(size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_SITE void recent_free_site(void *p) {
	free(p);
	__asm__ volatile("" : : : "memory");
}

static ssize_t max_rw(ssize_t *newv) {
	ssize_t old = -7;
	size_t len = sizeof(old);
	assert_int_equal(mallctl("experimental.prof_recent.alloc_max", &old,
	    &len, newv, newv != NULL ? sizeof(*newv) : 0), 0);
	return old;
}

/* Run python3 on the dump (written to a file) with `check`, a Python
 * expression over d (the parsed JSON) and the sites' ranges; true if it
 * holds.  The reason is printed by python on failure. */
static bool py_check(const char *check) {
	char path[] = "/tmp/mp_prof_recent_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, out, out_len), (ssize_t)out_len);
	close(fd);
	uintptr_t a_lo, a_hi, f_lo, f_hi;
	mp_fn_range((void *)recent_site, &a_lo, &a_hi);
	mp_fn_range((void *)recent_free_site, &f_lo, &f_hi);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "python3 -c '\n"
	    "import json, sys\n"
	    "d = json.load(open(\"%s\"))\n"
	    "a_lo, a_hi, f_lo, f_hi = %lu, %lu, %lu, %lu\n"
	    "def inside(t, lo, hi): return any(lo < int(x, 16) <= hi for x in t)\n"
	    "ok = %s\n"
	    "if not ok: print(\"check failed on:\", json.dumps(d)[:2000])\n"
	    "sys.exit(0 if ok else 1)'", path, (unsigned long)a_lo,
	    (unsigned long)a_hi, (unsigned long)f_lo, (unsigned long)f_hi,
	    check);
	int st = system(cmd);
	unlink(path);
	return st == 0;
}

static void test_limit_readout(void **state) {
	(void)state;
	ssize_t v = 0;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("opt.prof_recent_alloc_max", &v, &len, NULL,
	    0), 0);
	assert_int_equal(v, 4);
	assert_int_equal(max_rw(NULL), 4);
	ssize_t eight = 8;
	assert_int_equal(max_rw(&eight), 4);
	assert_int_equal(max_rw(NULL), 8);
	ssize_t four = 4;
	max_rw(&four);
}

static uint64_t wall_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_records(void **state) {
	(void)state;
	if (!mp_have_python3())
		MP_SKIP("python3 not found");
	/* Times are wall-clock nanoseconds: within the test's window, give
	 * or take a second (the profiler's clock is coarse by default). */
	uint64_t lo = wall_ns() - 1000000000u;
	void *p1 = recent_site(1000);
	void *p2 = recent_site(3000);
	recent_free_site(p1);
	assert_int_equal(dump(), 0);
	uint64_t hi = wall_ns() + 1000000000u;
	char times[512];
	snprintf(times, sizeof(times), "all(%" PRIu64 " <= r[\"alloc_time\"] "
	    "<= %" PRIu64 " for r in d[\"recent_alloc\"][-2:]) and %" PRIu64
	    " <= d[\"recent_alloc\"][-2][\"dalloc_time\"] <= %" PRIu64, lo, hi,
	    lo, hi);
	char check[2048];
	snprintf(check, sizeof(check),
	    "d[\"sample_interval\"] == 1 and d[\"recent_alloc_max\"] == 4 and "
	    "2 <= len(d[\"recent_alloc\"]) <= 4 and "
	    "[r[\"size\"] for r in d[\"recent_alloc\"][-2:]] == [1000, 3000] "
	    "and "
	    "[r[\"usize\"] for r in d[\"recent_alloc\"][-2:]] == [1024, 3072] and "
	    "d[\"recent_alloc\"][-2][\"released\"] == True and "
	    "d[\"recent_alloc\"][-1][\"released\"] == False and "
	    "inside(d[\"recent_alloc\"][-2][\"alloc_trace\"], a_lo, a_hi) and "
	    "inside(d[\"recent_alloc\"][-1][\"alloc_trace\"], a_lo, a_hi) and "
	    "inside(d[\"recent_alloc\"][-2][\"dalloc_trace\"], f_lo, f_hi) and "
	    "d[\"recent_alloc\"][-2][\"dalloc_thread_uid\"] == "
	    "d[\"recent_alloc\"][-2][\"alloc_thread_uid\"] and "
	    "d[\"recent_alloc\"][-2][\"dalloc_time\"] >= "
	    "d[\"recent_alloc\"][-2][\"alloc_time\"] and "
	    "\"dalloc_trace\" not in d[\"recent_alloc\"][-1] and %s", times);
	MP_ASSERT(py_check(check), "the dump: %.2000s", out);
	free(p2);
}

/* Records of another thread carry its uid and name. */
static void *named_thread(void *arg) {
	const char *name = "recent-t";
	assert_int_equal(mallctl("thread.prof.name", NULL, NULL, &name,
	    sizeof(name)), 0);
	void **slot = arg;
	*slot = recent_site(5000);
	return NULL;
}

static void test_other_thread(void **state) {
	(void)state;
	if (!mp_have_python3())
		MP_SKIP("python3 not found");
	void *p = NULL;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, named_thread, &p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	recent_free_site(p);
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check(
	    "[r for r in d[\"recent_alloc\"] if r[\"size\"] == 5000 and "
	    "r[\"usize\"] == 5120 and "
	    "r.get(\"alloc_thread_name\") == \"recent-t\" and r[\"released\"] "
	    "and r[\"dalloc_thread_uid\"] != r[\"alloc_thread_uid\"] and "
	    "\"dalloc_thread_name\" not in r]"), "the dump: %.2000s", out);
}

/* A thread that never sampled (its sampling off from the start) frees a
 * recorded object: the free's trace is walked within that thread's stack
 * bounds, found for the occasion, and still ends in the freeing
 * function. */
static void *quiet_free_thread(void *arg) {
	bool off = false;
	assert_int_equal(mallctl("thread.prof.active", NULL, NULL, &off,
	    sizeof(off)), 0);
	recent_free_site(arg);
	return NULL;
}

static void test_free_by_unsampled_thread(void **state) {
	(void)state;
	if (!mp_have_python3())
		MP_SKIP("python3 not found");
	void *p = recent_site(7000);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, quiet_free_thread, p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check(
	    "[r for r in d[\"recent_alloc\"] if r[\"size\"] == 7000 and "
	    "r[\"usize\"] == 7168 and "
	    "r[\"released\"] and inside(r[\"dalloc_trace\"], f_lo, f_hi)]"),
	    "the dump: %.2000s", out);
}

static void test_lower_and_off(void **state) {
	(void)state;
	if (!mp_have_python3())
		MP_SKIP("python3 not found");
	void *p[3];
	for (int i = 0; i < 3; i++)
		p[i] = recent_site(100 + 1000 * (size_t)i);
	ssize_t one = 1;
	assert_int_equal(max_rw(&one), 4);
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check("len(d[\"recent_alloc\"]) == 1 and "
	    "d[\"recent_alloc\"][0][\"size\"] == 2100 and "
	    "d[\"recent_alloc\"][0][\"usize\"] == 2560 and "
	    "d[\"recent_alloc_max\"] == 1"), "the dump: %.2000s", out);
	ssize_t zero = 0;
	max_rw(&zero);
	free(recent_site(64));
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check("d[\"recent_alloc\"] == [] and "
	    "d[\"recent_alloc_max\"] == 0"), "the dump: %.2000s", out);
	ssize_t all = -1;
	max_rw(&all);
	for (int i = 0; i < 3; i++)
		free(p[i]);
	void *q[20];
	for (int i = 0; i < 20; i++)
		q[i] = recent_site(64);
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check("len(d[\"recent_alloc\"]) >= 20 and "
	    "d[\"recent_alloc_max\"] == -1"), "the dump: %.2000s", out);
	for (int i = 0; i < 20; i++)
		free(q[i]);
	ssize_t four = 4;
	max_rw(&four);
}

/* Once the limit is reached each sample takes the oldest record over:
 * one whose object was freed (released, with its free's side) shows
 * nothing of that as a live allocation's, and the free of an object
 * whose record was taken over leaves the new one alone. */
static void test_reused_records(void **state) {
	(void)state;
	if (!mp_have_python3())
		MP_SKIP("python3 not found");
	for (int i = 0; i < 4; i++)
		recent_free_site(recent_site(100 + (size_t)i));
	void *q[5];
	for (int i = 0; i < 4; i++)
		q[i] = recent_site(2000 + 1000 * (size_t)i);
	const char *all_live = "all(r[\"released\"] == False and "
	    "\"dalloc_trace\" not in r and \"dalloc_time\" not in r and "
	    "inside(r[\"alloc_trace\"], a_lo, a_hi) "
	    "for r in d[\"recent_alloc\"])";
	char check[1024];
	snprintf(check, sizeof(check), "len(d[\"recent_alloc\"]) == 4 and "
	    "[r[\"size\"] for r in d[\"recent_alloc\"]] == "
	    "[2000, 3000, 4000, 5000] and %s", all_live);
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check(check), "the dump: %.2000s", out);
	/* q[0]'s record goes to q[4]; q[0]'s free finds none. */
	q[4] = recent_site(6000);
	recent_free_site(q[0]);
	snprintf(check, sizeof(check), "len(d[\"recent_alloc\"]) == 4 and "
	    "[r[\"size\"] for r in d[\"recent_alloc\"]] == "
	    "[3000, 4000, 5000, 6000] and %s", all_live);
	assert_int_equal(dump(), 0);
	MP_ASSERT(py_check(check), "the dump: %.2000s", out);
	for (int i = 1; i < 5; i++)
		free(q[i]);
}

/* A lock's acquisitions, after a refresh (0: no such name). */
static uint64_t lock_ops(const char *name) {
	uint64_t epoch = 1;
	size_t len = sizeof(epoch);
	assert_int_equal(mallctl("epoch", &epoch, &len, &epoch, len), 0);
	uint64_t v = 0;
	len = sizeof(v);
	if (mallctl(name, &v, &len, NULL, 0) != 0)
		return 0;
	return v;
}

/* jemalloc's stats.mutexes.prof_recent_alloc and prof_recent_dump count
 * the records' lock (a recorded allocation and its free take it once
 * each) and the dumps'. */
static void test_lock_counters(void **state) {
	(void)state;
	uint64_t a0 = lock_ops("stats.mutexes.prof_recent_alloc.num_ops");
	uint64_t d0 = lock_ops("stats.mutexes.prof_recent_dump.num_ops");
	for (int i = 0; i < 10; i++)
		recent_free_site(recent_site(64));
	assert_int_equal(dump(), 0);
	uint64_t a1 = lock_ops("stats.mutexes.prof_recent_alloc.num_ops");
	uint64_t d1 = lock_ops("stats.mutexes.prof_recent_dump.num_ops");
	MP_ASSERT(a1 >= a0 + 20, "prof_recent_alloc: %llu -> %llu for 10 "
	    "records and their frees", (unsigned long long)a0,
	    (unsigned long long)a1);
	MP_ASSERT(d1 >= d0 + 1, "prof_recent_dump: %llu -> %llu for a dump",
	    (unsigned long long)d0, (unsigned long long)d1);
}

static void test_errors(void **state) {
	(void)state;
	ssize_t bad = -2;
	assert_int_equal(mallctl("experimental.prof_recent.alloc_max", NULL,
	    NULL, &bad, sizeof(bad)), EINVAL);
	int small = 1;
	assert_int_equal(mallctl("experimental.prof_recent.alloc_max", NULL,
	    NULL, &small, sizeof(small)), EINVAL);
	write_packet_t w = {out_cb, NULL};
	size_t len = sizeof(w);
	assert_int_equal(mallctl("experimental.prof_recent.alloc_dump", &w,
	    &len, NULL, 0), EPERM);
	assert_int_equal(mallctl("experimental.prof_recent.alloc_dump", NULL,
	    NULL, &w, sizeof(w) - 1), EINVAL);
	write_packet_t none = {NULL, NULL};
	assert_int_equal(mallctl("experimental.prof_recent.alloc_dump", NULL,
	    NULL, &none, sizeof(none)), EINVAL);
}

static void test_no_profiler(void **state) {
	(void)state;
	ssize_t v;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("experimental.prof_recent.alloc_max", &v,
	    &len, NULL, 0), ENOENT);
}

int main(void) {
	mp_test_init(120);
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		return mp_run_tests(tests);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit_readout),
		cmocka_unit_test(test_records),
		cmocka_unit_test(test_other_thread),
		cmocka_unit_test(test_free_by_unsampled_thread),
		cmocka_unit_test(test_lower_and_off),
		cmocka_unit_test(test_reused_records),
		cmocka_unit_test(test_lock_counters),
		cmocka_unit_test(test_errors),
	};
	return mp_run_tests(tests);
}
