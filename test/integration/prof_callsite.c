/*
 * test/integration/prof_callsite.c - backtraces attribute each sample to
 * the right call site.
 *
 * prof_callsite.conf: prof:true,lg_prof_sample:0 (every allocation
 * sampled).  Each site is a function of its own that allocates a known
 * number of objects of a known size through one allocator entry point.
 * In the dump, the stack of each site must have:
 *   - frame 0: the address of the entry point the program called (malloc,
 *     calloc, realloc, ...), which is how jeprof knows where the
 *     allocator's frames end; in a prefixed build, not written (frame 0
 *     of the dump is the call into the allocator, which mp_heap_parse
 *     turns back into frame 1's return address, with 0 as frame 0);
 *   - frame 1: a return address inside the site function (its ELF symbol
 *     range, from dladdr1: the program is linked with -export-dynamic),
 *     not one inside the allocator (checked last, so that the checks
 *     below still run past such frames);
 *   - frame 2: a return address inside the function that called the
 *     site (drive_sites), so the walk goes on past the first frame;
 *   - exactly the objects and bytes the site allocated.
 */
#include "../test_util.h"

#define NOBJ 16

typedef void *site_fn_t(size_t size);

void *site_malloc(size_t size);
void *site_calloc(size_t size);
void *site_realloc(size_t size);
void *site_realloc_null(size_t size);
void *site_posix_memalign(size_t size);
void *site_aligned_alloc(size_t size);
void *site_memalign(size_t size);
void *site_valloc(size_t size);
void *site_mallocx(size_t size);
void *site_rallocx(size_t size);
void *site_src(size_t size);
void drive_sites(void);

#define USE(p) __asm__ volatile("" : : "r"(p) : "memory")

/* The block realloc and rallocx move (allocated at another site). */
MP_SITE void *site_src(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

MP_SITE void *site_malloc(size_t size) {
	void *p = malloc(size);
	USE(p);
	return p;
}

MP_SITE void *site_calloc(size_t size) {
	void *p = calloc(1, size);
	USE(p);
	return p;
}

MP_SITE void *site_realloc(size_t size) {
	void *p = realloc(site_src(16), size);
	USE(p);
	return p;
}

MP_SITE void *site_realloc_null(size_t size) {
	void *p = realloc(NULL, size);
	USE(p);
	return p;
}

MP_SITE void *site_posix_memalign(size_t size) {
	void *p = NULL;
	if (posix_memalign(&p, 64, size) != 0) {
		p = NULL;
	}
	USE(p);
	return p;
}

MP_SITE void *site_aligned_alloc(size_t size) {
	void *p = aligned_alloc(128, size);
	USE(p);
	return p;
}

MP_SITE void *site_memalign(size_t size) {
	void *p = memalign(256, size);
	USE(p);
	return p;
}

MP_SITE void *site_valloc(size_t size) {
	void *p = valloc(size);
	USE(p);
	return p;
}

MP_SITE void *site_mallocx(size_t size) {
	void *p = mallocx(size, MALLOCX_ZERO);
	USE(p);
	return p;
}

MP_SITE void *site_rallocx(size_t size) {
	void *p = rallocx(site_src(16), size, 0);
	USE(p);
	return p;
}

typedef struct {
	const char *name;
	site_fn_t *fn;
	size_t size;		/* request */
	const void *entry;	/* frame 0 */
	const void *entry_alt;	/* also accepted as frame 0, or NULL */
	void *objs[NOBJ];
	size_t usize;		/* malloc_usable_size of the objects */
} site_t;

static site_t sites[] = {
	{"site_malloc", site_malloc, 1000, (void *)malloc, NULL, {0}, 0},
	{"site_calloc", site_calloc, 3000, (void *)calloc, NULL, {0}, 0},
	{"site_realloc", site_realloc, 20000, (void *)realloc, NULL, {0}, 0},
	/* realloc(NULL, n) is malloc(n): either name is right. */
	{"site_realloc_null", site_realloc_null, 700, (void *)realloc,
	    (void *)malloc, {0}, 0},
	{"site_posix_memalign", site_posix_memalign, 200,
	    (void *)posix_memalign, NULL, {0}, 0},
	{"site_aligned_alloc", site_aligned_alloc, 384, (void *)aligned_alloc,
	    NULL, {0}, 0},
	{"site_memalign", site_memalign, 5000, (void *)memalign, NULL, {0}, 0},
	{"site_valloc", site_valloc, 100, (void *)valloc, NULL, {0}, 0},
	{"site_mallocx", site_mallocx, 40000, (void *)mallocx, NULL, {0}, 0},
	{"site_rallocx", site_rallocx, 80000, (void *)rallocx, NULL, {0}, 0},
};

MP_SITE void drive_sites(void) {
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		for (int k = 0; k < NOBJ; k++) {
			sites[i].objs[k] = sites[i].fn(opaque_size(sites[i]
			    .size));
		}
	}
	__asm__ volatile("" : : : "memory");
}

