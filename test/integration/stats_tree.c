/*
 * test/integration/stats_tree.c - jemalloc 5.3's statistics tree below
 * stats.arenas.<i> (small.*, large.*, bins.<j>.*, lextents.<j>.*, the
 * per-arena memory figures), stats.zero_reallocs, stats.mutexes.reset,
 * experimental.utilization.{query,batch_query},
 * experimental.arenas.<i>.pactivep, and malloc_stats_print's per-bin and
 * per-large-class tables in text and JSON.  Every name answers with
 * jemalloc's type size and is read-only; the counters follow a known
 * sequence exactly (1000 objects of one class through an explicit cache
 * of a manual arena, flushed); the utilization queries describe the
 * slabs that sequence filled.
 */
#include "../test_util.h"

#define N_OBJS 1000

static unsigned arena_create(void) {
	unsigned a = 0;
	MALLCTL_READ("arenas.create", a);
	return a;
}

static unsigned tcache_create(void) {
	unsigned tc = 0;
	MALLCTL_READ("tcache.create", tc);
	return tc;
}

static void tcache_flush(unsigned tc) {
	int r = mallctl("tcache.flush", NULL, NULL, &tc, sizeof(tc));
	MP_ASSERT(r == 0, "tcache.flush(%u): %d", tc, r);
}

/* The bin index of a small size. */
static unsigned bin_of(size_t size) {
	unsigned nbins = 0;
	MALLCTL_READ("arenas.nbins", nbins);
	for (unsigned j = 0; j < nbins; j++) {
		size_t s = 0;
		assert_int_equal(mallctl_fmt(&s, &(size_t){sizeof(s)}, NULL, 0,
		    "arenas.bin.%u.size", j), 0);
		if (s == size) {
			return j;
		}
	}
	MP_FAIL("no bin of size %zu", size);
	return 0;
}

static uint64_t stat_u64(const char *fmt, unsigned a, unsigned j) {
	uint64_t v = 0;
	size_t sz = sizeof(v);
	int r = mallctl_fmt(&v, &sz, NULL, 0, fmt, a, j);
	MP_ASSERT(r == 0 && sz == sizeof(v), "%s (%u, %u): %d", fmt, a, j, r);
	return v;
}

static size_t stat_size(const char *fmt, unsigned a, unsigned j) {
	size_t v = 0;
	size_t sz = sizeof(v);
	int r = mallctl_fmt(&v, &sz, NULL, 0, fmt, a, j);
	MP_ASSERT(r == 0 && sz == sizeof(v), "%s (%u, %u): %d", fmt, a, j, r);
	return v;
}

/* ------------------------------------------------------------------------ */

