#!/bin/sh
# test/integration/exported_symbols.sh: the shared library exports exactly
# the public names of this build (TAP).
#
# Unprefixed build: the jemalloc-style API, malloc_conf / malloc_message and
# the glibc-internal aliases (__libc_malloc, ...) plus malloc_trim, mallinfo,
# mallinfo2, and C++'s operator new and delete in every form when the build
# has them (MALLOC_PROF_CONFIG_CXX in the generated header).  Prefixed
# build: the prefixed API (mp_malloc ... mp_malloc_message) and none of the
# glibc names or C++ operators.  Linker-provided symbols are ignored.
set -u

prefix=${MALLOC_PROF_PREFIX-}
builddir=${top_builddir:-.}
lib=$builddir/.libs/libmalloc_prof.so

api="malloc calloc realloc free posix_memalign aligned_alloc memalign valloc
pvalloc malloc_usable_size reallocarray mallocx rallocx xallocx sallocx dallocx
sdallocx nallocx free_sized free_aligned_sized mallctl mallctlnametomib
mallctlbymib malloc_stats_print malloc_conf malloc_message"
glibc="__libc_malloc __libc_calloc __libc_realloc __libc_free __libc_memalign
__libc_valloc __libc_pvalloc __posix_memalign malloc_trim mallinfo2 mallinfo"
# operator new: plain, [], nothrow, align_val_t, align_val_t + nothrow;
# operator delete: plain, [], nothrow, sized, align_val_t, sized +
# align_val_t, align_val_t + nothrow.
cxx="_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t
_ZnamSt11align_val_t _ZnwmSt11align_val_tRKSt9nothrow_t
_ZnamSt11align_val_tRKSt9nothrow_t _ZdlPv _ZdaPv _ZdlPvRKSt9nothrow_t
_ZdaPvRKSt9nothrow_t _ZdlPvm _ZdaPvm _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
_ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t _ZdlPvSt11align_val_tRKSt9nothrow_t
_ZdaPvSt11align_val_tRKSt9nothrow_t"
data_objects="malloc_conf malloc_message"
ignored="_init _fini _edata _end __bss_start"

# A sanitizer's runtime adds its own exported symbols (__odr_asan.*, ...).
if [ -n "${MALLOC_PROF_SANITIZER-}" ]; then
	echo "1..0 # SKIP sanitizer build ($MALLOC_PROF_SANITIZER): its instrumentation exports symbols of its own"
	exit 0
fi

if ! command -v nm >/dev/null 2>&1; then
	echo "1..0 # SKIP nm (binutils) is not installed"
	exit 0
fi

# Whether this build has the C++ operators: the generated public header
# says.
have_cxx=0
if grep -q '^#define MALLOC_PROF_CONFIG_CXX 1' \
    "$builddir/include/malloc_prof.h" 2>/dev/null; then
	have_cxx=1
fi

echo "1..7"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-symbols.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# 1: the library is there and nm can read it.
if [ -f "$lib" ] && nm -D --defined-only "$lib" >"$tmp/nm.out" 2>"$tmp/nm.err"
then
	echo "ok 1 - nm -D --defined-only $lib"
else
	echo "not ok 1 - nm -D --defined-only $lib"
	sed 's/^/# /' "$tmp/nm.err" 2>/dev/null
	for i in 2 3 4 5 6 7; do
		echo "not ok $i - # no symbol table"
	done
	exit 0
fi

# "ADDRESS TYPE NAME[@VERSION]" -> "NAME TYPE", without linker symbols.
awk -v ign="$ignored" '
BEGIN { n = split(ign, a, " "); for (i = 1; i <= n; i++) skip[a[i]] = 1 }
NF >= 2 {
	name = $NF; type = $(NF - 1)
	sub(/@.*/, "", name)
	if (!(name in skip)) print name, type
}' "$tmp/nm.out" | sort -u >"$tmp/actual.types"
cut -d' ' -f1 "$tmp/actual.types" | sort -u >"$tmp/actual"

# The expected list for this build.
{
	for n in $api; do
		echo "$prefix$n"
	done
	if [ -z "$prefix" ]; then
		for n in $glibc; do
			echo "$n"
		done
	fi
	if [ "$have_cxx" = 1 ]; then
		for n in $cxx; do
			echo "$n"
		done
	fi
} | sort -u >"$tmp/expected"

