/*
 * test/stress/first_op.c - every entry point works as the first allocator
 * call of a fresh thread, and of a fresh process.
 *
 * For each case a new thread is started whose first call into the library
 * is that entry point; the result is checked.  The same case is then run as
 * the first call of a new process (this program re-executed through
 * /proc/self/exe with "--first-op NAME"; in a prefixed build nothing else
 * calls the library before it, in the unprefixed build the C library might).
 *
 * racing_first_calls: NRACE threads of a fresh process (re-executed with
 * "--race") make their first calls at once, released by a barrier, so
 * they race through the malloc fast path and initialisation.  Under
 * ThreadSanitizer a data race between them (as when sz_boot wrote the
 * size tables the fast path reads) fails the child (TSan's exit code 66).
 */
#include "../test_util.h"

#include <sys/types.h>
#include <sys/wait.h>

typedef void (*case_fn)(void);

/* A block the main thread allocates for the "free from a new thread" case. */
static void *foreign_block;

static void case_malloc(void) {
	unsigned char *p = LAUNDER((unsigned char *)malloc(24));
	MP_CHECK(p != NULL, "malloc(24) failed");
	if (p == NULL) {
		return;
	}
	MP_CHECK(mp_is_aligned(p, 16), "malloc(24) = %p", (void *)p);
	MP_CHECK(malloc_usable_size(p) == 32, "usable %zu",
	    malloc_usable_size(p));
	memset(p, 0xaa, 32);
	free(p);
}

static void case_malloc_large(void) {
	unsigned char *p = LAUNDER((unsigned char *)malloc(3 * MP_MiB));
	MP_CHECK(p != NULL, "malloc(3 MiB) failed");
	if (p == NULL) {
		return;
	}
	MP_CHECK(malloc_usable_size(p) >= 3 * MP_MiB, "usable %zu",
	    malloc_usable_size(p));
	memset(p, 0xaa, 3 * MP_MiB);
	free(p);
}

static void case_calloc(void) {
	unsigned char *p = LAUNDER((unsigned char *)calloc(10, 100));
	MP_CHECK(p != NULL, "calloc failed");
	if (p == NULL) {
		return;
	}
	MP_CHECK(first_nonzero(p, 1000) == SIZE_MAX, "calloc not zero");
	free(p);
}

static void case_realloc_null(void) {
	unsigned char *p = LAUNDER((unsigned char *)realloc(NULL, 100));
	MP_CHECK(p != NULL, "realloc(NULL, 100) failed");
	if (p == NULL) {
		return;
	}
	MP_CHECK(malloc_usable_size(p) == 112, "usable %zu",
	    malloc_usable_size(p));
	pattern_fill(p, 100, 1);
	p = LAUNDER((unsigned char *)realloc(p, 100000));
	MP_CHECK(p != NULL && pattern_check(p, 100, 1) == SIZE_MAX,
	    "realloc growth lost content");
	free(p);
}

static void case_posix_memalign(void) {
	void *p = NULL;
	int r = posix_memalign(&p, 64, 100);
	MP_CHECK(r == 0 && p != NULL, "posix_memalign = %d", r);
	MP_CHECK(mp_is_aligned(p, 64), "posix_memalign = %p", p);
	free(p);
}

static void case_aligned_alloc(void) {
	void *p = LAUNDER(aligned_alloc(4096, 4096));
	MP_CHECK(p != NULL && mp_is_aligned(p, 4096), "aligned_alloc = %p", p);
	if (p != NULL) {
		memset(p, 1, 4096);
	}
	free(p);
}

static void case_memalign(void) {
	void *p = LAUNDER(memalign(256, 1000));
	MP_CHECK(p != NULL && mp_is_aligned(p, 256), "memalign = %p", p);
	free(p);
}

static void case_valloc(void) {
	void *p = LAUNDER(valloc(100));
	MP_CHECK(p != NULL && mp_is_aligned(p, mp_page_size()), "valloc = %p",
	    p);
	free(p);
}

static void case_pvalloc(void) {
	void *p = LAUNDER(pvalloc(100));
	MP_CHECK(p != NULL && mp_is_aligned(p, mp_page_size()), "pvalloc = %p",
	    p);
	MP_CHECK(p == NULL || malloc_usable_size(p) >= mp_page_size(),
	    "pvalloc(100) usable %zu", p ? malloc_usable_size(p) : 0);
	free(p);
}

static void case_reallocarray(void) {
	void *p = LAUNDER(reallocarray(NULL, 10, 30));
	MP_CHECK(p != NULL && malloc_usable_size(p) >= 300, "reallocarray");
	free(p);
}

