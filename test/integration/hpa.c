/*
 * test/integration/hpa.c - opt.hpa, jemalloc's hugepage allocator (issue
 * 18).  With hpa:true, no hugify delay and no purge interval (hpa.conf):
 * small objects filling many slabs land in 2 MiB-aligned pageslabs, the
 * dense ones hugified (the area holding one shows `hg` in its VmFlags in
 * /proc/self/smaps, with 2 MiB-aligned bounds; VmFlags record the advice
 * whether or not the kernel found a huge page); once most objects are
 * freed and the arena purged, the dirty pages are gone (pdirty 0, the
 * pages no longer resident by mincore) and the pageslabs were dehugified
 * first (`nh`, ndehugifies); runs above hpa_slab_max_alloc take the
 * ordinary path; the opt.* read-outs say what was set.  Children check
 * the knobs (a long hugify delay: no hugification; hpa_dirty_mult:-1:
 * dirty pages kept until arena.<i>.purge; a lower hpa_slab_max_alloc)
 * and, with retain:false, dirty_decay_ms:0 and no small extent cache,
 * that empty pageslabs are purged at once and unmapped.  hpa:false, the default, is what every
 * other test runs.
 */
#include "hpa_stats.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define HP ((uintptr_t)2 << 20)
#define OBJ 1024
#define NOBJ (6 * 1024)          /* 6 MiB of 1 KiB objects */

static void *objs[NOBJ];

/* /proc/self/smaps, read without the allocator into a static buffer. */
static char smaps[4 << 20];

static void smaps_read(void) {
	int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	size_t n = mp_read_all(fd, smaps, sizeof(smaps) - 1);
	close(fd);
	smaps[n] = '\0';
}

/* The area holding a: its bounds and whether its VmFlags name `flag`
 * (from the last smaps_read).  False if no area holds it. */
static bool vma_of(uintptr_t a, uintptr_t *start, uintptr_t *end,
    const char *flag, bool *has) {
	for (char *line = smaps; *line != '\0';) {
		char *nl = strchr(line, '\n');
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && a >= lo &&
		    a < hi) {
			*start = lo;
			*end = hi;
			char *f = strstr(line, "VmFlags:");
			char *next = nl;
			/* The next area's header ends this one's fields. */
			while (next != NULL) {
				unsigned long x, y;
				if (sscanf(next + 1, "%lx-%lx ", &x, &y) == 2)
					break;
				next = strchr(next + 1, '\n');
			}
			*has = false;
			if (f != NULL && (next == NULL || f < next)) {
				char *fe = strchr(f, '\n');
				size_t fl = strlen(flag);
				for (char *p = f + 8; p + fl <= fe; p++) {
					if (strncmp(p, flag, fl) == 0 &&
					    p[-1] == ' ' && (p[fl] == ' ' ||
					    p[fl] == '\n'))
						*has = true;
				}
			}
			return true;
		}
		if (nl == NULL)
			break;
		line = nl + 1;
	}
	return false;
}

/* The distinct 2 MiB granules holding objs[0..NOBJ), into g; how many. */
static size_t granules(uintptr_t *g, size_t max) {
	size_t n = 0;
	for (size_t i = 0; i < NOBJ; i++) {
		if (objs[i] == NULL)
			continue;
		uintptr_t b = (uintptr_t)objs[i] & ~(HP - 1);
		size_t j;
		for (j = 0; j < n && g[j] != b; j++)
			;
		if (j == n && n < max)
			g[n++] = b;
	}
	return n;
}

/* Resident pages of the granules, by mincore. */
static size_t resident_pages(const uintptr_t *g, size_t n) {
	static unsigned char vec[HP / 4096];
	size_t page = mp_page_size(), total = 0;
	for (size_t i = 0; i < n; i++) {
		if (mincore((void *)g[i], HP, vec) != 0)
			continue;
		for (size_t j = 0; j < HP / page; j++)
			total += vec[j] & 1;
	}
	return total;
}

static uintptr_t gran[64];
static size_t ngran;
static size_t resident_before;

