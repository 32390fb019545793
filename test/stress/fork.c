/*
 * test/stress/fork.c - fork() while other threads are inside the allocator.
 *
 * Four threads allocate and free in a loop while the main thread forks 50
 * times (NFORKS_SLOW in the debug and sanitizer builds, which run each
 * fork 2-3 times slower: 61-74 s for 50 on a loaded machine).  Each child
 * (with an alarm so a deadlock kills it instead of hanging the suite)
 * checks and frees blocks it inherited, allocates and
 * frees small, large and huge blocks through several entry points, uses
 * mallctl and malloc_stats_print, starts a thread that allocates, and every
 * tenth child forks a grandchild that does the same.  The parent checks
 * every child's exit status.
 */
#include "../test_util.h"

#include <sys/types.h>
#include <sys/wait.h>

#define NWORKERS 4
#define NFORKS 50
#define NFORKS_SLOW 20
/* Hang detectors, 20x and more above a loaded debug build's 1.5 s per
 * child and ~30 s for the test. */
#define CHILD_TIMEOUT 60
#define TEST_TIMEOUT 300

static atomic_bool stop_workers;
static atomic_ulong worker_ops;

/* ------------------------------------------------------------------------ */
/* Parent-side workers.                                                     */

static void *worker(void *argp) {
	unsigned id = (unsigned)(uintptr_t)argp;
	mp_rng_t rng = {0x5eed + id};
	enum { SLOTS = 64 };
	unsigned char *slot[SLOTS] = {0};
	size_t size[SLOTS] = {0};
	unsigned long ops = 0;
	while (!atomic_load_explicit(&stop_workers, memory_order_relaxed)) {
		unsigned i = (unsigned)mp_rng_below(&rng, SLOTS);
		if (slot[i] != NULL) {
			MP_CHECK(slot[i][0] == (unsigned char)i &&
			    slot[i][size[i] - 1] == (unsigned char)i,
			    "worker %u: block %u (%zu bytes) corrupted", id, i,
			    size[i]);
			if (mp_rng_below(&rng, 4) == 0) {
				size_t n = (size_t)mp_rng_below(&rng, 20000) + 1;
				unsigned char *q = realloc(slot[i], n);
				MP_CHECK(q != NULL, "worker realloc failed");
				if (q != NULL) {
					slot[i] = q;
					size[i] = n;
					memset(q, (int)i, n);
				}
				ops++;
				continue;
			}
			free(slot[i]);
			slot[i] = NULL;
		}
		uint64_t r = mp_rng_next(&rng);
		size_t n;
		if (r % 64 == 0) {
			n = (size_t)(r >> 8) % (2 * MP_MiB) + 1;	/* large */
		} else if (r % 8 == 0) {
			n = (size_t)(r >> 8) % 40000 + 1;
		} else {
			n = (size_t)(r >> 8) % 512 + 1;
		}
		slot[i] = LAUNDER((unsigned char *)(r % 3 == 0 ?
		    mallocx(n, 0) : malloc(n)));
		MP_CHECK(slot[i] != NULL, "worker malloc(%zu) failed", n);
		if (slot[i] == NULL) {
			continue;
		}
		size[i] = n;
		slot[i][0] = (unsigned char)i;
		slot[i][n - 1] = (unsigned char)i;
		ops++;
	}
	for (unsigned i = 0; i < SLOTS; i++) {
		free(slot[i]);
	}
	atomic_fetch_add(&worker_ops, ops);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Child side: plain checks, results through the exit status.               */

#define NINHERITED 6
static unsigned char *inherited[NINHERITED];
static const size_t inherited_size[NINHERITED] = {24, 700, 5000, 40000,
    1 * MP_MiB + 3, 9 * MP_MiB};

static void noop_write(void *opaque, const char *s) {
	size_t *len = opaque;
	*len += strlen(s);
}

static void *child_thread(void *arg) {
	(void)arg;
	void *ptrs[500];
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 500; i++) {
			ptrs[i] = LAUNDER(malloc((size_t)(i * 37 % 3000) + 1));
			MP_CHECK(ptrs[i] != NULL, "child thread malloc failed");
			if (ptrs[i] != NULL) {
				memset(ptrs[i], 0x77, 1);
			}
		}
		for (int i = 0; i < 500; i++) {
			free(ptrs[i]);
		}
	}
	void *big = LAUNDER(malloc(3 * MP_MiB));
	MP_CHECK(big != NULL, "child thread large malloc failed");
	free(big);
	return NULL;
}

