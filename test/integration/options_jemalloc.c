/*
 * test/integration/options_jemalloc.c - jemalloc 5.3's remaining options
 * (issue 18): each is accepted without an "unknown option" line, reads
 * back through opt.<name> with jemalloc's type, and does what it says:
 * xmalloc aborts on an impossible size, stats_interval prints after its
 * bytes, the tcache knobs change how many freed blocks a thread's cache
 * keeps, slab_sizes changes a class's slab size.  The options that do
 * nothing here say so in one line each, only when set to something but
 * their default.
 *
 * Every case runs this program again (/proc/self/exe --child MODE) with
 * its options in this build's MALLOC_CONF variable.
 */
#include "../test_util.h"

#include <signal.h>

/* ------------------------------------------------------------- helpers */

static bool read_bool(const char *name) {
	bool v = false;
	size_t len = sizeof(v);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_CHECK(r == 0 && len == sizeof(v), "%s: %d", name, r);
	return v;
}

static size_t read_size(const char *name) {
	size_t v = 0;
	size_t len = sizeof(v);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_CHECK(r == 0 && len == sizeof(v), "%s: %d", name, r);
	return v;
}

static ssize_t read_ssize(const char *name) {
	ssize_t v = 0;
	size_t len = sizeof(v);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_CHECK(r == 0 && len == sizeof(v), "%s: %d", name, r);
	return v;
}

static unsigned read_unsigned(const char *name) {
	unsigned v = 0;
	size_t len = sizeof(v);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_CHECK(r == 0 && len == sizeof(v), "%s: %d", name, r);
	return v;
}

static const char *read_str(const char *name) {
	const char *v = NULL;
	size_t len = sizeof(v);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_CHECK(r == 0 && len == sizeof(v) && v != NULL, "%s: %d", name, r);
	return v != NULL ? v : "";
}

#define BOOL_IS(name, want) MP_CHECK(read_bool(name) == (want), "%s", name)
#define SIZE_IS(name, want) MP_CHECK(read_size(name) == (size_t)(want), \
	"%s = %zu", name, read_size(name))
#define SSIZE_IS(name, want) MP_CHECK(read_ssize(name) == (ssize_t)(want), \
	"%s = %zd", name, read_ssize(name))
#define UNSIGNED_IS(name, want) MP_CHECK(read_unsigned(name) ==	\
	(unsigned)(want), "%s = %u", name, read_unsigned(name))
#define STR_IS(name, want) MP_CHECK(strcmp(read_str(name), (want)) == 0, \
	"%s = \"%s\"", name, read_str(name))

/* -------------------------------------------------------------- children */

/* The options that act here, set away from their defaults. */
#define VALUES_CONF "xmalloc:true,stats_interval:1099511627776,"	\
	"stats_interval_opts:gm,slab_sizes:1-64:1,"			\
	"tcache_nslots_small_min:10,tcache_nslots_small_max:100,"	\
	"tcache_nslots_large:4,lg_tcache_nslots_mul:2,"			\
	"tcache_gc_incr_bytes:65536,lg_tcache_flush_small_div:2,"	\
	"lg_tcache_flush_large_div:1,lg_tcache_max:15,"			\
	"experimental_infallible_new:true"

static void child_values(void) {
	BOOL_IS("opt.xmalloc", true);
	SSIZE_IS("opt.stats_interval", (ssize_t)1 << 40);
	STR_IS("opt.stats_interval_opts", "gm");
	STR_IS("opt.slab_sizes", "1-64:1");
	UNSIGNED_IS("opt.tcache_nslots_small_min", 10);
	UNSIGNED_IS("opt.tcache_nslots_small_max", 100);
	UNSIGNED_IS("opt.tcache_nslots_large", 4);
	SSIZE_IS("opt.lg_tcache_nslots_mul", 2);
	SIZE_IS("opt.tcache_gc_incr_bytes", 65536);
	UNSIGNED_IS("opt.lg_tcache_flush_small_div", 2);
	UNSIGNED_IS("opt.lg_tcache_flush_large_div", 1);
	/* The deprecated spelling sets tcache_max. */
	SIZE_IS("opt.lg_tcache_max", 15);
	SIZE_IS("opt.tcache_max", 32768);
	SIZE_IS("arenas.tcache_max", 32768);
	BOOL_IS("opt.experimental_infallible_new", true);
	BOOL_IS("config.xmalloc", true);
	/* The rest keep their defaults. */
	BOOL_IS("opt.trust_madvise", false);
	BOOL_IS("opt.cache_oblivious", false);
	BOOL_IS("config.cache_oblivious", true);
	SIZE_IS("opt.lg_extent_max_active_fit", 6);
	SIZE_IS("opt.tcache_gc_delay_bytes", 0);
	BOOL_IS("opt.hpa", false);
	SIZE_IS("opt.san_guard_small", 0);
	SIZE_IS("opt.san_guard_large", 0);
	BOOL_IS("opt.utrace", false);
	if (MALLOC_PROF_CONFIG_PROF) {
		SSIZE_IS("opt.prof_recent_alloc_max", 0);
		BOOL_IS("opt.prof_stats", false);
		BOOL_IS("opt.prof_sys_thread_name", false);
		STR_IS("opt.prof_time_resolution", "default");
		BOOL_IS("opt.prof_unbias", true);
	}
	/* Still an allocator. */
	void *p = malloc(40);
	MP_CHECK(p != NULL, "malloc(40)");
	free(p);
}