/* "name" of the symbol an address lies in, via dladdr (or "?"). */
static const char *sym_of(uintptr_t a) {
	Dl_info info;
	if (dladdr((void *)a, &info) != 0 && info.dli_sname != NULL) {
		return info.dli_sname;
	}
	return "?";
}

static char tmpdir[256];

static void test_sites(void **state) {
	(void)state;
	/* The functions' symbols must be visible, or the ranges below are
	 * only guesses. */
	uintptr_t lo, hi;
	mp_fn_range((void *)site_malloc, &lo, &hi);
	MP_ASSERT(hi - lo != 256, "dladdr1 found no size for site_malloc: "
	    "link with -export-dynamic");

	drive_sites();
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		for (int k = 0; k < NOBJ; k++) {
			MP_ASSERT(sites[i].objs[k] != NULL, "%s failed",
			    sites[i].name);
		}
		sites[i].usize = malloc_usable_size(sites[i].objs[0]);
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/sites.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 1);
	mp_heap_check_sums(&h, true);

	uintptr_t dlo, dhi;
	mp_fn_range((void *)drive_sites, &dlo, &dhi);
	/* Stacks with frames of the allocator between frame 0 and the
	 * program's first frame (that frame is then searched past them, so
	 * that the other checks still run; this is reported at the end). */
	unsigned extra_frames = 0;
	char extra_msg[256] = "";
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		const site_t *st = &sites[i];
		mp_fn_range((void *)st->fn, &lo, &hi);
		/* Exactly one stack has its first program frame in the site. */
		const mp_heap_stack_t *found = NULL;
		size_t nfound = 0, u = 1;
		for (size_t k = 0; k < h.nstacks; k++) {
			const mp_heap_stack_t *s = &h.stacks[k];
			size_t uk = mp_heap_user_frame(s);
			if (s->nframes > uk && mp_ra_in(s->frames[uk], lo, hi)) {
				found = s;
				u = uk;
				nfound++;
			}
		}
		if (found == NULL) {
			/* Say where the site's objects went instead. */
			for (size_t k = 0; k < h.nstacks; k++) {
				const mp_heap_stack_t *s = &h.stacks[k];
				for (size_t f = 0; f < s->nframes && f < 4;
				    f++) {
					if (mp_ra_in(s->frames[f], lo, hi)) {
						print_message("# %s found at "
						    "frame %zu, frame 1 is "
						    "%#lx (%s)\n", st->name, f,
						    (unsigned long)s->frames[1],
						    sym_of(s->frames[1]));
					}
				}
			}
			MP_FAIL("%s [%#lx, %#lx): no stack has frame 1 in it",
			    st->name, (unsigned long)lo, (unsigned long)hi);
		}
		if (u != 1) {
			if (extra_frames++ == 0) {
				snprintf(extra_msg, sizeof(extra_msg), "%s: "
				    "frame 1 is %#lx in %s, the program's "
				    "frame is frame %zu", st->name,
				    (unsigned long)found->frames[1],
				    sym_of(found->frames[1] - 1), u);
			}
		}
		MP_ASSERT(nfound == 1, "%s: %zu stacks", st->name, nfound);
		MP_ASSERT(strcmp(sym_of(found->frames[u] - 1), st->name) == 0,
		    "%s: frame %zu is in %s", st->name, u,
		    sym_of(found->frames[u] - 1));
		/* Frame 0 is the entry point called. */
		uintptr_t f0 = found->frames[0];
		MP_ASSERT(mp_heap_entry_is(found, st->entry) ||
		    (st->entry_alt != NULL && mp_heap_entry_is(found,
		    st->entry_alt)), "%s: frame 0 is "
		    "%#lx (%s), want %p", st->name, (unsigned long)f0,
		    sym_of(f0), st->entry);
		/* Frame 2: the caller of the site. */
		MP_ASSERT(found->nframes > u + 1 && mp_ra_in(found->frames[u +
		    1], dlo, dhi), "%s: frame %zu %#lx (%s) is not in "
		    "drive_sites", st->name, u + 1, found->nframes > u + 1 ?
		    (unsigned long)found->frames[u + 1] : 0UL,
		    found->nframes > u + 1 ? sym_of(found->frames[u + 1] - 1) :
		    "-");
		/* The objects allocated there, and only those. */
		mp_cnts_t want = {NOBJ, NOBJ * st->usize, 0, 0};
		MP_ASSERT(mp_cnts_eq(&found->total, &want), "%s: %" PRIu64 ": %"
		    PRIu64 ", want %d: %zu", st->name, found->total.co,
		    found->total.cb, NOBJ, NOBJ * st->usize);
		assert_int_equal(found->nthr, 1);
	}
	/* The profiler records no frame of its own: frame 1 is the
	 * program's, in every build (also --enable-debug, -O1). */
	MP_ASSERT(extra_frames == 0, "%u of %zu sites have allocator frames "
	    "after frame 0; first: %s", extra_frames, MP_ARRAY_SIZE(sites),
	    extra_msg);
	/* The blocks realloc and rallocx moved away from site_src were
	 * freed: site_src has no live object. */
	assert_null(mp_heap_find_site(&h, (void *)site_src, 1));
	mp_heap_free(&h);

	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		for (int k = 0; k < NOBJ; k++) {
			free(sites[i].objs[k]);
		}
	}
	assert_int_equal(mp_prof_dump(path), 0);
	MP_HEAP_PARSE(path, &h);
	mp_heap_check_sums(&h, true);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		MP_ASSERT(mp_heap_find_site(&h, (void *)sites[i].fn, 1) == NULL,
		    "%s still in the dump after free", sites[i].name);
	}
	mp_heap_free(&h);
}

