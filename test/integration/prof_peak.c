/*
 * test/integration/prof_peak.c - the peak-heap profile (prof_peak,
 * prof.peak.dump, prof.peak.reset, prof.peak.bytes, the final .p dump).
 *
 * prof_peak.conf: prof:true,lg_prof_sample:12,prof_peak_growth:1.01 (the
 * kept peak is at most 1% below the highest heap; at the default 1.1 it
 * may be up to 10% below, as documented).  A program with known
 * phases keeps 64 MiB live from peak_site_a, frees it, then keeps 16 MiB
 * from peak_site_b.  The peak profile must show site A with 64 MiB and
 * not site B; the heap profile of now, site B with 16 MiB and not site A;
 * each within 10% once unbiased as jeprof does (64 MiB in blocks of 1 to
 * 64 KiB at one sample per 4 KiB is thousands of samples: a standard error
 * near 2%).  prof.peak.reset makes the heap of now the peak; a peak dump
 * taken while the heap is above the kept peak shows the heap of now.
 * A child run with prof_final writes <prefix>.<pid>.<seq>.p0.heap beside
 * the .f one, holding the child's 64 MiB; prof_peak:false turns every
 * peak control into a one-line error.
 */
#include "../test_util.h"

#include <sys/wait.h>

#define SITE_A_LIVE ((size_t)64 << 20)
#define SITE_B_LIVE ((size_t)16 << 20)
#define MAXOBJS 65536

void *peak_site_a(size_t size);
void *peak_site_b(size_t size);

#define USE(p) __asm__ volatile("" : : "r"(p) : "memory")

MP_SITE void *peak_site_a(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

MP_SITE void *peak_site_b(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

static char tmpdir[256];
static void *objs[MAXOBJS];

/* Fill objs[] from site with blocks of 1 to 64 KiB until `live` usable
 * bytes; returns how many. */
static size_t fill(void *(*site)(size_t), size_t live, uint64_t seed) {
	mp_rng_t r = {seed};
	size_t n = 0, got = 0;
	while (got < live && n < MAXOBJS) {
		size_t size = 1024 + (size_t)mp_rng_below(&r, 63 * 1024);
		objs[n] = site(size);
		assert_non_null(objs[n]);
		memset(objs[n], 0x5a, 64);
		got += malloc_usable_size(objs[n]);
		n++;
	}
	return n;
}

static void drop(size_t n) {
	for (size_t i = 0; i < n; i++)
		free(objs[i]);
}

/* The unbiased live bytes of fn's stack in the heap_v2 dump at path. */
static double site_bytes(const char *path, const void *fn) {
	mp_heap_t h;
	MP_ASSERT(mp_heap_parse(path, &h), "%s: %s", path, h.err);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, fn, 2);
	double n = 0, b = 0;
	if (s != NULL)
		mp_heap_unbias(s->total.co, s->total.cb, h.rate, &n, &b);
	mp_heap_free(&h);
	return b;
}

static uint64_t peak_bytes(void) {
	uint64_t v = 0;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("prof.peak.bytes", &v, &len, NULL, 0), 0);
	return v;
}

static void within(double got, size_t want, double tol, const char *what) {
	MP_ASSERT(got >= (double)want * (1 - tol) &&
	    got <= (double)want * (1 + tol), "%s: %.0f bytes, expected %zu "
	    "within %.0f%%", what, got, want, tol * 100);
}

static void peak_dump(const char *path) {
	assert_int_equal(mallctl("prof.peak.dump", NULL, NULL, (void *)&path,
	    sizeof(path)), 0);
}

static void test_phases(void **state) {
	(void)state;
	char peak[512], now[512];
	snprintf(peak, sizeof(peak), "%s/phases.peak.heap", tmpdir);
	snprintf(now, sizeof(now), "%s/phases.now.heap", tmpdir);
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	size_t na = fill(peak_site_a, SITE_A_LIVE, 1);
	drop(na);
	size_t nb = fill(peak_site_b, SITE_B_LIVE, 2);
	within((double)peak_bytes(), SITE_A_LIVE, 0.10, "prof.peak.bytes");

	peak_dump(peak);
	assert_int_equal(mp_prof_dump(now), 0);
	within(site_bytes(peak, (void *)peak_site_a), SITE_A_LIVE, 0.10,
	    "site A in the peak profile");
	MP_ASSERT(site_bytes(peak, (void *)peak_site_b) <
	    (double)SITE_A_LIVE * 0.02, "site B in the peak profile: it "
	    "allocated after the peak");
	within(site_bytes(now, (void *)peak_site_b), SITE_B_LIVE, 0.10,
	    "site B in the heap profile");
	MP_ASSERT(site_bytes(now, (void *)peak_site_a) == 0,
	    "site A in the heap profile: all of it was freed");

	/* Reset: the peak is the heap of now (site B). */
	assert_int_equal(mallctl("prof.peak.reset", NULL, NULL, NULL, 0), 0);
	within((double)peak_bytes(), SITE_B_LIVE, 0.10,
	    "prof.peak.bytes after prof.peak.reset");
	peak_dump(peak);
	MP_ASSERT(site_bytes(peak, (void *)peak_site_a) == 0,
	    "site A in the peak profile after prof.peak.reset");
	within(site_bytes(peak, (void *)peak_site_b), SITE_B_LIVE, 0.10,
	    "site B in the peak profile after prof.peak.reset");
	drop(nb);
}

/* The heap grows a little past the kept peak (less than the growth factor
 * would need for a new copy): a peak dump shows the heap of now. */
