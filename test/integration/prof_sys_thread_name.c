/*
 * test/integration/prof_sys_thread_name.c - prof_sys_thread_name: the
 * names of dumps' threads come from the OS.
 *
 * prof_sys_thread_name.conf: prof:true,lg_prof_sample:0,
 * prof_sys_thread_name:true.  A thread names itself with
 * pthread_setname_np (never thread.prof.name) and allocates at a known
 * site; the heap_v2 dump's header names that site's thread "os-named";
 * renamed, its next sample renames it in the next dump; the read-out is
 * opt.prof_sys_thread_name.
 */
#include "../test_util.h"

#define NOBJ 10

static char tmpdir[256];
static void *objs[2 * NOBJ];

void sysname_site(void **out);

MP_SITE void sysname_site(void **out) {
	for (int i = 0; i < NOBJ; i++)
		out[i] = malloc(opaque_size(300));
	__asm__ volatile("" : : : "memory");
}

static void *thr_main(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "os-named");
	sysname_site(objs);
	pthread_setname_np(pthread_self(), "renamed");
	sysname_site(objs + NOBJ);
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
	assert_int_equal(pthread_join(t, NULL), 0);
	char path[512], name[64];
	snprintf(path, sizeof(path), "%s/sys.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	site_thread_name(path, name, sizeof(name));
	/* The last sample of the thread was taken after the rename. */
	assert_string_equal(name, "renamed");
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