unexpected=$(comm -23 "$tmp/actual" "$tmp/expected")
missing=$(comm -13 "$tmp/actual" "$tmp/expected")

# 2: nothing exported beyond the public list.
if [ -z "$unexpected" ]; then
	echo "ok 2 - no unexpected exported symbols (prefix '$prefix')"
else
	echo "not ok 2 - unexpected exported symbols (prefix '$prefix')"
	echo "$unexpected" | sed 's/^/#   unexpected: /'
fi

# 3: every public name is exported.
if [ -z "$missing" ]; then
	echo "ok 3 - every public symbol is exported (prefix '$prefix')"
else
	echo "not ok 3 - public symbols missing (prefix '$prefix')"
	echo "$missing" | sed 's/^/#   missing: /'
fi

# 4: functions are code and malloc_conf / malloc_message are data (checked
# for the expected names only; the others are reported by test 2).
awk 'NR == FNR { want[$1] = 1; next } ($1 in want)' "$tmp/expected" \
    "$tmp/actual.types" >"$tmp/expected.types"
bad_types=
while read -r name type; do
	base=${name#"$prefix"}
	is_data=0
	for d in $data_objects; do
		[ "$base" = "$d" ] && [ "$name" = "$prefix$d" ] && is_data=1
	done
	if [ "$is_data" = 1 ]; then
		case $type in
		[BDGSVvbdgs]) ;;
		*) bad_types="$bad_types $name:$type";;
		esac
	else
		case $type in
		[TtWwi]) ;;
		*) bad_types="$bad_types $name:$type";;
		esac
	fi
done <"$tmp/expected.types"
if [ -z "$bad_types" ]; then
	echo "ok 4 - symbol kinds (functions in text, malloc_conf/malloc_message data)"
else
	echo "not ok 4 - symbol kinds"
	for b in $bad_types; do
		echo "#   wrong kind: $b"
	done
fi

# 5: a prefixed build exports none of the plain allocator names.
if [ -n "$prefix" ]; then
	plain=$(for n in $api $glibc; do
		grep -x "$n" "$tmp/actual"
	done)
	if [ -z "$plain" ]; then
		echo "ok 5 - prefixed build does not export plain malloc names"
	else
		echo "not ok 5 - prefixed build exports plain names"
		echo "$plain" | sed 's/^/#   plain: /'
	fi
else
	if grep -qx malloc "$tmp/actual" && grep -qx __libc_malloc "$tmp/actual"
	then
		echo "ok 5 - unprefixed build exports malloc and __libc_malloc"
	else
		echo "not ok 5 - unprefixed build lacks malloc or __libc_malloc"
	fi
fi
# 6: the C++ operators are there exactly when the build has them, and
# never in a prefixed build (it must not replace the process's new).
cxx_found=$(for n in $cxx; do
	grep -x "$n" "$tmp/actual"
done | wc -l)
cxx_all=$(echo $cxx | wc -w)
if [ -n "$prefix" ] && [ "$cxx_found" -ne 0 ]; then
	echo "not ok 6 - prefixed build exports $cxx_found C++ operators"
elif [ "$have_cxx" = 1 ] && [ "$cxx_found" -ne "$cxx_all" ]; then
	echo "not ok 6 - $cxx_found of the $cxx_all C++ operators exported"
elif [ "$have_cxx" = 0 ] && [ "$cxx_found" -ne 0 ]; then
	echo "not ok 6 - $cxx_found C++ operators exported by a build without them"
else
	echo "ok 6 - C++ operators: $cxx_found of $cxx_all (build has them: $have_cxx, prefix '$prefix')"
fi
# 7: no C++ runtime among the library's dependencies (the operators refer
# to it weakly, src/alloc/cxx.cpp): a C program must not load libstdc++,
# whose start-up allocates an exception pool that profiles would show.
needed=$(LC_ALL=C readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if [ -z "$needed" ]; then
	echo "not ok 7 - readelf -d listed no NEEDED entries"
elif echo "$needed" | grep -Eq 'libstdc\+\+|libc\+\+|libsupc'; then
	echo "not ok 7 - the library needs a C++ runtime:" $needed
else
	echo "ok 7 - no C++ runtime needed:" $needed
fi
exit 0
