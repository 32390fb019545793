/*
 * test/test_util.h - helpers shared by the unit, integration and stress tests.
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
#include <link.h>
#include <math.h>
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
#include <dirent.h>
#include <dlfcn.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

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

/*
 * An allocation call site for the profiler tests: never inlined or cloned
 * (so the return addresses in a backtrace lie in the function of that
 * name) and kept even if it looks unused.  Its allocator calls must not be
 * tail calls: use the result after the call.  Its symbol is exported
 * (the tests build with -fvisibility=hidden), so that a program linked
 * with -export-dynamic lets mp_fn_range() find its size.
 */
#if defined(__clang__)
#define MP_SITE __attribute__((noinline, used, visibility("default")))
#elif defined(__GNUC__)
#define MP_SITE __attribute__((noinline, noclone, used,			\
    visibility("default")))
#else
#define MP_SITE
#endif

/*
 * A call site built without frame pointers whatever the build's flags
 * (the sanitizer builds add -fno-omit-frame-pointer after a program's own
 * flags), for the tests of the .eh_frame walk; GCC only: clang takes the
 * build's flags.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define MP_NOFP_SITE MP_SITE __attribute__((optimize("omit-frame-pointer")))
#else
#define MP_NOFP_SITE MP_SITE
#endif

/* ------------------------------------------------------------------------ */
/* Keeping the compiler honest.                                             */

/* Returns p, but the compiler no longer knows where it came from. */
static inline void *mp_launder(void *p) {
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}
#define LAUNDER(p) ((__typeof__(p))mp_launder((void *)(p)))

/* Returns n, but the compiler cannot constant-fold it. */
static inline size_t opaque_size(size_t n) {
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

/* How a child that misused a pointer ended: abort() in a debug build
 * (which aborts on misuse), exit 0 in a release build (abort:false: the
 * report, then carry on). */
static inline void mp_assert_misuse_exit(const char *name, int status,
    bool debug) {
	if (debug) {
		MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		    "%s: status %#x, want abort() in a debug build", name,
		    status);
	} else {
		MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "%s: status %#x, want exit 0 (abort:false)", name, status);
	}
}

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
static inline void mp_write_line(const char *s) {
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
static inline int mallctl_fmt(void *oldp, size_t *oldlenp, void *newp,
    size_t newlen, const char *fmt, ...) {
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

/* Whether per-arena statistics count exactly what a test allocated: not
 * with opt.prof, where a sampled small object is a request of arena 0's
 * profiler slabs, whichever thread asked. */
static inline bool mp_stats_exact(void) {
	bool prof = false;
	size_t sz = sizeof(prof);
	if (mallctl("opt.prof", &prof, &sz, NULL, 0) != 0)
		prof = false;
	return !prof;
}

/* Refreshes the stats snapshot by writing "epoch"; returns the new epoch. */
static inline uint64_t mp_epoch(void) {
	uint64_t e = 1;
	size_t sz = sizeof(e);
	int r = mallctl("epoch", &e, &sz, &e, sizeof(e));
	if (r != 0) {
		MP_FAIL("mallctl(\"epoch\") failed: %d", r);
	}
	return e;
}

/* Reads a size_t statistic after refreshing the epoch. */
static inline size_t mp_stat(const char *name) {
	size_t v = 0;
	mp_epoch();
	MALLCTL_READ(name, v);
	return v;
}

/* Non-asserting reads, usable from any thread. Return mallctl's result. */
static inline int mp_read_u64(const char *name, uint64_t *v) {
	size_t sz = sizeof(*v);
	int r = mallctl(name, v, &sz, NULL, 0);
	return (r == 0 && sz != sizeof(*v)) ? EINVAL : r;
}

static inline int mp_read_size(const char *name, size_t *v) {
	size_t sz = sizeof(*v);
	int r = mallctl(name, v, &sz, NULL, 0);
	return (r == 0 && sz != sizeof(*v)) ? EINVAL : r;
}

/* Flushes this thread's tcache; a no-op (not an error) if it is disabled. */
static inline void mp_tcache_flush(void) {
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
static inline const char *mp_env_prefix(void) {
	const char *p = getenv("MALLOC_PROF_PREFIX");
	return p != NULL ? p : "";
}

/* The name of this build's MALLOC_CONF variable. */
static inline const char *mp_env_conf_name(void) {
	const char *var = getenv("MALLOC_PROF_CONF_ENV");
	if (var == NULL || var[0] == '\0') {
#ifdef MALLOC_PROF_CONF_ENV
		var = MALLOC_PROF_CONF_ENV;	/* from <malloc_prof.h> */
#else
		var = "MALLOC_CONF";
#endif
	}
	return var;
}

/* The value of this build's MALLOC_CONF variable, or NULL. */
static inline const char *mp_env_conf(void) {
	return getenv(mp_env_conf_name());
}

/* Whether this file is compiled with ThreadSanitizer (whose builds keep
 * glibc's mutex for the lite locks, mutex.c). */
static inline bool mp_tsan_build(void) {
#if defined(__SANITIZE_THREAD__)
	return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	return true;
#else
	return false;
#endif
#else
	return false;
#endif
}

/* The sanitizer this build runs under ("asan", "tsan", "ubsan"), or "":
 * MALLOC_PROF_SANITIZER, set by configure from CFLAGS (-fsanitize=...) and
 * exported by make check.  Tests that cannot work under one skip with
 * MP_SKIP naming why. */
static inline const char *mp_env_sanitizer(void) {
	const char *s = getenv("MALLOC_PROF_SANITIZER");
	return s != NULL ? s : "";
}

/* True when run by the test harness (make check), false when run by hand. */
static inline bool mp_under_harness(void) {
	return getenv("top_builddir") != NULL;
}

/* ------------------------------------------------------------------------ */
/* Process measurements.                                                    */

static inline size_t mp_page_size(void) {
	return (size_t)sysconf(_SC_PAGESIZE);
}

/*
 * Field `field` of /proc/self/statm (0: address space, 1: resident), in
 * bytes.  Raw syscalls and a stack buffer, so that measuring does not
 * allocate.  Returns 0 on error.
 */
static inline size_t mp_statm_bytes(unsigned field) {
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
	for (unsigned k = 0; k < field; k++) {
		while (*s != '\0' && *s != ' ') {
			s++;
		}
		while (*s == ' ') {
			s++;
		}
	}
	unsigned long long pages = 0;
	while (*s >= '0' && *s <= '9') {
		pages = pages * 10 + (unsigned long long)(*s - '0');
		s++;
	}
	return (size_t)pages * mp_page_size();
}

/* Resident set size in bytes (0 on error). */
static inline size_t read_rss_bytes(void) {
	return mp_statm_bytes(1);
}

/* The address space the process maps now, in bytes (0 on error). */
static inline size_t mp_vm_bytes(void) {
	return mp_statm_bytes(0);
}

/* Lowers the soft RLIMIT_AS to `extra` bytes above what the process maps
 * now, so that its next big mappings fail; returns the soft limit to give
 * back to mp_rlimit_as_restore (the hard one is untouched). */
static inline rlim_t mp_rlimit_as_lower(size_t extra) {
	struct rlimit rl;
	MP_CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rlim_t old = rl.rlim_cur;
	size_t vm = mp_vm_bytes();
	MP_CHECK(vm != 0, "/proc/self/statm");
	rl.rlim_cur = vm + extra;
	MP_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s",
	    strerror(errno));
	return old;
}

static inline void mp_rlimit_as_restore(rlim_t old) {
	struct rlimit rl;
	MP_CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit");
	rl.rlim_cur = old;
	MP_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit back: %s",
	    strerror(errno));
}

/* Reads fd to EOF, or until buf is full, into buf (NUL-terminated);
 * returns the length. */
static inline size_t mp_read_all(int fd, char *buf, size_t size) {
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t r = read(fd, buf + len, size - 1 - len);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			break;
		}
		len += (size_t)r;
	}
	buf[len] = '\0';
	return len;
}

/*
 * Runs fn(arg) in a forked child whose stderr is a pipe, without a core
 * file and with no malloc_message hook (the library writes to stderr);
 * the child exits 0 if fn returns.  out gets what it wrote (NUL-terminated);
 * returns its wait status.
 */
static inline int mp_child_stderr(void (*fn)(void *), void *arg, char *out,
    size_t size) {
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit nocore = {0, 0};
		setrlimit(RLIMIT_CORE, &nocore);
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		malloc_message = NULL;
		fn(arg);
		_exit(0);
	}
	close(fds[1]);
	mp_read_all(fds[0], out, size);
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* A misuse case's child (mp_child_stderr): run(fd) misuses a block and
 * writes its pointer to fd before the misuse.  Returns the wait status,
 * the child's stderr in out and the pointer in *p (asserted sent). */
typedef struct {
	void *(*run)(int fd);
	int fd;
} mp_ptr_child_t;

