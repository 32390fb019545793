/*
 * test/integration/oom.c - running out of memory: every entry point fails
 * cleanly and the heap survives.
 *
 * Two ways to run out, each in a child process (the harness itself must
 * not run out):
 *   - debug.mmap_fail (--enable-debug builds only; doc/reliability.md):
 *     every OS mapping from now on fails;
 *   - RLIMIT_AS lowered to just above what the process uses.
 * Then every entry point (malloc, calloc, realloc, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc, mallocx, rallocx,
 * reallocarray) must return NULL (posix_memalign: ENOMEM) with errno
 * ENOMEM; nothing crashes; blocks allocated before keep their contents,
 * stats.allocated does not move and allocated <= active <= resident <=
 * mapped holds; once memory is available again every entry point works.
 */
#include "test_util.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

/* Bigger than anything the child has mapped: it needs a new mapping. */
#define BIG ((size_t)512 << 20)
#define NKEEP 64
#define MiB ((size_t)1 << 20)

static unsigned char *keep[NKEEP];
static size_t keep_size[NKEEP];

static void keep_fill(void) {
	for (int i = 0; i < NKEEP; i++) {
		/* Small, page sized and large blocks. */
		size_t k = (size_t)i;
		keep_size[i] = k % 3 == 0 ? 24 + k : k % 3 == 1 ?
		    4096 * (k + 1) : MiB + k * 4096;
		keep[i] = LAUNDER((unsigned char *)malloc(keep_size[i]));
		MP_CHECK(keep[i] != NULL, "block %d", i);
		if (keep[i] != NULL) {
			memset(keep[i], 0x40 + i, keep_size[i]);
		}
	}
}

static void keep_check(const char *when) {
	for (int i = 0; i < NKEEP; i++) {
		if (keep[i] == NULL) {
			continue;
		}
		size_t bad = keep_size[i];
		for (size_t k = 0; k < keep_size[i]; k++) {
			if (keep[i][k] != (unsigned char)(0x40 + i)) {
				bad = k;
				break;
			}
		}
		MP_CHECK(bad == keep_size[i], "%s: block %d changed at byte %zu",
		    when, i, bad);
	}
}

static void keep_free(void) {
	for (int i = 0; i < NKEEP; i++) {
		free(keep[i]);
		keep[i] = NULL;
	}
}

typedef struct {
	size_t allocated, active, resident, mapped;
} stats_t;

static stats_t stats_read(void) {
	stats_t s = {0, 0, 0, 0};
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch);
	MP_CHECK(mallctl("epoch", &epoch, &sz, &epoch, sz) == 0, "epoch");
	sz = sizeof(size_t);
	MP_CHECK(mallctl("stats.allocated", &s.allocated, &sz, NULL, 0) == 0,
	    "stats.allocated");
	MP_CHECK(mallctl("stats.active", &s.active, &sz, NULL, 0) == 0,
	    "stats.active");
	MP_CHECK(mallctl("stats.resident", &s.resident, &sz, NULL, 0) == 0,
	    "stats.resident");
	MP_CHECK(mallctl("stats.mapped", &s.mapped, &sz, NULL, 0) == 0,
	    "stats.mapped");
	MP_CHECK(s.allocated <= s.active && s.active <= s.resident &&
	    s.resident <= s.mapped, "allocated %zu active %zu resident %zu "
	    "mapped %zu", s.allocated, s.active, s.resident, s.mapped);
	return s;
}

/* One failing call: NULL (or ENOMEM) and errno ENOMEM. */
#define FAILS(name, call) do {						\
	errno = 0;							\
	void *mp_p_ = (call);						\
	int mp_e_ = errno;						\
	MP_CHECK(mp_p_ == NULL && mp_e_ == ENOMEM, "%s: %s: %p, errno %d", \
	    how, name, mp_p_, mp_e_);					\
	free(mp_p_);							\
} while (0)

