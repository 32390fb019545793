/*
 * test/integration/mallctl.c - the mallctl namespace: names, value types,
 * error codes, MIBs, statistics invariants and malloc_stats_print.
 *
 * mallctl.conf (next to this file) sets a few options through the conf
 * environment variable; test_opt_values checks they arrived.
 */
#include "../test_util.h"

#include <sys/types.h>

#define CONF_NARENAS 3u
#define CONF_DIRTY_DECAY_MS 5000
#define CONF_MUZZY_DECAY_MS 2000
#define CONF_TCACHE_MAX ((size_t)16384)

static size_t next_class(size_t c) {
	return mp_expected_size_class(c + 1);
}

/* ------------------------------------------------------------------------ */
/* Simple nodes.                                                            */

static void test_version(void **state) {
	(void)state;
	const char *v = NULL;
	MALLCTL_READ("version", v);
	assert_non_null(v);
	unsigned major, minor, patch;
	MP_ASSERT(sscanf(v, "%u.%u.%u", &major, &minor, &patch) == 3,
	    "version \"%s\" is not MAJOR.MINOR.PATCH", v);
#ifdef MALLOC_PROF_VERSION
	assert_string_equal(v, MALLOC_PROF_VERSION);
#endif
	/* Stable across calls. */
	const char *v2 = NULL;
	MALLCTL_READ("version", v2);
	assert_string_equal(v, v2);
}

static void test_epoch(void **state) {
	(void)state;
	uint64_t e0 = 0, e1 = 0, e2 = 0;
	MALLCTL_READ("epoch", e0);
	e1 = mp_epoch();
	MP_ASSERT(e1 > e0, "epoch %" PRIu64 " -> %" PRIu64 " after a write",
	    e0, e1);
	MALLCTL_READ("epoch", e2);
	assert_int_equal(e2, e1);
	uint64_t e3 = mp_epoch();
	assert_true(e3 > e2);
	/* Plain write without reading back. */
	uint64_t one = 1;
	MALLCTL_WRITE("epoch", one);
	uint64_t e4 = 0;
	MALLCTL_READ("epoch", e4);
	assert_true(e4 > e3);
}

static void test_config(void **state) {
	(void)state;
	bool debug = true, prof = true;
	MALLCTL_READ("config.debug", debug);
	MALLCTL_READ("config.prof", prof);
	assert_true(debug == true || debug == false);
	assert_true(prof == true || prof == false);
#ifdef MALLOC_PROF_CONFIG_DEBUG
	/* Agree with the configuration recorded in <malloc_prof.h>. */
	assert_int_equal(debug, MALLOC_PROF_CONFIG_DEBUG);
	assert_int_equal(prof, MALLOC_PROF_CONFIG_PROF);
#endif
	const char *prefix = NULL;
	MALLCTL_READ("config.prefix", prefix);
	assert_non_null(prefix);
	if (getenv("MALLOC_PROF_PREFIX") != NULL) {
		assert_string_equal(prefix, getenv("MALLOC_PROF_PREFIX"));
	}
#ifdef MALLOC_PROF_PREFIX
	assert_string_equal(prefix, MALLOC_PROF_PREFIX);
#endif
}

/* Every documented node is readable with exactly its type's size. */
static void test_node_types(void **state) {
	(void)state;
	const struct {
		const char *name;
		size_t size;
	} nodes[] = {
		{"version", sizeof(const char *)},
		{"epoch", sizeof(uint64_t)},
		{"config.debug", sizeof(bool)},
		{"config.prof", sizeof(bool)},
		{"config.prefix", sizeof(const char *)},
		{"opt.narenas", sizeof(unsigned)},
		{"opt.tcache", sizeof(bool)},
		{"opt.tcache_max", sizeof(size_t)},
		{"opt.dirty_decay_ms", sizeof(ssize_t)},
		{"opt.muzzy_decay_ms", sizeof(ssize_t)},
		{"opt.retain", sizeof(bool)},
		{"opt.background_thread", sizeof(bool)},
		{"opt.max_background_threads", sizeof(size_t)},
		{"background_thread", sizeof(bool)},
		{"stats.background_thread.num_threads", sizeof(size_t)},
		{"stats.background_thread.num_runs", sizeof(uint64_t)},
		{"stats.background_thread.run_interval", sizeof(uint64_t)},
		{"opt.abort", sizeof(bool)},
		{"opt.abort_conf", sizeof(bool)},
		{"opt.zero", sizeof(bool)},
		{"opt.junk", sizeof(const char *)},
		{"opt.zero_realloc", sizeof(const char *)},
		{"opt.stats_print", sizeof(bool)},
		{"thread.arena", sizeof(unsigned)},
		{"thread.allocated", sizeof(uint64_t)},
		{"thread.deallocated", sizeof(uint64_t)},
		{"thread.allocatedp", sizeof(uint64_t *)},
		{"thread.deallocatedp", sizeof(uint64_t *)},
		{"thread.tcache.enabled", sizeof(bool)},
		{"arenas.narenas", sizeof(unsigned)},
		{"arenas.quantum", sizeof(size_t)},
		{"arenas.page", sizeof(size_t)},
		{"arenas.nbins", sizeof(unsigned)},
		{"arenas.bin.0.size", sizeof(size_t)},
		{"arenas.nlextents", sizeof(unsigned)},
		{"arenas.lextent.0.size", sizeof(size_t)},
		{"stats.allocated", sizeof(size_t)},
		{"stats.active", sizeof(size_t)},
		{"stats.metadata", sizeof(size_t)},
		{"stats.resident", sizeof(size_t)},
		{"stats.mapped", sizeof(size_t)},
		{"stats.retained", sizeof(size_t)},
		{"stats.arenas.0.pactive", sizeof(size_t)},
		{"stats.arenas.0.pdirty", sizeof(size_t)},
		{"stats.arenas.4096.pactive", sizeof(size_t)},
		{"stats.arenas.4096.pdirty", sizeof(size_t)},
	};
	mp_epoch();
	for (size_t i = 0; i < MP_ARRAY_SIZE(nodes); i++) {
		union {
			unsigned char bytes[64];
			uint64_t align;
		} buf;
		size_t sz = nodes[i].size;
		int r = mallctl(nodes[i].name, buf.bytes, &sz, NULL, 0);
		MP_ASSERT(r == 0, "mallctl(\"%s\") = %d (%s)", nodes[i].name, r,
		    strerror(r));
		MP_ASSERT(sz == nodes[i].size, "mallctl(\"%s\"): size %zu, "
		    "want %zu", nodes[i].name, sz, nodes[i].size);
		/* One byte too many or too few is rejected. */
		sz = nodes[i].size + 1;
		r = mallctl(nodes[i].name, buf.bytes, &sz, NULL, 0);
		MP_ASSERT(r == EINVAL, "mallctl(\"%s\") with oldlen %zu = %d, "
		    "want EINVAL", nodes[i].name, nodes[i].size + 1, r);
		if (nodes[i].size > 1) {
			sz = nodes[i].size - 1;
			r = mallctl(nodes[i].name, buf.bytes, &sz, NULL, 0);
			MP_ASSERT(r == EINVAL, "mallctl(\"%s\") with oldlen %zu "
			    "= %d, want EINVAL", nodes[i].name,
			    nodes[i].size - 1, r);
		}
	}
}

