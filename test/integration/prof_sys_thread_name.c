/*
 * test/integration/prof_sys_thread_name.c - prof_sys_thread_name: the
 * names of dumps' threads come from the OS.
 *
 * prof_sys_thread_name.conf: prof:true,lg_prof_sample:0,
 * prof_sys_thread_name:true.  A thread names itself with
 * pthread_setname_np (never thread.prof.name) and allocates at a known
 * site; the heap_v2 dump's header names that site's thread "os-named".
 * The rule (doc/profiling.md): the name is read at the thread's first
 * sample, then at a sample at least 100 ms after the last read on the
 * sample clock (CLOCK_MONOTONIC_COARSE with the default
 * prof_time_resolution), and at the thread's exit.  So: renamed, and
 * sampling again once the sample clock has moved 100 ms on, the thread
 * shows its new name in a dump taken while it still runs; renamed once
 * more and exiting without a sample, its last name.  The read-out is
 * opt.prof_sys_thread_name.
 */
#include "../test_util.h"

#include <time.h>

#define NOBJ 10

static char tmpdir[256];
static void *objs[2 * NOBJ];

void sysname_site(void **out);

MP_SITE void sysname_site(void **out) {
	for (int i = 0; i < NOBJ; i++)
		out[i] = malloc(opaque_size(300));
	__asm__ volatile("" : : : "memory");
}

static pthread_mutex_t step_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t step_cv = PTHREAD_COND_INITIALIZER;
static int step;

static void step_to(int s) {
	pthread_mutex_lock(&step_mtx);
	step = s;
	pthread_cond_broadcast(&step_cv);
	pthread_mutex_unlock(&step_mtx);
}

static void step_wait(int s) {
	pthread_mutex_lock(&step_mtx);
	while (step < s)
		pthread_cond_wait(&step_cv, &step_mtx);
	pthread_mutex_unlock(&step_mtx);
}

/* The sample clock of prof_time_resolution:default. */
static uint64_t coarse_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *thr_main(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "os-named");
	sysname_site(objs);
	pthread_setname_np(pthread_self(), "renamed");
	/* Every earlier read was at or before this time. */
	uint64_t renamed = coarse_ns();
	while (coarse_ns() - renamed < 100 * 1000 * 1000) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	sysname_site(objs + NOBJ);
	step_to(1);             /* main dumps while we run */
	step_wait(2);
	pthread_setname_np(pthread_self(), "at-exit");
	return NULL;
}

/* The name the dump's header gives the thread of sysname_site. */
static void site_thread_name(const char *path, char *name, size_t size) {
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)sysname_site,
	    1);
	MP_ASSERT(s != NULL && s->nthr == 1, "no single-thread stack for the "
	    "site in %s", path);
	const mp_heap_thread_t *t = mp_heap_thread(&h, s->thr[0].uid);
	MP_ASSERT(t != NULL, "t%" PRIu64 " not in the header",
	    s->thr[0].uid);
	snprintf(name, size, "%s", t->name);
	mp_heap_free(&h);
}

static void test_os_name(void **state) {
	(void)state;
	bool on = false;
	size_t len = sizeof(on);
	assert_int_equal(mallctl("opt.prof_sys_thread_name", &on, &len, NULL,
	    0), 0);
	assert_true(on);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thr_main, NULL), 0);
	step_wait(1);
	char path[512], name[64];
	snprintf(path, sizeof(path), "%s/sys.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	site_thread_name(path, name, sizeof(name));
	/* Its last sample came a period after the rename. */
	assert_string_equal(name, "renamed");
	step_to(2);
	assert_int_equal(pthread_join(t, NULL), 0);
	snprintf(path, sizeof(path), "%s/sys2.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	site_thread_name(path, name, sizeof(name));
	/* Read again as it exited. */
	assert_string_equal(name, "at-exit");
	for (int i = 0; i < 2 * NOBJ; i++)
		free(objs[i]);
}

static void test_no_profiler(void **state) {
	(void)state;
	bool on;
	size_t len = sizeof(on);
	assert_int_equal(mallctl("opt.prof_sys_thread_name", &on, &len, NULL,
	    0), ENOENT);
}

int main(void) {
	mp_test_init(60);
	if (!mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_prof_sysname")) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	int r;
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		r = mp_run_tests(tests);
	} else {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_os_name),
		};
		r = mp_run_tests(tests);
	}
	mp_tmpdir_remove(tmpdir);
	return r;
}
