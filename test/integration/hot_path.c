/*
 * test/integration/hot_path.c - the free fast path's flat tag table and
 * the sized frees' class-by-size path (doc/design.md, sections 5.1 and 7).
 *
 * free reads a page's class tag from a flat byte table reserved over the
 * user address space; free_sized and C++'s sized delete take the class
 * from the size.  What must still hold: a pointer the allocator never gave
 * out (a static buffer, an address past the table, a kernel address) is
 * reported by free, not pushed; a freed block comes back to the next
 * malloc of its class (last in, first out) with thread.deallocated moved
 * by its usable size, also when a thread's first call is the free; and
 * when the table cannot be reserved (RLIMIT_AS, in a child run again
 * under the limit) every free takes the slow path and all of that still
 * holds.
 */
#include "../test_util.h"

#include <sys/wait.h>

static uint64_t counter(const char *name) {
	uint64_t v = 0;
	assert_int_equal(mp_read_u64(name, &v), 0);
	return v;
}

/* Sizes across the small classes and past them. */
static const size_t sizes[] = {
	1, 16, 17, 64, 100, 512, 1000, 4096, 8192, 14336, 14337, 40000,
};

/* malloc(n), free, malloc(n): the same block, counted.  `sized` frees with
 * free_sized.  Returns false (after printing) on a mismatch, so that the
 * RLIMIT_AS child can report without cmocka. */
static bool reuse_round(bool sized) {
	bool ok = true;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t n = sizes[i];
		char *p = LAUNDER(malloc(n));
		if (p == NULL) {
			fprintf(stderr, "malloc(%zu) failed\n", n);
			return false;
		}
		size_t usize = malloc_usable_size(p);
		p[0] = 1;
		uint64_t d0 = counter("thread.deallocated");
		if (sized)
			free_sized(p, n);
		else
			free(p);
		uint64_t d1 = counter("thread.deallocated");
		if (d1 - d0 != usize) {
			fprintf(stderr, "%s(%zu): thread.deallocated moved by "
			    "%" PRIu64 ", usable size %zu\n", sized ?
			    "free_sized" : "free", n, d1 - d0, usize);
			ok = false;
		}
		char *q = LAUNDER(malloc(n));
		/* Small classes come back from the cache bin; large blocks
		 * up to tcache_max from the large cache. */
		if (q != p) {
			fprintf(stderr, "%s(%zu): malloc got %p, not the block "
			    "freed, %p\n", sized ? "free_sized" : "free", n,
			    (void *)q, (void *)p);
			ok = false;
		}
		free(q);
	}
	return ok;
}

static void test_reuse(void **state) {
	(void)state;
	for (int round = 0; round < 3; round++) {
		MP_ASSERT(reuse_round(false), "free: round %d", round);
		MP_ASSERT(reuse_round(true), "free_sized: round %d", round);
	}
}

/* ---- garbage pointers: reported, in every build */

static char static_buf[4096] __attribute__((aligned(64)));

static void free_garbage(void *arg) {
	free(*(void **)arg);
}

/* Whether free(p) in a child reports p as invalid. */
static bool reports_invalid(void *p, char *out, size_t size) {
	int status = mp_child_stderr(free_garbage, &p, out, size);
	/* Debug builds abort after the report; release builds go on. */
	bool ended = (WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
	    (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	return ended && strstr(out, "<malloc_prof>: ") != NULL &&
	    strstr(out, "invalid pointer") != NULL;
}

static void test_garbage(void **state) {
	(void)state;
	char out[4096];
	void *cases[] = {
		static_buf + 64,                         /* no tag there */
		(void *)((uintptr_t)1 << 47),            /* past the table */
		(void *)((uintptr_t)0xffff800000001000), /* kernel half */
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		MP_ASSERT(reports_invalid(cases[i], out, sizeof(out)),
		    "free(%p): no invalid-pointer report (stderr: %s)",
		    cases[i], out);
	}
}

/* ---- a thread whose first call is a free */

typedef struct {
	void *p;
	size_t n;
	bool sized;
	uint64_t dealloc;       /* the thread's thread.deallocated after */
	void *again;            /* its malloc(n) after the free */
} first_t;

static void *first_free(void *arg) {
	first_t *f = arg;
	if (f->sized)
		free_sized(f->p, f->n);
	else
		free(f->p);
	f->dealloc = counter("thread.deallocated");
	f->again = malloc(f->n);
	return NULL;
}

static void test_first_call_free(void **state) {
	(void)state;
	for (int sized = 0; sized < 2; sized++) {
		first_t f = {.n = 64, .sized = sized != 0};
		f.p = LAUNDER(malloc(f.n));
		assert_non_null(f.p);
		size_t usize = malloc_usable_size(f.p);
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, first_free, &f), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		MP_ASSERT(f.dealloc == usize, "%s as a thread's first call: "
		    "thread.deallocated %" PRIu64 ", usable size %zu",
		    sized ? "free_sized" : "free", f.dealloc, usize);
		assert_non_null(f.again);
		free(f.again);
	}
}

/* ---- no tag table: the reservation refused under RLIMIT_AS */

#define NOTAGS_LIMIT ((rlim_t)8 << 30)

static int child_notags(void) {
	/* The table alone would be 32 GiB of address space. */
	size_t vm = mp_vm_bytes();
	if (vm == 0 || vm >= ((size_t)32 << 30)) {
		fprintf(stderr, "address space %zu: the limit did not hold\n",
		    vm);
		return 1;
	}
	bool ok = true;
	for (int round = 0; round < 3; round++)
		ok = reuse_round(false) && reuse_round(true) && ok;
	/* Many frees through the slow path: past a bin's capacity, so that
	 * the full-bin flush runs too. */
	enum { N = 4000 };
	static void *blocks[N];
	for (int i = 0; i < N; i++)
		blocks[i] = malloc(48);
	uint64_t d0 = counter("thread.deallocated");
	for (int i = 0; i < N; i++)
		free(blocks[i]);
	uint64_t d1 = counter("thread.deallocated");
	void *p = malloc(48);
	size_t usize = malloc_usable_size(p);
	free(p);
	if (d1 - d0 != (uint64_t)N * usize) {
		fprintf(stderr, "%d frees of 48 B: thread.deallocated moved "
		    "by %" PRIu64 ", not %d x %zu\n", N, d1 - d0, N, usize);
		ok = false;
	}
	char out[4096];
	if (!reports_invalid(static_buf + 64, out, sizeof(out))) {
		fprintf(stderr, "free of a static buffer not reported: %s\n",
		    out);
		ok = false;
	}
	return ok ? 0 : 1;
}

static void test_no_table(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer's runtime needs address space "
		    "that RLIMIT_AS takes away", mp_env_sanitizer());
	}
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Set before exec: the library reserves the table at its
		 * first page-map update, before main. */
		struct rlimit rl = {NOTAGS_LIMIT, NOTAGS_LIMIT};
		if (setrlimit(RLIMIT_AS, &rl) != 0)
			_exit(125);
		char *argv[] = {"hot_path", "notags", NULL};
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "notags "
	    "child: status %#x (failed checks are printed above)", status);
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "notags") == 0)
		return child_notags();
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_first_call_free),
		cmocka_unit_test(test_no_table),
	};
	return mp_run_tests(tests);
}
