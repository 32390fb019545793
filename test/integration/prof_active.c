/*
 * test/integration/prof_active.c - the two sampling switches, prof.active
 * and thread.prof.active (jemalloc's test/unit/prof_active.c).
 *
 * prof_active.conf: prof:true,prof_thread_active_init:false,
 * lg_prof_sample:0 - every allocation is a sample event, and this
 * thread starts with thread.prof.active false.  An allocation is recorded
 * only when both switches are on; each of the four combinations is checked
 * by dumping and parsing the profile.
 */
#include "../test_util.h"

static char tmpdir[256];

#define NOBJ 10
#define OBJ_SIZE 3000		/* usize 3072 */
static void *objs[NOBJ];

void *active_site(size_t n);

/* The allocation site whose samples are looked for in the dumps. */
MP_SITE void *active_site(size_t n) {
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void alloc_objs(void) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = active_site(opaque_size(OBJ_SIZE));
		assert_non_null(objs[i]);
	}
}

static bool read_bool(const char *name) {
	bool v = false;
	MALLCTL_READ(name, v);
	return v;
}

/* Dumps and returns how many live objects the dump holds at active_site
 * (0 when it has no such stack). */
static uint64_t dumped_site_objs(const char *tag) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", tmpdir, tag);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 1);
	mp_heap_check_sums(&h, true);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)active_site,
	    1);
	uint64_t n = 0;
	if (s != NULL) {
		n = s->total.co;
		MP_ASSERT(s->total.cb == s->total.co * 3072, "%" PRIu64 ": %"
		    PRIu64, s->total.co, s->total.cb);
	}
	mp_heap_free(&h);
	return n;
}

static void test_initial(void **state) {
	(void)state;
	assert_true(read_bool("opt.prof"));
	assert_true(read_bool("opt.prof_active"));
	assert_false(read_bool("opt.prof_thread_active_init"));
	assert_true(read_bool("prof.active"));
	assert_false(read_bool("prof.thread_active_init"));
	assert_false(read_bool("thread.prof.active"));
}

/* Writes return the old value, reads see the new one. */
static void test_write_returns_old(void **state) {
	(void)state;
	static const char *const names[] = {
		"prof.active", "prof.thread_active_init", "thread.prof.active",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(names); i++) {
		bool orig = read_bool(names[i]);
		bool old;
		assert_int_equal(mp_prof_switch(names[i], !orig, &old), 0);
		MP_ASSERT(old == orig, "%s: old %d, was %d", names[i], old,
		    orig);
		assert_true(read_bool(names[i]) == !orig);
		/* Writing the same value again returns it as the old one. */
		assert_int_equal(mp_prof_switch(names[i], !orig, &old), 0);
		assert_true(old == !orig);
		assert_int_equal(mp_prof_switch(names[i], orig, &old), 0);
		assert_true(old == !orig);
		assert_true(read_bool(names[i]) == orig);
		/* Wrong sizes. */
		bool b = orig;
		assert_int_equal(mallctl(names[i], NULL, NULL, &b, 4), EINVAL);
		size_t sz = 4;
		assert_int_equal(mallctl(names[i], &b, &sz, NULL, 0), EINVAL);
	}
}

/* All four combinations of the two switches. */
static void test_combinations(void **state) {
	(void)state;
	for (int a = 0; a < 2; a++) {
		for (int t = 0; t < 2; t++) {
			bool old;
			assert_int_equal(mp_prof_switch("prof.active", a, &old),
			    0);
			assert_int_equal(mp_prof_switch("thread.prof.active", t,
			    &old), 0);
			alloc_objs();
			/* Dump with both on: a dump does not depend on them,
			 * but keep the check independent of that. */
			char tag[32];
			snprintf(tag, sizeof(tag), "combo-%d%d", a, t);
			uint64_t n = dumped_site_objs(tag);
			uint64_t want = a && t ? NOBJ : 0;
			MP_ASSERT(n == want, "prof.active=%d thread.prof.active="
			    "%d: %" PRIu64 " objects recorded, want %" PRIu64,
			    a, t, n, want);
			mp_free_all(objs, NOBJ);
			/* Freed: nothing is left at the site. */
			assert_int_equal(dumped_site_objs("freed"), 0);
		}
	}
	/* Sampled while on, still counted after prof.active goes off, and
	 * uncounted by the frees done while it is off. */
	bool old;
	assert_int_equal(mp_prof_switch("prof.active", true, &old), 0);
	assert_int_equal(mp_prof_switch("thread.prof.active", true, &old), 0);
	alloc_objs();
	assert_int_equal(mp_prof_switch("prof.active", false, &old), 0);
	assert_true(old);
	assert_int_equal(dumped_site_objs("off-live"), NOBJ);
	free(objs[0]);
	objs[0] = NULL;
	assert_int_equal(dumped_site_objs("off-freed1"), NOBJ - 1);
	assert_int_equal(mp_prof_switch("prof.active", true, &old), 0);
	assert_false(old);
	mp_free_all(objs, NOBJ);
	assert_int_equal(dumped_site_objs("on-freed"), 0);
	assert_int_equal(mp_prof_switch("thread.prof.active", false, &old), 0);
}

/* A new thread starts with prof.thread_active_init. */
typedef struct {
	int r;
	bool active;
	uint64_t nobj;
} thr_res_t;

static void *thr_main(void *arg) {
	thr_res_t *res = arg;
	size_t sz = sizeof(res->active);
	res->r = mallctl("thread.prof.active", &res->active, &sz, NULL, 0);
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = active_site(OBJ_SIZE);
	}
	return NULL;
}

static void test_thread_active_init(void **state) {
	(void)state;
	for (int init = 0; init < 2; init++) {
		bool old;
		assert_int_equal(mp_prof_switch("prof.thread_active_init", init,
		    &old), 0);
		thr_res_t res = {-1, !init, 0};
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, thr_main, &res), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		assert_int_equal(res.r, 0);
		MP_ASSERT(res.active == (bool)init, "init %d: new thread's "
		    "thread.prof.active is %d", init, res.active);
		uint64_t n = dumped_site_objs("thread");
		MP_ASSERT(n == (init ? NOBJ : 0), "init %d: %" PRIu64 " objects",
		    init, n);
		mp_free_all(objs, NOBJ);
	}
	bool old;
	assert_int_equal(mp_prof_switch("prof.thread_active_init", false, &old),
	    0);
	/* This thread's own switch did not change. */
	assert_false(read_bool("thread.prof.active"));
}

static void test_no_profiler(void **state) {
	(void)state;
	static const char *const names[] = {
		"prof.active", "prof.thread_active_init", "thread.prof.active",
		"opt.prof_active", "opt.prof_thread_active_init",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(names); i++) {
		bool b = true;
		size_t sz = sizeof(b);
		int r = mallctl(names[i], &b, &sz, NULL, 0);
		MP_ASSERT(r == ENOENT, "%s: %d", names[i], r);
		r = mallctl(names[i], NULL, NULL, &b, sizeof(b));
		MP_ASSERT(r == ENOENT || r == EPERM, "%s write: %d", names[i],
		    r);
	}
	bool prof = true;
	MALLCTL_READ("config.prof", prof);
	assert_false(prof);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_initial),
		cmocka_unit_test(test_write_returns_old),
		cmocka_unit_test(test_combinations),
		cmocka_unit_test(test_thread_active_init),
	};
	return mp_prof_test_main("mp_prof_active", test_no_profiler, tests);
}
