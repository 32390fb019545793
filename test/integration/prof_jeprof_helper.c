/*
 * test/integration/prof_jeprof_helper.c - the program prof_jeprof.sh
 * profiles and hands to jeprof (built -O0 -g -fno-omit-frame-pointer,
 * linked with -no-install so that the file jeprof reads is the program
 * that ran).
 *
 *   prof_jeprof_helper            leak_big() keeps 4 MiB (64 x 64 KiB),
 *                                 leak_small() 1 MiB (1024 x 1 KiB),
 *                                 churn() allocates and frees 8 MiB;
 *                                 the final dump (prof_final) shows them
 *   prof_jeprof_helper BASE       the same, with a dump to the file BASE
 *                                 taken after leak_small() and before
 *                                 leak_big(): jeprof --base=BASE FINAL
 *                                 then shows leak_big() only
 *   prof_jeprof_helper --config   prints MALLOC_PROF_CONFIG_PROF (1/0)
 *
 * The options (prof:true,prof_final:true,lg_prof_sample:10,prof_prefix:...)
 * come from the environment.
 */
/* automake puts the user's CFLAGS (-O2 -g) after this program's own
 * -O0: keep the functions unoptimised anyway (GCC). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O0")
#endif

#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBIG 64
#define BIG (64 << 10)
#define NSMALL 1024
#define SMALL 1024

static void *big[NBIG];
static void *small[NSMALL];

void leak_big(void);
void leak_small(void);
void churn(void);

__attribute__((noinline, visibility("default"))) void
leak_big(void) {
	for (int i = 0; i < NBIG; i++) {
		big[i] = malloc(BIG);
		memset(big[i], 1, 64);
	}
}

__attribute__((noinline, visibility("default"))) void
leak_small(void) {
	for (int i = 0; i < NSMALL; i++) {
		small[i] = malloc(SMALL);
		memset(small[i], 2, 64);
	}
}

__attribute__((noinline, visibility("default"))) void
churn(void) {
	for (int i = 0; i < 128; i++) {
		void *p = malloc(64 << 10);
		memset(p, 3, 64);
		free(p);
	}
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--config") == 0) {
		printf("%d\n", MALLOC_PROF_CONFIG_PROF);
		return 0;
	}
	leak_small();
	churn();
	if (argc == 2) {
		const char *base = argv[1];
		int r = mallctl("prof.dump", NULL, NULL, (void *)&base,
		    sizeof(base));
		if (r != 0) {
			fprintf(stderr, "prof.dump(\"%s\"): error %d\n", base,
			    r);
			return 2;
		}
	}
	leak_big();
	churn();
	return 0;
}
