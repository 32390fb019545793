#!/bin/sh
# bench/unwind.sh: the cost of the profiler's stack walk in each
# prof_unwind mode against libgcc's _Unwind_Backtrace (bench/unwind.c says
# how it is measured).  Installs what it needs (valgrind for the
# instruction counts), builds libmalloc_prof_core.a in build/bench (the
# default configuration, shared with bench/run.sh) and bench/unwind.c
# against it, then runs it; the report (Markdown) goes to standard output.
# Arguments go to the program: --reps N (warm repetitions, 51), --cold N
# (new processes per cold number, 21), --no-callgrind, --keep DIR (keep
# the callgrind outputs there, for callgrind_annotate).
# Not part of CI: a run takes a few minutes on 2 cores.
set -u
cd "$(dirname "$0")/.." || exit 1
. ./scripts/lib.sh

mp_install_deps build-essential autoconf automake libtool pkg-config \
    valgrind

mp_autogen || mp_die "autogen failed"
mp_configure bench || mp_die "configure failed (see build/bench/config.log)"
mp_make bench libmalloc_prof_core.la >/dev/null ||
    mp_die "building libmalloc_prof_core.la failed"

# One source, three objects: the driver, the chain with frame pointers
# and the chain without them, with the library's -O2 and -std=gnu11.
out=build/bench/bench
build_unwind() {
	mkdir -p "$out" || return 1
	flags="-O2 -g -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -DHAVE_CONFIG_H
	    -Ibuild/bench/include -Iinclude"
	# shellcheck disable=SC2086
	cc $flags -fno-omit-frame-pointer -DUNWIND_PART=0 \
	    -c -o "$out/unwind.o" bench/unwind.c || return 1
	# shellcheck disable=SC2086
	cc $flags -fno-omit-frame-pointer -DUNWIND_PART=1 \
	    -c -o "$out/unwind_fp.o" bench/unwind.c || return 1
	# shellcheck disable=SC2086
	cc $flags -fomit-frame-pointer -DUNWIND_PART=2 \
	    -c -o "$out/unwind_nofp.o" bench/unwind.c || return 1
	cc -o "$out/unwind" "$out/unwind.o" "$out/unwind_fp.o" \
	    "$out/unwind_nofp.o" build/bench/.libs/libmalloc_prof_core.a \
	    -lgcc_s -pthread -lm
}
build_unwind || mp_die "building bench/unwind.c failed"
mp_log "$(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$out/unwind" "$@"
