/*
 * test/unit/prof_paths.c - the profiler's cheaper sampled paths must keep
 * what they record: prof_sys_thread_name's reads at most once a period
 * (PROF_SYS_NAME_PERIOD_NS on the sample clock, and at the thread's
 * exit) with a rename showing at the first sample a period later; large
 * samples taken and given back on the thread cache's own path
 * (malloc.c's alloc_large_cached / dalloc_large_cached), with their
 * records and the live estimate exact; and the lifetime table, now
 * guarded by the gctx shard locks with each gctx remembering its record,
 * counting on across a stack's gctx being freed and made again; the
 * gctxs kept when their last tctx goes, at most one a shard; the shard
 * tables sized by the CPUs; the recent records' free side walked from
 * the free's own frame; and the variables every sample reads gathered in
 * a few cache lines, apart from those a sample writes.
 *
 * prof_paths.conf: prof:true,lg_prof_sample:0,prof_sys_thread_name:true
 * (every allocation is a sample).  The name test's bound is the rule's
 * own (reads by the sample clock's elapsed time), never a speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include "prof_recent_json.h"

#include <time.h>

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

/* ------------------------------------------------ prof_sys_thread_name */

typedef struct {
	uint64_t reads_loop;     /* PR_GET_NAME reads over the loop */
	uint64_t loop_ns;        /* the loop's length, on CLOCK_MONOTONIC */
	char first[PROF_THREAD_NAME_MAX];
	char later[PROF_THREAD_NAME_MAX];
	prof_tdata_t *td;
	void *keep;              /* a live sample: td outlives the thread */
} name_run_t;

static uint64_t mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define NAME_LOOP 4000