static inline void mp_ptr_child_main(void *arg) {
	const mp_ptr_child_t *a = arg;
	a->run(a->fd);
}

static inline int mp_child_ptr(void *(*run)(int fd), const char *name,
    char *out, size_t size, uintptr_t *p) {
	int ptr[2];
	assert_int_equal(pipe(ptr), 0);
	mp_ptr_child_t arg = {run, ptr[1]};
	int status = mp_child_stderr(mp_ptr_child_main, &arg, out, size);
	close(ptr[1]);
	*p = 0;
	ssize_t got = read(ptr[0], p, sizeof(*p));
	close(ptr[0]);
	MP_ASSERT(got == (ssize_t)sizeof(*p), "%s: the child sent no pointer "
	    "(status %#x)", name, status);
	return status;
}

/* A TCP connection to port on the loopback address of family (AF_INET or
 * AF_INET6), with send and receive timeouts; -1 with errno on error. */
static inline int mp_connect_loopback(int family, unsigned port,
    unsigned timeout_s) {
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	struct timeval tv = {(time_t)timeout_s, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int r;
	if (family == AF_INET6) {
		struct sockaddr_in6 a;
		memset(&a, 0, sizeof(a));
		a.sin6_family = AF_INET6;
		a.sin6_port = htons((uint16_t)port);
		a.sin6_addr = in6addr_loopback;
		r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	} else {
		struct sockaddr_in a;
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	}
	if (r != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static inline uint64_t mp_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void mp_sleep_ms(unsigned ms) {
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/*
 * A test that waits for something the library does in its own time (a
 * thread to start, decay to purge, a rate limit to open) polls the
 * quantity itself and calls the feature broken only after MP_WAIT_S: far
 * more than the slowest build on a loaded machine needs, so that only a
 * real hang reaches it (a busy machine can stall a process for seconds).
 * Alarms of programs that wait so must be well above it.
 */
#define MP_WAIT_S 60

/* True once MP_WAIT_S have passed since t0 (mp_now_ns()). */
static inline bool mp_waited_too_long(uint64_t t0) {
	return mp_now_ns() - t0 > (uint64_t)MP_WAIT_S * 1000000000u;
}

/* ------------------------------------------------------------------------ */
/* Deterministic pseudo-random numbers (splitmix64).                        */

typedef struct {
	uint64_t s;
} mp_rng_t;

static inline uint64_t mp_rng_next(mp_rng_t *r) {
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static inline uint64_t mp_rng_below(mp_rng_t *r, uint64_t n) {
	return mp_rng_next(r) % n;
}

/* ------------------------------------------------------------------------ */
/* Content patterns.                                                        */

static inline uint64_t mp_pattern_word(uint64_t seed, size_t i) {
	uint64_t x = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
	return x ^ (x >> 29);
}

/* Fills n bytes with a pattern that depends on seed and the offset. */
static inline void pattern_fill(void *p, size_t n, uint64_t seed) {
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
static inline size_t pattern_check(const void *p, size_t n, uint64_t seed) {
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
static inline size_t first_nonzero(const void *p, size_t n) {
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
static inline size_t first_not_byte(const void *p, size_t n, unsigned char c) {
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		if (b[i] != c) {
			return i;
		}
	}
	return SIZE_MAX;
}

static inline bool mp_is_aligned(const void *p, size_t a) {
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* Frees the n objects of v and clears their slots, so that freeing twice
 * is harmless. */
static inline void mp_free_all(void **v, size_t n) {
	for (size_t i = 0; i < n; i++) {
		free(v[i]);
		v[i] = NULL;
	}
}

/* ------------------------------------------------------------------------ */
/* Size classes (quantum 16, 4 classes per doubling above 64).              */

/* The size class of a request of n bytes, computed independently. */
static inline size_t mp_expected_size_class(size_t n) {
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
/* Heap profiles (the prof_* tests).                                        */
/*
 * mp_heap_parse() reads a heap_v2 dump strictly: every counter line must
 * be exactly what its numbers print as ("  t<id>: a: b [c: d]"), thread
 * lines of the header must have ascending uids, and the file must end
 * with the blank line and MAPPED_LIBRARIES section, or right after a
 * complete stack (a dump whose maps could not be read).  Stacks keep
 * frame 0 (the allocator entry point; 0 in a prefixed build, see
 * mp_heap_put_entry) first.
 */

typedef struct {
	uint64_t co, cb, ao, ab;	/* cur objs: bytes [accum objs: bytes] */
} mp_cnts_t;

typedef struct {
	uint64_t uid;
	mp_cnts_t c;
	char name[64];		/* header lines only; "" if none */
} mp_heap_thread_t;

typedef struct {
	size_t nframes;
	uintptr_t *frames;
	mp_cnts_t total;
	size_t nthr;
	mp_heap_thread_t *thr;
} mp_heap_stack_t;

typedef struct {
	uint64_t rate;		/* heap_v2/<rate> */
	mp_cnts_t total;	/* the header t* line */
	size_t nthreads;
	mp_heap_thread_t *threads;
	size_t nstacks;
	mp_heap_stack_t *stacks;
	bool has_maps;		/* "MAPPED_LIBRARIES:" present */
	size_t maps_lines;	/* lines after it */
	bool maps_has_so;	/* some maps line names a .so file */
	char err[256];
} mp_heap_t;

static inline void mp_heap_free(mp_heap_t *h) {
	for (size_t i = 0; i < h->nstacks; i++) {
		free(h->stacks[i].thr);
		free(h->stacks[i].frames);
	}
	free(h->stacks);
	free(h->threads);
	memset(h, 0, sizeof(*h));
}

static inline void mp_cnts_add(mp_cnts_t *a, const mp_cnts_t *b) {
	a->co += b->co;
	a->cb += b->cb;
	a->ao += b->ao;
	a->ab += b->ab;
}

static inline bool mp_cnts_eq(const mp_cnts_t *a, const mp_cnts_t *b) {
	return a->co == b->co && a->cb == b->cb && a->ao == b->ao &&
	    a->ab == b->ab;
}

/* "  t<id>: a: b [c: d]<rest>"; id "*" gives uid UINT64_MAX. */
static inline bool mp_heap_cnt_line(const char *line, uint64_t *uid,
    mp_cnts_t *c, const char **rest) {
	if (strncmp(line, "  t", 3) != 0) {
		return false;
	}
	const char *p = line + 3;
	if (*p == '*') {
		*uid = UINT64_MAX;
		p++;
	} else {
		char *end;
		if (*p < '0' || *p > '9') {
			return false;
		}
		*uid = strtoull(p, &end, 10);
		p = end;
	}
	int n = -1;
	unsigned long long a, b, d, e;
	if (sscanf(p, ": %llu: %llu [%llu: %llu]%n", &a, &b, &d, &e, &n) !=
	    4 || n < 0) {
		return false;
	}
	char canon[160];
	int cl = snprintf(canon, sizeof(canon), ": %llu: %llu [%llu: %llu]",
	    a, b, d, e);
	if (cl != n || strncmp(canon, p, (size_t)n) != 0) {
		return false;
	}
	c->co = a;
	c->cb = b;
	c->ao = d;
	c->ab = e;
	*rest = p + n;
	return true;
}

/* Parses path into h; false with h->err set on any deviation. */
/* Whether a is the address of one of the allocator's entry points. */
static inline bool mp_heap_is_entry(uintptr_t a) {
	const void *const entries[] = {(void *)malloc, (void *)calloc,
	    (void *)realloc, (void *)posix_memalign, (void *)aligned_alloc,
	    (void *)memalign, (void *)valloc, (void *)pvalloc,
	    (void *)mallocx, (void *)rallocx, (void *)xallocx};
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		if (a == (uintptr_t)entries[i]) {
			return true;
		}
	}
	return false;
}

/*
 * A prefixed build writes frame 0 as the call into the allocator (the
 * return address minus one) and leaves the entry point out, so that
 * jeprof, which cannot know mp_malloc by name, charges the caller
 * (prof_heap_v2.c).  The tests read every stack as the library holds it:
 * frame 0 the entry point (0 here: not written), then return addresses.
 * A stack of the entry point alone is left as it is.
 */
static inline bool mp_heap_put_entry(mp_heap_stack_t *s) {
	if (!MALLOC_PROF_HAVE_PREFIX || mp_heap_is_entry(s->frames[0])) {
		return true;
	}
	uintptr_t *nf = realloc(s->frames, (s->nframes + 1) * sizeof(*nf));
	if (nf == NULL) {
		return false;
	}
	memmove(nf + 1, nf, s->nframes * sizeof(*nf));
	nf[0] = 0;
	nf[1]++;
	s->frames = nf;
	s->nframes++;
	return true;
}

/* Whether s's frame 0 is the entry point fn; in a prefixed build, whose
 * dumps do not name it, whether it was left out. */
static inline bool mp_heap_entry_is(const mp_heap_stack_t *s,
    const void *fn) {
	return s->frames[0] == (MALLOC_PROF_HAVE_PREFIX ? 0 : (uintptr_t)fn);
}

static inline bool mp_heap_parse(const char *path, mp_heap_t *h) {
	memset(h, 0, sizeof(*h));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(h->err, sizeof(h->err), "open %.160s: %s", path,
		    strerror(errno));
		return false;
	}
	size_t cap = (size_t)1 << 16, len = 0;
	char *buf = malloc(cap);
	if (buf == NULL) {
		close(fd);
		snprintf(h->err, sizeof(h->err), "out of memory");
		return false;
	}
	for (;;) {
		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				break;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			break;
		}
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';

	bool ok = false;
	char *line = buf;
	mp_heap_stack_t *cur = NULL;
	enum { HDR, TOTAL, THREADS, STK_TOTAL, STK_THREADS, BLANK, MAPS } st =
	    HDR;
	size_t lineno = 0;
#define MP_HFAIL(...) do {						\
	snprintf(h->err, sizeof(h->err), __VA_ARGS__);			\
	goto out;							\
} while (0)
	while (*line != '\0') {
		char *nl = strchr(line, '\n');
		if (nl == NULL) {
			MP_HFAIL("line %zu: no newline at the end", lineno + 1);
		}
		*nl = '\0';
		char *next = nl + 1;
		lineno++;
		uint64_t uid;
		mp_cnts_t c;
		const char *rest;
		switch (st) {
		case HDR: {
			char *end;
			if (strncmp(line, "heap_v2/", 8) != 0) {
				MP_HFAIL("line 1 is \"%.60s\"", line);
			}
			h->rate = strtoull(line + 8, &end, 10);
			if (*end != '\0' || end == line + 8 || h->rate == 0) {
				MP_HFAIL("line 1 is \"%.60s\"", line);
			}
			st = TOTAL;
			break;
		}
		case TOTAL:
			if (!mp_heap_cnt_line(line, &uid, &c, &rest) ||
			    uid != UINT64_MAX || *rest != '\0') {
				MP_HFAIL("line %zu: bad t* line \"%.60s\"",
				    lineno, line);
			}
			h->total = c;
			st = THREADS;
			break;
		case THREADS:
		case STK_THREADS:
			if (line[0] == '@') {
				mp_heap_stack_t *ns = realloc(h->stacks,
				    (h->nstacks + 1) * sizeof(*ns));
				if (ns == NULL) {
					MP_HFAIL("out of memory");
				}
				h->stacks = ns;
				cur = &h->stacks[h->nstacks++];
				memset(cur, 0, sizeof(*cur));
				const char *p = line + 1;
				while (*p != '\0') {
					char *end;
					if (strncmp(p, " 0x", 3) != 0) {
						MP_HFAIL("line %zu: bad stack",
						    lineno);
					}
					uintptr_t a = (uintptr_t)strtoull(
					    p + 3, &end, 16);
					if (end == p + 3 || (*end != ' ' &&
					    *end != '\0')) {
						MP_HFAIL("line %zu: bad frame",
						    lineno);
					}
					uintptr_t *nf = realloc(cur->frames,
					    (cur->nframes + 1) * sizeof(*nf));
					if (nf == NULL) {
						MP_HFAIL("out of memory");
					}
					cur->frames = nf;
					cur->frames[cur->nframes++] = a;
					p = end;
				}
				if (cur->nframes == 0) {
					MP_HFAIL("line %zu: empty stack",
					    lineno);
				}
				if (!mp_heap_put_entry(cur)) {
					MP_HFAIL("out of memory");
				}
				st = STK_TOTAL;
				break;
			}
			if (line[0] == '\0') {
				st = BLANK;
				break;
			}
			if (!mp_heap_cnt_line(line, &uid, &c, &rest) ||
			    uid == UINT64_MAX) {
				MP_HFAIL("line %zu: bad thread line \"%.60s\"",
				    lineno, line);
			}
			if (st == THREADS) {
				if (*rest != '\0' && (*rest != ' ' ||
				    rest[1] == '\0')) {
					MP_HFAIL("line %zu: bad name", lineno);
				}
				if (h->nthreads > 0 &&
				    h->threads[h->nthreads - 1].uid >= uid) {
					MP_HFAIL("line %zu: uids not ascending",
					    lineno);
				}
				mp_heap_thread_t *nt = realloc(h->threads,
				    (h->nthreads + 1) * sizeof(*nt));
				if (nt == NULL) {
					MP_HFAIL("out of memory");
				}
				h->threads = nt;
				mp_heap_thread_t *t = &h->threads[h->nthreads++];
				memset(t, 0, sizeof(*t));
				t->uid = uid;
				t->c = c;
				if (*rest == ' ') {
					snprintf(t->name, sizeof(t->name), "%s",
					    rest + 1);
				}
			} else {
				if (*rest != '\0') {
					MP_HFAIL("line %zu: name in a stack",
					    lineno);
				}
				mp_heap_thread_t *nt = realloc(cur->thr,
				    (cur->nthr + 1) * sizeof(*nt));
				if (nt == NULL) {
					MP_HFAIL("out of memory");
				}
				cur->thr = nt;
				mp_heap_thread_t *t = &cur->thr[cur->nthr++];
				memset(t, 0, sizeof(*t));
				t->uid = uid;
				t->c = c;
			}
			break;
		case STK_TOTAL:
			if (!mp_heap_cnt_line(line, &uid, &c, &rest) ||
			    uid != UINT64_MAX || *rest != '\0') {
				MP_HFAIL("line %zu: bad stack t* \"%.60s\"",
				    lineno, line);
			}
			cur->total = c;
			st = STK_THREADS;
			break;
		case BLANK:
			if (strcmp(line, "MAPPED_LIBRARIES:") != 0) {
				MP_HFAIL("line %zu: \"%.60s\" after the blank "
				    "line", lineno, line);
			}
			h->has_maps = true;
			st = MAPS;
			break;
		case MAPS: {
			h->maps_lines++;
			size_t l = strlen(line);
			if (strstr(line, ".so") != NULL && l > 3) {
				h->maps_has_so = true;
			}
			break;
		}
		}
		line = next;
	}
	if (st == HDR || st == TOTAL) {
		MP_HFAIL("truncated: no t* line");
	}
	if (st == STK_TOTAL) {
		MP_HFAIL("truncated: a stack without its t* line");
	}
	if (st == BLANK) {
		MP_HFAIL("truncated: nothing after the blank line");
	}
	ok = true;
out:
#undef MP_HFAIL
	free(buf);
	if (!ok) {
		char err[sizeof(h->err)];
		memcpy(err, h->err, sizeof(err));
		mp_heap_free(h);
		memcpy(h->err, err, sizeof(err));
	}
	return ok;
}

/* Parses path into h, failing the current test on error (main thread). */
#define MP_HEAP_PARSE(path, h) do {					\
	if (!mp_heap_parse((path), (h))) {				\
		MP_FAIL("%s: %s", (path), (h)->err);			\
	}								\
} while (0)

/*
 * The sums of a dump: every stack's thread lines add up to its t* line,
 * no stack is printed without a live object, and (when `exact`, i.e. at
 * heap_v2/1 where the printed values are raw counts) the stacks and the
 * header's thread lines both add up to the header's t* line.
 */
static inline void mp_heap_check_sums(const mp_heap_t *h, bool exact) {
	mp_cnts_t s, t;
	memset(&s, 0, sizeof(s));
	memset(&t, 0, sizeof(t));
	for (size_t i = 0; i < h->nstacks; i++) {
		mp_cnts_t st;
		memset(&st, 0, sizeof(st));
		for (size_t k = 0; k < h->stacks[i].nthr; k++) {
			mp_cnts_add(&st, &h->stacks[i].thr[k].c);
		}
		if (exact) {
			MP_ASSERT(mp_cnts_eq(&st, &h->stacks[i].total),
			    "stack %zu: thread lines do not add up", i);
		}
		MP_ASSERT(h->stacks[i].nthr >= 1, "stack %zu: no thread line",
		    i);
		MP_ASSERT(h->stacks[i].total.co != 0 ||
		    h->stacks[i].total.ao != 0, "stack %zu printed with no "
		    "object", i);
		mp_cnts_add(&s, &h->stacks[i].total);
	}
	for (size_t i = 0; i < h->nthreads; i++) {
		mp_cnts_add(&t, &h->threads[i].c);
	}
	if (exact) {
		MP_ASSERT(mp_cnts_eq(&s, &h->total), "t* %" PRIu64 ": %" PRIu64
		    " != sum of the stacks %" PRIu64 ": %" PRIu64,
		    h->total.co, h->total.cb, s.co, s.cb);
		MP_ASSERT(mp_cnts_eq(&t, &h->total), "t* != sum of the thread "
		    "lines");
	}
}

/* jeprof's AdjustSamples for one (count, bytes) pair at rate R. */
static inline void mp_heap_unbias(uint64_t n, uint64_t s, uint64_t rate,
    double *n_out, double *s_out) {
	if (n == 0 || rate <= 1) {
		*n_out = (double)n;
		*s_out = (double)s;
		return;
	}
	double ratio = ((double)s / (double)n) / (double)rate;
	double scale = 1.0 / (1.0 - exp(-ratio));
	*n_out = (double)n * scale;
	*s_out = (double)s * scale;
}

/* The name of the function holding return address ra (its call is at
 * ra - 1), from the dynamic symbols (link with -export-dynamic), or "?". */
static inline const char *mp_fn_name(uintptr_t ra) {
	Dl_info di;
	if (dladdr((void *)(ra - 1), &di) == 0 || di.dli_sname == NULL)
		return "?";
	return di.dli_sname;
}

/*
 * The address range of the function at fn: from its ELF symbol when the
 * program exports it (link with -export-dynamic), else [fn, fn + 256).
 */
static inline void mp_fn_range(const void *fn, uintptr_t *lo, uintptr_t *hi) {
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	*lo = (uintptr_t)fn;
	*hi = (uintptr_t)fn + 256;
	if (dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) != 0 &&
	    sym != NULL && info.dli_saddr == fn && sym->st_size != 0) {
		*hi = (uintptr_t)fn + sym->st_size;
	}
}

/* True if the return address ra lies in (lo, hi]: the call instruction
 * it follows is inside [lo, hi). */
static inline bool mp_ra_in(uintptr_t ra, uintptr_t lo, uintptr_t hi) {
	return ra > lo && ra <= hi;
}

/*
 * The index of the stack's first frame of the program: frame 1, unless
 * the frames after frame 0 (the allocator entry point) are return
 * addresses inside the allocator's own shared object, which the
 * profiler promises never to record (prof_callsite checks that
 * promise; the other tests locate their call sites past such frames so
 * that one broken promise fails one test).  1 when the allocator is
 * linked into the program itself, or for addresses of another process.
 */
static inline size_t mp_heap_user_frame(const mp_heap_stack_t *s) {
	Dl_info i0, ik, self;
	if (s->nframes < 2 || dladdr((void *)s->frames[0], &i0) == 0 ||
	    dladdr((void *)(uintptr_t)mp_heap_user_frame, &self) == 0 ||
	    i0.dli_fbase == self.dli_fbase) {
		return 1;
	}
	size_t k = 1;
	while (k < s->nframes - 1 && dladdr((void *)(s->frames[k] - 1), &ik)
	    != 0 && ik.dli_fbase == i0.dli_fbase) {
		k++;
	}
	return k;
}

/*
 * The stack whose first program frame (frame 1: the return address of
 * the allocator entry point, frame 0) lies in the function fn, or NULL.
 * With depth > 1, that many frames from there are searched (a caller
 * that is itself a helper).
 */
static inline const mp_heap_stack_t *mp_heap_find_site(const mp_heap_t *h,
    const void *fn, size_t depth) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	for (size_t i = 0; i < h->nstacks; i++) {
		const mp_heap_stack_t *s = &h->stacks[i];
		size_t u = mp_heap_user_frame(s);
		for (size_t k = u; k < s->nframes && k < u + depth; k++) {
			if (mp_ra_in(s->frames[k], lo, hi)) {
				return s;
			}
		}
	}
	return NULL;
}

/* The header thread line with this uid, or NULL. */
static inline const mp_heap_thread_t *mp_heap_thread(const mp_heap_t *h,
    uint64_t uid) {
	for (size_t i = 0; i < h->nthreads; i++) {
		if (h->threads[i].uid == uid) {
			return &h->threads[i];
		}
	}
	return NULL;
}

/* ---- dump helpers */

/* prof.dump to path; returns mallctl's result. */
static inline int mp_prof_dump(const char *path) {
	return mallctl("prof.dump", NULL, NULL, (void *)&path, sizeof(path));
}

static inline int mp_prof_prefix(const char *prefix) {
	return mallctl("prof.prefix", NULL, NULL, (void *)&prefix,
	    sizeof(prefix));
}

/* Writes a bool mallctl and returns its result; *old gets the old value. */
static inline int mp_prof_switch(const char *name, bool v, bool *old) {
	bool o = false;
	size_t sz = sizeof(o);
	int r = mallctl(name, &o, &sz, &v, sizeof(v));
	if (old != NULL) {
		*old = o;
	}
	return r;
}

/* A fresh directory /tmp/<tag>.XXXXXX in buf; false on error. */
static inline bool mp_tmpdir_make(char *buf, size_t size, const char *tag) {
	snprintf(buf, size, "%s/%s.XXXXXX", getenv("TMPDIR") != NULL &&
	    getenv("TMPDIR")[0] == '/' ? getenv("TMPDIR") : "/tmp", tag);
	return mkdtemp(buf) != NULL;
}

/* Removes the files of dir and dir itself (not recursive), unless
 * MP_KEEP_DUMPS is set. */
static inline void mp_tmpdir_remove(const char *dir) {
	if (getenv("MP_KEEP_DUMPS") != NULL) {
		printf("# dumps kept in %s\n", dir);
		return;
	}
	DIR *d = opendir(dir);
	if (d == NULL) {
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0) {
			continue;
		}
		char p[1024];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

/* An automatic dump name "<base>.<pid>.<seq>.<kind><n>.heap" (or
 * "<base>.<pid>.<seq>.f.heap"). */
typedef struct {
	uint64_t seq, n;
	char kind;
	char name[256];
} mp_autoname_t;

/*
 * The automatic dumps of kind ('m', 'i', 'u', 'f') and pid in dir whose
 * names start with base + "."; names that do not follow the pattern
 * exactly are ignored.  Returns how many there are; out gets up to max
 * of them in order of seq.
 */
static inline size_t mp_dump_list(const char *dir, const char *base, long pid,
    char kind, mp_autoname_t *out, size_t max) {
	size_t n = 0;
	DIR *d = opendir(dir);
	if (d == NULL) {
		return 0;
	}
	struct dirent *e;
	size_t blen = strlen(base);
	while ((e = readdir(d)) != NULL) {
		const char *nm = e->d_name;
		if (strncmp(nm, base, blen) != 0 || nm[blen] != '.') {
			continue;
		}
		const char *r = nm + blen + 1;
		long p;
		unsigned long long seq, k = 0;
		char kc;
		if (sscanf(r, "%ld.%llu.%c", &p, &seq, &kc) != 3 || p != pid ||
		    kc != kind) {
			continue;
		}
		char canon[128];
		if (kind == 'f') {
			snprintf(canon, sizeof(canon), "%ld.%llu.f.heap", p,
			    seq);
		} else {
			if (sscanf(r, "%ld.%llu.%c%llu", &p, &seq, &kc, &k) !=
			    4) {
				continue;
			}
			snprintf(canon, sizeof(canon), "%ld.%llu.%c%llu.heap",
			    p, seq, kc, k);
		}
		if (strcmp(canon, r) != 0) {
			continue;
		}
		if (n < max) {
			out[n].seq = seq;
			out[n].n = k;
			out[n].kind = kc;
			snprintf(out[n].name, sizeof(out[n].name), "%s", nm);
		}
		n++;
	}
	closedir(d);
	size_t m = n < max ? n : max;
	for (size_t i = 1; i < m; i++) {
		for (size_t j = i; j > 0 && out[j - 1].seq > out[j].seq; j--) {
			mp_autoname_t t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	}
	return n;
}

/*
 * Removes this process's automatic dumps of the given kinds ("imuf") named
 * after dir/base: the ones the conf's prof_prefix made before a test set
 * its own prefix.  Says how many on a TAP comment line.
 */
static inline void mp_dump_remove_conf(const char *dir, const char *base,
    const char *kinds) {
	size_t removed = 0;
	for (const char *k = kinds; *k != '\0'; k++) {
		mp_autoname_t a[64];
		size_t n;
		/* Bounded: a file that cannot be unlinked is listed again. */
		for (int round = 0; round < 1000 && (n = mp_dump_list(dir,
		    base, (long)getpid(), *k, a, 64)) > 0; round++) {
			for (size_t i = 0; i < n && i < 64; i++) {
				char p[512];
				snprintf(p, sizeof(p), "%s/%s", dir, a[i].name);
				unlink(p);
				removed++;
			}
		}
	}
	printf("# removed %zu early dumps from %s/%s.*\n", removed, dir, base);
}

/*
 * ---- the library's messages (malloc_message), captured in a static
 * buffer: the hook runs inside the library and must not allocate.  The
 * counters are volatile and mp_msgs_stop() is a compiler barrier on the
 * buffer: glibc declares malloc and free `leaf' (they never call back into
 * the program), so without them the compiler may assume a malloc() call
 * cannot change what the hook writes.
 */

static char mp_msgs[16384] MP_UNUSED;
static volatile size_t mp_msgs_len MP_UNUSED;
static volatile unsigned mp_msgs_lines MP_UNUSED;
static volatile unsigned mp_msgs_calls MP_UNUSED;     /* hook calls */
static volatile unsigned mp_msgs_opaque MP_UNUSED;    /* with non-NULL
							 * cbopaque */

static inline void mp_msgs_hook(void *cbopaque, const char *s) {
	mp_msgs_calls++;
	mp_msgs_opaque += cbopaque != NULL;
	size_t n = strlen(s);
	size_t len = mp_msgs_len;
	if (len + n < sizeof(mp_msgs)) {
		memcpy(mp_msgs + len, s, n + 1);
		mp_msgs_len = len + n;
	}
	for (; *s != '\0'; s++) {
		mp_msgs_lines += *s == '\n';
	}
}

static inline void mp_msgs_start(void) {
	mp_msgs[0] = '\0';
	mp_msgs_len = 0;
	mp_msgs_lines = 0;
	mp_msgs_calls = 0;
	mp_msgs_opaque = 0;
	malloc_message = mp_msgs_hook;
}

static inline void mp_msgs_stop(void) {
	malloc_message = NULL;
	__asm__ volatile("" : : "r"(mp_msgs) : "memory");
}

/* ------------------------------------------------------------------------ */
/* pprof reader: gzip + inflate, then profile.proto, written from RFC 1951, */
/* RFC 1952 and pprof's profile.proto, independently of src/prof_pprof.c.   */
/*
 * mp_gunzip checks the gzip header, inflates (stored and fixed-Huffman
 * blocks: what the library writes; a dynamic block is reported as not
 * understood) and checks the CRC-32 and ISIZE trailer.  mp_pprof_parse
 * decodes the Profile message into mp_pprof_t (unknown fields skipped,
 * packed and unpacked repeated numbers both accepted).
 */

/* CRC-32 (IEEE, reflected), bit by bit: slow and obviously right. */
static inline uint32_t mp_crc32(const uint8_t *p, size_t n) {
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++) {
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
		}
	}
	return ~c;
}

typedef struct {
	const uint8_t *in;
	size_t len, pos;	/* pos in bits */
	bool err;
} mp_bits_t;

static inline unsigned mp_bit(mp_bits_t *b) {
	if (b->pos >= b->len * 8) {
		b->err = true;
		return 0;
	}
	unsigned v = (b->in[b->pos / 8] >> (b->pos % 8)) & 1;
	b->pos++;
	return v;
}

/* n bits, least significant first (extra bits, header fields). */
static inline unsigned mp_bits(mp_bits_t *b, unsigned n) {
	unsigned v = 0;
	for (unsigned i = 0; i < n; i++) {
		v |= mp_bit(b) << i;
	}
	return v;
}

/* The next fixed-code literal/length symbol (RFC 1951 3.2.6). */
static inline unsigned mp_fixed_sym(mp_bits_t *b) {
	unsigned c = 0;
	for (int i = 0; i < 7; i++) {
		c = (c << 1) | mp_bit(b);
	}
	if (c <= 0x17) {
		return 256 + c;
	}
	c = (c << 1) | mp_bit(b);
	if (c >= 0x30 && c <= 0xbf) {
		return c - 0x30;
	}
	if (c >= 0xc0 && c <= 0xc7) {
		return 280 + (c - 0xc0);
	}
	c = (c << 1) | mp_bit(b);
	return 144 + (c - 0x190);
}

typedef struct {
	uint8_t *p;
	size_t len, cap;
} mp_bytes_t;

static inline void mp_bytes_put(mp_bytes_t *o, uint8_t c) {
	if (o->len == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 4096;
		o->p = realloc(o->p, o->cap);
		if (o->p == NULL) {
			abort();
		}
	}
	o->p[o->len++] = c;
}

/*
 * Inflate gz[0..n) into *out (malloc'd, caller frees).  false with err[]
 * filled on any problem.  *nblocks / *nfixed count the blocks.
 */
static inline bool mp_gunzip(const uint8_t *gz, size_t n, mp_bytes_t *out,
    char *err, size_t errsize) {
	static const uint16_t lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13,
	    15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163,
	    195, 227, 258};
	static const uint16_t dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25,
	    33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049,
	    3073, 4097, 6145, 8193, 12289, 16385, 24577};
	memset(out, 0, sizeof(*out));
	if (n < 18 || gz[0] != 0x1f || gz[1] != 0x8b || gz[2] != 8) {
		snprintf(err, errsize, "not a gzip stream (%zu bytes)", n);
		return false;
	}
	unsigned flg = gz[3];
	size_t pos = 10;
	if (flg & 4) {
		pos += 2 + (size_t)(gz[pos] | (gz[pos + 1] << 8));
	}
	if (flg & 8) {
		while (pos < n && gz[pos] != 0) pos++;
		pos++;
	}
	if (flg & 16) {
		while (pos < n && gz[pos] != 0) pos++;
		pos++;
	}
	if (flg & 2) {
		pos += 2;
	}
	if (pos + 8 > n) {
		snprintf(err, errsize, "truncated gzip header");
		return false;
	}
	mp_bits_t b = {gz + pos, n - 8 - pos, 0, false};
	bool last = false;
	while (!last && !b.err) {
		last = mp_bits(&b, 1);
		unsigned type = mp_bits(&b, 2);
		if (type == 0) {
			b.pos = (b.pos + 7) / 8 * 8;
			unsigned l = mp_bits(&b, 16), nl = mp_bits(&b, 16);
			if ((l ^ 0xffff) != nl) {
				snprintf(err, errsize, "stored block: bad LEN");
				free(out->p);
				return false;
			}
			for (unsigned i = 0; i < l && !b.err; i++) {
				mp_bytes_put(out, (uint8_t)mp_bits(&b, 8));
			}
		} else if (type == 1) {
			for (;;) {
				unsigned sym = mp_fixed_sym(&b);
				if (b.err || sym == 256) {
					break;
				}
				if (sym < 256) {
					mp_bytes_put(out, (uint8_t)sym);
					continue;
				}
				if (sym > 285) {
					b.err = true;
					break;
				}
				unsigned li = sym - 257;
				unsigned le = li < 8 || li == 28 ? 0 :
				    (li - 4) / 4;
				unsigned len = lbase[li] + mp_bits(&b, le);
				unsigned dc = 0;
				for (int i = 0; i < 5; i++) {
					dc = (dc << 1) | mp_bit(&b);
				}
				if (dc > 29) {
					b.err = true;
					break;
				}
				unsigned de = dc < 4 ? 0 : (dc - 2) / 2;
				size_t dist = dbase[dc] + mp_bits(&b, de);
				if (dist > out->len) {
					snprintf(err, errsize, "distance %zu "
					    "before the start", dist);
					free(out->p);
					return false;
				}
				for (unsigned i = 0; i < len; i++) {
					mp_bytes_put(out,
					    out->p[out->len - dist]);
				}
			}
		} else {
			snprintf(err, errsize, "block type %u not understood "
			    "by this reader", type);
			free(out->p);
			return false;
		}
	}
	if (b.err) {
		snprintf(err, errsize, "deflate stream truncated or corrupt");
		free(out->p);
		return false;
	}
	size_t end = pos + (b.pos + 7) / 8;
	if (end + 8 != n) {
		snprintf(err, errsize, "%zu bytes after the deflate stream, "
		    "want the 8-byte trailer", n - end);
		free(out->p);
		return false;
	}
	uint32_t crc = (uint32_t)gz[end] | (uint32_t)gz[end + 1] << 8 |
	    (uint32_t)gz[end + 2] << 16 | (uint32_t)gz[end + 3] << 24;
	uint32_t isize = (uint32_t)gz[end + 4] | (uint32_t)gz[end + 5] << 8 |
	    (uint32_t)gz[end + 6] << 16 | (uint32_t)gz[end + 7] << 24;
	if (crc != mp_crc32(out->p, out->len)) {
		snprintf(err, errsize, "CRC-32 mismatch");
		free(out->p);
		return false;
	}
	if (isize != (uint32_t)out->len) {
		snprintf(err, errsize, "ISIZE %u != %zu", isize, out->len);
		free(out->p);
		return false;
	}
	return true;
}

/* ---- profile.proto */

typedef struct {
	size_t nlocs;
	uint64_t locs[256];
	size_t nvals;
	int64_t vals[8];
	const char *label_key, *label_str;	/* the first string label */
	size_t nlabels;
	/* The first MP_PP_LABELS labels: key, string ("" for a number
	 * label) and number. */
	const char *lkey[4], *lstr[4];
	int64_t lnum[4];
} mp_pp_sample_t;
#define MP_PP_LABELS 4

typedef struct {
	uint64_t id, mapping_id, address;
	size_t nlines;
	uint64_t function_id;			/* of the first line */
} mp_pp_loc_t;

typedef struct {
	uint64_t id, start, limit, offset;
	const char *file, *build_id;
} mp_pp_map_t;

typedef struct {
	uint64_t id;
	const char *name, *system_name, *file;
} mp_pp_fn_t;

typedef struct {
	size_t ntypes;
	const char *type[8], *unit[8];
	size_t nsamples, nlocs, nmaps, nfns, nstrs;
	mp_pp_sample_t *samples;
	mp_pp_loc_t *locs;
	mp_pp_map_t *maps;
	mp_pp_fn_t *fns;
	char **strs;
	int64_t time_nanos, period;
	int64_t duration_nanos;			/* 0: none */
	const char *period_type, *period_unit, *default_type;
	char err[256];
	/* indices as read, resolved once the string table is known */
	uint64_t raw_type[8], raw_unit[8], raw_ptype, raw_punit, raw_default;
} mp_pprof_t;

typedef struct {
	const uint8_t *p, *end;
	bool err;
} mp_pb_t;

static inline uint64_t mp_pb_varint(mp_pb_t *r) {
	uint64_t v = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (r->p >= r->end) {
			r->err = true;
			return 0;
		}
		uint8_t c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			return v;
		}
	}
	r->err = true;
	return 0;
}

