/*
 * test/bin/lifetimes.c - the program test/bin/lifetimes.sh profiles: one
 * site that churns short-lived memory and one that keeps its objects.
 *
 *   long_site:  40 x 1000 bytes, kept to the end
 *   short_site: 4000 x 200 bytes, each freed as soon as allocated
 *
 * `lifetimes LIFE HEAP` writes the lifetime profile (prof.lifetimes.dump)
 * to LIFE and a pprof heap profile (prof.dump) to HEAP with the long
 * site's objects live; `--config` prints MALLOC_PROF_CONFIG_PROF (1/0).
 * Linked -no-install: the file in the dumps' memory map is the program
 * that ran.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stdio.h>
#include <string.h>

#define NLONG 40
#define NSHORT 4000

void long_site(void **objs);
void short_site(void);

/* volatile: the sizes are not known to the compiler. */
static volatile size_t long_size = 1000, short_size = 200;

__attribute__((noinline, used, visibility("default")))
void long_site(void **objs) {
	for (int i = 0; i < NLONG; i++)
		objs[i] = malloc(long_size);
	__asm__ volatile("" : : : "memory");
}

__attribute__((noinline, used, visibility("default")))
void short_site(void) {
	void *p = malloc(short_size);
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
}

static void *objs[NLONG];

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--config") == 0) {
		printf("%d\n", MALLOC_PROF_CONFIG_PROF);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: lifetimes LIFE_FILE HEAP_FILE\n");
		return 2;
	}
	long_site(objs);
	for (int i = 0; i < NSHORT; i++)
		short_site();
	const char *life = argv[1], *heap = argv[2], *pprof = "pprof";
	if (mallctl("prof.lifetimes.dump", NULL, NULL, (void *)&life,
	    sizeof(life)) != 0 ||
	    mallctl("prof.format", NULL, NULL, (void *)&pprof,
	    sizeof(pprof)) != 0 ||
	    mallctl("prof.dump", NULL, NULL, (void *)&heap,
	    sizeof(heap)) != 0) {
		fprintf(stderr, "lifetimes: cannot write the profiles\n");
		return 1;
	}
	for (int i = 0; i < NLONG; i++)
		free(objs[i]);
	return 0;
}
