/*
 * test/fuzz/bin_stubs.h - the fuzz targets of malloc-prof's readers:
 * counts of the messages bin_stubs.c's mp_err and mp_warn were given
 * (each checked to be one line), and the checks on a read profile.
 */
#ifndef MP_FUZZ_BIN_STUBS_H
#define MP_FUZZ_BIN_STUBS_H

extern unsigned fuzz_nerrs, fuzz_nwarns;

/* Aborts unless the read that returned OK (fuzz_nerrs counted from 0
 * before it) printed one error line if it failed and none if not, and,
 * if it worked, PROF holds what the tool relies on: every stack has
 * frames and its t* line, every frame's function index is in range,
 * the mappings are sorted, mp_profile_mapping finds only mappings that
 * hold the address, every value is finite (and not negative for
 * heap_v2), every count and each value's total within MP_COUNT_MAX, no
 * string the tool prints (thread, function, file and mapping names,
 * build IDs, sample types) has a control character, and the reports on
 * the profile minus itself add up without failing or overflowing. */
void fuzz_check_profile(const mp_profile_t *prof, bool ok);

#endif
