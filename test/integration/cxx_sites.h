/*
 * test/integration/cxx_sites.h: what cxx_sites.cpp offers the C tests of
 * the C++ operators (cxx_new.c, cxx_prof.c).
 */
#ifndef MP_TEST_CXX_SITES_H
#define MP_TEST_CXX_SITES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The eight forms of operator new: bit 0 array, bit 1 nothrow, bit 2
 * std::align_val_t. */
enum {
	CXXT_NEW = 0,
	CXXT_NEW_ARRAY = 1,
	CXXT_NEW_NOTHROW = 2,
	CXXT_NEW_ARRAY_NOTHROW = 3,
	CXXT_NEW_ALIGNED = 4,
	CXXT_NEW_ARRAY_ALIGNED = 5,
	CXXT_NEW_ALIGNED_NOTHROW = 6,
	CXXT_NEW_ARRAY_ALIGNED_NOTHROW = 7,
	CXXT_NEW_FORMS = 8,
};

/* The twelve forms of operator delete. */
enum {
	CXXT_DELETE = 0,
	CXXT_DELETE_ARRAY,
	CXXT_DELETE_NOTHROW,
	CXXT_DELETE_ARRAY_NOTHROW,
	CXXT_DELETE_SIZED,
	CXXT_DELETE_ARRAY_SIZED,
	CXXT_DELETE_ALIGNED,
	CXXT_DELETE_ARRAY_ALIGNED,
	CXXT_DELETE_SIZED_ALIGNED,
	CXXT_DELETE_ARRAY_SIZED_ALIGNED,
	CXXT_DELETE_ALIGNED_NOTHROW,
	CXXT_DELETE_ARRAY_ALIGNED_NOTHROW,
	CXXT_DELETE_FORMS,
};

/* What cxxt_try_new saw. */
enum {
	CXXT_GOT_MEMORY = 0,
	CXXT_GOT_NULL,
	CXXT_GOT_BAD_ALLOC,
	CXXT_GOT_OTHER,
};

#define CXXT_OBJ_SIZE 200
#define CXXT_ALIGNED_OBJ_SIZE 768

#if defined(__GNUC__) && !defined(__clang__)
#define CXXT_SITE __attribute__((noinline, noclone, used, \
    visibility("default")))
#else
#define CXXT_SITE __attribute__((noinline, used, visibility("default")))
#endif

/* The address of operator new of `form`, as the program sees it. */
void *cxxt_entry(int form);
/* operator new of `form` (align: for the aligned forms). */
void *cxxt_new(int form, size_t size, size_t align);
/* operator delete of `form`; size and align for the forms that take
 * them. */
void cxxt_delete(int form, void *p, size_t size, size_t align);
/* operator new of `form` with a new-handler installed when calls > 0:
 * it counts its calls and, at the calls-th, removes itself or (throws)
 * throws bad_alloc.  Returns CXXT_GOT_*; the memory, if any, is freed. */
int cxxt_try_new(int form, size_t size, size_t align, int calls,
    int throws);
int cxxt_handler_calls(void);

/* Profiler call sites. */
void *cxxt_site_new_expr(size_t size);          /* new cxxt_obj */
void cxxt_site_delete_expr(void *p);            /* its sized delete */
void *cxxt_site_new_array(size_t size);         /* new char[size] */
void *cxxt_site_new_aligned_expr(size_t size);  /* alignas(256) object */
void cxxt_site_delete_aligned_expr(void *p);
void *cxxt_site_new_nothrow(size_t size);       /* new(nothrow) */

#ifdef __cplusplus
}
#endif

#endif /* MP_TEST_CXX_SITES_H */
