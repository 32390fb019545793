/*
 * test/integration/extent_fit.c - lg_extent_max_active_fit and
 * trust_madvise (issue 18) with jemalloc's documented effect.
 *
 * lg_extent_max_active_fit: a 64 KiB request after a 64 MiB block was
 * freed (and left dirty: no decay) splits the dirty 64 MiB extent only
 * when 64 MiB <= 64 KiB << N; else it takes the muzzy pages of an earlier
 * block and the dirty pages stay whole (addresses,
 * stats.arenas.<i>.pdirty).
 *
 * trust_madvise: unless it is true, the first forced purge checks once
 * that MADV_DONTNEED zeroes a page.  Debug builds can pretend that it does
 * not (MALLOC_PROF_DEBUG_MADVISE_NOZERO=1: purged pages keep a pattern):
 * then one "<malloc_prof>: " line says so and calloc still returns zeros
 * from the purged pages; with trust_madvise:true there is no check and no
 * line.
 *
 * Every case runs this program again (/proc/self/exe --child MODE) with
 * its options in this build's MALLOC_CONF variable.
 */
#include "../test_util.h"

#define NOZERO_ENV "MALLOC_PROF_DEBUG_MADVISE_NOZERO"

static char err[16384];
static char out[4096];

/* A fresh arena, so that no other block's pages are in the way. */
static unsigned child_arena(void) {
	unsigned a = 0;
	size_t len = sizeof(a);
	MP_CHECK(mallctl("arenas.create", &a, &len, NULL, 0) == 0,
	    "arenas.create");
	return a;
}

static size_t child_pdirty(unsigned a) {
	mp_epoch();
	char name[64];
	snprintf(name, sizeof(name), "stats.arenas.%u.pdirty", a);
	return mp_stat(name);
}

static void child_arena_decay_ms(unsigned a, ssize_t ms) {
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", a);
	MP_CHECK(mallctl(name, NULL, NULL, &ms, sizeof(ms)) == 0, "%s", name);
}

/* Prints "reused" when the 64 KiB block lies in the freed 64 MiB one,
 * else "fresh", and the dirty pages left after it.  A muzzy 1 MiB run is
 * there to serve the 64 KiB instead (before faulting pages in, a too big
 * dirty extent is split after all). */
static int child_fit(void) {
	unsigned a = child_arena();
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	char *m = mallocx(MP_MiB, flags);
	MP_CHECK(m != NULL, "mallocx(1 MiB)");
	memset(m, 1, MP_MiB);
	/* A 64 MiB block after it, so that the two do not coalesce. */
	char *keep = mallocx(64 * MP_KiB, flags);
	MP_CHECK(keep != NULL, "mallocx(64 KiB)");
	dallocx(m, flags);
	child_arena_decay_ms(a, 1);
	mp_sleep_ms(20);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.decay", a);
	MP_CHECK(mallctl(name, NULL, NULL, NULL, 0) == 0, "%s", name);
	child_arena_decay_ms(a, -1);
	mp_epoch();
	snprintf(name, sizeof(name), "stats.arenas.%u.pmuzzy", a);
	if (mp_stat(name) == 0) {
		printf("nomuzzy 0 0\n");  /* no MADV_FREE here */
		return 0;
	}
	char *big = mallocx(64 * MP_MiB, flags);
	MP_CHECK(big != NULL, "mallocx(64 MiB)");
	memset(big, 1, 64 * MP_MiB);
	dallocx(big, flags);
	size_t before = child_pdirty(a);
	char *small = mallocx(64 * MP_KiB, flags);
	MP_CHECK(small != NULL, "mallocx(64 KiB)");
	size_t after = child_pdirty(a);
	bool in = small >= big && small < big + 64 * MP_MiB;
	printf("%s %zu %zu\n", in ? "reused" : "fresh", before, after);
	dallocx(small, flags);
	dallocx(keep, flags);
	return 0;
}

/* A 1 MiB block filled, freed, purged (forced) and calloc'ed again from
 * the same pages: prints "same" or "moved" and the first nonzero byte's
 * offset (the block's size if none). */
static int child_purge(void) {
	unsigned a = child_arena();
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	size_t size = MP_MiB;
	char *p = mallocx(size, flags);
	MP_CHECK(p != NULL, "mallocx(1 MiB)");
	memset(p, 0xa5, size);
	dallocx(p, flags);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MP_CHECK(mallctl(name, NULL, NULL, NULL, 0) == 0, "%s", name);
	char *q = mallocx(size, flags | MALLOCX_ZERO);
	MP_CHECK(q != NULL, "mallocx(1 MiB, ZERO)");
	printf("%s %zu\n", q == p ? "same" : "moved", first_nonzero(q, size));
	dallocx(q, flags);
	return 0;
}

