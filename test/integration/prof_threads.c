/*
 * test/integration/prof_threads.c - per-thread attribution in dumps and
 * thread.prof.name.
 *
 * prof_threads.conf: prof:true,lg_prof_sample:0.  Two named threads
 * allocate at two sites.  Dumped while they run and after they exit (their
 * objects still live), each site's stack has exactly one "t<uid>:" line,
 * the uid of the thread that allocated there, and the header lists that
 * uid with the thread's name; the header's thread lines add up to t*.
 * Freed from another thread, the objects leave their thread's counts, and
 * an exited thread with nothing left disappears from the header.
 * thread.prof.name: "" initially, 15 characters kept, EINVAL for NULL,
 * control characters or a wrong size, EPERM for a read and a write in
 * one call.
 */
#include "../test_util.h"

#define NOBJ 20

static char tmpdir[256];

void thr_site_alpha(void **objs);
void thr_site_beta(void **objs);

MP_SITE void thr_site_alpha(void **objs) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size(300));	/* usize 320 */
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void thr_site_beta(void **objs) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size(5000));	/* usize 5120 */
	}
	__asm__ volatile("" : : : "memory");
}

typedef struct {
	const char *name;
	void (*site)(void **);
	size_t usize;
	void *objs[NOBJ];
	pthread_barrier_t *bar;
	int r_name;
} thr_t;

static int set_name(const char *name) {
	return mallctl("thread.prof.name", NULL, NULL, (void *)&name,
	    sizeof(name));
}

static int get_name(const char **out) {
	size_t sz = sizeof(*out);
	return mallctl("thread.prof.name", (void *)out, &sz, NULL, 0);
}

static void *thr_main(void *arg) {
	thr_t *t = arg;
	t->r_name = set_name(t->name);
	t->site(t->objs);
	pthread_barrier_wait(t->bar);	/* allocated */
	pthread_barrier_wait(t->bar);	/* main has dumped */
	return NULL;
}

/* The uid of the single thread line of the stack of site; fails the test
 * if the stack is missing or has several lines. */
static uint64_t site_uid(const mp_heap_t *h, void (*site)(void **),
    size_t usize) {
	const mp_heap_stack_t *s = mp_heap_find_site(h, (void *)site, 1);
	MP_ASSERT(s != NULL, "no stack for the site at %p", (void *)site);
	assert_int_equal(s->nthr, 1);
	mp_cnts_t want = {NOBJ, NOBJ * usize, 0, 0};
	assert_true(mp_cnts_eq(&s->total, &want));
	assert_true(mp_cnts_eq(&s->thr[0].c, &want));
	return s->thr[0].uid;
}

static void check_dump(const char *tag, thr_t *t, size_t n) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", tmpdir, tag);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	mp_heap_check_sums(&h, true);
	uint64_t uids[2];
	for (size_t i = 0; i < n; i++) {
		uids[i] = site_uid(&h, t[i].site, t[i].usize);
		const mp_heap_thread_t *ht = mp_heap_thread(&h, uids[i]);
		MP_ASSERT(ht != NULL, "%s: t%" PRIu64 " not in the header", tag,
		    uids[i]);
		MP_ASSERT(strcmp(ht->name, t[i].name) == 0, "%s: t%" PRIu64
		    " is named \"%s\", want \"%s\"", tag, uids[i], ht->name,
		    t[i].name);
		/* The thread's line counts at least what it allocated at
		 * its site. */
		assert_true(ht->c.co >= NOBJ);
		assert_true(ht->c.cb >= NOBJ * t[i].usize);
	}
	assert_true(uids[0] != uids[1]);
	mp_heap_free(&h);
}

/* Static: should a check fail while the threads wait on it, they are
 * left waiting on memory that stays valid. */
static pthread_barrier_t bar;

static void test_two_threads(void **state) {
	(void)state;
	assert_int_equal(pthread_barrier_init(&bar, NULL, 3), 0);
	thr_t t[2] = {
		{"alpha", thr_site_alpha, 320, {0}, &bar, -1},
		{"beta thread", thr_site_beta, 5120, {0}, &bar, -1},
	};
	pthread_t tid[2];
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&tid[i], NULL, thr_main, &t[i]),
		    0);
	}
	pthread_barrier_wait(&bar);
	assert_int_equal(t[0].r_name, 0);
	assert_int_equal(t[1].r_name, 0);
	check_dump("running", t, 2);
	pthread_barrier_wait(&bar);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(tid[i], NULL), 0);
	}
	pthread_barrier_destroy(&bar);
	/* Exited, but their objects keep their lines and names. */
	check_dump("exited", t, 2);

	/* Freed by this thread: the counts leave the allocating thread's
	 * line, and the exited threads go away with their last object. */
	for (int i = 0; i < NOBJ; i++) {
		free(t[0].objs[i]);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/freed.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	mp_heap_check_sums(&h, true);
	assert_null(mp_heap_find_site(&h, (void *)thr_site_alpha, 1));
	(void)site_uid(&h, thr_site_beta, 5120);
	bool alpha = false, beta = false;
	for (size_t i = 0; i < h.nthreads; i++) {
		alpha |= strcmp(h.threads[i].name, "alpha") == 0;
		beta |= strcmp(h.threads[i].name, "beta thread") == 0;
	}
	MP_ASSERT(!alpha, "the exited thread alpha, with nothing left, is "
	    "still in the header");
	assert_true(beta);
	mp_heap_free(&h);
	for (int i = 0; i < NOBJ; i++) {
		free(t[1].objs[i]);
	}
}