/* The defaults, as read without options. */
static void child_defaults(void) {
	BOOL_IS("opt.xmalloc", false);
	SSIZE_IS("opt.stats_interval", -1);
	STR_IS("opt.stats_interval_opts", "");
	STR_IS("opt.slab_sizes", "");
	UNSIGNED_IS("opt.tcache_nslots_small_min", 8);
	UNSIGNED_IS("opt.tcache_nslots_small_max", 128);
	UNSIGNED_IS("opt.tcache_nslots_large", 8);
	SSIZE_IS("opt.lg_tcache_nslots_mul", 1);
	SIZE_IS("opt.tcache_gc_incr_bytes", 262144);
	UNSIGNED_IS("opt.lg_tcache_flush_small_div", 1);
	UNSIGNED_IS("opt.lg_tcache_flush_large_div", 1);
	SIZE_IS("opt.lg_tcache_max", 16);
	SIZE_IS("opt.tcache_max", 65536);
	BOOL_IS("opt.experimental_infallible_new", false);
}

/* Options that do nothing here, each set away from its default, and
 * cache_oblivious, hpa and two tcache knobs that work (no line): every
 * one reads back what was set. */
#define NOTES_CONF "cache_oblivious:true,tcache_gc_delay_bytes:4096,"	\
	"lg_tcache_flush_large_div:2,hpa:true,utrace:true"
#define NOTES_PROF_CONF ",prof_recent_alloc_max:-1,prof_stats:true,"	\
	"prof_sys_thread_name:true,prof_time_resolution:high,"		\
	"prof_unbias:false"
static const char *const note_names[] = {
	"utrace",
};
/* prof_recent_alloc_max, prof_stats, prof_sys_thread_name,
 * prof_time_resolution and prof_unbias are set too, and work: no line. */

static void child_notes(void) {
	BOOL_IS("opt.cache_oblivious", true);
	SIZE_IS("opt.tcache_gc_delay_bytes", 4096);
	UNSIGNED_IS("opt.lg_tcache_flush_large_div", 2);
	BOOL_IS("opt.hpa", true);
	BOOL_IS("opt.utrace", true);
	if (MALLOC_PROF_CONFIG_PROF) {
		SSIZE_IS("opt.prof_recent_alloc_max", -1);
		BOOL_IS("opt.prof_stats", true);
		BOOL_IS("opt.prof_sys_thread_name", true);
		STR_IS("opt.prof_time_resolution", "high");
		BOOL_IS("opt.prof_unbias", false);
	}
}

/* An impossible size through each allocating function. */
static void child_oom(const char *fn) {
	size_t huge = opaque_size(SIZE_MAX / 2);
	void *p = NULL;
	if (strcmp(fn, "malloc") == 0) {
		p = malloc(huge);
	} else if (strcmp(fn, "calloc") == 0) {
		p = calloc(huge, 2);
	} else if (strcmp(fn, "posix_memalign") == 0) {
		MP_CHECK(posix_memalign(&p, 64, huge) == ENOMEM,
		    "posix_memalign");
	} else if (strcmp(fn, "realloc") == 0) {
		void *q = malloc(16);
		p = realloc(q, huge);
		free(q);
	} else if (strcmp(fn, "mallocx") == 0) {
		p = mallocx(huge, MALLOCX_ALIGN(64));
	}
	/* Without xmalloc the call returns: NULL. */
	MP_CHECK(p == NULL, "%s(huge) gave %p", fn, p);
}

