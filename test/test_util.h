/*
 * test/test_util.h - helpers shared by the integration and stress tests.
 *
 * Every test program includes this header first.  It pulls in the system
 * headers, cmocka and the installed-style public header <malloc_prof.h> with
 * MALLOC_PROF_MANGLE defined, so tests can be written with plain names
 * (malloc, mallocx, mallctl, ...) and work in both the unprefixed build and a
 * build configured with --with-prefix=mp_.
 *
 * Conventions:
 *   - one cmocka group per program, run through mp_run_tests(), so that the
 *     program prints exactly one TAP plan (CMOCKA_MESSAGE_OUTPUT=TAP is the
 *     default set by mp_test_init(); the environment can still override it);
 *   - cmocka's skip() prints "not ok # SKIP", which automake's TAP driver
 *     counts as a failure, so tests skip with MP_SKIP(), which prints a TAP
 *     comment and returns (the test is reported as passed);
 *   - cmocka assertions are only used on the main thread of the process;
 *     helper threads and forked children use MP_CHECK(), which counts
 *     failures in mp_failures, and the main thread asserts the count is 0;
 *   - pointers returned by the allocator go through LAUNDER() before their
 *     contents or address bits are checked, so the compiler cannot fold the
 *     checks using its built-in knowledge of malloc/calloc (in the
 *     unprefixed build those are the real names);
 *   - sizes that must not be constant-folded (SIZE_MAX, ...) go through
 *     opaque_size().
 */
#ifndef MALLOC_PROF_TEST_UTIL_H
#define MALLOC_PROF_TEST_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#ifndef MALLCTL_ARENAS_ALL
#define MALLCTL_ARENAS_ALL 4096
#endif

#define MP_KiB ((size_t)1 << 10)
#define MP_MiB ((size_t)1 << 20)
#define MP_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define MP_UNUSED __attribute__((unused))
#else
#define MP_UNUSED
#endif

/* ------------------------------------------------------------------------ */
/* Keeping the compiler honest.                                             */

/* Returns p, but the compiler no longer knows where it came from. */
static inline void *
mp_launder(void *p) {
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}
#define LAUNDER(p) ((__typeof__(p))mp_launder((void *)(p)))

/* Returns n, but the compiler cannot constant-fold it. */
static inline size_t
opaque_size(size_t n) {
	__asm__ volatile("" : "+r"(n));
	return n;
}

/* ------------------------------------------------------------------------ */
/* Failure reporting.                                                       */

/* Fail the current cmocka test with a formatted message (main thread). */
#define MP_FAIL(...) do {						\
	print_error("# %s:%d: ", __FILE__, __LINE__);			\
	print_error(__VA_ARGS__);					\
	print_error("\n");						\
	fail();								\
} while (0)

/* Like assert_true, with a formatted message. */
#define MP_ASSERT(cond, ...) do {					\
	if (!(cond)) {							\
		print_error("# %s:%d: assertion `%s' failed: ",		\
		    __FILE__, __LINE__, #cond);				\
		print_error(__VA_ARGS__);				\
		print_error("\n");					\
		fail();							\
	}								\
} while (0)

/*
 * Thread- and fork-safe check: prints a TAP comment (the first 20 only) and
 * counts the failure.  The main thread asserts mp_failures == 0 when the
 * workers are done.
 */
static atomic_uint mp_failures MP_UNUSED;

#define MP_CHECK(cond, ...) do {					\
	if (!(cond)) {							\
		char mp_msg_[512];					\
		int mp_len_ = snprintf(mp_msg_, sizeof(mp_msg_),	\
		    "# CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__,	\
		    #cond);						\
		if (mp_len_ > 0 && (size_t)mp_len_ < sizeof(mp_msg_)) {	\
			snprintf(mp_msg_ + mp_len_,			\
			    sizeof(mp_msg_) - (size_t)mp_len_, __VA_ARGS__); \
		}							\
		if (atomic_fetch_add(&mp_failures, 1) < 20) {		\
			mp_write_line(mp_msg_);				\
		}							\
	}								\
} while (0)

/* Writes a line to stderr without going through stdio buffers. */
static inline void
mp_write_line(const char *s) {
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, s, n);
		if (w <= 0) {
			return;
		}
		s += w;
		n -= (size_t)w;
	}
	(void)!write(STDERR_FILENO, "\n", 1);
}

/* Skip the rest of a test, reported as a pass with a TAP comment. */
#define MP_SKIP(...) do {						\
	printf("# SKIP %s: ", __func__);				\
	printf(__VA_ARGS__);						\
	printf("\n");							\
	fflush(stdout);							\
	return;								\
} while (0)

/* ------------------------------------------------------------------------ */
/* mallctl helpers.                                                         */

