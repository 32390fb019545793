/*
 * test/integration/prof_data_pages.c - what the profiler's samples write
 * of the library's static data (issue 20: profiling's peak RSS; doc/
 * performance.md, "Profiling's fixed costs: the pages the first samples
 * write (prss3)").
 *
 * A small process pays every page of the library's .data and .bss that
 * sampling writes and that nothing else would have: 4 KiB each, 0.15% of
 * a 2.8 MB process.  The profiler's few scalars written at its first
 * samples live in .data (PROF_DATA), whose pages the loader writes
 * anyway; what is left is its tables that a sample must fill (the
 * object table with its seen-set, the first CFI row cache): two pages.
 *
 * prof_data_pages.conf: prof:true,prof_active:false,lg_prof_sample:0.
 * The test makes its allocations once unsampled (the allocator's own
 * first-use pages, such as the page map's root entry for a new GiB of
 * the heap, are not the samples'), turns prof.active on (nor are ctl's
 * pages), counts the pages of the library's writable mappings (its
 * .data, the .bss after it) written so far (lib_data.h), takes samples of
 * every kind (small and large, freed and kept, in this thread and in a
 * new one), counts them again and checks that at most DATA_PAGES_MAX
 * more were written.  With objs_lock in .bss, as before, the samples wrote
 * three (its page held nothing else written).  smaps is read with
 * open/read into a static buffer: no allocation, so no sample, between
 * the two readings and their own.
 */
#include "../test_util.h"
#include "../lib_data.h"

#include <pthread.h>

#define DATA_PAGES_MAX 2

void *pages_site(size_t n);

MP_SITE void *pages_site(size_t n) {
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

#define NOBJ 64
static void *objs[NOBJ];

static void take_samples(void) {
	for (int i = 0; i < NOBJ; i++) {
		size_t size = (size_t)16 << (i % 14);   /* 16 B .. 128 KiB */
		objs[i] = pages_site(opaque_size(size));
		assert_non_null(objs[i]);
		memset(objs[i], i, 16);
	}
	for (int i = 0; i < NOBJ; i += 2) {
		free(objs[i]);
		objs[i] = NULL;
	}
	void *r = realloc(objs[1], 100000);
	assert_non_null(r);
	objs[1] = r;
}

static void *thread_samples(void *arg) {
	(void)arg;
	void *keep[8];
	for (int i = 0; i < 8; i++) {
		keep[i] = pages_site(opaque_size((size_t)48 << i));
		assert_non_null(keep[i]);
	}
	for (int i = 0; i < 8; i++)
		free(keep[i]);
	return NULL;
}

static void test_samples_write_few_data_pages(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("sanitizer build (%s): its instrumentation writes the "
		    "library's data and lays it out anew", mp_env_sanitizer());
	uintptr_t base;
	const char *lib = mp_lib_data_path(&base);
	/* The same allocations first, unsampled: the allocator's own pages
	 * that new addresses write (pagemap_root's entry for a new GiB of
	 * the heap, in .bss) are written before the first reading. */
	pthread_t t;
	take_samples();
	assert_int_equal(pthread_create(&t, NULL, thread_samples, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	for (int i = 0; i < NOBJ; i++) {
		free(objs[i]);
		objs[i] = NULL;
	}
	bool on = true;
	MALLCTL_WRITE("prof.active", on);
	long before = mp_lib_data_written(lib, mp_written_before);
	take_samples();
	assert_int_equal(pthread_create(&t, NULL, thread_samples, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	long after = mp_lib_data_written(lib, mp_written_after);
	printf("# written pages: %ld before the samples, %ld after\n",
	    before, after);
	if (after - before > DATA_PAGES_MAX)
		mp_lib_data_print_new_pages(base, mp_written_before,
		    mp_written_after);
	MP_ASSERT(after - before <= DATA_PAGES_MAX, "samples wrote %ld more "
	    "pages of the library's data (%ld -> %ld), at most %d expected",
	    after - before, before, after, DATA_PAGES_MAX);
	for (int i = 0; i < NOBJ; i++)
		free(objs[i]);
}

static void test_no_profiler(void **state) {
	(void)state;
	bool prof = true;
	MALLCTL_READ("config.prof", prof);
	assert_false(prof);
}

static char tmpdir[256];

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_samples_write_few_data_pages),
	};
	return mp_prof_test_main("mp_prof_data_pages", test_no_profiler,
	    tests);
}