/* Many short-lived threads: uids are never reused and every header
 * line stays in ascending order. */
void *short_thread(void *arg);

MP_SITE void *short_thread(void *arg) {
	void **slot = arg;
	*slot = malloc(64);
	__asm__ volatile("" : : : "memory");
	return NULL;
}

static void test_many_threads(void **state) {
	(void)state;
	enum { N = 64 };
	void *objs[N];
	for (int i = 0; i < N; i++) {
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, short_thread,
		    &objs[i]), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/many.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);	/* checks the ascending uids */
	mp_heap_check_sums(&h, true);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)short_thread,
	    1);
	assert_non_null(s);
	assert_int_equal(s->total.co, N);
	/* One line per thread, each its own uid. */
	assert_int_equal(s->nthr, N);
	for (size_t i = 1; i < s->nthr; i++) {
		for (size_t k = 0; k < i; k++) {
			assert_true(s->thr[i].uid != s->thr[k].uid);
		}
	}
	mp_heap_free(&h);
	for (int i = 0; i < N; i++) {
		free(objs[i]);
	}
}

typedef struct {
	int r_initial, r_set, r_get, r_long, r_get_long, r_null, r_nl, r_ctl;
	int r_rw, r_len, r_blank;
	char initial[32], after[32], after_long[32], after_bad[32];
	char blank[32];
} name_res_t;

static void *name_thread(void *arg) {
	name_res_t *r = arg;
	const char *n = NULL;
	r->r_initial = get_name(&n);
	snprintf(r->initial, sizeof(r->initial), "%s", n ? n : "(null)");
	r->r_set = set_name("worker-1");
	r->r_get = get_name(&n);
	snprintf(r->after, sizeof(r->after), "%s", n ? n : "(null)");
	r->r_long = set_name("0123456789abcdefXYZ");
	r->r_get_long = get_name(&n);
	snprintf(r->after_long, sizeof(r->after_long), "%s", n ? n : "(null)");
	r->r_null = set_name(NULL);
	r->r_nl = set_name("new\nline");
	r->r_ctl = set_name("\x7f");
	get_name(&n);
	snprintf(r->after_bad, sizeof(r->after_bad), "%s", n ? n : "(null)");
	const char *o = NULL, *w = "x";
	size_t sz = sizeof(o);
	r->r_rw = mallctl("thread.prof.name", (void *)&o, &sz, (void *)&w,
	    sizeof(w));
	r->r_len = mallctl("thread.prof.name", NULL, NULL, (void *)&w,
	    sizeof(w) - 1);
	r->r_blank = set_name("a b\tc");
	get_name(&n);
	snprintf(r->blank, sizeof(r->blank), "%s", n ? n : "(null)");
	return NULL;
}

static void test_thread_name(void **state) {
	(void)state;
	name_res_t r;
	memset(&r, 0, sizeof(r));
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, name_thread, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r.r_initial, 0);
	assert_string_equal(r.initial, "");
	assert_int_equal(r.r_set, 0);
	assert_int_equal(r.r_get, 0);
	assert_string_equal(r.after, "worker-1");
	assert_int_equal(r.r_long, 0);
	assert_int_equal(r.r_get_long, 0);
	assert_string_equal(r.after_long, "0123456789abcde");
	assert_int_equal(r.r_null, EINVAL);
	assert_int_equal(r.r_nl, EINVAL);
	assert_int_equal(r.r_ctl, EINVAL);
	/* Refused names change nothing. */
	assert_string_equal(r.after_bad, "0123456789abcde");
	assert_int_equal(r.r_rw, EPERM);
	assert_int_equal(r.r_len, EINVAL);
	assert_int_equal(r.r_blank, 0);
	assert_string_equal(r.blank, "a b\tc");
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *n = NULL;
	assert_int_equal(get_name(&n), ENOENT);
	assert_int_equal(set_name("x"), ENOENT);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_threads),
		cmocka_unit_test(test_many_threads),
		cmocka_unit_test(test_thread_name),
	};
	return mp_prof_test_main("mp_prof_threads", test_no_profiler, tests);
}
