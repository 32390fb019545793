/*
 * test/integration/prof_cfi_lib.c - the shared library of
 * test/integration/prof_cfi: the two innermost functions of its call
 * chain, built with -O2 -fomit-frame-pointer, as distribution libraries
 * are.  Neither tail-calls, so each keeps a frame of its own.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stddef.h>

#if defined(__GNUC__) && !defined(__clang__)
#define LIB_FN __attribute__((noinline, visibility("default"), \
    optimize("omit-frame-pointer")))
#else
#define LIB_FN __attribute__((noinline, visibility("default")))
#endif

void *cfi_lib_alloc(size_t n);
void *cfi_lib_lvl4(size_t n);

LIB_FN void *cfi_lib_alloc(size_t n) {
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

LIB_FN void *cfi_lib_lvl4(size_t n) {
	volatile char pad[48];
	pad[n % 48] = 1;
	void *p = cfi_lib_alloc(n + (size_t)pad[n % 48] - 1);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
