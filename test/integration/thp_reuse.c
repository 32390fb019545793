/*
 * test/integration/thp_reuse.c - opt.thp_heap_min (issue 15): set to
 * 16 MiB under thp:default, on a kernel whose THP mode is madvise, an
 * arena's mappings get MADV_HUGEPAGE once it has had that many bytes in
 * use, and the advice is taken back (MADV_NOHUGEPAGE) once it purges
 * repeatedly; a small arena's mappings, mappings grown for big requests,
 * every mapping under the default (0) and under thp:never stay
 * unadvised.
 *
 * Each case runs this program again (/proc/self/exe --child MODE) with
 * its options in this build's conf variable (they take effect at start-up
 * only); the child checks with MP_CHECK and exits 1 on a failed check.
 * The advice is read from /proc/self/smaps (VmFlags: hg = MADV_HUGEPAGE,
 * nh = MADV_NOHUGEPAGE), never from AnonHugePages: whether the kernel
 * finds a free huge page is not the allocator's doing.  The checks of
 * advice skip (with a message) on a kernel in another THP mode, or one
 * that refuses MADV_HUGEPAGE (EINVAL: built without THP).  Blocks come
 * from arenas of the test's own (arenas.create) without a thread cache,
 * so that every free reaches the arena and nothing else shares it.
 */
#include "../test_util.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define BLOCK ((size_t)64 << 10)            /* a large class, < 256 KiB */
#define BIG_N 384                           /* 24 MiB of them */
#define SMALL_N 32                          /* 2 MiB */
#define BIGREQ ((size_t)1 << 20)            /* a big request */
#define BIGREQ_N 24

/* ------------------------------------------------------------ helpers */

/* Whether the advice can be seen here: the kernel's mode is madvise and
 * it takes MADV_HUGEPAGE.  Else says why on the log. */
static bool thp_testable(void) {
	char buf[128] = "";
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled",
	    O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)mp_read_all(fd, buf, sizeof(buf));
		close(fd);
	}
	if (strstr(buf, "[madvise]") == NULL) {
		print_message("# skipped: the kernel's THP mode is not madvise "
		    "(%s)\n", buf[0] != '\0' ? buf : "no THP");
		return false;
	}
	size_t sz = (size_t)2 << 20;
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	MP_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	if (p == MAP_FAILED) {
		return false;
	}
	int r = madvise(p, sz, MADV_HUGEPAGE);
	int e = errno;
	munmap(p, sz);
	if (r != 0 && e == EINVAL) {
		print_message("# skipped: MADV_HUGEPAGE: EINVAL here\n");
		return false;
	}
	MP_CHECK(r == 0, "MADV_HUGEPAGE: %s", strerror(e));
	return r == 0;
}

/* /proc/self/smaps, read into static memory (allocations would change
 * what it reads). */
static char smaps[8 << 20];

/* The VmFlags line of the mapping that holds p, into out. */
static bool flags_of(const void *p, char *out, size_t size) {
	int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	MP_CHECK(fd >= 0, "open /proc/self/smaps: %s", strerror(errno));
	if (fd < 0) {
		return false;
	}
	size_t n = mp_read_all(fd, smaps, sizeof(smaps) - 1);
	close(fd);
	smaps[n] = '\0';
	bool in = false;
	for (char *line = smaps; *line != '\0';) {
		char *nl = strchr(line, '\n');
		if (nl != NULL) {
			*nl = '\0';
		}
		unsigned long a, b;
		char dash;
		if (sscanf(line, "%lx%c%lx", &a, &dash, &b) == 3 &&
		    dash == '-') {
			in = (uintptr_t)p >= a && (uintptr_t)p < b;
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(out, size, "%s", line + 8);
			return true;
		}
		if (nl == NULL) {
			break;
		}
		line = nl + 1;
	}
	MP_CHECK(false, "no mapping holds %p", p);
	return false;
}

/* Whether flags (a VmFlags line) holds the two-letter flag f. */
static bool has_flag(const char *flags, const char *f) {
	for (const char *s = flags; (s = strstr(s, f)) != NULL; s += 2) {
		if (s[-1] == ' ' && (s[2] == ' ' || s[2] == '\0')) {
			return true;
		}
	}
	return false;
}

/* Whether p's mapping carries flag f (false, and a failed check, when
 * smaps cannot be read). */
static bool advised(const void *p, const char *f) {
	char flags[512];
	if (!flags_of(p, flags, sizeof(flags))) {
		return false;
	}
	return has_flag(flags, f);
}

static unsigned arena_new(void) {
	unsigned a = 0;
	size_t sz = sizeof(a);
	MP_CHECK(mallctl("arenas.create", &a, &sz, NULL, 0) == 0,
	    "arenas.create");
	return a;
}

static void arena_purge(unsigned a) {
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MP_CHECK(mallctl(name, NULL, NULL, NULL, 0) == 0, "%s", name);
}

