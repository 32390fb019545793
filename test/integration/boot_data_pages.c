/*
 * test/integration/boot_data_pages.c - what every process's boot writes
 * of the library's static data: each page of .data and .bss it writes is
 * 4 KiB of resident memory in every process, profiled or not (issue 15's
 * peak RSS of small programs).  Boot writes only what it must: option
 * variables take a value only when it differs from the one they were
 * initialised with (conf.c's conf_store), the few variables every boot
 * sets lie in .data (MP_DATA), and the profiler's tables are set up only
 * with prof:true.  Storing every option's default and every flag's false
 * made 10 more pages private, the profiler's shards 9 more.
 *
 * No options.  After boot and allocations of every kind, in this thread
 * and another, the pages of the library's writable mappings written
 * (lib_data.h: copied on write, or holding a byte other than zero) are at
 * most BOOT_DATA_PAGES_MAX; a failure prints their library offsets (nm
 * names what lies there).
 */
#include "../test_util.h"
#include "../lib_data.h"

#include <pthread.h>

/* 9 in the default build on x86-64 (27 before): .data's three pages,
 * the .bss pages of the arenas', the caches' and the background thread's
 * state, the page map's root entries of the heap; one of margin for
 * another toolchain's layout. */
#define BOOT_DATA_PAGES_MAX 10

#define NOBJ 32

static void allocate_every_kind(void) {
	void *objs[NOBJ];
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size((size_t)16 << (i % 18)));
		assert_non_null(objs[i]);
		memset(objs[i], i, 16);
	}
	void *r = realloc(objs[1], 100000);
	assert_non_null(r);
	objs[1] = r;
	for (int i = 0; i < NOBJ; i++)
		free(objs[i]);
	void *c = calloc(1000, 8);
	assert_non_null(c);
	free(c);
	void *a = aligned_alloc(4096, 8192);
	assert_non_null(a);
	free(a);
}

static void *thread_allocates(void *arg) {
	(void)arg;
	allocate_every_kind();
	return NULL;
}

static void test_boot_writes_few_data_pages(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("sanitizer build (%s): its instrumentation writes the "
		    "library's data and lays it out anew", mp_env_sanitizer());
	bool debug = false;
	MALLCTL_READ("config.debug", debug);
	if (debug)
		MP_SKIP("debug build: its checks keep state of their own");
	uintptr_t base;
	const char *lib = mp_lib_data_path(&base);
	allocate_every_kind();
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_allocates, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	long pages = mp_lib_data_written(lib, mp_written_after);
	printf("# boot and allocations wrote %ld pages\n", pages);
	if (pages > BOOT_DATA_PAGES_MAX)
		mp_lib_data_print_new_pages(base, NULL, mp_written_after);
	MP_ASSERT(pages <= BOOT_DATA_PAGES_MAX, "boot and allocations wrote "
	    "%ld pages of the library's data, at most %d expected", pages,
	    BOOT_DATA_PAGES_MAX);
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boot_writes_few_data_pages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