/* The next field: *field, *wire, and for wire type 2 the sub-reader;
 * for 0 the value.  false at the end or on error. */
static inline bool mp_pb_next(mp_pb_t *r, unsigned *field, unsigned *wire,
    uint64_t *v, mp_pb_t *sub) {
	if (r->p >= r->end || r->err) {
		return false;
	}
	uint64_t key = mp_pb_varint(r);
	*field = (unsigned)(key >> 3);
	*wire = (unsigned)(key & 7);
	switch (*wire) {
	case 0:
		*v = mp_pb_varint(r);
		break;
	case 1:
		if (r->end - r->p < 8) r->err = true; else r->p += 8;
		break;
	case 5:
		if (r->end - r->p < 4) r->err = true; else r->p += 4;
		break;
	case 2: {
		uint64_t len = mp_pb_varint(r);
		if (len > (uint64_t)(r->end - r->p)) {
			r->err = true;
			break;
		}
		sub->p = r->p;
		sub->end = r->p + len;
		sub->err = false;
		r->p += len;
		*v = len;
		break;
	}
	default:
		r->err = true;
	}
	return !r->err;
}

/* Appends the numbers of a repeated field (packed or not) to out. */
static inline void mp_pb_repeated(unsigned wire, uint64_t v, mp_pb_t *sub,
    uint64_t *out, size_t *n, size_t max) {
	if (wire == 0) {
		if (*n < max) out[(*n)++] = v;
		return;
	}
	while (sub->p < sub->end && !sub->err) {
		uint64_t x = mp_pb_varint(sub);
		if (*n < max) out[(*n)++] = x;
	}
}

