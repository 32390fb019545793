/*
 * test/integration/mallctl_jemalloc.c - jemalloc 5.3 mallctl names added
 * for issue 18: the config.* read-outs, thread.peak.read/reset,
 * thread.idle, arenas.nhbins, arenas.lookup, arena.<i>.initialized and
 * the decay times arenas.*_decay_ms and arena.<i>.*_decay_ms.
 * Each name: its type's size (EINVAL otherwise), its mode (EPERM), and
 * its value or effect.
 */
#include "../test_util.h"

/* A node of `size` bytes: a read one byte short or long is EINVAL. */
static void check_wrong_size(const char *name, size_t size) {
	char buf[16];
	size_t lens[] = {size - 1, size + 1};
	for (size_t i = 0; i < MP_ARRAY_SIZE(lens); i++) {
		size_t len = lens[i];
		int r = mallctl(name, buf, &len, NULL, 0);
		MP_ASSERT(r == EINVAL, "%s read with %zu bytes: %d, not "
		    "EINVAL", name, lens[i], r);
	}
}

/* An r- node: a write gives EPERM. */
static void check_readonly(const char *name, size_t size) {
	char buf[16] = {0};
	int r = mallctl(name, NULL, NULL, buf, size);
	MP_ASSERT(r == EPERM, "%s write: %d, not EPERM", name, r);
}

/* A -- node: a read and a write give EPERM. */
static void check_action(const char *name) {
	uint64_t v = 0;
	size_t len = sizeof(v);
	int r = mallctl(name, &v, &len, NULL, 0);
	MP_ASSERT(r == EPERM, "%s read: %d, not EPERM", name, r);
	r = mallctl(name, NULL, NULL, &v, sizeof(v));
	MP_ASSERT(r == EPERM, "%s write: %d, not EPERM", name, r);
}

/* Whether this thread is on the malloc/free fast paths: its cache on,
 * no junk, no zero (then thread events fire and large blocks up to
 * tcache_max are cached). */
static bool fast_paths_on(void) {
	bool enabled = false, zero = true;
	const char *junk = NULL;
	MALLCTL_READ("thread.tcache.enabled", enabled);
	MALLCTL_READ("opt.zero", zero);
	MALLCTL_READ("opt.junk", junk);
	return enabled && !zero && strcmp(junk, "false") == 0;
}

/* ------------------------------------------------------------------------ */

static void test_config(void **state) {
	(void)state;
	const struct {
		const char *name;
		bool value;
	} bools[] = {
		{"config.cache_oblivious", true},
		{"config.fill", true},
		{"config.lazy_lock", false},
		{"config.prof_libgcc", false},
		{"config.prof_libunwind", false},
		{"config.stats", true},
		{"config.utrace", false},
		{"config.xmalloc", true},
		{"config.opt_safety_checks", false},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bools); i++) {
		bool v = !bools[i].value;
		MALLCTL_READ(bools[i].name, v);
		MP_ASSERT(v == bools[i].value, "%s = %d", bools[i].name, v);
		check_wrong_size(bools[i].name, sizeof(bool));
		check_readonly(bools[i].name, sizeof(bool));
	}
	const char *conf = NULL;
	MALLCTL_READ("config.malloc_conf", conf);
	assert_non_null(conf);
	assert_string_equal(conf, "");
	check_wrong_size("config.malloc_conf", sizeof(conf));
	check_readonly("config.malloc_conf", sizeof(conf));

	/* What the values claim.  fill: the junk and zero options exist. */
	const char *junk = NULL;
	bool zero;
	MALLCTL_READ("opt.junk", junk);
	MALLCTL_READ("opt.zero", zero);
	/* cache_oblivious built in: large blocks start on a cache line (on
	 * a page while opt.cache_oblivious is off, the default), on a page
	 * when asked (test/integration/cache_oblivious.c has the rest). */
	size_t page = 0;
	MALLCTL_READ("arenas.page", page);
	for (size_t sz = 16 * MP_KiB; sz <= 4 * MP_MiB; sz *= 4) {
		void *p = malloc(opaque_size(sz));
		assert_non_null(p);
		MP_ASSERT(mp_is_aligned(p, 64), "malloc(%zu) = %p is not "
		    "cache-line-aligned", sz, p);
		free(p);
		p = mallocx(opaque_size(sz), MALLOCX_ALIGN(page));
		assert_non_null(p);
		MP_ASSERT(mp_is_aligned(p, page), "mallocx(%zu, page) = %p is "
		    "not page-aligned", sz, p);
		free(p);
	}
	/* stats true: the counters move. */
	uint64_t a0 = 0, a1 = 0;
	MALLCTL_READ("thread.allocated", a0);
	void *p = malloc(opaque_size(100));
	assert_non_null(p);
	MALLCTL_READ("thread.allocated", a1);
	assert_true(a1 > a0);
	free(p);
}

