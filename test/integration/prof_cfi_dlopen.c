/*
 * test/integration/prof_cfi_dlopen.c - stacks through a library loaded
 * with dlopen and unloaded with dlclose over and over, while other
 * threads keep allocating through other chains: every allocation is a
 * sample (lg_prof_sample:0), walked with .eh_frame (prof_unwind:cfi
 * here, prof_unwind:auto in a second run of this program).
 *
 * prof_cfi_dlopen.conf: prof:true,lg_prof_sample:0,prof_unwind:cfi.
 * Two "library" threads each run a bounded number of rounds: dlopen one
 * of two copies of prof_cfi_dl_lib.c (libmpcfidla, libmpcfidlb: same
 * code, different frame sizes), allocate PER_ROUND blocks through
 *   dl_lib_thread -> dl_chain_outer -> dl_chain_inner -> cfi_dl_mid ->
 *   cfi_dl_alloc -> malloc
 * (the last two in the library, all built -O2 -fomit-frame-pointer),
 * dump, check, free them and dlclose.  The threads use the copies in
 * opposite order, so a copy is unmapped whenever its last user closes
 * it, and the other is often mapped where it was.  The check, while the
 * copy is still loaded: every live stack whose first program frame is
 * in this mapping's cfi_dl_alloc names the whole chain above, in order,
 * and these stacks hold at least the round's blocks.  Meanwhile two
 * "sampler" threads allocate and free through
 *   dl_smp_thread -> smp_lvl1 -> smp_lvl2 -> cfi_lib_lvl4 -> cfi_lib_alloc
 * (a linked library, prof_cfi_lib.c) until the library threads are done
 * (bounded), and the stacks of their last blocks are checked the same
 * way at the end.  Nothing here depends on timing: any interleaving of
 * the threads must pass.
 */
#include "../test_util.h"

#ifndef CFI_DL_DIR
#error "CFI_DL_DIR: where libtool put libmpcfidla.so and libmpcfidlb.so"
#endif

#define LIB_THREADS 2
#define SMP_THREADS 2
#define PER_ROUND 8
/* Blocks each sampler keeps live (checked at the end). */
#define SMP_LIVE 16
/* Sampler iterations: at least SMP_MIN, then until the library threads
 * are done, at most SMP_MAX. */
#define SMP_MIN 1000
#define SMP_MAX 2000000

static char tmpdir[256];

typedef void *(*dl_fn_t)(size_t);

void *cfi_lib_alloc(size_t n);
void *cfi_lib_lvl4(size_t n);
void *dl_chain_inner(dl_fn_t f, size_t n);
void *dl_chain_outer(dl_fn_t f, size_t n);
void *smp_lvl1(size_t n);
void *smp_lvl2(size_t n);
void *dl_lib_thread(void *arg);
void *dl_smp_thread(void *arg);