/* Every name of the tree, with jemalloc's type sizes; read-only. */
static void test_names(void **state) {
	(void)state;
	static const struct {
		const char *name;       /* after stats.arenas.<i>. */
		size_t size;
	} per_arena[] = {
		{"nthreads", sizeof(unsigned)},
		{"uptime", sizeof(uint64_t)},
		{"dss", sizeof(const char *)},
		{"dirty_decay_ms", sizeof(ssize_t)},
		{"muzzy_decay_ms", sizeof(ssize_t)},
		{"pactive", sizeof(size_t)},
		{"pdirty", sizeof(size_t)},
		{"pmuzzy", sizeof(size_t)},
		{"mapped", sizeof(size_t)},
		{"retained", sizeof(size_t)},
		{"extent_avail", sizeof(size_t)},
		{"dirty_npurge", sizeof(uint64_t)},
		{"dirty_nmadvise", sizeof(uint64_t)},
		{"dirty_purged", sizeof(uint64_t)},
		{"muzzy_npurge", sizeof(uint64_t)},
		{"muzzy_nmadvise", sizeof(uint64_t)},
		{"muzzy_purged", sizeof(uint64_t)},
		{"base", sizeof(size_t)},
		{"internal", sizeof(size_t)},
		{"metadata_thp", sizeof(size_t)},
		{"tcache_bytes", sizeof(size_t)},
		{"resident", sizeof(size_t)},
		{"abandoned_vm", sizeof(size_t)},
		{"small.allocated", sizeof(size_t)},
		{"small.nmalloc", sizeof(uint64_t)},
		{"small.ndalloc", sizeof(uint64_t)},
		{"small.nrequests", sizeof(uint64_t)},
		{"small.nfills", sizeof(uint64_t)},
		{"small.nflushes", sizeof(uint64_t)},
		{"large.allocated", sizeof(size_t)},
		{"large.nmalloc", sizeof(uint64_t)},
		{"large.ndalloc", sizeof(uint64_t)},
		{"large.nrequests", sizeof(uint64_t)},
		{"large.nfills", sizeof(uint64_t)},
		{"large.nflushes", sizeof(uint64_t)},
		{"bins.0.nmalloc", sizeof(uint64_t)},
		{"bins.0.ndalloc", sizeof(uint64_t)},
		{"bins.0.nrequests", sizeof(uint64_t)},
		{"bins.0.curregs", sizeof(size_t)},
		{"bins.0.nfills", sizeof(uint64_t)},
		{"bins.0.nflushes", sizeof(uint64_t)},
		{"bins.0.nslabs", sizeof(uint64_t)},
		{"bins.0.nreslabs", sizeof(uint64_t)},
		{"bins.0.curslabs", sizeof(size_t)},
		{"bins.0.nonfull_slabs", sizeof(size_t)},
		{"lextents.0.nmalloc", sizeof(uint64_t)},
		{"lextents.0.ndalloc", sizeof(uint64_t)},
		{"lextents.0.nrequests", sizeof(uint64_t)},
		{"lextents.0.curlextents", sizeof(size_t)},
		{"mutexes.large.num_ops", sizeof(uint64_t)},
		{"mutexes.large.num_wait", sizeof(uint64_t)},
		{"mutexes.large.num_spin_acq", sizeof(uint64_t)},
		{"mutexes.large.num_owner_switch", sizeof(uint64_t)},
		{"mutexes.large.total_wait_time", sizeof(uint64_t)},
		{"mutexes.large.max_wait_time", sizeof(uint64_t)},
		{"mutexes.large.max_num_thds", sizeof(uint32_t)},
		{"mutexes.tcache_list.num_ops", sizeof(uint64_t)},
		{"mutexes.shared_cache.num_ops", sizeof(uint64_t)},
	};
	static const unsigned arenas[] = {0, 4096};
	mp_epoch();
	for (size_t k = 0; k < MP_ARRAY_SIZE(arenas); k++) {
		for (size_t i = 0; i < MP_ARRAY_SIZE(per_arena); i++) {
			char buf[16];
			size_t sz = per_arena[i].size;
			int r = mallctl_fmt(buf, &sz, NULL, 0,
			    "stats.arenas.%u.%s", arenas[k],
			    per_arena[i].name);
			MP_ASSERT(r == 0, "stats.arenas.%u.%s: %d", arenas[k],
			    per_arena[i].name, r);
			assert_int_equal(sz, per_arena[i].size);
			/* A wrong size is EINVAL, a write EPERM. */
			sz = per_arena[i].size + 1;
			r = mallctl_fmt(buf, &sz, NULL, 0, "stats.arenas.%u.%s",
			    arenas[k], per_arena[i].name);
			MP_ASSERT(r == EINVAL, "stats.arenas.%u.%s, size + 1: "
			    "%d", arenas[k], per_arena[i].name, r);
			r = mallctl_fmt(NULL, NULL, buf, per_arena[i].size,
			    "stats.arenas.%u.%s", arenas[k],
			    per_arena[i].name);
			MP_ASSERT(r == EPERM, "stats.arenas.%u.%s write: %d",
			    arenas[k], per_arena[i].name, r);
		}
	}
	/* The class indices end where arenas.nbins / nlextents say. */
	unsigned nbins = 0, nlextents = 0;
	MALLCTL_READ("arenas.nbins", nbins);
	MALLCTL_READ("arenas.nlextents", nlextents);
	uint64_t v;
	size_t sz = sizeof(v);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "stats.arenas.0.bins.%u.nmalloc", nbins - 1), 0);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "stats.arenas.0.bins.%u.nmalloc", nbins), ENOENT);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "stats.arenas.0.lextents.%u.nmalloc", nlextents - 1), 0);
	assert_int_equal(mallctl_fmt(&v, &sz, NULL, 0,
	    "stats.arenas.0.lextents.%u.nmalloc", nlextents), ENOENT);
	/* Global names. */
	size_t zr = 0;
	MALLCTL_READ("stats.zero_reallocs", zr);
	assert_int_equal(mallctl("stats.mutexes.reset", NULL, NULL, NULL, 0),
	    0);
	assert_int_equal(mallctl("stats.mutexes.reset", &v, &sz, NULL, 0),
	    EPERM);
	uint32_t thds;
	MALLCTL_READ("stats.mutexes.ctl.num_ops", v);
	MALLCTL_READ("stats.mutexes.ctl.max_num_thds", thds);
	/* The dss precedence is one of jemalloc's words. */
	const char *dss = NULL;
	MALLCTL_READ("stats.arenas.0.dss", dss);
	MP_ASSERT(strcmp(dss, "disabled") == 0 || strcmp(dss, "primary") == 0
	    || strcmp(dss, "secondary") == 0, "dss \"%s\"", dss);
}