static void test_thread_peak_modes(void **state) {
	(void)state;
	uint64_t v = 0;
	MALLCTL_READ("thread.peak.read", v);
	check_wrong_size("thread.peak.read", sizeof(uint64_t));
	check_readonly("thread.peak.read", sizeof(uint64_t));
	check_action("thread.peak.reset");
	MALLCTL_CALL("thread.peak.reset");
	size_t mib[4], miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("thread.peak.read", mib, &miblen),
	    0);
	assert_int_equal(miblen, 3);
	size_t len = sizeof(v);
	assert_int_equal(mallctlbymib(mib, miblen, &v, &len, NULL, 0), 0);
	assert_int_equal(mallctl("thread.peak", &v, &len, NULL, 0), ENOENT);
}

static void test_thread_peak_value(void **state) {
	(void)state;
	const size_t big = 4 * MP_MiB;
	uint64_t peak = UINT64_MAX;
	MALLCTL_CALL("thread.peak.reset");
	MALLCTL_READ("thread.peak.read", peak);
	assert_int_equal(peak, 0);

	void *p = malloc(opaque_size(big));
	assert_non_null(p);
	MALLCTL_READ("thread.peak.read", peak);
	MP_ASSERT(peak >= big, "peak %" PRIu64 " after malloc(%zu)", peak,
	    big);
	free(p);
	/* A peak stays after the free ... */
	uint64_t after_free = 0;
	MALLCTL_READ("thread.peak.read", after_free);
	assert_true(after_free >= peak);
	/* ... until a reset, which counts from the current value: the
	 * memory freed is not a negative peak. */
	MALLCTL_CALL("thread.peak.reset");
	MALLCTL_READ("thread.peak.read", peak);
	assert_int_equal(peak, 0);
	p = malloc(opaque_size(1000));
	assert_non_null(p);
	MALLCTL_READ("thread.peak.read", peak);
	MP_ASSERT(peak >= 1000 && peak < big, "peak %" PRIu64 " after "
	    "malloc(1000)", peak);
	free(p);
}

/* A high that came and went between two reads is seen at the thread's
 * next event, if it has events (the fast paths are on). */
static void test_thread_peak_events(void **state) {
	(void)state;
	if (!fast_paths_on()) {
		MP_SKIP("no thread events without the fast paths (tcache off, "
		    "junk or zero): the peak is checked at reads only");
	}
	const size_t big = 2 * MP_MiB;
	enum { N = 16384 };            /* 16384 x 64 B: four event intervals */
	static void *small[N];
	MALLCTL_CALL("thread.peak.reset");
	void *p = malloc(opaque_size(big));
	assert_non_null(p);
	for (size_t i = 0; i < N; i++) {
		small[i] = malloc(opaque_size(64));
		assert_non_null(small[i]);
	}
	free(p);
	mp_free_all(small, N);
	uint64_t peak = 0;
	MALLCTL_READ("thread.peak.read", peak);
	MP_ASSERT(peak >= big, "peak %" PRIu64 " below the %zu bytes held "
	    "across several events", peak, big);
}

static void *peak_thread(void *arg) {
	uint64_t *out = arg;
	size_t len = sizeof(*out);
	void *p = malloc(opaque_size(64 * MP_KiB));
	if (p == NULL || mallctl("thread.peak.read", out, &len, NULL, 0) != 0)
		*out = UINT64_MAX;
	free(p);
	return NULL;
}

/* The peak is the calling thread's own. */
static void test_thread_peak_per_thread(void **state) {
	(void)state;
	const size_t big = 8 * MP_MiB;
	void *p = malloc(opaque_size(big));
	assert_non_null(p);
	uint64_t other = UINT64_MAX;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, peak_thread, &other), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	MP_ASSERT(other >= 64 * MP_KiB && other < big, "new thread's peak %"
	    PRIu64, other);
	free(p);
}