/* Option values: those set by mallctl.conf and the defaults. */
static void test_opt_values(void **state) {
	(void)state;
	bool b;
	MALLCTL_READ("opt.tcache", b);
	assert_true(b);
	MALLCTL_READ("opt.abort", b);
	assert_false(b);
	MALLCTL_READ("opt.abort_conf", b);
	assert_false(b);
	MALLCTL_READ("opt.zero", b);
	assert_false(b);
	MALLCTL_READ("opt.stats_print", b);
	assert_false(b);
	const char *s = NULL;
	MALLCTL_READ("opt.zero_realloc", s);
	assert_non_null(s);
	assert_string_equal(s, "free");
	MALLCTL_READ("opt.junk", s);
	assert_non_null(s);
	MP_ASSERT(strcmp(s, "false") == 0 || strcmp(s, "true") == 0 ||
	    strcmp(s, "alloc") == 0 || strcmp(s, "free") == 0,
	    "opt.junk = \"%s\"", s);
	bool debug = false;
	MALLCTL_READ("config.debug", debug);
	if (!debug) {
		assert_string_equal(s, "false");
	}

	unsigned narenas = 0, arenas_narenas = 0;
	MALLCTL_READ("opt.narenas", narenas);
	MALLCTL_READ("arenas.narenas", arenas_narenas);
	assert_true(narenas >= 1);
	MP_ASSERT(arenas_narenas >= narenas, "arenas.narenas %u < opt.narenas"
	    " %u", arenas_narenas, narenas);
	ssize_t dirty = 0, muzzy = 0;
	size_t tcache_max = 0;
	MALLCTL_READ("opt.dirty_decay_ms", dirty);
	MALLCTL_READ("opt.muzzy_decay_ms", muzzy);
	MALLCTL_READ("opt.tcache_max", tcache_max);
	assert_true(dirty >= -1);
	assert_true(muzzy >= -1);
	assert_true(tcache_max > 0);

	const char *conf = mp_env_conf();
	if (conf == NULL || strstr(conf, "narenas:3") == NULL) {
		if (mp_under_harness()) {
			MP_FAIL("the harness did not export mallctl.conf "
			    "(MALLOC_PROF_CONF_ENV=%s, value %s)",
			    getenv("MALLOC_PROF_CONF_ENV") ?
			    getenv("MALLOC_PROF_CONF_ENV") : "(unset)",
			    conf ? conf : "(unset)");
		}
		MP_SKIP("mallctl.conf not in the environment (run by hand)");
	}
	assert_int_equal(narenas, CONF_NARENAS);
	assert_int_equal(dirty, CONF_DIRTY_DECAY_MS);
	assert_int_equal(muzzy, CONF_MUZZY_DECAY_MS);
	assert_int_equal(tcache_max, CONF_TCACHE_MAX);
}

static void test_readonly(void **state) {
	(void)state;
	const char *s = "9.9.9";
	assert_int_equal(mallctl("version", NULL, NULL, &s, sizeof(s)), EPERM);
	const char *v = NULL;
	MALLCTL_READ("version", v);
	assert_string_not_equal(v, "9.9.9");

	unsigned u = 77, before = 0, after = 0;
	MALLCTL_READ("opt.narenas", before);
	assert_int_equal(mallctl("opt.narenas", NULL, NULL, &u, sizeof(u)),
	    EPERM);
	MALLCTL_READ("opt.narenas", after);
	assert_int_equal(before, after);

	size_t z = 32;
	assert_int_equal(mallctl("arenas.quantum", NULL, NULL, &z, sizeof(z)),
	    EPERM);
	assert_int_equal(mallctl("stats.allocated", NULL, NULL, &z, sizeof(z)),
	    EPERM);
	bool b = true;
	assert_int_equal(mallctl("config.debug", NULL, NULL, &b, sizeof(b)),
	    EPERM);
	assert_int_equal(mallctl("opt.tcache", NULL, NULL, &b, sizeof(b)),
	    EPERM);
	assert_int_equal(mallctl("arenas.nbins", NULL, NULL, &u, sizeof(u)),
	    EPERM);
	/* Read and write at once on a read-only node. */
	size_t vsz = sizeof(v);
	assert_int_equal(mallctl("version", &v, &vsz, &s, sizeof(s)), EPERM);
}

