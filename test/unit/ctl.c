/*
 * test/unit/ctl.c - the mallctl tree (src/ctl/ctl.c) and malloc_stats_print
 * (src/ctl/stats.c).
 *
 * Names resolve only to leaves (ENOENT for unknown and partial names),
 * sizes must match exactly (EINVAL, with the partial copy jemalloc does),
 * read-only and write-only nodes refuse the other direction (EPERM), MIBs
 * round-trip with their index components, every opt.* row is readable with
 * its type, the arenas.* geometry matches the size-class tables, and the
 * stats snapshot obeys its invariants.  The statistics printer produces
 * the documented text and one valid JSON object.
 */
#include "../test_util.h"

#include <ctype.h>

#include "malloc_prof/internal/internal.h"

static int rd(const char *name, void *v, size_t len) {
	size_t l = len;
	int r = mallctl(name, v, &l, NULL, 0);
	if (r == 0 && l != len)
		return -1;
	return r;
}

/* --------------------------------------------------------------- names */

static void test_version_and_config(void **state) {
	(void)state;
	const char *v = NULL;
	MALLCTL_READ("version", v);
	assert_string_equal(v, MP_VERSION);
	assert_string_equal(v, MALLOC_PROF_VERSION);
	bool b;
	MALLCTL_READ("config.debug", b);
	assert_int_equal(b, MP_CONFIG_DEBUG);
	MALLCTL_READ("config.prof", b);
	assert_int_equal(b, MP_CONFIG_PROF);
	const char *p = NULL;
	MALLCTL_READ("config.prefix", p);
	assert_string_equal(p, MP_PREFIX_STR);
}

static void test_enoent(void **state) {
	(void)state;
	size_t v;
	size_t len = sizeof(v);
	static const char *const bad[] = {
		"", "nonexistent", "Version", "stats", "opt", "config",
		"arenas", "arenas.bin", "arenas.bin.0", "arena.0",
		"stats.arenas", "stats.arenas.0", "stats.arenas.0.large",
		"thread.tcache", "version.x", "epoch.0", "stats.allocated.x",
		"stats.", ".stats.allocated", "stats..allocated",
		"arenas.bin.35.size", "arenas.bin.x.size",
		"arenas.bin.-1.size", "arenas.bin.1x.size",
		"arenas.bin.99999999999999999999999.size",
		"arena.4098.purge", "arena.99999.purge",
		"opt.nonexistent", "opt.narena", "opt.narenas.x",
		"stats.arenas.4095.pactive", "stats.arenas.4097.pactive",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad); i++) {
		len = sizeof(v);
		int r = mallctl(bad[i], &v, &len, NULL, 0);
		MP_ASSERT(r == ENOENT, "mallctl(\"%s\") = %d, want ENOENT",
		    bad[i], r);
	}
	/* 4097 (MALLCTL_ARENAS_DESTROYED) names the destroyed arenas' sum,
	 * which has only arena.4097.initialized: no arena to purge. */
	assert_int_equal(mallctl("arena.4097.purge", NULL, NULL, NULL, 0),
	    ENOENT);
	char name[64];
	snprintf(name, sizeof(name), "arenas.lextent.%u.size",
	    (unsigned)SC_NLEXTENTS);
	assert_int_equal(mallctl(name, &v, &len, NULL, 0), ENOENT);
	unsigned n;
	MALLCTL_READ("arenas.narenas", n);
	snprintf(name, sizeof(name), "arena.%u.purge", n);
	assert_int_equal(mallctl(name, NULL, NULL, NULL, 0), ENOENT);
}

/* ------------------------------------------------------- error codes */