/* The walk reaches main: a deep chain of calls shows up in order. */
void *deep(int n);

MP_SITE void *deep(int n) {
	void *p;
	if (n == 0) {
		p = malloc(opaque_size(4321));
	} else {
		p = deep(n - 1);
	}
	USE(p);
	return p;
}

static void test_deep(void **state) {
	(void)state;
	void *p = deep(40);
	char path[512];
	snprintf(path, sizeof(path), "%s/deep.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)deep, 1);
	assert_non_null(s);
	uintptr_t lo, hi;
	mp_fn_range((void *)deep, &lo, &hi);
	/* Frames 1..41 are all in deep(), then test_deep's caller chain
	 * (from u rather than 1: see test_sites). */
	size_t u = mp_heap_user_frame(s);
	size_t in_deep = 0;
	for (size_t f = u; f < s->nframes && mp_ra_in(s->frames[f], lo, hi);
	    f++) {
		in_deep++;
	}
	MP_ASSERT(in_deep == 41, "%zu frames in deep(), want 41 (stack of %zu)",
	    in_deep, s->nframes);
	MP_ASSERT(s->nframes > u + 41, "the walk stopped at deep()'s caller");
	assert_int_equal(s->total.co, 1);
	mp_heap_free(&h);
	free(p);
}

/* opt.prof_bt_max caps the frames kept (the default is 128). */
static void test_bt_max(void **state) {
	(void)state;
	unsigned bt_max = 0;
	MALLCTL_READ("opt.prof_bt_max", bt_max);
	assert_int_equal(bt_max, 128);
	void *p = deep(200);
	char path[512];
	snprintf(path, sizeof(path), "%s/bt_max.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	const mp_heap_stack_t *s = mp_heap_find_site(&h, (void *)deep, 1);
	assert_non_null(s);
	assert_int_equal(s->nframes, bt_max);
	mp_heap_free(&h);
	free(p);
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *path = "/tmp/never.heap";
	assert_int_equal(mp_prof_dump(path), ENOENT);
	unsigned bt_max;
	size_t sz = sizeof(bt_max);
	assert_int_equal(mallctl("opt.prof_bt_max", &bt_max, &sz, NULL, 0),
	    ENOENT);
	/* The allocator still works at every site. */
	drive_sites();
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		for (int k = 0; k < NOBJ; k++) {
			assert_non_null(sites[i].objs[k]);
			free(sites[i].objs[k]);
		}
	}
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sites),
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_bt_max),
	};
	return mp_prof_test_main("mp_prof_callsite", test_no_profiler, tests);
}
