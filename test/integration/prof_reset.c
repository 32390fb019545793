/*
 * test/integration/prof_reset.c - prof.reset (jemalloc's
 * test/unit/prof_reset.c).
 *
 * prof_reset.conf: prof:true,lg_prof_sample:0.  After a reset a dump no
 * longer shows objects allocated before it; freeing those objects later
 * does not disturb the counts of newer ones (the dumps stay exact); a
 * reset with a value sets prof.lg_sample (clamped to 63), without one it
 * keeps the rate; threads allocating, freeing, resetting and dumping at
 * once leave consistent dumps and nothing behind once all is freed.
 */
#include "../test_util.h"

static char tmpdir[256];

#define NOBJ 50

void reset_site_old(void **objs, int n);
void reset_site_new(void **objs, int n);

MP_SITE void reset_site_old(void **objs, int n) {
	for (int i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(700));	/* usize 768 */
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void reset_site_new(void **objs, int n) {
	for (int i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(90));	/* usize 96 */
	}
	__asm__ volatile("" : : : "memory");
}

static int reset(const size_t *lg) {
	return mallctl("prof.reset", NULL, NULL, (void *)lg, lg != NULL ?
	    sizeof(*lg) : 0);
}

static size_t lg_sample(void) {
	size_t lg = 99;
	MALLCTL_READ("prof.lg_sample", lg);
	return lg;
}

static void dump_parse(const char *tag, mp_heap_t *h) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", tmpdir, tag);
	assert_int_equal(mp_prof_dump(path), 0);
	MP_HEAP_PARSE(path, h);
}

static void test_reset_forgets(void **state) {
	(void)state;
	void *old_objs[NOBJ], *new_objs[NOBJ];
	reset_site_old(old_objs, NOBJ);
	mp_heap_t h;
	dump_parse("before", &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)reset_site_old,
	    1);
	assert_non_null(s);
	assert_int_equal(s->total.co, NOBJ);
	mp_heap_free(&h);

	assert_int_equal(reset(NULL), 0);
	assert_int_equal(lg_sample(), 0);
	dump_parse("after-reset", &h);
	mp_heap_check_sums(&h, true);
	assert_null(mp_heap_find_site(&h, (void *)reset_site_old, 1));
	mp_heap_free(&h);

	/* New objects, then the old ones freed: the new counts are exact
	 * and nothing wraps below zero. */
	reset_site_new(new_objs, NOBJ);
	for (int i = 0; i < NOBJ; i++) {
		free(old_objs[i]);
	}
	dump_parse("new", &h);
	mp_heap_check_sums(&h, true);
	assert_null(mp_heap_find_site(&h, (void *)reset_site_old, 1));
	s = mp_heap_find_site(&h, (void *)reset_site_new, 1);
	assert_non_null(s);
	mp_cnts_t want = {NOBJ, NOBJ * 96, 0, 0};
	MP_ASSERT(mp_cnts_eq(&s->total, &want), "%" PRIu64 ": %" PRIu64,
	    s->total.co, s->total.cb);
	/* The header total cannot have been pushed down by the old frees:
	 * it still holds the new objects (and is not a wrapped-around huge
	 * number). */
	assert_true(h.total.co >= NOBJ && h.total.co < 1000000);
	assert_true(h.total.cb >= NOBJ * 96 && h.total.cb < ((uint64_t)1 <<
	    40));
	for (size_t i = 0; i < h.nthreads; i++) {
		assert_true(h.threads[i].c.co < 1000000);
	}
	mp_heap_free(&h);

	/* Half the new ones freed: counted down exactly. */
	for (int i = 0; i < NOBJ / 2; i++) {
		free(new_objs[i]);
	}
	dump_parse("half", &h);
	mp_heap_check_sums(&h, true);
	s = mp_heap_find_site(&h, (void *)reset_site_new, 1);
	assert_non_null(s);
	assert_int_equal(s->total.co, NOBJ - NOBJ / 2);
	assert_int_equal(s->total.cb, (NOBJ - NOBJ / 2) * 96);
	mp_heap_free(&h);
	for (int i = NOBJ / 2; i < NOBJ; i++) {
		free(new_objs[i]);
	}
	dump_parse("all-freed", &h);
	mp_heap_check_sums(&h, true);
	assert_null(mp_heap_find_site(&h, (void *)reset_site_new, 1));
	mp_heap_free(&h);
}

void *reset_site_realloc(void *p, size_t size);

MP_SITE void *reset_site_realloc(void *p, size_t size) {
	void *q = realloc(p, size);
	__asm__ volatile("" : : "r"(q) : "memory");
	return q;
}

