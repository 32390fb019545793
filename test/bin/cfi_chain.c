/*
 * test/bin/cfi_chain.c - the program test/bin/cfi_chain.sh profiles: a
 * chain built without frame pointers (-O2 -fomit-frame-pointer, like a
 * distribution's binaries), through this program and a shared library:
 *
 *   main -> lvl1 -> lvl2 -> lvl3 -> lib_lvl4 -> lib_alloc -> malloc
 *
 * lib_lvl4 and lib_alloc are in test/bin/libmpbinchain.la; main asks
 * lib_alloc to keep 32 blocks of 256 KiB, so that every report shows the
 * chain with 8 MiB.  Linked -no-install, so that the file in the dump's
 * memory map is the program that ran.  `--config` prints
 * MALLOC_PROF_CONFIG_PROF (1/0).
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stdio.h>
#include <string.h>

void *lib_lvl4(unsigned n);
void *lvl1(unsigned n);
void *lvl2(unsigned n);
void *lvl3(unsigned n);

/* Neither inlined nor tail calls: each keeps a frame of its own (with
 * locals of different sizes, so that their CFA offsets differ) and does
 * work after its call returns. */
#if defined(__GNUC__) && !defined(__clang__)
/* The user's CFLAGS come after this program's own (-fno-omit-frame-pointer
 * in the sanitizer builds): keep the chain without frame pointers. */
#define CHAIN_FN __attribute__((noinline, used, visibility("default"), \
    optimize("omit-frame-pointer")))
#else
#define CHAIN_FN __attribute__((noinline, used, visibility("default")))
#endif

CHAIN_FN void *lvl3(unsigned n) {
	volatile long pad[5];
	pad[n % 5] = 0;
	void *p = lib_lvl4(n + (unsigned)pad[n % 5]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

CHAIN_FN void *lvl2(unsigned n) {
	void *p = lvl3(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

CHAIN_FN void *lvl1(unsigned n) {
	volatile char pad[300];
	pad[n % 300] = 0;
	void *p = lvl2(n + (unsigned)pad[n % 300]);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "--config") == 0) {
		printf("%d\n", MALLOC_PROF_CONFIG_PROF);
		return 0;
	}
	void *p = lvl1(32);
	/* The program calls the allocator itself too, so that the link
	 * keeps it ahead of libc (with --as-needed it would be only the
	 * library's dependency, loaded after libc). */
	return p == NULL || malloc_usable_size(p) < ((size_t)256 << 10);
}