static void test_opts(void **state) {
	(void)state;
	bool b = false;
	size_t z = 0;
	const char *s = NULL;
	MALLCTL_READ("opt.hpa", b);
	assert_true(b);
	MALLCTL_READ("opt.hpa_slab_max_alloc", z);
	assert_int_equal(z, 65536);
	MALLCTL_READ("opt.hpa_hugification_threshold", z);
	assert_int_equal(z, 1992294);        /* jemalloc's 95 % of 2 MiB */
	MALLCTL_READ("opt.hpa_hugify_delay_ms", z);
	assert_int_equal(z, 0);
	MALLCTL_READ("opt.hpa_min_purge_interval_ms", z);
	assert_int_equal(z, 0);
	/* jemalloc's type: its 16.16 fixed-point fxp_t. */
	uint32_t mult = 0;
	MALLCTL_READ("opt.hpa_dirty_mult", mult);
	assert_int_equal(mult, (uint32_t)1 << 14);
	MALLCTL_READ("opt.hpa_hugification_threshold_ratio", s);
	assert_string_equal(s, "0.95");
	MALLCTL_READ("opt.hpa_sec_max_bytes", z);
	assert_int_equal(z, 262144);
}

static void test_dense(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	size_t active0 = hpa_stat_size(a, "hpa_shard.nactive");
	uint64_t hug0 = hpa_stat_u64(a, "hpa_shard.nhugifies");
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i] = malloc(OBJ);
		assert_non_null(objs[i]);
		memset(LAUNDER(objs[i]), 0x5a, OBJ);
	}
	size_t active = hpa_stat_size(a, "hpa_shard.nactive");
	MP_ASSERT(active - active0 >= NOBJ * OBJ / 4096, "nactive %zu -> %zu",
	    active0, active);
	/* 6 MiB of slabs packed into pageslabs: 3 granules and at most one
	 * more begun before. */
	ngran = granules(gran, MP_ARRAY_SIZE(gran));
	MP_ASSERT(ngran <= 4, "objects over %zu 2 MiB granules", ngran);
	resident_before = resident_pages(gran, ngran);
	assert_true(resident_before >= NOBJ * OBJ / 4096);
	if (!hpa_thp_available()) {
		assert_int_equal(hpa_stat_u64(a, "hpa_shard.nhugifies"), hug0);
		MP_SKIP("no transparent huge pages: hugification not checked");
	}
	uint64_t hug = hpa_stat_u64(a, "hpa_shard.nhugifies");
	MP_ASSERT(hug - hug0 >= 2, "nhugifies %" PRIu64 " -> %" PRIu64,
	    hug0, hug);
	assert_true(hpa_stat_size(a, "hpa_shard.nhuge") >= 2);
	smaps_read();
	size_t hg = 0;
	for (size_t i = 0; i < ngran; i++) {
		uintptr_t lo, hi;
		bool has;
		assert_true(vma_of(gran[i], &lo, &hi, "hg", &has));
		if (!has)
			continue;
		hg++;
		MP_ASSERT(lo % HP == 0 && hi % HP == 0, "hugified area "
		    "%#lx-%#lx is not on 2 MiB bounds", (unsigned long)lo,
		    (unsigned long)hi);
	}
	MP_ASSERT(hg >= 2, "%zu of %zu granules in hg areas", hg, ngran);
}

static void test_purge(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	uint64_t deh0 = hpa_stat_u64(a, "hpa_shard.ndehugifies");
	uint64_t npurges0 = hpa_stat_u64(a, "hpa_shard.npurges");
	/* Most objects go; one in 512 (a slab's worth and more apart)
	 * keeps a few slabs in use. */
	for (size_t i = 0; i < NOBJ; i++) {
		if (i % 512 != 0) {
			free(objs[i]);
			objs[i] = NULL;
		}
	}
	mp_tcache_flush();
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MALLCTL_CALL(name);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.ndirty"), 0);
	assert_int_equal(hpa_stat_size(a, "pdirty"), 0);
	assert_true(hpa_stat_u64(a, "hpa_shard.npurges") > npurges0);
	size_t after = resident_pages(gran, ngran);
	MP_ASSERT(after * 4 < resident_before, "resident pages of the "
	    "pageslabs: %zu -> %zu", resident_before, after);
	if (hpa_thp_available()) {
		MP_ASSERT(hpa_stat_u64(a, "hpa_shard.ndehugifies") > deh0,
		    "no dehugification before the purges");
		smaps_read();
		size_t nh = 0;
		for (size_t i = 0; i < ngran; i++) {
			uintptr_t lo, hi;
			bool has;
			if (vma_of(gran[i], &lo, &hi, "nh", &has) && has)
				nh++;
		}
		MP_ASSERT(nh >= 1, "no pageslab area marked nh");
	}
	for (size_t i = 0; i < NOBJ; i++) {
		free(objs[i]);
		objs[i] = NULL;
	}
}