static void test_error_codes(void **state) {
	(void)state;
	const char *const missing[] = {
		"no.such.node", "nosuchnode", "", "stats", "opt", "arenas",
		"arenas.bin", "arenas.bin.0", "thread", "thread.tcache",
		"version.major", "stats.allocatedx", "stats.arenas",
		"arenas.bin.x.size", "opt.no_such_option", "config",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(missing); i++) {
		size_t v = 0, sz = sizeof(v);
		int r = mallctl(missing[i], &v, &sz, NULL, 0);
		MP_ASSERT(r == ENOENT, "mallctl(\"%s\") = %d, want ENOENT",
		    missing[i], r);
	}
	/* Wrong sizes. */
	uint64_t e = 0;
	size_t sz = 4;
	assert_int_equal(mallctl("epoch", &e, &sz, NULL, 0), EINVAL);
	assert_int_equal(mallctl("epoch", NULL, NULL, &e, 4), EINVAL);
	assert_int_equal(mallctl("epoch", NULL, NULL, &e, 16), EINVAL);
	unsigned a = 0;
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &a, 8), EINVAL);
	bool b = true;
	assert_int_equal(mallctl("thread.tcache.enabled", NULL, NULL, &b, 4),
	    EINVAL);
	const char *s = NULL;
	sz = sizeof(s) + 1;
	assert_int_equal(mallctl("version", &s, &sz, NULL, 0), EINVAL);
	/* Out-of-range indices. */
	unsigned narenas = 0, nbins = 0, nlextents = 0;
	MALLCTL_READ("arenas.narenas", narenas);
	MALLCTL_READ("arenas.nbins", nbins);
	MALLCTL_READ("arenas.nlextents", nlextents);
	size_t v = 0;
	sz = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0, "arenas.bin.%u.size",
	    nbins), ENOENT);
	sz = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "arenas.lextent.%u.size", nlextents), ENOENT);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.purge",
	    narenas + 1000), ENOENT);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.decay",
	    narenas + 1000), ENOENT);
	sz = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "stats.arenas.%u.pactive", narenas + 1000), ENOENT);
}

/* ------------------------------------------------------------------------ */
/* MIBs.                                                                    */

static void test_mib_bins(void **state) {
	(void)state;
	unsigned nbins = 0, nlextents = 0;
	MALLCTL_READ("arenas.nbins", nbins);
	MALLCTL_READ("arenas.nlextents", nlextents);
	assert_true(nbins > 0);
	assert_true(nlextents > 0);

	size_t mib[8];
	size_t miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arenas.bin.0.size", mib, &miblen),
	    0);
	assert_int_equal(miblen, 4);
	size_t prev = 0;
	for (unsigned i = 0; i < nbins; i++) {
		size_t by_mib = 0, by_name = 0, sz = sizeof(size_t);
		mib[2] = i;
		int r = mallctlbymib(mib, miblen, &by_mib, &sz, NULL, 0);
		MP_ASSERT(r == 0, "mallctlbymib(arenas.bin.%u.size) = %d", i, r);
		assert_int_equal(sz, sizeof(size_t));
		sz = sizeof(size_t);
		assert_int_equal(mallctl_fmt(&by_name, &sz, NULL, 0,
		    "arenas.bin.%u.size", i), 0);
		assert_int_equal(by_mib, by_name);
		size_t want = (i == 0) ? 16 : next_class(prev);
		MP_ASSERT(by_mib == want, "arenas.bin.%u.size = %zu, want %zu",
		    i, by_mib, want);
		assert_int_equal(nallocx(by_mib, 0), by_mib);
		prev = by_mib;
	}
	size_t largest_small = prev;
	/* Past the last bin. */
	size_t v = 0, sz = sizeof(v);
	mib[2] = nbins;
	assert_int_equal(mallctlbymib(mib, miblen, &v, &sz, NULL, 0), ENOENT);
	/* A partial MIB does not name a value. */
	sz = sizeof(v);
	mib[2] = 0;
	assert_int_equal(mallctlbymib(mib, 3, &v, &sz, NULL, 0), ENOENT);

	/* Large extents continue the size-class sequence. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arenas.lextent.0.size", mib,
	    &miblen), 0);
	assert_int_equal(miblen, 4);
	prev = 0;
	for (unsigned i = 0; i < nlextents && i < 64; i++) {
		size_t by_mib = 0;
		sz = sizeof(by_mib);
		mib[2] = i;
		assert_int_equal(mallctlbymib(mib, miblen, &by_mib, &sz, NULL,
		    0), 0);
		size_t want = (i == 0) ? 16384 : next_class(prev);
		MP_ASSERT(by_mib == want, "arenas.lextent.%u.size = %zu, want "
		    "%zu", i, by_mib, want);
		prev = by_mib;
	}
	sz = sizeof(v);
	mib[2] = nlextents;
	assert_int_equal(mallctlbymib(mib, miblen, &v, &sz, NULL, 0), ENOENT);
	/* The small classes end right below the first large one. */
	MP_ASSERT(next_class(largest_small) == 16384,
	    "largest bin %zu (nbins %u) is not just below arenas.lextent.0 "
	    "(16384)", largest_small, nbins);
}

static void test_mib_misc(void **state) {
	(void)state;
	size_t mib[8], miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("version", mib, &miblen), 0);
	assert_int_equal(miblen, 1);
	const char *a = NULL, *b = NULL;
	size_t sz = sizeof(a);
	assert_int_equal(mallctlbymib(mib, miblen, &a, &sz, NULL, 0), 0);
	MALLCTL_READ("version", b);
	assert_string_equal(a, b);

	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("no.such.node", mib, &miblen),
	    ENOENT);

	/* stats.arenas.<i>.pactive by MIB, changing the arena index. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("stats.arenas.0.pactive", mib,
	    &miblen), 0);
	assert_int_equal(miblen, 4);
	mp_epoch();
	size_t v0 = 0, vall = 0;
	sz = sizeof(size_t);
	assert_int_equal(mallctlbymib(mib, miblen, &v0, &sz, NULL, 0), 0);
	mib[2] = MALLCTL_ARENAS_ALL;
	sz = sizeof(size_t);
	assert_int_equal(mallctlbymib(mib, miblen, &vall, &sz, NULL, 0), 0);
	MP_ASSERT(vall >= v0, "all-arena pactive %zu < arena 0 pactive %zu",
	    vall, v0);

	/* Writes through a MIB, and MIB of a write-and-read node. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("epoch", mib, &miblen), 0);
	uint64_t e0 = 0, e1 = 1;
	sz = sizeof(e0);
	assert_int_equal(mallctlbymib(mib, miblen, &e0, &sz, NULL, 0), 0);
	sz = sizeof(e1);
	assert_int_equal(mallctlbymib(mib, miblen, &e1, &sz, &e1, sizeof(e1)),
	    0);
	assert_true(e1 > e0);

	/* Calls through a MIB: arena.<i>.purge for several arenas. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arena.0.purge", mib, &miblen), 0);
	assert_int_equal(miblen, 3);
	assert_int_equal(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0), 0);
	mib[1] = MALLCTL_ARENAS_ALL;
	assert_int_equal(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0), 0);
}

/* ------------------------------------------------------------------------ */
/* arenas.* and arena.<i>.*                                                 */