static void test_einval_read_size(void **state) {
	(void)state;
	size_t page = 0;
	/* Too small: copy what fits, report it, fail. */
	uint32_t small = 0;
	size_t len = sizeof(small);
	assert_int_equal(mallctl("arenas.page", &small, &len, NULL, 0),
	    EINVAL);
	assert_int_equal(len, sizeof(small));
	size_t want = PAGE;
	assert_memory_equal(&small, &want, sizeof(small));
	/* Too big: the whole value, the true size, still EINVAL. */
	unsigned char big[16];
	memset(big, 0xee, sizeof(big));
	len = sizeof(big);
	assert_int_equal(mallctl("arenas.page", big, &len, NULL, 0), EINVAL);
	assert_int_equal(len, sizeof(size_t));
	memcpy(&page, big, sizeof(page));
	assert_int_equal(page, PAGE);
	assert_int_equal(big[sizeof(size_t)], 0xee);
	/* Same on other types. */
	bool bb[2];
	len = sizeof(bb);
	assert_int_equal(mallctl("opt.tcache", bb, &len, NULL, 0), EINVAL);
	assert_int_equal(len, sizeof(bool));
	uint64_t e;
	len = sizeof(e) - 1;
	assert_int_equal(mallctl("epoch", &e, &len, NULL, 0), EINVAL);
	len = sizeof(e) + 1;
	assert_int_equal(mallctl("epoch", &e, &len, NULL, 0), EINVAL);
	/* oldp NULL: nothing to read into, not an error. */
	len = 1;
	assert_int_equal(mallctl("arenas.page", NULL, &len, NULL, 0), 0);
}

static void test_einval_write_size(void **state) {
	(void)state;
	uint64_t e = 1;
	assert_int_equal(mallctl("epoch", NULL, NULL, &e, sizeof(e) - 1),
	    EINVAL);
	assert_int_equal(mallctl("epoch", NULL, NULL, &e, sizeof(e) + 1),
	    EINVAL);
	bool b = true;
	assert_int_equal(mallctl("thread.tcache.enabled", NULL, NULL, &b,
	    sizeof(int)), EINVAL);
	unsigned a = 0;
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &a,
	    sizeof(uint64_t)), EINVAL);
}

static void test_eperm(void **state) {
	(void)state;
	const char *s = "x";
	assert_int_equal(mallctl("version", NULL, NULL, &s, sizeof(s)), EPERM);
	unsigned u = 1;
	assert_int_equal(mallctl("opt.narenas", NULL, NULL, &u, sizeof(u)),
	    EPERM);
	size_t z = 1;
	assert_int_equal(mallctl("arenas.page", NULL, NULL, &z, sizeof(z)),
	    EPERM);
	assert_int_equal(mallctl("stats.allocated", NULL, NULL, &z,
	    sizeof(z)), EPERM);
	assert_int_equal(mallctl("stats.arenas.0.pactive", NULL, NULL, &z,
	    sizeof(z)), EPERM);
	assert_int_equal(mallctl("arenas.bin.0.size", NULL, NULL, &z,
	    sizeof(z)), EPERM);
	assert_int_equal(mallctl("thread.allocated", NULL, NULL, &z,
	    sizeof(z)), EPERM);
	/* A length without a pointer is a write attempt too. */
	assert_int_equal(mallctl("version", NULL, NULL, NULL, 8), EPERM);
	/* Actions take nothing and give nothing. */
	size_t len = sizeof(z);
	assert_int_equal(mallctl("thread.tcache.flush", &z, &len, NULL, 0),
	    EPERM);
	assert_int_equal(mallctl("arena.0.purge", &z, &len, NULL, 0), EPERM);
	assert_int_equal(mallctl("arena.0.decay", NULL, NULL, &z, sizeof(z)),
	    EPERM);
}

/* ---------------------------------------------------------------- MIBs */

