/*
 * test/integration/stats_nrequests.c - stats.arenas.<i>.bins.<j>.nrequests
 * with jemalloc's meaning: every allocation request of the class, those a
 * thread's cache bin served included, merged into the arena when the
 * cache is flushed (thread.tcache.flush, tcache.flush, thread exit, a
 * change of thread.arena, stats_print's report at exit, a fork's child).  Warm-cache hits
 * are counted exactly, by every thread and through an explicit cache, with
 * the cache off too;
 * small.nrequests is the sum of the bins'; a workload that reuses its
 * memory has at least as many requests as regions taken from the slabs.
 * Before issue 18's change nrequests was nmalloc, which cache hits do not
 * move: test_warm_hits failed there.
 */
#include "../test_util.h"

#define N_HITS 5000
#define N_THREADS 4

/* Whether the thread's cache bins serve its mallocs: not with junk on
 * free (debug builds' default), where every request goes to the slabs. */
static bool cache_bins_on(void) {
	const char *junk = "false";
	size_t sz = sizeof(junk);
	if (mallctl("opt.junk", &junk, &sz, NULL, 0) != 0) {
		return true;
	}
	return strcmp(junk, "true") != 0 && strcmp(junk, "free") != 0;
}

static unsigned bin_of(size_t size) {
	unsigned nbins = 0;
	MALLCTL_READ("arenas.nbins", nbins);
	for (unsigned j = 0; j < nbins; j++) {
		size_t s = 0;
		assert_int_equal(mallctl_fmt(&s, &(size_t){sizeof(s)}, NULL, 0,
		    "arenas.bin.%u.size", j), 0);
		if (s == size) {
			return j;
		}
	}
	MP_FAIL("no bin of size %zu", size);
	return 0;
}

static uint64_t bin_stat(unsigned a, unsigned j, const char *what) {
	uint64_t v = 0;
	size_t sz = sizeof(v);
	int r = mallctl_fmt(&v, &sz, NULL, 0, "stats.arenas.%u.bins.%u.%s",
	    a, j, what);
	MP_ASSERT(r == 0 && sz == sizeof(v), "stats.arenas.%u.bins.%u.%s: %d",
	    a, j, what, r);
	return v;
}

static unsigned thread_arena(void) {
	unsigned a = 0;
	MALLCTL_READ("thread.arena", a);
	return a;
}

/* nrequests of class j in arena a, the thread's cache merged first. */
static uint64_t nrequests_now(unsigned a, unsigned j) {
	MALLCTL_CALL("thread.tcache.flush");
	mp_epoch();
	return bin_stat(a, j, "nrequests");
}

/* n malloc+free pairs of `size`: after the first, each malloc is served
 * by the cache bin the free before it refilled. */
static void pairs(size_t size, unsigned n) {
	for (unsigned i = 0; i < n; i++) {
		void *p = malloc(opaque_size(size));
		MP_CHECK(p != NULL, "malloc(%zu)", size);
		*(volatile char *)LAUNDER(p) = (char)i;
		free(p);
	}
}

/* ------------------------------------------------------------------------ */

/* N mallocs from a warm cache bin: +N after a flush and an epoch, though
 * the slabs handed out next to nothing (nmalloc). */