static void test_arenas(void **state) {
	(void)state;
	size_t quantum = 0, page = 0;
	MALLCTL_READ("arenas.quantum", quantum);
	MALLCTL_READ("arenas.page", page);
	assert_int_equal(quantum, 16);
	assert_int_equal(page, 4096);
	assert_int_equal(page, mp_page_size());
	size_t bin0 = 0, lext0 = 0;
	MALLCTL_READ("arenas.bin.0.size", bin0);
	MALLCTL_READ("arenas.lextent.0.size", lext0);
	assert_int_equal(bin0, 16);
	assert_int_equal(lext0, 16384);

	unsigned n0 = 0, n1 = 0, a = 0, b = 0;
	MALLCTL_READ("arenas.narenas", n0);
	assert_true(n0 >= 1);
	MALLCTL_READ("arenas.create", a);
	MALLCTL_READ("arenas.create", b);
	MALLCTL_READ("arenas.narenas", n1);
	assert_int_equal(a, n0);
	assert_int_equal(b, n0 + 1);
	assert_int_equal(n1, n0 + 2);
	/* The new arenas have stats and can be purged. */
	mp_epoch();
	size_t v = 0, sz = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "stats.arenas.%u.pactive", b), 0);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.purge", b),
	    0);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.decay", a),
	    0);
}

static void test_arena_purge_decay(void **state) {
	(void)state;
	MALLCTL_CALL("arena.0.purge");
	MALLCTL_CALL("arena.0.decay");
	MALLCTL_CALL("arena.4096.purge");
	MALLCTL_CALL("arena.4096.decay");
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.purge",
	    (unsigned)MALLCTL_ARENAS_ALL), 0);
	/* These nodes take no value. */
	size_t v = 0, sz = sizeof(v);
	assert_int_not_equal(mallctl("arena.0.purge", &v, &sz, NULL, 0), 0);
	assert_int_not_equal(mallctl("arena.0.decay", NULL, NULL, &v,
	    sizeof(v)), 0);

	/* Purging an arena leaves it no dirty pages. */
	unsigned a = 0;
	MALLCTL_READ("arenas.create", a);
	size_t page = mp_page_size(), n = 4 * MP_MiB;
	void *p = LAUNDER(mallocx(n, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE));
	assert_non_null(p);
	memset(p, 0x5a, n);
	dallocx(p, MALLOCX_TCACHE_NONE);
	ssize_t dirty_ms = 0;
	MALLCTL_READ("opt.dirty_decay_ms", dirty_ms);
	size_t pdirty = 0;
	mp_epoch();
	sz = sizeof(pdirty);
	assert_int_equal(mallctl_fmt(&pdirty, &sz, NULL, 0,
	    "stats.arenas.%u.pdirty", a), 0);
	if (dirty_ms > 1000) {
		MP_ASSERT(pdirty >= n / page / 2, "arena %u: %zu dirty pages "
		    "right after freeing %zu bytes (dirty_decay_ms %zd)", a,
		    pdirty, n, dirty_ms);
	}
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.purge", a),
	    0);
	mp_epoch();
	sz = sizeof(pdirty);
	assert_int_equal(mallctl_fmt(&pdirty, &sz, NULL, 0,
	    "stats.arenas.%u.pdirty", a), 0);
	MP_ASSERT(pdirty == 0, "arena %u: %zu dirty pages after purge", a,
	    pdirty);
}

/* ------------------------------------------------------------------------ */
/* thread.*                                                                 */

static void test_thread_arena(void **state) {
	(void)state;
	unsigned orig = 0, cur = 0, narenas = 0;
	MALLCTL_READ("thread.arena", orig);
	MALLCTL_READ("arenas.narenas", narenas);
	assert_true(orig < narenas);
	for (unsigned i = 0; i < narenas; i++) {
		MALLCTL_WRITE("thread.arena", i);
		MALLCTL_READ("thread.arena", cur);
		assert_int_equal(cur, i);
		void *p = LAUNDER(malloc(100));
		assert_non_null(p);
		free(p);
	}
	/* Read and write in one call returns the old value. */
	unsigned old = 99, want = 0;
	size_t sz = sizeof(old);
	assert_int_equal(mallctl("thread.arena", &old, &sz, &want,
	    sizeof(want)), 0);
	assert_int_equal(old, narenas - 1);
	/* A nonexistent arena is refused and nothing changes. */
	unsigned bad = narenas + 100;
	assert_int_not_equal(mallctl("thread.arena", NULL, NULL, &bad,
	    sizeof(bad)), 0);
	MALLCTL_READ("thread.arena", cur);
	assert_int_equal(cur, 0);
	MALLCTL_WRITE("thread.arena", orig);
}

static pthread_barrier_t arena_barrier;

/* The calling thread's arena, or UINT_MAX. */
static unsigned arena_of_new_thread(void) {
	unsigned a = UINT_MAX;
	size_t sz = sizeof(a);
	free(LAUNDER(malloc(64)));	/* the thread's first call picks it */
	if (mallctl("thread.arena", &a, &sz, NULL, 0) != 0) {
		a = UINT_MAX;
	}
	return a;
}