#define MP_GROW(arr, n) do {						\
	(arr) = realloc((arr), ((n) + 1) * sizeof(*(arr)));		\
	if ((arr) == NULL) abort();					\
	memset(&(arr)[(n)], 0, sizeof(*(arr)));				\
} while (0)

static inline void mp_pprof_free(mp_pprof_t *pp) {
	for (size_t i = 0; i < pp->nstrs; i++) {
		free(pp->strs[i]);
	}
	free(pp->strs);
	free(pp->samples);
	free(pp->locs);
	free(pp->maps);
	free(pp->fns);
	memset(pp, 0, sizeof(*pp));
}

/* Parse a decompressed Profile.  false with pp->err filled. */
static inline bool mp_pprof_parse(const uint8_t *data, size_t len,
    mp_pprof_t *pp) {
	memset(pp, 0, sizeof(*pp));
	mp_pb_t r = {data, data + len, false}, sub, s2;
	unsigned f, w, f2, w2;
	uint64_t v, v2;
	/* Label indices, resolved at the end. */
	uint64_t (*lab)[2 + 2 * MP_PP_LABELS] = NULL;
	/* Mapping/function string indices, resolved at the end. */
	uint64_t (*mstr)[2] = NULL, (*fstr)[3] = NULL;
	while (mp_pb_next(&r, &f, &w, &v, &sub)) {
		switch (f) {
		case 1:
		case 11: {	/* ValueType */
			uint64_t t = 0, u = 0;
			while (mp_pb_next(&sub, &f2, &w2, &v2, &s2)) {
				if (f2 == 1) t = v2;
				if (f2 == 2) u = v2;
			}
			if (f == 11) {
				pp->raw_ptype = t;
				pp->raw_punit = u;
			} else if (pp->ntypes < 8) {
				pp->raw_type[pp->ntypes] = t;
				pp->raw_unit[pp->ntypes++] = u;
			}
			break;
		}
		case 2: {	/* Sample */
			MP_GROW(pp->samples, pp->nsamples);
			lab = realloc(lab, (pp->nsamples + 1) * sizeof(*lab));
			if (lab == NULL) abort();
			memset(lab[pp->nsamples], 0, sizeof(*lab));
			mp_pp_sample_t *s = &pp->samples[pp->nsamples++];
			while (mp_pb_next(&sub, &f2, &w2, &v2, &s2)) {
				if (f2 == 1) {
					mp_pb_repeated(w2, v2, &s2, s->locs,
					    &s->nlocs, 256);
				} else if (f2 == 2) {
					uint64_t vals[8];
					size_t nv = 0;
					mp_pb_repeated(w2, v2, &s2, vals, &nv,
					    8);
					for (size_t k = 0; k < nv &&
					    s->nvals < 8; k++) {
						s->vals[s->nvals++] =
						    (int64_t)vals[k];
					}
				} else if (f2 == 3) {
					mp_pb_t s3;
					unsigned f3, w3;
					uint64_t v3, key = 0, str = 0, num = 0;
					while (mp_pb_next(&s2, &f3, &w3, &v3,
					    &s3)) {
						if (f3 == 1) key = v3;
						if (f3 == 2) str = v3;
						if (f3 == 3) num = v3;
					}
					if (s->nlabels < MP_PP_LABELS) {
						size_t j = s->nlabels;
						lab[pp->nsamples - 1][2 + 2 * j] =
						    key;
						lab[pp->nsamples - 1][3 + 2 * j] =
						    str;
						s->lnum[j] = (int64_t)num;
					}
					if (str != 0 &&
					    lab[pp->nsamples - 1][0] == 0) {
						lab[pp->nsamples - 1][0] = key;
						lab[pp->nsamples - 1][1] = str;
					}
					s->nlabels++;
				}
			}
			break;
		}
		case 3: {	/* Mapping */
			MP_GROW(pp->maps, pp->nmaps);
			mstr = realloc(mstr, (pp->nmaps + 1) * sizeof(*mstr));
			if (mstr == NULL) abort();
			mstr[pp->nmaps][0] = mstr[pp->nmaps][1] = 0;
			mp_pp_map_t *m = &pp->maps[pp->nmaps++];
			while (mp_pb_next(&sub, &f2, &w2, &v2, &s2)) {
				if (f2 == 1) m->id = v2;
				if (f2 == 2) m->start = v2;
				if (f2 == 3) m->limit = v2;
				if (f2 == 4) m->offset = v2;
				if (f2 == 5) mstr[pp->nmaps - 1][0] = v2;
				if (f2 == 6) mstr[pp->nmaps - 1][1] = v2;
			}
			break;
		}
		case 4: {	/* Location */
			MP_GROW(pp->locs, pp->nlocs);
			mp_pp_loc_t *l = &pp->locs[pp->nlocs++];
			while (mp_pb_next(&sub, &f2, &w2, &v2, &s2)) {
				if (f2 == 1) l->id = v2;
				if (f2 == 2) l->mapping_id = v2;
				if (f2 == 3) l->address = v2;
				if (f2 == 4) {
					mp_pb_t s3;
					unsigned f3, w3;
					uint64_t v3;
					while (mp_pb_next(&s2, &f3, &w3, &v3,
					    &s3)) {
						if (f3 == 1 && l->nlines == 0)
							l->function_id = v3;
					}
					l->nlines++;
				}
			}
			break;
		}
		case 5: {	/* Function */
			MP_GROW(pp->fns, pp->nfns);
			fstr = realloc(fstr, (pp->nfns + 1) * sizeof(*fstr));
			if (fstr == NULL) abort();
			memset(fstr[pp->nfns], 0, sizeof(fstr[0]));
			mp_pp_fn_t *fn = &pp->fns[pp->nfns++];
			while (mp_pb_next(&sub, &f2, &w2, &v2, &s2)) {
				if (f2 == 1) fn->id = v2;
				if (f2 >= 2 && f2 <= 4)
					fstr[pp->nfns - 1][f2 - 2] = v2;
			}
			break;
		}
		case 6: {	/* string_table */
			MP_GROW(pp->strs, pp->nstrs);
			char *str = malloc(v + 1);
			if (str == NULL) abort();
			memcpy(str, sub.p, v);
			str[v] = '\0';
			pp->strs[pp->nstrs++] = str;
			break;
		}
		case 9: pp->time_nanos = (int64_t)v; break;
		case 10: pp->duration_nanos = (int64_t)v; break;
		case 12: pp->period = (int64_t)v; break;
		case 14: pp->raw_default = v; break;
		default: break;
		}
	}
	bool ok = !r.err;
	if (!ok) {
		snprintf(pp->err, sizeof(pp->err), "malformed protobuf");
	}
	if (ok && (pp->nstrs == 0 || pp->strs[0][0] != '\0')) {
		snprintf(pp->err, sizeof(pp->err), "string_table[0] is not "
		    "\"\"");
		ok = false;
	}
#define MP_STR(i) ((i) < pp->nstrs ? pp->strs[(i)] : (ok = false,	\
	snprintf(pp->err, sizeof(pp->err), "string index %" PRIu64	\
	" out of range", (uint64_t)(i)), ""))
	for (size_t i = 0; ok && i < pp->ntypes; i++) {
		pp->type[i] = MP_STR(pp->raw_type[i]);
		pp->unit[i] = MP_STR(pp->raw_unit[i]);
	}
	if (ok) {
		pp->period_type = MP_STR(pp->raw_ptype);
		pp->period_unit = MP_STR(pp->raw_punit);
		pp->default_type = MP_STR(pp->raw_default);
	}
	for (size_t i = 0; ok && i < pp->nsamples; i++) {
		if (lab[i][0] != 0) {
			pp->samples[i].label_key = MP_STR(lab[i][0]);
			pp->samples[i].label_str = MP_STR(lab[i][1]);
		}
		for (size_t j = 0; j < pp->samples[i].nlabels &&
		    j < MP_PP_LABELS; j++) {
			pp->samples[i].lkey[j] = MP_STR(lab[i][2 + 2 * j]);
			pp->samples[i].lstr[j] = MP_STR(lab[i][3 + 2 * j]);
		}
	}
	for (size_t i = 0; ok && i < pp->nmaps; i++) {
		pp->maps[i].file = MP_STR(mstr[i][0]);
		pp->maps[i].build_id = MP_STR(mstr[i][1]);
	}
	for (size_t i = 0; ok && i < pp->nfns; i++) {
		pp->fns[i].name = MP_STR(fstr[i][0]);
		pp->fns[i].system_name = MP_STR(fstr[i][1]);
		pp->fns[i].file = MP_STR(fstr[i][2]);
	}