static void test_mib_round_trip(void **state) {
	(void)state;
	size_t mib[8];
	size_t miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arenas.bin.3.size", mib, &miblen),
	    0);
	assert_int_equal(miblen, 4);
	assert_int_equal(mib[2], 3);
	size_t a = 0, b = 0, len = sizeof(a);
	assert_int_equal(mallctlbymib(mib, miblen, &a, &len, NULL, 0), 0);
	MALLCTL_READ("arenas.bin.3.size", b);
	assert_int_equal(a, b);
	assert_int_equal(a, sz_index2size(3));
	/* Index components are used verbatim. */
	for (size_t i = 0; i < SC_NBINS; i++) {
		mib[2] = i;
		len = sizeof(a);
		assert_int_equal(mallctlbymib(mib, miblen, &a, &len, NULL, 0),
		    0);
		assert_int_equal(a, sz_index2size((unsigned)i));
	}
	mib[2] = SC_NBINS;
	assert_int_equal(mallctlbymib(mib, miblen, &a, &len, NULL, 0),
	    ENOENT);

	/* A partial MIB: the first two components only. */
	size_t pmib[2];
	size_t plen = 2;
	assert_int_equal(mallctlnametomib("arenas.bin.3.size", pmib, &plen),
	    0);
	assert_int_equal(plen, 2);
	assert_memory_equal(pmib, mib, sizeof(pmib));
	assert_int_equal(mallctlbymib(pmib, plen, &a, &len, NULL, 0),
	    ENOENT);
	/* Too long a MIB, or a child number out of range. */
	size_t lmib[5] = {mib[0], mib[1], 3, mib[3], 0};
	assert_int_equal(mallctlbymib(lmib, 5, &a, &len, NULL, 0), ENOENT);
	size_t omib[1] = {1000};
	assert_int_equal(mallctlbymib(omib, 1, &a, &len, NULL, 0), ENOENT);
	assert_int_equal(mallctlbymib(mib, 0, &a, &len, NULL, 0), ENOENT);

	/* nametomib still refuses unknown and partial names. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arenas.bin", mib, &miblen),
	    ENOENT);
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arenas.nope", mib, &miblen),
	    ENOENT);

	/* stats.arenas.<ALL> and opt.<name> through MIBs. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("stats.arenas.4096.pactive", mib,
	    &miblen), 0);
	assert_int_equal(miblen, 4);
	assert_int_equal(mib[2], MALLCTL_ARENAS_ALL);
	len = sizeof(a);
	assert_int_equal(mallctlbymib(mib, miblen, &a, &len, NULL, 0), 0);
	mib[2] = 0;
	len = sizeof(b);
	assert_int_equal(mallctlbymib(mib, miblen, &b, &len, NULL, 0), 0);
	assert_true(b <= a);

	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("opt.tcache_max", mib, &miblen), 0);
	assert_int_equal(miblen, 2);
	len = sizeof(a);
	assert_int_equal(mallctlbymib(mib, miblen, &a, &len, NULL, 0), 0);
	assert_int_equal(a, opt_tcache_max);
	mib[1] = conf_nopts;
	assert_int_equal(mallctlbymib(mib, miblen, &a, &len, NULL, 0),
	    ENOENT);

	/* arena.<i>.purge by MIB, all arenas at once. */
	miblen = MP_ARRAY_SIZE(mib);
	assert_int_equal(mallctlnametomib("arena.0.purge", mib, &miblen), 0);
	assert_int_equal(miblen, 3);
	mib[1] = MALLCTL_ARENAS_ALL;
	assert_int_equal(mallctlbymib(mib, miblen, NULL, NULL, NULL, 0), 0);
}

/* --------------------------------------------------------------- opt.* */

static void test_every_opt_readable(void **state) {
	(void)state;
	for (unsigned i = 0; i < conf_nopts; i++) {
		const conf_opt_t *o = &conf_opts[i];
		char name[80];
		snprintf(name, sizeof(name), "opt.%s", o->name);
		union {
			bool b;
			unsigned u;
			size_t z;
			ssize_t s;
			const char *str;
		} v;
		size_t want;
		switch (o->type) {
		case CONF_BOOL: want = sizeof(bool); break;
		case CONF_UNSIGNED: want = sizeof(unsigned); break;
		case CONF_SIZE_T: want = sizeof(size_t); break;
		case CONF_SSIZE_T: want = sizeof(ssize_t); break;
		default: want = sizeof(const char *); break;
		}
		if (o->readout != NULL)
			want = o->readout_size;
		memset(&v, 0, sizeof(v));
		int r = rd(name, &v, want);
		/* Profiler options are absent from a build without it. */
		if (!conf_opt_available(o)) {
			MP_ASSERT(r == ENOENT, "%s: %d, want ENOENT", name, r);
			continue;
		}
		MP_ASSERT(r == 0, "%s: %d", name, r);
		/* Read as jemalloc's type: the bytes of its variable. */
		if (o->readout != NULL) {
			assert_memory_equal(&v, o->readout, want);
			size_t len = want + 1;
			char junk[16];
			assert_int_equal(mallctl(name, junk, &len, NULL, 0),
			    EINVAL);
			continue;
		}
		switch (o->type) {
		case CONF_BOOL:
			assert_int_equal(v.b, *(bool *)o->var);
			break;
		case CONF_UNSIGNED:
			assert_int_equal(v.u, *(unsigned *)o->var);
			break;
		case CONF_SIZE_T:
			assert_int_equal(v.z, *(size_t *)o->var);
			break;
		case CONF_SSIZE_T:
			assert_int_equal(v.s, *(ssize_t *)o->var);
			break;
		case CONF_STRING:
		case CONF_ENUM:
			assert_string_equal(v.str, conf_opt_str(o));
			break;
		}
		/* The wrong size is refused. */
		size_t len = want + 1;
		char junk[16];
		assert_int_equal(mallctl(name, junk, &len, NULL, 0), EINVAL);
	}
	/* A few with known values. */
	const char *junk = NULL;
	MALLCTL_READ("opt.junk", junk);
	assert_string_equal(junk, opt_junk);
	const char *zr = NULL;
	MALLCTL_READ("opt.zero_realloc", zr);
	assert_string_equal(zr, "free");
	size_t tm = 0;
	MALLCTL_READ("opt.tcache_max", tm);
	assert_int_equal(tm, 65536);
}