/* A thread that frees one block without a cache: a remote free into a
 * slab of another cache. */
static void *free_remote(void *p) {
	dallocx(p, MALLOCX_TCACHE_NONE);
	return NULL;
}

/*
 * N_OBJS objects of 64 bytes through an explicit cache of a fresh manual
 * arena: the cache's fills take regions from two fresh slabs in address
 * order, its flush gives back what it still holds.  Afterwards exactly
 * N_OBJS regions are in use, on ceil(N_OBJS / nregs) slabs, of which
 * the last one only is not full.
 */
static void test_bin_counters(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on: samples come from other slabs");
	}
	unsigned a = arena_create();
	unsigned tc = tcache_create();
	unsigned j = bin_of(64);
	uint32_t nregs = 0;
	assert_int_equal(mallctl_fmt(&nregs, &(size_t){sizeof(nregs)}, NULL,
	    0, "arenas.bin.%u.nregs", j), 0);
	size_t slab_size = 0;
	assert_int_equal(mallctl_fmt(&slab_size, &(size_t){sizeof(slab_size)},
	    NULL, 0, "arenas.bin.%u.slab_size", j), 0);
	MP_ASSERT(nregs > 1 && N_OBJS % nregs != 0 && N_OBJS > nregs,
	    "the test wants a partly used second slab (nregs %u)", nregs);
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE(tc);

	static void *p[N_OBJS];
	for (unsigned i = 0; i < N_OBJS; i++) {
		p[i] = mallocx(64, flags);
		assert_non_null(p[i]);
	}
	tcache_flush(tc);
	mp_epoch();
	uint64_t nmalloc = stat_u64("stats.arenas.%u.bins.%u.nmalloc", a, j);
	uint64_t ndalloc = stat_u64("stats.arenas.%u.bins.%u.ndalloc", a, j);
	size_t curregs = stat_size("stats.arenas.%u.bins.%u.curregs", a, j);
	size_t curslabs = stat_size("stats.arenas.%u.bins.%u.curslabs", a, j);
	size_t nonfull = stat_size("stats.arenas.%u.bins.%u.nonfull_slabs", a,
	    j);
	uint64_t nslabs = stat_u64("stats.arenas.%u.bins.%u.nslabs", a, j);
	uint64_t nfills = stat_u64("stats.arenas.%u.bins.%u.nfills", a, j);
	uint64_t nflushes = stat_u64("stats.arenas.%u.bins.%u.nflushes", a, j);
	uint64_t nrequests = stat_u64("stats.arenas.%u.bins.%u.nrequests", a,
	    j);
	uint64_t nreslabs = stat_u64("stats.arenas.%u.bins.%u.nreslabs", a, j);
	size_t expect_slabs = (N_OBJS + nregs - 1) / nregs;
	assert_int_equal(curregs, N_OBJS);
	MP_ASSERT(nmalloc >= N_OBJS, "nmalloc %" PRIu64, nmalloc);
	/* What the flush gave back is what the fills took beyond N_OBJS. */
	assert_int_equal(ndalloc, nmalloc - N_OBJS);
	/* One request per mallocx, counted by the explicit cache and merged
	 * at its flush: fewer than nmalloc, whose fills ran ahead. */
	assert_int_equal(nrequests, N_OBJS);
	assert_int_equal(curslabs, expect_slabs);
	assert_int_equal(nslabs, expect_slabs);
	assert_int_equal(nonfull, 1);
	MP_ASSERT(nfills >= 2 && nflushes >= 1, "nfills %" PRIu64
	    ", nflushes %" PRIu64, nfills, nflushes);
	assert_int_equal(nreslabs, expect_slabs);
	/* The arena's small totals are this class's: nothing else used the
	 * arena. */
	assert_int_equal(stat_size("stats.arenas.%u.small.allocated", a, 0),
	    (size_t)N_OBJS * 64);
	assert_int_equal(stat_u64("stats.arenas.%u.small.nmalloc", a, 0),
	    nmalloc);
	assert_int_equal(stat_u64("stats.arenas.%u.small.nfills", a, 0),
	    nfills);
	/* The merged arena counts at least as much. */
	MP_ASSERT(stat_u64("stats.arenas.%u.bins.%u.nmalloc", 4096, j) >=
	    nmalloc, "merged nmalloc below arena %u's", a);

	/* Utilization of the first, full slab and of the second. */
	size_t util[3];
	size_t len = sizeof(util);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, &p[0], sizeof(void *)), 0);
	assert_int_equal(util[0], 0);
	assert_int_equal(util[1], nregs);
	assert_int_equal(util[2], slab_size);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, &p[N_OBJS - 1], sizeof(void *)), 0);
	assert_int_equal(util[0], (size_t)nregs * expect_slabs - N_OBJS);
	assert_int_equal(util[1], nregs);
	struct {
		void *slabcur_addr;
		size_t nfree, nregs, size, bin_nfree, bin_nregs;
	} v;
	len = sizeof(v);
	assert_int_equal(mallctl("experimental.utilization.query", &v, &len,
	    &p[N_OBJS - 1], sizeof(void *)), 0);
	assert_int_equal(v.nfree, (size_t)nregs * expect_slabs - N_OBJS);
	assert_int_equal(v.nregs, nregs);
	assert_int_equal(v.size, slab_size);
	assert_int_equal(v.bin_nregs, (size_t)nregs * expect_slabs);
	assert_int_equal(v.bin_nfree, v.bin_nregs - N_OBJS);
	/* The current slab is the second one, which holds the last
	 * object. */
	MP_ASSERT((char *)p[N_OBJS - 1] >= (char *)v.slabcur_addr &&
	    (char *)p[N_OBJS - 1] < (char *)v.slabcur_addr + slab_size,
	    "slabcur %p does not hold %p", v.slabcur_addr, p[N_OBJS - 1]);

	/* A free by another thread into the full slab makes it non-full
	 * at once (Valkey's defragmenter counts the regions of the slabs
	 * that are not non-full as nregs each). */
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, free_remote, p[0]), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	mp_epoch();
	assert_int_equal(stat_size("stats.arenas.%u.bins.%u.curregs", a, j),
	    N_OBJS - 1);
	assert_int_equal(stat_size("stats.arenas.%u.bins.%u.nonfull_slabs", a,
	    j), expect_slabs);
	len = sizeof(util);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, &p[1], sizeof(void *)), 0);
	assert_int_equal(util[0], 1);

	/* Everything back: the regions return at the flush. */
	for (unsigned i = 1; i < N_OBJS; i++) {
		dallocx(p[i], flags);
	}
	tcache_flush(tc);
	mp_epoch();
	uint64_t nmalloc2 = stat_u64("stats.arenas.%u.bins.%u.nmalloc", a, j);
	assert_int_equal(stat_u64("stats.arenas.%u.bins.%u.ndalloc", a, j),
	    nmalloc2);
	assert_int_equal(stat_size("stats.arenas.%u.bins.%u.curregs", a, j),
	    0);
	assert_int_equal(stat_size("stats.arenas.%u.small.allocated", a, 0),
	    0);
	MP_ASSERT(stat_u64("stats.arenas.%u.bins.%u.nflushes", a, j) >
	    nflushes, "no flush counted");
	int r = mallctl("tcache.destroy", NULL, NULL, &tc, sizeof(tc));
	assert_int_equal(r, 0);
}

