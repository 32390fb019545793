/*
 * test/fuzz/mallctl_name.c - libFuzzer target: mallctl name lookup.
 *
 * Each input is a name (NUL-terminated copy) given to mallctlnametomib
 * with a full and a short mib buffer (lookup only: nothing is read or
 * changed).  Nothing may crash, and nothing is written past the given
 * mib length.  Built and
 * run by scripts/fuzz.sh (doc/reliability.md).
 */
#include "malloc_prof/internal/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

MP_EXPORT int MP_PUBLIC(mallctlnametomib)(const char *name, size_t *mibp,
    size_t *miblenp);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static char name[4096];
	if (size >= sizeof(name))
		size = sizeof(name) - 1;
	memcpy(name, data, size);
	name[size] = '\0';
	size_t mib[9];
	size_t miblen = 8;
	mib[8] = 0x5a5a5a5a;
	(void)MP_PUBLIC(mallctlnametomib)(name, mib, &miblen);
	if (miblen > 8 || mib[8] != 0x5a5a5a5a)
		abort();
	size_t shortmib[3];
	size_t shortlen = 2;
	shortmib[2] = 0x5a5a5a5a;
	(void)MP_PUBLIC(mallctlnametomib)(name, shortmib, &shortlen);
	if (shortlen > 2 || shortmib[2] != 0x5a5a5a5a)
		abort();
	return 0;
}
