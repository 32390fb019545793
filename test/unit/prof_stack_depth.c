/*
 * test/unit/prof_stack_depth.c - how much stack a sample takes below
 * malloc's own frames.  Every page of stack a sampled malloc reaches and
 * an unsampled one does not is a page of each sampling thread's resident
 * memory: prof_sample_alloc's frames array of PROF_BT_MAX_LIMIT entries
 * (2 KiB) on the stack took a page in each of bench's falseshare threads
 * (doc/performance.md, "Profiling's small processes, round 2").  The
 * array is the thread's now (prof_tdata_t.frames).
 *
 * A thread on a stack of the test's own, painted with a pattern below a
 * frame at the level of the call, calls malloc; the lowest byte of the
 * pattern overwritten tells the depth the call reached.  The same with the
 * thread's sampling off (thread.prof.active) gives malloc's own depth.
 * The sample may take at most SAMPLE_EXTRA_MAX bytes more (half a page;
 * 3,176 with the array on the stack, 1,128 now, 1,464 in a debug build).
 * The same for the free of a sample with recent-allocation records on
 * (prof_recent_alloc_max): its record takes the free's stack, which
 * prof_recent_dalloc walked into an array of its own on the stack.
 *
 * prof_stack_depth.conf: prof:true,lg_prof_sample:0 (every allocation is
 * sampled); scripts/test.sh runs it again with prof_unwind:cfi (the
 * .eh_frame walk's frames count too).  Nothing depends on the machine's
 * speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <pthread.h>

#define STACK_SIZE ((size_t)256 << 10)
#define PAINT 0xa5
/* The paint starts this far below paint's own frame (memset's stays
 * above it). */
#define PAINT_GAP 512
#define SAMPLE_EXTRA_MAX 2048

static unsigned char *stack_lo;

/* Paints the stack below the caller's next frame; returns where the
 * paint ends. */
MP_NOINLINE static uintptr_t paint(void) {
	uintptr_t below = (uintptr_t)__builtin_frame_address(0) - PAINT_GAP;
	memset(stack_lo, PAINT, below - (uintptr_t)stack_lo);
	return below;
}

MP_NOINLINE static size_t depth_below(uintptr_t from) {
	const unsigned char *p = stack_lo;
	while ((uintptr_t)p < from && *p == PAINT)
		p++;
	return from - (uintptr_t)p;
}

typedef struct {
	bool sampled;
	bool measure_free;  /* the depth of the block's free, not malloc's */
	size_t depth;
	bool was_sampled;
} probe_t;

MP_NOINLINE static void *probe_malloc(size_t size) {
	void *p = malloc(size);
	__asm__ __volatile__("" : : "r"(p) : "memory");
	return p;
}

MP_NOINLINE static void probe_free(void *p) {
	free(p);
	__asm__ __volatile__("" : : : "memory");
}

static void *probe_thread(void *arg) {
	probe_t *pr = arg;
	bool active = pr->sampled;
	assert_int_equal(mallctl("thread.prof.active", NULL, NULL, &active,
	    sizeof(active)), 0);
	/* The thread's first allocations set up its caches and records
	 * (deeper paths, once): before the measured one. */
	for (int i = 0; i < 4; i++)
		free(probe_malloc(100));
	uintptr_t frame = paint();
	void *p = probe_malloc(100);
	pr->depth = depth_below(frame);
	prof_sample_info_t info;
	pr->was_sampled = !prof_sample_info(p, &info);
	if (pr->measure_free) {
		frame = paint();
		probe_free(p);
		pr->depth = depth_below(frame);
	} else {
		free(p);
	}
	return NULL;
}

static size_t probe(bool sampled, bool measure_free) {
	pthread_attr_t attr;
	assert_int_equal(pthread_attr_init(&attr), 0);
	assert_int_equal(pthread_attr_setstack(&attr, stack_lo, STACK_SIZE),
	    0);
	probe_t pr = { .sampled = sampled, .measure_free = measure_free };
	pthread_t t;
	assert_int_equal(pthread_create(&t, &attr, probe_thread, &pr), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_attr_destroy(&attr);
	MP_ASSERT(pr.was_sampled == sampled, "the probe's allocation was%s "
	    "sampled", pr.was_sampled ? "" : " not");
	return pr.depth;
}

/* Why the depths cannot be measured (NULL: they can, and stack_lo is
 * made): samples must be taken and frames be the program's own. */
static const char *depth_setup(void) {
	/* A prefixed build's library boots at its first call, not with
	 * the process. */
	assert_false(malloc_init());
	if (!config_prof || !opt_prof)
		return "profiling not built in / not on";
	if (mp_env_sanitizer()[0] != '\0')
		return "sanitizer build: its frames are its own";
	stack_lo = aligned_alloc(4096, STACK_SIZE);
	assert_non_null(stack_lo);
	return NULL;
}

static void test_sample_stack_depth(void **state) {
	(void)state;
	const char *why = depth_setup();
	if (why != NULL)
		MP_SKIP("%s", why);
	size_t plain = probe(false, false), sampled = probe(true, false);
	printf("# malloc reached %zu bytes below the paint's start unsampled, "
	    "%zu sampled\n", plain, sampled);
	MP_ASSERT(sampled <= plain + SAMPLE_EXTRA_MAX, "a sample took %zu "
	    "bytes of stack more than malloc's %zu", sampled - plain, plain);
	free(stack_lo);
}

/* A sample's free that fills in its recent-allocation record walks the
 * free's stack: no deeper than a sampled malloc may reach. */
static void test_recorded_free_stack_depth(void **state) {
	(void)state;
	const char *why = depth_setup();
	if (why != NULL)
		MP_SKIP("%s", why);
	ssize_t max = 16, old;
	size_t sz = sizeof(old);
	assert_int_equal(mallctl("experimental.prof_recent.alloc_max", &old,
	    &sz, &max, sizeof(max)), 0);
	size_t plain = probe(false, false), freed = probe(true, true);
	printf("# malloc reached %zu bytes below the paint's start unsampled, "
	    "a recorded sample's free %zu\n", plain, freed);
	MP_ASSERT(freed <= plain + SAMPLE_EXTRA_MAX, "a recorded sample's "
	    "free took %zu bytes of stack more than malloc's %zu",
	    freed - plain, plain);
	assert_int_equal(mallctl("experimental.prof_recent.alloc_max", NULL,
	    NULL, &old, sizeof(old)), 0);
	free(stack_lo);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_stack_depth),
		cmocka_unit_test(test_recorded_free_stack_depth),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
