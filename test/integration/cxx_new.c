/*
 * test/integration/cxx_new.c - C++'s operator new and delete, every form
 * (through cxx_sites.cpp), served by this library.
 *
 * Each form of new gives a block of this allocator (malloc_usable_size,
 * sallocx and nallocx agree on it; thread.allocated moves by its size),
 * aligned as asked for std::align_val_t (to 64 KiB); each form of delete
 * gives it back (thread.deallocated), a small block to the top of its
 * class's cache bin, so the next new of that size gets it again: a sized
 * delete that filed it under another class would not.  On an impossible
 * size the throwing forms throw std::bad_alloc and the nothrow forms
 * return NULL, after calling the new-handler until it gives up.  Debug
 * builds abort on a sized delete of the wrong size, naming operator
 * delete.  In a build without the operators (prefixed, or configured without --enable-cxx)
 * the program's new is the C++ runtime's, and none of its blocks is
 * ours.
 */
#include "../test_util.h"

#include "cxx_sites.h"

static uint64_t thread_counter(const char *name) {
	uint64_t v = 0;
	assert_int_equal(mp_read_u64(name, &v), 0);
	return v;
}

static const size_t sizes[] = {
	0, 1, 8, 24, 64, 100, 1000, 4096, 14336, 14337, 20000, 1 << 20,
};

static const size_t aligns[] = {32, 64, 128, 256, 4096, 8192, 65536};

/* The deletes that may free a block of new form `form`. */
static void deletes_of(int form, int out[3]) {
	switch (form & (CXXT_NEW_ARRAY | CXXT_NEW_ALIGNED)) {
	case CXXT_NEW:
		out[0] = CXXT_DELETE;
		out[1] = CXXT_DELETE_NOTHROW;
		out[2] = CXXT_DELETE_SIZED;
		break;
	case CXXT_NEW_ARRAY:
		out[0] = CXXT_DELETE_ARRAY;
		out[1] = CXXT_DELETE_ARRAY_NOTHROW;
		out[2] = CXXT_DELETE_ARRAY_SIZED;
		break;
	case CXXT_NEW_ALIGNED:
		out[0] = CXXT_DELETE_ALIGNED;
		out[1] = CXXT_DELETE_ALIGNED_NOTHROW;
		out[2] = CXXT_DELETE_SIZED_ALIGNED;
		break;
	default:
		out[0] = CXXT_DELETE_ARRAY_ALIGNED;
		out[1] = CXXT_DELETE_ARRAY_ALIGNED_NOTHROW;
		out[2] = CXXT_DELETE_ARRAY_SIZED_ALIGNED;
		break;
	}
}

/* One block of new form `form` through delete form `del`. */
static void round_trip(int form, int del, size_t n, size_t al) {
	uint64_t a0 = thread_counter("thread.allocated");
	char *p = LAUNDER(cxxt_new(form, n, al));
	uint64_t a1 = thread_counter("thread.allocated");
	MP_ASSERT(p != NULL, "new form %d (%zu, %zu) returned NULL", form, n,
	    al);
	size_t usize = malloc_usable_size(p);
	int flags = (form & CXXT_NEW_ALIGNED) ? MALLOCX_ALIGN(al) : 0;
	MP_ASSERT(usize >= n && usize > 0 && usize == sallocx(p, 0) &&
	    usize == nallocx(n, flags), "new form %d (%zu, %zu): usable %zu, "
	    "sallocx %zu, nallocx %zu", form, n, al, usize, sallocx(p, 0),
	    nallocx(n, flags));
	MP_ASSERT(a1 - a0 == usize, "new form %d (%zu): thread.allocated "
	    "moved %" PRIu64 ", want %zu", form, n, a1 - a0, usize);
	if (form & CXXT_NEW_ALIGNED)
		MP_ASSERT(mp_is_aligned(p, al), "new form %d: %p is not "
		    "%zu-aligned", form, (void *)p, al);
	memset(p, 0x5c, n);
	uint64_t d0 = thread_counter("thread.deallocated");
	cxxt_delete(del, p, n, al);
	uint64_t d1 = thread_counter("thread.deallocated");
	MP_ASSERT(d1 - d0 == usize, "delete form %d (%zu, %zu): "
	    "thread.deallocated moved %" PRIu64 ", want %zu", del, n, al,
	    d1 - d0, usize);
	if (usize > 14336)
		return;
	char *q = LAUNDER(cxxt_new(form, n, al));
	MP_ASSERT(q == p, "new form %d (%zu, %zu) after delete form %d got %p, "
	    "not the block just freed %p", form, n, al, del, (void *)q,
	    (void *)p);
	cxxt_delete(del, q, n, al);
}

static bool have_operators(void) {
	return MALLOC_PROF_CONFIG_CXX;
}

static void test_forms(void **state) {
	(void)state;
	if (!have_operators())
		MP_SKIP("no C++ operators in this build");
	for (int round = 0; round < 2; round++) {
		for (int form = 0; form < CXXT_NEW_FORMS; form++) {
			int dels[3];
			deletes_of(form, dels);
			for (size_t i = 0; i < MP_ARRAY_SIZE(sizes); i++) {
				size_t nal = (form & CXXT_NEW_ALIGNED) ?
				    MP_ARRAY_SIZE(aligns) : 1;
				for (size_t a = 0; a < nal; a++) {
					round_trip(form, dels[(i + a) % 3],
					    sizes[i], aligns[a]);
				}
			}
		}
	}
}

