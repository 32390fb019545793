/*
 * test/unit/prof_shards_idle.c - a process with the profiler off leaves
 * the profiler's shard tables (the gctx shards and the sample table's
 * shards, 29 KiB of .bss, prof.c) out of its resident set: they are set
 * up at boot only with prof:true, and the readers and fork handlers that
 * would lock them return first when it is off.  Before, prof_boot wrote
 * every shard's lock and buckets, 9 pages of every process's anonymous
 * memory.  After the allocator has booted, served allocations of every
 * kind and forked (the fork handlers lock the profiler's locks), no whole
 * page of either table may be present (/proc/self/pagemap).  No options:
 * the profiler is off.
 */
#include "../test_util.h"
#include "../lib_data.h"

#include "malloc_prof/internal/internal.h"

#include <sys/wait.h>

static void test_shards_not_resident(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("sanitizer build (%s): its runtime lays out and "
		    "writes the data", mp_env_sanitizer());
	assert_false(malloc_init());
	if (opt_prof)
		MP_SKIP("the profiler is on: this is about a process without it");
	for (size_t size = 8; size <= ((size_t)1 << 21); size *= 2)
		free(LAUNDER(malloc(size)));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int samples = 0; samples < 2; samples++) {
		const void *addr;
		size_t size;
		unsigned pages;
		prof_shards_extent(samples, &addr, &size);
		int present = mp_pages_present(addr, size, &pages);
		if (present < 0)
			MP_SKIP("cannot read /proc/self/pagemap");
		assert_true(pages >= 2);
		MP_ASSERT(present == 0, "%d of the %s shards' %u whole pages "
		    "are resident with the profiler off", present,
		    samples ? "sample table's" : "gctx", pages);
	}
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shards_not_resident),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
