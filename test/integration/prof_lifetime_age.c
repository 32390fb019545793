/*
 * test/integration/prof_lifetime_age.c - the lifetime profile splits the
 * objects still live by their age at the dump: label lifetime=live plus
 * age=<1ms, 1-10ms, 10-100ms, 100ms-1s or >1s (the freed buckets' names).
 *
 * prof_lifetime_age.conf: prof:true,lg_prof_sample:0 (every allocation
 * is a sample: counts are exact), prof_time_resolution:high (the samples'
 * clock is CLOCK_MONOTONIC, which the test reads too).  Small objects
 * (the sample table) and large ones (prof_lifetime.c's own list) at three
 * sites: old_* held across a 1.1 s sleep, mid_* across 150 ms, new_*
 * allocated just before the dump.  Nothing depends on the machine's
 * speed: the test reads the clock before and after each site's
 * allocations and around the dump, which bounds each object's age from
 * above and below; each site's live objects must all be in buckets that
 * overlap those bounds (old ones: >1s whatever the load, since they
 * lived through the sleeps; mid ones at least 100ms-1s).  Freed large
 * objects leave the live buckets; a prof.reset empties them; threads
 * churning large samples while dumps are taken end up all counted freed.
 */
#include "../test_util.h"

#include <pthread.h>

#define N_SMALL 30
#define N_LARGE 6
#define LARGE_SIZE (64 * 1024)

void *old_small(void);
void *old_large(void);
void *mid_small(void);
void *mid_large(void);
void *new_small(void);
void *new_large(void);

#define USE(p) __asm__ volatile("" : : "r"(p) : "memory")

MP_SITE void *old_small(void) {
	void *p = malloc(200);
	USE(p);
	return p;
}

MP_SITE void *old_large(void) {
	void *p = malloc(LARGE_SIZE);
	USE(p);
	return p;
}

MP_SITE void *mid_small(void) {
	void *p = malloc(200);
	USE(p);
	return p;
}

MP_SITE void *mid_large(void) {
	void *p = malloc(LARGE_SIZE);
	USE(p);
	return p;
}

MP_SITE void *new_small(void) {
	void *p = malloc(200);
	USE(p);
	return p;
}

MP_SITE void *new_large(void) {
	void *p = malloc(LARGE_SIZE);
	USE(p);
	return p;
}

static char tmpdir[256];

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
	struct timespec ts = {(time_t)(ns / 1000000000u),
	    (long)(ns % 1000000000u)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static const char *const ages[] = {"<1ms", "1-10ms", "10-100ms",
    "100ms-1s", ">1s"};
#define NA 5
/* Each age bucket's bounds in ns: [lo, hi). */
static const uint64_t age_lo[NA] = {0, 1000000, 10000000, 100000000,
    1000000000};
static const uint64_t age_hi[NA] = {1000000, 10000000, 100000000,
    1000000000, UINT64_MAX};

static bool leaf_in(const mp_pprof_t *pp, const mp_pp_sample_t *s,
    uintptr_t lo, uintptr_t hi) {
	if (s->nlocs == 0)
		return false;
	const mp_pp_loc_t *l = mp_pprof_loc(pp, s->locs[0]);
	return l != NULL && l->address >= lo && l->address < hi;
}

static const char *label_of(const mp_pp_sample_t *s, const char *key) {
	for (size_t j = 0; j < s->nlabels && j < MP_PP_LABELS; j++) {
		if (strcmp(s->lkey[j], key) == 0)
			return s->lstr[j];
	}
	return NULL;
}

/* Live objects per age bucket of the samples whose leaf is in fn (and
 * the objects in freed buckets, *freed). */
static void site_ages(const mp_pprof_t *pp, const void *fn,
    int64_t out[NA], int64_t *freed) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	int objs = mp_pprof_type(pp, "alloc_objects");
	assert_true(objs >= 0);
	memset(out, 0, NA * sizeof(out[0]));
	*freed = 0;
	for (size_t i = 0; i < pp->nsamples; i++) {
		const mp_pp_sample_t *s = &pp->samples[i];
		if (!leaf_in(pp, s, lo, hi))
			continue;
		const char *life = label_of(s, "lifetime");
		const char *age = label_of(s, "age");
		MP_ASSERT(life != NULL, "a sample without the lifetime label");
		if (strcmp(life, "live") != 0) {
			MP_ASSERT(age == NULL, "a freed bucket (%s) with an "
			    "age (%s)", life, age);
			*freed += s->vals[objs];
			continue;
		}
		MP_ASSERT(age != NULL, "a live sample without the age label");
		int k;
		for (k = 0; k < NA && strcmp(ages[k], age) != 0; k++)
			;
		MP_ASSERT(k < NA, "unknown age \"%s\"", age);
		out[k] += s->vals[objs];
	}
}

