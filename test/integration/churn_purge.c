/*
 * test/integration/churn_purge.c - a heap churned at a steady live set
 * (bench's midsize shape: log-uniform sizes from 8 B to 64 KiB, a random
 * block replaced at each step, every page written) purges nothing while
 * decay is off, and returns its pages once decay is on (issue 15, midsz2).
 *
 * midsize's time was suspected to go to purges whose pages are faulted
 * back in; it makes none (doc/performance.md, "midsize and logsizes:
 * purges, faults and system time").  This keeps it so: the only purge
 * left with decay off is the resident cap's, and a churn whose live
 * set does not grow must stay under it.  Counts, not time: the arena's
 * decay times are -1 (never) during the churn, so a slow machine purges
 * no more than a fast one.
 */
#include "../test_util.h"

#define SLOTS 3000
#define STEPS 60000

static uint64_t rng = 0x9e3779b97f4a7c15u;

/* xorshift64*: the same sequence on every run. */
static uint64_t next(void) {
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1du;
}

/* Log-uniform from 8 B to 64 KiB: a power of two, then uniform below
 * the next one. */
static size_t draw_size(void) {
	unsigned e = 3 + (unsigned)(next() % 13);
	return ((size_t)1 << e) + (size_t)(next() % ((size_t)1 << e));
}

static uint64_t arena_u64(unsigned a, const char *stat) {
	char name[96];
	snprintf(name, sizeof(name), "stats.arenas.%u.%s", a, stat);
	mp_epoch();
	uint64_t v = 0;
	MP_ASSERT(mp_read_u64(name, &v) == 0, "%s", name);
	return v;
}

static size_t arena_size(unsigned a, const char *stat) {
	char name[96];
	snprintf(name, sizeof(name), "stats.arenas.%u.%s", a, stat);
	mp_epoch();
	size_t v = 0;
	MP_ASSERT(mp_read_size(name, &v) == 0, "%s", name);
	return v;
}

static void decay_ms(unsigned a, const char *which, ssize_t ms) {
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.%s_decay_ms", a, which);
	MP_ASSERT(mallctl(name, NULL, NULL, &ms, sizeof(ms)) == 0, "%s",
	    name);
}

static void test_churn_no_purge(void **state) {
	(void)state;
	unsigned a = 0;
	size_t len = sizeof(a);
	MP_ASSERT(mallctl("arenas.create", &a, &len, NULL, 0) == 0,
	    "arenas.create");
	decay_ms(a, "dirty", -1);
	decay_ms(a, "muzzy", -1);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	static char *slot[SLOTS];
	for (unsigned k = 0; k < SLOTS; k++) {
		size_t sz = draw_size();
		slot[k] = mallocx(sz, flags);
		MP_ASSERT(slot[k] != NULL, "mallocx(%zu)", sz);
		memset(slot[k], 1, sz);
	}
	size_t peak = 0;
	for (unsigned i = 0; i < STEPS; i++) {
		unsigned k = (unsigned)(next() % SLOTS);
		dallocx(slot[k], flags);
		size_t sz = draw_size();
		slot[k] = mallocx(sz, flags);
		MP_ASSERT(slot[k] != NULL, "mallocx(%zu)", sz);
		memset(slot[k], (int)i, sz);
		if (i % 4096 == 0) {
			size_t act = arena_size(a, "pactive");
			if (act > peak)
				peak = act;
		}
	}
	/* The churn freed far more pages than the live set holds: had any
	 * of them been purged to be faulted again, these would count it. */
	uint64_t freed = arena_u64(a, "large.ndalloc") +
	    arena_u64(a, "small.ndalloc");
	MP_ASSERT(freed >= STEPS, "%" PRIu64 " frees counted", freed);
	MP_ASSERT(arena_u64(a, "dirty_npurge") == 0,
	    "%" PRIu64 " purge passes (%" PRIu64 " pages) in a steady churn",
	    arena_u64(a, "dirty_npurge"), arena_u64(a, "dirty_purged"));
	size_t dirty = arena_size(a, "pdirty");
	MP_ASSERT(peak > 0 && dirty > 0, "peak %zu pages, %zu dirty", peak,
	    dirty);

	/* Decay on again: everything freed goes back, none is kept. */
	for (unsigned k = 0; k < SLOTS; k++)
		dallocx(slot[k], flags);
	decay_ms(a, "muzzy", 0);
	decay_ms(a, "dirty", 0);
	MP_ASSERT(arena_size(a, "pdirty") == 0, "%zu dirty pages left",
	    arena_size(a, "pdirty"));
	MP_ASSERT(arena_u64(a, "dirty_purged") >= dirty,
	    "%" PRIu64 " pages purged of %zu dirty",
	    arena_u64(a, "dirty_purged"), dirty);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_churn_no_purge),
	};
	return mp_run_tests(tests);
}