/* ------------------------------------------------------------ arenas.* */

static void test_arenas_geometry(void **state) {
	(void)state;
	size_t q = 0, p = 0, tm = 0;
	unsigned nbins = 0, nlextents = 0, narenas = 0;
	MALLCTL_READ("arenas.quantum", q);
	MALLCTL_READ("arenas.page", p);
	MALLCTL_READ("arenas.tcache_max", tm);
	MALLCTL_READ("arenas.nbins", nbins);
	MALLCTL_READ("arenas.nlextents", nlextents);
	MALLCTL_READ("arenas.narenas", narenas);
	assert_int_equal(q, 16);
	assert_int_equal(p, PAGE);
	assert_int_equal(tm, opt_tcache_max);
	assert_int_equal(nbins, SC_NBINS);
	assert_int_equal(nlextents, SC_NLEXTENTS);
	assert_true(narenas >= 1);
	size_t prev = 0;
	for (unsigned i = 0; i < nbins; i++) {
		size_t size = 0, slab = 0;
		uint32_t nregs = 0;
		assert_int_equal(mallctl_fmt(&size, &(size_t){sizeof(size)},
		    NULL, 0, "arenas.bin.%u.size", i), 0);
		assert_int_equal(mallctl_fmt(&nregs, &(size_t){sizeof(nregs)},
		    NULL, 0, "arenas.bin.%u.nregs", i), 0);
		assert_int_equal(mallctl_fmt(&slab, &(size_t){sizeof(slab)},
		    NULL, 0, "arenas.bin.%u.slab_size", i), 0);
		assert_int_equal(size, sz_index2size(i));
		assert_int_equal(nregs, sz_slab_nregs[i]);
		assert_int_equal(slab, sz_slab_size[i]);
		assert_true(size > prev);
		assert_true(nregs >= 1 && (size_t)nregs * size <= slab);
		assert_int_equal(slab % PAGE, 0);
		prev = size;
	}
	assert_int_equal(prev, SC_SMALL_MAXCLASS);
	for (unsigned i = 0; i < nlextents; i++) {
		size_t size = 0;
		assert_int_equal(mallctl_fmt(&size, &(size_t){sizeof(size)},
		    NULL, 0, "arenas.lextent.%u.size", i), 0);
		assert_int_equal(size, sz_index2size(SC_NBINS + i));
		assert_true(size > prev);
		prev = size;
	}
	assert_int_equal(prev, SC_LARGE_MAXCLASS);
}

