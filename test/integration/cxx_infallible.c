/*
 * test/integration/cxx_infallible.c - experimental_infallible_new (issue
 * 18): with it, a failed operator new of any form aborts instead of
 * throwing std::bad_alloc or returning NULL, with one line naming the
 * option; a program that set experimental.hooks.safety_check_abort gets
 * jemalloc's message in its function instead (jemalloc's own test of the
 * option matches on that text), and new then returns NULL.  Each case
 * runs this program again (/proc/self/exe --child MODE) with its options.
 */
#include "../test_util.h"

#include <signal.h>

#include "cxx_sites.h"

static bool have_operators(void) {
	return MALLOC_PROF_CONFIG_CXX;
}

static unsigned fake_abort_calls;
static bool fake_abort_msg_ok = true;

static void fake_abort(const char *msg) {
	fake_abort_calls++;
	if (strcmp(msg, "<jemalloc>: Allocation failed and "
	    "opt.experimental_infallible_new is true. Aborting.\n") != 0)
		fake_abort_msg_ok = false;
}

/* "hooked": every form returns NULL after one call of the hook each. */
static void child_hooked(void) {
	void (*fn)(const char *) = fake_abort;
	MP_CHECK(mallctl("experimental.hooks.safety_check_abort", NULL, NULL,
	    &fn, sizeof(fn)) == 0, "safety_check_abort");
	size_t huge = opaque_size(SIZE_MAX / 2);
	for (int form = 0; form < CXXT_NEW_FORMS; form++) {
		unsigned before = fake_abort_calls;
		int got = cxxt_try_new(form, huge, 64, 0, 0);
		MP_CHECK(got == CXXT_GOT_NULL, "form %d: got %d", form, got);
		MP_CHECK(fake_abort_calls == before + 1, "form %d: %u calls",
		    form, fake_abort_calls - before);
	}
	MP_CHECK(fake_abort_msg_ok, "message differs from jemalloc's");
	/* A size that fits is unaffected. */
	MP_CHECK(cxxt_try_new(CXXT_NEW, 100, 0, 0, 0) == CXXT_GOT_MEMORY,
	    "new of 100 bytes");
}

/* "abort": the plain form, without a hook. */
static void child_abort(void) {
	(void)cxxt_try_new(CXXT_NEW, opaque_size(SIZE_MAX / 2), 0, 0, 0);
}

/* "throws": without the option, bad_alloc as before. */
static void child_throws(void) {
	int got = cxxt_try_new(CXXT_NEW, opaque_size(SIZE_MAX / 2), 0, 0, 0);
	MP_CHECK(got == CXXT_GOT_BAD_ALLOC, "got %d", got);
}

static int child_main(const char *mode) {
	if (strcmp(mode, "hooked") == 0)
		child_hooked();
	else if (strcmp(mode, "abort") == 0)
		child_abort();
	else if (strcmp(mode, "throws") == 0)
		child_throws();
	else
		return 100;
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

static char err[16384];

static void test_infallible(void **state) {
	(void)state;
	if (!have_operators())
		MP_SKIP("no C++ operators in this build");
	int status = mp_run_child_conf("abort",
	    "experimental_infallible_new:true", err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	    "status 0x%x", status);
	MP_ASSERT(strstr(err, "<malloc_prof>: operator new: allocation of ") !=
	    NULL && strstr(err, "experimental_infallible_new") != NULL,
	    "%s", err);
	status = mp_run_child_conf("hooked",
	    "experimental_infallible_new:true", err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "hooked: status 0x%x", status);
	MP_ASSERT(err[0] == '\0', "hooked said: %s", err);
	status = mp_run_child_conf("throws", NULL, err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "throws: status 0x%x", status);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_infallible),
	};
	return mp_run_tests(tests);
}
