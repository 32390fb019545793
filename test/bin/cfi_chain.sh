#!/bin/sh
# test/bin/cfi_chain.sh: a chain built without frame pointers comes out
# whole in every reader of the profile (TAP).
#
# test/bin/cfi_chain runs main -> lvl1 -> lvl2 -> lvl3 -> lib_lvl4 ->
# lib_alloc -> malloc, all -O2 -fomit-frame-pointer, half of it in a shared
# library, keeping 8 MiB; the profiler walks it with the default
# prof_unwind:auto (frame pointers where they are, .eh_frame where not).
# Its final dump must show the chain in order, root first:
#   1. malloc-prof collapsed on the heap_v2 dump;
#   2. jeprof --collapsed on the same dump (jeprof installed);
#   3. go tool pprof -traces on the library's own pprof dump
#      (prof_format:pprof with prof_symbolize:true, so that the profile
#      names its functions itself; go installed);
#   4. malloc-prof collapsed on that pprof dump;
#   5. malloc-prof collapsed on the heap_v2 dump of the same objects
#      linked again by LLD with their segments apart (-z
#      separate-loadable-segments, 64 KiB pages: Rust's linker gives such
#      layouts): glibc's _dl_find_object then gives the main program's
#      mapping as its text segment alone, and the program's
#      .eh_frame_hdr, in the read-only segment before it, was not found,
#      so the walk followed stale rbp values through the program's frames
#      (lvl3;lib_lvl4;lib_alloc only).  Needs ld.lld (Debian: lld) and a
#      shared, unsanitized build.
# Skipped in a --disable-prof build.
set -u

