/*
 * test/integration/san_guard.c - san_guard_large (jemalloc's guard pages,
 * issue 18): with san_guard_large:1 (san_guard.conf) every large block
 * sits between two inaccessible pages.  A read one byte past its pages or
 * one byte before it faults (in a forked child, whose signal the parent
 * checks); the guards hold no resident memory (mincore); guarded blocks
 * free, get reused, resize through realloc and report their usable size
 * as unguarded ones do.  san_guard_small:1 (the program run again with
 * it): every slab sits between two guards, as jemalloc's, so the byte
 * past a slab's last region and the byte before its first fault.
 */
#include "../test_util.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

static char **main_argv;

static size_t page_size(void) {
	return (size_t)sysconf(_SC_PAGESIZE);
}

static void test_opt(void **state) {
	(void)state;
	size_t n = 0;
	MALLCTL_READ("opt.san_guard_large", n);
	assert_int_equal(n, 1);
	MALLCTL_READ("opt.san_guard_small", n);
	assert_int_equal(n, 0);
}

/* How a child that touches p[off] after filling the block ends. */
static int touch_status(size_t size, ptrdiff_t off) {
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka catches SIGSEGV: the child dies of it instead. */
		signal(SIGSEGV, SIG_DFL);
		char *p = LAUNDER(malloc(size));
		if (p == NULL)
			_exit(3);
		size_t usable = malloc_usable_size(p);
		/* The whole usable size is writable. */
		memset(p, 0x5a, usable);
		volatile char *v = (volatile char *)p;
		char c = v[off];
		(void)c;
		_exit(0);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void assert_segv(int status, const char *what, size_t size) {
	MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
	    "%s of a %zu-byte block: status %#x, want SIGSEGV", what, size,
	    status);
}

static void test_overrun_underrun_fault(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer's SIGSEGV handler keeps the "
		    "fault from the test", mp_env_sanitizer());
	}
	const size_t sizes[] = { 16385, 100000, 1 << 20, (3 << 20) + 1 };
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t size = sizes[i];
		/* The usable size is a page multiple: one past it is the
		 * guard.  Computed in the parent from nallocx. */
		size_t usable = nallocx(size, 0);
		size_t past = (usable + page_size() - 1) & ~(page_size() - 1);
		assert_segv(touch_status(size, (ptrdiff_t)past), "overrun",
		    size);
		assert_segv(touch_status(size, -1), "underrun", size);
		/* The control: the last usable byte does not fault. */
		int st = touch_status(size, (ptrdiff_t)usable - 1);
		MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "last byte of a %zu-byte block: status %#x", size, st);
	}
}

