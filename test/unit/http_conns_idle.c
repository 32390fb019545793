/*
 * test/unit/http_conns_idle.c - a process that does not start the scrape
 * endpoint leaves its connection table (22 KiB of .bss, prof_http.c) out
 * of its resident set: the slots are marked free when the endpoint
 * starts, not at boot, where every process wrote them (issue 15, peak
 * RSS: 5 pages of every process's anonymous memory).  After the
 * allocator has booted and served allocations of every kind, no whole
 * page of the table may be present (/proc/self/pagemap).  No options:
 * the endpoint is off.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <fcntl.h>

static void test_table_not_resident(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("sanitizer build (%s): its runtime lays out and "
		    "writes the data", mp_env_sanitizer());
	assert_false(malloc_init());
	for (size_t size = 8; size <= ((size_t)1 << 21); size *= 2)
		free(LAUNDER(malloc(size)));
	assert_int_equal(prof_http_port(), 0);
	const void *addr;
	size_t size;
	prof_http_conns_extent(&addr, &size);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)addr + page - 1) & ~(uintptr_t)(page - 1);
	uintptr_t hi = ((uintptr_t)addr + size) & ~(uintptr_t)(page - 1);
	if (hi <= lo)
		MP_SKIP("the table spans no whole page (%zu bytes)", size);
	int pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0)
		MP_SKIP("cannot read /proc/self/pagemap");
	unsigned present = 0, pages = 0;
	for (uintptr_t p = lo; p < hi; p += page) {
		uint64_t e = 0;
		assert_int_equal(pread(pm, &e, sizeof(e),
		    (off_t)(p / page * sizeof(e))), (ssize_t)sizeof(e));
		pages++;
		present += (unsigned)(e >> 63);
	}
	close(pm);
	MP_ASSERT(present == 0, "%u of the connection table's %u whole pages "
	    "are resident in a process without the endpoint", present, pages);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_not_resident),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