static void test_warm_hits(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on: samples are arena 0's requests");
	}
	unsigned a = thread_arena(), j = bin_of(160);
	pairs(160, 10);
	uint64_t before = nrequests_now(a, j);
	uint64_t nmalloc_before = bin_stat(a, j, "nmalloc");
	pairs(160, N_HITS);
	uint64_t after = nrequests_now(a, j);
	uint64_t nmalloc_after = bin_stat(a, j, "nmalloc");
	MP_ASSERT(after - before == N_HITS, "nrequests +%" PRIu64 " for %u "
	    "mallocs", after - before, N_HITS);
	/* The point of the counter: the cache served them, not the slabs
	 * (which serve every request when junk turns the bins off). */
	if (cache_bins_on()) {
		MP_ASSERT(nmalloc_after - nmalloc_before < N_HITS / 10,
		    "nmalloc +%" PRIu64, nmalloc_after - nmalloc_before);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* With the thread's cache off every request is counted at once. */
static void test_cache_off(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on: samples are arena 0's requests");
	}
	unsigned a = thread_arena(), j = bin_of(224);
	uint64_t before = nrequests_now(a, j);
	bool off = false, on = true;
	MALLCTL_WRITE("thread.tcache.enabled", off);
	pairs(224, 300);
	mp_epoch();
	uint64_t after = bin_stat(a, j, "nrequests");
	MALLCTL_WRITE("thread.tcache.enabled", on);
	MP_ASSERT(after - before == 300, "nrequests +%" PRIu64 " for 300 "
	    "mallocs with tcache off", after - before);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* What a thread's cache served before thread.arena moved it stays with
 * the old arena; what it serves after goes to the new one. */
static void test_arena_change(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on: samples are arena 0's requests");
	}
	unsigned old = thread_arena(), j = bin_of(192);
	unsigned b = 0;
	MALLCTL_READ("arenas.create", b);
	pairs(192, 10);
	uint64_t old0 = nrequests_now(old, j);
	uint64_t b0 = nrequests_now(b, j);
	pairs(192, 1000);
	MALLCTL_WRITE("thread.arena", b);
	pairs(192, 700);
	uint64_t b1 = nrequests_now(b, j);
	uint64_t old1 = nrequests_now(old, j);
	MALLCTL_WRITE("thread.arena", old);
	MP_ASSERT(old1 - old0 == 1000, "old arena: +%" PRIu64, old1 - old0);
	MP_ASSERT(b1 - b0 == 700, "new arena: +%" PRIu64, b1 - b0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

static void *hits_thread(void *arg) {
	(void)arg;
	pairs(1280, N_HITS);
	return NULL;
}

/* Threads that exit without a flush: their caches merge at exit.  Sums
 * over every arena (MALLCTL_ARENAS_ALL): the threads may take any. */
static void test_threads(void **state) {
	(void)state;
	unsigned j = bin_of(1280);
	uint64_t before = nrequests_now(MALLCTL_ARENAS_ALL, j);
	pthread_t t[N_THREADS];
	for (int i = 0; i < N_THREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, hits_thread,
		    NULL), 0);
	}
	for (int i = 0; i < N_THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	uint64_t after = nrequests_now(MALLCTL_ARENAS_ALL, j);
	/* Thread start-up may ask for a few of its own (glibc's). */
	MP_ASSERT(after - before >= (uint64_t)N_THREADS * N_HITS &&
	    after - before <= (uint64_t)N_THREADS * N_HITS + 64,
	    "nrequests +%" PRIu64 " for %d threads x %d mallocs",
	    after - before, N_THREADS, N_HITS);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

static atomic_int fork_stage;

/* 3000 requests of 2560 B merged by a flush, 20 more left in the cache
 * bin, then wait (alive, unmerged) until the parent has forked. */
static void *fork_thread(void *arg) {
	(void)arg;
	pairs(2560, 3000);
	MP_CHECK(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0,
	    "thread.tcache.flush");
	pairs(2560, 20);
	atomic_store(&fork_stage, 1);
	while (atomic_load(&fork_stage) != 2) {
		sched_yield();
	}
	return NULL;
}

/* fork: the child has only the forking thread; the others' requests
 * still in their cache bins are folded into their arenas' counts. */
static void test_fork(void **state) {
	(void)state;
	unsigned j = bin_of(2560);
	uint64_t before = nrequests_now(MALLCTL_ARENAS_ALL, j);
	atomic_store(&fork_stage, 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, fork_thread, NULL), 0);
	while (atomic_load(&fork_stage) != 1) {
		sched_yield();
	}
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		mp_epoch();
		uint64_t v = 0;
		size_t sz = sizeof(v);
		int r = mallctl_fmt(&v, &sz, NULL, 0,
		    "stats.arenas.%u.bins.%u.nrequests", MALLCTL_ARENAS_ALL, j);
		if (r != 0 || v < before + 3020) {
			fprintf(stderr, "# child: nrequests +%" PRIu64 " of 3020 "
			    "(mallctl %d)\n", v - before, r);
			_exit(1);
		}
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	atomic_store(&fork_stage, 2);
	assert_int_equal(pthread_join(t, NULL), 0);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork child "
	    "status %#x (see above)", status);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* MALLOCX_TCACHE(tc): an explicit cache's hits count too, merged at
 * tcache.flush and at tcache.destroy. */
static void test_explicit_tcache(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on: samples are arena 0's requests");
	}
	unsigned a = thread_arena(), j = bin_of(320);
	unsigned tc = 0;
	MALLCTL_READ("tcache.create", tc);
	int flags = MALLOCX_TCACHE(tc);
	uint64_t before = nrequests_now(a, j);
	for (unsigned i = 0; i < 2000; i++) {
		void *p = mallocx(320, flags);
		assert_non_null(p);
		dallocx(p, flags);
	}
	MALLCTL_WRITE("tcache.flush", tc);
	uint64_t mid = nrequests_now(a, j);
	for (unsigned i = 0; i < 900; i++) {
		void *p = mallocx(320, flags);
		assert_non_null(p);
		dallocx(p, flags);
	}
	MALLCTL_WRITE("tcache.destroy", tc);
	uint64_t after = nrequests_now(a, j);
	MP_ASSERT(mid - before == 2000, "tcache.flush: +%" PRIu64,
	    mid - before);
	MP_ASSERT(after - mid == 900, "tcache.destroy: +%" PRIu64,
	    after - mid);
}