static void *arena_reader(void *arg) {
	*(unsigned *)arg = arena_of_new_thread();
	return NULL;
}

static void *arena_reader_waiting(void *arg) {
	*(unsigned *)arg = arena_of_new_thread();
	pthread_barrier_wait(&arena_barrier);
	return NULL;
}

/*
 * New threads take an arena no thread uses (jemalloc's choice): threads
 * alive together get arenas of their own, and a thread that comes after
 * one exited takes the lowest-numbered idle arena rather than the next in
 * a round robin, so that threads that come and go do not spread memory
 * over every arena.  mallctl.conf: narenas:3.
 */
static void test_thread_arena_choice(void **state) {
	(void)state;
	unsigned self = 0, narenas = 0;
	MALLCTL_READ("thread.arena", self);
	MALLCTL_READ("opt.narenas", narenas);
	assert_int_equal(narenas, 3);
	unsigned got[2];
	pthread_t t[2];
	assert_int_equal(pthread_barrier_init(&arena_barrier, NULL, 3), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&t[i], NULL,
		    arena_reader_waiting, &got[i]), 0);
	}
	pthread_barrier_wait(&arena_barrier);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	pthread_barrier_destroy(&arena_barrier);
	MP_ASSERT(got[0] < 3 && got[1] < 3 && got[0] != got[1] &&
	    got[0] != self && got[1] != self, "main thread on arena %u, "
	    "two live threads on %u and %u", self, got[0], got[1]);
	unsigned later = UINT_MAX;
	pthread_t u;
	assert_int_equal(pthread_create(&u, NULL, arena_reader, &later), 0);
	assert_int_equal(pthread_join(u, NULL), 0);
	unsigned lowest = got[0] < got[1] ? got[0] : got[1];
	MP_ASSERT(later == lowest, "a new thread took arena %u, the lowest "
	    "idle one is %u", later, lowest);
}

static void check_counter_step(const char *what, size_t usable, uint64_t before,
    uint64_t after) {
	MP_ASSERT(after - before >= usable, "%s grew by %" PRIu64 ", want >= "
	    "%zu", what, after - before, usable);
}

static void test_thread_counters(void **state) {
	(void)state;
	const size_t sizes[] = {1, 100, 1000, 14336, 20000, 1 * MP_MiB};
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		uint64_t a0 = 0, a1 = 0, d0 = 0, d1 = 0;
		MALLCTL_READ("thread.allocated", a0);
		void *p = LAUNDER(malloc(sizes[i]));
		MALLCTL_READ("thread.allocated", a1);
		assert_non_null(p);
		size_t usable = malloc_usable_size(p);
		check_counter_step("thread.allocated (malloc)", usable, a0, a1);
		MALLCTL_READ("thread.deallocated", d0);
		free(p);
		MALLCTL_READ("thread.deallocated", d1);
		check_counter_step("thread.deallocated (free)", usable, d0, d1);

		/* calloc, aligned, mallocx. */
		MALLCTL_READ("thread.allocated", a0);
		p = LAUNDER(calloc(1, sizes[i]));
		MALLCTL_READ("thread.allocated", a1);
		check_counter_step("thread.allocated (calloc)",
		    malloc_usable_size(p), a0, a1);
		free(p);
		MALLCTL_READ("thread.allocated", a0);
		p = LAUNDER(mallocx(sizes[i], MALLOCX_ALIGN(256)));
		MALLCTL_READ("thread.allocated", a1);
		check_counter_step("thread.allocated (mallocx)",
		    sallocx(p, 0), a0, a1);
		/* realloc counts the new block and the old one. */
		size_t old_usable = sallocx(p, 0);
		MALLCTL_READ("thread.allocated", a0);
		MALLCTL_READ("thread.deallocated", d0);
		p = LAUNDER(realloc(p, sizes[i] * 4 + 100000));
		MALLCTL_READ("thread.allocated", a1);
		MALLCTL_READ("thread.deallocated", d1);
		assert_non_null(p);
		check_counter_step("thread.allocated (realloc)",
		    malloc_usable_size(p), a0, a1);
		check_counter_step("thread.deallocated (realloc)", old_usable,
		    d0, d1);
		MALLCTL_READ("thread.deallocated", d0);
		dallocx(p, 0);
		MALLCTL_READ("thread.deallocated", d1);
		check_counter_step("thread.deallocated (dallocx)",
		    sizes[i] * 4 + 100000, d0, d1);
	}
}

static void test_thread_counter_pointers(void **state) {
	(void)state;
	uint64_t *ap = NULL, *dp = NULL;
	MALLCTL_READ("thread.allocatedp", ap);
	MALLCTL_READ("thread.deallocatedp", dp);
	assert_non_null(ap);
	assert_non_null(dp);
	uint64_t a = 0, d = 0;
	MALLCTL_READ("thread.allocated", a);
	MALLCTL_READ("thread.deallocated", d);
	assert_int_equal(*ap, a);
	assert_int_equal(*dp, d);
	uint64_t a0 = *ap, d0 = *dp;
	void *p = LAUNDER(malloc(5000));
	assert_non_null(p);
	size_t usable = malloc_usable_size(p);
	check_counter_step("*thread.allocatedp", usable, a0, *LAUNDER(ap));
	free(p);
	check_counter_step("*thread.deallocatedp", usable, d0, *LAUNDER(dp));
	/* The pointers stay valid and live. */
	uint64_t *ap2 = NULL;
	MALLCTL_READ("thread.allocatedp", ap2);
	assert_ptr_equal(ap, ap2);
}

struct other_thread_result {
	uint64_t *ap;
	uint64_t start, grew;
	int err;
};

