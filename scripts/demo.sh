#!/bin/sh
# scripts/demo.sh: build and install libmalloc_prof into build/install, then
# compile examples/demo.c against the installed library and run it.
# Idempotent; as root on a fresh Debian 12 it installs what is missing.
set -eu
cd "$(dirname "$0")/.."
. ./scripts/lib.sh

mp_install_deps build-essential autoconf automake libtool pkg-config \
    libcmocka-dev
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
mp_log "cc -std=gnu11 -O2 examples/demo.c $cflags $libs -Wl,-rpath,$libdir -lpthread"
# shellcheck disable=SC2086
cc -std=gnu11 -O2 -g -Wall -Wextra -o build/demo examples/demo.c \
    $cflags $libs -Wl,-rpath,"$libdir" -lpthread
mp_log "build/demo"
./build/demo
