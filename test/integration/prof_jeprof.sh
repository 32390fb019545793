#!/bin/sh
# test/integration/prof_jeprof.sh: jeprof reads our heap profiles (TAP).
#
# Runs prof_jeprof_helper (built -O0 -g -fno-omit-frame-pointer) with
#   prof:true,prof_final:true,lg_prof_sample:10,prof_prefix:<tmp>/j
# and checks that `jeprof --text --show_bytes <program> <final dump>` lists
# the two leaking functions as the top two, leak_big (4 MiB) before
# leak_small (1 MiB), with about the right bytes, and that
# `jeprof --text --base=<earlier dump>` shows only what was allocated after
# the earlier dump (leak_big).  Skipped when jeprof is not installed
# (Debian: libjemalloc-dev) and in a --disable-prof build.  The checks are
# the same in a prefixed build, where jeprof cannot know the entry point
# by name (mp_malloc is on no list of allocator functions) and the dump's
# frame 0 is the call into the allocator instead (prof_heap_v2.c): the
# flat column must name the two functions there too, and mp_malloc no row
# at all.
set -u

builddir=${top_builddir:-.}
prefix=${MALLOC_PROF_PREFIX-}
var=${MALLOC_PROF_CONF_ENV:-MALLOC_CONF}
helper=$builddir/test/integration/prof_jeprof_helper
case $helper in
/*) ;;
*) helper=$(pwd)/$helper;;
esac
n=4

skip_all() {
	i=1
	while [ "$i" -le "$n" ]; do
		echo "ok $i # SKIP $1"
		i=$((i + 1))
	done
	exit 0
}

echo "1..$n"
if ! command -v jeprof >/dev/null 2>&1; then
	skip_all "jeprof is not installed (Debian: apt-get install libjemalloc-dev)"
fi
if [ ! -x "$helper" ]; then
	echo "Bail out! $helper is missing"
	exit 1
fi
if [ "$("$helper" --config 2>/dev/null)" != 1 ]; then
	skip_all "built with --disable-prof"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-jeprof.XXXXXX") || exit 99
if [ -z "${MP_KEEP_DUMPS-}" ]; then
	trap 'rm -rf "$tmp"' EXIT
else
	echo "# dumps kept in $tmp"
fi
unset MALLOC_CONF MP_MALLOC_CONF 2>/dev/null || :

# run_helper [BASE]: runs the helper, leaves the final dump's name in $final.
run_helper() {
	rm -f "$tmp"/j.*.heap
	env "$var=prof:true,prof_final:true,lg_prof_sample:10,prof_prefix:$tmp/j" \
	    "$helper" "$@" >"$tmp/helper.out" 2>"$tmp/helper.err"
	rc=$?
	final=
	for f in "$tmp"/j.*.f.heap; do
		[ -f "$f" ] && final=$f
	done
}

# 1: the program runs and writes its final dump.
run_helper
if [ "$rc" = 0 ] && [ -n "$final" ] && [ -s "$final" ] &&
    head -n 1 "$final" | grep -q '^heap_v2/1024$'; then
	echo "ok 1 - the helper wrote $(basename "$final")"
else
	echo "not ok 1 - the helper (status $rc) wrote no final dump"
	sed 's/^/# /' "$tmp/helper.err"
fi

# rows FILE: "flat cum name" for each row of jeprof --text output
# (columns: flat flat% sum% cum cum% name...), in jeprof's order.
rows() {
	awk '$2 ~ /%$/ && $3 ~ /%$/ && $5 ~ /%$/ { print $1, $4, $6 }' "$1"
}

# 2 and 3: jeprof --text --show_bytes.
jeprof --text --show_bytes "$helper" "$final" >"$tmp/text.out" 2>"$tmp/text.err"
rc=$?
rows "$tmp/text.out" >"$tmp/rows"
big=$(awk '$3 == "leak_big" { print $1; exit }' "$tmp/rows")
small=$(awk '$3 == "leak_small" { print $1; exit }' "$tmp/rows")
top=$(sed -n '1p;2p' "$tmp/rows" | awk '{ printf "%s ", $3 }')
want="leak_big leak_small "
# No row names the allocator's entry point (malloc, or mp_malloc in a
# prefixed build): jeprof dropped it, or it was never in the dump.
entry_rows=$(awk -v e="${prefix}malloc" '$3 == e' "$tmp/rows" | wc -l)
if [ "$rc" = 0 ] && [ "$top" = "$want" ] && [ "$entry_rows" -eq 0 ]; then
	echo "ok 2 - jeprof --text: top rows '$top'"
else
	echo "not ok 2 - jeprof --text (status $rc): top rows '$top'," \
	    "want '$want'; ${prefix}malloc rows: $entry_rows"
	sed 's/^/# /' "$tmp/text.out" "$tmp/text.err" | head -n 30
fi
# leak_big: 64 x 64 KiB, always sampled at 1 KiB; leak_small: 1 MiB of
# 1 KiB objects, about 650 samples (4% standard error).
if [ "$rc" = 0 ] && [ "${big:-0}" -eq 4194304 ] 2>/dev/null &&
    [ "${small:-0}" -gt 891289 ] && [ "${small:-0}" -lt 1205862 ]; then
	echo "ok 3 - jeprof bytes: leak_big $big, leak_small $small (1048576 +- 15%)"
else
	echo "not ok 3 - jeprof bytes: leak_big '$big' (want 4194304), leak_small '$small' (want 1048576 +- 15%)"
fi

# 4: --base: the difference between a dump taken after leak_small and the
# final one is leak_big alone.
run_helper "$tmp/base.heap"
jeprof --text --show_bytes --base="$tmp/base.heap" "$helper" "$final" \
    >"$tmp/base.out" 2>"$tmp/base.err"
rc=$?
rows "$tmp/base.out" >"$tmp/brows"
# leak_small's objects are in both dumps: nothing of it is left.
small_rows=$(awk '$3 == "leak_small" && ($1 != 0 || $2 != 0)' "$tmp/brows" | wc -l)
first=$(sed -n 1p "$tmp/brows" | awk '{ print $1, $3 }')
if [ "$rc" = 0 ] && [ -s "$tmp/base.heap" ] && [ "$first" = "4194304 leak_big" ] &&
    [ "$small_rows" -eq 0 ]; then
	echo "ok 4 - jeprof --base: only leak_big (4194304 bytes) grew"
else
	echo "not ok 4 - jeprof --base (status $rc): leak_big row '$first', leak_small rows $small_rows"
	sed 's/^/# /' "$tmp/base.out" "$tmp/base.err" "$tmp/helper.err" | head -n 30
fi