/* All n live objects of fn in age buckets that meet [lo, hi] (one, or a
 * few neighbours if the machine stalled while they were allocated). */
static void expect_age(const mp_pprof_t *pp, const void *fn,
    const char *name, int64_t n, uint64_t lo, uint64_t hi) {
	int64_t a[NA], freed, all = 0;
	site_ages(pp, fn, a, &freed);
	for (int k = 0; k < NA; k++) {
		if (a[k] == 0)
			continue;
		all += a[k];
		MP_ASSERT(age_lo[k] <= hi && lo < age_hi[k], "%s: %lld in %s, "
		    "but its ages were between %.3f and %.3f ms", name,
		    (long long)a[k], ages[k], lo / 1e6, hi / 1e6);
	}
	MP_ASSERT(all == n, "%s: %lld live, expected %lld", name,
	    (long long)all, (long long)n);
	MP_ASSERT(freed == 0, "%s: %lld freed", name, (long long)freed);
}

static void dump(const char *file, mp_pprof_t *pp) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, file);
	const char *name = path;
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL,
	    (void *)&name, sizeof(name)), 0);
	MP_PPROF_LOAD(path, pp);
}

static void *olds[N_SMALL], *oldl[N_LARGE], *mids[N_SMALL],
    *midl[N_LARGE], *news[N_SMALL], *newl[N_LARGE];

static void test_ages(void **state) {
	(void)state;
	uint64_t t_old = now_ns();
	for (int i = 0; i < N_SMALL; i++)
		olds[i] = old_small();
	for (int i = 0; i < N_LARGE; i++)
		oldl[i] = old_large();
	uint64_t t_old_end = now_ns();
	sleep_ns(1100000000u - 150000000u);
	uint64_t t_mid = now_ns();
	for (int i = 0; i < N_SMALL; i++)
		mids[i] = mid_small();
	for (int i = 0; i < N_LARGE; i++)
		midl[i] = mid_large();
	uint64_t t_mid_end = now_ns();
	sleep_ns(150000000u);
	uint64_t t_new = now_ns();
	for (int i = 0; i < N_SMALL; i++)
		news[i] = new_small();
	for (int i = 0; i < N_LARGE; i++)
		newl[i] = new_large();
	uint64_t t_new_end = now_ns();
	mp_pprof_t pp;
	dump("ages.pb.gz", &pp);
	uint64_t t_dump = now_ns();
	/* An object allocated in [a, a_end] and aged at the dump, which
	 * starts after t_new_end and ends before t_dump: its age is in
	 * [t_new_end - a_end, t_dump - a]. */
	expect_age(&pp, (const void *)old_small, "old_small", N_SMALL,
	    t_new_end - t_old_end, t_dump - t_old);
	expect_age(&pp, (const void *)old_large, "old_large", N_LARGE,
	    t_new_end - t_old_end, t_dump - t_old);
	expect_age(&pp, (const void *)mid_small, "mid_small", N_SMALL,
	    t_new_end - t_mid_end, t_dump - t_mid);
	expect_age(&pp, (const void *)mid_large, "mid_large", N_LARGE,
	    t_new_end - t_mid_end, t_dump - t_mid);
	expect_age(&pp, (const void *)new_small, "new_small", N_SMALL, 0,
	    t_dump - t_new);
	expect_age(&pp, (const void *)new_large, "new_large", N_LARGE, 0,
	    t_dump - t_new);
	mp_pprof_free(&pp);

	/* Freed, the large ones leave the live buckets (and the list the
	 * collection walks): old_large's objects are all in >1s now. */
	for (int i = 0; i < N_LARGE; i++)
		free(oldl[i]);
	dump("freed.pb.gz", &pp);
	int64_t a[NA], freed;
	site_ages(&pp, (const void *)old_large, a, &freed);
	for (int b = 0; b < NA; b++)
		MP_ASSERT(a[b] == 0, "old_large: %lld still live in %s",
		    (long long)a[b], ages[b]);
	MP_ASSERT(freed == N_LARGE, "old_large: %lld freed, expected %d",
	    (long long)freed, N_LARGE);
	site_ages(&pp, (const void *)old_small, a, &freed);
	MP_ASSERT(a[4] == N_SMALL, "old_small: %lld live in >1s",
	    (long long)a[4]);
	mp_pprof_free(&pp);
	for (int i = 0; i < N_SMALL; i++) {
		free(olds[i]);
		free(mids[i]);
		free(news[i]);
	}
	for (int i = 0; i < N_LARGE; i++) {
		free(midl[i]);
		free(newl[i]);
	}
}

