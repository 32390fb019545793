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
#include "../lib_data.h"

#include "malloc_prof/internal/internal.h"

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
	unsigned pages;
	int present = mp_pages_present(addr, size, &pages);
	if (present < 0)
		MP_SKIP("cannot read /proc/self/pagemap");
	if (pages == 0)
		MP_SKIP("the table spans no whole page (%zu bytes)", size);
	MP_ASSERT(present == 0, "%d of the connection table's %u whole pages "
	    "are resident in a process without the endpoint", present, pages);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_not_resident),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