/* Resident pages of [p, p + len) (p page-aligned). */
static size_t resident(const void *p, size_t len) {
	size_t n = len / page_size(), r = 0;
	unsigned char vec[16];
	assert_true(n <= sizeof(vec));
	assert_int_equal(mincore((void *)p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	return r;
}

static void test_guards_not_resident(void **state) {
	(void)state;
	size_t pg = page_size();
	/* Freed and carved again: the reused runs' guards were dirty. */
	for (int round = 0; round < 3; round++) {
		char *p[32];
		for (size_t i = 0; i < MP_ARRAY_SIZE(p); i++) {
			size_t size = (size_t)(i + 5) * pg + 17;
			p[i] = LAUNDER(malloc(size));
			assert_non_null(p[i]);
			assert_int_equal((uintptr_t)p[i] % pg, 0);
			size_t usable = malloc_usable_size(p[i]);
			memset(p[i], (int)i, usable);
			MP_ASSERT(resident(p[i] - pg, pg) == 0,
			    "round %d block %zu: guard before is resident",
			    round, i);
			MP_ASSERT(resident(p[i] + usable, pg) == 0,
			    "round %d block %zu: guard after is resident",
			    round, i);
		}
		for (size_t i = 0; i < MP_ARRAY_SIZE(p); i++) {
			if (i % 2 == 0)
				free(p[i]);
			else
				sdallocx(p[i], (i + 5) * pg + 17, 0);
		}
	}
}

static void test_free_reuse_realloc(void **state) {
	(void)state;
	size_t pg = page_size();
	for (int i = 0; i < 200; i++) {
		size_t size = 16385 + (size_t)(i % 17) * 3 * pg;
		unsigned char *p = LAUNDER(malloc(size));
		assert_non_null(p);
		assert_int_equal(malloc_usable_size(p), nallocx(size, 0));
		memset(p, (unsigned char)i, size);
		/* Grows and shrinks: a guarded block moves between new
		 * guards, its contents kept. */
		size_t bigger = size * 3;
		unsigned char *q = LAUNDER(realloc(p, bigger));
		assert_non_null(q);
		for (size_t j = 0; j < size; j += 511)
			assert_int_equal(q[j], (unsigned char)i);
		memset(q, (unsigned char)(i + 1), bigger);
		assert_int_equal(malloc_usable_size(q), nallocx(bigger, 0));
		unsigned char *r = LAUNDER(realloc(q, size));
		assert_non_null(r);
		for (size_t j = 0; j < size; j += 511)
			assert_int_equal(r[j], (unsigned char)(i + 1));
		/* xallocx cannot grow a guarded block in place. */
		size_t got = xallocx(r, size * 2, 0, 0);
		assert_true(got >= size);
		if (i % 3 == 0)
			sdallocx(r, size, 0);
		else
			free(r);
	}
	/* calloc's guarded block reads as zero, even on reused pages. */
	for (int i = 0; i < 50; i++) {
		size_t size = 40000 + (size_t)i * pg;
		unsigned char *p = LAUNDER(calloc(1, size));
		assert_non_null(p);
		for (size_t j = 0; j < size; j++)
			if (p[j] != 0)
				fail_msg("calloc(%zu)[%zu] = %u", size, j, p[j]);
		memset(p, 0xff, size);
		free(p);
	}
}

static sigjmp_buf probe_env;

static void probe_segv(int sig) {
	(void)sig;
	siglongjmp(probe_env, 1);
}

/* Whether reading *p faults. */
static bool probe_faults(const volatile char *p) {
	if (sigsetjmp(probe_env, 1) != 0)
		return true;
	char c = *p;
	(void)c;
	return false;
}

#define SMALL_N 64
#define SMALL_SIZE 4096

/* The re-run's body (MALLOC_CONF=san_guard_small:1): exit 0 if the slabs
 * of 4 KiB regions are guarded and their regions work; messages on
 * stderr otherwise. */
static int small_child(void) {
	size_t n = 0, sz = sizeof(n);
	if (mallctl("opt.san_guard_small", &n, &sz, NULL, 0) != 0 || n != 1) {
		fprintf(stderr, "opt.san_guard_small: %zu, want 1\n", n);
		return 1;
	}
	signal(SIGSEGV, probe_segv);
	char *p[SMALL_N];
	unsigned after = 0, before = 0;
	for (int round = 0; round < 2; round++) {
		after = before = 0;
		for (size_t i = 0; i < SMALL_N; i++) {
			p[i] = LAUNDER(malloc(SMALL_SIZE));
			if (p[i] == NULL ||
			    malloc_usable_size(p[i]) != SMALL_SIZE)
				return 2;
			memset(p[i], (int)i, SMALL_SIZE);
		}
		for (size_t i = 0; i < SMALL_N; i++) {
			after += probe_faults(p[i] + SMALL_SIZE);
			before += probe_faults(p[i] - 1);
		}
		/* Sized frees, realloc within the class and out of it. */
		for (size_t i = 0; i < SMALL_N; i++) {
			if (p[i][SMALL_SIZE - 1] != (char)i)
				return 3;
			if (i % 3 == 0) {
				sdallocx(p[i], SMALL_SIZE, 0);
			} else if (i % 3 == 1) {
				char *q = LAUNDER(realloc(p[i], 100));
				if (q == NULL || q[99] != (char)i)
					return 4;
				free(q);
			} else {
				free(p[i]);
			}
		}
	}
	/* 64 regions of 4 KiB fill several slabs: each slab's last
	 * region is followed by a guard, its first preceded by one. */
	if (after < 2 || before < 2) {
		fprintf(stderr, "of %d 4 KiB regions, %u are followed and %u "
		    "preceded by a faulting page, want 2 or more each\n",
		    SMALL_N, after, before);
		return 5;
	}
	return 0;
}

static void test_small_guard(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer's SIGSEGV handler keeps the "
		    "fault from the test", mp_env_sanitizer());
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv(mp_env_conf_name(), "san_guard_small:1", 1);
		char *argv[] = { main_argv[0], (char *)"small", NULL };
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "san_guard_small:1 run: status %#x (exit codes: small_child)",
	    status);
}

int main(int argc, char **argv) {
	main_argv = argv;
	if (argc > 1 && strcmp(argv[1], "small") == 0)
		return small_child();
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opt),
		cmocka_unit_test(test_overrun_underrun_fault),
		cmocka_unit_test(test_guards_not_resident),
		cmocka_unit_test(test_free_reuse_realloc),
		cmocka_unit_test(test_small_guard),
	};
	return mp_run_tests(tests);
}
