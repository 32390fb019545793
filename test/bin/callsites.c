/*
 * test/bin/callsites.c - the program test/bin/malloc_prof.sh profiles:
 * functions with known call sites keeping known amounts, so that every
 * report of malloc-prof can be checked to the byte (the tests run it with
 * lg_prof_sample:0: every allocation is sampled, counts are exact).
 *
 *   alloc_a()          keeps 100 x 1 KiB    = 102400 bytes
 *   alloc_b()          keeps  40 x 8 KiB    = 327680 bytes
 *   middle() alloc_c() keeps  16 x 4 KiB    =  65536 bytes
 *   mp_cs_in_lib()     keeps  16 x 2 KiB    =  32768 bytes (in the shared
 *                      library test/bin/libmpcallee.la)
 *   mp::callee::keep() keeps   1 x 4 KiB    =   4096 bytes (a C function
 *                      under a mangled name, in the library)
 *                      (both allocate through cs_alloc, which is then the
 *                      leaf of their stacks)
 *   churn()            allocates and frees 10 x 64 KiB (nothing left)
 *   grow()             keeps  10 x 4 KiB    =  40960 bytes, after the
 *                      dump to the file named by argv[1], if any
 *
 * Built twice: test/bin/callsites links libmalloc_prof (MP_CS_WITH_LIB),
 * test/bin/callsites_plain does not (for jemalloc through LD_PRELOAD).
 * Both are linked -no-install, so that the file in the dump's memory map
 * is the program that ran.  `--config` prints MALLOC_PROF_CONFIG_PROF
 * (1/0), or "plain" without the library.
 */
/* automake puts the user's CFLAGS (-O2 -g) after this program's own
 * -O0: keep the call sites as written anyway (GCC). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O0")
#endif

#ifdef MP_CS_WITH_LIB
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mp_cs_in_lib(void *(*alloc)(size_t));
void mp_cs_keep(void *(*alloc)(size_t)) __asm__("_ZN2mp6callee4keepEv");

static void *keep_a[100], *keep_b[40], *keep_c[16], *keep_g[10];

void alloc_a(void);
void alloc_b(void);
void alloc_c(void);
void middle(void);
void churn(void);
void grow(void);

/* The allocator is called through this pointer from the library, so that
 * a --with-prefix=mp_ build profiles it too (the library is not compiled
 * with MALLOC_PROF_MANGLE). */
static void *cs_alloc(size_t n) {
	return malloc(n);
}

__attribute__((noinline)) void alloc_a(void) {
	for (int i = 0; i < 100; i++)
		keep_a[i] = malloc(1024);
}

__attribute__((noinline)) void alloc_b(void) {
	for (int i = 0; i < 40; i++)
		keep_b[i] = malloc(8192);
}

__attribute__((noinline)) void alloc_c(void) {
	for (int i = 0; i < 16; i++)
		keep_c[i] = malloc(4096);
}

__attribute__((noinline)) void middle(void) {
	alloc_c();
}

__attribute__((noinline)) void churn(void) {
	for (int i = 0; i < 10; i++) {
		char *p = malloc(64 << 10);
		memset(p, 1, 64);
		free(p);
	}
}

__attribute__((noinline)) void grow(void) {
	for (int i = 0; i < 10; i++)
		keep_g[i] = malloc(4096);
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--config") == 0) {
#ifdef MP_CS_WITH_LIB
		printf("%d\n", MALLOC_PROF_CONFIG_PROF);
#else
		printf("plain\n");
#endif
		return 0;
	}
	alloc_a();
	alloc_b();
	middle();
	mp_cs_in_lib(cs_alloc);
	mp_cs_keep(cs_alloc);
	churn();
#ifdef MP_CS_WITH_LIB
	if (argc == 2) {
		const char *base = argv[1];
		if (mallctl("prof.dump", NULL, NULL, (void *)&base,
		    sizeof(base)) != 0) {
			fprintf(stderr, "callsites: prof.dump to %s failed\n",
			    base);
			return 1;
		}
	}
#endif
	grow();
	/* Keep the arrays reachable to the end (the dump is at exit). */
	return keep_a[0] && keep_b[0] && keep_c[0] && keep_g[0] ? 0 : 1;
}
