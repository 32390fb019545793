/*
 * test/bin/cfi_chain_lib.c - the shared-library half of the chain that
 * test/bin/cfi_chain.c starts (lib_lvl4 -> lib_alloc -> malloc), built
 * -O2 -fomit-frame-pointer as well.  lib_alloc keeps what it allocates.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stdlib.h>

#define CHAIN_BLOCK ((size_t)256 << 10)

#if defined(__GNUC__) && !defined(__clang__)
#define CHAIN_FN __attribute__((noinline, used, visibility("default"), \
    optimize("omit-frame-pointer")))
#else
#define CHAIN_FN __attribute__((noinline, used, visibility("default")))
#endif

void *lib_alloc(unsigned n);
void *lib_lvl4(unsigned n);

static void *kept[64];

CHAIN_FN void *lib_alloc(unsigned n) {
	void *last = NULL;
	for (unsigned i = 0; i < n && i < 64; i++) {
		kept[i] = malloc(CHAIN_BLOCK);
		if (kept[i] == NULL)
			return NULL;
		((volatile char *)kept[i])[0] = 1;
		last = kept[i];
	}
	return last;
}

CHAIN_FN void *lib_lvl4(unsigned n) {
	volatile int pad[3];
	pad[n % 3] = 0;
	void *p = lib_alloc(n + (unsigned)pad[n % 3]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}
