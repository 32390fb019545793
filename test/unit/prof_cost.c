/*
 * test/unit/prof_cost.c - what the profiler's cheaper paths must keep
 * exact: the per-class unbiasing table the sampler reads instead of
 * calling prof_unbias (prof.c), and the recent-allocation records whose
 * sides (thread and stack) are shared between records (prof_recent.c):
 * their memory stays at 64 bytes a record plus one copy of each side,
 * every record still prints its own stacks, and dropping the records
 * gives every side back; and the memo of a thread's last walks (prof_sys.c),
 * which must give what a fresh walk gives, also when another caller
 * puts its frame at the same place on the stack.
 *
 * prof_cost.conf: prof:true,lg_prof_sample:0 (every allocation is a
 * sample).  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include "prof_recent_json.h"

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

/* Records of two sites, half of them freed at a third: a record is 64
 * bytes and the sides are kept once each; the dump prints each
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
	MP_ASSERT(bytes <= 2 * NSITE * 64 + nst * 2048, "%zu bytes for "
	    "%d records and %zu stacks", bytes, 2 * NSITE, nst);
	for (int i = 0; i < NSITE; i++)
		cost_free_site(a[i]);
	bytes = prof_recent_bytes(&nst);
	MP_ASSERT(nst == 3, "%zu distinct stacks after the frees (two "
	    "sites, one free site)", nst);
	MP_ASSERT(bytes <= 2 * NSITE * 64 + nst * 2048, "%zu bytes for "
	    "%d records and %zu stacks", bytes, 2 * NSITE, nst);

	json_t j = {NULL, 0, 0};
	assert_false(prof_recent_dump(json_write, &j, 1,
	    prof_time_wall_offset()));
	assert_non_null(j.buf);
	int in_a = 0, in_b = 0, freed_at_site = 0, records = 0;
	for (const char *r = strstr(j.buf, "{\"size\""); r != NULL;) {
		const char *next = strstr(r + 1, "{\"size\"");
		const char *end = next != NULL ? next : j.buf + j.len;
		records++;
		bool sa = trace_has(r, end, "\"alloc_trace\"",
		    (uintptr_t)cost_site_a, site_end((uintptr_t)cost_site_a));
		bool sb = trace_has(r, end, "\"alloc_trace\"",
		    (uintptr_t)cost_site_b, site_end((uintptr_t)cost_site_b));
		MP_ASSERT(sa != sb, "record %d names %s site", records,
		    sa ? "both" : "no");
		in_a += sa;
		in_b += sb;
		bool fr = trace_has(r, end, "\"dalloc_trace\"",
		    (uintptr_t)cost_free_site,
		    site_end((uintptr_t)cost_free_site));
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
	MP_ASSERT(bytes <= 10 * 64 + nst * 2048 && nst <= 20, "%zu bytes, "
	    "%zu stacks for 10 records", bytes, nst);
	prof_recent_max_set(0);
	bytes = prof_recent_bytes(&nst);
	MP_ASSERT(bytes == 0 && nst == 0, "%zu bytes, %zu stacks left with "
	    "no records", bytes, nst);
	for (int i = 0; i < NSITE; i++)
		free(b[i]);
}

/* The end of function f as far as the test needs it: the nearest of
 * the memo test's functions above it, or 256 bytes. */
static uintptr_t site_end_of(uintptr_t f);

/* Three frames of the same shape: memo_leaf's frame lies at the same
 * address whether memo_via_b or memo_via_d called it, and only the
 * return address saved in it tells them apart. */
MP_SITE unsigned memo_leaf(void **vec, unsigned max);
MP_SITE unsigned memo_via_b(void **vec, unsigned max);
MP_SITE unsigned memo_via_d(void **vec, unsigned max);

MP_SITE unsigned memo_leaf(void **vec, unsigned max) {
	unsigned n = prof_backtrace(vec, max,
	    (uintptr_t)__builtin_frame_address(0));
	__asm__ __volatile__("" ::: "memory");
	return n;
}