/* After prof.reset the objects sampled before it are in no bucket, live
 * or freed, small or large. */
static void test_reset(void **state) {
	(void)state;
	for (int i = 0; i < N_SMALL; i++)
		olds[i] = old_small();
	for (int i = 0; i < N_LARGE; i++)
		oldl[i] = old_large();
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	mp_pprof_t pp;
	dump("reset.pb.gz", &pp);
	int64_t a[NA], freed;
	site_ages(&pp, (const void *)old_small, a, &freed);
	for (int b = 0; b < NA; b++)
		MP_ASSERT(a[b] == 0, "old_small: %lld live in %s after the "
		    "reset", (long long)a[b], ages[b]);
	site_ages(&pp, (const void *)old_large, a, &freed);
	for (int b = 0; b < NA; b++)
		MP_ASSERT(a[b] == 0, "old_large: %lld live in %s after the "
		    "reset", (long long)a[b], ages[b]);
	mp_pprof_free(&pp);
	for (int i = 0; i < N_SMALL; i++)
		free(olds[i]);
	for (int i = 0; i < N_LARGE; i++)
		free(oldl[i]);
}

/* Threads take and free large samples (the list the collection walks)
 * while the main thread dumps: every dump completes, and afterwards the
 * site's objects are all counted freed, none live. */
#define CHURN_THREADS 2
#define CHURN_N 500

void *churn_large(void);

MP_SITE void *churn_large(void) {
	void *p = malloc(LARGE_SIZE);
	USE(p);
	return p;
}

static void *churn(void *arg) {
	(void)arg;
	for (int i = 0; i < CHURN_N; i++)
		free(churn_large());
	return NULL;
}

static void test_threads(void **state) {
	(void)state;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	pthread_t t[CHURN_THREADS];
	for (int i = 0; i < CHURN_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
	mp_pprof_t pp;
	for (int i = 0; i < 5; i++) {
		dump("during.pb.gz", &pp);
		mp_pprof_free(&pp);
	}
	for (int i = 0; i < CHURN_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	dump("threads.pb.gz", &pp);
	int64_t a[NA], freed;
	site_ages(&pp, (const void *)churn_large, a, &freed);
	for (int b = 0; b < NA; b++)
		MP_ASSERT(a[b] == 0, "churn_large: %lld live in %s",
		    (long long)a[b], ages[b]);
	MP_ASSERT(freed == CHURN_THREADS * CHURN_N, "churn_large: %lld freed, "
	    "expected %d", (long long)freed, CHURN_THREADS * CHURN_N);
	mp_pprof_free(&pp);
}

static void test_no_profiler(void **state) {
	(void)state;
	assert_int_equal(mallctl("prof.lifetimes.dump", NULL, NULL, NULL, 0),
	    ENOENT);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ages),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_threads),
	};
	return mp_prof_test_main("mp_prof_lifetime_age", test_no_profiler,
	    tests);
}
