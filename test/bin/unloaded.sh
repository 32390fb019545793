#!/bin/sh
# test/bin/unloaded.sh: the frames of a library unloaded with dlclose are
# still named in every reader of the profile (TAP).
#
# test/bin/unloaded loads test/bin/.libs/libmpunloaded.so with dlopen,
# lets its unl_lib_alloc allocate 8 MiB, kept live, unloads it and dumps
# (unl_main_alloc holds 2 MiB more).  /proc/self/maps no longer lists the
# library; the profiler kept its mapping.  Checked:
#   1. the heap_v2 dump's MAPPED_LIBRARIES holds the marked line of the
#      library (after "# unloaded (dlclose)");
#   2. malloc-prof top names unl_lib_alloc with 8 MiB, without warning;
#   3. jeprof --text names it (jeprof installed);
#   4. malloc-prof top names it in a pprof dump (prof_symbolize:false:
#      from the profile's Mapping table);
#   5. go tool pprof -top names it in that dump (go installed);
#   6. without the marked lines, malloc-prof shows a bare address and
#      warns once, in one line, about addresses outside every mapping.
# Skipped in a --disable-prof build.
set -u

builddir=${top_builddir:-.}
var=${MALLOC_PROF_CONF_ENV:-MALLOC_CONF}
mp=$builddir/bin/malloc-prof
prog=$builddir/test/bin/unloaded
lib=$builddir/test/bin/.libs/libmpunloaded.so
case $prog in
/*) ;;
*) prog=$(pwd)/$prog; lib=$(pwd)/$lib;;
esac
ntests=6

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
show() { sed 's/^/# /' "$@" | head -n 30; }

echo "1..$ntests"
for f in "$mp" "$prog" "$lib"; do
	if [ ! -e "$f" ]; then
		echo "Bail out! $f is missing"
		exit 1
	fi
done
if [ "$("$prog" --config)" != 1 ]; then
	while [ "$n" -lt "$ntests" ]; do skip "built with --disable-prof"; done
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-unloaded.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
unset MALLOC_CONF MP_MALLOC_CONF 2>/dev/null || :

# run FORMAT FILE: one run, dumping to FILE; true if it wrote it.
run() {
	env "$var=prof:true,lg_prof_sample:12,prof_format:$1" \
	    "$prog" "$lib" "$2" >"$tmp/run.out" 2>&1 && [ -s "$2" ]
}

# The line of unl_lib_alloc in malloc-prof top's table: "BYTES ... name".
lib_bytes() {
	awk '$NF == "unl_lib_alloc" { print $1; exit }' "$1"
}

if ! run heap_v2 "$tmp/a.heap"; then
	echo "Bail out! the program failed: $(head -c 300 "$tmp/run.out")"
	exit 1
fi

# 1. The marked line.
libname=$(basename "$lib")
if sed -n '/^# unloaded (dlclose)/,$p' "$tmp/a.heap" |
    grep -q "^[0-9a-f]*-[0-9a-f]* r-xp [0-9a-f]* 00:00 0 .*/$libname\$"; then
	ok "MAPPED_LIBRARIES keeps the unloaded library, marked"
else
	fail "no marked line for $libname in MAPPED_LIBRARIES"
	sed -n '/^MAPPED_LIBRARIES/,$p' "$tmp/a.heap" | grep -v "^[0-9a-f]*-.* \(rw\|r-\)" | show
fi

# 2. malloc-prof top.
"$mp" top "$tmp/a.heap" >"$tmp/mp.txt" 2>"$tmp/mp.err"
b=$(lib_bytes "$tmp/mp.txt")
if [ "${b:-0}" -ge 7000000 ] && [ "${b:-0}" -le 10000000 ] &&
    ! grep -q "outside every mapping" "$tmp/mp.err"; then
	ok "malloc-prof top: unl_lib_alloc $b bytes"
else
	fail "malloc-prof top: unl_lib_alloc ${b:-missing} (8 MiB expected)"
	show "$tmp/mp.txt" "$tmp/mp.err"
fi

# 3. jeprof.
if ! command -v jeprof >/dev/null 2>&1; then
	skip "jeprof is not installed (Debian: apt-get install libjemalloc-dev)"
else
	jeprof --text "$prog" "$tmp/a.heap" >"$tmp/je.txt" 2>"$tmp/je.err"
	if awk '$NF == "unl_lib_alloc" && $1 + 0 >= 7 { f = 1 } END { exit !f }' \
	    "$tmp/je.txt"; then
		ok "jeprof --text: $(grep unl_lib_alloc "$tmp/je.txt" | head -n 1)"
	else
		fail "jeprof --text does not name unl_lib_alloc with 8 MB"
		show "$tmp/je.txt" "$tmp/je.err"
	fi
fi

# 4 and 5: pprof, named from the Mapping table.
if ! run pprof "$tmp/a.pb.gz"; then
	fail "the program wrote no pprof dump"
	show "$tmp/run.out"
	fail "no pprof dump"
else
	"$mp" top "$tmp/a.pb.gz" >"$tmp/mpp.txt" 2>"$tmp/mpp.err"
	b=$(lib_bytes "$tmp/mpp.txt")
	if [ "${b:-0}" -ge 7000000 ] && [ "${b:-0}" -le 10000000 ]; then
		ok "malloc-prof top on the pprof dump: unl_lib_alloc $b bytes"
	else
		fail "malloc-prof top on the pprof dump: unl_lib_alloc ${b:-missing}"
		show "$tmp/mpp.txt" "$tmp/mpp.err"
	fi
	if ! command -v go >/dev/null 2>&1; then
		skip "go is not installed (Debian: apt-get install golang-go)"
	else
		GOCACHE=$tmp/gocache PPROF_TMPDIR=$tmp HOME=${HOME:-$tmp} \
		    go tool pprof -top -sample_index=inuse_space "$tmp/a.pb.gz" \
		    >"$tmp/go.txt" 2>"$tmp/go.err"
		if grep -q " unl_lib_alloc\$" "$tmp/go.txt"; then
			ok "go tool pprof -top: $(grep unl_lib_alloc "$tmp/go.txt")"
		else
			fail "go tool pprof -top does not name unl_lib_alloc"
			show "$tmp/go.txt" "$tmp/go.err"
		fi
	fi
fi

# 6. Without the marked lines: a bare address, one warning line.
sed '/^# unloaded (dlclose)/,$d' "$tmp/a.heap" >"$tmp/b.heap"
"$mp" top "$tmp/b.heap" >"$tmp/mpb.txt" 2>"$tmp/mpb.err"
nw=$(grep -c "outside every mapping" "$tmp/mpb.err")
if [ "$nw" -eq 1 ] && [ "$(wc -l <"$tmp/mpb.err")" -eq 1 ] &&
    grep -q "^malloc-prof: warning: " "$tmp/mpb.err" &&
    ! grep -q "unl_lib_alloc" "$tmp/mpb.txt"; then
	ok "without them: a bare address and one warning line"
else
	fail "without them: $nw warnings"
	show "$tmp/mpb.txt" "$tmp/mpb.err"
fi