static void case_mallocx(void) {
	unsigned char *p = LAUNDER((unsigned char *)mallocx(100,
	    MALLOCX_ALIGN(64) | MALLOCX_ZERO));
	MP_CHECK(p != NULL, "mallocx failed");
	if (p == NULL) {
		return;
	}
	MP_CHECK(mp_is_aligned(p, 64), "mallocx = %p", (void *)p);
	MP_CHECK(first_nonzero(p, sallocx(p, 0)) == SIZE_MAX,
	    "mallocx ZERO not zero");
	p = LAUNDER((unsigned char *)rallocx(p, 5000, 0));
	MP_CHECK(p != NULL, "rallocx failed");
	dallocx(p, 0);
}

static void case_mallocx_tcache_none(void) {
	void *p = LAUNDER(mallocx(100, MALLOCX_TCACHE_NONE));
	MP_CHECK(p != NULL, "mallocx(TCACHE_NONE) failed");
	sdallocx(p, 100, MALLOCX_TCACHE_NONE);
}

static void case_nallocx(void) {
	size_t n = nallocx(100, 0);
	MP_CHECK(n == 112, "nallocx(100) = %zu", n);
	n = nallocx(0, 0);
	MP_CHECK(n == 16, "nallocx(0) = %zu", n);
	n = nallocx(16385, 0);
	MP_CHECK(n == 20480, "nallocx(16385) = %zu", n);
}

static void case_sallocx_after_malloc(void) {
	void *p = LAUNDER(malloc(1000));
	MP_CHECK(p != NULL, "malloc failed");
	if (p == NULL) {
		return;
	}
	size_t s = sallocx(p, 0);
	MP_CHECK(s == 1024, "sallocx(malloc(1000)) = %zu", s);
	free(p);
}

static void case_free_null(void) {
	free(NULL);
	void *p = LAUNDER(malloc(10));
	MP_CHECK(p != NULL, "malloc after free(NULL) failed");
	free(p);
}

static void case_free_foreign(void) {
	/* Thread-only case: the first call frees the main thread's block. */
	MP_CHECK(pattern_check(foreign_block, 5000, 55) == SIZE_MAX,
	    "foreign block corrupted");
	free(foreign_block);
	void *p = LAUNDER(malloc(5000));
	MP_CHECK(p != NULL, "malloc after foreign free failed");
	free(p);
}

static void case_mallctl_thread_allocated(void) {
	uint64_t a0 = 0, a1 = 0;
	MP_CHECK(mp_read_u64("thread.allocated", &a0) == 0,
	    "mallctl(thread.allocated) failed");
	void *p = LAUNDER(malloc(1000));
	MP_CHECK(mp_read_u64("thread.allocated", &a1) == 0,
	    "mallctl(thread.allocated) failed");
	MP_CHECK(a1 - a0 >= 1024, "thread.allocated %" PRIu64 " -> %" PRIu64,
	    a0, a1);
	free(p);
}

static void case_mallctl_epoch(void) {
	uint64_t e = 1;
	size_t sz = sizeof(e);
	MP_CHECK(mallctl("epoch", &e, &sz, &e, sizeof(e)) == 0,
	    "mallctl(epoch) failed");
	size_t allocated = 0;
	MP_CHECK(mp_read_size("stats.allocated", &allocated) == 0,
	    "stats.allocated failed");
	const char *v = NULL;
	sz = sizeof(v);
	MP_CHECK(mallctl("version", &v, &sz, NULL, 0) == 0 && v != NULL,
	    "version failed");
}

static void case_mallctl_tcache(void) {
	bool on = false;
	size_t sz = sizeof(on);
	MP_CHECK(mallctl("thread.tcache.enabled", &on, &sz, NULL, 0) == 0,
	    "thread.tcache.enabled failed");
	MP_CHECK(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0 ||
	    !on, "thread.tcache.flush failed");
	unsigned arena = 9999;
	sz = sizeof(arena);
	MP_CHECK(mallctl("thread.arena", &arena, &sz, NULL, 0) == 0,
	    "thread.arena failed");
}

static void case_malloc_usable_size(void) {
	MP_CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
	void *p = LAUNDER(malloc(50));
	MP_CHECK(p != NULL && malloc_usable_size(p) == 64,
	    "malloc_usable_size(malloc(50)) = %zu",
	    p ? malloc_usable_size(p) : 0);
	free(p);
}

static void stats_sink(void *opaque, const char *s) {
	*(size_t *)opaque += strlen(s);
}

static void case_malloc_stats_print(void) {
	size_t len = 0;
	malloc_stats_print(stats_sink, &len, NULL);
	MP_CHECK(len > 0, "malloc_stats_print wrote nothing");
}

struct first_case {
	const char *name;
	case_fn fn;
	bool thread_only;
};