MP_NOFP_SITE void *dl_chain_inner(dl_fn_t f, size_t n) {
	volatile long pad[3];
	pad[n % 3] = 0;
	void *p = f(n + (size_t)pad[n % 3]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *dl_chain_outer(dl_fn_t f, size_t n) {
	void *p = dl_chain_inner(f, n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *smp_lvl2(size_t n) {
	volatile char pad[24];
	pad[n % 24] = 0;
	void *p = cfi_lib_lvl4(n + (size_t)pad[n % 24]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *smp_lvl1(size_t n) {
	void *p = smp_lvl2(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* A function's name (by dladdr) and address range. */
typedef struct {
	const char *name;
	uintptr_t lo, hi;
} span_t;

static span_t span_of(const char *name, const void *fn) {
	span_t s = {name, 0, 0};
	mp_fn_range(fn, &s.lo, &s.hi);
	return s;
}

static void print_stack(const char *tag, const mp_heap_stack_t *s, size_t u) {
	char line[1024];
	int len = snprintf(line, sizeof(line), "# %s:", tag);
	for (size_t k = u; k < s->nframes && len > 0 &&
	    (size_t)len < sizeof(line); k++) {
		len += snprintf(line + len, sizeof(line) - (size_t)len,
		    " %s", mp_fn_name(s->frames[k]));
	}
	mp_write_line(line);
}

/*
 * Dumps to path and checks every live stack whose first program frame
 * lies in want[0]: its frames from there are want[0..n-1] in order.
 * Returns the live objects of those stacks.
 */
static uint64_t check_chains(const char *path, const char *tag,
    const span_t *want, size_t n) {
	MP_CHECK(mp_prof_dump(path) == 0, "%s: prof.dump", tag);
	mp_heap_t h;
	if (!mp_heap_parse(path, &h)) {
		MP_CHECK(false, "%s: %s", path, h.err);
		unlink(path);
		return 0;
	}
	uint64_t objs = 0;
	for (size_t i = 0; i < h.nstacks; i++) {
		const mp_heap_stack_t *s = &h.stacks[i];
		size_t u = mp_heap_user_frame(s);
		if (s->total.co == 0 || u >= s->nframes ||
		    !mp_ra_in(s->frames[u], want[0].lo, want[0].hi))
			continue;
		objs += s->total.co;
		bool ok = s->nframes - u >= n;
		for (size_t k = 0; ok && k < n; k++)
			ok = mp_ra_in(s->frames[u + k], want[k].lo, want[k].hi);
		if (!ok) {
			print_stack(tag, s, u);
			MP_CHECK(false, "%s: a stack through %s is not %s ... "
			    "%s (printed above)", tag, want[0].name,
			    want[0].name, want[n - 1].name);
		}
	}
	mp_heap_free(&h);
	unlink(path);
	return objs;
}

static const char *mode_name;
static atomic_bool lib_done;
/* Rounds in which a copy was mapped at the base the other copy had in
 * the round before (the case where remembered rows would be wrong). */
static atomic_uint lib_reuse;
static atomic_uint lib_rounds;

typedef struct {
	unsigned id, rounds;
	char dir[256];
} lib_arg_t;

static const char *const lib_paths[2] = {
	CFI_DL_DIR "/libmpcfidla.so", CFI_DL_DIR "/libmpcfidlb.so"
};

/* Base at which each copy was last mapped (0: not yet). */
static _Atomic uintptr_t lib_last_base[2];

MP_SITE void *dl_lib_thread(void *arg) {
	lib_arg_t *a = arg;
	for (unsigned r = 0; r < a->rounds; r++) {
		unsigned which = (r + a->id) % 2;
		void *h = dlopen(lib_paths[which], RTLD_NOW | RTLD_LOCAL);
		MP_CHECK(h != NULL, "dlopen %s: %s", lib_paths[which],
		    dlerror());
		if (h == NULL)
			break;
		dl_fn_t mid = (dl_fn_t)dlsym(h, "cfi_dl_mid");
		dl_fn_t alloc = (dl_fn_t)dlsym(h, "cfi_dl_alloc");
		MP_CHECK(mid != NULL && alloc != NULL, "dlsym");
		if (mid == NULL || alloc == NULL) {
			dlclose(h);
			break;
		}
		Dl_info di;
		if (dladdr((void *)alloc, &di) != 0) {
			uintptr_t base = (uintptr_t)di.dli_fbase;
			if (atomic_load(&lib_last_base[1 - which]) == base)
				atomic_fetch_add(&lib_reuse, 1);
			atomic_store(&lib_last_base[which], base);
		}
		void *keep[PER_ROUND];
		for (unsigned k = 0; k < PER_ROUND; k++) {
			keep[k] = dl_chain_outer(mid, 100 + 16 * k + a->id);
			MP_CHECK(keep[k] != NULL, "malloc");
		}
		const span_t want[] = {
			span_of("cfi_dl_alloc", (const void *)alloc),
			span_of("cfi_dl_mid", (const void *)mid),
			span_of("dl_chain_inner", (const void *)dl_chain_inner),
			span_of("dl_chain_outer", (const void *)dl_chain_outer),
			span_of("dl_lib_thread", (const void *)dl_lib_thread),
		};
		char path[512], tag[64];
		snprintf(path, sizeof(path), "%s/%s-lib%u-%u.heap", a->dir,
		    mode_name, a->id, r);
		snprintf(tag, sizeof(tag), "%s lib thread %u round %u (%s)",
		    mode_name, a->id, r, which == 0 ? "a" : "b");
		uint64_t objs = check_chains(path, tag, want,
		    MP_ARRAY_SIZE(want));
		MP_CHECK(objs >= PER_ROUND, "%s: %" PRIu64 " live blocks "
		    "through the library's chain, expected at least %u", tag,
		    objs, PER_ROUND);
		for (unsigned k = 0; k < PER_ROUND; k++)
			free(keep[k]);
		MP_CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
		atomic_fetch_add(&lib_rounds, 1);
	}
	return NULL;
}

typedef struct {
	void *ring[SMP_LIVE];
	unsigned long iters;
} smp_arg_t;

MP_SITE void *dl_smp_thread(void *arg) {
	smp_arg_t *a = arg;
	unsigned long i;
	for (i = 0; i < SMP_MAX && (i < SMP_MIN ||
	    !atomic_load_explicit(&lib_done, memory_order_acquire)); i++) {
		free(a->ring[i % SMP_LIVE]);
		a->ring[i % SMP_LIVE] = smp_lvl1(64 + i % 200);
		MP_CHECK(a->ring[i % SMP_LIVE] != NULL, "malloc");
	}
	a->iters = i;
	return NULL;
}

static void run_mode(const char *dir, const char *mode) {
	mode_name = mode;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	MP_CHECK(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0) == 0 &&
	    strcmp(opt, mode) == 0, "opt.prof_unwind is not %s", mode);
	unsigned rounds = mp_slow_build() ? 12 : 40;
	atomic_store(&lib_done, false);
	pthread_t lt[LIB_THREADS], st[SMP_THREADS];
	lib_arg_t la[LIB_THREADS];
	static smp_arg_t sa[SMP_THREADS];
	memset(sa, 0, sizeof(sa));
	for (unsigned i = 0; i < SMP_THREADS; i++) {
		MP_CHECK(pthread_create(&st[i], NULL, dl_smp_thread, &sa[i])
		    == 0, "pthread_create");
	}
	for (unsigned i = 0; i < LIB_THREADS; i++) {
		la[i].id = i;
		la[i].rounds = rounds;
		snprintf(la[i].dir, sizeof(la[i].dir), "%s", dir);
		MP_CHECK(pthread_create(&lt[i], NULL, dl_lib_thread, &la[i])
		    == 0, "pthread_create");
	}
	for (unsigned i = 0; i < LIB_THREADS; i++)
		pthread_join(lt[i], NULL);
	atomic_store_explicit(&lib_done, true, memory_order_release);
	unsigned long iters = 0;
	for (unsigned i = 0; i < SMP_THREADS; i++) {
		pthread_join(st[i], NULL);
		iters += sa[i].iters;
	}
	const span_t want[] = {
		span_of("cfi_lib_alloc", (const void *)cfi_lib_alloc),
		span_of("cfi_lib_lvl4", (const void *)cfi_lib_lvl4),
		span_of("smp_lvl2", (const void *)smp_lvl2),
		span_of("smp_lvl1", (const void *)smp_lvl1),
		span_of("dl_smp_thread", (const void *)dl_smp_thread),
	};
	char path[512], tag[64];
	snprintf(path, sizeof(path), "%s/%s-samplers.heap", dir, mode);
	snprintf(tag, sizeof(tag), "%s samplers", mode);
	uint64_t objs = check_chains(path, tag, want, MP_ARRAY_SIZE(want));
	MP_CHECK(objs >= SMP_THREADS * SMP_LIVE, "%s: %" PRIu64 " live "
	    "blocks through the samplers' chain, expected at least %u", tag,
	    objs, SMP_THREADS * SMP_LIVE);
	for (unsigned i = 0; i < SMP_THREADS; i++)
		mp_free_all(sa[i].ring, SMP_LIVE);
	printf("# %s: %u rounds of dlopen/check/dlclose (%u of them mapped "
	    "a copy where the other had been), %lu sampler allocations\n",
	    mode, atomic_load(&lib_rounds), atomic_load(&lib_reuse), iters);
	fflush(stdout);
	MP_CHECK(atomic_load(&lib_rounds) == LIB_THREADS * rounds,
	    "%u rounds done of %u", atomic_load(&lib_rounds),
	    LIB_THREADS * rounds);
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	assert_int_equal(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0),
	    ENOENT);
}

static void test_cfi(void **state) {
	(void)state;
	run_mode(tmpdir, "cfi");
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/* auto in a run of its own (options are read at start-up). */
static void test_auto(void **state) {
	(void)state;
	assert_int_equal(setenv(mp_env_conf_name(),
	    "prof:true,lg_prof_sample:0,prof_unwind:auto", 1), 0);
	assert_int_equal(setenv("MP_PROF_CFI_DIR", tmpdir, 1), 0);
	mp_run_self("prof_cfi_dlopen", "auto");
}

int main(int argc, char **argv) {
	if (argc == 2) {
		/* The child of test_auto: failures on stderr. */
		const char *dir = getenv("MP_PROF_CFI_DIR");
		if (dir == NULL)
			return 2;
		run_mode(dir, argv[1]);
		return atomic_load(&mp_failures) == 0 ? 0 : 1;
	}
	mp_test_init(600);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cfi),
		cmocka_unit_test(test_auto),
	};
	return mp_prof_test_main("mp_prof_cfi_dlopen", test_no_profiler,
	    tests);
}