/* Large classes: three blocks of one class carved and returned. */
static void test_lextents(void **state) {
	(void)state;
	if (!mp_stats_exact()) {
		MP_SKIP("opt.prof is on");
	}
	unsigned a = arena_create();
	const size_t size = 3 << 20;    /* a large class of its own */
	unsigned k = 0;
	for (;; k++) {
		size_t s = 0;
		assert_int_equal(mallctl_fmt(&s, &(size_t){sizeof(s)}, NULL, 0,
		    "arenas.lextent.%u.size", k), 0);
		if (s == size) {
			break;
		}
	}
	int flags = MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE;
	void *q[3];
	for (unsigned i = 0; i < 3; i++) {
		q[i] = mallocx(size, flags);
		assert_non_null(q[i]);
	}
	mp_epoch();
	assert_int_equal(stat_u64("stats.arenas.%u.lextents.%u.nmalloc", a, k),
	    3);
	assert_int_equal(stat_u64("stats.arenas.%u.lextents.%u.nrequests", a,
	    k), 3);
	assert_int_equal(stat_size("stats.arenas.%u.lextents.%u.curlextents",
	    a, k), 3);
	assert_int_equal(stat_u64("stats.arenas.%u.large.nrequests", a, 0),
	    3);
	size_t util[3];
	size_t len = sizeof(util);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, &q[1], sizeof(void *)), 0);
	assert_int_equal(util[0], 0);
	assert_int_equal(util[1], 1);
	assert_int_equal(util[2], size);
	for (unsigned i = 0; i < 3; i++) {
		dallocx(q[i], flags);
	}
	mp_epoch();
	assert_int_equal(stat_u64("stats.arenas.%u.lextents.%u.ndalloc", a, k),
	    3);
	assert_int_equal(stat_size("stats.arenas.%u.lextents.%u.curlextents",
	    a, k), 0);
}