#undef MP_STR
	free(lab);
	free(mstr);
	free(fstr);
	return ok;
}

static inline const mp_pp_loc_t *mp_pprof_loc(const mp_pprof_t *pp,
    uint64_t id) {
	for (size_t i = 0; i < pp->nlocs; i++) {
		if (pp->locs[i].id == id) {
			return &pp->locs[i];
		}
	}
	return NULL;
}

static inline const mp_pp_map_t *mp_pprof_map(const mp_pprof_t *pp,
    uint64_t id) {
	for (size_t i = 0; i < pp->nmaps; i++) {
		if (pp->maps[i].id == id) {
			return &pp->maps[i];
		}
	}
	return NULL;
}

/* The index of the sample type named `type`, or -1. */
static inline int mp_pprof_type(const mp_pprof_t *pp, const char *type) {
	for (size_t i = 0; i < pp->ntypes; i++) {
		if (strcmp(pp->type[i], type) == 0) {
			return (int)i;
		}
	}
	return -1;
}

/* Decode a whole .pb.gz held in memory; false with err[] filled. */
static inline bool mp_pprof_decode(const uint8_t *gz, size_t n,
    mp_pprof_t *pp) {
	mp_bytes_t raw;
	char err[200];
	if (!mp_gunzip(gz, n, &raw, err, sizeof(err))) {
		memset(pp, 0, sizeof(*pp));
		snprintf(pp->err, sizeof(pp->err), "gzip: %s", err);
		return false;
	}
	bool ok = mp_pprof_parse(raw.p, raw.len, pp);
	free(raw.p);
	return ok;
}