static void *name_thread(void *arg) {
	name_run_t *r = arg;
	pthread_setname_np(pthread_self(), "first-name");
	uint64_t reads0 = atomic_load(&prof_sys_name_reads);
	uint64_t t0 = mono_ns();
	for (int i = 0; i < NAME_LOOP; i++)
		free(LAUNDER(malloc(opaque_size(48))));
	r->loop_ns = mono_ns() - t0;
	r->reads_loop = atomic_load(&prof_sys_name_reads) - reads0;
	tsd_t *tsd = tsd_fetch();
	r->td = tsd->prof_tdata;
	memcpy(r->first, r->td->name, PROF_THREAD_NAME_MAX);
	/* Renamed: shown at the first sample a period after the last read,
	 * which came before the rename (the sample clock is monotonic). */
	pthread_setname_np(pthread_self(), "later-name");
	uint64_t renamed = prof_time_ns();
	while (prof_time_ns() - renamed < PROF_SYS_NAME_PERIOD_NS) {
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	r->keep = LAUNDER(malloc(opaque_size(48)));
	memcpy(r->later, r->td->name, PROF_THREAD_NAME_MAX);
	/* And at the exit, with no sample after the rename. */
	pthread_setname_np(pthread_self(), "exit-name");
	return NULL;
}

static void test_sys_name_period(void **state) {
	(void)state;
	if (!config_prof || !opt_prof || !opt_prof_sys_thread_name)
		MP_SKIP("profiling not built in / not on");
	name_run_t r;
	memset(&r, 0, sizeof(r));
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, name_thread, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* The first sample reads; then one read a period at most (the
	 * coarse clock may run up to a tick behind: 10 ms more). */
	uint64_t bound = 1 + (r.loop_ns + 10 * 1000 * 1000) /
	    PROF_SYS_NAME_PERIOD_NS;
	MP_ASSERT(r.reads_loop >= 1 && r.reads_loop <= bound, "%" PRIu64
	    " name reads over %d samples in %" PRIu64 " ns (at most %"
	    PRIu64 ")", r.reads_loop, NAME_LOOP, r.loop_ns, bound);
	assert_string_equal(r.first, "first-name");
	assert_string_equal(r.later, "later-name");
	/* The live sample keeps the tdata: its name as the thread left. */
	prof_tdatas_lock();
	char left[PROF_THREAD_NAME_MAX];
	memcpy(left, r.td->name, sizeof(left));
	prof_tdatas_unlock();
	assert_string_equal(left, "exit-name");
	free(r.keep);
}

/* ------------------------------------------------ large cached samples */

MP_SITE void *large_site(size_t size);

MP_SITE void *large_site(size_t size) {
	return LAUNDER(malloc(size));
}

/* Blocks of a class the thread cache keeps (16 KiB to tcache_max), each
 * sampled, freed and taken again: after the first, malloc pops the cached
 * block and samples it there, and free gives the sample back before
 * caching the block.  Each must carry its own record, and the live
 * estimate must come back to where it was. */
static void test_large_cached_samples(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	if (opt_tcache_max < 40960)
		MP_SKIP("tcache_max below the test's class");
	/* Warm: the class's first block, then its cached copy. */
	free(large_site(40000));
	uint64_t live0 = atomic_load(&prof_live.bytes);
	uint64_t uid = prof_tdata_get(tsd_fetch())->uid;
	void *prev = NULL;
	int reused = 0;
	for (int i = 0; i < 64; i++) {
		void *p = large_site(40000);
		assert_non_null(p);
		prof_sample_info_t info;
		MP_ASSERT(!prof_sample_info(p, &info), "block %d (%p) is "
		    "not a sample", i, p);
		assert_int_equal(info.usize, 40960);
		assert_int_equal(info.uid, uid);
		MP_ASSERT(atomic_load(&prof_live.bytes) > live0, "block %d: "
		    "live estimate did not grow", i);
		reused += p == prev;
		prev = p;
		free(p);
		MP_ASSERT(prof_sample_info(p, &info), "block %d is still a "
		    "sample after its free", i);
		MP_ASSERT(atomic_load(&prof_live.bytes) == live0, "block %d: "
		    "live estimate %" PRIu64 " after the free, %" PRIu64
		    " before", i, atomic_load(&prof_live.bytes), live0);
	}
	/* The cached path was the one taken (the same block each time). */
	MP_ASSERT(reused >= 32, "only %d of 64 blocks came from the cache",
	    reused);
}

/* ------------------------------------------------ lifetime records */

MP_SITE void *life_site(size_t size);

MP_SITE void *life_site(size_t size) {
	return LAUNDER(malloc(size));
}

/* The freed count of the lifetime record whose stack holds a return
 * address into life_site; 0 if none. */
static uint64_t life_freed(void) {
	dump_snap_t live, life;
	const char *why = NULL;
	assert_false(prof_snap_collect(&live, &why));
	assert_false(prof_lifetime_collect(&life, &live, prof_samples_foreach,
	    prof_shards_lock_all, prof_shards_unlock_all, prof_life_part,
	    prof_nshards, prof_time_ns(), &why));
	prof_snap_release(&live);
	uint64_t freed = 0;
	const char *p = life.gbuf;
	for (size_t i = 0; i < life.ngctx; i++) {
		const dump_gctx_t *g = (const dump_gctx_t *)p;
		void *const *frames = (void *const *)(p + sizeof(*g));
		for (uint32_t f = 0; f < g->nframes; f++) {
			uintptr_t a = (uintptr_t)frames[f];
			if (a > (uintptr_t)life_site &&
			    a < (uintptr_t)life_site + 128)
				freed += g->cnt.accumobjs;
		}
		p += sizeof(*g) + dump_frames_size(g->nframes) + g->ntctx *
		    sizeof(dump_tctx_t);
	}
	prof_snap_release(&life);
	return freed;
}

/* Small and large samples of one site, all freed (so its gctx goes with
 * its last tctx), twice: the second gctx finds the first one's record,
 * and the freed count adds up. */
static void test_lifetime_record_kept(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	uint64_t before = life_freed();
	static void *objs[40];
	for (int round = 1; round <= 2; round++) {
		for (int i = 0; i < 40; i++)
			objs[i] = life_site(i % 2 ? 100 : 50000);
		for (int i = 0; i < 40; i++)
			free(objs[i]);
		uint64_t freed = life_freed() - before;
		MP_ASSERT(freed == (uint64_t)(40 * round), "round %d: %"
		    PRIu64 " frees counted, %d made", round, freed,
		    40 * round);
	}
}

/* ------------------------------------------------ recent records' frees */

MP_SITE void free_site(void *p);

MP_SITE void free_site(void *p) {
	free(p);
	__asm__ __volatile__("" ::: "memory");  /* no tail call: on the stack */
}

/* The free side of a recent record is walked from the exported free's
 * frame (free_slow, dalloc_impl): a large block freed on the cache's
 * path and a small one on dalloc_impl's both name the free's caller
 * first, with no frame of the allocator. */
static void test_recent_free_walk(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	prof_recent_max_set(0);
	free(large_site(40000));        /* the block is cached now */
	prof_recent_max_set(16);
	for (int i = 0; i < 4; i++) {
		free_site(large_site(40000));
		free_site(large_site(100));
	}
	json_t j = {NULL, 0, 0};
	assert_false(prof_recent_dump(json_write, &j, 1,
	    prof_time_wall_offset()));
	assert_non_null(j.buf);
	int freed = 0;
	for (const char *r = strstr(j.buf, "{\"size\""); r != NULL;) {
		const char *next = strstr(r + 1, "{\"size\"");
		const char *end = next != NULL ? next : j.buf + j.len;
		if (trace_has(r, end, "\"alloc_trace\"",
		    (uintptr_t)large_site, (uintptr_t)large_site + 128)) {
			const char *d = strstr(r, "\"dalloc_trace\"");
			MP_ASSERT(d != NULL && d < end, "a record of the site "
			    "has no free side");
			const char *first = strstr(d, "\"0x");
			assert_non_null(first);
			uintptr_t a = (uintptr_t)strtoull(first + 1, NULL, 16);
			MP_ASSERT(a > (uintptr_t)free_site &&
			    a < (uintptr_t)free_site + 128, "the free's first "
			    "frame %p is not in free_site (%p)", (void *)a,
			    (void *)free_site);
			freed++;
		}
		r = next;
	}
	free(j.buf);
	prof_recent_max_set(0);
	assert_int_equal(freed, 8);
}

/* ------------------------------------------------ kept gctxs */

MP_SITE void *deep_site(int depth, size_t size);

/* A distinct stack per depth (no tail calls: the barrier). */
MP_SITE void *deep_site(int depth, size_t size) {
	void *p = depth == 0 ? LAUNDER(malloc(size)) :
	    deep_site(depth - 1, size);
	__asm__ __volatile__("" ::: "memory");
	return p;
}

static void count_empty(prof_gctx_t *g, void *arg) {
	*(unsigned *)arg += g->tctxs == NULL;
}

static void count_all(prof_gctx_t *g, void *arg) {
	(void)g;
	*(unsigned *)arg += 1;
}

static unsigned gctx_count(prof_gctx_visit_t *visit) {
	unsigned n = 0;
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_shard_lock(i);
		prof_gctx_foreach_locked_shard(i, visit, &n);
		prof_shard_unlock(i);
	}
	return n;
}