/* n blocks of `size` from arena a, each page written. */
static void fill(unsigned a, void **p, size_t n, size_t size) {
	for (size_t i = 0; i < n; i++) {
		p[i] = mallocx(size, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
		MP_CHECK(p[i] != NULL, "mallocx(%zu) in arena %u", size, a);
		if (p[i] != NULL) {
			for (size_t off = 0; off < size; off += 4096) {
				((char *)p[i])[off] = (char)i;
			}
		}
	}
}

static void drop(void **p, size_t n) {
	for (size_t i = 0; i < n; i++) {
		dallocx(p[i], MALLOCX_TCACHE_NONE);
		p[i] = NULL;
	}
}

/* ------------------------------------------------------------- children */

static void *big[BIG_N], *small[SMALL_N], *bigreq[BIGREQ_N];

/* thp_heap_min:16777216.  A small arena stays unadvised; a big one is
 * advised, its first mapping too, and stays so while its blocks are
 * reused; repeated purges take the advice back. */
static void child_reuse(void) {
	size_t min = 0;
	MP_CHECK(mp_read_size("opt.thp_heap_min", &min) == 0 &&
	    min == ((size_t)16 << 20), "opt.thp_heap_min %zu", min);
	if (!thp_testable()) {
		return;
	}
	unsigned s = arena_new(), b = arena_new();
	/* A small heap, reused: 2 MiB in use at most. */
	fill(s, small, SMALL_N, BLOCK);
	drop(small, SMALL_N);
	fill(s, small, SMALL_N, BLOCK);
	MP_CHECK(!advised(small[0], "hg"), "a 2 MiB arena is advised");
	/* A big one: advised once past 16 MiB in use, its first mapping
	 * (grown at 64 KiB in use) included. */
	fill(b, big, BIG_N / 8, BLOCK);
	MP_CHECK(!advised(big[0], "hg"), "advised at 3 MiB in use");
	fill(b, big + BIG_N / 8, BIG_N - BIG_N / 8, BLOCK);
	MP_CHECK(advised(big[0], "hg"), "not advised at 24 MiB in use");
	MP_CHECK(advised(big[BIG_N - 1], "hg"), "its last mapping is not");
	/* Reused: freed and taken again, no purge: still advised. */
	drop(big, BIG_N / 2);
	fill(b, big, BIG_N / 2, BLOCK);
	MP_CHECK(advised(big[0], "hg"), "advice lost without a purge");
	/* Purged again and again, a few blocks taken between purges: taken
	 * back (nh, no hg) on every mapping. */
	for (int round = 0; round < 4; round++) {
		drop(big, 16);
		arena_purge(b);
		fill(b, big, 16, BLOCK);
	}
	MP_CHECK(!advised(big[0], "hg") && advised(big[0], "nh"),
	    "advice kept after four purges");
	MP_CHECK(!advised(big[BIG_N - 1], "hg"), "the last mapping keeps it");
	/* And not given again: the arena grows past its peak. */
	static void *more[BIG_N];
	fill(b, more, BIG_N, BLOCK);
	MP_CHECK(!advised(more[BIG_N - 1], "hg"), "advised again");
	drop(more, BIG_N);
	drop(big, BIG_N);
	drop(small, SMALL_N);
}

/* Mappings grown for requests of 256 KiB or more are left out, even in
 * an arena past the threshold. */
static void child_bigreq(void) {
	if (!thp_testable()) {
		return;
	}
	unsigned b = arena_new();
	fill(b, bigreq, BIGREQ_N, BIGREQ);
	drop(bigreq, BIGREQ_N / 2);
	fill(b, bigreq, BIGREQ_N / 2, BIGREQ);
	for (size_t i = 0; i < BIGREQ_N; i++) {
		MP_CHECK(!advised(bigreq[i], "hg"), "1 MiB block %zu advised",
		    i);
	}
	drop(bigreq, BIGREQ_N);
}

/* The default, 0: nothing advised, however big. */
static void child_off(void) {
	size_t min = 1;
	MP_CHECK(mp_read_size("opt.thp_heap_min", &min) == 0 && min == 0,
	    "opt.thp_heap_min %zu", min);
	if (!thp_testable()) {
		return;
	}
	unsigned b = arena_new();
	fill(b, big, BIG_N, BLOCK);
	MP_CHECK(!advised(big[0], "hg") && !advised(big[BIG_N - 1], "hg"),
	    "advised with thp_heap_min:0");
	drop(big, BIG_N);
}

/* thp:never keeps its meaning with thp_heap_min set: nh, never hg. */
static void child_never(void) {
	if (!thp_testable()) {
		return;
	}
	unsigned b = arena_new();
	fill(b, big, BIG_N, BLOCK);
	MP_CHECK(!advised(big[BIG_N - 1], "hg") &&
	    advised(big[BIG_N - 1], "nh"), "thp:never: not nh");
	drop(big, BIG_N);
}

static int child_main(const char *mode) {
	if (strcmp(mode, "reuse") == 0) {
		child_reuse();
	} else if (strcmp(mode, "bigreq") == 0) {
		child_bigreq();
	} else if (strcmp(mode, "off") == 0) {
		child_off();
	} else if (strcmp(mode, "never") == 0) {
		child_never();
	} else {
		return 100;
	}
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

/* -------------------------------------------------------------- parent */

static char out[65536];

static void expect_ok(const char *mode, const char *conf) {
	int status = mp_run_child_conf(mode, conf, out, sizeof(out), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child %s (%s): status %#x", mode, conf != NULL ? conf : "no conf",
	    status);
	MP_ASSERT(strstr(out, "<malloc_prof>") == NULL, "%s", out);
}

static void test_reuse(void **state) {
	(void)state;
	expect_ok("reuse", "thp_heap_min:16777216");
}

static void test_bigreq(void **state) {
	(void)state;
	expect_ok("bigreq", "thp_heap_min:16777216");
}

static void test_off(void **state) {
	(void)state;
	expect_ok("off", NULL);
	expect_ok("off", "thp_heap_min:0");
}

static void test_never(void **state) {
	(void)state;
	expect_ok("never", "thp:never,thp_heap_min:16777216");
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		return child_main(argv[2]);
	}
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_bigreq),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_never),
	};
	return mp_run_tests(tests);
}
