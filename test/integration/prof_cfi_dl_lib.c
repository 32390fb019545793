/*
 * test/integration/prof_cfi_dl_lib.c - the library that
 * test/integration/prof_cfi_dlopen loads with dlopen and unloads with
 * dlclose, over and over: the two innermost functions of its call chain,
 * built with -O2 -fomit-frame-pointer.  It is built twice, with
 * CFI_DL_PAD 48 and 112: both frame sizes fit a one-byte immediate and
 * the index does not depend on them, so the two copies have the same
 * code at the same offsets and differ only in their frame sizes (their
 * .eh_frame rows).  When one copy is mapped
 * where the other was, the unwinder must use the rows of the copy that
 * is there, not those it remembered for the same addresses.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stddef.h>

#ifndef CFI_DL_PAD
#error "CFI_DL_PAD: the frame size of cfi_dl_mid"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define LIB_FN __attribute__((noinline, visibility("default"), \
    optimize("omit-frame-pointer")))
#else
#define LIB_FN __attribute__((noinline, visibility("default")))
#endif

void *cfi_dl_alloc(size_t n);
void *cfi_dl_mid(size_t n);

LIB_FN void *cfi_dl_alloc(size_t n) {
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

LIB_FN void *cfi_dl_mid(size_t n) {
	volatile char pad[CFI_DL_PAD];
	pad[n & 15] = 1;
	void *p = cfi_dl_alloc(n + (size_t)pad[n & 15] - 1);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
