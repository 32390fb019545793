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
#include <sys/stat.h>

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

/* The name of this build's MALLOC_CONF variable. */
static inline const char *
mp_env_conf_name(void) {
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
static inline const char *
mp_env_conf(void) {
	return getenv(mp_env_conf_name());
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
/* Heap profiles (the prof_* tests).                                        */
/*
 * mp_heap_parse() reads a heap_v2 dump strictly: every counter line must
 * be exactly what its numbers print as ("  t<id>: a: b [c: d]"), thread
 * lines of the header must have ascending uids, and the file must end
 * with the blank line and MAPPED_LIBRARIES section, or right after a
 * complete stack (a dump whose maps could not be read).  Stacks keep
 * frame 0 (the allocator entry point) first.
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

static inline void
mp_heap_free(mp_heap_t *h) {
	for (size_t i = 0; i < h->nstacks; i++) {
		free(h->stacks[i].thr);
		free(h->stacks[i].frames);
	}
	free(h->stacks);
	free(h->threads);
	memset(h, 0, sizeof(*h));
}

static inline void
mp_cnts_add(mp_cnts_t *a, const mp_cnts_t *b) {
	a->co += b->co;
	a->cb += b->cb;
	a->ao += b->ao;
	a->ab += b->ab;
}

static inline bool
mp_cnts_eq(const mp_cnts_t *a, const mp_cnts_t *b) {
	return a->co == b->co && a->cb == b->cb && a->ao == b->ao &&
	    a->ab == b->ab;
}

/* "  t<id>: a: b [c: d]<rest>"; id "*" gives uid UINT64_MAX. */
static inline bool
mp_heap_cnt_line(const char *line, uint64_t *uid, mp_cnts_t *c,
    const char **rest) {
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
static inline bool
mp_heap_parse(const char *path, mp_heap_t *h) {
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
static inline void
mp_heap_check_sums(const mp_heap_t *h, bool exact) {
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
static inline void
mp_heap_unbias(uint64_t n, uint64_t s, uint64_t rate, double *n_out,
    double *s_out) {
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

/*
 * The address range of the function at fn: from its ELF symbol when the
 * program exports it (link with -export-dynamic), else [fn, fn + 256).
 */
static inline void
mp_fn_range(const void *fn, uintptr_t *lo, uintptr_t *hi) {
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
static inline bool
mp_ra_in(uintptr_t ra, uintptr_t lo, uintptr_t hi) {
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
static inline size_t
mp_heap_user_frame(const mp_heap_stack_t *s) {
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
static inline const mp_heap_stack_t *
mp_heap_find_site(const mp_heap_t *h, const void *fn, size_t depth) {
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
static inline const mp_heap_thread_t *
mp_heap_thread(const mp_heap_t *h, uint64_t uid) {
	for (size_t i = 0; i < h->nthreads; i++) {
		if (h->threads[i].uid == uid) {
			return &h->threads[i];
		}
	}
	return NULL;
}

/* ---- dump helpers */

/* prof.dump to path; returns mallctl's result. */
static inline int
mp_prof_dump(const char *path) {
	return mallctl("prof.dump", NULL, NULL, (void *)&path, sizeof(path));
}

static inline int
mp_prof_prefix(const char *prefix) {
	return mallctl("prof.prefix", NULL, NULL, (void *)&prefix,
	    sizeof(prefix));
}

/* Writes a bool mallctl and returns its result; *old gets the old value. */
static inline int
mp_prof_switch(const char *name, bool v, bool *old) {
	bool o = false;
	size_t sz = sizeof(o);
	int r = mallctl(name, &o, &sz, &v, sizeof(v));
	if (old != NULL) {
		*old = o;
	}
	return r;
}

/* A fresh directory /tmp/<tag>.XXXXXX in buf; false on error. */
static inline bool
mp_tmpdir_make(char *buf, size_t size, const char *tag) {
	snprintf(buf, size, "%s/%s.XXXXXX", getenv("TMPDIR") != NULL &&
	    getenv("TMPDIR")[0] == '/' ? getenv("TMPDIR") : "/tmp", tag);
	return mkdtemp(buf) != NULL;
}

/* Removes the files of dir and dir itself (not recursive), unless
 * MP_KEEP_DUMPS is set. */
static inline void
mp_tmpdir_remove(const char *dir) {
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
static inline size_t
mp_dump_list(const char *dir, const char *base, long pid, char kind,
    mp_autoname_t *out, size_t max) {
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

static inline void
mp_msgs_hook(void *cbopaque, const char *s) {
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

static inline void
mp_msgs_start(void) {
	mp_msgs[0] = '\0';
	mp_msgs_len = 0;
	mp_msgs_lines = 0;
	mp_msgs_calls = 0;
	mp_msgs_opaque = 0;
	malloc_message = mp_msgs_hook;
}

static inline void
mp_msgs_stop(void) {
	malloc_message = NULL;
	__asm__ volatile("" : : "r"(mp_msgs) : "memory");
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
