/*
 * test/integration/realloc_grow.c - realloc across size classes and the
 * thread cache's large blocks.
 *
 * A small block that realloc moves to another small class goes through
 * malloc's and free's fast paths around the copy, and a large block up
 * to tcache_max is taken from and given back to the thread's cache
 * without the general slow paths (src/alloc/malloc.c).  Whatever the
 * path, the block must keep its contents (every usable byte of the old
 * block, not only the bytes asked for, up to the new size), have the
 * usable size nallocx gives, and move thread.allocated and
 * thread.deallocated by exactly the new and the old usable size (by
 * nothing when the class stays).
 */
#include "../test_util.h"

static uint64_t thread_counter(const char *name) {
	uint64_t v = 0;
	MALLCTL_READ(name, v);
	return v;
}

/* Whether new memory is junk-filled (debug builds' default): then a
 * realloc within the class moves the block, as jemalloc's does, and
 * counts it like any other. */
static bool junk_alloc(void) {
	const char *junk = "false";
	MALLCTL_READ("opt.junk", junk);
	return strcmp(junk, "true") == 0 || strcmp(junk, "alloc") == 0;
}

/* One realloc of p (usable size `*usable`, whose first `keep` bytes hold
 * pattern `seed`) to n bytes, checked; returns the new block, whose whole
 * usable size then holds the pattern. */
static unsigned char *grow_checked(unsigned char *p, size_t *usable,
    size_t keep, size_t n, uint64_t seed) {
	uint64_t a0 = thread_counter("thread.allocated");
	uint64_t d0 = thread_counter("thread.deallocated");
	unsigned char *q = LAUNDER((unsigned char *)realloc(p, opaque_size(n)));
	uint64_t a1 = thread_counter("thread.allocated");
	uint64_t d1 = thread_counter("thread.deallocated");
	MP_ASSERT(q != NULL, "realloc(%zu -> %zu) returned NULL", *usable, n);
	size_t want = nallocx(n, 0);
	size_t got = malloc_usable_size(q);
	MP_ASSERT(got == want, "realloc(%zu -> %zu): usable %zu, nallocx %zu",
	    *usable, n, got, want);
	size_t kept = keep < n ? keep : n;
	size_t bad = pattern_check(q, kept, seed);
	MP_ASSERT(bad == SIZE_MAX, "realloc(%zu -> %zu): byte %zu of %zu "
	    "lost", *usable, n, bad, kept);
	if (got == *usable && !junk_alloc()) {
		MP_ASSERT(a1 == a0 && d1 == d0, "realloc(%zu -> %zu) within "
		    "its class counted %" PRIu64 " allocated, %" PRIu64
		    " deallocated", *usable, n, a1 - a0, d1 - d0);
	} else {
		MP_ASSERT(a1 - a0 == got && d1 - d0 == *usable,
		    "realloc(%zu -> %zu): thread.allocated +%" PRIu64
		    " (want %zu), thread.deallocated +%" PRIu64 " (want %zu)",
		    *usable, n, a1 - a0, got, d1 - d0, *usable);
	}
	pattern_fill(q, got, seed);
	*usable = got;
	return q;
}

/* A vector's growth: doubling from a few bytes to 256 KiB, through every
 * small class boundary and into the large classes, each time with the
 * whole usable size written (so the copy must take all of it). */
static void test_grow_by_doubling(void **state) {
	(void)state;
	static const size_t starts[] = {1, 8, 16, 24, 100, 3000, 12000};
	for (size_t s = 0; s < MP_ARRAY_SIZE(starts); s++) {
		uint64_t seed = 0x6700 + s;
		unsigned char *p = LAUNDER((unsigned char *)malloc(
		    opaque_size(starts[s])));
		MP_ASSERT(p != NULL, "malloc(%zu)", starts[s]);
		size_t usable = malloc_usable_size(p);
		pattern_fill(p, usable, seed);
		for (size_t n = starts[s] * 2; n <= 256 * MP_KiB; n *= 2)
			p = grow_checked(p, &usable, usable, n, seed);
		free(p);
	}
}

/* Up by one class and back down, at every class from 16 B to 128 KiB: the
 * way up copies the old block's usable size, the way down the new. */
static void test_each_class_boundary(void **state) {
	(void)state;
	uint64_t seed = 0x6800;
	for (size_t c = 16; c <= 128 * MP_KiB; c = mp_expected_size_class(c +
	    1), seed++) {
		unsigned char *p = LAUNDER((unsigned char *)malloc(
		    opaque_size(c)));
		MP_ASSERT(p != NULL, "malloc(%zu)", c);
		size_t usable = malloc_usable_size(p);
		pattern_fill(p, usable, seed);
		p = grow_checked(p, &usable, usable, c + 1, seed);
		p = grow_checked(p, &usable, usable, c, seed);
		/* Within the class: nothing moves, nothing is counted. */
		p = grow_checked(p, &usable, usable, c - 1, seed);
		free(p);
	}
}

/* Halving from 256 KiB to 1 byte: what remains of the contents stays. */
static void test_shrink_by_halving(void **state) {
	(void)state;
	uint64_t seed = 0x6900;
	unsigned char *p = LAUNDER((unsigned char *)malloc(
	    opaque_size(256 * MP_KiB)));
	MP_ASSERT(p != NULL, "malloc(256 KiB)");
	size_t usable = malloc_usable_size(p);
	pattern_fill(p, usable, seed);
	for (size_t n = 128 * MP_KiB; n >= 1; n /= 2)
		p = grow_checked(p, &usable, usable, n, seed);
	free(p);
}