static void test_arenas_create_and_thread_arena(void **state) {
	(void)state;
	unsigned before = 0, after = 0, ind = 0, cur = 0, old = 0;
	MALLCTL_READ("arenas.narenas", before);
	MALLCTL_READ("arenas.create", ind);
	MALLCTL_READ("arenas.narenas", after);
	assert_int_equal(ind, before);
	assert_int_equal(after, before + 1);

	MALLCTL_READ("thread.arena", cur);
	assert_true(cur < after);
	/* rw: the old value comes back with the write. */
	size_t len = sizeof(old);
	assert_int_equal(mallctl("thread.arena", &old, &len, &ind,
	    sizeof(ind)), 0);
	assert_int_equal(old, cur);
	unsigned now = 0;
	MALLCTL_READ("thread.arena", now);
	assert_int_equal(now, ind);
	void *p = LAUNDER(malloc(100000));
	assert_non_null(p);
	free(p);
	/* An index not handed out yet. */
	unsigned bad = after + 100;
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &bad,
	    sizeof(bad)), EFAULT);
	MALLCTL_WRITE("thread.arena", cur);

	/* The new arena shows up in stats after an epoch. */
	mp_epoch();
	size_t pactive = 0;
	assert_int_equal(mallctl_fmt(&pactive, &(size_t){sizeof(pactive)},
	    NULL, 0, "stats.arenas.%u.pactive", ind), 0);
	/* And purging it, or everything, works. */
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.purge",
	    ind), 0);
	assert_int_equal(mallctl_fmt(NULL, NULL, NULL, 0, "arena.%u.decay",
	    ind), 0);
	MALLCTL_CALL("arena.4096.purge");
	MALLCTL_CALL("arena.4096.decay");
}

/* ------------------------------------------------------------ thread.* */

static void test_thread_allocated(void **state) {
	(void)state;
	uint64_t a0 = 0, a1 = 0, d0 = 0, d1 = 0;
	uint64_t *ap = NULL, *dp = NULL;
	MALLCTL_READ("thread.allocatedp", ap);
	MALLCTL_READ("thread.deallocatedp", dp);
	assert_non_null(ap);
	assert_non_null(dp);
	MALLCTL_READ("thread.allocated", a0);
	MALLCTL_READ("thread.deallocated", d0);
	assert_int_equal(*ap, a0);
	void *p = LAUNDER(malloc(1000));
	assert_non_null(p);
	MALLCTL_READ("thread.allocated", a1);
	assert_true(a1 >= a0 + 1000);
	/* The pointer sees the live counter. */
	assert_int_equal(*ap, a1);
	free(p);
	MALLCTL_READ("thread.deallocated", d1);
	assert_true(d1 >= d0 + 1000);
	assert_int_equal(*dp, d1);
}

static void test_thread_tcache(void **state) {
	(void)state;
	bool en = false, old = false, f = false, t = true;
	MALLCTL_READ("thread.tcache.enabled", en);
	assert_int_equal(en, opt_tcache);
	size_t len = sizeof(old);
	assert_int_equal(mallctl("thread.tcache.enabled", &old, &len, &f,
	    sizeof(f)), 0);
	assert_int_equal(old, en);
	MALLCTL_READ("thread.tcache.enabled", old);
	assert_false(old);
	/* Nothing to flush without a cache. */
	assert_int_equal(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0),
	    EFAULT);
	assert_int_equal(mallctl("thread.tcache.enabled", &old, &len, &t,
	    sizeof(t)), 0);
	assert_false(old);
	void *p = LAUNDER(malloc(64));
	free(p);
	if (opt_tcache)
		MALLCTL_CALL("thread.tcache.flush");
	MALLCTL_WRITE("thread.tcache.enabled", en);
}

/* ------------------------------------------------------------- stats.* */

typedef struct {
	size_t allocated, active, metadata, resident, mapped, retained;
} totals_t;

static void read_totals(totals_t *t) {
	MALLCTL_READ("stats.allocated", t->allocated);
	MALLCTL_READ("stats.active", t->active);
	MALLCTL_READ("stats.metadata", t->metadata);
	MALLCTL_READ("stats.resident", t->resident);
	MALLCTL_READ("stats.mapped", t->mapped);
	MALLCTL_READ("stats.retained", t->retained);
}

static void check_invariants(const totals_t *t) {
	MP_ASSERT(t->allocated <= t->active, "allocated %zu > active %zu",
	    t->allocated, t->active);
	MP_ASSERT(t->active <= t->resident, "active %zu > resident %zu",
	    t->active, t->resident);
	MP_ASSERT(t->resident <= t->mapped, "resident %zu > mapped %zu",
	    t->resident, t->mapped);
	assert_true(t->metadata > 0);
	assert_int_equal(t->active % PAGE, 0);
}