static const struct first_case cases[] = {
	{"malloc", case_malloc, false},
	{"malloc_large", case_malloc_large, false},
	{"calloc", case_calloc, false},
	{"realloc_null", case_realloc_null, false},
	{"posix_memalign", case_posix_memalign, false},
	{"aligned_alloc", case_aligned_alloc, false},
	{"memalign", case_memalign, false},
	{"valloc", case_valloc, false},
	{"pvalloc", case_pvalloc, false},
	{"reallocarray", case_reallocarray, false},
	{"mallocx", case_mallocx, false},
	{"mallocx_tcache_none", case_mallocx_tcache_none, false},
	{"nallocx", case_nallocx, false},
	{"sallocx_after_malloc", case_sallocx_after_malloc, false},
	{"free_null", case_free_null, false},
	{"free_other_threads_block", case_free_foreign, true},
	{"mallctl_thread_allocated", case_mallctl_thread_allocated, false},
	{"mallctl_epoch", case_mallctl_epoch, false},
	{"mallctl_thread_tcache", case_mallctl_tcache, false},
	{"malloc_usable_size", case_malloc_usable_size, false},
	{"malloc_stats_print", case_malloc_stats_print, false},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void *case_thread(void *arg) {
	const struct first_case *c = arg;
	c->fn();
	return NULL;
}

static char self_exe[4096];

/* Run this program again with one or two arguments; its wait status. */
static int run_self(char *arg1, char *arg2) {
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		char *const argv[] = {self_exe, arg1, arg2, NULL};
		execv(self_exe, argv);
		_exit(126);
	}
	assert_true(pid > 0);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0) {
		assert_int_equal(errno, EINTR);
	}
	return status;
}

static void run_case(void **state) {
	const struct first_case *c = *state;
	atomic_store(&mp_failures, 0);

	/* In a fresh thread (twice: the second reuses a cached stack). */
	for (int round = 0; round < 2; round++) {
		if (c->fn == case_free_foreign) {
			foreign_block = LAUNDER(malloc(5000));
			assert_non_null(foreign_block);
			pattern_fill(foreign_block, 5000, 55);
		}
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, case_thread,
		    (void *)c), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		MP_ASSERT(atomic_load(&mp_failures) == 0,
		    "%s as the first call of a new thread failed", c->name);
	}
	if (c->thread_only) {
		return;
	}

	/* In a fresh process. */
	int status = run_self((char *)"--first-op", (char *)c->name);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s as the first call of a new process: status 0x%x", c->name,
	    status);
}

#define NRACE 4
#define RACE_ROUNDS 8

static pthread_barrier_t race_bar;

static void *race_thread(void *arg) {
	(void)arg;
	pthread_barrier_wait(&race_bar);
	case_malloc();
	case_calloc();
	return NULL;
}

/* "--race" mode: NRACE threads' first calls, at the same time. */
static int race_mode(void) {
	mp_alarm_arm(120);
	pthread_t t[NRACE];
	if (pthread_barrier_init(&race_bar, NULL, NRACE) != 0) {
		return 3;
	}
	for (int i = 0; i < NRACE; i++) {
		if (pthread_create(&t[i], NULL, race_thread, NULL) != 0) {
			return 3;
		}
	}
	for (int i = 0; i < NRACE; i++) {
		pthread_join(t[i], NULL);
	}
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

static void test_racing_first_calls(void **state) {
	(void)state;
	for (int round = 0; round < RACE_ROUNDS; round++) {
		int status = run_self((char *)"--race", NULL);
		MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "round %d: %d threads' racing first calls: status 0x%x "
		    "(66: a ThreadSanitizer report)", round, NRACE, status);
	}
}

/* Child mode: run one case as the very first thing, report by status. */
static int child_mode(const char *name) {
	for (size_t i = 0; i < NCASES; i++) {
		if (strcmp(cases[i].name, name) == 0) {
			mp_alarm_arm(120);
			cases[i].fn();
			return atomic_load(&mp_failures) == 0 ? 0 : 1;
		}
	}
	return 2;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--first-op") == 0) {
		return child_mode(argv[2]);
	}
	if (argc == 2 && strcmp(argv[1], "--race") == 0) {
		return race_mode();
	}
	mp_test_init(300);
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0) {
		snprintf(self_exe, sizeof(self_exe), "%s", argv[0]);
	} else {
		self_exe[n] = '\0';
	}
	struct CMUnitTest tests[NCASES + 1];
	for (size_t i = 0; i < NCASES; i++) {
		tests[i] = (struct CMUnitTest){cases[i].name, run_case, NULL,
		    NULL, (void *)&cases[i]};
	}
	tests[NCASES] = (struct CMUnitTest)cmocka_unit_test(
	    test_racing_first_calls);
	return mp_run_tests(tests);
}