static void *other_thread(void *arg) {
	struct other_thread_result *res = arg;
	size_t sz = sizeof(res->ap);
	res->err = mallctl("thread.allocatedp", &res->ap, &sz, NULL, 0);
	if (res->err != 0) {
		return NULL;
	}
	res->start = *res->ap;
	void *p = LAUNDER(malloc(MP_MiB));
	res->grew = *LAUNDER(res->ap) - res->start;
	free(p);
	return NULL;
}

static void test_thread_counters_per_thread(void **state) {
	(void)state;
	uint64_t *ap = NULL;
	MALLCTL_READ("thread.allocatedp", ap);
	struct other_thread_result res = {0};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, other_thread, &res), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(res.err, 0);
	assert_ptr_not_equal(res.ap, ap);
	MP_ASSERT(res.grew >= MP_MiB, "other thread's counter grew by %"
	    PRIu64, res.grew);
	MP_ASSERT(res.start < MP_MiB, "a new thread starts at %" PRIu64
	    " allocated bytes", res.start);
}

static void test_thread_tcache(void **state) {
	(void)state;
	bool enabled = false, e2 = true;
	MALLCTL_READ("thread.tcache.enabled", enabled);
	assert_true(enabled);	/* opt.tcache is on by default */
	MALLCTL_CALL("thread.tcache.flush");
	bool off = false, on = true;
	MALLCTL_WRITE("thread.tcache.enabled", off);
	MALLCTL_READ("thread.tcache.enabled", e2);
	assert_false(e2);
	void *ptrs[100];
	for (int i = 0; i < 100; i++) {
		ptrs[i] = LAUNDER(malloc((size_t)i * 7 + 1));
		assert_non_null(ptrs[i]);
	}
	for (int i = 0; i < 100; i++) {
		free(ptrs[i]);
	}
	/* Read-and-write returns the previous value. */
	size_t sz = sizeof(e2);
	assert_int_equal(mallctl("thread.tcache.enabled", &e2, &sz, &on,
	    sizeof(on)), 0);
	assert_false(e2);
	MALLCTL_READ("thread.tcache.enabled", e2);
	assert_true(e2);
	for (int i = 0; i < 100; i++) {
		ptrs[i] = LAUNDER(malloc((size_t)i * 7 + 1));
		assert_non_null(ptrs[i]);
	}
	for (int i = 0; i < 100; i++) {
		free(ptrs[i]);
	}
	MALLCTL_CALL("thread.tcache.flush");
	/* flush takes no value */
	assert_int_not_equal(mallctl("thread.tcache.flush", &e2, &sz, NULL, 0),
	    0);
	MALLCTL_WRITE("thread.tcache.enabled", enabled);
}

/* ------------------------------------------------------------------------ */
/* stats.*                                                                  */

struct stats {
	size_t allocated, active, metadata, resident, mapped, retained;
};

static struct stats read_stats(void) {
	struct stats s;
	mp_epoch();
	MALLCTL_READ("stats.allocated", s.allocated);
	MALLCTL_READ("stats.active", s.active);
	MALLCTL_READ("stats.metadata", s.metadata);
	MALLCTL_READ("stats.resident", s.resident);
	MALLCTL_READ("stats.mapped", s.mapped);
	MALLCTL_READ("stats.retained", s.retained);
	return s;
}

static void check_invariants(const struct stats *s, const char *when) {
	MP_ASSERT(s->metadata > 0, "%s: stats.metadata is 0", when);
	MP_ASSERT(s->allocated <= s->active, "%s: allocated %zu > active %zu",
	    when, s->allocated, s->active);
	MP_ASSERT(s->active <= s->resident, "%s: active %zu > resident %zu",
	    when, s->active, s->resident);
	MP_ASSERT(s->active <= s->mapped, "%s: active %zu > mapped %zu", when,
	    s->active, s->mapped);
}

static size_t absdiff(size_t a, size_t b) {
	return a > b ? a - b : b - a;
}

static void test_stats_invariants(void **state) {
	(void)state;
	/* In a prefixed build nothing else may be live: hold one block. */
	void *hold = LAUNDER(malloc(100000));
	assert_non_null(hold);
	/* No dirty pages: a big block may take them over (extent.c's
	 * move_dirty), and resident would then grow by less. */
	assert_int_equal(mallctl("arena.4096.purge", NULL, NULL, NULL, 0), 0);
	struct stats s0 = read_stats();
	check_invariants(&s0, "start");
	MP_ASSERT(s0.allocated >= malloc_usable_size(hold),
	    "stats.allocated %zu with a %zu-byte block live", s0.allocated,
	    malloc_usable_size(hold));
	size_t page = mp_page_size();
	size_t pactive_all = 0;
	MALLCTL_READ("stats.arenas.4096.pactive", pactive_all);
	MP_ASSERT(pactive_all * page <= s0.mapped, "pactive(all) %zu pages > "
	    "mapped %zu", pactive_all, s0.mapped);

	/* 64 MiB more allocated shows in allocated and active. */
	size_t n = 64 * MP_MiB;
	unsigned char *p = LAUNDER((unsigned char *)malloc(n));
	assert_non_null(p);
	memset(p, 1, n);
	struct stats s1 = read_stats();
	check_invariants(&s1, "with 64 MiB");
	MP_ASSERT(absdiff(s1.allocated, s0.allocated + n) <= MP_MiB,
	    "stats.allocated %zu -> %zu after malloc(64 MiB)", s0.allocated,
	    s1.allocated);
	MP_ASSERT(s1.active >= s0.active + n - MP_MiB,
	    "stats.active %zu -> %zu after malloc(64 MiB)", s0.active,
	    s1.active);
	MP_ASSERT(s1.resident >= s0.resident + n - MP_MiB,
	    "stats.resident %zu -> %zu after touching 64 MiB", s0.resident,
	    s1.resident);
	MP_ASSERT(s1.mapped >= s0.active + n, "stats.mapped %zu", s1.mapped);
	size_t pactive_all1 = 0;
	MALLCTL_READ("stats.arenas.4096.pactive", pactive_all1);
	MP_ASSERT(pactive_all1 >= pactive_all + (n - MP_MiB) / page,
	    "stats.arenas.all.pactive %zu -> %zu", pactive_all, pactive_all1);

	free(p);
	struct stats s2 = read_stats();
	check_invariants(&s2, "after free");
	MP_ASSERT(absdiff(s2.allocated, s0.allocated) <= MP_MiB,
	    "stats.allocated %zu -> %zu -> %zu after free(64 MiB)",
	    s0.allocated, s1.allocated, s2.allocated);
	MP_ASSERT(s2.active + n - MP_MiB <= s1.active,
	    "stats.active %zu -> %zu after free(64 MiB)", s1.active, s2.active);

	/* Many small objects: allocated grows by about their total size. */
	enum { N = 20000 };
	static void *ptrs[N];
	size_t total = 0;
	struct stats s3 = read_stats();
	for (int i = 0; i < N; i++) {
		ptrs[i] = LAUNDER(malloc(100 + (size_t)(i % 300)));
		assert_non_null(ptrs[i]);
		total += malloc_usable_size(ptrs[i]);
	}
	struct stats s4 = read_stats();
	check_invariants(&s4, "with small objects");
	/* Objects cached in a tcache count as allocated: allow slack. */
	MP_ASSERT(absdiff(s4.allocated, s3.allocated + total) <= MP_MiB,
	    "stats.allocated %zu -> %zu after %zu bytes of small objects",
	    s3.allocated, s4.allocated, total);
	for (int i = 0; i < N; i++) {
		free(ptrs[i]);
	}
	mp_tcache_flush();
	struct stats s5 = read_stats();
	check_invariants(&s5, "after freeing small objects");
	MP_ASSERT(absdiff(s5.allocated, s3.allocated) <= MP_MiB,
	    "stats.allocated %zu -> %zu after freeing", s3.allocated,
	    s5.allocated);
	free(hold);
}