static void test_epoch(void **state) {
	(void)state;
	uint64_t e0 = 0, e1 = 0, e2 = 0, one = 1;
	MALLCTL_READ("epoch", e0);
	assert_true(e0 >= 1);
	size_t len = sizeof(e1);
	assert_int_equal(mallctl("epoch", &e1, &len, &one, sizeof(one)), 0);
	assert_int_equal(e1, e0 + 1);
	MALLCTL_READ("epoch", e2);
	assert_int_equal(e2, e1);
}

static void test_stats_invariants(void **state) {
	(void)state;
	totals_t t0, t1, t2;
	mp_epoch();
	read_totals(&t0);
	check_invariants(&t0);

	size_t big = 8 * MP_MiB;
	void *p = LAUNDER(malloc(big));
	assert_non_null(p);
	memset(p, 1, big);
	/* Stale until the next epoch. */
	read_totals(&t1);
	assert_memory_equal(&t0, &t1, sizeof(t0));
	mp_epoch();
	read_totals(&t1);
	check_invariants(&t1);
	assert_true(t1.allocated >= t0.allocated + big);
	assert_true(t1.active >= t0.active + big);

	/* Merged arena stats agree with the totals. */
	size_t pactive_all = 0, sum = 0;
	MALLCTL_READ("stats.arenas.4096.pactive", pactive_all);
	assert_int_equal(pactive_all * PAGE, t1.active);
	unsigned n = 0;
	MALLCTL_READ("arenas.narenas", n);
	for (unsigned i = 0; i < n; i++) {
		size_t pa = 0;
		int r = mallctl_fmt(&pa, &(size_t){sizeof(pa)}, NULL, 0,
		    "stats.arenas.%u.pactive", i);
		if (r == ENOENT)
			continue;       /* never initialised */
		assert_int_equal(r, 0);
		sum += pa;
	}
	assert_int_equal(sum, pactive_all);
	size_t large = 0;
	uint64_t nmalloc = 0;
	MALLCTL_READ("stats.arenas.4096.large.allocated", large);
	MALLCTL_READ("stats.arenas.4096.large.nmalloc", nmalloc);
	assert_true(large >= big);
	assert_true(nmalloc >= 1);

	free(p);
	MALLCTL_CALL("arena.4096.purge");
	mp_epoch();
	read_totals(&t2);
	check_invariants(&t2);
	assert_true(t2.allocated + big <= t1.allocated);
}

static void test_stats_arena_fields(void **state) {
	(void)state;
	static const char *const u64s[] = {
		"dirty_npurge", "dirty_nmadvise", "dirty_purged",
		"large.nmalloc", "large.ndalloc", "small.nslabs",
	};
	static const char *const sizes[] = {
		"pactive", "pdirty", "pmuzzy", "mapped", "retained",
		"large.allocated", "small.curslabs",
	};
	mp_epoch();
	char name[96];
	for (size_t i = 0; i < MP_ARRAY_SIZE(u64s); i++) {
		uint64_t v;
		snprintf(name, sizeof(name), "stats.arenas.0.%s", u64s[i]);
		MP_ASSERT(rd(name, &v, sizeof(v)) == 0, "%s", name);
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		size_t v;
		snprintf(name, sizeof(name), "stats.arenas.4096.%s", sizes[i]);
		MP_ASSERT(rd(name, &v, sizeof(v)) == 0, "%s", name);
	}
	unsigned nthreads = 0;
	MALLCTL_READ("stats.arenas.4096.nthreads", nthreads);
	assert_true(nthreads >= 1);
	uint64_t nslabs = 0;
	size_t curslabs = 0;
	MALLCTL_READ("stats.arenas.4096.small.nslabs", nslabs);
	MALLCTL_READ("stats.arenas.4096.small.curslabs", curslabs);
	assert_true(nslabs >= curslabs);
}

/* -------------------------------------------------- malloc_stats_print */

static char out_buf[1 << 20];
static size_t out_len;
static unsigned out_calls;
static size_t out_max_chunk;

