/*
 * test/unit/prof_shards_idle.c - a process with the profiler off has no
 * profiler shard tables (the gctx shards and the sample table's shards,
 * prof.c): they are made at boot only with prof:true, and the readers and
 * fork handlers that would lock them return first when it is off.
 * Before, they were 29 KiB of .bss that prof_boot wrote, 9 pages of every
 * process's anonymous memory.  After the allocator has booted, served
 * allocations of every kind and forked (the fork handlers lock the
 * profiler's locks), neither table may exist.  No options: the profiler
 * is off.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <sys/wait.h>

static void test_shards_not_resident(void **state) {
	(void)state;
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
		prof_shards_extent(samples, &addr, &size);
		MP_ASSERT(size == 0, "the %s shards take %zu bytes with the "
		    "profiler off", samples ? "sample table's" : "gctx", size);
	}
	assert_int_equal(prof_nshards, 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shards_not_resident),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
