/*
 * test/unit/base.c - base_malloc/base_free, the profiler's metadata memory,
 * and the per-thread stash in front of its locked free lists:
 *   - a recycled block comes back zeroed, from the stash or the lists;
 *   - the stash takes freed blocks up to BASE_STASH_BYTES and no more, and
 *     hands the latest one back first;
 *   - at thread exit (base_stash_flush) the stash is emptied into the
 *     shared lists, where another thread finds the blocks;
 *   - blocks above BASE_STASH_CLASSES cache lines never enter it;
 *   - with the OS refusing mappings (debug.mmap_fail in debug builds,
 *     RLIMIT_AS elsewhere), the profiler's blocks running out first leaves
 *     the allocator exactly the extent records it would have had without
 *     them: the profiler cannot take the memory they need.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define STASH_BYTES 4096        /* BASE_STASH_BYTES in base.c */

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static bool all_zero(const void *p, size_t n) {
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++) {
		if (c[i] != 0)
			return false;
	}
	return true;
}

static void test_recycled_blocks_are_zeroed(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	void *p = base_malloc(100);            /* two cache lines */
	assert_non_null(p);
	memset(p, 0xa5, 128);
	base_free(p, 100);
	assert_int_equal(tsd->base_stash_bytes, 128);
	void *q = base_malloc(120);            /* same class: the stash */
	assert_ptr_equal(q, p);
	assert_int_equal(tsd->base_stash_bytes, 0);
	assert_true(all_zero(q, 128));
	/* Through the shared lists too. */
	memset(q, 0x5a, 128);
	base_free(q, 120);
	base_stash_flush(tsd);
	assert_int_equal(tsd->base_stash_bytes, 0);
	assert_null(tsd->base_stash[1]);
	void *r = base_malloc(128);
	assert_ptr_equal(r, q);
	assert_true(all_zero(r, 128));
	base_free(r, 128);
	base_stash_flush(tsd);
}

static void test_stash_is_bounded(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	enum { N = 2 * STASH_BYTES / 64 };
	void *b[N];
	for (int i = 0; i < N; i++) {
		b[i] = base_malloc(64);
		assert_non_null(b[i]);
	}
	for (int i = 0; i < N; i++)
		base_free(b[i], 64);
	assert_int_equal(tsd->base_stash_bytes, STASH_BYTES);
	unsigned n = 0;
	for (void *p = tsd->base_stash[0]; p != NULL; p = *(void **)p)
		n++;
	assert_int_equal(n, STASH_BYTES / 64);
	/* The last block the stash took (freed last among those it kept)
	 * comes back first. */
	assert_ptr_equal(base_malloc(64), b[STASH_BYTES / 64 - 1]);
	base_free(b[STASH_BYTES / 64 - 1], 64);
	base_stash_flush(tsd);
	assert_int_equal(tsd->base_stash_bytes, 0);
	assert_null(tsd->base_stash[0]);
}

static void test_big_blocks_skip_the_stash(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	size_t big = (BASE_STASH_CLASSES + 1) * 64;
	void *p = base_malloc(big);
	assert_non_null(p);
	base_free(p, big);
	assert_int_equal(tsd->base_stash_bytes, 0);
}

static void *take_one(void *arg) {
	(void)arg;
	tsd_fetch();
	return base_malloc(192);
}

/* What a thread's stash held is found by another thread once flushed. */
static void test_flushed_blocks_reach_other_threads(void **state) {
	(void)state;
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	void *p = base_malloc(192);
	base_free(p, 192);
	assert_ptr_equal(tsd->base_stash[2], p);
	base_stash_flush(tsd);
	pthread_t t;
	void *got = NULL;
	assert_int_equal(pthread_create(&t, NULL, take_one, NULL), 0);
	assert_int_equal(pthread_join(t, &got), 0);
	assert_ptr_equal(got, p);
	base_free(got, 192);
}

/*
 * Two children of the same parent, both with every further mapping
 * failing: one (profiler first) first takes base_malloc blocks until they
 * fail, then both take extent records until they fail.  Each reports its
 * counts through a pipe: {profiler blocks, extent records}.
 */