/*
 * Many vectors grown a step at a time in turn, so that a realloc rarely
 * finds its block's neighbour free, then freed in a shuffled order: the
 * cache bins run dry and overflow in between, and large blocks pass
 * through the thread's cache and the arena.
 */
static void test_interleaved_vectors(void **state) {
	(void)state;
	enum { N = 600, ROUNDS = 3 };
	static unsigned char *v[N];
	static size_t len[N], cap[N], final[N];
	static unsigned order[N];
	mp_rng_t r = {0x7a11c0de};
	for (unsigned round = 0; round < ROUNDS; round++) {
		for (unsigned k = 0; k < N; k++) {
			/* 64 B .. 64 KiB, log-uniform by octave. */
			unsigned lg = 6 + (unsigned)mp_rng_below(&r, 11);
			final[k] = ((size_t)1 << lg) + (size_t)mp_rng_below(&r,
			    (uint64_t)1 << lg);
			cap[k] = 16;
			len[k] = 0;
			v[k] = LAUNDER((unsigned char *)malloc(opaque_size(16)));
			MP_ASSERT(v[k] != NULL, "malloc(16)");
			order[k] = k;
		}
		bool growing = true;
		while (growing) {
			growing = false;
			for (unsigned k = 0; k < N; k++) {
				if (len[k] >= final[k])
					continue;
				growing = true;
				if (len[k] == cap[k]) {
					cap[k] *= 2;
					v[k] = LAUNDER((unsigned char *)realloc(
					    v[k], opaque_size(cap[k])));
					MP_ASSERT(v[k] != NULL, "realloc(%zu)",
					    cap[k]);
					size_t bad = pattern_check(v[k], len[k],
					    k + round * N);
					MP_ASSERT(bad == SIZE_MAX, "vector %u "
					    "lost byte %zu of %zu at capacity "
					    "%zu", k, bad, len[k], cap[k]);
				}
				len[k] = cap[k] < final[k] ? cap[k] : final[k];
				pattern_fill(v[k], len[k], k + round * N);
			}
		}
		for (unsigned k = N - 1; k > 0; k--) {
			unsigned j = (unsigned)mp_rng_below(&r, k + 1);
			unsigned t = order[k];
			order[k] = order[j];
			order[j] = t;
		}
		for (unsigned i = 0; i < N; i++) {
			unsigned k = order[i];
			size_t bad = pattern_check(v[k], len[k], k + round * N);
			MP_ASSERT(bad == SIZE_MAX, "vector %u lost byte %zu of "
			    "%zu before its free", k, bad, len[k]);
			free(v[k]);
		}
	}
}

/*
 * Large blocks up to tcache_max go to and come from the thread's cache:
 * allocated and freed in bursts, in every large class up to 64 KiB, each
 * malloc and free moves the thread's counters by the usable size, and a
 * block handed out again carries nothing of its last owner's bytes that
 * matter (written in full, checked in full).
 */
static void test_large_cache_counters(void **state) {
	(void)state;
	enum { BURST = 24, ROUNDS = 40 };
	void *p[BURST];
	size_t usable[BURST];
	mp_rng_t r = {0x1a26e};
	for (unsigned round = 0; round < ROUNDS; round++) {
		for (unsigned i = 0; i < BURST; i++) {
			size_t n = 16 * MP_KiB + (size_t)mp_rng_below(&r,
			    48 * MP_KiB + 1);
			uint64_t a0 = thread_counter("thread.allocated");
			p[i] = LAUNDER(malloc(opaque_size(n)));
			uint64_t a1 = thread_counter("thread.allocated");
			MP_ASSERT(p[i] != NULL, "malloc(%zu)", n);
			usable[i] = malloc_usable_size(p[i]);
			MP_ASSERT(usable[i] == nallocx(n, 0), "malloc(%zu): "
			    "usable %zu, nallocx %zu", n, usable[i],
			    nallocx(n, 0));
			MP_ASSERT(a1 - a0 == usable[i], "malloc(%zu): "
			    "thread.allocated +%" PRIu64 ", want %zu", n,
			    a1 - a0, usable[i]);
			pattern_fill(p[i], usable[i], round * BURST + i);
		}
		/* Half in allocation order, half in reverse. */
		for (unsigned j = 0; j < BURST; j++) {
			unsigned i = j % 2 == 0 ? j / 2 : BURST - 1 - j / 2;
			size_t bad = pattern_check(p[i], usable[i],
			    round * BURST + i);
			MP_ASSERT(bad == SIZE_MAX, "block %u of round %u lost "
			    "byte %zu", i, round, bad);
			uint64_t d0 = thread_counter("thread.deallocated");
			free(p[i]);
			uint64_t d1 = thread_counter("thread.deallocated");
			MP_ASSERT(d1 - d0 == usable[i], "free of %zu bytes: "
			    "thread.deallocated +%" PRIu64, usable[i],
			    d1 - d0);
		}
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_by_doubling),
		cmocka_unit_test(test_each_class_boundary),
		cmocka_unit_test(test_shrink_by_halving),
		cmocka_unit_test(test_interleaved_vectors),
		cmocka_unit_test(test_large_cache_counters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
