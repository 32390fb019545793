/*
 * test/integration/cxx_prof.c - heap profiles of C++ allocations.
 *
 * cxx_prof.conf: prof:true,lg_prof_sample:0 (every allocation sampled).
 * As test/integration/prof_callsite.c does for malloc and friends: each
 * site (cxx_sites.cpp) allocates NOBJ objects through one form of
 * operator new, and its stack in the dump has the operator's address as
 * frame 0 (what jeprof strips up to), the site as frame 1 (no frame of
 * the allocator's own, operator new's included) and the site's caller as
 * frame 2.  The sized and aligned deletes give the samples back: after
 * them no site is left in the dump.
 */
#include "../test_util.h"

#include "cxx_sites.h"

#define NOBJ 8

typedef void *site_fn_t(size_t size);

typedef struct {
	const char *name;
	site_fn_t *fn;
	size_t size;
	int form;               /* frame 0: the entry of this new form */
	void *objs[NOBJ];
} site_t;

static site_t sites[] = {
	{"cxxt_site_new_expr", cxxt_site_new_expr, CXXT_OBJ_SIZE, CXXT_NEW,
	    {0}},
	{"cxxt_site_new_array", cxxt_site_new_array, 3000, CXXT_NEW_ARRAY,
	    {0}},
	{"cxxt_site_new_aligned_expr", cxxt_site_new_aligned_expr,
	    CXXT_ALIGNED_OBJ_SIZE, CXXT_NEW_ALIGNED, {0}},
	{"cxxt_site_new_nothrow", cxxt_site_new_nothrow, 40000,
	    CXXT_NEW_NOTHROW, {0}},
};

void drive_cxx_sites(void);

MP_SITE void drive_cxx_sites(void) {
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		for (int k = 0; k < NOBJ; k++)
			sites[i].objs[k] = sites[i].fn(opaque_size(
			    sites[i].size));
	}
	__asm__ volatile("" : : : "memory");
}

static const char *sym_of(uintptr_t a) {
	Dl_info info;
	if (dladdr((void *)a, &info) != 0 && info.dli_sname != NULL)
		return info.dli_sname;
	return "?";
}

static char tmpdir[256];

static void free_sites(void) {
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		for (int k = 0; k < NOBJ; k++) {
			void *p = sites[i].objs[k];
			switch (sites[i].form) {
			case CXXT_NEW:
				cxxt_site_delete_expr(p);
				break;
			case CXXT_NEW_ARRAY:
				cxxt_delete(CXXT_DELETE_ARRAY_SIZED, p,
				    sites[i].size, 0);
				break;
			case CXXT_NEW_ALIGNED:
				cxxt_site_delete_aligned_expr(p);
				break;
			default:
				cxxt_delete(CXXT_DELETE_SIZED, p,
				    sites[i].size, 0);
				break;
			}
		}
	}
}

static void test_sites(void **state) {
	(void)state;
	if (!MALLOC_PROF_CONFIG_CXX)
		MP_SKIP("no C++ operators in this build");
	uintptr_t lo, hi, dlo, dhi;
	mp_fn_range((void *)cxxt_site_new_expr, &lo, &hi);
	MP_ASSERT(hi - lo != 256, "dladdr1 found no size for "
	    "cxxt_site_new_expr: link with -export-dynamic");
	drive_cxx_sites();
	char path[512];
	snprintf(path, sizeof(path), "%s/sites.heap", tmpdir);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 1);
	mp_heap_check_sums(&h, true);
	mp_fn_range((void *)drive_cxx_sites, &dlo, &dhi);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		const site_t *st = &sites[i];
		mp_fn_range((void *)st->fn, &lo, &hi);
		const mp_heap_stack_t *found = NULL;
		size_t nfound = 0;
		for (size_t k = 0; k < h.nstacks; k++) {
			const mp_heap_stack_t *s = &h.stacks[k];
			for (size_t f = 1; f < s->nframes && f < 4; f++) {
				if (mp_ra_in(s->frames[f], lo, hi)) {
					found = s;
					nfound++;
					break;
				}
			}
		}
		MP_ASSERT(nfound == 1, "%s: %zu stacks have it in frames 1-3",
		    st->name, nfound);
		/* Frame 0: the operator the site called. */
		uintptr_t entry = (uintptr_t)cxxt_entry(st->form);
		MP_ASSERT(found->frames[0] == entry, "%s: frame 0 is %#lx "
		    "(%s), want %#lx (%s)", st->name,
		    (unsigned long)found->frames[0], sym_of(found->frames[0]),
		    (unsigned long)entry, sym_of(entry));
		/* Frame 1: the site itself, no allocator frame between. */
		MP_ASSERT(mp_ra_in(found->frames[1], lo, hi), "%s: frame 1 is "
		    "%#lx in %s, not the site", st->name,
		    (unsigned long)found->frames[1],
		    sym_of(found->frames[1] - 1));
		MP_ASSERT(found->nframes > 2 && mp_ra_in(found->frames[2], dlo,
		    dhi), "%s: frame 2 (%s) is not drive_cxx_sites", st->name,
		    found->nframes > 2 ? sym_of(found->frames[2] - 1) : "-");
		size_t usize = malloc_usable_size(st->objs[0]);
		mp_cnts_t want = {NOBJ, NOBJ * usize, 0, 0};
		MP_ASSERT(mp_cnts_eq(&found->total, &want), "%s: %" PRIu64
		    ": %" PRIu64 ", want %d: %zu", st->name, found->total.co,
		    found->total.cb, NOBJ, NOBJ * usize);
	}
	mp_heap_free(&h);

	free_sites();
	assert_int_equal(mp_prof_dump(path), 0);
	MP_HEAP_PARSE(path, &h);
	mp_heap_check_sums(&h, true);
	for (size_t i = 0; i < MP_ARRAY_SIZE(sites); i++) {
		MP_ASSERT(mp_heap_find_site(&h, (void *)sites[i].fn, 1) == NULL,
		    "%s still in the dump after its delete", sites[i].name);
	}
	mp_heap_free(&h);
}

static void test_no_profiler(void **state) {
	(void)state;
	drive_cxx_sites();
	free_sites();
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sites),
	};
	return mp_prof_test_main("mp_cxx_prof", test_no_profiler, tests);
}