static int child_main(const char *mode) {
	if (strcmp(mode, "fit") == 0)
		return child_fit();
	if (strcmp(mode, "purge") == 0)
		return child_purge();
	return 2;
}

/* ------------------------------------------------------------- parent */

static void run(const char *mode, const char *conf) {
	int status = mp_run_child_conf(mode, conf, err, sizeof(err), out,
	    sizeof(out), NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child %s (%s): status 0x%x: %s", mode, conf, status, err);
}

static const char *fit_conf(char *buf, size_t size, int lg) {
	/* No decay and no purge at once: the freed block stays dirty. */
	int n = snprintf(buf, size, "dirty_decay_ms:-1,muzzy_decay_ms:-1,"
	    "oversize_threshold:0,retain:true");
	if (lg >= 0)
		snprintf(buf + n, size - (size_t)n,
		    ",lg_extent_max_active_fit:%d", lg);
	return buf;
}

static void fit_case(int lg, bool want_reused) {
	char conf[256];
	run("fit", fit_conf(conf, sizeof(conf), lg));
	char how[16] = "";
	size_t before = 0, after = 0;
	MP_ASSERT(sscanf(out, "%15s %zu %zu", how, &before, &after) == 3,
	    "output: %s", out);
	if (strcmp(how, "nomuzzy") == 0)
		MP_SKIP("no MADV_FREE: no muzzy pages to take instead");
	size_t pages = 64 * MP_MiB / mp_page_size();
	MP_ASSERT(before >= pages, "lg %d: %zu dirty pages after the free",
	    lg, before);
	if (want_reused) {
		MP_ASSERT(strcmp(how, "reused") == 0, "lg %d: %s", lg, out);
		MP_ASSERT(after < pages, "lg %d: %s", lg, out);
	} else {
		MP_ASSERT(strcmp(how, "fresh") == 0,
		    "lg %d: the 64 MiB dirty extent was split: %s", lg, out);
		MP_ASSERT(after >= pages, "lg %d: %s", lg, out);
	}
}

/* 64 MiB = 64 KiB << 10: split from lg 10 up, not below. */
static void test_max_active_fit(void **state) {
	(void)state;
	fit_case(2, false);
	fit_case(9, false);
	fit_case(-1, false);  /* the default, 6 */
	fit_case(10, true);
	fit_case(20, true);
}

static bool child_is_debug(void) {
	bool debug = false;
	size_t sz = sizeof(debug);
	return mallctl("config.debug", &debug, &sz, NULL, 0) == 0 && debug;
}

static unsigned count(const char *s, const char *needle) {
	unsigned n = 0;
	for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* The check runs (default) and, when madvise does not zero, calloc still
 * gets zeros from purged pages; trusted, no check. */
static void test_trust_madvise(void **state) {
	(void)state;
	char how[16] = "";
	size_t nz = 0;
	/* Real madvise: zeros, and no line. */
	run("purge", "retain:true");
	MP_ASSERT(sscanf(out, "%15s %zu", how, &nz) == 2 &&
	    nz == SIZE_MAX, "%s", out);
	MP_ASSERT(err[0] == '\0', "%s", err);
	if (!child_is_debug())
		MP_SKIP("the non-zeroing madvise is simulated in debug builds");
	setenv(NOZERO_ENV, "1", 1);
	run("purge", "retain:true");
	MP_ASSERT(sscanf(out, "%15s %zu", how, &nz) == 2, "%s", out);
	MP_ASSERT(strcmp(how, "same") == 0, "calloc off the purged pages: %s",
	    out);
	MP_ASSERT(nz == SIZE_MAX, "calloc's byte %zu is not zero", nz);
	MP_ASSERT(count(err, "<malloc_prof>: ") == 1 &&
	    strstr(err, "MADV_DONTNEED does not zero") != NULL, "%s", err);
	run("purge", "retain:true,trust_madvise:true");
	MP_ASSERT(err[0] == '\0', "trusted, yet: %s", err);
	unsetenv(NOZERO_ENV);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_max_active_fit),
		cmocka_unit_test(test_trust_madvise),
	};
	return mp_run_tests(tests);
}
