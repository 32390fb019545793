#!/bin/sh
# Generate configure and Makefile.in (needs autoconf, automake, libtool,
# pkg-config).  Then: ./configure && make && make check
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf -fi "$@"