/* Stats do not change until the epoch is advanced. */
static void test_stats_snapshot(void **state) {
	(void)state;
	size_t a0 = mp_stat("stats.allocated"), a1 = 0, a2 = 0;
	void *p = LAUNDER(malloc(8 * MP_MiB));
	assert_non_null(p);
	MALLCTL_READ("stats.allocated", a1);
	assert_int_equal(a1, a0);
	mp_epoch();
	MALLCTL_READ("stats.allocated", a2);
	MP_ASSERT(a2 >= a0 + 8 * MP_MiB - MP_MiB, "stats.allocated %zu -> %zu",
	    a0, a2);
	free(p);
}

/* ------------------------------------------------------------------------ */
/* malloc_stats_print.                                                      */

static char out_buf[8 * 1024 * 1024];
static size_t out_len;
static bool out_truncated;
static unsigned out_calls;
static void *out_cbopaque_seen;

static void collect(void *opaque, const char *s) {
	out_cbopaque_seen = opaque;
	out_calls++;
	size_t n = strlen(s);
	if (out_len + n >= sizeof(out_buf)) {
		out_truncated = true;
		n = sizeof(out_buf) - 1 - out_len;
	}
	memcpy(out_buf + out_len, s, n);
	out_len += n;
	out_buf[out_len] = '\0';
}

static void collect_reset(void) {
	out_len = 0;
	out_buf[0] = '\0';
	out_truncated = false;
	out_calls = 0;
	out_cbopaque_seen = NULL;
}

/* A small strict JSON parser: returns true iff [s, s+n) is one value. */
struct json {
	const char *s;
	size_t i, n;
	const char *err;
	size_t err_at;
};

static bool json_value(struct json *j, int depth);

static bool json_fail(struct json *j, const char *why) {
	if (j->err == NULL) {
		j->err = why;
		j->err_at = j->i;
	}
	return false;
}

static void json_ws(struct json *j) {
	while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' ||
	    j->s[j->i] == '\n' || j->s[j->i] == '\r')) {
		j->i++;
	}
}

static bool json_string(struct json *j) {
	if (j->i >= j->n || j->s[j->i] != '"') {
		return json_fail(j, "expected string");
	}
	j->i++;
	while (j->i < j->n) {
		unsigned char c = (unsigned char)j->s[j->i++];
		if (c == '"') {
			return true;
		}
		if (c < 0x20) {
			return json_fail(j, "control character in string");
		}
		if (c == '\\') {
			if (j->i >= j->n) {
				break;
			}
			char e = j->s[j->i++];
			if (e == 'u') {
				for (int k = 0; k < 4; k++) {
					if (j->i >= j->n || !strchr(
					    "0123456789abcdefABCDEF",
					    j->s[j->i]) || j->s[j->i] == '\0') {
						return json_fail(j, "bad \\u");
					}
					j->i++;
				}
			} else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
				return json_fail(j, "bad escape");
			}
		}
	}
	return json_fail(j, "unterminated string");
}

static bool json_digits(struct json *j) {
	size_t start = j->i;
	while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
		j->i++;
	}
	return j->i > start;
}

static bool json_number(struct json *j) {
	if (j->s[j->i] == '-') {
		j->i++;
	}
	if (j->i < j->n && j->s[j->i] == '0') {
		j->i++;
	} else if (!json_digits(j)) {
		return json_fail(j, "bad number");
	}
	if (j->i < j->n && j->s[j->i] == '.') {
		j->i++;
		if (!json_digits(j)) {
			return json_fail(j, "bad fraction");
		}
	}
	if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
		j->i++;
		if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-')) {
			j->i++;
		}
		if (!json_digits(j)) {
			return json_fail(j, "bad exponent");
		}
	}
	return true;
}

static bool json_literal(struct json *j, const char *lit) {
	size_t n = strlen(lit);
	if (j->n - j->i < n || memcmp(j->s + j->i, lit, n) != 0) {
		return json_fail(j, "bad literal");
	}
	j->i += n;
	return true;
}