#define EXHAUST_MAX ((size_t)1 << 20)
#define NDRAIN 40000

static extent_t *drained[NDRAIN];

static void memory_off(const char *mode) {
#if MP_CONFIG_DEBUG
	if (strcmp(mode, "mmap_fail") == 0) {
		os_mmap_fail_set(1);
		return;
	}
#endif
	/* Less than a base chunk (2 MiB) above what is mapped. */
	(void)mp_rlimit_as_lower((size_t)1 << 20);
	(void)mode;
}

static void exhaust_child(int fd, const char *mode, bool profiler_first) {
	size_t counts[2] = {0, 0};
	memory_off(mode);
	if (profiler_first) {
		while (counts[0] < EXHAUST_MAX && base_malloc(64) != NULL)
			counts[0]++;
	}
	while (counts[1] < EXHAUST_MAX && base_extent_alloc() != NULL)
		counts[1]++;
	ssize_t w = write(fd, counts, sizeof(counts));
	_exit(w == (ssize_t)sizeof(counts) ? 0 : 1);
}

static void exhaust_run(const char *mode, bool profiler_first,
    size_t counts[2]) {
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		exhaust_child(fds[1], mode, profiler_first);
	}
	close(fds[1]);
	ssize_t r = read(fds[0], counts, 2 * sizeof(size_t));
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(r == (ssize_t)(2 * sizeof(size_t)) && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "%s child: read %zd, status %#x", mode,
	    r, status);
}

static void exhaust_check(const char *mode) {
	tsd_t *tsd = tsd_fetch();
	base_stash_flush(tsd);
	/* The profiler's memory is in use (the first sample's records). */
	base_free(base_malloc(64), 64);
	/* Fill the allocator's bump region to its end, so that its next
	 * record starts a fresh chunk: the children then share nearly
	 * 2 MiB of room left for extent records, besides the recycled ones. */
	size_t mapped = base_mapped_bytes(), n = 0;
	while (n < NDRAIN && base_mapped_bytes() == mapped) {
		drained[n] = base_extent_alloc();
		assert_non_null(drained[n]);
		n++;
	}
	assert_true(base_mapped_bytes() > mapped);
	for (size_t i = 0; i < n; i++)
		base_extent_free(drained[i]);

	size_t alone[2], after[2];
	exhaust_run(mode, false, alone);
	exhaust_run(mode, true, after);
	print_message("# %s: %zu extent records alone; %zu profiler blocks, "
	    "then %zu extent records\n", mode, alone[1], after[0], after[1]);
	MP_ASSERT(after[0] > 0 && after[0] < EXHAUST_MAX, "%s: %zu profiler "
	    "blocks before base_malloc failed", mode, after[0]);
	MP_ASSERT(alone[1] > n && alone[1] < EXHAUST_MAX, "%s: %zu extent "
	    "records (%zu recycled)", mode, alone[1], n);
	MP_ASSERT(after[1] == alone[1], "%s: the profiler's %zu blocks left "
	    "%zu extent records, %zu without them", mode, after[0], after[1],
	    alone[1]);
}

static void test_profiler_leaves_extent_records_mmap_fail(void **state) {
	(void)state;
#if MP_CONFIG_DEBUG
	exhaust_check("mmap_fail");
#else
	MP_SKIP("debug.mmap_fail exists only in --enable-debug builds");
#endif
}

static void test_profiler_leaves_extent_records_rlimit(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer's runtime needs address space "
		    "that RLIMIT_AS takes away", mp_env_sanitizer());
	}
	exhaust_check("rlimit");
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recycled_blocks_are_zeroed),
		cmocka_unit_test(test_stash_is_bounded),
		cmocka_unit_test(test_big_blocks_skip_the_stash),
		cmocka_unit_test(test_flushed_blocks_reach_other_threads),
		cmocka_unit_test(test_profiler_leaves_extent_records_mmap_fail),
		cmocka_unit_test(test_profiler_leaves_extent_records_rlimit),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
