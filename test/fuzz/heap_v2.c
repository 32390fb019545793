/*
 * test/fuzz/heap_v2.c - libFuzzer target: malloc-prof's profile reader
 * (bin/mp_profile.c, mp_profile_read_mem), heap_v2 dumps above all.
 *
 * Each input is a whole profile file, read as the tool reads a file:
 * heap_v2 text, or pprof when it is not (mp_pprof_detect).  Nothing may
 * crash or read out of bounds; a failed read prints exactly one error
 * line, a successful one none, and a profile read is consistent
 * (fuzz_check_profile: every stack has frames and its t* line, indexes
 * in range, mappings sorted and found only for addresses they hold,
 * finite values, counts within MP_COUNT_MAX, and the reports on the
 * profile minus itself adding up without overflow).  Built with bin/
 * sources and test/fuzz/bin_stubs.c and run by scripts/fuzz.sh
 * (doc/reliability.md).
 */
#include "malloc-prof.h"

#include <stdint.h>
#include <stdlib.h>

#include "bin_stubs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	mp_profile_t prof;
	fuzz_nerrs = 0;
	bool ok = mp_profile_read_mem("fuzz.heap", data, size, &prof);
	fuzz_check_profile(&prof, ok);
	if (ok)
		mp_profile_free(&prof);
	return 0;
}