/* Every entry point, for a block that needs a new mapping: all fail. */
static void all_fail(const char *how, size_t big) {
	unsigned char *small = LAUNDER((unsigned char *)malloc(64));
	MP_CHECK(small != NULL, "%s: malloc(64) before", how);
	if (small == NULL) {
		return;
	}
	memset(small, 0x77, 64);
	stats_t before = stats_read();
	FAILS("malloc", malloc(opaque_size(big)));
	FAILS("calloc", calloc(opaque_size(big / 16), 16));
	FAILS("realloc", realloc(LAUNDER(small), opaque_size(big)));
	void *q = (void *)&q;
	errno = 0;
	int r = posix_memalign(&q, 64, opaque_size(big));
	MP_CHECK(r == ENOMEM && q == (void *)&q, "%s: posix_memalign: %d",
	    how, r);
	FAILS("aligned_alloc", aligned_alloc(64, opaque_size(big)));
	FAILS("memalign", memalign(4096, opaque_size(big)));
	FAILS("valloc", valloc(opaque_size(big)));
	FAILS("pvalloc", pvalloc(opaque_size(big)));
	FAILS("mallocx", mallocx(opaque_size(big), 0));
	FAILS("mallocx zero", mallocx(opaque_size(big), MALLOCX_ZERO));
	FAILS("rallocx", rallocx(LAUNDER(small), opaque_size(big), 0));
	FAILS("reallocarray", reallocarray(LAUNDER(small), opaque_size(big / 16), 16));
	stats_t after = stats_read();
	MP_CHECK(after.allocated == before.allocated, "%s: stats.allocated "
	    "%zu before the failures, %zu after", how, before.allocated,
	    after.allocated);
	/* realloc, rallocx and reallocarray left the block alone. */
	for (int k = 0; k < 64; k++) {
		MP_CHECK(small[k] == 0x77, "%s: realloc'd block changed", how);
	}
	free(small);
}

/* Small blocks until there is no more room: NULL with ENOMEM, then give
 * them all back.  At most `cap` bytes. */
static void small_runs_out(const char *how, size_t cap) {
	size_t n = cap / 1024, got = 0;
	void **v = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	MP_CHECK(v != MAP_FAILED, "%s: mmap of the list", how);
	if (v == MAP_FAILED) {
		return;
	}
	int e = 0;
	while (got < n) {
		errno = 0;
		v[got] = malloc(opaque_size(1024));
		if (v[got] == NULL) {
			e = errno;
			break;
		}
		memset(v[got], 1, 1024);
		got++;
	}
	MP_CHECK(got < n, "%s: %zu small blocks without running out", how,
	    got);
	MP_CHECK(got == n || e == ENOMEM, "%s: small malloc: errno %d", how,
	    e);
	fprintf(stderr, "# %s: ran out after %zu small blocks\n", how, got);
	for (size_t i = 0; i < got; i++) {
		free(v[i]);
	}
	munmap(v, n * sizeof(void *));
}

/* Every entry point works (memory is back). */
static void all_work(const char *how, size_t big) {
	void *p;
	unsigned char *small = malloc(64);
	MP_CHECK(small != NULL, "%s: malloc(64)", how);
	memset(small, 0x33, 64);
	p = malloc(opaque_size(big));
	MP_CHECK(p != NULL, "%s: malloc again", how);
	free(p);
	p = calloc(opaque_size(big / 16), 16);
	MP_CHECK(p != NULL, "%s: calloc again", how);
	free(p);
	MP_CHECK(posix_memalign(&p, 64, opaque_size(big)) == 0,
	    "%s: posix_memalign again", how);
	free(p);
	p = aligned_alloc(64, opaque_size(big));
	MP_CHECK(p != NULL, "%s: aligned_alloc again", how);
	free(p);
	p = memalign(4096, opaque_size(big));
	MP_CHECK(p != NULL, "%s: memalign again", how);
	free(p);
	p = valloc(opaque_size(big));
	MP_CHECK(p != NULL, "%s: valloc again", how);
	free(p);
	p = pvalloc(opaque_size(big));
	MP_CHECK(p != NULL, "%s: pvalloc again", how);
	free(p);
	p = mallocx(opaque_size(big), 0);
	MP_CHECK(p != NULL, "%s: mallocx again", how);
	free(p);
	unsigned char *r = rallocx(small, opaque_size(big), 0);
	MP_CHECK(r != NULL && r[0] == 0x33 && r[63] == 0x33,
	    "%s: rallocx again", how);
	if (r != NULL) {
		small = r;
	}
	r = reallocarray(small, opaque_size(big / 16), 16);
	MP_CHECK(r != NULL && r[0] == 0x33 && r[63] == 0x33,
	    "%s: reallocarray again", how);
	if (r != NULL) {
		small = r;
	}
	r = realloc(small, 64);
	MP_CHECK(r != NULL && r[0] == 0x33, "%s: realloc again", how);
	free(r != NULL ? r : small);
	stats_read();
}