/* Read a whole file (or the rest of an fd); malloc'd, *n its size. */
static inline uint8_t *mp_read_fd_all(int fd, size_t *n) {
	mp_bytes_t b = {NULL, 0, 0};
	uint8_t buf[65536];
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR) continue;
		if (r <= 0) break;
		for (ssize_t i = 0; i < r; i++) mp_bytes_put(&b, buf[i]);
	}
	*n = b.len;
	if (b.p == NULL) {
		b.p = malloc(1);
	}
	return b.p;
}

/* Decode the .pb.gz at path, failing the current test on error. */
#define MP_PPROF_LOAD(path, pp) do {					\
	int mp_fd_ = open((path), O_RDONLY | O_CLOEXEC);		\
	MP_ASSERT(mp_fd_ >= 0, "open %s: %s", (path), strerror(errno));	\
	size_t mp_n_;							\
	uint8_t *mp_b_ = mp_read_fd_all(mp_fd_, &mp_n_);		\
	close(mp_fd_);							\
	bool mp_ok_ = mp_pprof_decode(mp_b_, mp_n_, (pp));		\
	free(mp_b_);							\
	if (!mp_ok_) {							\
		MP_FAIL("%s: %s", (path), (pp)->err);			\
	}								\
} while (0)

/* ------------------------------------------------------------------------ */
/* Program entry.                                                           */