/* malloc_stats_print shows the pageslabs' counters as jemalloc's "HPA
 * shard stats", in text and JSON, after test_purge's purges. */
static char stats_out[1 << 20];
static size_t stats_len;

static void stats_collect(void *opaque, const char *str) {
	(void)opaque;
	size_t n = strlen(str);
	if (stats_len + n >= sizeof(stats_out))
		n = sizeof(stats_out) - 1 - stats_len;
	memcpy(stats_out + stats_len, str, n);
	stats_len += n;
	stats_out[stats_len] = '\0';
}

static void test_stats_print(void **state) {
	(void)state;
	stats_len = 0;
	malloc_stats_print(stats_collect, NULL, "gblxe");
	const char *h = strstr(stats_out, "HPA shard stats:");
	MP_ASSERT(h != NULL, "no HPA shard stats in the text");
	const char *p = strstr(h, "  Purges: ");
	assert_non_null(p);
	MP_ASSERT(strtoull(p + strlen("  Purges: "), NULL, 10) >= 1,
	    "purges printed as %.20s", p);
	assert_non_null(strstr(h, "  pageslabs: "));
	stats_len = 0;
	malloc_stats_print(stats_collect, NULL, "Jgblxe");
	const char *j = strstr(stats_out, "\"hpa_shard\": {");
	MP_ASSERT(j != NULL, "no hpa_shard object in the JSON");
	assert_non_null(strstr(j, "\"npurges\": "));
	assert_non_null(strstr(j, "\"nhugifies\": "));
}

/* Page runs above hpa_slab_max_alloc keep the extents; up to it they
 * come from pageslabs. */
static void test_sizes(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	unsigned a = hpa_arena_ind();
	static const struct {
		size_t size;
		size_t pages;
	} cases[] = {
		{ 40 * 1024, 10 }, { 64 * 1024, 16 }, { 64 * 1024 + 1, 0 },
		{ 128 * 1024, 0 }, { 1 << 20, 0 },
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		size_t before = hpa_stat_size(a, "hpa_shard.nactive");
		void *p = mallocx(cases[i].size, MALLOCX_TCACHE_NONE);
		assert_non_null(p);
		size_t after = hpa_stat_size(a, "hpa_shard.nactive");
		MP_ASSERT(after - before == cases[i].pages, "%zu bytes: "
		    "pageslab pages %zu -> %zu", cases[i].size, before, after);
		if (cases[i].pages != 0) {
			memset(LAUNDER(p), 1, cases[i].size);
			dallocx(p, MALLOCX_TCACHE_NONE);
			after = hpa_stat_size(a, "hpa_shard.nactive");
			assert_int_equal(after, before);
		} else {
			dallocx(p, MALLOCX_TCACHE_NONE);
		}
	}
}

/* Blocks resized inside their pageslab keep their contents; calloc over
 * reused pageslab pages reads zero. */
static void test_resize_zero(void **state) {
	(void)state;
	for (unsigned round = 0; round < 4; round++) {
		size_t sz = 20 * 1024;
		unsigned char *p = mallocx(sz, MALLOCX_TCACHE_NONE);
		assert_non_null(p);
		pattern_fill(LAUNDER(p), sz, round);
		p = rallocx(p, 48 * 1024, MALLOCX_TCACHE_NONE);
		assert_non_null(p);
		assert_true(pattern_check(LAUNDER(p), sz, round) == SIZE_MAX);
		p = rallocx(p, 24 * 1024, MALLOCX_TCACHE_NONE);
		assert_non_null(p);
		assert_true(pattern_check(LAUNDER(p), 20 * 1024, round) ==
		    SIZE_MAX);
		memset(p, 0xff, 24 * 1024);
		dallocx(p, MALLOCX_TCACHE_NONE);
		unsigned char *z = mallocx(56 * 1024,
		    MALLOCX_TCACHE_NONE | MALLOCX_ZERO);
		assert_non_null(z);
		assert_true(first_nonzero(LAUNDER(z), 56 * 1024) == SIZE_MAX);
		dallocx(z, MALLOCX_TCACHE_NONE);
	}
}

/* Child (retain:false, dirty_decay_ms:0): freed pageslab pages are
 * purged at once, and empty pageslabs go back to the OS. */