/* 8 MiB allocated and freed in 256-byte blocks, a few live at a time. */
static void child_churn(void) {
	void *live[64] = {NULL};
	for (size_t i = 0; i < ((size_t)8 << 20) / 256; i++) {
		free(live[i % 64]);
		live[i % 64] = malloc(256);
		MP_CHECK(live[i % 64] != NULL, "malloc(256)");
	}
	for (size_t i = 0; i < 64; i++)
		free(live[i]);
}

/*
 * How many freed blocks of `size` the thread's cache kept: n blocks
 * allocated and freed in order after a flush of the cache, then
 * allocated again.  The cache hands out the most recently cached first,
 * in the reverse order of their frees; what it did not keep went back to
 * the slabs (small) or the arena (large), which hand blocks out in
 * another order.  A small class's bin caches the last blocks freed; a
 * large class caches the first ones (a full class sends the rest to the
 * arena), so the run starts wherever the first block came from.
 */
static unsigned lifo_run(size_t size, unsigned n) {
	void *p[512];
	void *q[512];
	MP_CHECK(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) == 0,
	    "thread.tcache.flush");
	for (unsigned i = 0; i < n; i++)
		p[i] = malloc(size);
	for (unsigned i = 0; i < n; i++)
		free(p[i]);
	/* 1 MiB of another class's traffic, in which the bin of `size`
	 * stays idle: the GC (one step per tcache_gc_incr_bytes) flushes
	 * half of a bin that was idle since its last visit. */
	for (unsigned i = 0; i < 256; i++) {
		void *other = malloc(size == 4096 ? 8192 : 4096);
		MP_CHECK(other != NULL, "malloc");
		free(other);
	}
	for (unsigned i = 0; i < n; i++)
		q[i] = malloc(size);
	unsigned j = 0;
	while (j < n && p[j] != q[0])
		j++;
	unsigned run = 0;
	while (j < n && run <= j && q[run] == p[j - run])
		run++;
	for (unsigned i = 0; i < n; i++)
		free(q[i]);
	return run;
}

static void child_lifo(void) {
	printf("small %u\n", lifo_run(64, 300));
	printf("large %u\n", lifo_run(32 << 10, 12));
	fflush(stdout);
}

/* slab_sizes:1-4096:17|100-200:1|128-128:2, jemalloc's example: pages
 * clamped to [pages of one region, 512 regions and 64 pages]. */
static void child_slabs(void) {
	unsigned nbins = read_unsigned("arenas.nbins");
	for (unsigned j = 0; j < nbins; j++) {
		char name[64];
		snprintf(name, sizeof(name), "arenas.bin.%u.size", j);
		size_t size = read_size(name);
		snprintf(name, sizeof(name), "arenas.bin.%u.slab_size", j);
		size_t slab = read_size(name);
		snprintf(name, sizeof(name), "arenas.bin.%u.nregs", j);
		uint32_t nregs = 0;
		size_t len = sizeof(nregs);
		MP_CHECK(mallctl(name, &nregs, &len, NULL, 0) == 0, "%s", name);
		size_t pages = size == 128 ? 2 : size >= 100 && size <= 200 ?
		    1 : size <= 4096 ? 17 : 0;
		if (pages != 0) {
			size_t lo = (size + 4095) / 4096;
			size_t hi = 512 * size / 4096;
			if (hi > 64)
				hi = 64;
			if (hi < lo)
				hi = lo;
			pages = pages < lo ? lo : pages > hi ? hi : pages;
			MP_CHECK(slab == pages * 4096, "class %zu: slab %zu, "
			    "want %zu pages", size, slab, pages);
		}
		MP_CHECK(nregs == slab / size, "class %zu: %u regions in %zu",
		    size, nregs, slab);
		/* The slabs work: a slab's worth and more of the class. */
		void *p[600];
		unsigned n = nregs + 3 < 600 ? nregs + 3 : 600;
		for (unsigned i = 0; i < n; i++) {
			p[i] = malloc(size);
			MP_CHECK(p[i] != NULL, "malloc(%zu)", size);
			memset(p[i], (int)i, size);
		}
		for (unsigned i = 0; i < n; i++) {
			MP_CHECK(((unsigned char *)p[i])[size - 1] ==
			    (unsigned char)i, "class %zu block %u", size, i);
			free(p[i]);
		}
	}
}