static size_t mmap_fail_set(size_t n) {
	size_t old = 0, sz = sizeof(old);
	int r = mallctl("debug.mmap_fail", &old, &sz, &n, sizeof(n));
	MP_CHECK(r == 0, "debug.mmap_fail: %d", r);
	return old;
}

static int child_mmap_fail(void) {
	keep_fill();
	stats_t s0 = stats_read();
	mmap_fail_set(1);
	all_fail("debug.mmap_fail", BIG);
	small_runs_out("debug.mmap_fail", 256 * MiB);
	/* Every size class of the small and large ranges, once. */
	for (size_t size = 8; size <= 64 * MiB; size += size / 4) {
		void *p = malloc(opaque_size(size));
		free(p);
	}
	keep_check("debug.mmap_fail");
	uint64_t failures = 0;
	size_t sz = sizeof(failures);
	MP_CHECK(mallctl("debug.mmap_failures", &failures, &sz, NULL, 0) == 0,
	    "debug.mmap_failures");
	MP_CHECK(failures > 0, "no mapping failed");
	fprintf(stderr, "# debug.mmap_fail: %" PRIu64 " mappings failed\n",
	    failures);
	MP_CHECK(mmap_fail_set(0) == 1, "debug.mmap_fail read back");
	all_work("debug.mmap_fail off", BIG);
	keep_check("debug.mmap_fail off");
	keep_free();
	stats_t s1 = stats_read();
	MP_CHECK(s1.allocated <= s0.allocated, "stats.allocated %zu at the "
	    "start, %zu at the end", s0.allocated, s1.allocated);
	return atomic_load(&mp_failures) != 0;
}

static int child_rlimit(void) {
	keep_fill();
	stats_t s0 = stats_read();
	/* Only the soft limit: it can be raised again. */
	rlim_t old = mp_rlimit_as_lower(64 * MiB);
	all_fail("RLIMIT_AS", BIG);
	small_runs_out("RLIMIT_AS", 512 * MiB);
	keep_check("RLIMIT_AS");
	mp_rlimit_as_restore(old);
	all_work("RLIMIT_AS raised", BIG);
	keep_check("RLIMIT_AS raised");
	keep_free();
	stats_t s1 = stats_read();
	MP_CHECK(s1.allocated <= s0.allocated, "stats.allocated %zu at the "
	    "start, %zu at the end", s0.allocated, s1.allocated);
	return atomic_load(&mp_failures) != 0;
}

static void test_mmap_fail(void **state) {
	(void)state;
	size_t n = 0, sz = sizeof(n);
	if (mallctl("debug.mmap_fail", &n, &sz, NULL, 0) == ENOENT) {
		MP_SKIP("debug.mmap_fail exists only in --enable-debug builds");
	}
	mp_run_self("oom", "mmap_fail");
}

static void test_rlimit_as(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer's runtime needs address space "
		    "that RLIMIT_AS takes away", mp_env_sanitizer());
	}
	mp_run_self("oom", "rlimit");
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "mmap_fail") == 0) {
		return child_mmap_fail();
	}
	if (argc == 2 && strcmp(argv[1], "rlimit") == 0) {
		return child_rlimit();
	}
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mmap_fail),
		cmocka_unit_test(test_rlimit_as),
	};
	return mp_run_tests(tests);
}