static void test_thread_idle(void **state) {
	(void)state;
	check_action("thread.idle");
	/* A large block in the cache (when the thread caches them) and
	 * small ones in its bins. */
	void *small[256];
	for (size_t i = 0; i < MP_ARRAY_SIZE(small); i++) {
		small[i] = malloc(opaque_size(48));
		assert_non_null(small[i]);
	}
	void *p = malloc(opaque_size(32 * MP_KiB));
	assert_non_null(p);
	memset(p, 1, 32 * MP_KiB);
	free(p);
	mp_free_all(small, MP_ARRAY_SIZE(small));
	size_t active0 = mp_stat("stats.active");
	size_t resident0 = mp_stat("stats.resident");

	MALLCTL_CALL("thread.idle");
	size_t active1 = mp_stat("stats.active");
	size_t resident1 = mp_stat("stats.resident");
	MP_ASSERT(resident1 <= resident0, "stats.resident %zu -> %zu",
	    resident0, resident1);
	MP_ASSERT(active1 <= active0, "stats.active %zu -> %zu", active0,
	    active1);
	size_t tcache_max = 0;
	MALLCTL_READ("arenas.tcache_max", tcache_max);
	if (fast_paths_on() && tcache_max >= 32 * MP_KiB) {
		/* The cached block went back to its arena. */
		MP_ASSERT(active1 + 32 * MP_KiB <= active0, "stats.active %zu "
		    "-> %zu: the cache kept the 32 KiB block", active0,
		    active1);
	}
	/* This thread alone uses its arena: its dirty pages are purged. */
	unsigned ind = 0, nthreads = 0;
	MALLCTL_READ("thread.arena", ind);
	size_t len = sizeof(nthreads);
	assert_int_equal(mallctl_fmt(&nthreads, &len, NULL, 0,
	    "stats.arenas.%u.nthreads", ind), 0);
	if (nthreads == 1) {
		size_t pdirty = SIZE_MAX;
		len = sizeof(pdirty);
		assert_int_equal(mallctl_fmt(&pdirty, &len, NULL, 0,
		    "stats.arenas.%u.pdirty", ind), 0);
		assert_int_equal(pdirty, 0);
	}
	/* The thread goes on allocating afterwards. */
	p = malloc(opaque_size(32 * MP_KiB));
	assert_non_null(p);
	free(p);
}

static void test_arenas_nhbins(void **state) {
	(void)state;
	unsigned nhbins = 0, nbins = 0;
	size_t tcache_max = 0;
	MALLCTL_READ("arenas.nhbins", nhbins);
	MALLCTL_READ("arenas.nbins", nbins);
	MALLCTL_READ("arenas.tcache_max", tcache_max);
	check_wrong_size("arenas.nhbins", sizeof(unsigned));
	check_readonly("arenas.nhbins", sizeof(unsigned));
	/* Every small class, and the large ones up to tcache_max. */
	unsigned want = nbins;
	for (unsigned i = 0;; i++) {
		size_t sz = 0, len = sizeof(sz);
		assert_int_equal(mallctl_fmt(&sz, &len, NULL, 0,
		    "arenas.lextent.%u.size", i), 0);
		if (sz > tcache_max)
			break;
		want++;
	}
	MP_ASSERT(nhbins == want, "arenas.nhbins %u, expected %u (nbins %u, "
	    "tcache_max %zu)", nhbins, want, nbins, tcache_max);
}

static int lookup(const void *p, unsigned *ind) {
	size_t len = sizeof(*ind);
	return mallctl("arenas.lookup", ind, &len, (void *)&p, sizeof(p));
}

static int lookup_static;

static void test_arenas_lookup(void **state) {
	(void)state;
	unsigned mine = 0, ind = 12345;
	MALLCTL_READ("thread.arena", mine);
	const size_t sizes[] = {8, 64, 3000, 20 * MP_KiB, 3 * MP_MiB};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		char *p = malloc(opaque_size(sizes[i]));
		assert_non_null(p);
		ind = 12345;
		assert_int_equal(lookup(p, &ind), 0);
		MP_ASSERT(ind == mine, "lookup of malloc(%zu): %u, thread.arena "
		    "%u", sizes[i], ind, mine);
		/* Any byte of the block. */
		ind = 12345;
		assert_int_equal(lookup(p + sizes[i] - 1, &ind), 0);
		assert_int_equal(ind, mine);
		free(p);
	}
	/* A block from another arena. */
	unsigned created = 0;
	MALLCTL_READ("arenas.create", created);
	void *q = mallocx(64, MALLOCX_ARENA(created) | MALLOCX_TCACHE_NONE);
	assert_non_null(q);
	assert_int_equal(lookup(q, &ind), 0);
	assert_int_equal(ind, created);
	dallocx(q, MALLOCX_TCACHE_NONE);

	/* Not this allocator's: EINVAL. */
	int on_stack = 0;
	assert_int_equal(lookup(&on_stack, &ind), EINVAL);
	assert_int_equal(lookup(&lookup_static, &ind), EINVAL);
	assert_int_equal(lookup(NULL, &ind), EINVAL);
	assert_int_equal(lookup((void *)((uintptr_t)1 << 60), &ind), EINVAL);

	/* Argument errors. */
	void *p = malloc(opaque_size(64));
	assert_non_null(p);
	size_t len = sizeof(ind);
	assert_int_equal(mallctl("arenas.lookup", &ind, &len, NULL, 0),
	    EINVAL);
	assert_int_equal(mallctl("arenas.lookup", &ind, &len, &p, 4),
	    EINVAL);
	len = sizeof(ind) - 1;
	assert_int_equal(mallctl("arenas.lookup", &ind, &len, &p,
	    sizeof(p)), EINVAL);
	free(p);
}