/*
 * Hang detector.  Alarms here are never time budgets: each is far above
 * the slowest build's run time on a loaded machine (doc/reliability.md, "A
 * suite that passes on a busy machine").  When one fires (or test/run.sh's
 * timeout sends SIGALRM) the handler writes, as TAP comments, how long
 * after arming it fired and every thread's name, state, CPU time, wait
 * channel and system call from /proc/self/task: threads asleep in futex
 * with CPU times that no longer grow are a deadlock, threads running are
 * a slow machine.  Only async-signal-safe calls (open, read, write,
 * getdents64, clock_gettime): no stdio, no malloc.  The test program
 * (mp_test_init) then bails out; any other process (a forked child, a
 * program run by a test) dies of SIGALRM, so that its parent sees why.
 */
static uint64_t mp_alarm_armed_ns MP_UNUSED;
static unsigned mp_alarm_secs MP_UNUSED;
static pid_t mp_alarm_main_pid MP_UNUSED;

typedef struct {
	char b[768];
	size_t n;
} mp_sigline_t;

static inline void mp_sigline_str(mp_sigline_t *l, const char *s) {
	while (*s != '\0' && l->n < sizeof(l->b) - 1) {
		l->b[l->n++] = *s++;
	}
}

static inline void mp_sigline_u(mp_sigline_t *l, uint64_t v) {
	char d[24];
	int k = 0;
	do {
		d[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (k > 0 && l->n < sizeof(l->b) - 1) {
		l->b[l->n++] = d[--k];
	}
}

/* ms as seconds with one decimal. */
static inline void mp_sigline_secs(mp_sigline_t *l, uint64_t ms) {
	mp_sigline_u(l, ms / 1000);
	mp_sigline_str(l, ".");
	mp_sigline_u(l, ms / 100 % 10);
	mp_sigline_str(l, " s");
}

static inline void mp_sigline_end(mp_sigline_t *l) {
	l->b[l->n++] = '\n';
	(void)!write(STDOUT_FILENO, l->b, l->n);
	l->n = 0;
}

/* /proc/self/task/<tid>/<what> into buf (first line, NUL-terminated). */
static inline size_t mp_sig_read_task(const char *tid, const char *what,
    char *buf, size_t size) {
	mp_sigline_t path = {.n = 0};
	mp_sigline_str(&path, "/proc/self/task/");
	mp_sigline_str(&path, tid);
	mp_sigline_str(&path, "/");
	mp_sigline_str(&path, what);
	path.b[path.n] = '\0';
	size_t len = 0;
	int fd = open(path.b, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r = read(fd, buf, size - 1);
		len = r > 0 ? (size_t)r : 0;
		close(fd);
	}
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n') {
			buf[i] = '\0';
			return i;
		}
	}
	return len;
}

/* One line for thread tid: name, state, utime+stime (clock ticks), wchan,
 * syscall ("nr args... sp pc", or "running"). */