builddir=${top_builddir:-.}
var=${MALLOC_PROF_CONF_ENV:-MALLOC_CONF}
mp=$builddir/bin/malloc-prof
prog=$builddir/test/bin/cfi_chain
case $prog in
/*) ;;
*) prog=$(pwd)/$prog;;
esac
chain="main;lvl1;lvl2;lvl3;lib_lvl4;lib_alloc"
ntests=5

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
show() { sed 's/^/# /' "$@" | head -n 30; }

echo "1..$ntests"
for f in "$mp" "$prog"; do
	if [ ! -x "$f" ]; then
		echo "Bail out! $f is missing"
		exit 1
	fi
done
if [ "$("$prog" --config)" != 1 ]; then
	while [ "$n" -lt "$ntests" ]; do skip "built with --disable-prof"; done
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-cfichain.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
unset MALLOC_CONF MP_MALLOC_CONF 2>/dev/null || :

# run FORMAT: one run of the program, leaving its final dump's name in
# $dump ("" if there is none).
run() {
	rm -rf "$tmp/d"
	mkdir "$tmp/d"
	env "$var=prof:true,prof_final:true,lg_prof_sample:12,prof_format:$1,prof_prefix:$tmp/d/c" \
	    "$prog" >"$tmp/run.out" 2>&1
	dump=$(ls "$tmp"/d/c.*.f.* 2>/dev/null | head -n 1)
}

# has_chain FILE: FILE (collapsed stacks, root first; jeprof adds each
# function's <address>) holds the chain, with nothing between its frames.
has_chain() {
	sed 's/<[0-9a-f]*>//g' "$1" | grep -q "\(^\|;\)$chain "
}
# chain_line FILE: the first line holding it, without addresses.
chain_line() {
	sed 's/<[0-9a-f]*>//g' "$1" | grep "$chain " | head -n 1
}

run heap
if [ -z "$dump" ]; then
	fail "the program wrote no final dump"
	show "$tmp/run.out"
	while [ "$n" -lt "$ntests" ]; do fail "no dump"; done
	exit 0
fi

# 1. malloc-prof collapsed.
"$mp" collapsed "$prog" "$dump" >"$tmp/mp.txt" 2>"$tmp/mp.err"
if has_chain "$tmp/mp.txt"; then
	ok "malloc-prof collapsed: $(chain_line "$tmp/mp.txt")"
else
	fail "malloc-prof collapsed has no $chain"
	show "$tmp/mp.txt" "$tmp/mp.err"
fi

# 2. jeprof --collapsed.
if ! command -v jeprof >/dev/null 2>&1; then
	skip "jeprof is not installed (Debian: apt-get install libjemalloc-dev)"
else
	jeprof --collapsed "$prog" "$dump" >"$tmp/je.txt" 2>"$tmp/je.err"
	if has_chain "$tmp/je.txt"; then
		ok "jeprof --collapsed: $(chain_line "$tmp/je.txt")"
	else
		fail "jeprof --collapsed has no $chain"
		show "$tmp/je.txt" "$tmp/je.err"
	fi
fi

# 3 and 4: the library's own pprof.
run pprof,prof_symbolize:true
if [ -z "$dump" ]; then
	fail "the program wrote no final pprof dump"
	show "$tmp/run.out"
	fail "no pprof dump"
	exit 0
fi
if ! command -v go >/dev/null 2>&1; then
	skip "go is not installed (Debian: apt-get install golang-go)"
else
	GOCACHE=$tmp/gocache PPROF_TMPDIR=$tmp HOME=${HOME:-$tmp} \
	    go tool pprof -traces -sample_index=inuse_space "$dump" \
	    >"$tmp/go.txt" 2>"$tmp/go.err"
	# Each trace: a separator line of dashes, then one line per frame,
	# leaf first, the function last on the line; written out root first.
	awk '
	function flush() {
		if (k > 0) {
			s = f[k]
			for (i = k - 1; i >= 1; i--)
				s = s ";" f[i]
			print s " 1"
		}
		k = 0
	}
	/^-+\+-+/ { flush(); next }
	/:/ { next }
	NF > 0 { f[++k] = $NF }
	END { flush() }' "$tmp/go.txt" >"$tmp/go.collapsed"
	if has_chain "$tmp/go.collapsed"; then
		ok "go tool pprof -traces: $(chain_line "$tmp/go.collapsed")"
	else
		fail "go tool pprof -traces has no $chain"
		show "$tmp/go.txt" "$tmp/go.err"
	fi
fi
"$mp" collapsed "$prog" "$dump" >"$tmp/mpp.txt" 2>"$tmp/mpp.err"
if has_chain "$tmp/mpp.txt"; then
	ok "malloc-prof collapsed on the pprof dump: $(chain_line "$tmp/mpp.txt")"
else
	fail "malloc-prof collapsed on the pprof dump has no $chain"
	show "$tmp/mpp.txt" "$tmp/mpp.err"
fi

# 5. The program linked by LLD, its segments apart.
objs=$builddir/test/bin/cfi_chain-cfi_chain.o
libdir=$builddir/.libs
chainlibdir=$builddir/test/bin/.libs
if [ -n "${MALLOC_PROF_SANITIZER-}" ]; then
	skip "sanitizer build ($MALLOC_PROF_SANITIZER): the relink would need its runtime"
elif ! command -v ld.lld >/dev/null 2>&1; then
	skip "ld.lld is not installed (Debian: apt-get install lld)"
elif [ ! -f "$objs" ] || [ ! -f "$libdir/libmalloc_prof.so" ] ||
    [ ! -f "$chainlibdir/libmpbinchain.so" ]; then
	skip "no shared libraries or objects to relink ($objs)"
elif ! ${CC:-cc} -fuse-ld=lld -Wl,-z,separate-loadable-segments \
    -Wl,-z,max-page-size=0x10000 -o "$tmp/chain_lld" "$objs" \
    -L"$chainlibdir" -L"$libdir" -lmpbinchain -lmalloc_prof \
    -Wl,-rpath,"$libdir" -Wl,-rpath,"$chainlibdir" >"$tmp/ld.err" 2>&1; then
	fail "relinking with LLD failed"
	show "$tmp/ld.err"
else
	prog=$tmp/chain_lld
	run heap
	"$mp" collapsed "$prog" "$dump" >"$tmp/lld.txt" 2>"$tmp/lld.err"
	if [ -n "$dump" ] && has_chain "$tmp/lld.txt"; then
		ok "LLD, segments apart: $(chain_line "$tmp/lld.txt")"
	else
		fail "LLD, segments apart: malloc-prof collapsed has no $chain"
		show "$tmp/lld.txt" "$tmp/lld.err" "$tmp/run.out"
	fi
fi