/* Returns the number of failed checks (0 = success). */
static unsigned child_work(int depth) {
	atomic_store(&mp_failures, 0);
	/* Blocks allocated before the fork are intact and can be freed. */
	if (depth == 1) {
		for (int i = 0; i < NINHERITED; i++) {
			MP_CHECK(pattern_check(inherited[i], inherited_size[i],
			    (uint64_t)i + 1) == SIZE_MAX,
			    "inherited block %d (%zu bytes) corrupted", i,
			    inherited_size[i]);
			MP_CHECK(malloc_usable_size(inherited[i]) >=
			    inherited_size[i], "inherited block %d size", i);
			free(inherited[i]);
		}
	}
	/* Fresh allocations of every kind. */
	const size_t sizes[] = {1, 16, 100, 1000, 5000, 14336, 20000, 100000,
	    1 * MP_MiB, 4 * MP_MiB + 5};
	void *held[MP_ARRAY_SIZE(sizes)];
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		unsigned char *p = LAUNDER((unsigned char *)malloc(sizes[i]));
		MP_CHECK(p != NULL, "child malloc(%zu) failed", sizes[i]);
		if (p == NULL) {
			held[i] = NULL;
			continue;
		}
		pattern_fill(p, sizes[i], i + 100);
		held[i] = p;
		unsigned char *z = LAUNDER((unsigned char *)calloc(1, sizes[i]));
		MP_CHECK(z != NULL && first_nonzero(z, sizes[i]) == SIZE_MAX,
		    "child calloc(%zu) not zero", sizes[i]);
		z = LAUNDER((unsigned char *)realloc(z, sizes[i] * 2 + 1));
		MP_CHECK(z != NULL, "child realloc failed");
		free(z);
		void *a = NULL;
		MP_CHECK(posix_memalign(&a, 4096, sizes[i]) == 0 &&
		    mp_is_aligned(a, 4096), "child posix_memalign(%zu)",
		    sizes[i]);
		free(a);
		void *x = LAUNDER(mallocx(sizes[i], MALLOCX_ZERO |
		    MALLOCX_TCACHE_NONE));
		MP_CHECK(x != NULL, "child mallocx(%zu) failed", sizes[i]);
		dallocx(x, MALLOCX_TCACHE_NONE);
	}
	/* One huge block, touched sparsely. */
	unsigned char *huge = LAUNDER((unsigned char *)malloc(32 * MP_MiB));
	MP_CHECK(huge != NULL, "child malloc(32 MiB) failed");
	if (huge != NULL) {
		for (size_t off = 0; off < 32 * MP_MiB; off += 64 * 1024) {
			huge[off] = 1;
		}
		free(huge);
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		if (held[i] != NULL) {
			MP_CHECK(pattern_check(held[i], sizes[i], i + 100) ==
			    SIZE_MAX, "child block of %zu bytes corrupted",
			    sizes[i]);
			free(held[i]);
		}
	}
	/* The control interface and statistics work (their locks too). */
	uint64_t epoch = 1, allocated = 0;
	size_t sz = sizeof(epoch);
	MP_CHECK(mallctl("epoch", &epoch, &sz, &epoch, sizeof(epoch)) == 0,
	    "child mallctl(epoch) failed");
	sz = sizeof(allocated);
	MP_CHECK(mallctl("thread.allocated", &allocated, &sz, NULL, 0) == 0,
	    "child mallctl(thread.allocated) failed");
	size_t stats_len = 0;
	malloc_stats_print(noop_write, &stats_len, "J");
	MP_CHECK(stats_len > 0, "child malloc_stats_print wrote nothing");
	MP_CHECK(mallctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0,
	    "child arena purge failed");
	/* A new thread in the child allocates. */
	pthread_t t;
	int r = pthread_create(&t, NULL, child_thread, NULL);
	MP_CHECK(r == 0, "child pthread_create: %d", r);
	if (r == 0) {
		pthread_join(t, NULL);
	}
	return atomic_load(&mp_failures);
}