/* A gctx left without a tctx is kept, one a shard: 200 stacks each
 * sampled once and freed leave at most prof_nshards empty gctxs, and
 * the last stack's, sampled again, is the same gctx. */
static void test_kept_gctx_bounded(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	for (int d = 0; d < 200; d++)
		free(deep_site(d, 100));
	unsigned empty = gctx_count(count_empty);
	MP_ASSERT(empty >= 1 && empty <= prof_nshards, "%u gctxs kept "
	    "without a tctx after 200 stacks", empty);
	/* The last stack freed is its shard's kept one: sampled again, it
	 * makes no new gctx. */
	unsigned all = gctx_count(count_all);
	void *p = deep_site(199, 100);
	prof_sample_info_t info;
	assert_false(prof_sample_info(p, &info));
	unsigned again = gctx_count(count_all);
	free(p);
	MP_ASSERT(again == all, "%u gctxs after the stack's new sample, %u "
	    "before", again, all);
}

/* The two shard tables hold 4 shards a CPU (a power of two, 8 to 64):
 * on this machine's CPUs, no more; the gctxs of 100 live stacks sit only
 * in those shards and fill at least half of them; a machine of 2 CPUs
 * has both tables in 2 pages (64 shards each were 9). */
static void test_shard_tables_sized(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	unsigned ncpus = os_ncpus(), want = PROF_SHARDS_MIN;
	while (want < PROF_GCTX_SHARDS && want < 4 * ncpus)
		want *= 2;
	MP_ASSERT(prof_nshards == want, "%u shards on %u CPUs, want %u",
	    prof_nshards, ncpus, want);
	const void *ga, *sa;
	size_t gsize, ssize;
	prof_shards_extent(false, &ga, &gsize);
	prof_shards_extent(true, &sa, &ssize);
	assert_non_null(ga);
	assert_non_null(sa);
	if (ncpus <= 2)
		MP_ASSERT(gsize + ssize <= 2 * PAGE, "the shard tables take "
		    "%zu bytes on %u CPUs", gsize + ssize, ncpus);
	/* Each shard in lines of its own: two shards' locks and chains
	 * never share one (nor does the live-bytes counter with anything). */
	MP_ASSERT((uintptr_t)ga % CACHELINE == 0 &&
	    (uintptr_t)sa % CACHELINE == 0, "shard tables at %p and %p",
	    ga, sa);
	MP_ASSERT(gsize % ((size_t)prof_nshards * CACHELINE) == 0 &&
	    ssize % ((size_t)prof_nshards * CACHELINE) == 0,
	    "shards of %zu and %zu bytes", gsize / prof_nshards,
	    ssize / prof_nshards);
	assert_int_equal((uintptr_t)&prof_live % CACHELINE, 0);
	assert_int_equal(sizeof(prof_live), CACHELINE);
	void *live[100];
	for (int d = 0; d < 100; d++)
		live[d] = deep_site(d, 100);
	uint64_t used = atomic_load(&prof_gctx_shards_used);
	for (int d = 0; d < 100; d++)
		free(live[d]);
	unsigned nused = (unsigned)__builtin_popcountll(used);
	MP_ASSERT(prof_nshards == 64 || used >> prof_nshards == 0,
	    "gctx shards used past the %u made: %#llx", prof_nshards,
	    (unsigned long long)used);
	MP_ASSERT(nused * 2 >= prof_nshards, "100 stacks in %u of %u shards",
	    nused, prof_nshards);
}

