/*
 * test/stress/large_malloc_rss.c - the peak RSS of a ring of big blocks
 * got from malloc (not calloc) follows the program's peak, and the pages
 * moved into a block to spare it page faults never take a live block's
 * data with them.
 *
 *   test_large_malloc_rss_peak: blocks of 1-32 MiB, 8 live, the oldest
 *     freed before each new one (bench's large, shorter), one byte per
 *     page written with a pattern of the block and checked before the
 *     free.  A request bigger than every free dirty run used to take
 *     fresh pages while those runs stayed resident until they decayed
 *     (bench's large: 1.25x jemalloc's peak, 1.35x the live peak here).
 *     Blocks of 4 MiB and more now come under the arena's resident cap,
 *     with old dirty pages moved into them: the RSS measured after every
 *     step must stay within the live peak (usable sizes) plus the cap's
 *     slack (1/32 of the peak, at least 8 MiB) plus 8 MiB for metadata
 *     and rounding.  Decay can only lower the RSS, so a slow machine
 *     cannot fail it.  Under a sanitizer, or with THP always on, only
 *     the data is checked.
 */
#include "../test_util.h"

#define NSLOTS 8
#define NSTEPS 160
#define MIN_SIZE (1 * MP_MiB)
#define SPAN (31 * MP_MiB)
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

static unsigned char pattern(unsigned step, size_t off) {
	return (unsigned char)(step * 7u + off / 4096u * 13u + 1u);
}

static void test_large_malloc_rss_peak(void **state) {
	(void)state;
	size_t page = mp_page_size();
	unsigned char *slot[NSLOTS] = {0};
	size_t size[NSLOTS] = {0}, usable[NSLOTS] = {0};
	unsigned made[NSLOTS] = {0};
	uint64_t x = 0x2545f4914f6cdd1dULL;
	size_t live = 0, live_peak = 0;
	size_t rss0 = read_rss_bytes(), rss_peak = rss0;
	assert_true(rss0 > 0);
	for (unsigned i = 0; i < NSTEPS + NSLOTS; i++) {
		unsigned k = i % NSLOTS;
		volatile unsigned char *p = slot[k];
		if (p != NULL) {
			for (size_t off = 0; off < size[k]; off += page)
				MP_ASSERT(p[off] == pattern(made[k], off),
				    "block %u of %zu bytes: byte %zu changed",
				    made[k], size[k], off);
			free(slot[k]);
			slot[k] = NULL;
			live -= usable[k];
		}
		if (i >= NSTEPS)
			continue;
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t sz = MIN_SIZE + (size_t)((x >> 13) % SPAN);
		p = LAUNDER((unsigned char *)malloc(sz));
		assert_non_null((void *)p);
		for (size_t off = 0; off < sz; off += page)
			p[off] = pattern(i, off);
		slot[k] = (unsigned char *)p;
		size[k] = sz;
		usable[k] = malloc_usable_size(slot[k]);
		made[k] = i;
		live += usable[k];
		if (live > live_peak)
			live_peak = live;
		size_t rss = read_rss_bytes();
		if (rss > rss_peak)
			rss_peak = rss;
	}
	/* The blocks' data was checked in every build; the bound needs
	 * an RSS that is the allocator's alone, in 4 KiB pages. */
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("%s build: the sanitizer's shadow memory adds to RSS",
		    mp_env_sanitizer());
	if (thp_always())
		MP_SKIP("transparent huge pages are always on: RSS grows by "
		    "2 MiB pages");
	size_t slack = live_peak / 32 > 8 * MP_MiB ? live_peak / 32
	    : 8 * MP_MiB;
	printf("# large_malloc_rss: live peak %zu MiB, RSS peak %zu MiB "
	    "above the start (limit %zu)\n", live_peak / MP_MiB,
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
		cmocka_unit_test(test_large_malloc_rss_peak),
	};
	return mp_run_tests(tests);
}