/* A new-expression and its sized delete, many of them live. */
static void test_expressions(void **state) {
	(void)state;
	if (!have_operators())
		MP_SKIP("no C++ operators in this build");
	enum { N = 2000 };
	static void *objs[N];
	uint64_t a0 = thread_counter("thread.allocated");
	uint64_t d0 = thread_counter("thread.deallocated");
	for (int k = 0; k < N; k++) {
		objs[k] = k % 2 ? cxxt_site_new_expr(0) :
		    cxxt_site_new_aligned_expr(0);
		assert_non_null(objs[k]);
		assert_true(malloc_usable_size(objs[k]) > 0);
		if (k % 2 == 0)
			assert_true(mp_is_aligned(objs[k], 256));
	}
	for (int k = N - 1; k >= 0; k--) {
		if (k % 2)
			cxxt_site_delete_expr(objs[k]);
		else
			cxxt_site_delete_aligned_expr(objs[k]);
	}
	uint64_t a1 = thread_counter("thread.allocated");
	uint64_t d1 = thread_counter("thread.deallocated");
	MP_ASSERT(a1 - a0 == d1 - d0 && a1 - a0 >= (uint64_t)N *
	    CXXT_OBJ_SIZE, "allocated %" PRIu64 ", deallocated %" PRIu64,
	    a1 - a0, d1 - d0);
}

/* Impossible sizes: bad_alloc from the throwing forms, NULL from the
 * nothrow ones, with and without a new-handler. */
static void test_out_of_memory(void **state) {
	(void)state;
	if (!have_operators())
		MP_SKIP("no C++ operators in this build");
	size_t huge = opaque_size(SIZE_MAX / 2);
	for (int form = 0; form < CXXT_NEW_FORMS; form++) {
		bool nothrow = (form & CXXT_NEW_NOTHROW) != 0;
		int want = nothrow ? CXXT_GOT_NULL : CXXT_GOT_BAD_ALLOC;
		int got = cxxt_try_new(form, huge, 64, 0, 0);
		MP_ASSERT(got == want, "form %d without a handler: got %d, "
		    "want %d", form, got, want);
		/* The handler is called until it removes itself. */
		got = cxxt_try_new(form, huge, 64, 3, 0);
		MP_ASSERT(got == want && cxxt_handler_calls() == 3, "form %d, "
		    "handler removing itself at its 3rd call: got %d after "
		    "%d calls, want %d after 3", form, got,
		    cxxt_handler_calls(), want);
		/* A handler that throws: its bad_alloc goes to the program
		 * from the throwing forms, NULL from the nothrow ones. */
		got = cxxt_try_new(form, huge, 64, 2, 1);
		MP_ASSERT(got == want && cxxt_handler_calls() == 2, "form %d, "
		    "throwing handler: got %d after %d calls", form, got,
		    cxxt_handler_calls());
	}
	/* A size that fits still works with a handler installed, which is
	 * then not called. */
	int got = cxxt_try_new(CXXT_NEW, 100, 0, 1, 0);
	assert_int_equal(got, CXXT_GOT_MEMORY);
	assert_int_equal(cxxt_handler_calls(), 0);
}

static void wrong_size_child(void *arg) {
	int which = *(int *)arg;
	if (which == 0)
		cxxt_delete(CXXT_DELETE_SIZED, LAUNDER(cxxt_new(CXXT_NEW, 64,
		    0)), 4096, 0);
	else
		cxxt_delete(CXXT_DELETE_SIZED_ALIGNED,
		    LAUNDER(cxxt_new(CXXT_NEW_ALIGNED, 64, 64)), 64, 4096);
}

/* Debug builds: a sized delete of the wrong size aborts. */
static void test_wrong_size(void **state) {
	(void)state;
	if (!have_operators())
		MP_SKIP("no C++ operators in this build");
	bool debug = false;
	MALLCTL_READ("config.debug", debug);
	if (!debug)
		MP_SKIP("release build: sized delete trusts its size");
	for (int which = 0; which < 2; which++) {
		char out[4096];
		int status = mp_child_stderr(wrong_size_child, &which, out,
		    sizeof(out));
		MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		    "status %#x, want abort()", status);
		MP_ASSERT(strstr(out, "<malloc_prof>: operator delete(0x") !=
		    NULL && strstr(out, "size does not match the allocation's "
		    "size class") != NULL, "stderr \"%s\"", out);
	}
}

/* Without the operators, new is not ours: a prefixed build must not
 * replace the process's allocator. */
static void test_not_ours(void **state) {
	(void)state;
	if (have_operators())
		MP_SKIP("this build has the C++ operators");
	void *p = cxxt_new(CXXT_NEW, 100, 0);
	assert_non_null(p);
	if (MALLOC_PROF_HAVE_PREFIX)
		assert_int_equal(malloc_usable_size(p), 0);
	cxxt_delete(CXXT_DELETE, p, 100, 0);
}

int main(void) {
	mp_test_init(180);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_out_of_memory),
		cmocka_unit_test(test_wrong_size),
		cmocka_unit_test(test_not_ours),
	};
	return mp_run_tests(tests);
}
