/*
 * test/unit/hpa.c - hpa.c's placement rule and option parser, apart from
 * any mapping: pageslab records built by hand (their active bitmaps set)
 * go into a shard, and hpa_psset_pick must return the one whose longest
 * free run is the smallest that fits the request, the fullest on a tie,
 * never a full one nor one whose runs are all too short; and
 * hpa_fxp_parse must read jemalloc's fixed-point values ("0.25": 1/4 in
 * 16.16) and refuse the rest.
 */
#include "../test_util.h"
#include "malloc_prof/internal/internal.h"

static hpa_shard_t shard;
static hpa_ps_t ps[6];

/* ps with pages [from, from + n) active and the page count set. */
static void set_active(hpa_ps_t *p, size_t from, size_t n) {
	for (size_t i = from; i < from + n; i++)
		p->active[i / 64] |= (uint64_t)1 << (i % 64);
	p->nactive += (uint32_t)n;
}

static void test_pick(void **state) {
	(void)state;
	if (HPA_NPAGES != 512)
		MP_SKIP("%zu pages per pageslab", (size_t)HPA_NPAGES);
	memset(&shard, 0, sizeof(shard));
	memset(ps, 0, sizeof(ps));
	/* 0: empty.  1: 400 pages in use, then a 112-page run.  2: 100 in
	 * use at the start and 100 at the end: runs of 312.  3: full.  4:
	 * every other page in use: runs of 1.  5: 300 in use at its start,
	 * then 100 more after a 100-page gap: runs of 100 and 12. */
	set_active(&ps[1], 0, 400);
	set_active(&ps[2], 0, 100);
	set_active(&ps[2], 412, 100);
	set_active(&ps[3], 0, 512);
	for (size_t i = 0; i < 512; i += 2)
		set_active(&ps[4], i, 1);
	set_active(&ps[5], 0, 300);
	set_active(&ps[5], 400, 100);
	for (size_t i = 0; i < MP_ARRAY_SIZE(ps); i++)
		hpa_psset_insert(&shard, &ps[i]);
	assert_int_equal(ps[0].lfr, 512);
	assert_int_equal(ps[1].lfr, 112);
	assert_int_equal(ps[2].lfr, 312);
	assert_int_equal(ps[3].lfr, 0);
	assert_int_equal(ps[4].lfr, 1);
	assert_int_equal(ps[5].lfr, 100);
	/* One page: the fragmented one (its runs fit exactly). */
	assert_ptr_equal(hpa_psset_pick(&shard, 1), &ps[4]);
	/* 2..100 pages: ps[5] (longest run 100) before ps[1] (112). */
	assert_ptr_equal(hpa_psset_pick(&shard, 16), &ps[5]);
	assert_ptr_equal(hpa_psset_pick(&shard, 100), &ps[5]);
	assert_ptr_equal(hpa_psset_pick(&shard, 101), &ps[1]);
	assert_ptr_equal(hpa_psset_pick(&shard, 113), &ps[2]);
	assert_ptr_equal(hpa_psset_pick(&shard, 313), &ps[0]);
	assert_ptr_equal(hpa_psset_pick(&shard, 512), &ps[0]);
	assert_null(hpa_psset_pick(&shard, 513));
	assert_null(hpa_psset_pick(&shard, 0));
	/* Without the empty one, nothing holds 313 pages. */
	hpa_psset_remove(&shard, &ps[0]);
	assert_null(hpa_psset_pick(&shard, 313));
	/* A tie on the longest run goes to the fullest: ps[1] and a copy of
	 * its runs with fewer pages in use (its start free but short). */
	static hpa_ps_t tie;
	memset(&tie, 0, sizeof(tie));
	set_active(&tie, 50, 350);        /* runs of 50 and 112 */
	hpa_psset_insert(&shard, &tie);
	assert_int_equal(tie.lfr, 112);
	assert_ptr_equal(hpa_psset_pick(&shard, 101), &ps[1]);
	/* ... whichever of the two was inserted last. */
	hpa_psset_remove(&shard, &ps[1]);
	hpa_psset_insert(&shard, &ps[1]);
	assert_ptr_equal(hpa_psset_pick(&shard, 101), &ps[1]);
	/* Full and removed pageslabs are never picked. */
	hpa_psset_remove(&shard, &ps[1]);
	hpa_psset_remove(&shard, &tie);
	hpa_psset_remove(&shard, &ps[2]);
	hpa_psset_remove(&shard, &ps[5]);
	assert_null(hpa_psset_pick(&shard, 2));
	assert_ptr_equal(hpa_psset_pick(&shard, 1), &ps[4]);
	hpa_psset_remove(&shard, &ps[4]);
	assert_null(hpa_psset_pick(&shard, 1));
	hpa_psset_remove(&shard, &ps[3]);
	for (size_t w = 0; w < MP_ARRAY_SIZE(shard.nonempty); w++)
		assert_int_equal(shard.nonempty[w], 0);
}

static void test_fxp(void **state) {
	(void)state;
	static const struct {
		const char *s;
		uint32_t v;
	} good[] = {
		{ "0", 0 }, { "1", 65536 }, { "0.25", 16384 }, { "0.5", 32768 },
		{ "2.5", 163840 }, { "0.95", 62259 }, { "1.0", 65536 },
		{ "65535", 65535u << 16 }, { "0.000001", 0 },
		{ "0.99999999999999999999", 65535 },
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(good); i++) {
		uint32_t v = 1;
		MP_ASSERT(!hpa_fxp_parse(good[i].s, strlen(good[i].s), &v),
		    "\"%s\" refused", good[i].s);
		MP_ASSERT(v == good[i].v, "\"%s\": %u, want %u", good[i].s, v,
		    good[i].v);
	}
	static const char *const bad[] = {
		"", ".", ".5", "1.", "abc", "-1", "-0.5", "1e3", " 1", "1 ",
		"0x1", "65536", "1.2.3",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad); i++) {
		uint32_t v = 7;
		MP_ASSERT(hpa_fxp_parse(bad[i], strlen(bad[i]), &v),
		    "\"%s\" accepted", bad[i]);
		assert_int_equal(v, 7);
	}
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_fxp),
	};
	return mp_run_tests(tests);
}