static void test_unmap_child(void **state) {
	(void)state;
	unsigned a = hpa_arena_ind();
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i] = malloc(OBJ);
		assert_non_null(objs[i]);
		memset(LAUNDER(objs[i]), 0x5a, OBJ);
	}
	size_t slabs = hpa_stat_size(a, "hpa_shard.npageslabs");
	assert_true(slabs >= 3);
	for (size_t i = 0; i < NOBJ; i++) {
		free(objs[i]);
		objs[i] = NULL;
	}
	mp_tcache_flush();
	assert_int_equal(hpa_stat_size(a, "hpa_shard.ndirty"), 0);
	size_t left = hpa_stat_size(a, "hpa_shard.npageslabs");
	MP_ASSERT(left + 3 <= slabs, "pageslabs %zu -> %zu", slabs, left);
}

/* Child (a day's hugify delay, hpa_dirty_mult:-1, 16 KiB limit): dense
 * pageslabs wait, freed pages stay dirty until a forced purge, and runs
 * above the limit keep the extents. */
static void test_knobs_child(void **state) {
	(void)state;
	uint32_t mult = 0;
	MALLCTL_READ("opt.hpa_dirty_mult", mult);
	assert_int_equal(mult, UINT32_MAX);   /* jemalloc's (fxp_t)-1 */
	unsigned a = hpa_arena_ind();
	for (size_t i = 0; i < NOBJ; i++) {
		objs[i] = malloc(OBJ);
		assert_non_null(objs[i]);
		memset(LAUNDER(objs[i]), 0x5a, OBJ);
	}
	assert_true(hpa_stat_size(a, "hpa_shard.nactive") >= NOBJ * OBJ / 4096);
	assert_int_equal(hpa_stat_u64(a, "hpa_shard.nhugifies"), 0);
	size_t before = hpa_stat_size(a, "hpa_shard.nactive");
	void *p = mallocx(20 * 1024, MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.nactive"), before);
	dallocx(p, MALLOCX_TCACHE_NONE);
	for (size_t i = 0; i < NOBJ; i++) {
		free(objs[i]);
		objs[i] = NULL;
	}
	mp_tcache_flush();
	assert_true(hpa_stat_size(a, "hpa_shard.ndirty") >= NOBJ * OBJ / 4096 / 2);
	assert_int_equal(hpa_stat_u64(a, "hpa_shard.npurges"), 0);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.purge", a);
	MALLCTL_CALL(name);
	assert_int_equal(hpa_stat_size(a, "hpa_shard.ndirty"), 0);
	assert_true(hpa_stat_u64(a, "hpa_shard.npurges") > 0);
}

static void test_knobs(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	static char err[16384];
	int st = mp_run_child_conf("knobs", "hpa:true,"
	    "hpa_hugify_delay_ms:86400000,hpa_dirty_mult:-1,"
	    "hpa_min_purge_interval_ms:0,hpa_slab_max_alloc:16384", err,
	    sizeof(err), NULL, 0, NULL);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %#x", st);
}

static void test_unmap(void **state) {
	(void)state;
	if (mp_page_size() != 4096)
		MP_SKIP("page size %zu", mp_page_size());
	static char err[16384];
	/* No small extent cache: the runs it keeps would keep pageslabs
	 * in use (hpa_sec.c tests it). */
	int st = mp_run_child_conf("unmap", "hpa:true,retain:false,"
	    "dirty_decay_ms:0,hpa_hugify_delay_ms:0,"
	    "hpa_min_purge_interval_ms:0,hpa_sec_nshards:0", err, sizeof(err),
	    NULL, 0, NULL);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %#x", st);
}

int main(int argc, char **argv) {
	mp_test_init(120);
	if (argc > 2 && strcmp(argv[1], "--child") == 0) {
		const struct CMUnitTest unmap[] = {
			cmocka_unit_test(test_unmap_child),
		};
		const struct CMUnitTest knobs[] = {
			cmocka_unit_test(test_knobs_child),
		};
		if (strcmp(argv[2], "knobs") == 0)
			return mp_run_tests(knobs);
		return mp_run_tests(unmap);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opts),
		cmocka_unit_test(test_dense),
		cmocka_unit_test(test_purge),
		cmocka_unit_test(test_stats_print),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_resize_zero),
		cmocka_unit_test(test_knobs),
		cmocka_unit_test(test_unmap),
	};
	return mp_run_tests(tests);
}
