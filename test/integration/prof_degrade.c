/*
 * test/integration/prof_degrade.c - the profiler's own memory running out
 * degrades the profiler, not the program (doc/profiling.md, "When the
 * profiler's memory runs out").
 *
 * In a child (the harness must not run out), with every allocation
 * sampled (prof_degrade.conf: lg_prof_sample:0): slabs for NOBJ objects
 * are made and left with one object in 16, so that the allocator already
 * has the memory; then OS mappings are made to fail (debug.mmap_fail in
 * --enable-debug builds, RLIMIT_AS lowered elsewhere) and NOBJ objects
 * are allocated and kept, each from a call stack of its own.  Every
 * allocation must succeed while the
 * profiler's records (base_malloc, 2 MiB chunks) run out, so
 * prof.dropped_samples rises; a dump then works or fails with EFAULT and
 * exactly one "<malloc_prof>: prof.dump: ..." line.  With memory back,
 * no sample is dropped any more and a dump shows the new allocations.
 * --disable-prof: prof.dropped_samples is ENOENT.
 */
#include "test_util.h"

#include <sys/resource.h>
#include <sys/wait.h>

/* More samples than one 2 MiB base chunk holds records for. */
#define NOBJ 150000
#define OBJ_SIZE 48
#define NAFTER 1000
#define DEPTH 18        /* 2^DEPTH >= NOBJ stacks */
#define MiB ((size_t)1 << 20)

/* 15/16 of it is freed again: room for NOBJ. */
#define NWARM (NOBJ / 15 * 16 + 64)

static void *objs[NOBJ];
static void *warm[NWARM];
static char tmpdir[256];

static int dropped_read(uint64_t *v) {
	size_t sz = sizeof(*v);
	return mallctl("prof.dropped_samples", v, &sz, NULL, 0);
}

static uint64_t dropped(void) {
	uint64_t v = 0;
	MP_CHECK(dropped_read(&v) == 0, "prof.dropped_samples");
	return v;
}

static rlim_t rlim_old;

/* Makes every further OS mapping fail (mode "mmap_fail" or "rlimit"). */
static void memory_take(const char *mode) {
	if (strcmp(mode, "mmap_fail") == 0) {
		size_t n = 1;
		MP_CHECK(mallctl("debug.mmap_fail", NULL, NULL, &n,
		    sizeof(n)) == 0, "debug.mmap_fail");
		return;
	}
	/* Less than a base chunk (2 MiB) above what is mapped. */
	rlim_old = mp_rlimit_as_lower(MiB);
}

static void memory_give(const char *mode) {
	if (strcmp(mode, "mmap_fail") == 0) {
		size_t n = 0;
		MP_CHECK(mallctl("debug.mmap_fail", NULL, NULL, &n,
		    sizeof(n)) == 0, "debug.mmap_fail off");
		return;
	}
	mp_rlimit_as_restore(rlim_old);
}

/*
 * prof.dump to path with stderr caught in a file; true if it was
 * written.  A failure must be EFAULT with exactly one line from the
 * library.  No malloc here: it may be failing.
 */
