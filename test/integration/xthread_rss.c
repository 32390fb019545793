/*
 * test/integration/xthread_rss.c - memory a thread holds after another
 * thread has freed everything it allocated (issue 15 part 3).
 *
 * A producer thread allocates about 24 MB of blocks of random sizes from
 * 8 to 16,000 B and hands them all to a consumer thread, which frees them
 * (remote frees: they land in the producer's slabs' remote bitmaps) and
 * flushes its cache bins.  The producer then goes on working in one other
 * small class.  Its slabs that the consumer emptied come back through its
 * inbox at its next slab fill (src/alloc/slab.c, slab_inbox_drain) and
 * must be released there, not held until the GC has visited each of
 * their classes: stats.active, the pages in use by live blocks and slabs,
 * must fall back to within a few MiB of what it was before the hand-off,
 * while the producer is still alive and the consumer keeps its cache.
 */
#include "../test_util.h"

#include <pthread.h>

#define XT_BLOCKS 3000
#define XT_MIN 8
#define XT_MAX 16000
/* The producer's current slab of each class stays (the next fill takes it
 * up again) and up to 4 empty slabs are kept: well under this. */
#define XT_HELD_MAX (4 * MP_MiB)

static void *xt_block[XT_BLOCKS];
static pthread_barrier_t xt_barrier;
static size_t xt_bytes;

static size_t xt_active(void) {
	uint64_t one = 1;
	MALLCTL_WRITE("epoch", one);
	size_t active = 0;
	MALLCTL_READ("stats.active", active);
	return active;
}

static void *xt_consumer(void *arg) {
	(void)arg;
	pthread_barrier_wait(&xt_barrier);      /* the blocks are ready */
	for (unsigned i = 0; i < XT_BLOCKS; i++)
		free(xt_block[i]);
	MALLCTL_CALL("thread.tcache.flush");
	pthread_barrier_wait(&xt_barrier);      /* all freed */
	pthread_barrier_wait(&xt_barrier);      /* measured: may exit */
	return NULL;
}

static void test_remote_frees_release_slabs(void **state) {
	(void)state;
	MP_ASSERT(pthread_barrier_init(&xt_barrier, NULL, 2) == 0,
	    "pthread_barrier_init");
	pthread_t t;
	MP_ASSERT(pthread_create(&t, NULL, xt_consumer, NULL) == 0,
	    "pthread_create");
	size_t before = xt_active();
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	xt_bytes = 0;
	for (unsigned i = 0; i < XT_BLOCKS; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t sz = XT_MIN + (size_t)((x >> 33) % (XT_MAX - XT_MIN + 1));
		unsigned char *p = LAUNDER((unsigned char *)malloc(
		    opaque_size(sz)));
		MP_ASSERT(p != NULL, "malloc(%zu)", sz);
		p[0] = (unsigned char)i;
		p[sz - 1] = (unsigned char)i;
		xt_block[i] = p;
		xt_bytes += sz;
	}
	size_t full = xt_active();
	MP_ASSERT(full - before >= xt_bytes, "stats.active grew by %zu for "
	    "%zu bytes of blocks", full - before, xt_bytes);
	pthread_barrier_wait(&xt_barrier);
	pthread_barrier_wait(&xt_barrier);
	/* Work in one class: enough allocations for a few bin fills. */
	void *small[1000];
	for (unsigned i = 0; i < MP_ARRAY_SIZE(small); i++) {
		small[i] = LAUNDER(malloc(opaque_size(48)));
		MP_ASSERT(small[i] != NULL, "malloc(48)");
	}
	for (unsigned i = 0; i < MP_ARRAY_SIZE(small); i++)
		free(small[i]);
	size_t after = xt_active();
	pthread_barrier_wait(&xt_barrier);
	MP_ASSERT(pthread_join(t, NULL) == 0, "pthread_join");
	pthread_barrier_destroy(&xt_barrier);
	size_t held = after > before ? after - before : 0;
	MP_ASSERT(held <= XT_HELD_MAX, "after another thread freed all %zu "
	    "bytes this thread allocated, stats.active is still %zu bytes "
	    "above its start (at most %zu expected; %zu at the peak)",
	    xt_bytes, held, (size_t)XT_HELD_MAX, full - before);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remote_frees_release_slabs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