static inline void mp_sig_dump_task(const char *tid) {
	char stat[512], buf[256];
	mp_sigline_t l = {.n = 0};
	mp_sigline_str(&l, "#   thread ");
	mp_sigline_str(&l, tid);
	mp_sig_read_task(tid, "stat", stat, sizeof(stat));
	/* "tid (comm) S f4 ... f13 utime stime ...": comm may hold spaces
	 * and parentheses, the fields after the last ')' do not. */
	char *close_paren = strrchr(stat, ')');
	char *open_paren = strchr(stat, '(');
	if (close_paren != NULL && open_paren != NULL &&
	    open_paren < close_paren) {
		*close_paren = '\0';
		mp_sigline_str(&l, " (");
		mp_sigline_str(&l, open_paren + 1);
		mp_sigline_str(&l, ") state ");
		const char *f = close_paren + 2;
		char state[2] = {*f, '\0'};
		mp_sigline_str(&l, state);
		uint64_t ticks = 0;
		for (unsigned field = 3; *f != '\0' && field <= 15; f++) {
			if (*f == ' ') {
				field++;
			} else if (field >= 14 && *f >= '0' && *f <= '9') {
				uint64_t v = 0;
				while (*f >= '0' && *f <= '9') {
					v = v * 10 + (uint64_t)(*f++ - '0');
				}
				ticks += v;
				f--;
			}
		}
		mp_sigline_str(&l, ", cpu ");
		mp_sigline_u(&l, ticks);
		mp_sigline_str(&l, " ticks");
	}
	mp_sig_read_task(tid, "wchan", buf, sizeof(buf));
	mp_sigline_str(&l, ", wchan ");
	mp_sigline_str(&l, buf[0] != '\0' ? buf : "?");
	mp_sig_read_task(tid, "syscall", buf, sizeof(buf));
	mp_sigline_str(&l, ", syscall ");
	mp_sigline_str(&l, buf[0] != '\0' ? buf : "?");
	uint64_t self = 0;
	for (const char *c = tid; *c >= '0' && *c <= '9'; c++) {
		self = self * 10 + (uint64_t)(*c - '0');
	}
	if (self == (uint64_t)syscall(SYS_gettid)) {
		mp_sigline_str(&l, " (this thread: the handler's reads)");
	}
	mp_sigline_end(&l);
}

/* Every thread of the calling process, one line each, as TAP comments. */
static inline void mp_dump_threads(void) {
	int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		static const char msg[] = "#   (no /proc/self/task)\n";
		(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
		return;
	}
	/* struct linux_dirent64: ino, off, reclen, type, name. */
	_Alignas(8) char ents[4096];
	long n;
	while ((n = syscall(SYS_getdents64, dfd, ents, sizeof(ents))) > 0) {
		for (long off = 0; off < n;) {
			unsigned short reclen;
			memcpy(&reclen, ents + off + 16, sizeof(reclen));
			const char *name = ents + off + 19;
			if (name[0] >= '0' && name[0] <= '9') {
				mp_sig_dump_task(name);
			}
			off += reclen;
		}
	}
	close(dfd);
}

static void mp_alarm_handler(int sig) {
	(void)sig;
	int saved_errno = errno;
	uint64_t ms = (mp_now_ns() - mp_alarm_armed_ns) / 1000000u;
	mp_sigline_t l = {.n = 0};
	mp_sigline_str(&l, "# SIGALRM in pid ");
	mp_sigline_u(&l, (uint64_t)getpid());
	mp_sigline_str(&l, " ");
	mp_sigline_secs(&l, ms);
	mp_sigline_str(&l, " after arming its ");
	mp_sigline_u(&l, mp_alarm_secs);
	mp_sigline_str(&l, " s alarm; its threads (state R = running, S/D "
	    "= waiting; syscall 'nr args sp pc'):");
	mp_sigline_end(&l);
	mp_dump_threads();
	if (getpid() == mp_alarm_main_pid) {
		mp_sigline_str(&l, "Bail out! test timed out (SIGALRM after ");
		mp_sigline_secs(&l, ms);
		mp_sigline_str(&l, "; thread states above)");
		mp_sigline_end(&l);
		_exit(99);
	}
	/* Die of the signal itself: SIG_DFL, then unblock the pending one. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(SIGALRM, &sa, NULL);
	raise(SIGALRM);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	errno = saved_errno;
}

/*
 * Arms the hang detector for this process: `seconds` from now SIGALRM
 * dumps every thread's state and ends the process (see above).  Every
 * test's alarm goes through here, forked children's too.
 */
static inline void mp_alarm_arm(unsigned seconds) {
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = mp_alarm_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	mp_alarm_armed_ns = mp_now_ns();
	mp_alarm_secs = seconds;
	alarm(seconds);
}

/*
 * Call first in main(): selects TAP output (CMOCKA_MESSAGE_OUTPUT in the
 * environment still wins) and arms the hang detector (mp_alarm_arm; 0:
 * none) so a deadlock ends the program with a TAP "Bail out!" after the
 * thread states instead of hanging the suite.
 */
static inline void mp_test_init(unsigned timeout_seconds) {
	cmocka_set_message_output(CM_OUTPUT_TAP);
	setvbuf(stdout, NULL, _IOLBF, 0);
	mp_alarm_main_pid = getpid();
	/* With 0 no alarm, but run.sh's timeout still gets the states. */
	mp_alarm_arm(timeout_seconds);
}

/*
 * True in the builds that run several times slower (--enable-debug:
 * assertions, junk filling; sanitizers), for stress tests to size their
 * loops so that those too finish far below their alarm.  Reads
 * config.debug: call after the allocator is in use.
 */
static inline bool mp_slow_build(void) {
	bool debug = false;
	size_t sz = sizeof(debug);
	if (mallctl("config.debug", &debug, &sz, NULL, 0) != 0) {
		debug = false;
	}
	return debug || mp_env_sanitizer()[0] != '\0';
}

/* Runs one group (one TAP plan); the exit status is 0 iff all passed. */
#define mp_run_tests(tests)						\
	(cmocka_run_group_tests((tests), NULL, NULL) == 0 ? 0 : 1)

/*
 * Runs this program again as `--child MODE` with conf (NULL: none) as its
 * only options (MALLOC_CONF and this build's variable cleared first), and
 * waits for it.  Its standard error is read into err (NUL-terminated) and
 * shown in the log; its standard output into out, or into err too when
 * out is NULL (a child with a separate out must write at most a pipe's
 * worth there: err is read first).  Returns the wait status; *pidp, if
 * not NULL, is the child's pid.
 */
static inline int mp_run_child_conf(const char *mode, const char *conf,
    char *err, size_t errsize, char *out, size_t outsize, pid_t *pidp) {
	int efd[2], ofd[2] = {-1, -1};
	assert_int_equal(pipe(efd), 0);
	if (out != NULL)
		assert_int_equal(pipe(ofd), 0);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	char var[256];
	snprintf(var, sizeof(var), "%s", mp_env_conf_name());
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(efd[0]);
		dup2(efd[1], STDERR_FILENO);
		if (out != NULL) {
			close(ofd[0]);
			dup2(ofd[1], STDOUT_FILENO);
			close(ofd[1]);
		} else {
			dup2(efd[1], STDOUT_FILENO);
		}
		close(efd[1]);
		unsetenv("MALLOC_CONF");
		unsetenv(var);
		if (conf != NULL)
			setenv(var, conf, 1);
		execl(exe, exe, "--child", mode, (char *)NULL);
		_exit(127);
	}
	close(efd[1]);
	if (out != NULL)
		close(ofd[1]);
	mp_read_all(efd[0], err, errsize);
	close(efd[0]);
	if (out != NULL) {
		mp_read_all(ofd[0], out, outsize);
		close(ofd[0]);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (pidp != NULL)
		*pidp = pid;
	for (const char *p = err; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		int l = nl != NULL ? (int)(nl - p) : (int)strlen(p);
		print_message("#   child %s: %.*s\n", mode, l, p);
		p += l + (nl != NULL);
	}
	return status;
}

/*
 * Run this test program again as `NAME MODE` (argv[0] NAME), a child that
 * exercises one mode in a process of its own (running out of memory, say)
 * and reports failed checks on stderr; expect exit status 0.
 */
static inline void mp_run_self(const char *name, const char *mode) {
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = {(char *)name, (char *)mode, NULL};
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s child: "
	    "status %#x (failed checks are printed above)", mode, status);
}

/*
 * The body of a profiler integration test's main(): in a --disable-prof
 * build only `no_prof` runs (it checks that the prof.* names say ENOENT);
 * otherwise the tests run with a fresh temporary directory in `tmpdir`
 * (named after `tag`) for their dumps, removed afterwards.
 */
static inline int mp_prof_test_run(const char *tag, char *tmpdir,
    size_t tmpdir_size,
    CMUnitTestFunction no_prof, const struct CMUnitTest *tests,
    size_t ntests) {
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest only[] = {
			cmocka_unit_test(no_prof),
		};
		return mp_run_tests(only);
	}
	if (!mp_tmpdir_make(tmpdir, tmpdir_size, tag)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	int r = _cmocka_run_group_tests("tests", tests, ntests, NULL, NULL);
	mp_tmpdir_remove(tmpdir);
	return r == 0 ? 0 : 1;
}
#define mp_prof_test_main(tag, no_prof, tests)				\
	mp_prof_test_run((tag), tmpdir, sizeof(tmpdir), (no_prof), (tests),	\
	    sizeof(tests) / sizeof((tests)[0]))

#endif /* MALLOC_PROF_TEST_UTIL_H */