static void test_dump_above_kept_peak(void **state) {
	(void)state;
	char peak[512];
	snprintf(peak, sizeof(peak), "%s/above.peak.heap", tmpdir);
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	size_t na = fill(peak_site_a, SITE_B_LIVE, 3);
	assert_int_equal(mallctl("prof.peak.reset", NULL, NULL, NULL, 0), 0);
	uint64_t before = peak_bytes();
	/* 4 MiB more at site B: 25% more live, copied either by the growth
	 * trigger or by the dump. */
	size_t nb = 0;
	void *more[MAXOBJS / 4];
	mp_rng_t r = {4};
	for (size_t got = 0; got < ((size_t)4 << 20);) {
		more[nb] = peak_site_b(1024 + (size_t)mp_rng_below(&r,
		    63 * 1024));
		got += malloc_usable_size(more[nb]);
		nb++;
	}
	peak_dump(peak);
	MP_ASSERT(peak_bytes() > before, "prof.peak.bytes did not grow: %"
	    PRIu64 " then %" PRIu64, before, peak_bytes());
	within(site_bytes(peak, (void *)peak_site_b), (size_t)4 << 20, 0.20,
	    "site B's 4 MiB in the peak profile");
	for (size_t i = 0; i < nb; i++)
		free(more[i]);
	drop(na);
}

static void test_errors(void **state) {
	(void)state;
	uint64_t v = 1;
	size_t len = sizeof(v);
	/* Read-only, write-only, no value. */
	assert_int_equal(mallctl("prof.peak.bytes", NULL, NULL, &v,
	    sizeof(v)), EPERM);
	assert_int_equal(mallctl("prof.peak.dump", &v, &len, NULL, 0), EPERM);
	assert_int_equal(mallctl("prof.peak.reset", NULL, NULL, &v,
	    sizeof(v)), EINVAL);
	const char *bad = "/nonexistent-dir/x.heap";
	assert_int_equal(mallctl("prof.peak.dump", NULL, NULL, (void *)&bad,
	    sizeof(bad)), EFAULT);
}

/* ---- children: prof_final's peak dump, prof_peak:false */

static int child_main(const char *mode) {
	if (strcmp(mode, "none") == 0) {
		free(malloc(16));       /* reads the options */
		return 0;
	}
	if (strcmp(mode, "final") == 0) {
		size_t n = fill(peak_site_a, SITE_A_LIVE, 5);
		drop(n);
		return 0;
	}
	/* "off": every peak control says why it cannot work. */
	const char *path = "/dev/null";
	uint64_t v;
	size_t len = sizeof(v);
	int d = mallctl("prof.peak.dump", NULL, NULL, (void *)&path,
	    sizeof(path));
	int r = mallctl("prof.peak.reset", NULL, NULL, NULL, 0);
	int b = mallctl("prof.peak.bytes", &v, &len, NULL, 0);
	return d == EFAULT && r == ENOENT && b == 0 && v == 0 ? 0 : 3;
}

static void test_final_peak(void **state) {
	(void)state;
	char conf[512], err[8192], out[64];
	snprintf(conf, sizeof(conf), "prof:true,lg_prof_sample:12,"
	    "prof_peak_growth:1.01,prof_final:true,prof_prefix:%s/fin",
	    tmpdir);
	pid_t pid;
	int st = mp_run_child_conf("final", conf, err, sizeof(err), out,
	    sizeof(out), &pid);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x, "
	    "stderr: %s", st, err);
	char path[512];
	snprintf(path, sizeof(path), "%s/fin.%ld.1.p0.heap", tmpdir,
	    (long)pid);
	/* The child's addresses are its own: its largest stack is site A. */
	mp_heap_t h;
	MP_ASSERT(mp_heap_parse(path, &h), "%s: %s (child stderr: %s)", path,
	    h.err, err);
	double best = 0;
	for (size_t i = 0; i < h.nstacks; i++) {
		double n, b;
		mp_heap_unbias(h.stacks[i].total.co, h.stacks[i].total.cb,
		    h.rate, &n, &b);
		if (b > best)
			best = b;
	}
	mp_heap_free(&h);
	within(best, SITE_A_LIVE, 0.10, "the final peak dump's biggest stack");
	snprintf(path, sizeof(path), "%s/fin.%ld.0.f.heap", tmpdir, (long)pid);
	MP_ASSERT(access(path, R_OK) == 0, "no final dump %s", path);
}

static void test_peak_off(void **state) {
	(void)state;
	char err[8192];
	int st = mp_run_child_conf("off", "prof:true,prof_peak:false", err,
	    sizeof(err), NULL, 0, NULL);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x, "
	    "stderr: %s", st, err);
	MP_ASSERT(strstr(err, "<malloc_prof>: prof.peak.dump: prof_peak is "
	    "off") != NULL && strstr(err, "<malloc_prof>: prof.peak.reset: "
	    "prof_peak is off") != NULL, "stderr: %s", err);
}

static void test_bad_growth(void **state) {
	(void)state;
	char err[8192];
	int st = mp_run_child_conf("none", "prof:true,prof_peak_growth:0.9",
	    err, sizeof(err), NULL, 0, NULL);
	(void)st;
	MP_ASSERT(strstr(err, "prof_peak_growth") != NULL &&
	    strstr(err, "above 1") != NULL, "stderr: %s", err);
}

static void test_no_profiler(void **state) {
	(void)state;
	uint64_t v;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("prof.peak.bytes", &v, &len, NULL, 0),
	    ENOENT);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	mp_test_init(300);
	if (!mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_prof_peak")) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	int r;
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		r = mp_run_tests(tests);
	} else {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_phases),
			cmocka_unit_test(test_dump_above_kept_peak),
			cmocka_unit_test(test_errors),
			cmocka_unit_test(test_final_peak),
			cmocka_unit_test(test_peak_off),
			cmocka_unit_test(test_bad_growth),
		};
		r = mp_run_tests(tests);
	}
	mp_tmpdir_remove(tmpdir);
	return r;
}