/* Waits for pid; returns a description of a failure or NULL. */
static const char *wait_child(pid_t pid, int *status_out) {
	int status = 0;
	pid_t w;
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
	}
	*status_out = status;
	if (w != pid) {
		return "waitpid failed";
	}
	if (WIFSIGNALED(status)) {
		return WTERMSIG(status) == SIGALRM ?
		    "child timed out (deadlock after fork?)" :
		    "child killed by a signal";
	}
	if (!WIFEXITED(status)) {
		return "child did not exit";
	}
	if (WEXITSTATUS(status) != 0) {
		return "child reported failed checks";
	}
	return NULL;
}

static void child_main(int depth, int index) {
	mp_alarm_arm(CHILD_TIMEOUT);
	unsigned failed = child_work(depth);
	if (failed == 0 && depth == 1) {
		/* A grandchild from a single-threaded child. */
		if (index % 10 == 0) {
			pid_t g = fork();
			if (g == 0) {
				_exit(child_work(2) == 0 ? 0 : 3);
			}
			if (g < 0) {
				failed++;
			} else {
				int st;
				if (wait_child(g, &st) != NULL) {
					mp_write_line("# grandchild failed");
					failed++;
				}
			}
		}
	}
	_exit(failed == 0 ? 0 : (failed > 100 ? 100 : (int)failed));
}

static void test_fork_with_busy_threads(void **state) {
	(void)state;
	if (strcmp(mp_env_sanitizer(), "tsan") == 0)
		MP_SKIP("tsan build: ThreadSanitizer cannot start threads in "
		    "the child of a multi-threaded fork");
	for (int i = 0; i < NINHERITED; i++) {
		inherited[i] = LAUNDER((unsigned char *)malloc(inherited_size[i]));
		assert_non_null(inherited[i]);
		pattern_fill(inherited[i], inherited_size[i], (uint64_t)i + 1);
	}
	atomic_store(&stop_workers, false);
	atomic_store(&mp_failures, 0);
	pthread_t workers[NWORKERS];
	for (unsigned i = 0; i < NWORKERS; i++) {
		assert_int_equal(pthread_create(&workers[i], NULL, worker,
		    (void *)(uintptr_t)i), 0);
	}
	mp_sleep_ms(20);

	int nforks = mp_slow_build() ? NFORKS_SLOW : NFORKS;
	unsigned bad = 0;
	for (int k = 0; k < nforks; k++) {
		fflush(stdout);
		fflush(stderr);
		pid_t pid = fork();
		if (pid == 0) {
			child_main(1, k);
		}
		assert_true(pid > 0);
		int status;
		const char *why = wait_child(pid, &status);
		if (why != NULL) {
			printf("# fork %d: %s (status 0x%x)\n", k, why, status);
			bad++;
		}
		/* Let the workers get back into the allocator. */
		mp_sleep_ms((unsigned)(k % 3));
	}
	atomic_store(&stop_workers, true);
	for (unsigned i = 0; i < NWORKERS; i++) {
		assert_int_equal(pthread_join(workers[i], NULL), 0);
	}
	printf("# %d forks, %lu operations by %d busy threads\n", nforks,
	    atomic_load(&worker_ops), NWORKERS);
	for (int i = 0; i < NINHERITED; i++) {
		assert_int_equal(pattern_check(inherited[i], inherited_size[i],
		    (uint64_t)i + 1), SIZE_MAX);
		free(inherited[i]);
	}
	MP_ASSERT(bad == 0, "%u of %d children failed", bad, nforks);
	assert_int_equal(atomic_load(&mp_failures), 0);
	assert_true(atomic_load(&worker_ops) > 0);
}

/* The parent keeps working normally after all those forks. */
static void test_parent_after_fork(void **state) {
	(void)state;
	void *ptrs[1000];
	for (int i = 0; i < 1000; i++) {
		ptrs[i] = LAUNDER(malloc((size_t)i * 50 + 1));
		assert_non_null(ptrs[i]);
		memset(ptrs[i], 1, (size_t)i * 50 + 1);
	}
	mp_epoch();
	size_t allocated = 0;
	MALLCTL_READ("stats.allocated", allocated);
	MP_ASSERT(allocated >= 1000 * 999 / 2 * 50, "stats.allocated %zu with "
	    "%d blocks live", allocated, 1000);
	for (int i = 0; i < 1000; i++) {
		free(ptrs[i]);
	}
}

int main(void) {
	mp_test_init(TEST_TIMEOUT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_with_busy_threads),
		cmocka_unit_test(test_parent_after_fork),
	};
	return mp_run_tests(tests);
}