static void test_arena_initialized(void **state) {
	(void)state;
	unsigned mine = 0, narenas = 0;
	bool init = false;
	MALLCTL_READ("thread.arena", mine);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.initialized", mine);
	MALLCTL_READ(name, init);
	assert_true(init);
	check_wrong_size(name, sizeof(bool));
	check_readonly(name, sizeof(bool));
	init = false;
	MALLCTL_READ("arena.4096.initialized", init);
	assert_true(init);

	unsigned created = 0;
	MALLCTL_READ("arenas.create", created);
	snprintf(name, sizeof(name), "arena.%u.initialized", created);
	init = false;
	MALLCTL_READ(name, init);
	assert_true(init);

	/* It agrees with the statistics: stats.arenas.<i> exists exactly
	 * for the arenas that are made. */
	mp_epoch();
	MALLCTL_READ("arenas.narenas", narenas);
	unsigned ninit = 0;
	for (unsigned i = 0; i < narenas; i++) {
		size_t len = sizeof(init);
		assert_int_equal(mallctl_fmt(&init, &len, NULL, 0,
		    "arena.%u.initialized", i), 0);
		size_t pactive;
		len = sizeof(pactive);
		int r = mallctl_fmt(&pactive, &len, NULL, 0,
		    "stats.arenas.%u.pactive", i);
		MP_ASSERT((r == 0) == init, "arena %u: initialized %d, "
		    "stats.arenas.%u.pactive %d", i, init, i, r);
		ninit += init;
	}
	assert_true(ninit >= 2);
	size_t len = sizeof(init);
	assert_int_equal(mallctl_fmt(&init, &len, NULL, 0,
	    "arena.%u.initialized", narenas), ENOENT);
}

/* ssize_t decay-time nodes: size, range and newlen errors. */
static void check_decay_ms_errors(const char *name) {
	check_wrong_size(name, sizeof(ssize_t));
	ssize_t bad[] = {-2, (ssize_t)2147483647000 + 1};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad); i++) {
		int r = mallctl(name, NULL, NULL, &bad[i], sizeof(bad[i]));
		MP_ASSERT(r == EFAULT, "%s = %zd: %d, not EFAULT", name,
		    bad[i], r);
	}
	ssize_t v = 5;
	assert_int_equal(mallctl(name, NULL, NULL, &v, sizeof(int)), EINVAL);
}

static ssize_t read_ssize(const char *fmt, unsigned i) {
	ssize_t v = -12345;
	size_t len = sizeof(v);
	int r = mallctl_fmt(&v, &len, NULL, 0, fmt, i);
	MP_ASSERT(r == 0, fmt, i);
	return v;
}

static void write_ssize(const char *fmt, unsigned i, ssize_t v) {
	int r = mallctl_fmt(NULL, NULL, &v, sizeof(v), fmt, i);
	MP_ASSERT(r == 0, "write %zd: %d", v, r);
}

/* The defaults for arenas made from now on; opt.* and the arenas made
 * already keep theirs. */
static void test_arenas_decay_ms(void **state) {
	(void)state;
	const char *const kinds[] = {"dirty", "muzzy"};
	for (size_t k = 0; k < MP_ARRAY_SIZE(kinds); k++) {
		char name[64], opt_name[64], arena_fmt[64];
		snprintf(name, sizeof(name), "arenas.%s_decay_ms", kinds[k]);
		snprintf(opt_name, sizeof(opt_name), "opt.%s_decay_ms",
		    kinds[k]);
		snprintf(arena_fmt, sizeof(arena_fmt), "arena.%%u.%s_decay_ms",
		    kinds[k]);
		ssize_t def = -12345, opt = -12345;
		MALLCTL_READ(name, def);
		MALLCTL_READ(opt_name, opt);
		assert_int_equal(def, opt);
		check_decay_ms_errors(name);
		unsigned mine = 0;
		MALLCTL_READ("thread.arena", mine);
		assert_int_equal(read_ssize(arena_fmt, mine), opt);

		ssize_t v = 1234, old = -12345;
		size_t len = sizeof(old);
		assert_int_equal(mallctl(name, &old, &len, &v, sizeof(v)), 0);
		assert_int_equal(old, def);
		MALLCTL_READ(name, old);
		assert_int_equal(old, 1234);
		unsigned created = 0;
		MALLCTL_READ("arenas.create", created);
		assert_int_equal(read_ssize(arena_fmt, created), 1234);
		assert_int_equal(read_ssize(arena_fmt, mine), opt);
		MALLCTL_READ(opt_name, old);
		assert_int_equal(old, opt);
		MALLCTL_WRITE(name, def);
		MALLCTL_READ("arenas.create", created);
		assert_int_equal(read_ssize(arena_fmt, created), def);
	}
}

