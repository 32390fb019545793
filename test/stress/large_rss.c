/*
 * test/stress/large_rss.c - the peak RSS of a churn of big zeroed blocks
 * follows the program's peak, not the fragmentation of the free runs.
 *
 *   test_large_rss_peak: calloc blocks of 4-20 MiB, at most 10 live, one
 *     at random freed before each new one (bench's largezero, smaller),
 *     touching one byte per page and checking the next one reads zero.
 *     A freed block's pages stay dirty for reuse, but a request bigger than
 *     every dirty run would otherwise fault in fresh pages beside them, and
 *     with decay alone the peak RSS grew to ~1.4x the live peak.  The
 *     arena purges dirty pages before faulting in fresh ones past its peak
 *     in use plus 1/16 (at least 8 MiB), and keeps the size classes' tails
 *     past the requests out of the resident set: the RSS measured after
 *     every step must stay within that bound of the live peak, plus 8 MiB
 *     for metadata and page-table rounding.  Decay can only lower the RSS,
 *     so a slow machine cannot fail it.
 */
#include "../test_util.h"

#define NSLOTS 10
#define NSTEPS 300
#define MIN_SIZE (4 * MP_MiB)
#define SPAN (16 * MP_MiB)
#define MARGIN (8 * MP_MiB)
#define TEST_TIMEOUT 300

/* With THP always on, a fault may bring in 2 MiB at a time. */
static bool thp_always(void) {
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f == NULL)
		return false;
	char buf[128] = "";
	bool always = fgets(buf, sizeof(buf), f) != NULL &&
	    strstr(buf, "[always]") != NULL;
	fclose(f);
	return always;
}

static void test_large_rss_peak(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("%s build: the sanitizer's shadow memory adds to RSS",
		    mp_env_sanitizer());
	if (thp_always())
		MP_SKIP("transparent huge pages are always on: RSS grows by "
		    "2 MiB pages");
	size_t page = mp_page_size();
	unsigned char *slot[NSLOTS] = {0};
	size_t size[NSLOTS] = {0};
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	size_t live = 0, live_peak = 0;
	size_t rss0 = read_rss_bytes(), rss_peak = rss0;
	assert_true(rss0 > 0);
	for (unsigned i = 0; i < NSTEPS; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned k = i < NSLOTS ? i : (unsigned)((x >> 33) % NSLOTS);
		if (slot[k] != NULL) {
			free(slot[k]);
			live -= (size[k] + page - 1) / page * page;
		}
		size_t sz = MIN_SIZE + (size_t)((x >> 13) % SPAN);
		unsigned char *p = LAUNDER((unsigned char *)calloc(1, sz));
		assert_non_null(p);
		for (size_t off = 0; off + 1 < sz; off += page) {
			((volatile unsigned char *)p)[off] = 1;
			MP_ASSERT(((volatile unsigned char *)p)[off + 1] == 0,
			    "calloc(%zu) byte %zu is not zero", sz, off + 1);
		}
		slot[k] = p;
		size[k] = sz;
		live += (sz + page - 1) / page * page;
		if (live > live_peak)
			live_peak = live;
		size_t rss = read_rss_bytes();
		if (rss > rss_peak)
			rss_peak = rss;
	}
	for (unsigned k = 0; k < NSLOTS; k++)
		free(slot[k]);
	size_t slack = live_peak / 16 > 8 * MP_MiB ? live_peak / 16
	    : 8 * MP_MiB;
	printf("# large_rss: live peak %zu MiB, RSS peak %zu MiB above the "
	    "start (limit %zu)\n", live_peak / MP_MiB,
	    (rss_peak - rss0) / MP_MiB,
	    (live_peak + slack + MARGIN) / MP_MiB);
	MP_ASSERT(rss_peak - rss0 <= live_peak + slack + MARGIN,
	    "RSS peaked at %zu bytes above the start with at most %zu live "
	    "(limit %zu)", rss_peak - rss0, live_peak,
	    live_peak + slack + MARGIN);
}

int main(void) {
	mp_test_init(TEST_TIMEOUT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_large_rss_peak),
	};
	return mp_run_tests(tests);
}