/* Reads a mallctl value into var; the call must succeed with the exact size. */
#define MALLCTL_READ(name, var) do {					\
	size_t mp_sz_ = sizeof(var);					\
	int mp_r_ = mallctl((name), (void *)&(var), &mp_sz_, NULL, 0);	\
	if (mp_r_ != 0) {						\
		MP_FAIL("mallctl(\"%s\") read failed: %d (%s)", (name),	\
		    mp_r_, strerror(mp_r_));				\
	}								\
	MP_ASSERT(mp_sz_ == sizeof(var), "mallctl(\"%s\") size %zu != %zu", \
	    (name), mp_sz_, sizeof(var));				\
} while (0)

/* Writes val (an lvalue) to a mallctl node; the call must succeed. */
#define MALLCTL_WRITE(name, val) do {					\
	int mp_r_ = mallctl((name), NULL, NULL, (void *)&(val),		\
	    sizeof(val));						\
	if (mp_r_ != 0) {						\
		MP_FAIL("mallctl(\"%s\") write failed: %d (%s)", (name),	\
		    mp_r_, strerror(mp_r_));				\
	}								\
} while (0)

/* Calls a mallctl node that takes no value (purge, flush, ...). */
#define MALLCTL_CALL(name) do {						\
	int mp_r_ = mallctl((name), NULL, NULL, NULL, 0);		\
	if (mp_r_ != 0) {						\
		MP_FAIL("mallctl(\"%s\") failed: %d (%s)", (name),	\
		    mp_r_, strerror(mp_r_));				\
	}								\
} while (0)

/* mallctl with a printf-formatted name.  Returns mallctl's result. */
static inline int
mallctl_fmt(void *oldp, size_t *oldlenp, void *newp, size_t newlen,
    const char *fmt, ...) {
	char name[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(name)) {
		return ENAMETOOLONG;
	}
	return mallctl(name, oldp, oldlenp, newp, newlen);
}

/* Refreshes the stats snapshot by writing "epoch"; returns the new epoch. */
static inline uint64_t
mp_epoch(void) {
	uint64_t e = 1;
	size_t sz = sizeof(e);
	int r = mallctl("epoch", &e, &sz, &e, sizeof(e));
	if (r != 0) {
		MP_FAIL("mallctl(\"epoch\") failed: %d", r);
	}
	return e;
}

/* Reads a size_t statistic after refreshing the epoch. */
static inline size_t
mp_stat(const char *name) {
	size_t v = 0;
	mp_epoch();
	MALLCTL_READ(name, v);
	return v;
}

/* Non-asserting reads, usable from any thread. Return mallctl's result. */
static inline int
mp_read_u64(const char *name, uint64_t *v) {
	size_t sz = sizeof(*v);
	int r = mallctl(name, v, &sz, NULL, 0);
	return (r == 0 && sz != sizeof(*v)) ? EINVAL : r;
}

static inline int
mp_read_size(const char *name, size_t *v) {
	size_t sz = sizeof(*v);
	int r = mallctl(name, v, &sz, NULL, 0);
	return (r == 0 && sz != sizeof(*v)) ? EINVAL : r;
}

/* Flushes this thread's tcache; a no-op (not an error) if it is disabled. */
static inline void
mp_tcache_flush(void) {
	bool enabled = false;
	size_t sz = sizeof(enabled);
	if (mallctl("thread.tcache.enabled", &enabled, &sz, NULL, 0) == 0 &&
	    enabled) {
		(void)mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
	}
}

/* ------------------------------------------------------------------------ */
/* Environment of the test run.                                             */

/* The symbol prefix of this build ("" or e.g. "mp_"). */
static inline const char *
mp_env_prefix(void) {
	const char *p = getenv("MALLOC_PROF_PREFIX");
	return p != NULL ? p : "";
}

/* The value of this build's MALLOC_CONF variable, or NULL. */
static inline const char *
mp_env_conf(void) {
	const char *var = getenv("MALLOC_PROF_CONF_ENV");
	if (var == NULL || var[0] == '\0') {
#ifdef MALLOC_PROF_CONF_ENV
		var = MALLOC_PROF_CONF_ENV;	/* from <malloc_prof.h> */
#else
		var = "MALLOC_CONF";
#endif
	}
	return getenv(var);
}

/* True when run by the test harness (make check), false when run by hand. */
static inline bool
mp_under_harness(void) {
	return getenv("top_builddir") != NULL;
}

/* ------------------------------------------------------------------------ */
/* Process measurements.                                                    */

