/*
 * test/unit/tcache_threads.h - what the thread-cache trimming tests share
 * (tcache_trim.c, tcache_top.c): seven helper threads that attach to an
 * arena and wait, so that with the main thread the process has
 * CACHE_BIN_TRIM_THREADS threads; the cmocka group setup and teardown
 * that start the allocator and stop the helpers; and one hand-driven GC
 * pass (tcache_gc_step, one bin per call: SC_NBINS calls are a period
 * for every bin).  Include it after test_util.h and internal.h.
 */
#ifndef TEST_UNIT_TCACHE_THREADS_H
#define TEST_UNIT_TCACHE_THREADS_H

#define HELPERS 7       /* with the main thread, CACHE_BIN_TRIM_THREADS */

static pthread_t helpers[HELPERS];
static pthread_barrier_t attached;
static int helper_pipe[2];
static bool helpers_up;

/* Attach to an arena (one malloc), then wait for the pipe to close. */
static void *helper(void *arg) {
	(void)arg;
	free(LAUNDER(malloc(16)));
	pthread_barrier_wait(&attached);
	char c;
	while (read(helper_pipe[0], &c, 1) > 0)
		;
	return NULL;
}

static void helpers_start(void) {
	assert_int_equal(pipe(helper_pipe), 0);
	assert_int_equal(pthread_barrier_init(&attached, NULL, HELPERS + 1),
	    0);
	for (unsigned i = 0; i < HELPERS; i++)
		assert_int_equal(pthread_create(&helpers[i], NULL, helper,
		    NULL), 0);
	helpers_up = true;
	pthread_barrier_wait(&attached);
}

static int teardown(void **state) {
	(void)state;
	if (!helpers_up)
		return 0;
	close(helper_pipe[1]);
	for (unsigned i = 0; i < HELPERS; i++)
		pthread_join(helpers[i], NULL);
	close(helper_pipe[0]);
	return 0;
}

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

/* Out of line, as in tcache_grow_mid.c: gcc's UBSan in the sanitizer
 * build reported tsd_fetch inlined into an assertion as a null tsd_t. */
static MP_NOINLINE tcache_t *main_tcache(void) {
	return tsd_fetch()->tcache;
}

/* One GC visit of every bin, nothing allocated in between. */
static void gc_pass(void) {
	tcache_t *tc = main_tcache();
	for (unsigned i = 0; i < SC_NBINS; i++)
		tcache_gc_step(tc);
}

#endif