/* A lock's counters: an uncached large allocation takes the arena's
 * lock, which its num_ops shows; a reset zeroes them. */
static void test_mutexes(void **state) {
	(void)state;
	unsigned a = arena_create();
	assert_int_equal(mallctl("stats.mutexes.reset", NULL, NULL, NULL, 0),
	    0);
	mp_epoch();
	uint64_t ops0 = stat_u64("stats.arenas.%u.mutexes.large.num_ops", a,
	    0);
	void *q = mallocx(1 << 20, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
	assert_non_null(q);
	dallocx(q, MALLOCX_TCACHE_NONE);
	mp_epoch();
	uint64_t ops1 = stat_u64("stats.arenas.%u.mutexes.large.num_ops", a,
	    0);
	MP_ASSERT(ops1 >= ops0 + 2, "num_ops %" PRIu64 " -> %" PRIu64, ops0,
	    ops1);
	/* One thread only: every acquisition by it, no wait. */
	assert_int_equal(stat_u64(
	    "stats.arenas.%u.mutexes.large.num_owner_switch", a, 0), 1);
	assert_int_equal(stat_u64("stats.arenas.%u.mutexes.large.num_wait", a,
	    0), 0);
	assert_int_equal(mallctl("stats.mutexes.reset", NULL, NULL, NULL, 0),
	    0);
	mp_epoch();
	/* After the reset only the snapshot's own reads remain. */
	MP_ASSERT(stat_u64("stats.arenas.%u.mutexes.large.num_ops", a, 0) <
	    ops1, "reset left num_ops at %" PRIu64, ops1);
}

/* Error codes and edge cases of the experimental names. */
static void test_experimental(void **state) {
	(void)state;
	size_t util[6];
	int local = 0;
	void *ptrs[2] = {&local, NULL};
	/* A pointer into no block: all zero. */
	size_t len = 2 * 3 * sizeof(size_t);
	memset(util, 0xff, sizeof(util));
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, ptrs, sizeof(ptrs)), 0);
	for (unsigned i = 0; i < 6; i++) {
		assert_int_equal(util[i], 0);
	}
	/* Wrong output size, no input, a partial pointer: EINVAL. */
	len = 3 * sizeof(size_t);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, ptrs, sizeof(ptrs)), EINVAL);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, NULL, 0), EINVAL);
	assert_int_equal(mallctl("experimental.utilization.batch_query", util,
	    &len, ptrs, sizeof(void *) + 1), EINVAL);
	len = 3 * sizeof(size_t);
	assert_int_equal(mallctl("experimental.utilization.query", util,
	    &len, ptrs, sizeof(void *)), EINVAL);
	/* pactivep: a pointer to the live count of the arena of a block
	 * just made (the calling thread's), which reads as the snapshot
	 * taken next does (nothing allocates in between). */
	unsigned ta = 0;
	MALLCTL_READ("thread.arena", ta);
	void *blk = mallocx(1 << 20, MALLOCX_TCACHE_NONE);
	assert_non_null(blk);
	size_t *pactive = NULL;
	len = sizeof(pactive);
	assert_int_equal(mallctl_fmt(&pactive, &len, NULL, 0,
	    "experimental.arenas.%u.pactivep", ta), 0);
	assert_non_null(pactive);
	mp_epoch();
	size_t snap = stat_size("stats.arenas.%u.pactive", ta, 0);
	MP_ASSERT(*pactive == snap && snap >= ((size_t)1 << 20) / 65536,
	    "pactivep %zu, stats %zu", *pactive, snap);
	dallocx(blk, MALLOCX_TCACHE_NONE);
	assert_int_equal(mallctl("experimental.arenas.4096.pactivep",
	    &pactive, &len, NULL, 0), EFAULT);
	assert_int_equal(mallctl("experimental.arenas.0.pactivep", NULL, NULL,
	    &pactive, sizeof(pactive)), EPERM);
}

