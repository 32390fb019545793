#!/bin/sh
# bench/run.sh: the benchmark harness's one command.  Installs what it
# needs (the peer allocators, valgrind, python3), builds libmalloc_prof in
# build/bench with the default configuration and the workload program, then
# hands over to bench/run.py, which runs every workload under every
# allocator, interleaved, and writes bench/results.md and
# doc/performance-ratios.svg.  Arguments go to run.py (--help lists them).
# Not part of CI: a full run takes 10-20 minutes on 2 cores.
set -u
cd "$(dirname "$0")/.." || exit 1
. ./scripts/lib.sh

mp_install_deps build-essential autoconf automake libtool pkg-config \
    python3 valgrind libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 \
    libjemalloc-dev

mp_autogen || mp_die "autogen failed"
mp_configure bench || mp_die "configure failed (see build/bench/config.log)"
mp_make bench libmalloc_prof.la bin/malloc-prof >/dev/null ||
    mp_die "building the library or malloc-prof failed"
mkdir -p build/bench/bench
cc -O2 -g -fno-omit-frame-pointer -pthread -Wall -Wextra \
    -o build/bench/bench/mpbench bench/workloads.c -lm ||
    mp_die "building bench/workloads.c failed"
# The same without frame pointers (as distributions build): the profiling
# rows on it measure the .eh_frame walk (prof_unwind:auto).
cc -O2 -g -fomit-frame-pointer -pthread -Wall -Wextra \
    -o build/bench/bench/mpbench-nofp bench/workloads.c -lm ||
    mp_die "building bench/workloads.c without frame pointers failed"
exec python3 bench/run.py --ours "$MP_ROOT/build/bench/.libs/libmalloc_prof.so" \
    --mpbench "$MP_ROOT/build/bench/bench/mpbench" \
    --mpbench-nofp "$MP_ROOT/build/bench/bench/mpbench-nofp" \
    --tool "$MP_ROOT/build/bench/bin/malloc-prof" "$@"
