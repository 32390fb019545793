#!/bin/sh
# test/integration/no_libm.sh: the shared library links no libm (TAP).
#
# The profiler's exp, log1p and roundings are src/sys/util.c's: a process
# that calls libm maps its pages and the fault-around windows beside them
# (issues 15 and 20: 180-330 KiB of resident set).  Checked:
#   1. readelf -d lists no libm.so among the library's NEEDED entries;
#   2. none of the library's undefined dynamic symbols is one libm defines
#      (libm's list read from the libm.so.6 the system loads, when found).
set -u

builddir=${top_builddir:-.}
lib=$builddir/.libs/libmalloc_prof.so

if ! command -v nm >/dev/null 2>&1 || ! command -v readelf >/dev/null 2>&1
then
	echo "1..0 # SKIP nm or readelf (binutils) is not installed"
	exit 0
fi
# A sanitizer's runtime brings its own dependencies and imports.
if [ -n "${MALLOC_PROF_SANITIZER-}" ]; then
	echo "1..0 # SKIP sanitizer build ($MALLOC_PROF_SANITIZER)"
	exit 0
fi

echo "1..2"

tmp=$(mktemp -d) || exit 99   # mktemp honours TMPDIR
trap 'rm -rf "$tmp"' EXIT

needed=$(LC_ALL=C readelf -d "$lib" 2>/dev/null |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if [ -z "$needed" ]; then
	echo "not ok 1 - readelf -d $lib listed no NEEDED entries"
elif echo "$needed" | grep -q '^libm\.so'; then
	echo "not ok 1 - the library needs libm:" $needed
else
	echo "ok 1 - no libm among NEEDED:" $needed
fi

# The libm the dynamic linker would load (ldconfig's cache, else the
# usual directories).
libm=$(LC_ALL=C /sbin/ldconfig -p 2>/dev/null |
    sed -n 's/^[[:space:]]*libm\.so\.6 (.*x86-64.*) => //p' | head -n 1)
if [ -z "$libm" ]; then
	for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 \
	    /usr/lib64 /lib /usr/lib; do
		if [ -f "$d/libm.so.6" ]; then
			libm=$d/libm.so.6
			break
		fi
	done
fi
if [ -z "$libm" ] || [ ! -f "$libm" ]; then
	echo "ok 2 # SKIP libm.so.6 not found"
	exit 0
fi
nm -D --undefined-only "$lib" 2>/dev/null | awk '{ print $NF }' |
    sed 's/@.*//' | sort -u >"$tmp/imports"
nm -D --defined-only "$libm" 2>/dev/null | awk '{ print $NF }' |
    sed 's/@.*//' | sort -u >"$tmp/libm"
if [ ! -s "$tmp/imports" ] || [ ! -s "$tmp/libm" ]; then
	echo "not ok 2 - nm read no symbols ($lib, $libm)"
	exit 0
fi
from_libm=$(comm -12 "$tmp/imports" "$tmp/libm")
if [ -z "$from_libm" ]; then
	echo "ok 2 - no import of the library is defined by $libm"
else
	echo "not ok 2 - the library imports libm's functions:" $from_libm
fi
exit 0
