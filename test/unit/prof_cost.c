/*
 * test/unit/prof_cost.c - what the profiler's cheaper paths must keep
 * exact: the per-class unbiasing table the sampler reads instead of
 * calling prof_unbias (prof.c), and the recent-allocation records whose
 * stacks are shared between records (prof_recent.c): their memory stays
 * at 128 bytes a record plus one copy of each distinct stack, every
 * record still prints its own stacks, and dropping the records gives
 * every stack back.
 *
 * prof_cost.conf: prof:true,lg_prof_sample:0 (every allocation is a
 * sample).  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#define NSITE 500

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static int teardown(void **state) {
	(void)state;
	prof_recent_max_set(0);
	prof_reset(opt_lg_prof_sample);
	return 0;
}

/* The table's answer is prof_unbias's for every class it holds, for
 * sizes that are no class and past it, at several rates, after each
 * prof_reset that refills it. */
static void test_unbias_table(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	static const size_t lgs[] = {0, 12, 19, 30, 63};
	for (size_t l = 0; l < MP_ARRAY_SIZE(lgs); l++) {
		prof_reset(lgs[l]);
		unsigned checked = 0;
		for (unsigned i = 0; i < SC_NSIZES; i++) {
			size_t size = sz_index2size(i);
			if (size > ((size_t)1 << 30))
				break;
			size_t probes[] = {size, size + 1, size - 1};
			for (size_t k = 0; k < MP_ARRAY_SIZE(probes); k++) {
				uint64_t os, b, os_c, b_c;
				prof_unbias(probes[k], &os, &b);
				prof_unbias_cached(probes[k], &os_c, &b_c);
				MP_ASSERT(os == os_c && b == b_c, "lg %zu, "
				    "size %zu: table %" PRIu64 "/%" PRIu64
				    ", prof_unbias %" PRIu64 "/%" PRIu64,
				    lgs[l], probes[k], os_c, b_c, os, b);
				checked++;
			}
		}
		assert_true(checked > 3 * SC_NBINS);
	}
}

MP_SITE void *cost_site_a(size_t size);
MP_SITE void *cost_site_b(size_t size);
MP_SITE void cost_free_site(void *p);

MP_SITE void *cost_site_a(size_t size) {
	return LAUNDER(malloc(size));
}

MP_SITE void *cost_site_b(size_t size) {
	return LAUNDER(malloc(size));
}

MP_SITE void cost_free_site(void *p) {
	free(p);
	__asm__ __volatile__("" ::: "memory");  /* no tail call: on the stack */
}

typedef struct {
	char *buf;
	size_t len, cap;
} json_t;

static void json_write(void *opaque, const char *s) {
	json_t *j = opaque;
	size_t n = strlen(s);
	if (j->len + n + 1 > j->cap) {
		size_t cap = (j->len + n + 1) * 2;
		char *b = realloc(j->buf, cap);
		assert_non_null(b);
		j->buf = b;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n + 1);
	j->len += n;
}

/* The end of site function f's code, as far as the test needs it: the
 * next of the three sites above it, or 256 bytes. */
static uintptr_t site_end(uintptr_t f) {
	uintptr_t sites[] = {(uintptr_t)cost_site_a, (uintptr_t)cost_site_b,
	    (uintptr_t)cost_free_site};
	uintptr_t end = f + 256;
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		if (sites[i] > f && sites[i] < end)
			end = sites[i];
	}
	return end;
}

/* Whether the JSON array of addresses at key (the text after "key":[)
 * holds a return address into site function lo. */
static bool trace_has(const char *rec, const char *rec_end, const char *key,
    uintptr_t lo) {
	uintptr_t hi = site_end(lo);
	const char *t = strstr(rec, key);
	if (t == NULL || t > rec_end)
		return false;
	const char *end = strchr(t, ']');
	for (const char *q = strchr(t, '['); q != NULL && q < end;
	    q = strchr(q + 1, '"')) {
		if (q[1] == '0' && q[2] == 'x') {
			uintptr_t a = (uintptr_t)strtoull(q + 1, NULL, 16);
			if (a > lo && a < hi)
				return true;
		}
	}
	return false;
}