static bool dump_caught(const char *path, const char *when) {
	char errpath[320];
	snprintf(errpath, sizeof(errpath), "%s/stderr", tmpdir);
	int efd = open(errpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	MP_CHECK(efd >= 0, "%s: open %s: %s", when, errpath, strerror(errno));
	if (efd < 0) {
		return false;
	}
	fflush(stderr);
	int saved = dup(2);
	dup2(efd, 2);
	const char *p = path;
	int r = mallctl("prof.dump", NULL, NULL, &p, sizeof(p));
	dup2(saved, 2);
	close(saved);
	static char buf[4096];
	ssize_t n = pread(efd, buf, sizeof(buf) - 1, 0);
	close(efd);
	buf[n > 0 ? n : 0] = '\0';
	size_t lines = 0;
	for (const char *c = buf; *c != '\0'; c++) {
		lines += *c == '\n';
	}
	if (r == 0) {
		MP_CHECK(lines == 0, "%s: dump worked but printed: %.200s",
		    when, buf);
		return true;
	}
	MP_CHECK(r == EFAULT, "%s: prof.dump returned %d", when, r);
	MP_CHECK(lines == 1 && strncmp(buf, "<malloc_prof>: prof.dump: ",
	    26) == 0, "%s: expected one line, got: %.200s", when, buf);
	fprintf(stderr, "# %s: dump failed cleanly: %s", when, buf);
	return false;
}

/*
 * A stack of its own for every i below 2^DEPTH: the bits of i choose
 * deep_a or deep_b at each level.  A new stack takes a gctx and a tctx
 * record besides the sample's, none of which the warm-up freed, so the
 * profiler's memory runs out long before the slabs' free slots do.  The
 * call is not the last thing done (LAUNDER), so no frame is a tail call.
 */
void *deep_a(size_t i, unsigned lvl);
void *deep_b(size_t i, unsigned lvl);
void after_site(void **v, size_t n);

MP_SITE void *deep_a(size_t i, unsigned lvl) {
	void *p = lvl == 0 ? malloc(opaque_size(OBJ_SIZE)) :
	    (i >> (lvl - 1) & 1) != 0 ? deep_b(i, lvl - 1) : deep_a(i,
	    lvl - 1);
	return LAUNDER(p);
}

MP_SITE void *deep_b(size_t i, unsigned lvl) {
	void *p = lvl == 0 ? malloc(opaque_size(OBJ_SIZE)) :
	    (i >> (lvl - 1) & 1) != 0 ? deep_b(i, lvl - 1) : deep_a(i,
	    lvl - 1);
	return LAUNDER(p);
}

MP_SITE void after_site(void **v, size_t n) {
	for (size_t i = 0; i < n; i++) {
		v[i] = malloc(opaque_size(1000));
	}
}

static int child(const char *mode) {
	MP_CHECK(mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_prof_degrade"),
	    "mkdtemp: %s", strerror(errno));
	/*
	 * The slabs the kept objects will need, with prof.active on:
	 * sampled small objects have slabs of their own.  One object in 16
	 * stays, so the slabs stay slabs (a free slab goes back to its
	 * arena, and carving it again takes an extent record, which the
	 * allocator's own base memory may not have left: it is kept apart
	 * from the profiler's, see test/unit/base.c, but may be short too).
	 */
	for (size_t i = 0; i < NWARM; i++) {
		warm[i] = malloc(opaque_size(OBJ_SIZE));
	}
	for (size_t i = 0; i < NWARM; i++) {
		if (i % 16 != 0) {
			free(warm[i]);
			warm[i] = NULL;
		}
	}
	uint64_t d0 = dropped();

	memory_take(mode);
	size_t nulls = 0;
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i] = deep_a(i, DEPTH);
		nulls += objs[i] == NULL;
	}
	MP_CHECK(nulls == 0, "%s: %zu of %d allocations failed", mode, nulls,
	    NOBJ);
	uint64_t d1 = dropped();
	MP_CHECK(d1 > d0, "%s: prof.dropped_samples %" PRIu64 " before, %"
	    PRIu64 " after %d samples", mode, d0, d1, NOBJ);
	char path1[320];
	snprintf(path1, sizeof(path1), "%s/out.heap", tmpdir);
	bool wrote = dump_caught(path1, mode);
	memory_give(mode);

	mp_heap_t h;
	if (wrote) {
		MP_CHECK(mp_heap_parse(path1, &h), "%s: dump: %s", mode,
		    h.err);
		mp_heap_free(&h);
	}
	for (size_t i = 0; i < NOBJ; i++) {
		free(objs[i]);
	}
	for (size_t i = 0; i < NWARM; i++) {
		free(warm[i]);
	}

	/* Memory is back: nothing more is dropped, the dump shows it. */
	uint64_t d2 = dropped();
	void *after[NAFTER];
	after_site(after, NAFTER);
	MP_CHECK(dropped() == d2, "%s: samples dropped with memory back",
	    mode);
	char path2[320];
	snprintf(path2, sizeof(path2), "%s/back.heap", tmpdir);
	MP_CHECK(dump_caught(path2, "memory back"), "%s: no dump with memory "
	    "back", mode);
	if (mp_heap_parse(path2, &h)) {
		MP_CHECK(h.total.co >= NAFTER, "%s: %" PRIu64 " live objects "
		    "in the dump, expected at least %d", mode,
		    (uint64_t)h.total.co, NAFTER);
		mp_heap_free(&h);
	} else {
		MP_CHECK(false, "%s: dump with memory back: %s", mode, h.err);
	}
	for (size_t i = 0; i < NAFTER; i++) {
		free(after[i]);
	}
	fprintf(stderr, "# %s: %" PRIu64 " of %d samples dropped, dump while "
	    "out of memory %s\n", mode, d1 - d0, NOBJ, wrote ? "written" :
	    "failed");
	mp_tmpdir_remove(tmpdir);
	return atomic_load(&mp_failures) != 0;
}

static bool have_prof(void) {
	uint64_t v;
	int r = dropped_read(&v);
	if (r == ENOENT) {
		return false;
	}
	assert_int_equal(r, 0);
	return true;
}

static void test_mallctl(void **state) {
	(void)state;
	uint64_t v = 0;
	/* ENOENT without the profiler (have_prof), read-only with it. */
	if (have_prof()) {
		assert_int_equal(mallctl("prof.dropped_samples", NULL, NULL,
		    &v, sizeof(v)), EPERM);
	}
}

static void test_mmap_fail(void **state) {
	(void)state;
	size_t n = 0, sz = sizeof(n);
	if (!have_prof()) {
		MP_SKIP("--disable-prof build: no profiler");
	}
	if (mallctl("debug.mmap_fail", &n, &sz, NULL, 0) == ENOENT) {
		MP_SKIP("debug.mmap_fail exists only in --enable-debug builds");
	}
	mp_run_self("prof_degrade", "mmap_fail");
}

static void test_rlimit_as(void **state) {
	(void)state;
	if (!have_prof()) {
		MP_SKIP("--disable-prof build: no profiler");
	}
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer's runtime needs address space "
		    "that RLIMIT_AS takes away", mp_env_sanitizer());
	}
	mp_run_self("prof_degrade", "rlimit");
}

int main(int argc, char **argv) {
	if (argc == 2 && (strcmp(argv[1], "mmap_fail") == 0 ||
	    strcmp(argv[1], "rlimit") == 0)) {
		return child(argv[1]);
	}
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mallctl),
		cmocka_unit_test(test_mmap_fail),
		cmocka_unit_test(test_rlimit_as),
	};
	return mp_run_tests(tests);
}