static void out_cb(void *opaque, const char *s) {
	assert_ptr_equal(opaque, &out_len);
	size_t n = strlen(s);
	if (n > out_max_chunk)
		out_max_chunk = n;
	if (out_len + n >= sizeof(out_buf))
		n = sizeof(out_buf) - 1 - out_len;
	memcpy(out_buf + out_len, s, n);
	out_len += n;
	out_buf[out_len] = '\0';
	out_calls++;
	/* The printer must not hold ctl's lock while calling us. */
	uint64_t e;
	size_t len = sizeof(e);
	assert_int_equal(mallctl("epoch", &e, &len, NULL, 0), 0);
}

static void print_stats(const char *opts) {
	out_len = 0;
	out_buf[0] = '\0';
	out_calls = 0;
	out_max_chunk = 0;
	malloc_stats_print(out_cb, &out_len, opts);
}

static void test_stats_print_text(void **state) {
	(void)state;
	print_stats(NULL);
	assert_true(out_calls >= 1);
	assert_true(out_max_chunk < 4096);
	/* jemalloc 5.3's layout, titles included (stats.c). */
	assert_true(strncmp(out_buf, "___ Begin jemalloc statistics ___\n",
	    34) == 0);
	assert_non_null(strstr(out_buf,
	    "--- End jemalloc statistics ---\n"));
	char want[128];
	snprintf(want, sizeof(want), "Version: \"%s\"\n", MP_VERSION);
	assert_non_null(strstr(out_buf, want));
	/* Every option of the table this build has, with its value (and,
	 * for those changed at run time, a note of the current value). */
	for (unsigned i = 0; i < conf_nopts; i++) {
		if (!conf_opt_available(&conf_opts[i]))
			continue;
		char v[80];
		conf_opt_format(&conf_opts[i], v, sizeof(v));
		bool q = conf_opts[i].type == CONF_STRING ||
		    conf_opts[i].type == CONF_ENUM;
		snprintf(want, sizeof(want), "  opt.%s: %s%s%s",
		    conf_opts[i].name, q ? "\"" : "", v, q ? "\"" : "");
		const char *at = strstr(out_buf, want);
		MP_ASSERT(at != NULL && (at[strlen(want)] == '\n' ||
		    at[strlen(want)] == ' '), "no \"%s\"", want);
	}
	assert_non_null(strstr(out_buf, "Allocated: "));
	assert_non_null(strstr(out_buf, "arenas[0]:\n"));
	assert_non_null(strstr(out_buf, "\nlarge: "));
	assert_non_null(strstr(out_buf, "\nbins:           size ind"));
	assert_non_null(strstr(out_buf, "\nlarge:          size ind"));
	/* The merged arena: with more than one arena, or without the
	 * per-arena sections. */
	print_stats("a");
	assert_non_null(strstr(out_buf, "Merged arenas stats:\n"));
	assert_null(strstr(out_buf, "arenas[0]:\n"));

	/* The omission letters. */
	print_stats("gmabl");
	assert_null(strstr(out_buf, "Version:"));
	assert_null(strstr(out_buf, "opt."));
	assert_null(strstr(out_buf, "Merged arenas"));
	assert_null(strstr(out_buf, "arenas[0]"));
	assert_null(strstr(out_buf, "bins:"));
	assert_null(strstr(out_buf, "large:"));
	assert_non_null(strstr(out_buf, "Allocated: "));
	assert_non_null(strstr(out_buf, "--- End jemalloc statistics"));
}

/* A small JSON validator: value := object | array | string | number |
 * true | false | null.  Returns the end of the value or NULL. */
static const char *json_value(const char *p, int depth);

static const char *json_ws(const char *p) {
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static const char *json_string(const char *p) {
	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++) {
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				}
				p += 4;
			} else if (strchr("\"\\/bfnrt", *p) == NULL) {
				return NULL;
			}
		}
		p++;
	}
	return p + 1;
}

static const char *json_value(const char *p, int depth) {
	if (depth > 32)
		return NULL;
	p = json_ws(p);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool obj = *p == '{';
		p = json_ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				p = json_string(json_ws(p));
				if (p == NULL)
					return NULL;
				p = json_ws(p);
				if (*p++ != ':')
					return NULL;
			}
			p = json_value(p, depth + 1);
			if (p == NULL)
				return NULL;
			p = json_ws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (*p == '"')
		return json_string(p);
	if (strncmp(p, "true", 4) == 0)
		return p + 4;
	if (strncmp(p, "false", 5) == 0)
		return p + 5;
	if (strncmp(p, "null", 4) == 0)
		return p + 4;
	const char *s = p;
	if (*p == '-')
		p++;
	while (*p >= '0' && *p <= '9')
		p++;
	return p > s && p[-1] != '-' ? p : NULL;
}