/* Records of two sites, half of them freed at a third: a record is 128
 * bytes and the stacks are kept once each; the dump prints each
 * record's own stacks; dropping the records frees every stack, the
 * dump's references included. */
static void test_recent_shared_stacks(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	prof_reset(0);
	/* Every thread redraws its wait at a later event after a reset:
	 * from here on every allocation is sampled. */
	for (int i = 0; i < 256; i++)
		free(LAUNDER(malloc(4096)));
	prof_recent_max_set(0);
	size_t nst = 99;
	assert_int_equal(prof_recent_bytes(&nst), 0);
	assert_int_equal(nst, 0);
	prof_recent_max_set(2 * NSITE);
	static void *a[NSITE], *b[NSITE];
	for (int i = 0; i < NSITE; i++) {
		a[i] = cost_site_a(64 + (size_t)i % 7 * 100);
		b[i] = cost_site_b(40000);
		assert_non_null(a[i]);
		assert_non_null(b[i]);
	}
	size_t bytes = prof_recent_bytes(&nst);
	/* One stack a site (each walked the same way), and nothing else
	 * was allocated in the loop. */
	MP_ASSERT(nst == 2, "%zu distinct stacks for two sites", nst);
	MP_ASSERT(bytes <= 2 * NSITE * 128 + nst * 2048, "%zu bytes for "
	    "%d records and %zu stacks", bytes, 2 * NSITE, nst);
	for (int i = 0; i < NSITE; i++)
		cost_free_site(a[i]);
	bytes = prof_recent_bytes(&nst);
	MP_ASSERT(nst == 3, "%zu distinct stacks after the frees (two "
	    "sites, one free site)", nst);
	MP_ASSERT(bytes <= 2 * NSITE * 128 + nst * 2048, "%zu bytes for "
	    "%d records and %zu stacks", bytes, 2 * NSITE, nst);

	json_t j = {NULL, 0, 0};
	assert_false(prof_recent_dump(json_write, &j, 1));
	assert_non_null(j.buf);
	int in_a = 0, in_b = 0, freed_at_site = 0, records = 0;
	for (const char *r = strstr(j.buf, "{\"size\""); r != NULL;) {
		const char *next = strstr(r + 1, "{\"size\"");
		const char *end = next != NULL ? next : j.buf + j.len;
		records++;
		bool sa = trace_has(r, end, "\"alloc_trace\"",
		    (uintptr_t)cost_site_a);
		bool sb = trace_has(r, end, "\"alloc_trace\"",
		    (uintptr_t)cost_site_b);
		MP_ASSERT(sa != sb, "record %d names %s site", records,
		    sa ? "both" : "no");
		in_a += sa;
		in_b += sb;
		bool fr = trace_has(r, end, "\"dalloc_trace\"",
		    (uintptr_t)cost_free_site);
		MP_ASSERT(fr == sa, "record %d: %s, %s at the free site",
		    records, sa ? "site a" : "site b", fr ? "freed" :
		    "not freed");
		freed_at_site += fr;
		r = next;
	}
	/* Records are only taken after the limit was set: the last 1,000
	 * are the loop's if nothing was sampled after it but the frees. */
	assert_int_equal(records, 2 * NSITE);
	assert_int_equal(in_a, NSITE);
	assert_int_equal(in_b, NSITE);
	assert_int_equal(freed_at_site, NSITE);
	free(j.buf);

	/* A smaller limit trims the oldest records and their stacks (the
	 * last ten are the dump's own reallocs, from several places). */
	prof_recent_max_set(10);
	bytes = prof_recent_bytes(&nst);
	MP_ASSERT(bytes <= 10 * 128 + nst * 2048 && nst <= 20, "%zu bytes, "
	    "%zu stacks for 10 records", bytes, nst);
	prof_recent_max_set(0);
	bytes = prof_recent_bytes(&nst);
	MP_ASSERT(bytes == 0 && nst == 0, "%zu bytes, %zu stacks left with "
	    "no records", bytes, nst);
	for (int i = 0; i < NSITE; i++)
		free(b[i]);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_unbias_table, teardown),
		cmocka_unit_test_teardown(test_recent_shared_stacks,
		    teardown),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