static bool json_value(struct json *j, int depth) {
	if (depth > 64) {
		return json_fail(j, "too deep");
	}
	json_ws(j);
	if (j->i >= j->n) {
		return json_fail(j, "unexpected end");
	}
	char c = j->s[j->i];
	if (c == '{' || c == '[') {
		char close = (c == '{') ? '}' : ']';
		j->i++;
		json_ws(j);
		if (j->i < j->n && j->s[j->i] == close) {
			j->i++;
			return true;
		}
		for (;;) {
			if (c == '{') {
				json_ws(j);
				if (!json_string(j)) {
					return false;
				}
				json_ws(j);
				if (j->i >= j->n || j->s[j->i] != ':') {
					return json_fail(j, "expected ':'");
				}
				j->i++;
			}
			if (!json_value(j, depth + 1)) {
				return false;
			}
			json_ws(j);
			if (j->i < j->n && j->s[j->i] == ',') {
				j->i++;
				continue;
			}
			if (j->i < j->n && j->s[j->i] == close) {
				j->i++;
				return true;
			}
			return json_fail(j, "expected ',' or close");
		}
	}
	if (c == '"') {
		return json_string(j);
	}
	if (c == 't') {
		return json_literal(j, "true");
	}
	if (c == 'f') {
		return json_literal(j, "false");
	}
	if (c == 'n') {
		return json_literal(j, "null");
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		return json_number(j);
	}
	return json_fail(j, "unexpected character");
}

static void check_json_object(const char *buf, size_t len, const char *opts) {
	MP_ASSERT(len > 2, "malloc_stats_print(\"%s\") wrote %zu bytes", opts,
	    len);
	MP_ASSERT(buf[0] == '{', "JSON output (\"%s\") starts with '%c'",
	    opts, buf[0]);
	size_t end = len;
	if (buf[end - 1] == '\n') {
		end--;
	}
	MP_ASSERT(buf[end - 1] == '}', "JSON output (\"%s\") ends with '%c'",
	    opts, buf[end - 1]);
	/* Braces balance outside strings. */
	long depth = 0;
	bool in_str = false;
	for (size_t i = 0; i < end; i++) {
		char c = buf[i];
		if (in_str) {
			if (c == '\\') {
				i++;
			} else if (c == '"') {
				in_str = false;
			}
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '{') {
			depth++;
		} else if (c == '}') {
			depth--;
			MP_ASSERT(depth >= 0 && (depth > 0 || i == end - 1),
			    "JSON (\"%s\"): top-level object closes at %zu of "
			    "%zu", opts, i, end);
		}
	}
	assert_false(in_str);
	assert_int_equal(depth, 0);
	/* And the whole text is one valid JSON value. */
	struct json j = {buf, 0, len, NULL, 0};
	bool ok = json_value(&j, 0);
	json_ws(&j);
	if (!ok || j.i != len) {
		size_t at = ok ? j.i : j.err_at;
		size_t from = at > 40 ? at - 40 : 0;
		MP_FAIL("invalid JSON from malloc_stats_print(\"%s\") at byte "
		    "%zu: %s; context: %.80s", opts, at,
		    ok ? "trailing data" : j.err, buf + from);
	}
}

static void test_stats_print_text(void **state) {
	(void)state;
	void *keep = LAUNDER(malloc(12345));	/* something to report */
	int token;
	collect_reset();
	malloc_stats_print(collect, &token, NULL);
	assert_false(out_truncated);
	MP_ASSERT(out_len > 0, "malloc_stats_print wrote nothing");
	assert_true(out_calls > 0);
	assert_ptr_equal(out_cbopaque_seen, &token);
	MP_ASSERT(strstr(out_buf, "allocated") != NULL,
	    "no \"allocated\" in the stats text (%zu bytes)", out_len);
	assert_int_equal(strlen(out_buf), out_len);

	collect_reset();
	malloc_stats_print(collect, NULL, "");
	assert_true(out_len > 0);
	assert_non_null(strstr(out_buf, "allocated"));
	free(keep);
}

static void test_stats_print_json(void **state) {
	(void)state;
	void *keep = LAUNDER(malloc(54321));
	const char *const opts[] = {"J", "Jmdablx", "Jg"};
	for (size_t i = 0; i < MP_ARRAY_SIZE(opts); i++) {
		collect_reset();
		malloc_stats_print(collect, NULL, opts[i]);
		assert_false(out_truncated);
		check_json_object(out_buf, out_len, opts[i]);
		if (i == 0) {
			MP_ASSERT(strstr(out_buf, "\"allocated\"") != NULL,
			    "no \"allocated\" key in the JSON stats");
		}
	}
	free(keep);
}

/* Output goes to malloc_message when no callback is given. */
static void test_stats_print_malloc_message(void **state) {
	(void)state;
	void (*saved)(void *, const char *) = malloc_message;
	collect_reset();
	malloc_message = collect;
	malloc_stats_print(NULL, NULL, NULL);
	malloc_message = saved;
	MP_ASSERT(out_len > 0, "malloc_message was not used");
	assert_non_null(strstr(out_buf, "allocated"));
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_epoch),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_node_types),
		cmocka_unit_test(test_opt_values),
		cmocka_unit_test(test_readonly),
		cmocka_unit_test(test_error_codes),
		cmocka_unit_test(test_mib_bins),
		cmocka_unit_test(test_mib_misc),
		cmocka_unit_test(test_arenas),
		cmocka_unit_test(test_arena_purge_decay),
		cmocka_unit_test(test_thread_arena),
		cmocka_unit_test(test_thread_arena_choice),
		cmocka_unit_test(test_thread_counters),
		cmocka_unit_test(test_thread_counter_pointers),
		cmocka_unit_test(test_thread_counters_per_thread),
		cmocka_unit_test(test_thread_tcache),
		cmocka_unit_test(test_stats_invariants),
		cmocka_unit_test(test_stats_snapshot),
		cmocka_unit_test(test_stats_print_text),
		cmocka_unit_test(test_stats_print_json),
		cmocka_unit_test(test_stats_print_malloc_message),
	};
	return mp_run_tests(tests);
}