static inline size_t
mp_page_size(void) {
	return (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * Resident set size in bytes, from /proc/self/statm.  Uses raw syscalls and
 * a stack buffer so that measuring does not allocate.  Returns 0 on error.
 */
static inline size_t
read_rss_bytes(void) {
	char buf[256];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return 0;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0) {
		return 0;
	}
	buf[n] = '\0';
	/* Fields: size resident shared text lib data dt (pages). */
	const char *s = buf;
	while (*s != '\0' && *s != ' ') {
		s++;
	}
	unsigned long long pages = 0;
	while (*s == ' ') {
		s++;
	}
	while (*s >= '0' && *s <= '9') {
		pages = pages * 10 + (unsigned long long)(*s - '0');
		s++;
	}
	return (size_t)pages * mp_page_size();
}

static inline uint64_t
mp_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void
mp_sleep_ms(unsigned ms) {
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/* ------------------------------------------------------------------------ */
/* Deterministic pseudo-random numbers (splitmix64).                        */

typedef struct {
	uint64_t s;
} mp_rng_t;

static inline uint64_t
mp_rng_next(mp_rng_t *r) {
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t
mp_rng_below(mp_rng_t *r, uint64_t n) {
	return mp_rng_next(r) % n;
}

/* ------------------------------------------------------------------------ */
/* Content patterns.                                                        */

static inline uint64_t
mp_pattern_word(uint64_t seed, size_t i) {
	uint64_t x = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
	return x ^ (x >> 29);
}

/* Fills n bytes with a pattern that depends on seed and the offset. */
static inline void
pattern_fill(void *p, size_t n, uint64_t seed) {
	unsigned char *b = p;
	size_t words = n / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = mp_pattern_word(seed, i);
		memcpy(b + i * 8, &w, 8);
	}
	if (n % 8 != 0) {
		uint64_t w = mp_pattern_word(seed, words);
		memcpy(b + words * 8, &w, n % 8);
	}
}

/* Returns the offset of the first byte that differs, or SIZE_MAX. */
static inline size_t
pattern_check(const void *p, size_t n, uint64_t seed) {
	const unsigned char *b = p;
	size_t words = n / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = mp_pattern_word(seed, i), v;
		memcpy(&v, b + i * 8, 8);
		if (v != w) {
			for (size_t j = 0; j < 8; j++) {
				if (((unsigned char *)&v)[j] !=
				    ((unsigned char *)&w)[j]) {
					return i * 8 + j;
				}
			}
		}
	}
	if (n % 8 != 0) {
		uint64_t w = mp_pattern_word(seed, words);
		const unsigned char *wb = (const unsigned char *)&w;
		for (size_t j = 0; j < n % 8; j++) {
			if (b[words * 8 + j] != wb[j]) {
				return words * 8 + j;
			}
		}
	}
	return SIZE_MAX;
}

/* Returns the offset of the first non-zero byte in [0, n), or SIZE_MAX. */
static inline size_t
first_nonzero(const void *p, size_t n) {
	const unsigned char *b = p;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, b + i, 8);
		if (v != 0) {
			break;
		}
	}
	for (; i < n; i++) {
		if (b[i] != 0) {
			return i;
		}
	}
	return SIZE_MAX;
}

/* Returns the offset of the first byte != c in [0, n), or SIZE_MAX. */
static inline size_t
first_not_byte(const void *p, size_t n, unsigned char c) {
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		if (b[i] != c) {
			return i;
		}
	}
	return SIZE_MAX;
}

static inline bool
mp_is_aligned(const void *p, size_t a) {
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* ------------------------------------------------------------------------ */
/* Size classes (quantum 16, 4 classes per doubling above 64).              */

/* The size class of a request of n bytes, computed independently. */
static inline size_t
mp_expected_size_class(size_t n) {
	if (n <= 16) {
		return 16;
	}
	if (n <= 64) {
		return (n + 15) & ~(size_t)15;
	}
	unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
	size_t step = (size_t)1 << (lg - 2);
	return (n + step - 1) & ~(step - 1);
}

/* ------------------------------------------------------------------------ */
/* Program entry.                                                           */

static void
mp_timeout_handler(int sig) {
	(void)sig;
	static const char msg[] = "Bail out! test timed out (alarm)\n";
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	_exit(99);
}

/*
 * Call first in main(): selects TAP output (CMOCKA_MESSAGE_OUTPUT in the
 * environment still wins) and arms a watchdog so a deadlock ends the program
 * with a TAP "Bail out!" instead of hanging the suite.
 */
static inline void
mp_test_init(unsigned timeout_seconds) {
	cmocka_set_message_output(CM_OUTPUT_TAP);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (timeout_seconds != 0) {
		signal(SIGALRM, mp_timeout_handler);
		alarm(timeout_seconds);
	}
}

/* Runs one group (one TAP plan); the exit status is 0 iff all passed. */
#define mp_run_tests(tests)						\
	(cmocka_run_group_tests((tests), NULL, NULL) == 0 ? 0 : 1)

#endif /* MALLOC_PROF_TEST_UTIL_H */
