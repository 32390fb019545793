/*
 * test/integration/tcache_knobs.c - two of jemalloc 5.3's cache knobs
 * with their effect (issue 18): tcache_gc_delay_bytes lets the GC skip
 * that many bytes of a small class's flushes before one happens, and
 * lg_tcache_flush_large_div makes a full large class give back all but
 * 1/2^N of its blocks and cache the freed one.  What a class kept is seen
 * from the addresses the cache hands out again (lifo_run), as in
 * options_jemalloc.c.
 *
 * Every case runs this program again (/proc/self/exe --child MODE) with
 * its options in this build's MALLOC_CONF variable.
 */
#include "../test_util.h"

/* -------------------------------------------------------------- children */

/* Events of `bytes` of another class: each malloc of a GC interval's
 * bytes is one thread event, one GC step. */
static void other_traffic(size_t size, unsigned n) {
	for (unsigned i = 0; i < n; i++) {
		void *other = malloc(size);
		MP_CHECK(other != NULL, "malloc(%zu)", size);
		free(other);
	}
}

/*
 * How many freed blocks of `size` the thread's cache kept: n blocks
 * allocated and freed in order after a flush of the cache, `events` GC
 * steps of another class's traffic, then n allocated again.  The cache
 * hands out the most recently cached first; what it gave back comes
 * from the slabs or the arena in another order.
 */
static unsigned lifo_run(size_t size, unsigned n, unsigned events,
    unsigned *top) {
	void *p[512];
	void *q[512];
	MP_CHECK(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0,
	    "thread.tcache.flush");
	for (unsigned i = 0; i < n; i++)
		p[i] = malloc(size);
	for (unsigned i = 0; i < n; i++)
		free(p[i]);
	other_traffic(4096, events);
	for (unsigned i = 0; i < n; i++)
		q[i] = malloc(size);
	unsigned j = 0;
	while (j < n && p[j] != q[0])
		j++;
	*top = j;
	unsigned run = 0;
	while (j < n && run <= j && q[run] == p[j - run])
		run++;
	for (unsigned i = 0; i < n; i++)
		free(q[i]);
	return run;
}

/* Three rounds of the GC over the small bins (one step per event, one
 * bin per step): the 64-byte bin is visited exactly three times. */
static void child_small(void) {
	unsigned nbins = 0;
	size_t len = sizeof(nbins);
	MP_CHECK(mallctl("arenas.nbins", &nbins, &len, NULL, 0) == 0,
	    "arenas.nbins");
	unsigned top;
	printf("small %u\n", lifo_run(64, 300, 3 * nbins, &top));
	fflush(stdout);
}

static void child_large(void) {
	/* And which free the cache hands out first: the last one cached. */
	unsigned top;
	unsigned run = lifo_run(32 << 10, 12, 0, &top);
	printf("large %u %u\n", run, top);
	fflush(stdout);
}

