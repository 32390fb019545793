/*
 * test/fuzz/pprof.c - libFuzzer target: malloc-prof's pprof reader
 * (bin/mp_pprof.c: mp_pprof_detect, mp_pprof_read: the gzip inflater and
 * the profile.proto decoder).
 *
 * Each input is a profile, gzipped or raw, given to mp_pprof_detect and
 * then, whatever it says, to mp_pprof_read.  Nothing may crash or read
 * out of bounds; a failed read prints exactly one error line, a
 * successful one none, and a profile read is consistent
 * (fuzz_check_profile: every frame's function index within the
 * profile's functions, every stack with frames, mappings sorted, finite
 * values within MP_COUNT_MAX, and the reports on the profile minus
 * itself adding up without overflow).  A gzip bomb must stop early:
 * libFuzzer's memory limit is below the inflater's 1 GiB cap.  Built
 * with bin/ sources and test/fuzz/bin_stubs.c, run by scripts/fuzz.sh
 * (doc/reliability.md).
 */
#include "malloc-prof.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bin_stubs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	(void)mp_pprof_detect(data, size);
	mp_profile_t prof;
	memset(&prof, 0, sizeof(prof));
	prof.file = "fuzz.pb.gz";
	fuzz_nerrs = 0;
	bool ok = mp_pprof_read(prof.file, data, size, &prof);
	fuzz_check_profile(&prof, ok);
	mp_profile_free(&prof);
	return 0;
}
