/*
 * test/bin/callee.c - the shared library of test/bin/callsites: one call
 * site in a library mapped at an address of its own, to check that
 * malloc-prof places library frames by the mapping and file offset.
 */
#include <stddef.h>

void mp_cs_in_lib(void *(*alloc)(size_t));

static void *keep[16];

/* Keeps 16 x 2 KiB = 32768 bytes. */
__attribute__((noinline, visibility("default"))) void
mp_cs_in_lib(void *(*alloc)(size_t)) {
	for (int i = 0; i < 16; i++)
		keep[i] = alloc(2048);
}
