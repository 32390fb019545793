#!/bin/sh
# scripts/demo.sh: build and install libmalloc_prof into build/install,
# compile examples/demo.c against the installed library (with frame
# pointers, for the heap profiler's backtraces) into build/demo/demo and
# run it from the repository root: it profiles itself, writes
# build/demo/jeprof.<pid>.<seq>.m0.heap and, at exit, the final profile
# build/demo/jeprof.<pid>.<seq>.f.heap with a leak summary.  When jeprof is
# installed (Debian: libjemalloc-dev), it then shows the final profile with
# `jeprof --text --show_bytes`.
# Idempotent; as root on a fresh Debian 12 it installs what is missing.
set -eu
cd "$(dirname "$0")/.."
. ./scripts/lib.sh

mp_install_deps build-essential autoconf automake libtool pkg-config \
    libcmocka-dev
mp_try_install_deps libjemalloc-dev
mp_autogen
mp_configure default --prefix="$MP_ROOT/build/install"
mp_make default
mp_make default install

inst=$MP_ROOT/build/install
PKG_CONFIG_PATH=$inst/lib/pkgconfig
export PKG_CONFIG_PATH
cflags=$(pkg-config --cflags malloc_prof)
libs=$(pkg-config --libs malloc_prof)
libdir=$(pkg-config --variable=libdir malloc_prof)

# build/demo holds the program and its profiles (an older demo.sh left a
# program named build/demo: replace it).
[ -d build/demo ] || rm -f build/demo
mkdir -p build/demo
rm -f build/demo/jeprof.*.heap
mp_log "cc -std=gnu11 -O2 -g -fno-omit-frame-pointer examples/demo.c $cflags $libs -Wl,-rpath,$libdir -lpthread -o build/demo/demo"
# shellcheck disable=SC2086
cc -std=gnu11 -O2 -g -fno-omit-frame-pointer -Wall -Wextra \
    -o build/demo/demo examples/demo.c $cflags $libs -Wl,-rpath,"$libdir" \
    -lpthread
mp_log "build/demo/demo"
./build/demo/demo

# The one final profile (older ones were removed above).
final=
for f in build/demo/jeprof.*.f.heap; do
	[ -f "$f" ] && final=$f
done
if [ -z "$final" ]; then
	mp_log "no final profile was written (see the messages above)"
elif command -v jeprof >/dev/null 2>&1; then
	mp_log "jeprof --text --show_bytes build/demo/demo $final"
	jeprof --text --show_bytes build/demo/demo "$final"
else
	mp_log "jeprof is not installed (Debian: apt-get install libjemalloc-dev); the profile is $final"
fi