/* stats.zero_reallocs counts realloc(non-NULL, 0). */
static void test_zero_reallocs(void **state) {
	(void)state;
	const char *zr = NULL;
	MALLCTL_READ("opt.zero_realloc", zr);
	if (strcmp(zr, "abort") == 0) {
		MP_SKIP("zero_realloc:abort");
	}
	size_t before = mp_stat("stats.zero_reallocs");
	void *p = LAUNDER(malloc(40));
	assert_non_null(p);
	void *q = realloc(p, opaque_size(0));
	if (q != NULL) {
		free(q);
	}
	assert_int_equal(mp_stat("stats.zero_reallocs"), before + 1);
}

/* ------------------------------------------------------------------------ */
/* malloc_stats_print.                                                      */

static char out_buf[4 * 1024 * 1024];
static size_t out_len;

static void collect(void *opaque, const char *s) {
	(void)opaque;
	size_t n = strlen(s);
	if (out_len + n >= sizeof(out_buf)) {
		n = sizeof(out_buf) - 1 - out_len;
	}
	memcpy(out_buf + out_len, s, n);
	out_len += n;
	out_buf[out_len] = '\0';
}

static const char bins_header[] = "bins:           size ind    allocated"
    "      nmalloc (#/sec)      ndalloc (#/sec)    nrequests   (#/sec)"
    "  nshards      curregs     curslabs  nonfull_slabs regs pgs   util"
    "       nfills (#/sec)     nflushes (#/sec)       nslabs     nreslabs"
    " (#/sec)\n";
static const char large_header[] = "large:          size ind    allocated"
    "      nmalloc (#/sec)      ndalloc (#/sec)    nrequests (#/sec)"
    "  curlextents\n";

/* The text has jemalloc's tables: in the section of a manual arena that
 * used three classes, the bin header and one row per class used, each
 * starting with the class's size and index, then the large header. */