static int child_main(const char *mode) {
	if (strcmp(mode, "small") == 0)
		child_small();
	else if (strcmp(mode, "large") == 0)
		child_large();
	else
		return 100;
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

/* -------------------------------------------------------------- parent */

static char err[64 << 10];
static char out[4096];
static unsigned child_top;      /* the large child's first block, by free */

static unsigned run_child(const char *mode, const char *conf) {
	int status = mp_run_child_conf(mode, conf, err, sizeof(err), out,
	    sizeof(out), NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s (%s): 0x%x %s", mode, conf, status, err);
	/* The knobs act: no "no effect" line, nor any other. */
	MP_ASSERT(strstr(err, "<malloc_prof>: ") == NULL, "%s", err);
	unsigned kept = 0;
	char want[32];
	snprintf(want, sizeof(want), "%s %%u", mode);
	MP_ASSERT(sscanf(out, want, &kept) == 1, "%s", out);
	child_top = 0;
	snprintf(want, sizeof(want), "%s %%*u %%u", mode);
	(void)sscanf(out, want, &child_top);
	print_message("# %s (%s): %u kept\n", mode, conf, kept);
	return kept;
}

/* One GC step per 4 KiB allocated; no junk, which takes the cache bins
 * away (on by default in debug builds). */
#define SMALL_CONF "junk:false,tcache_gc_incr_bytes:4096"

/*
 * The 64-byte bin holds 128 after the frees, and is not idle (they
 * overflowed it).  The first visit marks it idle, the second and third
 * would flush half of it each: 32 left.  A delay of 255 regions (16320
 * bytes, or more: the count stops at 255) swallows both (64 + 64 < 255):
 * 128 left.  One of 100 regions (6400 bytes) swallows the first (64 <
 * 100, 36 left) but not the second (64 >= 36), which flushes: 64 left.
 * A delay is per class: 100 bytes are one region of 64, which delays
 * nothing here.
 */
static void test_gc_delay(void **state) {
	(void)state;
	unsigned none = run_child("small", SMALL_CONF);
	MP_ASSERT(none == 32, "no delay: %u kept", none);
	unsigned all = run_child("small", SMALL_CONF
	    ",tcache_gc_delay_bytes:16320");
	MP_ASSERT(all == 128, "delay 255 regions: %u kept", all);
	unsigned capped = run_child("small", SMALL_CONF
	    ",tcache_gc_delay_bytes:1048576");
	MP_ASSERT(capped == 128, "delay capped at 255 regions: %u kept",
	    capped);
	unsigned one = run_child("small", SMALL_CONF
	    ",tcache_gc_delay_bytes:6400");
	MP_ASSERT(one == 64, "delay 100 regions: %u kept", one);
	unsigned tiny = run_child("small", SMALL_CONF
	    ",tcache_gc_delay_bytes:100");
	MP_ASSERT(tiny == 32, "delay of 1 region: %u kept", tiny);
}

/* No GC step meanwhile (events 1 TiB apart), no junk. */
#define LARGE_CONF "junk:false,tcache_gc_incr_bytes:1099511627776"

/*
 * 12 blocks of 32 KiB freed in order into a class of 8 slots.  Not set
 * (1 read out) the class keeps the first 8 and the other 4 go to the
 * arena: the run is 8, from the eighth free.  Set to 1, jemalloc's way:
 * the ninth free finds the class full, gives back its 4 oldest, keeps 4
 * and caches the ninth; the last three join them: 8, from the twelfth
 * free down to the fifth.  At 2 the ninth free finds the class full, gives
 * back its 6 oldest, keeps 2 and caches the ninth; the last three join
 * them: 6, the last 6 freed.  At 3 it keeps 1: 5.  At 4 it keeps none:
 * the last 4.
 */
static void test_flush_large_div(void **state) {
	(void)state;
	unsigned d1 = run_child("large", LARGE_CONF);
	MP_ASSERT(d1 == 8 && child_top == 7, "default: %u kept from %u", d1,
	    child_top);
	unsigned d1x = run_child("large", LARGE_CONF
	    ",lg_tcache_flush_large_div:1");
	MP_ASSERT(d1x == 8 && child_top == 11, "div 1: %u kept from %u", d1x,
	    child_top);
	unsigned d2 = run_child("large", LARGE_CONF
	    ",lg_tcache_flush_large_div:2");
	MP_ASSERT(d2 == 6, "div 2: %u kept", d2);
	unsigned d3 = run_child("large", LARGE_CONF
	    ",lg_tcache_flush_large_div:3");
	MP_ASSERT(d3 == 5, "div 3: %u kept", d3);
	unsigned d4 = run_child("large", LARGE_CONF
	    ",lg_tcache_flush_large_div:4");
	MP_ASSERT(d4 == 4, "div 4: %u kept", d4);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gc_delay),
		cmocka_unit_test(test_flush_large_div),
	};
	return mp_run_tests(tests);
}