/* ------------------------------------------------------ mp_read_mostly */

/* The linker's bounds of the section (an orphan section named like a C
 * identifier gets them). */
extern const char __start_mp_read_mostly[], __stop_mp_read_mostly[];

static bool read_mostly_holds(const void *p, size_t size) {
	return (const char *)p >= __start_mp_read_mostly &&
	    (const char *)p + size <= __stop_mp_read_mostly;
}

/* What a sample reads and nearly nothing writes lies in mp_read_mostly,
 * 3 cache lines from a line's start; the live-bytes counter, written by
 * every sample, does not (its writes would evict the rest from every
 * core).  Dropping MP_READ_MOSTLY from one of these, or a new variable
 * that pushes the section past 3 lines, fails here. */
static void test_read_mostly_lines(void **state) {
	(void)state;
	uintptr_t lo = (uintptr_t)__start_mp_read_mostly;
	uintptr_t hi = (uintptr_t)__stop_mp_read_mostly;
	MP_ASSERT(lo % CACHELINE == 0, "mp_read_mostly starts at %#lx, "
	    "inside a line", (unsigned long)lo);
	MP_ASSERT(hi - lo <= 3 * CACHELINE, "mp_read_mostly takes %lu bytes, "
	    "over 3 lines", (unsigned long)(hi - lo));
	const struct {
		const char *name;
		const void *p;
		size_t size;
	} vars[] = {
		{"hook_gen", &hook_gen, sizeof(hook_gen)},
		{"prof_active", &prof_active, sizeof(prof_active)},
		{"prof_lg_sample", &prof_lg_sample, sizeof(prof_lg_sample)},
		{"prof_epoch", &prof_epoch, sizeof(prof_epoch)},
		{"prof_wait_gen", &prof_wait_gen, sizeof(prof_wait_gen)},
		{"prof_zig", &prof_zig, sizeof(prof_zig)},
		{"prof_nshards", &prof_nshards, sizeof(prof_nshards)},
		{"prof_peak_next", &prof_peak_next, sizeof(prof_peak_next)},
		{"prof_recent_max", &prof_recent_max, sizeof(prof_recent_max)},
		{"opt_prof", &opt_prof, sizeof(opt_prof)},
		{"opt_prof_accum", &opt_prof_accum, sizeof(opt_prof_accum)},
		{"opt_prof_bt_max", &opt_prof_bt_max, sizeof(opt_prof_bt_max)},
		{"opt_prof_stats", &opt_prof_stats, sizeof(opt_prof_stats)},
		{"opt_prof_unwind", &opt_prof_unwind, sizeof(opt_prof_unwind)},
		{"opt_prof_sys_thread_name", &opt_prof_sys_thread_name,
		    sizeof(opt_prof_sys_thread_name)},
		{"opt_prof_time_resolution", &opt_prof_time_resolution,
		    sizeof(opt_prof_time_resolution)},
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		MP_ASSERT(read_mostly_holds(vars[i].p, vars[i].size),
		    "%s at %p, outside mp_read_mostly [%p, %p)", vars[i].name,
		    vars[i].p, (const void *)__start_mp_read_mostly,
		    (const void *)__stop_mp_read_mostly);
	MP_ASSERT(!read_mostly_holds(&prof_live, sizeof(prof_live)),
	    "prof_live, written by every sample, in mp_read_mostly");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sys_name_period),
		cmocka_unit_test(test_large_cached_samples),
		cmocka_unit_test(test_lifetime_record_kept),
		cmocka_unit_test(test_kept_gctx_bounded),
		cmocka_unit_test(test_shard_tables_sized),
		cmocka_unit_test(test_recent_free_walk),
		cmocka_unit_test(test_read_mostly_lines),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
