#!/bin/sh
# scripts/fuzz.sh [SECONDS [TARGET...]]: build the libFuzzer targets of
# test/fuzz/ (clang, ASan + UBSan, a --with-prefix=mp_ build in
# build/fuzz) and run each for SECONDS (default 30; 0: build only).
# Corpora grow in build/fuzz/corpus/<target>; a crash leaves its input in
# build/fuzz/crash-<target>-*.  Not part of scripts/test.sh's builds.
# Targets: conf (the MALLOC_CONF parser), mallctl_name (mallctl name
# lookup), http_request (the scrape endpoint's request parser), and
# malloc-prof's readers: heap_v2 (profiles), pprof (gzip and
# profile.proto), elf (ELF symbol tables), dwarf (DWARF line tables);
# cfi (the profiler's .eh_frame reader and unwind step).
# A target including bin/malloc-prof.h is built from the tool's sources
# (bin/*.c, with the system malloc, as the tool is) and
# test/fuzz/bin_stubs.c, less any bin/*.c it #includes itself; the others
# link the library's core.  Needs clang and libclang-rt-14-dev
# (installed when root).
# Ends with "N passed, N failed" (one per target run).
set -u
cd "$(dirname "$0")/.." || exit 1
. ./scripts/lib.sh

secs=${1:-30}
[ $# -gt 0 ] && shift
targets=${*:-conf mallctl_name http_request heap_v2 pprof elf dwarf cfi}

mp_install_deps build-essential autoconf automake libtool pkg-config clang \
    libclang-rt-14-dev
mp_autogen || mp_die "autogen failed"

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cflags="-O1 -g -fno-omit-frame-pointer $san"
dir=$MP_ROOT/build/fuzz
mp_configure fuzz --with-prefix=mp_ CC=clang \
    CFLAGS="$cflags -fsanitize=fuzzer-no-link" LDFLAGS="$san" ||
    mp_die "configure failed (see build/fuzz/config.log)"
mp_make fuzz libmalloc_prof_core.la || mp_die "build failed"

# The tool's readers and what they need: all of bin/ but main and the
# command (malloc-prof.c, mp_cmd.c).  test/fuzz/bin_stubs.c's messages
# take the place of mp_util.c's (weak) ones.
bin_srcs="bin/mp_util.c bin/mp_profile.c bin/mp_pprof.c bin/mp_symbolize.c
    bin/mp_dwarf.c bin/mp_output.c src/prof/pprof_enc.c test/fuzz/bin_stubs.c"
zlib=
grep -q 'define MP_HAVE_ZLIB 1' "$dir/include/malloc_prof/internal/config.h" &&
    zlib=-lz

pass=0
fail=0
for t in $targets; do
	mp_log "build/fuzz/fuzz_$t"
	[ -f "test/fuzz/$t.c" ] || mp_die "no target test/fuzz/$t.c"
	if grep -q '^#include "malloc-prof.h"' "test/fuzz/$t.c"; then
		srcs=
		for f in $bin_srcs; do
			grep -q "^#include \"../../$f\"" "test/fuzz/$t.c" ||
			    srcs="$srcs $f"
		done
		# shellcheck disable=SC2086
		clang $cflags -fsanitize=fuzzer -Ibin -I"$dir/include" \
		    -Iinclude -D_GNU_SOURCE "test/fuzz/$t.c" $srcs $zlib -lm \
		    -o "$dir/fuzz_$t" || mp_die "fuzz_$t: build failed"
	else
		clang $cflags -fsanitize=fuzzer -I"$dir/include" -Iinclude \
		    -D_GNU_SOURCE "test/fuzz/$t.c" \
		    "$dir/.libs/libmalloc_prof_core.a" -lpthread -lm \
		    -o "$dir/fuzz_$t" || mp_die "fuzz_$t: build failed"
	fi
	[ "$secs" -eq 0 ] && continue
	mkdir -p "$dir/corpus/$t"
	mp_log "fuzz_$t: $secs s"
	if "$dir/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 \
	    -artifact_prefix="$dir/crash-$t-" "$dir/corpus/$t" \
	    "test/fuzz/seeds/$t" >"$dir/fuzz_$t.log" 2>&1; then
		pass=$((pass + 1))
		grep -E '^stat::(number_of_executed_units|new_units_added)' \
		    "$dir/fuzz_$t.log"
	else
		fail=$((fail + 1))
		tail -n 40 "$dir/fuzz_$t.log"
		mp_log "fuzz_$t: FAILED (input in $dir/crash-$t-*)"
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