MP_SITE unsigned memo_via_b(void **vec, unsigned max) {
	unsigned n = memo_leaf(vec, max);
	__asm__ __volatile__("" ::: "memory");
	return n;
}

MP_SITE unsigned memo_via_d(void **vec, unsigned max) {
	unsigned n = memo_leaf(vec, max);
	__asm__ __volatile__("" ::: "memory");
	return n;
}

/* A walk through via, with the thread's memo or without it (fresh):
 * the same frames above via either way. */
static MP_NOINLINE unsigned walk(prof_tdata_t *td, unsigned (*via)(void **,
    unsigned), void **vec, unsigned max, bool fresh) {
	prof_bt_memo_t *m = td->bt_memo;
	if (fresh)
		td->bt_memo = NULL;
	unsigned n = via(vec, max);
	td->bt_memo = m;
	return n;
}

static bool frames_equal(void *const *a, unsigned na, void *const *b,
    unsigned nb) {
	return na == nb && memcmp(a, b, na * sizeof(void *)) == 0;
}

static void test_walk_memo(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	tsd_t *tsd = tsd_fetch();
	if (tsd->stack_hi == 0)
		prof_sys_thread_init(tsd);
	prof_tdata_t *td = prof_tdata_get(tsd);
	assert_non_null(td);
	if (td->bt_memo == NULL)
		td->bt_memo = prof_bt_memo_new();
	assert_non_null(td->bt_memo);
	/* Every walk from one call site, so that only via's frame and
	 * the memo can make them differ: fresh walks via b and via d,
	 * then each twice with the memo (the second is the memo's
	 * answer), four rounds, then via b with a smaller max. */
	enum { NPLAN = 2 + 4 * 4 + 1 };
	static void *out[NPLAN][64];
	unsigned n[NPLAN];
	uint64_t hits = prof_bt_memo_hits(td->bt_memo);
	for (int i = 0; i < NPLAN; i++) {
		bool d = i == 1 || (i >= 2 && i < NPLAN - 1 && (i - 2) % 4 >= 2);
		n[i] = walk(td, d ? memo_via_d : memo_via_b, out[i],
		    i == NPLAN - 1 ? 1 : 64, i < 2);
	}
	assert_true(n[0] >= 2 && n[1] >= 2);
	/* The memo answered at least the second walk of each pair. */
	hits = prof_bt_memo_hits(td->bt_memo) - hits;
	MP_ASSERT(hits >= 8, "the memo answered %" PRIu64 " walks of 16",
	    hits);
	MP_ASSERT((uintptr_t)out[0][0] > (uintptr_t)memo_via_b &&
	    (uintptr_t)out[0][0] < site_end_of((uintptr_t)memo_via_b),
	    "the walk from memo_leaf starts at %p, not in memo_via_b (%p)",
	    out[0][0], (void *)memo_via_b);
	MP_ASSERT(!frames_equal(out[0], n[0], out[1], n[1]), "the two "
	    "callers' walks are the same");
	for (int i = 2; i < NPLAN - 1; i++) {
		int ref = (i - 2) % 4 >= 2;
		MP_ASSERT(frames_equal(out[i], n[i], out[ref], n[ref]),
		    "walk %d via %s (%u frames) differs from a fresh one "
		    "(%u)", i, ref ? "d" : "b", n[i], n[ref]);
	}
	/* A smaller max is another walk. */
	assert_int_equal(n[NPLAN - 1], 1);
	assert_ptr_equal(out[NPLAN - 1][0], out[0][0]);
}

static uintptr_t site_end_of(uintptr_t f) {
	uintptr_t fns[] = {(uintptr_t)memo_leaf, (uintptr_t)memo_via_b,
	    (uintptr_t)memo_via_d};
	uintptr_t end = f + 256;
	for (size_t i = 0; i < MP_ARRAY_SIZE(fns); i++) {
		if (fns[i] > f && fns[i] < end)
			end = fns[i];
	}
	return end;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_unbias_table, teardown),
		cmocka_unit_test_teardown(test_recent_shared_stacks,
		    teardown),
		cmocka_unit_test(test_walk_memo),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
