/*
 * test/bin/unloaded_lib.c: the library test/bin/unloaded loads with
 * dlopen, allocates through and unloads with dlclose before it dumps.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <stdlib.h>
#include <string.h>

void **unl_lib_alloc(size_t n, size_t size);

/* n blocks of size bytes, allocated here: their samples' innermost
 * program frame is in this library. */
__attribute__((noinline, visibility("default"))) void **unl_lib_alloc(size_t n, size_t size) {
	void **v = calloc(n, sizeof(*v));
	if (v == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		v[i] = malloc(size);
		if (v[i] != NULL)
			memset(v[i], 0x6b, 64);
	}
	return v;
}