/* A workload that reuses its memory, every small class in batches: each
 * bin has at least as many requests as regions taken from its slabs, and
 * small.nrequests is the bins' sum, in the thread's arena and over all.
 * The bound only over all arenas: a request counts against its cache's
 * arena, a region against its slab's, and the cache that test_arena_change
 * moved still holds slabs of both (jemalloc counts alike). */
static void test_mixed(void **state) {
	(void)state;
	unsigned nbins = 0;
	MALLCTL_READ("arenas.nbins", nbins);
	static void *p[64];
	for (unsigned j = 0; j < nbins; j++) {
		size_t size = 0;
		assert_int_equal(mallctl_fmt(&size, &(size_t){sizeof(size)},
		    NULL, 0, "arenas.bin.%u.size", j), 0);
		for (unsigned round = 0; round < 40; round++) {
			for (unsigned i = 0; i < 64; i++) {
				p[i] = malloc(opaque_size(size));
				assert_non_null(p[i]);
			}
			for (unsigned i = 0; i < 64; i++) {
				free(p[i]);
			}
		}
	}
	unsigned arenas[] = {thread_arena(), MALLCTL_ARENAS_ALL};
	MALLCTL_CALL("thread.tcache.flush");
	mp_epoch();
	for (size_t k = 0; k < MP_ARRAY_SIZE(arenas); k++) {
		unsigned a = arenas[k];
		uint64_t sum = 0;
		for (unsigned j = 0; j < nbins; j++) {
			uint64_t nreq = bin_stat(a, j, "nrequests");
			uint64_t nmalloc = bin_stat(a, j, "nmalloc");
			MP_ASSERT(nreq >= 40 * 64, "arena %u bin %u: nrequests "
			    "%" PRIu64, a, j, nreq);
			MP_ASSERT(a != MALLCTL_ARENAS_ALL || nreq >= nmalloc,
			    "bin %u: nrequests %" PRIu64 " < nmalloc %" PRIu64
			    " over all arenas", j, nreq, nmalloc);
			sum += nreq;
		}
		uint64_t small = 0;
		size_t sz = sizeof(small);
		assert_int_equal(mallctl_fmt(&small, &sz, NULL, 0,
		    "stats.arenas.%u.small.nrequests", a), 0);
		MP_ASSERT(small == sum, "arena %u: small.nrequests %" PRIu64
		    " != sum of the bins %" PRIu64, a, small, sum);
	}
}

/* The child of test_exit_print: 20,000 requests of 448 B merged by a
 * flush, 100 more left in the cache bin for the exit report to merge. */
static int child_main(void) {
	pairs(448, 20000);
	if (mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) != 0) {
		return 2;
	}
	pairs(448, 100);
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

/* stats_print:true: the report printed at exit counts the exiting
 * thread's requests still in its cache bins (as jemalloc's does). */
static void test_exit_print(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on: samples are arena 0's requests");
	}
	static char out[1 << 20];
	static char err[1 << 16];
	int status = mp_run_child_conf("exit_print", "stats_print:true", err,
	    sizeof(err), out, sizeof(out), NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child "
	    "status %#x", status);
	/* The first table of bins is the merged arenas': its 448 row. */
	const char *t = strstr(out, "bins:");
	if (t == NULL) {
		t = strstr(err, "bins:");
	}
	MP_ASSERT(t != NULL, "no bins table in the exit report");
	const char *line = t;
	bool found = false;
	uint64_t nreq = 0;
	while ((line = strchr(line, '\n')) != NULL) {
		line++;
		size_t size = 0, alloc = 0;
		unsigned ind = 0;
		uint64_t nmalloc, r1, ndalloc, r2;
		if (sscanf(line, "%zu %u %zu %" SCNu64 " %" SCNu64 " %" SCNu64
		    " %" SCNu64 " %" SCNu64, &size, &ind, &alloc, &nmalloc, &r1,
		    &ndalloc, &r2, &nreq) == 8 && size == 448) {
			found = true;
			break;
		}
	}
	MP_ASSERT(found, "no row of 448 B in the exit report's bins");
	MP_ASSERT(nreq >= 20100, "exit report: nrequests %" PRIu64 " of "
	    "448 B, 20100 asked for", nreq);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0 &&
	    strcmp(argv[2], "exit_print") == 0) {
		return child_main();
	}
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warm_hits),
		cmocka_unit_test(test_cache_off),
		cmocka_unit_test(test_arena_change),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_explicit_tcache),
		cmocka_unit_test(test_mixed),
		cmocka_unit_test(test_exit_print),
	};
	return mp_run_tests(tests);
}
