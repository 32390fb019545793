/*
 * test/stress/prof_getattr.c - a thread's first sample inside glibc's
 * pthread_getattr_np, and stacks walked from threads to their start.
 *
 * prof_getattr.conf: prof:true,lg_prof_sample:6 (a sample every 64 bytes
 * on average).  glibc's pthread_getattr_np holds the thread's lock while
 * it allocates its cpuset; in a build that replaces malloc, that
 * allocation is often the thread's first sample.  The profiler once
 * asked pthread_getattr_np for the thread's stack bounds there and waited
 * on the same lock forever (Rust's standard library calls it at every
 * thread's start).  NTHREADS threads each call it first thing (the test's
 * alarm fails a hang), check the bounds it gives, then allocate at a
 * site two calls deep.  The dump must hold that site's stack with its
 * caller and the thread's function above it: the walk's bounds reach the
 * top of each thread's stack.  In a prefixed build glibc's allocations
 * are glibc's own, and the test checks the stacks only.
 */
#include "../test_util.h"

#define NTHREADS 300
#define NOBJ 8

static char tmpdir[256];
static void *objs[NTHREADS][NOBJ];

void getattr_site(void **o);
void getattr_mid(void **o);
void *getattr_thread(void *arg);

MP_SITE void getattr_site(void **o) {
	for (int i = 0; i < NOBJ; i++) {
		o[i] = malloc(opaque_size(200));
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void getattr_mid(void **o) {
	getattr_site(o);
	__asm__ volatile("" : : : "memory");
}

MP_SITE void *getattr_thread(void *arg) {
	pthread_attr_t attr;
	void *addr = NULL;
	size_t size = 0;
	int here;
	bool ok = pthread_getattr_np(pthread_self(), &attr) == 0 &&
	    pthread_attr_getstack(&attr, &addr, &size) == 0;
	if (ok) {
		pthread_attr_destroy(&attr);
		ok = (uintptr_t)&here > (uintptr_t)addr &&
		    (uintptr_t)&here < (uintptr_t)addr + size;
	}
	if (ok) {
		getattr_mid(objs[(uintptr_t)arg]);
	}
	__asm__ volatile("" : : : "memory");
	return ok ? arg : NULL;
}

static void test_getattr(void **state) {
	(void)state;
	for (uintptr_t i = 0; i < NTHREADS; i++) {
		pthread_t t;
		void *ret = NULL;
		MP_ASSERT(pthread_create(&t, NULL, getattr_thread,
		    (void *)i) == 0, "pthread_create %lu",
		    (unsigned long)i);
		assert_int_equal(pthread_join(t, &ret), 0);
		MP_ASSERT(ret == (void *)i, "thread %lu: pthread_getattr_np "
		    "failed or gave bounds that do not hold its stack",
		    (unsigned long)i);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/getattr.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, getattr_site, 1);
	MP_ASSERT(s != NULL, "no stack of getattr_site in %zu stacks",
	    h.nstacks);
	/* site, mid, thread: each one above the last. */
	uintptr_t lo[2], hi[2];
	mp_fn_range((const void *)getattr_mid, &lo[0], &hi[0]);
	mp_fn_range((const void *)getattr_thread, &lo[1], &hi[1]);
	size_t k = mp_heap_user_frame(s) + 1;
	for (int f = 0; f < 2; f++, k++) {
		MP_ASSERT(k < s->nframes && mp_ra_in(s->frames[k], lo[f],
		    hi[f]), "frame %zu of getattr_site's stack is %s, want %s "
		    "(%zu frames)", k, k < s->nframes ?
		    mp_fn_name(s->frames[k]) : "missing",
		    f == 0 ? "getattr_mid" : "getattr_thread", s->nframes);
	}
	mp_heap_free(&h);
	for (int i = 0; i < NTHREADS; i++) {
		for (int j = 0; j < NOBJ; j++) {
			free(objs[i][j]);
		}
	}
}

/* --disable-prof: the threads' pthread_getattr_np still works, and
 * prof.dump says ENOENT. */
static void test_no_profiler(void **state) {
	(void)state;
	for (uintptr_t i = 0; i < 16; i++) {
		pthread_t t;
		void *ret = NULL;
		assert_int_equal(pthread_create(&t, NULL, getattr_thread,
		    (void *)i), 0);
		assert_int_equal(pthread_join(t, &ret), 0);
		assert_true(ret == (void *)i);
		for (int j = 0; j < NOBJ; j++) {
			free(objs[i][j]);
		}
	}
	assert_int_equal(mp_prof_dump("/nonexistent/x.heap"), ENOENT);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_getattr),
	};
	return mp_prof_test_main("mp_prof_getattr", test_no_profiler, tests);
}