/* An object sampled before a reset and reallocated after it. */
static void test_realloc_across_reset(void **state) {
	(void)state;
	void *p[4];
	reset_site_old(p, 4);
	assert_int_equal(reset(NULL), 0);
	for (int i = 0; i < 4; i++) {
		p[i] = reset_site_realloc(p[i], 20000);	/* moves */
		assert_non_null(p[i]);
	}
	mp_heap_t h;
	dump_parse("realloc", &h);
	mp_heap_check_sums(&h, true);
	assert_null(mp_heap_find_site(&h, (void *)reset_site_old, 1));
	/* The four new blocks, sampled at realloc. */
	const mp_heap_stack_t *s = mp_heap_find_site(&h,
	    (void *)reset_site_realloc, 1);
	assert_non_null(s);
	assert_int_equal(s->total.co, 4);
	assert_int_equal(s->total.cb, 4 * malloc_usable_size(p[0]));
	assert_true(mp_heap_entry_is(s, (void *)realloc));
	mp_heap_free(&h);
	for (int i = 0; i < 4; i++) {
		free(p[i]);
	}
}

static void test_reset_rate(void **state) {
	(void)state;
	size_t lg = 5;
	assert_int_equal(reset(&lg), 0);
	assert_int_equal(lg_sample(), 5);
	mp_heap_t h;
	dump_parse("rate5", &h);
	assert_int_equal(h.rate, 32);
	mp_heap_free(&h);
	/* No value: the rate stays. */
	assert_int_equal(reset(NULL), 0);
	assert_int_equal(lg_sample(), 5);
	/* Errors: read (EPERM), wrong size (EINVAL). */
	size_t sz = sizeof(lg);
	assert_int_equal(mallctl("prof.reset", &lg, &sz, NULL, 0), EPERM);
	unsigned small = 3;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &small,
	    sizeof(small)), EINVAL);
	assert_int_equal(lg_sample(), 5);
	/* prof.lg_sample is read-only. */
	assert_int_equal(mallctl("prof.lg_sample", NULL, NULL, &lg,
	    sizeof(lg)), EPERM);
	/* opt.lg_prof_sample keeps the start-up value. */
	size_t opt = 99;
	MALLCTL_READ("opt.lg_prof_sample", opt);
	assert_int_equal(opt, 0);
	lg = 0;
	assert_int_equal(reset(&lg), 0);
	assert_int_equal(lg_sample(), 0);
}

/*
 * Rates that stop sampling, and back: in a thread of its own (this
 * thread must not draw a wait at lg 63, see test_rate_back_down).
 */
typedef struct {
	size_t lg63, lg64, lgmax, lg_back;
	uint64_t sampled63;		/* of NOBJ, at lg 63 */
	uint64_t sampled_back;		/* of NOBJ, back at lg 0 */
	int err;
} rate_res_t;

static uint64_t site_new_count(const char *tag) {
	mp_heap_t h;
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", tmpdir, tag);
	if (mp_prof_dump(path) != 0 || !mp_heap_parse(path, &h)) {
		return UINT64_MAX;
	}
	const mp_heap_stack_t *s = mp_heap_find_site(&h,
	    (void *)reset_site_new, 1);
	uint64_t n = s != NULL ? s->total.co : 0;
	mp_heap_free(&h);
	return n;
}

static void *rate_thread(void *arg) {
	rate_res_t *r = arg;
	void *objs[NOBJ];
	size_t lg = 63;
	r->err |= reset(&lg);
	r->lg63 = lg_sample();
	reset_site_new(objs, NOBJ);
	r->sampled63 = site_new_count("rate63");
	for (int i = 0; i < NOBJ; i++) {
		free(objs[i]);
	}
	lg = 64;
	r->err |= reset(&lg);
	r->lg64 = lg_sample();
	lg = SIZE_MAX;
	r->err |= reset(&lg);
	r->lgmax = lg_sample();
	/* Back to sampling everything.  A wait drawn at lg 63 is never
	 * reached: the new rate must take over all the same, at the
	 * latest after some allocation (1 MiB here). */
	lg = 0;
	r->err |= reset(&lg);
	r->lg_back = lg_sample();
	for (int i = 0; i < 1024; i++) {
		free(malloc(1024));
	}
	reset_site_new(objs, NOBJ);
	r->sampled_back = site_new_count("rate0");
	for (int i = 0; i < NOBJ; i++) {
		free(objs[i]);
	}
	return NULL;
}