static void test_print_text(void **state) {
	(void)state;
	unsigned a = arena_create();
	static const size_t sizes[] = {16, 96, 1024};
	void *p[MP_ARRAY_SIZE(sizes)];
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		p[i] = mallocx(sizes[i], MALLOCX_ARENA(a) |
		    MALLOCX_TCACHE_NONE);
		assert_non_null(p[i]);
	}
	out_len = 0;
	malloc_stats_print(collect, NULL, "gm");
	char title[32];
	snprintf(title, sizeof(title), "arenas[%u]:\n", a);
	const char *sec = strstr(out_buf, title);
	MP_ASSERT(sec != NULL, "no section %s", title);
	const char *bins = strstr(sec, bins_header);
	MP_ASSERT(bins != NULL, "no bin table header in arenas[%u]", a);
	const char *large = strstr(bins, large_header);
	MP_ASSERT(large != NULL, "no large table header in arenas[%u]", a);
	assert_non_null(strstr(sec, "\nsmall:"));
	assert_non_null(strstr(sec, "\ndecaying:  time       npages"));
	/* Rows: lines between the headers that are not a "---" gap. */
	unsigned rows = 0;
	const char *line = bins + strlen(bins_header);
	while (line < large) {
		const char *nl = strchr(line, '\n');
		assert_non_null(nl);
		if (strstr(line, "---") == NULL || strstr(line, "---") > nl) {
			unsigned long size, ind;
			MP_ASSERT(sscanf(line, "%lu %lu", &size, &ind) == 2,
			    "bin row: %.60s", line);
			bool known = false;
			for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
				known |= size == sizes[i] &&
				    ind == bin_of(sizes[i]);
			}
			MP_ASSERT(known, "row of size %lu ind %lu", size, ind);
			rows++;
		}
		line = nl + 1;
	}
	if (mp_stats_exact()) {
		assert_int_equal(rows, MP_ARRAY_SIZE(sizes));
	}
	assert_non_null(strstr(out_buf, "\n                           n_lock_ops"
	    " (#/sec)       n_waiting (#/sec)"));
	assert_non_null(strstr(out_buf, "\nctl                 "));
	assert_non_null(strstr(out_buf, "___ Begin jemalloc statistics ___"));
	assert_non_null(strstr(out_buf, "--- End jemalloc statistics ---"));
	/* x leaves the mutex tables out. */
	out_len = 0;
	malloc_stats_print(collect, NULL, "gmx");
	assert_null(strstr(out_buf, "n_lock_ops"));
	assert_non_null(strstr(out_buf, bins_header));
	for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
		dallocx(p[i], MALLOCX_TCACHE_NONE);
	}
}

/* The JSON output parses (python3's json module, when there is one) and
 * has the per-arena tables under jemalloc's keys. */
static void test_print_json(void **state) {
	(void)state;
	static const char *const opts[] = {"J", "Jg", "Jgmbl", "Jgmdablxeh"};
	for (size_t i = 0; i < MP_ARRAY_SIZE(opts); i++) {
		out_len = 0;
		malloc_stats_print(collect, NULL, opts[i]);
		MP_ASSERT(out_len > 2 && out_buf[0] == '{', "JSON (\"%s\")",
		    opts[i]);
		if (i <= 1) {
			assert_non_null(strstr(out_buf, "\"jemalloc\": {"));
			assert_non_null(strstr(out_buf, "\"stats.arenas\": {"));
			assert_non_null(strstr(out_buf, "\"bins\": ["));
			assert_non_null(strstr(out_buf, "\"lextents\": ["));
			assert_non_null(strstr(out_buf, "\"nonfull_slabs\": "));
			assert_non_null(strstr(out_buf,
			    "\"zero_reallocs\": "));
		}
		if (i == 2) {
			assert_null(strstr(out_buf, "\"bins\": ["));
		}
		if (system("command -v python3 >/dev/null 2>&1") != 0) {
			continue;
		}
		FILE *f = popen("python3 -c 'import json,sys; "
		    "d = json.load(sys.stdin); assert \"stats\" in "
		    "d[\"jemalloc\"]'", "w");
		assert_non_null(f);
		fwrite(out_buf, 1, out_len, f);
		int st = pclose(f);
		MP_ASSERT(st == 0, "python3 rejects the JSON of \"%s\" (%d)",
		    opts[i], st);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_bin_counters),
		cmocka_unit_test(test_lextents),
		cmocka_unit_test(test_mutexes),
		cmocka_unit_test(test_experimental),
		cmocka_unit_test(test_zero_reallocs),
		cmocka_unit_test(test_print_text),
		cmocka_unit_test(test_print_json),
	};
	return mp_run_tests(tests);
}