static int child_main(const char *mode) {
	if (strcmp(mode, "values") == 0)
		child_values();
	else if (strcmp(mode, "defaults") == 0)
		child_defaults();
	else if (strcmp(mode, "notes") == 0)
		child_notes();
	else if (strncmp(mode, "oom_", 4) == 0)
		child_oom(mode + 4);
	else if (strcmp(mode, "churn") == 0)
		child_churn();
	else if (strcmp(mode, "lifo") == 0)
		child_lifo();
	else if (strcmp(mode, "slabs") == 0)
		child_slabs();
	else
		return 100;
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

/* -------------------------------------------------------------- parent */

static char err[256 << 10];
static char out[4096];

static void expect_ok(const char *mode, const char *conf) {
	int status = mp_run_child_conf(mode, conf, err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child %s (%s): status 0x%x", mode, conf ? conf : "", status);
}

static unsigned count_lines(const char *s, const char *needle) {
	unsigned n = 0;
	for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* Every option that acts here: accepted without a line, and read back. */
static void test_values(void **state) {
	(void)state;
	expect_ok("values", VALUES_CONF);
	MP_ASSERT(err[0] == '\0', "options that act said: %s", err);
	expect_ok("defaults", NULL);
}

/* The options that do nothing: accepted, read back, one line each. */
static void test_notes(void **state) {
	(void)state;
	char conf[1024];
	snprintf(conf, sizeof(conf), "%s%s", NOTES_CONF,
	    MALLOC_PROF_CONFIG_PROF ? NOTES_PROF_CONF : "");
	expect_ok("notes", conf);
	MP_ASSERT(strstr(err, "unknown") == NULL &&
	    strstr(err, "invalid") == NULL, "%s", err);
	unsigned want = MP_ARRAY_SIZE(note_names);
	for (size_t i = 0; i < MP_ARRAY_SIZE(note_names); i++) {
		char key[96];
		snprintf(key, sizeof(key), "option \"%s\": no effect",
		    note_names[i]);
		MP_ASSERT(count_lines(err, key) == 1, "no line for %s",
		    note_names[i]);
	}
	MP_ASSERT(count_lines(err, "<malloc_prof>: ") == want,
	    "%u lines, want %u: %s", count_lines(err, "<malloc_prof>: "),
	    want, err);
	/* Set to their defaults they say nothing. */
	expect_ok("defaults", "trust_madvise:false,hpa:false,utrace:false,"
	    "san_guard_small:0,lg_extent_max_active_fit:6");
	MP_ASSERT(err[0] == '\0', "defaults said: %s", err);
}

/* Bad values are reported as for any option. */
static void test_bad(void **state) {
	(void)state;
	expect_ok("defaults", "slab_sizes:1-x:2,tcache_nslots_small_max:0,"
	    "lg_tcache_max:40,stats_interval:-2");
	MP_ASSERT(count_lines(err, "invalid value") == 1 &&
	    count_lines(err, "out of range") == 3, "%s", err);
	MP_ASSERT(strstr(err, "slab_sizes") != NULL, "%s", err);
}

/* xmalloc: an impossible size aborts with a line naming the call. */
static void test_xmalloc(void **state) {
	(void)state;
	static const char *const fns[] = {
		"malloc", "calloc", "posix_memalign", "realloc", "mallocx",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(fns); i++) {
		char mode[64];
		snprintf(mode, sizeof(mode), "oom_%s", fns[i]);
		expect_ok(mode, NULL);
		int status = mp_run_child_conf(mode, "xmalloc:true", err,
		    sizeof(err), NULL, 0, NULL);
		MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		    "%s with xmalloc: status 0x%x", fns[i], status);
		char want[96];
		snprintf(want, sizeof(want), "<malloc_prof>: %s(", fns[i]);
		MP_ASSERT(strstr(err, want) != NULL &&
		    strstr(err, "out of memory (xmalloc:true)") != NULL,
		    "%s: %s", fns[i], err);
	}
}

/* stats_interval: 8 MiB allocated with a 1 MiB interval prints about 8
 * times (each thread event, every 256 KiB, adds its bytes); none without
 * the option.  stats_interval_opts picks what is printed. */
static void test_stats_interval(void **state) {
	(void)state;
	/* junk:false: the events are on the fast paths, which junk turns
	 * off (it is on by default in debug builds). */
	expect_ok("churn", "junk:false,stats_interval:1048576,"
	    "stats_interval_opts:gmabl");
	unsigned n = count_lines(err, "___ Begin jemalloc statistics");
	MP_ASSERT(n >= 6 && n <= 9, "%u prints for 8 MiB", n);
	MP_ASSERT(strstr(err, "Arenas:") == NULL, "opts ignored");
	expect_ok("churn", "junk:false,stats_interval:4194304,"
	    "stats_interval_opts:J");
	n = count_lines(err, "\"jemalloc\"");
	MP_ASSERT(n >= 1 && n <= 2, "%u JSON prints for 8 MiB / 4 MiB", n);
	expect_ok("churn", "junk:false");
	MP_ASSERT(strstr(err, "statistics") == NULL, "printed: %s", err);
}

/* The tcache knobs: how many freed blocks a class keeps. */
static void lifo(const char *conf, unsigned *small, unsigned *large) {
	int status = mp_run_child_conf("lifo", conf, err, sizeof(err), out,
	    sizeof(out), NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "lifo (%s): 0x%x", conf, status);
	MP_ASSERT(sscanf(out, "small %u\nlarge %u", small, large) == 2,
	    "%s", out);
	print_message("# %s: small %u, large %u\n", conf, *small, *large);
}

/* No GC step meanwhile (events 1 TiB apart), and no junk, which takes
 * the cache bins away (on by default in debug builds). */
#define LIFO_CONF "junk:false,tcache_gc_incr_bytes:1099511627776"

/*
 * The counts are exact: lifo_run starts from empty bins, 300 mallocs of
 * 64 bytes take fills of half the bin's slots, and each free that finds
 * the bin full keeps 1/2^lg_tcache_flush_small_div of it and pushes one.
 * 128 slots (32 KiB / 64): five fills of 64 leave 20 cached, the frees
 * fill the bin after 108, then cycle 65..128, ending full.  Keeping 1/8:
 * 17 after free 109, 128 after 220, 17 after 221, 96 after 300.  16
 * slots: 4 left, full after 12, then 9..16, ending at 16; 32 slots (16
 * KiB >> 3 / 64): 4 left, 17..32, ending at 32; 40 slots: 0 left, 21..40,
 * ending at 40.  A large class keeps its first tcache_nslots_large
 * blocks (8 by default).
 */
static void test_tcache_knobs(void **state) {
	(void)state;
	unsigned small, large;
	lifo(LIFO_CONF, &small, &large);
	MP_ASSERT(small == 128 && large == 8, "default: %u, %u", small,
	    large);
	lifo(LIFO_CONF ",tcache_nslots_small_max:16,tcache_nslots_large:2",
	    &small, &large);
	MP_ASSERT(small == 16 && large == 2, "small_max:16, large:2 gave %u, "
	    "%u", small, large);
	lifo(LIFO_CONF ",lg_tcache_nslots_mul:-3", &small, &large);
	MP_ASSERT(small == 32, "nslots_mul:-3 gave %u", small);
	/* small_min wins over the slot count (16 KiB >> 10: 16 bytes). */
	lifo(LIFO_CONF ",lg_tcache_nslots_mul:-10,tcache_nslots_small_min:40",
	    &small, &large);
	MP_ASSERT(small == 40, "small_min:40 gave %u", small);
	lifo(LIFO_CONF ",lg_tcache_flush_small_div:3", &small, &large);
	MP_ASSERT(small == 96, "flush_small_div:3 kept %u", small);
	/* The events themselves: a GC step every 4 KiB visits the 64-byte
	 * bin more than once while it is idle and flushes half of it, so
	 * fewer are kept. */
	lifo("junk:false,tcache_gc_incr_bytes:4096", &small, &large);
	MP_ASSERT(small < 128, "GC every 4 KiB kept %u", small);
}

/* slab_sizes: jemalloc's example string, class by class. */
static void test_slab_sizes(void **state) {
	(void)state;
	expect_ok("slabs", "slab_sizes:1-4096:17|100-200:1|128-128:2");
	MP_ASSERT(err[0] == '\0', "%s", err);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_notes),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_xmalloc),
		cmocka_unit_test(test_stats_interval),
		cmocka_unit_test(test_tcache_knobs),
		cmocka_unit_test(test_slab_sizes),
	};
	return mp_run_tests(tests);
}
