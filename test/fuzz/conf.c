/*
 * test/fuzz/conf.c - libFuzzer target: the MALLOC_CONF parser.
 *
 * Each input is one conf string (NUL-terminated copy; a NUL inside ends
 * it, as in an environment variable) parsed by conf_parse, which must not
 * crash, read out of bounds or leave an option out of its range; the
 * defaults are restored after each input.  The error lines go to a
 * malloc_message that drops them.
 * Built and run by scripts/fuzz.sh (doc/reliability.md).
 */
#include "malloc_prof/internal/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void (*MP_PUBLIC(malloc_message))(void *cbopaque, const char *s);

static void quiet(void *opaque, const char *s) {
	(void)opaque;
	(void)s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static char buf[1 << 16];
	if (size >= sizeof(buf))
		size = sizeof(buf) - 1;
	memcpy(buf, data, size);
	buf[size] = '\0';
	MP_PUBLIC(malloc_message) = quiet;
	(void)conf_parse("fuzz", buf);
	/* Every numeric option stays within its row's range. */
	for (unsigned i = 0; i < conf_nopts; i++) {
		const conf_opt_t *o = &conf_opts[i];
		intmax_t v;
		switch (o->type) {
		case CONF_UNSIGNED: v = *(unsigned *)o->var; break;
		case CONF_SIZE_T: v = (intmax_t)*(size_t *)o->var; break;
		case CONF_SSIZE_T: v = *(ssize_t *)o->var; break;
		default: continue;
		}
		if (v < o->min || v > o->max)
			abort();
	}
	conf_reset_defaults();
	return 0;
}