static size_t arena_pages(const char *kind, unsigned ind) {
	size_t v = SIZE_MAX, len = sizeof(v);
	mp_epoch();
	int r = mallctl_fmt(&v, &len, NULL, 0, "stats.arenas.%u.%s", ind,
	    kind);
	MP_ASSERT(r == 0, "stats.arenas.%u.%s: %d", ind, kind, r);
	return v;
}

/* One arena's times, in effect at once. */
static void test_arena_decay_ms(void **state) {
	(void)state;
	unsigned a = 0;
	MALLCTL_READ("arenas.create", a);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", a);
	check_decay_ms_errors(name);
	snprintf(name, sizeof(name), "arena.%u.muzzy_decay_ms", a);
	check_decay_ms_errors(name);
	ssize_t v = 0;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("arena.4096.dirty_decay_ms", &v, &len, NULL,
	    0), EFAULT);
	assert_int_equal(mallctl("arena.4096.muzzy_decay_ms", NULL, NULL, &v,
	    sizeof(v)), EFAULT);
	/* An arena index handed out but not made yet: EFAULT too. */
	unsigned narenas = 0;
	MALLCTL_READ("arenas.narenas", narenas);
	for (unsigned i = 0; i < narenas; i++) {
		bool init = true;
		len = sizeof(init);
		assert_int_equal(mallctl_fmt(&init, &len, NULL, 0,
		    "arena.%u.initialized", i), 0);
		if (!init) {
			len = sizeof(v);
			assert_int_equal(mallctl_fmt(&v, &len, NULL, 0,
			    "arena.%u.dirty_decay_ms", i), EFAULT);
			break;
		}
	}

	/* Never decay: a freed block stays dirty. */
	write_ssize("arena.%u.dirty_decay_ms", a, -1);
	write_ssize("arena.%u.muzzy_decay_ms", a, -1);
	assert_int_equal(read_ssize("arena.%u.dirty_decay_ms", a), -1);
	const size_t sz = MP_MiB, pages = sz / mp_page_size();
	void *p = mallocx(sz, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	memset(p, 0x33, sz);
	dallocx(p, MALLOCX_TCACHE_NONE);
	size_t dirty = arena_pages("pdirty", a);
	MP_ASSERT(dirty >= pages, "pdirty %zu after freeing %zu pages",
	    dirty, pages);
	/* dirty_decay_ms 0: purged by the write, to muzzy (muzzy never
	 * decays) where MADV_FREE works, else to clean. */
	write_ssize("arena.%u.dirty_decay_ms", a, 0);
	assert_int_equal(arena_pages("pdirty", a), 0);
	size_t muzzy = arena_pages("pmuzzy", a);
	MP_ASSERT(muzzy == 0 || muzzy >= pages, "pmuzzy %zu", muzzy);
	write_ssize("arena.%u.muzzy_decay_ms", a, 0);
	assert_int_equal(arena_pages("pmuzzy", a), 0);
	assert_int_equal(read_ssize("arena.%u.muzzy_decay_ms", a), 0);
	/* And 0 purges what is freed from now on at once. */
	p = mallocx(sz, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
	assert_non_null(p);
	memset(p, 0x44, sz);
	dallocx(p, MALLOCX_TCACHE_NONE);
	assert_int_equal(arena_pages("pdirty", a), 0);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_thread_peak_modes),
		cmocka_unit_test(test_thread_peak_value),
		cmocka_unit_test(test_thread_peak_events),
		cmocka_unit_test(test_thread_peak_per_thread),
		cmocka_unit_test(test_thread_idle),
		cmocka_unit_test(test_arenas_nhbins),
		cmocka_unit_test(test_arenas_lookup),
		cmocka_unit_test(test_arena_initialized),
		cmocka_unit_test(test_arenas_decay_ms),
		cmocka_unit_test(test_arena_decay_ms),
	};
	return mp_run_tests(tests);
}