static void test_rate_back_down(void **state) {
	(void)state;
	rate_res_t r;
	memset(&r, 0, sizeof(r));
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, rate_thread, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r.err, 0);
	assert_int_equal(r.lg63, 63);
	assert_int_equal(r.lg64, 63);		/* clamped */
	assert_int_equal(r.lgmax, 63);
	assert_int_equal(r.lg_back, 0);
	/* At lg 63 only the allocation that meets the wait drawn before
	 * the reset is sampled. */
	MP_ASSERT(r.sampled63 <= 1, "%" PRIu64 " of %d sampled at lg 63",
	    r.sampled63, NOBJ);
	MP_ASSERT(r.sampled_back == NOBJ, "back at lg 0 after 1 MiB: %" PRIu64
	    " of %d sampled (the thread still waits for the 2^63-byte wait "
	    "drawn at lg 63)", r.sampled_back, NOBJ);
}

/* ---- concurrency: 4 threads x 8192 allocations, resets and dumps */

#define NTHREADS 4
#define NALLOC 8192
#define NLIVE 256

void reset_site_worker(void **slot, size_t size);

MP_SITE void reset_site_worker(void **slot, size_t size) {
	*slot = malloc(size);
	__asm__ volatile("" : : : "memory");
}

static void *reset_worker(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg;
	mp_rng_t rng = {id * 7919 + 1};
	void *live[NLIVE] = {NULL};
	for (int i = 0; i < NALLOC; i++) {
		size_t k = (size_t)mp_rng_below(&rng, NLIVE);
		free(live[k]);
		reset_site_worker(&live[k], 16 + (size_t)mp_rng_below(&rng,
		    3000));
		if (i % 1024 == (int)id * 256) {
			MP_CHECK(mallctl("prof.reset", NULL, NULL, NULL, 0) ==
			    0, "reset");
		}
		if (i % 1024 == 512 + (int)id * 128) {
			char path[600];
			snprintf(path, sizeof(path), "%s/worker-%u.heap",
			    tmpdir, id);
			MP_CHECK(mp_prof_dump(path) == 0, "dump");
			mp_heap_t h;
			MP_CHECK(mp_heap_parse(path, &h), "parse: %s", h.err);
			/* Counts never go negative (a wrapped u64). */
			for (size_t s = 0; s < h.nstacks; s++) {
				MP_CHECK(h.stacks[s].total.co < ((uint64_t)1 <<
				    40), "stack count %" PRIu64,
				    h.stacks[s].total.co);
			}
			MP_CHECK(h.total.co < ((uint64_t)1 << 40), "t* %" PRIu64,
			    h.total.co);
			mp_heap_free(&h);
		}
	}
	for (size_t k = 0; k < NLIVE; k++) {
		free(live[k]);
	}
	return NULL;
}

static void test_concurrent_resets(void **state) {
	(void)state;
	pthread_t t[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, reset_worker,
		    (void *)(uintptr_t)i), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* Everything the workers allocated is freed: no stack of theirs,
	 * and no line for the exited workers. */
	mp_heap_t h;
	dump_parse("workers-done", &h);
	mp_heap_check_sums(&h, true);
	assert_null(mp_heap_find_site(&h, (void *)reset_site_worker, 1));
	/* After one more reset, only what this thread allocates from now
	 * on is counted. */
	mp_heap_free(&h);
	assert_int_equal(reset(NULL), 0);
	void *objs[NOBJ];
	reset_site_new(objs, NOBJ);
	dump_parse("final", &h);
	mp_heap_check_sums(&h, true);
	const mp_heap_stack_t *s = mp_heap_find_site(&h,
	    (void *)reset_site_new, 1);
	assert_non_null(s);
	assert_int_equal(s->total.co, NOBJ);
	assert_int_equal(s->nthr, 1);
	print_message("# after the workers: %zu stacks, %zu thread lines\n",
	    h.nstacks, h.nthreads);
	mp_heap_free(&h);
	for (int i = 0; i < NOBJ; i++) {
		free(objs[i]);
	}
}

static void test_no_profiler(void **state) {
	(void)state;
	assert_int_equal(reset(NULL), ENOENT);
	size_t lg = 3;
	assert_int_equal(reset(&lg), ENOENT);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reset_forgets),
		cmocka_unit_test(test_realloc_across_reset),
		cmocka_unit_test(test_reset_rate),
		cmocka_unit_test(test_rate_back_down),
		cmocka_unit_test(test_concurrent_resets),
	};
	return mp_prof_test_main("mp_prof_reset", test_no_profiler, tests);
}
