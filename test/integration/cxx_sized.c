/*
 * test/integration/cxx_sized.c - C23's free_sized and free_aligned_sized
 * (prefixed in a prefixed build, like the rest of the API).
 *
 * A sized free gives the block back to its size class: the counters
 * (thread.deallocated) move by the block's usable size, and the next
 * allocation of that size gets the same block back from the thread's
 * cache (last in, first out), which a block filed under the wrong class
 * would not be.  NULL is ignored whatever the size; size 0 is malloc(0)'s
 * block.  Debug builds abort on a size that is not the block's, naming
 * the function; release builds trust the size (checked in a child only
 * for the debug build's message).
 */
#include "../test_util.h"

static uint64_t thread_counter(const char *name) {
	uint64_t v = 0;
	assert_int_equal(mp_read_u64(name, &v), 0);
	return v;
}

static const size_t sizes[] = {
	0, 1, 8, 15, 16, 17, 48, 64, 100, 1000, 1024, 4000, 4096, 10000,
	14336, 14337, 16384, 20000, 100000, 1 << 20, 3 << 20,
};

/* malloc, then free_sized: counters and reuse. */
static void test_free_sized(void **state) {
	(void)state;
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
			size_t n = sizes[i];
			char *p = LAUNDER(malloc(n));
			assert_non_null(p);
			size_t usize = malloc_usable_size(p);
			MP_ASSERT(usize >= n && usize > 0, "size %zu: usable "
			    "%zu", n, usize);
			memset(p, 0x33, n);
			uint64_t d0 = thread_counter("thread.deallocated");
			free_sized(p, n);
			uint64_t d1 = thread_counter("thread.deallocated");
			MP_ASSERT(d1 - d0 == usize, "free_sized(%zu): "
			    "thread.deallocated moved %" PRIu64 ", want %zu",
			    n, d1 - d0, usize);
			if (usize > 14336)
				continue;
			/* The block is on top of its class's cache bin. */
			char *q = LAUNDER(malloc(n));
			MP_ASSERT(q == p, "free_sized(%zu): malloc(%zu) got "
			    "%p, not the block just freed %p", n, n, (void *)q,
			    (void *)p);
			free_sized(q, n);
		}
	}
}

/* Many blocks of random sizes, freed in another order: the live bytes
 * come back to where they were. */
static void test_free_sized_many(void **state) {
	(void)state;
	enum { N = 4000 };
	static void *blocks[N];
	static size_t lens[N];
	mp_rng_t rng = {0x5eed};
	uint64_t a0 = thread_counter("thread.allocated");
	uint64_t d0 = thread_counter("thread.deallocated");
	for (int k = 0; k < N; k++) {
		lens[k] = (size_t)mp_rng_below(&rng, k % 16 == 0 ? 40000 : 600);
		blocks[k] = malloc(lens[k]);
		assert_non_null(blocks[k]);
		memset(blocks[k], k & 0xff, lens[k]);
	}
	for (int k = 0; k < N; k++) {
		int j = (k * 7919) % N;
		const unsigned char *b = blocks[j];
		for (size_t i = 0; i < lens[j]; i += 97)
			MP_ASSERT(b[i] == (j & 0xff), "block %d overwritten",
			    j);
		free_sized(blocks[j], lens[j]);
	}
	uint64_t a1 = thread_counter("thread.allocated");
	uint64_t d1 = thread_counter("thread.deallocated");
	MP_ASSERT(a1 - a0 == d1 - d0, "allocated %" PRIu64 ", deallocated %"
	    PRIu64, a1 - a0, d1 - d0);
}

/* aligned_alloc, then free_aligned_sized. */
static void test_free_aligned_sized(void **state) {
	(void)state;
	static const size_t aligns[] = {8, 16, 32, 64, 256, 4096, 8192, 65536};
	static const size_t asizes[] = {1, 24, 64, 100, 4096, 5000, 70000};
	for (size_t a = 0; a < MP_ARRAY_SIZE(aligns); a++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(asizes); i++) {
			size_t al = aligns[a], n = asizes[i];
			char *p = LAUNDER(aligned_alloc(al, n));
			assert_non_null(p);
			MP_ASSERT(mp_is_aligned(p, al), "%p not %zu-aligned",
			    (void *)p, al);
			size_t usize = malloc_usable_size(p);
			uint64_t d0 = thread_counter("thread.deallocated");
			free_aligned_sized(p, al, n);
			uint64_t d1 = thread_counter("thread.deallocated");
			MP_ASSERT(d1 - d0 == usize, "free_aligned_sized(%zu, "
			    "%zu): deallocated %" PRIu64 ", want %zu", al, n,
			    d1 - d0, usize);
			if (usize > 14336)
				continue;
			char *q = LAUNDER(aligned_alloc(al, n));
			MP_ASSERT(q == p, "free_aligned_sized(%zu, %zu): "
			    "aligned_alloc got %p, not %p", al, n, (void *)q,
			    (void *)p);
			free_aligned_sized(q, al, n);
		}
	}
}

/* NULL is ignored whatever the size and alignment. */
static void test_null(void **state) {
	(void)state;
	uint64_t d0 = thread_counter("thread.deallocated");
	free_sized(NULL, 0);
	free_sized(NULL, 64);
	free_sized(NULL, 1 << 20);
	free_aligned_sized(NULL, 64, 64);
	free_aligned_sized(NULL, 4096, 0);
	uint64_t d1 = thread_counter("thread.deallocated");
	assert_int_equal(d1, d0);
	/* The cache still works (no NULL was pushed on a bin). */
	void *p = malloc(64);
	assert_non_null(p);
	free_sized(p, 64);
}

static void wrong_size_child(void *arg) {
	int which = *(int *)arg;
	if (which == 0)
		free_sized(LAUNDER(malloc(64)), 4096);
	else
		free_aligned_sized(LAUNDER(aligned_alloc(64, 64)), 4096, 64);
}

/* Debug builds: a wrong size aborts with the library's message. */
static void test_wrong_size(void **state) {
	(void)state;
	bool debug = false;
	MALLCTL_READ("config.debug", debug);
	if (!debug)
		MP_SKIP("release build: a sized free trusts its size");
	static const char *const want[] = {
		"<malloc_prof>: free_sized(0x",
		"<malloc_prof>: free_aligned_sized(0x",
	};
	for (int which = 0; which < 2; which++) {
		char out[4096];
		int status = mp_child_stderr(wrong_size_child, &which, out,
		    sizeof(out));
		MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		    "status %#x, want abort()", status);
		MP_ASSERT(strstr(out, want[which]) != NULL && strstr(out,
		    "size does not match the allocation's size class") != NULL,
		    "stderr \"%s\", want \"%s...\"", out, want[which]);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_sized),
		cmocka_unit_test(test_free_sized_many),
		cmocka_unit_test(test_free_aligned_sized),
		cmocka_unit_test(test_null),
		cmocka_unit_test(test_wrong_size),
	};
	return mp_run_tests(tests);
}
