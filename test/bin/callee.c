/*
 * test/bin/callee.c - the shared library of test/bin/callsites: call
 * sites in a library mapped at an address of its own, to check that
 * malloc-prof places library frames by the mapping and file offset.  It
 * is compiled with -gdwarf-4 (the program with the compiler's default,
 * DWARF 5 for GCC 11 and later): --lines reads both versions.
 */
/* automake puts the user's CFLAGS (-O2 -g) after the library's own -O0:
 * keep the call sites as written anyway (GCC). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O0")
#endif

#include <stddef.h>

void mp_cs_in_lib(void *(*alloc)(size_t));
/* A C function under a C++ (mangled) name, "mp::callee::keep()", to test
 * demangling without a C++ compiler. */
void mp_cs_keep(void *(*alloc)(size_t)) __asm__("_ZN2mp6callee4keepEv");

static void *keep[16], *keep_one;

/* Keeps 16 x 2 KiB = 32768 bytes. */
__attribute__((noinline, visibility("default"))) void
mp_cs_in_lib(void *(*alloc)(size_t)) {
	for (int i = 0; i < 16; i++)
		keep[i] = alloc(2048);
}

/* Keeps 4 KiB under the name mp::callee::keep(). */
__attribute__((noinline, visibility("default"))) void
mp_cs_keep(void *(*alloc)(size_t)) {
	keep_one = alloc(4096);
}
