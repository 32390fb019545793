/*
 * test/bin/unloaded.c: the program of test/bin/unloaded.sh.  It loads
 * LIB (argv[1]) with dlopen, has it allocate 8 MiB in 64 KiB blocks
 * (unl_lib_alloc), unloads it with dlclose while the blocks stay live,
 * then allocates 2 MiB of its own (unl_main_alloc) and writes a dump to
 * argv[2] (prof.dump, in the format MALLOC_CONF's prof_format says).
 * `unloaded --config` prints 1 if the library profiles, else 0.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB_BLOCKS 128
#define LIB_BLOCK ((size_t)64 << 10)

void *unl_main_alloc(size_t size);

__attribute__((noinline)) void *unl_main_alloc(size_t size) {
	void *p = malloc(size);
	if (p != NULL)
		memset(p, 0x3c, 64);
	return p;
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--config") == 0) {
		printf("%d\n", MALLOC_PROF_CONFIG_PROF ? 1 : 0);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: %s LIB DUMP\n", argv[0]);
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	void **(*lib_alloc)(size_t, size_t);
	*(void **)&lib_alloc = dlsym(h, "unl_lib_alloc");
	if (lib_alloc == NULL) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	void **v = lib_alloc(LIB_BLOCKS, LIB_BLOCK);
	if (v == NULL || dlclose(h) != 0) {
		fprintf(stderr, "unl_lib_alloc or dlclose failed\n");
		return 1;
	}
	/* Unloaded: its text is no longer mapped. */
	void *mine[32];
	for (int i = 0; i < 32; i++)
		mine[i] = unl_main_alloc(LIB_BLOCK);
	const char *path = argv[2];
	if (mallctl("prof.dump", NULL, NULL, (void *)&path,
	    sizeof(path)) != 0) {
		fprintf(stderr, "prof.dump failed\n");
		return 1;
	}
	for (int i = 0; i < 32; i++)
		free(mine[i]);
	for (size_t i = 0; i < LIB_BLOCKS; i++)
		free(v[i]);
	free(v);
	return 0;
}
