/*
 * test/integration/calloc_move.c - zeroed large blocks built from the
 * pages of freed ones (src/alloc/extent.c, move_dirty).
 *
 * A calloc'd block that would be faulted in fresh takes the page tables
 * of old dirty blocks instead (mremap), so its pages may hold anything a
 * freed block held until calloc clears them.  Blocks of 3-12 MiB written
 * all over with a non-zero byte are freed at random while others are
 * calloc'd, as bench's largezero does; every calloc'd block must read
 * zero in every byte it asked for, whichever of dirty, moved, clean or
 * fresh pages it was carved from.  The count of page faults is checked
 * too: the program touches every page of every block, and with the old
 * blocks' pages reused (moved or carved) it must fault well under one in
 * two of them (about 1 in 4 with moves, 3 in 10 without; not under
 * valgrind or a sanitizer, whose faults are their own).
 */
#include "../test_util.h"

#include <sys/resource.h>

#define CM_SLOTS 12
#define CM_STEPS 160
#define CM_MIN ((size_t)3 << 20)
#define CM_SPAN ((size_t)9 << 20)

static long cm_minflt(void) {
	struct rusage ru;
	MP_ASSERT(getrusage(RUSAGE_SELF, &ru) == 0, "getrusage");
	return ru.ru_minflt;
}

/* The first non-zero byte of p[0, n), or SIZE_MAX. */
static size_t cm_nonzero(const unsigned char *p, size_t n) {
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		if (w != 0)
			break;
	}
	for (; i < n; i++) {
		if (p[i] != 0)
			return i;
	}
	return SIZE_MAX;
}

static void test_calloc_reads_zero(void **state) {
	(void)state;
	unsigned char *slot[CM_SLOTS] = { 0 };
	uint64_t x = 0x2545f4914f6cdd1dULL;
	size_t touched = 0;
	long f0 = cm_minflt();
	for (unsigned i = 0; i < CM_STEPS + CM_SLOTS; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned k = i < CM_SLOTS ? i : (unsigned)((x >> 40) %
		    CM_SLOTS);
		if (i >= CM_STEPS)
			k = i - CM_STEPS;
		if (slot[k] != NULL) {
			free(slot[k]);
			slot[k] = NULL;
		}
		if (i >= CM_STEPS)
			continue;
		size_t sz = CM_MIN + (size_t)((x >> 8) % (CM_SPAN + 1));
		unsigned char *p;
		if (i % 2 == 0) {
			p = LAUNDER((unsigned char *)malloc(opaque_size(sz)));
			MP_ASSERT(p != NULL, "malloc(%zu)", sz);
		} else {
			p = LAUNDER((unsigned char *)calloc(1,
			    opaque_size(sz)));
			MP_ASSERT(p != NULL, "calloc(1, %zu)", sz);
			size_t bad = cm_nonzero(p, sz);
			MP_ASSERT(bad == SIZE_MAX, "step %u: calloc(1, %zu) "
			    "= %p has byte %zu = 0x%02x", i, sz, (void *)p,
			    bad, p[bad]);
		}
		/* Every byte old data for the blocks that come next. */
		memset(p, 0xa5, sz);
		slot[k] = p;
		touched += (sz + 4095) / 4096;
	}
	long faults = cm_minflt() - f0;
	/* Under valgrind or a sanitizer the count includes the tool's own
	 * (shadow memory: ThreadSanitizer's made it 500,842). */
	const char *preload = getenv("LD_PRELOAD");
	if ((preload != NULL && strstr(preload, "vgpreload") != NULL) ||
	    mp_env_sanitizer()[0] != '\0')
		return;
	MP_ASSERT((size_t)faults * 2 < touched, "%ld page faults for %zu "
	    "pages touched: freed blocks' pages are not reused", faults,
	    touched);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_calloc_reads_zero),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