static void check_json(const char *text) {
	const char *end = json_value(text, 0);
	MP_ASSERT(end != NULL, "invalid JSON");
	MP_ASSERT(*json_ws(end) == '\0', "trailing text after JSON: %.40s",
	    end);
}

static void test_stats_print_json(void **state) {
	(void)state;
	print_stats("J");
	check_json(out_buf);
	assert_true(out_buf[0] == '{');
	/* Longer than the printer's 4 KiB buffer: several chunks. */
	assert_true(out_len > 4096);
	assert_true(out_calls >= 2);
	assert_true(out_max_chunk < 4096);
	static const char *const keys[] = {
		"\"jemalloc\": {", "\"version\": \"", "\"config\": {",
		"\"opt\": {", "\"narenas\": ", "\"arenas\": {",
		"\"quantum\": 16", "\"bin\": [", "\"lextent\": [",
		"\"nregs\": ", "\"slab_size\": ", "\"stats\": {",
		"\"allocated\": ", "\"resident\": ", "\"stats.arenas\": {",
		"\"0\": {", "\"large\": {", "\"small\": {", "\"bins\": [",
		"\"lextents\": [", "\"curregs\": ", "\"zero_reallocs\": ",
		"\"tcache_max\": ", "\"junk\": \"",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(keys); i++) {
		MP_ASSERT(strstr(out_buf, keys[i]) != NULL, "no %s in JSON",
		    keys[i]);
	}
	char want[64];
	snprintf(want, sizeof(want), "\"page\": %zu", (size_t)PAGE);
	assert_non_null(strstr(out_buf, want));
	print_stats("Ja");
	check_json(out_buf);
	assert_non_null(strstr(out_buf, "\"merged\": {"));

	/* Omissions keep it valid. */
	static const char *const variants[] = {
		"Jg", "Jm", "Ja", "Jb", "Jl", "Jgmabl", "Jma", "Jgbl",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(variants); i++) {
		print_stats(variants[i]);
		check_json(out_buf);
	}
	print_stats("Jgmabl");
	assert_null(strstr(out_buf, "\"opt\""));
	assert_null(strstr(out_buf, "\"bin\""));
	assert_null(strstr(out_buf, "\"stats.arenas\""));
	assert_non_null(strstr(out_buf, "\"stats\": {"));
}

/* Strings are JSON-escaped: put quotes and a backslash in an option. */
static void test_stats_print_json_escapes(void **state) {
	(void)state;
	char saved[sizeof(opt_stats_print_opts)];
	memcpy(saved, opt_stats_print_opts, sizeof(saved));
	snprintf(opt_stats_print_opts, sizeof(opt_stats_print_opts),
	    "a\"b\\c\td");
	print_stats("J");
	memcpy(opt_stats_print_opts, saved, sizeof(saved));
	check_json(out_buf);
	assert_non_null(strstr(out_buf,
	    "\"stats_print_opts\": \"a\\\"b\\\\c\\u0009d\""));
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_and_config),
		cmocka_unit_test(test_enoent),
		cmocka_unit_test(test_einval_read_size),
		cmocka_unit_test(test_einval_write_size),
		cmocka_unit_test(test_eperm),
		cmocka_unit_test(test_mib_round_trip),
		cmocka_unit_test(test_every_opt_readable),
		cmocka_unit_test(test_arenas_geometry),
		cmocka_unit_test(test_arenas_create_and_thread_arena),
		cmocka_unit_test(test_thread_allocated),
		cmocka_unit_test(test_thread_tcache),
		cmocka_unit_test(test_epoch),
		cmocka_unit_test(test_stats_invariants),
		cmocka_unit_test(test_stats_arena_fields),
		cmocka_unit_test(test_stats_print_text),
		cmocka_unit_test(test_stats_print_json),
		cmocka_unit_test(test_stats_print_json_escapes),
	};
	return mp_run_tests(tests);
}
