#!/bin/sh
# test/bin/malloc_prof.sh: the malloc-prof tool on real and hand-made
# profiles (TAP).
#
# test/bin/callsites (see its comment for the call sites and their bytes)
# runs with prof:true,prof_final:true,lg_prof_sample:0 so that every count
# is exact, and writes a dump in the middle (BASE) and one at exit (FINAL);
# every command is checked on them: top's rows and order, collapsed's
# total against top's, leaks' exit statuses, diff, the flame graph's XML
# and its rect count, a stripped copy, a debug file found by build ID, a
# PIE and a shared library, a missing and a deleted file.  Those SKIP in a
# --disable-prof build; the jemalloc fixture, jemalloc's own dump (when
# libjemalloc.so.2 is installed) and the error messages run everywhere.
# jeprof's --text agrees on the top functions when jeprof is installed.
#
# pprof: the fixture converted by `malloc-prof pprof` and read back (gzip
# and raw protobuf), damaged gzip and protobuf inputs, and go.heap.pb.gz
# (a Go heap profile, made by go_heap.go) run everywhere; our dumps
# converted, the library's own pprof dumps (prof_format:pprof, with and
# without prof_symbolize) read against the heap_v2 tables, and
# `go tool pprof -top` on a converted dump (when go is installed) SKIP
# in a --disable-prof build.
#
# What the fuzz targets found (test/fuzz, doc/reliability.md): gzip data
# inflating to nothing, a sample type and a debug link with a newline, a
# function name starting with a NUL byte.
set -u

builddir=${top_builddir:-.}
srcdir=${srcdir:-.}
var=${MALLOC_PROF_CONF_ENV:-MALLOC_CONF}
mp=$builddir/bin/malloc-prof
cs=$builddir/test/bin/callsites
plain=$builddir/test/bin/callsites_plain
fixture=$srcdir/test/bin/jemalloc.heap
golden=$srcdir/test/bin/jemalloc.collapsed
gofx=$srcdir/test/bin/go.heap.pb.gz

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
# check DESCRIPTION COMMAND...: ok if the command succeeds.
check() {
	d=$1
	shift
	if "$@"; then ok "$d"; else fail "$d"; fi
}
# expect STATUS DESCRIPTION: ok if STATUS (of a compound test) is 0.
expect() { if [ "$1" = 0 ]; then ok "$2"; else fail "$2"; fi; }
# show FILE...: a failed check's evidence, as TAP comments.
show() { sed 's/^/# /' "$@" | head -n 40; }

ntests=83
echo "1..$ntests"
for f in "$mp" "$cs" "$plain"; do
	if [ ! -x "$f" ]; then
		echo "Bail out! $f is missing"
		exit 1
	fi
done
case $mp in /*) ;; *) mp=$(pwd)/$mp;; esac
case $cs in /*) ;; *) cs=$(pwd)/$cs;; esac
case $plain in /*) ;; *) plain=$(pwd)/$plain;; esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-tool.XXXXXX") || exit 99
if [ -z "${MP_KEEP_DUMPS-}" ]; then
	trap 'rm -rf "$tmp"' EXIT
else
	echo "# files kept in $tmp"
fi
unset MALLOC_CONF MP_MALLOC_CONF 2>/dev/null || :
# MALLOC_PROF_TOOL_WRAPPER (the memcheck build of scripts/test.sh): every
# malloc-prof run goes through it, e.g. valgrind memcheck with an error
# exit status of its own, so that a memory error or leak fails its check.
if [ -n "${MALLOC_PROF_TOOL_WRAPPER-}" ]; then
	printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$MALLOC_PROF_TOOL_WRAPPER" \
	    "$mp" >"$tmp/malloc-prof"
	chmod +x "$tmp/malloc-prof"
	mp=$tmp/malloc-prof
	echo "# malloc-prof runs under: $MALLOC_PROF_TOOL_WRAPPER"
fi

# flat FILE NAME, cum FILE NAME: the flat or cum column of NAME's row in
# top output FILE (names may hold spaces: --lines, C++).
row() {
	awk -v f="$2" -v c="$3" '{ n = $0
		sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ /, "", n)
		if (n == f) { print $c; exit } }' "$1"
}
flat() { row "$1" "$2" 1; }
cum() { row "$1" "$2" 4; }
total() { sed -n 's/^Total: \(-\{0,1\}[0-9]*\) .*/\1/p' "$1"; }

# ---- 1-3: the jemalloc-format fixture (hand-checked: 5: 240 at
# R = 2^19 scales by 1/(1 - e^(-48/R)) = 10923.17 to 2621560 bytes,
# 1: 112 by 4681.64 to 524344).  Its files do not exist: every frame is
# FILE+0xOFFSET, with one warning per file.
"$mp" collapsed "$fixture" >"$tmp/fx.col" 2>"$tmp/fx.err"
rc=$?
if [ "$rc" = 0 ] && cmp -s "$tmp/fx.col" "$golden"; then
	ok "fixture: collapsed matches the hand-checked golden output"
else
	fail "fixture: collapsed (status $rc) differs from $golden"
	show "$tmp/fx.col" "$tmp/fx.err"
fi
nw=$(grep -c '^malloc-prof: warning: cannot open "/nonexistent/mp-fixture/' "$tmp/fx.err")
nall=$(wc -l <"$tmp/fx.err")
if [ "$nw" = 3 ] && [ "$nall" = 3 ] &&
    [ "$(grep -c 'libjemalloc.so.2"' "$tmp/fx.err")" = 1 ]; then
	ok "fixture: one warning per missing file (3)"
else
	fail "fixture: $nw 'cannot open' warnings of $nall lines, want 3 of 3"
	show "$tmp/fx.err"
fi
"$mp" info "$fixture" >"$tmp/fx.info" 2>&1
if grep -q 'sample period 524288 bytes (lg_prof_sample 19)' "$tmp/fx.info" &&
    grep -q 'unbiased (jeprof.s scaling): 59297 objects, 3145904 bytes in use' "$tmp/fx.info" &&
    grep -q 't1: 1 objects, 112 bytes in use "worker"' "$tmp/fx.info" &&
    grep -q '/nonexistent/mp-fixture/app: not read: No such file or directory' "$tmp/fx.info"; then
	ok "fixture: info gives the period, unbiased totals, threads, files"
else
	fail "fixture: info"
	show "$tmp/fx.info"
fi

# --thread 1: the fixture's second stack only (its t1 line, 1: 112).
"$mp" collapsed --thread 1 "$fixture" >"$tmp/fx.t1" 2>/dev/null
check "fixture: collapsed --thread 1 is the t1 stack, 524344 bytes" \
    [ "$(cat "$tmp/fx.t1")" = "$(sed -n 2p "$golden")" ]

# ---- 4-8: errors and usage (exit status 2, one line naming the cause).
"$mp" top "$tmp/no-such.heap" >/dev/null 2>"$tmp/e1"
rc=$?
if [ "$rc" = 2 ] && [ "$(cat "$tmp/e1")" = "malloc-prof: cannot open \"$tmp/no-such.heap\": No such file or directory" ]; then
	ok "a missing profile: status 2, 'cannot open'"
else
	fail "a missing profile: status $rc"
	show "$tmp/e1"
fi
printf 'GIF89a garbage\n' >"$tmp/garbage.heap"
"$mp" top "$tmp/garbage.heap" >/dev/null 2>"$tmp/e2"
rc=$?
if [ "$rc" = 2 ] && grep -q '^malloc-prof: ".*garbage.heap" is not a heap profile' "$tmp/e2" &&
    [ "$(wc -l <"$tmp/e2")" = 1 ]; then
	ok "a garbage file: status 2, 'is not a heap profile'"
else
	fail "a garbage file: status $rc"
	show "$tmp/e2"
fi
# Cut in the middle of a stack line.
head -c 180 "$fixture" >"$tmp/trunc.heap"
"$mp" top "$tmp/trunc.heap" >/dev/null 2>"$tmp/e3"
rc=$?
if [ "$rc" = 2 ] && grep -q '^malloc-prof: ".*trunc.heap" is truncated at line 7' "$tmp/e3"; then
	ok "a truncated file: status 2, 'is truncated at line 7'"
else
	fail "a truncated file: status $rc"
	show "$tmp/e3"
fi
"$mp" >/dev/null 2>"$tmp/e4"
rc1=$?
"$mp" frobnicate x >/dev/null 2>>"$tmp/e4"
rc2=$?
"$mp" top --no-such-option "$fixture" >/dev/null 2>>"$tmp/e4"
rc3=$?
"$mp" leaks --max-bytes lots "$fixture" >/dev/null 2>>"$tmp/e4"
rc4=$?
if [ "$rc1$rc2$rc3$rc4" = 2222 ] && [ "$(grep -c 'usage: malloc-prof' "$tmp/e4")" = 4 ]; then
	ok "usage errors: status 2 and a usage line"
else
	fail "usage errors: statuses $rc1 $rc2 $rc3 $rc4"
	show "$tmp/e4"
fi
hb=0
for c in top diff collapsed flamegraph dot svg leaks info pprof; do
	"$mp" "$c" --help >"$tmp/help" 2>&1 && grep -q "^usage: malloc-prof $c" "$tmp/help" ||
	    hb=$((hb + 1))
done
check "--help on every command" [ "$hb" = 0 ]

# ---- 9-11: jemalloc's own dump of callsites_plain.
jelib=
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
	[ -f "$d/libjemalloc.so.2" ] && { jelib=$d/libjemalloc.so.2; break; }
done
jedump=
if [ -n "$jelib" ]; then
	LD_PRELOAD=$jelib MALLOC_CONF="prof:true,prof_final:true,lg_prof_sample:0,prof_prefix:$tmp/je" \
	    "$plain" >/dev/null 2>"$tmp/je.err"
	for f in "$tmp"/je.*.f.heap; do [ -f "$f" ] && jedump=$f; done
fi
if [ -z "$jelib" ]; then
	skip "jemalloc is not installed (Debian: apt-get install libjemalloc2)"
	skip "jemalloc is not installed"
	skip "jemalloc is not installed"
elif [ -z "$jedump" ]; then
	skip "this jemalloc ($jelib) wrote no profile (built without --enable-prof?)"
	skip "no jemalloc profile"
	skip "no jemalloc profile"
else
	"$mp" top "$jedump" >"$tmp/je.top" 2>"$tmp/je.top.err"
	rc=$?
	a=$(flat "$tmp/je.top" alloc_a); b=$(flat "$tmp/je.top" alloc_b)
	c=$(flat "$tmp/je.top" alloc_c); l=$(cum "$tmp/je.top" mp_cs_in_lib)
	if [ "$rc" = 0 ] && [ "$a/$b/$c/$l" = 102400/327680/65536/32768 ]; then
		ok "jemalloc dump: alloc_a/b/c flat, mp_cs_in_lib cum exact ($a/$b/$c/$l)"
	else
		fail "jemalloc dump: status $rc, got $a/$b/$c/$l, want 102400/327680/65536/32768"
		show "$tmp/je.top" "$tmp/je.top.err"
	fi
	# libjemalloc.so.2 is stripped: its internal frames must not show.
	if ! grep -q 'libjemalloc' "$tmp/je.top"; then
		ok "jemalloc dump: the allocator's own frames are dropped"
	else
		fail "jemalloc dump: allocator frames left in the table"
		show "$tmp/je.top"
	fi
	"$mp" collapsed "$jedump" >"$tmp/je.col" 2>/dev/null
	if grep -q ';main;middle;alloc_c 65536$' "$tmp/je.col"; then
		ok "jemalloc dump: collapsed stack ...;main;middle;alloc_c 65536"
	else
		fail "jemalloc dump: no ...;main;middle;alloc_c 65536 line"
		show "$tmp/je.col"
	fi
fi

# ---- pprof, fixture-based (every build)
# one_error STATUS ERRFILE FILE: status 2 and one line, "FILE": damaged...
one_error() {
	[ "$1" = 2 ] && [ "$(wc -l <"$2")" = 1 ] &&
	    grep -q "^malloc-prof: \"$3\": damaged" "$2"
}
# go_pprof FILE OUT: go tool pprof -top in bytes (when go is installed).
have_go=
command -v go >/dev/null 2>&1 && have_go=1
go_pprof() {
	GOCACHE=$tmp/gocache PPROF_TMPDIR=$tmp HOME=${HOME:-$tmp} \
	    go tool pprof -top -unit=B -sample_index=inuse_space \
	    -nodefraction=0 -symbolize=none "$1" >"$2" 2>&1
}
# The top row's function and the total of go tool pprof -top output.
go_top() { awk '$1 ~ /^[0-9]/ && $2 ~ /%$/ && $5 ~ /%$/ { print $6; exit }' "$1"; }
go_total() { sed -n 's/.* of \([0-9]*\)B total.*/\1/p' "$1"; }

"$mp" pprof -o "$tmp/fx.pb.gz" "$fixture" 2>/dev/null
rc=$?
"$mp" top "$fixture" >"$tmp/fx.top" 2>/dev/null
"$mp" top "$tmp/fx.pb.gz" >"$tmp/fxp.top" 2>"$tmp/fxp.err"
magic=$(head -c 2 "$tmp/fx.pb.gz" | od -An -tx1 | tr -d ' \n')
if [ "$rc" = 0 ] && [ "$magic" = 1f8b ] && [ -s "$tmp/fx.top" ] &&
    cmp -s "$tmp/fx.top" "$tmp/fxp.top"; then
	ok "pprof: the fixture converted (gzip) gives top's table back"
else
	fail "pprof: the fixture converted (status $rc, magic $magic) gives another table"
	show "$tmp/fx.top" "$tmp/fxp.top" "$tmp/fxp.err"
fi
if command -v gzip >/dev/null 2>&1; then
	gzip -dc "$tmp/fx.pb.gz" >"$tmp/fx.pb"
	"$mp" top "$tmp/fx.pb" >"$tmp/fxr.top" 2>/dev/null
	check "pprof: the same profile as raw protobuf (no gzip) reads the same" \
	    cmp -s "$tmp/fx.top" "$tmp/fxr.top"
else
	skip "gzip is not installed"
fi
"$mp" info "$tmp/fx.pb.gz" >"$tmp/fxp.info" 2>/dev/null
grep -q 'format: pprof (gzip), sample period 524288 bytes' "$tmp/fxp.info" &&
    grep -q 'sample types: inuse_objects/count inuse_space/bytes alloc_objects/count alloc_space/bytes' "$tmp/fxp.info"
expect $? "pprof: info gives the format, period and sample types"
# Damaged inputs: one line naming the file, status 2.
sz=$(wc -c <"$tmp/fx.pb.gz")
head -c $((sz / 2)) "$tmp/fx.pb.gz" >"$tmp/cut.pb.gz"
"$mp" top "$tmp/cut.pb.gz" >/dev/null 2>"$tmp/d1"
rc=$?
if one_error "$rc" "$tmp/d1" "$tmp/cut.pb.gz" &&
    grep -q 'damaged gzip data: .*truncated' "$tmp/d1"; then
	ok "pprof: a truncated gzip file: status 2, one line"
else
	fail "pprof: a truncated gzip file: status $rc"
	show "$tmp/d1"
fi
# A byte of the compressed data changed: a bad code or the CRC says so.
python3 -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[len(d) // 2] ^= 0x24
open(sys.argv[2], "wb").write(d)' "$tmp/fx.pb.gz" "$tmp/flip.pb.gz" 2>/dev/null
"$mp" top "$tmp/flip.pb.gz" >/dev/null 2>"$tmp/d2"
rc=$?
if one_error "$rc" "$tmp/d2" "$tmp/flip.pb.gz"; then
	ok "pprof: a corrupted gzip file: status 2, one line ($(sed 's/.*damaged //; s/;.*//' "$tmp/d2"))"
else
	fail "pprof: a corrupted gzip file: status $rc"
	show "$tmp/d2"
fi
if [ -s "$tmp/fx.pb" ]; then
	# Inside the last string ("space").
	head -c $(($(wc -c <"$tmp/fx.pb") - 3)) "$tmp/fx.pb" >"$tmp/cut.pb"
	"$mp" top "$tmp/cut.pb" >/dev/null 2>"$tmp/d3"
	rc=$?
	if one_error "$rc" "$tmp/d3" "$tmp/cut.pb" &&
	    grep -q 'damaged pprof profile' "$tmp/d3"; then
		ok "pprof: a cut protobuf: status 2, one line"
	else
		fail "pprof: a cut protobuf: status $rc"
		show "$tmp/d3"
	fi
else
	skip "gzip is not installed"
fi
# Found by the fuzz targets (doc/reliability.md, "Findings"; each input
# is also a seed in test/fuzz/seeds/pprof or heap_v2).  gzip members that
# inflate to nothing (an empty gzip file; a stored block of length 0):
# once undefined behaviour (arithmetic on the NULL output buffer), now
# the profile is damaged: no string table.
printf '\037\213\010\000\000\000\000\000\000\003\003\000\000\000\000\000\000\000\000\000' \
    >"$tmp/empty.pb.gz"
printf '\037\213\010\000\000\000\000\000\000\003\001\000\000\377\377\000\000\000\000\000\000\000\000' \
    >"$tmp/stored0.pb.gz"
"$mp" top "$tmp/empty.pb.gz" >/dev/null 2>"$tmp/d4"
rc1=$?
"$mp" top "$tmp/stored0.pb.gz" >/dev/null 2>"$tmp/d5"
rc2=$?
if one_error "$rc1" "$tmp/d4" "$tmp/empty.pb.gz" &&
    one_error "$rc2" "$tmp/d5" "$tmp/stored0.pb.gz" &&
    grep -q 'string table is missing' "$tmp/d4" &&
    grep -q 'string table is missing' "$tmp/d5"; then
	ok "pprof: gzip data inflating to nothing: status 2, one line"
else
	fail "pprof: gzip data inflating to nothing: status $rc1, $rc2"
	show "$tmp/d4" "$tmp/d5"
fi
# Sample types "a<newline>b/c", no heap type: the error quoted them and
# took two lines; control characters now show as '?'.
printf '\012\004\010\001\020\002\062\000\062\003a\012b\062\001c' \
    >"$tmp/nl.pb"
"$mp" top "$tmp/nl.pb" >/dev/null 2>"$tmp/d6"
rc=$?
if [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/d6")" = 1 ] &&
    grep -q 'without heap sample types (it has: a?b/c)' "$tmp/d6"; then
	ok "pprof: a sample type with a newline: status 2, one line"
else
	fail "pprof: a sample type with a newline: status $rc"
	show "$tmp/d6"
fi
# A function named "\0x": it printed as an empty name; now the frame is
# named by its address, as an unnamed one.
printf '\012\004\010\001\020\002\022\004\010\001\020\005\042\011\010\001\030\264\044\042\002\010\001\052\004\010\001\020\003\062\000\062\013inuse_space\062\005bytes\062\002\000x' \
    >"$tmp/nul.pb"
"$mp" collapsed "$tmp/nul.pb" >"$tmp/nul.col" 2>"$tmp/d7"
rc=$?
if [ "$rc" = 0 ] && [ "$(cat "$tmp/nul.col")" = "0x1234 5" ]; then
	ok "pprof: a function name starting with NUL: named by its address"
else
	fail "pprof: a function name starting with NUL: status $rc"
	show "$tmp/nul.col" "$tmp/d7"
fi
# Go's heap profile: named functions, its four sample types by name.
"$mp" top "$gofx" >"$tmp/go.top" 2>"$tmp/go.err"
rc=$?
first=$(awk '$2 ~ /%$/ { print $6; exit }' "$tmp/go.top")
if [ "$rc" = 0 ] && [ "$first" = main.allocBig ] &&
    [ "$(flat "$tmp/go.top" main.allocBig)" = 1048576 ] &&
    [ "$(flat "$tmp/go.top" main.allocSmall)" = 108544 ]; then
	ok "Go heap profile: main.allocBig's 64 x 16 KiB first, main.allocSmall"
else
	fail "Go heap profile: status $rc, first '$first'"
	show "$tmp/go.top" "$tmp/go.err"
fi
"$mp" top --inuse_objects "$gofx" >"$tmp/go.obj" 2>/dev/null
"$mp" top --alloc_space "$gofx" >"$tmp/go.alloc" 2>/dev/null
[ "$(flat "$tmp/go.obj" main.allocBig)" = 64 ] &&
    [ "$(total "$tmp/go.alloc")" -ge "$(total "$tmp/go.top")" ]
expect $? "Go heap profile: --inuse_objects and --alloc_space pick their types"
if [ -n "$have_go" ]; then
	go_pprof "$gofx" "$tmp/go.gp"
	if [ "$(go_top "$tmp/go.gp")" = main.allocBig ] &&
	    [ "$(go_total "$tmp/go.gp")" = "$(total "$tmp/go.top")" ]; then
		ok "go tool pprof agrees on the Go profile: main.allocBig, $(total "$tmp/go.top") B"
	else
		fail "go tool pprof on the Go profile: '$(go_top "$tmp/go.gp")', $(go_total "$tmp/go.gp") B"
		show "$tmp/go.gp"
	fi
else
	skip "go is not installed (Debian: apt-get install golang-go)"
fi

# ---- counts that cannot be real, and gzip bombs (every build)
# err_is STATUS ERRFILE PATTERN: status 2 and one line matching PATTERN.
err_is() {
	[ "$1" = 2 ] && [ "$(wc -l <"$2")" = 1 ] && grep -q "$3" "$2"
}
max=9223372036854775807
big=4611686018427387904		# 2^62, the largest count allowed
# one_stack FILE PC BYTES: a heap_v2 profile of one stack (1 object).
one_stack() {
	printf 'heap_v2/524288\n  t*: 1: %s [0: 0]\n@ 0x%x 0x2\n  t*: 1: %s [0: 0]\n' \
	    "$3" "$2" "$3" >"$1"
}
# The sums were signed 64-bit: 2^64 - 1 bytes printed "Total: -1 B" or
# worse, and exit status 0.
one_stack "$tmp/u64.heap" 1 18446744073709551615
"$mp" top "$tmp/u64.heap" >"$tmp/u64.top" 2>"$tmp/c1"
rc=$?
if err_is "$rc" "$tmp/c1" "^malloc-prof: \"$tmp/u64.heap\" line 2: 18446744073709551615 bytes in use cannot be real (more than 2^62): the profile is damaged" &&
    [ ! -s "$tmp/u64.top" ]; then
	ok "heap_v2: 18446744073709551615 bytes: status 2, one line naming line 2"
else
	fail "heap_v2: 18446744073709551615 bytes: status $rc"
	show "$tmp/c1" "$tmp/u64.top"
fi
printf 'heap_v2/524288\n  t*: 2: 100 [0: 0]\n@ 0x1 0x2\n  t*: 1: %s [0: 0]\n@ 0x3 0x2\n  t*: 1: %s [0: 0]\n' \
    "$max" "$max" >"$tmp/max2.heap"
"$mp" collapsed "$tmp/max2.heap" >/dev/null 2>"$tmp/c2"
rc=$?
if err_is "$rc" "$tmp/c2" "\"$tmp/max2.heap\" line 4: $max bytes in use cannot be real"; then
	ok "heap_v2: two stacks of 2^63 - 1 bytes: status 2, the first named"
else
	fail "heap_v2: two stacks of 2^63 - 1 bytes: status $rc"
	show "$tmp/c2"
fi
# Each stack within the bound, the two together not.
sed "s/$max/$big/g" "$tmp/max2.heap" >"$tmp/big2.heap"
"$mp" top "$tmp/big2.heap" >/dev/null 2>"$tmp/c3"
rc=$?
if err_is "$rc" "$tmp/c3" "\"$tmp/big2.heap\" line 6: the stacks up to this line hold more than 2^62 bytes in use, which cannot be real"; then
	ok "heap_v2: two stacks of 2^62 bytes: status 2, 'the stacks up to line 6'"
else
	fail "heap_v2: two stacks of 2^62 bytes: status $rc"
	show "$tmp/c3"
fi
# A diff of two profiles at the bound: +2^62 and -2^62 in every report;
# the sums (rows, cum, the flame graph's nodes, the edges) stay exact.
# Frame 0x2 is named 0x1 (a return address): the caller of both stacks,
# its cum adds up to 0 and it has no row.
one_stack "$tmp/bigA.heap" 0x10 "$big"
one_stack "$tmp/bigB.heap" 0x30 "$big"
"$mp" diff "$tmp/bigA.heap" "$tmp/bigB.heap" >"$tmp/bd.top" 2>"$tmp/bd.err"
rc=$?
if [ "$rc" = 0 ] && [ "$(total "$tmp/bd.top")" = 0 ] &&
    [ "$(flat "$tmp/bd.top" 0x30)" = "$big" ] &&
    [ "$(flat "$tmp/bd.top" 0x10)" = "-$big" ] &&
    [ "$(cum "$tmp/bd.top" 0x30)" = "$big" ] &&
    [ -z "$(cum "$tmp/bd.top" 0x1)" ]; then
	ok "diff of two profiles of 2^62 bytes: +2^62, -2^62, total 0"
else
	fail "diff of two profiles of 2^62 bytes: status $rc"
	show "$tmp/bd.top" "$tmp/bd.err"
fi
"$mp" collapsed --base "$tmp/bigA.heap" "$tmp/bigB.heap" >"$tmp/bd.col" 2>/dev/null
rc1=$?
"$mp" flamegraph --base "$tmp/bigA.heap" "$tmp/bigB.heap" >"$tmp/bd.svg" 2>/dev/null
rc2=$?
"$mp" leaks --base "$tmp/bigA.heap" "$tmp/bigB.heap" >"$tmp/bd.leaks" 2>/dev/null
rc3=$?
"$mp" dot --base "$tmp/bigA.heap" "$tmp/bigB.heap" >"$tmp/bd.dot" 2>/dev/null
rc4=$?
if [ "$rc1$rc2$rc3$rc4" = 0000 ] &&
    [ "$(sort "$tmp/bd.col" | tr '\n' ' ')" = "0x1;0x10 -$big 0x1;0x30 $big " ] &&
    [ "$(grep -c "data-w=\"$big\"" "$tmp/bd.svg")" = 3 ] &&
    grep -q '^0 bytes in use, within' "$tmp/bd.leaks" &&
    grep -q 'label="Total: 0 B' "$tmp/bd.dot"; then
	ok "... collapsed, flamegraph, leaks and dot of it: exact"
else
	fail "... collapsed, flamegraph, leaks and dot of it: statuses $rc1 $rc2 $rc3 $rc4"
	show "$tmp/bd.col" "$tmp/bd.leaks" "$tmp/bd.dot"
fi
# Two of them added up: 2^63, past int64.
"$mp" top "$tmp/bigA.heap" "$tmp/bigA.heap" >"$tmp/bs.top" 2>"$tmp/c4"
rc=$?
if err_is "$rc" "$tmp/c4" '^malloc-prof: the stacks of the profiles add up to more than 2^63 - 1 objects or bytes, which cannot be real' &&
    [ ! -s "$tmp/bs.top" ]; then
	ok "two profiles of 2^62 bytes added up: status 2, one line"
else
	fail "two profiles of 2^62 bytes added up: status $rc"
	show "$tmp/c4" "$tmp/bs.top"
fi

# mkpb FILE VALUE...: a pprof profile (inuse_space/bytes) of one sample
# per VALUE (int64), sample i at location i in function fi.
mkpb() {
	python3 - "$@" <<'PY'
import sys
def v(x):
    x &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = x & 0x7f
        x >>= 7
        if not x:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)
def f(n, p): return v(n << 3 | 2) + v(len(p)) + p
vals = [int(a) for a in sys.argv[2:]]
p = f(1, b"\x08\x01\x10\x02")
for i, x in enumerate(vals, 1):
    p += f(2, b"\x08" + v(i) + b"\x10" + v(x))
for i in range(1, len(vals) + 1):
    p += f(4, b"\x08" + v(i) + b"\x18" + v(0x1000 * i) + f(4, b"\x08" + v(i)))
    p += f(5, b"\x08" + v(i) + b"\x10" + v(2 + i))
for s in [b"", b"inuse_space", b"bytes"] + [b"f%d" % i for i in range(1, len(vals) + 1)]:
    p += f(6, s)
open(sys.argv[1], "wb").write(p)
PY
}
mkpb "$tmp/max.pb" 4096 "$max"
mkpb "$tmp/min.pb" -9223372036854775808
"$mp" top "$tmp/max.pb" >/dev/null 2>"$tmp/c5"
rc1=$?
"$mp" top "$tmp/min.pb" >/dev/null 2>"$tmp/c6"
rc2=$?
if one_error "$rc1" "$tmp/c5" "$tmp/max.pb" &&
    grep -q "damaged pprof profile: sample 1 has inuse_space $max, which cannot be real (more than 2^62)" "$tmp/c5" &&
    one_error "$rc2" "$tmp/c6" "$tmp/min.pb" &&
    grep -q 'sample 0 has inuse_space -9223372036854775808, which cannot be real' "$tmp/c6"; then
	ok "pprof: values 2^63 - 1 and -2^63: status 2, the sample named"
else
	fail "pprof: values 2^63 - 1 and -2^63: statuses $rc1 $rc2"
	show "$tmp/c5" "$tmp/c6"
fi
mkpb "$tmp/big2.pb" "$big" "-$big"
"$mp" top "$tmp/big2.pb" >/dev/null 2>"$tmp/c7"
rc=$?
if one_error "$rc" "$tmp/c7" "$tmp/big2.pb" &&
    grep -q 'its samples up to sample 1 add up to more than 2^62 inuse_space' "$tmp/c7"; then
	ok "pprof: samples of 2^62 and -2^62: status 2, 'add up'"
else
	fail "pprof: samples of 2^62 and -2^62: status $rc"
	show "$tmp/c7"
fi
# A diff profile's negative values are read as they are.
mkpb "$tmp/neg.pb" -4096 8192
"$mp" collapsed "$tmp/neg.pb" >"$tmp/neg.col" 2>"$tmp/neg.err"
rc=$?
if [ "$rc" = 0 ] && [ "$(sort "$tmp/neg.col" | tr '\n' ' ')" = "f1 -4096 f2 8192 " ]; then
	ok "pprof: negative values (a diff): read as they are"
else
	fail "pprof: negative values: status $rc"
	show "$tmp/neg.col" "$tmp/neg.err"
fi

# gzip bombs: 200 MiB of zeros from 200 KB.  The inflater stops after its
# first KiBs (not a profile) or past its first MiB (it inflates too
# fast); within a memory limit well below what inflating it all takes
# when the limit can be set (not under ASan or valgrind, which reserve
# more address space: there the messages alone show the early stop).
# bomb FILE PREFIX-HEX [string]: PREFIX then 200 MiB of zeros, gzipped;
# "string": the zeros are the bytes of a string field.
bomb() {
	python3 - "$@" <<'PY'
import sys, zlib
n = 200 << 20
prefix = bytes.fromhex(sys.argv[2])
if sys.argv[3:] == ["string"]:
    x, lv = n, bytearray()
    while x >= 0x80:
        lv.append(x & 0x7f | 0x80)
        x >>= 7
    prefix += b"\x32" + bytes(lv) + bytes([x])
z = zlib.compressobj(9, zlib.DEFLATED, 31)
zero = bytes(1 << 20)
with open(sys.argv[1], "wb") as f:
    f.write(z.compress(prefix))
    for _ in range(n >> 20):
        f.write(z.compress(zero))
    f.write(z.flush())
PY
}
limit=
(ulimit -v 131072 && "$mp" --help) >/dev/null 2>&1 && limit=131072
[ -n "$limit" ] || echo "# gzip bombs: no memory limit (the tool does not start within one)"
# inflate_top FILE ERRFILE: malloc-prof top FILE, within the limit.
inflate_top() {
	if [ -n "$limit" ]; then
		(ulimit -v "$limit" && exec "$mp" top "$1") >/dev/null 2>"$2"
	else
		"$mp" top "$1" >/dev/null 2>"$2"
	fi
}
bomb "$tmp/zeros.gz" ""
inflate_top "$tmp/zeros.gz" "$tmp/g1"
rc=$?
if err_is "$rc" "$tmp/g1" "^malloc-prof: \"$tmp/zeros.gz\" is gzip data but not a pprof profile: its first [0-9]* bytes inflated are not a profile (it starts with field 0 of wire type 0"; then
	ok "gzip bomb of zeros: stopped in its first KiBs, status 2"
else
	fail "gzip bomb of zeros: status $rc"
	show "$tmp/g1"
fi
bomb "$tmp/pzeros.gz" 0a0408011002
inflate_top "$tmp/pzeros.gz" "$tmp/g2"
rc=$?
if err_is "$rc" "$tmp/g2" "\"$tmp/pzeros.gz\" is gzip data but not a pprof profile: .*(after 1 fields, the profile has a field numbered 0)"; then
	ok "gzip bomb, a sample type then zeros: stopped in its first KiBs"
else
	fail "gzip bomb, a sample type then zeros: status $rc"
	show "$tmp/g2"
fi
bomb "$tmp/pstr.gz" 0a0408011002 string
inflate_top "$tmp/pstr.gz" "$tmp/g3"
rc=$?
if err_is "$rc" "$tmp/g3" "^malloc-prof: \"$tmp/pstr.gz\": refused: it inflates more than 250 times ([0-9]* bytes from [0-9]* of the file): a gzip bomb?"; then
	ok "gzip bomb inside a string field: stopped past its first MiB"
else
	fail "gzip bomb inside a string field: status $rc"
	show "$tmp/g3"
fi
python3 -c 'import gzip, sys; sys.stdout.buffer.write(gzip.compress(open(sys.argv[1], "rb").read()))' \
    "$fixture" >"$tmp/fx.heap.gz"
"$mp" top "$tmp/fx.heap.gz" >/dev/null 2>"$tmp/g4"
rc=$?
if err_is "$rc" "$tmp/g4" "\"$tmp/fx.heap.gz\" is gzip data but not a pprof profile: it inflates to a heap_v2 dump: gunzip it first"; then
	ok "a gzipped heap_v2 dump: status 2, 'gunzip it first'"
else
	fail "a gzipped heap_v2 dump: status $rc"
	show "$tmp/g4"
fi

# ---- our own dumps
have_prof=$("$cs" --config 2>/dev/null)
base=$tmp/base.heap
final=
if [ "$have_prof" = 1 ]; then
	env "$var=prof:true,prof_final:true,lg_prof_sample:0,prof_prefix:$tmp/cs" \
	    "$cs" "$base" >"$tmp/cs.out" 2>"$tmp/cs.err"
	rc=$?
	for f in "$tmp"/cs.*.f.heap; do [ -f "$f" ] && final=$f; done
fi
if [ "$have_prof" != 1 ]; then
	while [ "$n" -lt "$ntests" ]; do
		skip "built with --disable-prof: no dumps of our own"
	done
	exit 0
fi
if [ "$rc" = 0 ] && [ -s "$base" ] && [ -n "$final" ]; then
	ok "callsites wrote its two dumps"
else
	fail "callsites (status $rc) wrote no dumps"
	show "$tmp/cs.err"
fi

# 13-16: top
"$mp" top "$final" >"$tmp/top" 2>"$tmp/top.err"
rc=$?
a=$(flat "$tmp/top" alloc_a); b=$(flat "$tmp/top" alloc_b)
c=$(flat "$tmp/top" alloc_c); g=$(flat "$tmp/top" grow)
l=$(cum "$tmp/top" mp_cs_in_lib)
# The library's function allocates through cs_alloc (a pointer): cs_alloc
# is flat, mp_cs_in_lib cumulative.
if [ "$rc" = 0 ] && [ "$a/$b/$c/$g/$l" = 102400/327680/65536/40960/32768 ] &&
    [ "$(flat "$tmp/top" cs_alloc)" = 36864 ]; then
	ok "top: flat bytes of alloc_a/b/c, grow, cs_alloc; mp_cs_in_lib's cum"
else
	fail "top: status $rc, got $a/$b/$c/$g/$l"
	show "$tmp/top" "$tmp/top.err"
fi
order=$(awk '$6 ~ /^(alloc_[abc]|grow|cs_alloc)$/ { printf "%s ", $6 }' "$tmp/top")
check "top: rows in order of flat bytes ($order)" \
    [ "$order" = "alloc_b alloc_a alloc_c grow cs_alloc " ]
m=$(cum "$tmp/top" middle); mf=$(flat "$tmp/top" middle)
mc=$(cum "$tmp/top" main)
[ "$mf/$m" = 0/65536 ] && [ "${mc:-0}" -ge 569344 ]
expect $? "top: middle is 0 flat, 65536 cum; main's cum holds all five ($mc)"
# The percentages: alloc_b is 327680 / total.
t=$(total "$tmp/top")
pct=$(awk -v t="$t" 'BEGIN { printf "%.1f%%", 100 * 327680 / t }')
check "top: alloc_b's flat% is $pct of $t" \
    [ "$(awk '$6 == "alloc_b" { print $2 }' "$tmp/top")" = "$pct" ]

# 17: the stderr of a clean run is empty except for the system
# libraries' own warnings (stripped libc without debug symbols).
if ! grep -q 'callsites\|libmpcallee\|libmalloc_prof' "$tmp/top.err"; then
	ok "top: no warning about the test's own files"
else
	fail "top: warnings about the test's own files"
	show "$tmp/top.err"
fi

# 18-19: collapsed
"$mp" collapsed "$final" >"$tmp/col" 2>/dev/null
ct=$(awk '{ s += $NF } END { print s }' "$tmp/col")
check "collapsed: total $ct equals top's $t" [ "$ct" = "$t" ]
check "collapsed: root first, ...;main;middle;alloc_c 65536" \
    grep -q ';main;middle;alloc_c 65536$' "$tmp/col"
check "collapsed: the library's stack ...;main;mp_cs_in_lib;cs_alloc 32768" \
    grep -q ';main;mp_cs_in_lib;cs_alloc 32768$' "$tmp/col"

# 20-22: --inuse_objects, --focus, --ignore
"$mp" top --inuse_objects "$final" >"$tmp/obj" 2>/dev/null
check "top --inuse_objects: alloc_a 100, alloc_b 40 objects" \
    [ "$(flat "$tmp/obj" alloc_a)/$(flat "$tmp/obj" alloc_b)" = 100/40 ]
"$mp" top --focus '^middle$' "$final" >"$tmp/foc" 2>/dev/null
check "top --focus ^middle\$: total 65536, in alloc_c" \
    [ "$(total "$tmp/foc")/$(flat "$tmp/foc" alloc_c)" = 65536/65536 ]
"$mp" top --ignore 'alloc_[ab]' "$final" >"$tmp/ign" 2>/dev/null
[ "$(total "$tmp/ign")" = $((t - 430080)) ] && ! grep -q 'alloc_[ab]' "$tmp/ign"
expect $? "top --ignore 'alloc_[ab]': total drops by 430080"

# 23-26: leaks
"$mp" leaks "$final" >"$tmp/leaks" 2>/dev/null
rc=$?
[ "$rc" = 1 ] && [ "$(sed -n 3p "$tmp/leaks")" = "    alloc_b" ] &&
    grep -q '^327680 bytes in 40 objects' "$tmp/leaks"
expect $? "leaks: status 1 and alloc_b's stack first"
"$mp" leaks --max-bytes "$t" "$final" >/dev/null 2>&1
rc1=$?
"$mp" leaks --max-bytes $((t - 1)) "$final" >/dev/null 2>&1
rc2=$?
check "leaks --max-bytes: $t (the total) gives 0, one less gives 1" [ "$rc1/$rc2" = 0/1 ]
"$mp" leaks --base "$final" "$final" >"$tmp/noleak" 2>/dev/null
rc=$?
[ "$rc" = 0 ] && grep -q '^0 bytes in use' "$tmp/noleak"
expect $? "leaks --base with itself: nothing, status 0"
"$mp" leaks -n 1 "$final" >"$tmp/leak1" 2>/dev/null
check "leaks -n 1: one stack listed" [ "$(grep -c 'allocated at:' "$tmp/leak1")" = 1 ]

# 27-28: diff and --base: exactly grow's 40960 bytes.
"$mp" diff "$base" "$final" >"$tmp/diff" 2>/dev/null
rc=$?
if [ "$rc" = 0 ] && [ "$(total "$tmp/diff")" = 40960 ] &&
    [ "$(flat "$tmp/diff" grow)" = 40960 ] &&
    [ "$(awk '$1 != 0 { k++ } END { print k }' "$tmp/diff")" = 2 ]; then
	ok "diff BASE FINAL: only grow, 40960 bytes"
else
	fail "diff (status $rc)"
	show "$tmp/diff"
fi
"$mp" collapsed --base "$base" "$final" >"$tmp/bcol" 2>/dev/null
[ "$(wc -l <"$tmp/bcol")" = 1 ] && grep -q ';main;grow 40960$' "$tmp/bcol"
expect $? "collapsed --base: one stack, ending in grow 40960"

# 29-30: flame graph
"$mp" flamegraph -o "$tmp/flame.svg" "$final" 2>/dev/null
rc=$?
# Nodes: "all" plus one per distinct prefix of the collapsed stacks.
nodes=$(awk '{ $NF = ""; sub(/ $/, ""); k = split($0, f, ";"); p = "";
	for (i = 1; i <= k; i++) { p = p ";" f[i]; seen[p] = 1 } }
	END { n = 1; for (x in seen) n++; print n }' "$tmp/col")
rects=$(python3 - "$tmp/flame.svg" <<'EOF' 2>&1
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
frames = [g for g in root.iter(ns + "g") if g.get("id") == "frames"][0]
groups = list(frames)
rects = sum(len(g.findall(ns + "rect")) for g in groups)
assert rects == len(groups), "a frame group without exactly one rect"
print(rects)
EOF
)
[ "$rc" = 0 ] && [ -n "$rects" ] &&
    [ "$rects" -eq "$rects" ] 2>/dev/null
expect $? "flamegraph: well-formed XML (python3 xml.etree)"
check "flamegraph: one rect per frame node ($rects rects, $nodes nodes)" [ "$rects" = "$nodes" ]

# 31: dot, and svg with or without Graphviz.
"$mp" dot "$final" >"$tmp/graph.dot" 2>/dev/null
grep -q '^digraph' "$tmp/graph.dot" && grep -q 'label="alloc_b' "$tmp/graph.dot"
expect $? "dot: a digraph with alloc_b's node"
if command -v dot >/dev/null 2>&1; then
	"$mp" svg -o "$tmp/graph.svg" "$final" 2>"$tmp/svg.err"
	check "svg: dot -Tsvg wrote the graph" grep -q '<svg' "$tmp/graph.svg"
else
	"$mp" svg -o "$tmp/graph.svg" "$final" 2>"$tmp/svg.err"
	rc=$?
	[ "$rc" = 2 ] && grep -q 'cannot run "dot".*install graphviz' "$tmp/svg.err"
	expect $? "svg without Graphviz: status 2, says to install it"
fi

# 33: PIE and shared library: the program is position-independent when
# the toolchain makes it so (Debian does); the library's function was
# named in test 13 either way.
if command -v readelf >/dev/null 2>&1 &&
    readelf -h "$cs" 2>/dev/null | grep -q 'Type:.*DYN'; then
	check "PIE program and shared library named (alloc_a, mp_cs_in_lib)" \
	    [ "$a/$l" = 102400/32768 ]
else
	skip "the program is not a PIE here (or readelf is missing)"
fi

# 34-35: a stripped copy given as PROGRAM: FILE+0xADDR and one warning.
mkdir -p "$tmp/stripped"
cp "$cs" "$tmp/stripped/callsites"
if strip "$tmp/stripped/callsites" 2>/dev/null; then
	"$mp" top "$tmp/stripped/callsites" "$final" >"$tmp/st.top" 2>"$tmp/st.err"
	nw=$(grep -c "warning: \"$tmp/stripped/callsites\" has no symbol table" "$tmp/st.err")
	if grep -q '^ *65536 .* callsites+0x[0-9a-f]*$' "$tmp/st.top" &&
	    ! grep -q 'alloc_a' "$tmp/st.top" && [ "$nw" = 1 ] &&
	    [ "$(cum "$tmp/st.top" mp_cs_in_lib)" = 32768 ]; then
		ok "stripped program: callsites+0x..., one warning, library still named"
	else
		fail "stripped program ($nw warnings)"
		show "$tmp/st.top" "$tmp/st.err"
	fi
	# Its debug file, found by build ID under --debug-dir.
	id=$(readelf -n "$cs" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
	if [ -n "$id" ]; then
		d=$tmp/debug/.build-id/$(echo "$id" | cut -c1-2)
		mkdir -p "$d"
		objcopy --only-keep-debug "$cs" "$d/$(echo "$id" | cut -c3-).debug"
		"$mp" top --debug-dir "$tmp/debug" "$tmp/stripped/callsites" "$final" \
		    >"$tmp/dbg.top" 2>"$tmp/dbg.err"
		[ "$(flat "$tmp/dbg.top" alloc_a)" = 102400 ] &&
		    ! grep -q 'callsites' "$tmp/dbg.err"
		expect $? "stripped program + debug file by build ID: names back, no warning"
	else
		skip "the program has no build ID (linker without --build-id)"
	fi
	# A debug link with a newline in its name (found by the elf fuzz
	# target): the warning naming it took two lines; such a link is
	# damage now, not used, and the warning stays one line.
	mkdir -p "$tmp/stripped/nl"
	cp "$tmp/stripped/callsites" "$tmp/stripped/nl/callsites"
	printf 'a\nb.debug\000\000\000\000\000\000\000' >"$tmp/link.bin"
	if objcopy --add-section .gnu_debuglink="$tmp/link.bin" \
	    "$tmp/stripped/nl/callsites" 2>/dev/null; then
		"$mp" top "$tmp/stripped/nl/callsites" "$final" >/dev/null \
		    2>"$tmp/nl.err"
		if [ "$(grep -c 'has no symbol table' "$tmp/nl.err")" = 1 ] &&
		    ! grep -qv '^malloc-prof: ' "$tmp/nl.err"; then
			ok "a debug link with a newline: one warning, one line"
		else
			fail "a debug link with a newline: the warnings"
			show "$tmp/nl.err"
		fi
	else
		skip "objcopy cannot add a section"
	fi
else
	skip "strip is not installed"
	skip "strip is not installed"
	skip "strip is not installed"
fi

# 36: the library's file is gone: LIB+0xOFFSET and one warning.
libpath=$(sed -n 's|.* \(/.*libmpcallee[^ ]*\)$|\1|p' "$final" | head -n 1)
sed "s|$libpath|/nonexistent/libmpcallee.so|" "$final" >"$tmp/missing.heap"
"$mp" top "$tmp/missing.heap" >"$tmp/mi.top" 2>"$tmp/mi.err"
nw=$(grep -c 'warning: cannot open "/nonexistent/libmpcallee.so"' "$tmp/mi.err")
if [ -n "$libpath" ] && [ "$nw" = 1 ] &&
    awk '$4 == 32768 && $6 ~ /^libmpcallee.so\+0x[0-9a-f]+$/ { k++ } END { exit !k }' "$tmp/mi.top"; then
	ok "a missing library: libmpcallee.so+0x..., one warning"
else
	fail "a missing library ($nw warnings, path '$libpath')"
	show "$tmp/mi.top" "$tmp/mi.err"
fi
# 37: ... and a deleted one says so.
sed "s|$libpath\$|$libpath (deleted)|" "$final" >"$tmp/deleted.heap"
"$mp" top "$tmp/deleted.heap" >"$tmp/de.top" 2>"$tmp/de.err"
[ "$(grep -c 'was deleted or replaced' "$tmp/de.err")" = 1 ] &&
    grep -q 'libmpcallee.so+0x' "$tmp/de.top"
expect $? "a deleted library: the warning says it was deleted, once"

# --lines: DWARF 5 (the program) and DWARF 4 (the library) line tables.
"$mp" top --lines "$final" >"$tmp/lines" 2>"$tmp/lines.err"
la=$(grep -n 'keep_a\[i\] = malloc(1024)' "$srcdir/test/bin/callsites.c" | cut -d: -f1)
ll=$(grep -n 'keep\[i\] = alloc(2048)' "$srcdir/test/bin/callee.c" | cut -d: -f1)
if awk -v l="callsites.c:$la" '$1 == 102400 && $6 == "alloc_a" && $7 ~ ("/test/bin/" l "$") { k++ } END { exit !k }' "$tmp/lines"; then
	ok "--lines: alloc_a at test/bin/callsites.c:$la (DWARF 5)"
else
	fail "--lines: no 'alloc_a .../test/bin/callsites.c:$la' row"
	show "$tmp/lines" "$tmp/lines.err"
fi
dv=$(readelf --debug-dump=rawline "$(dirname "$cs")/.libs/libmpcallee.so" 2>/dev/null |
    sed -n 's/.*DWARF Version: *\([0-9]*\).*/\1/p' | sort -u | tr '\n' ' ')
if awk -v l="callee.c:$ll" '$4 == 32768 && $6 == "mp_cs_in_lib" && $7 ~ ("/test/bin/" l "$") { k++ } END { exit !k }' "$tmp/lines"; then
	ok "--lines: mp_cs_in_lib at test/bin/callee.c:$ll (DWARF versions: $dv)"
else
	fail "--lines: no 'mp_cs_in_lib .../test/bin/callee.c:$ll' row (DWARF versions: $dv)"
	show "$tmp/lines" "$tmp/lines.err"
fi
# C++ names: c++filt when installed, else as they are.
if command -v c++filt >/dev/null 2>&1; then
	want='mp::callee::keep()'
else
	want=_ZN2mp6callee4keepEv
fi
check "C++ name: $want (4096 bytes cumulative)" [ "$(cum "$tmp/top" "$want")" = 4096 ]

# No MAPPED_LIBRARIES: addresses are taken as PROGRAM's own (jeprof's
# rule for programs that are not position-independent).  A hand-made
# profile with frame 0 at 0x1 (named by nothing) and return addresses
# inside alloc_a and main names those two.
aa=$(nm "$cs" 2>/dev/null | awk '$3 == "alloc_a" { print $1 }')
am=$(nm "$cs" 2>/dev/null | awk '$3 == "main" { print $1 }')
if [ -n "$aa" ] && [ -n "$am" ]; then
	printf 'heap_v2/1\n  t*: 1: 64 [0: 0]\n@ 0x1 0x%x 0x%x\n  t*: 1: 64 [0: 0]\n' \
	    $((0x$aa + 9)) $((0x$am + 9)) >"$tmp/nomaps.heap"
	"$mp" collapsed "$cs" "$tmp/nomaps.heap" >"$tmp/nomaps.col" 2>/dev/null
	check "no memory map: addresses named from PROGRAM (main;alloc_a;0x1)" \
	    grep -q '^main;alloc_a;0x1 64$' "$tmp/nomaps.col"
else
	skip "nm is not installed"
fi

# A file replaced since the dump (another inode in the memory map): one
# warning, and the names still come from the file found.
awk -v lib="$libpath" '$NF == lib { $5 = $5 + 1 } { print }' "$final" >"$tmp/inode.heap"
"$mp" top "$tmp/inode.heap" >"$tmp/in.top" 2>"$tmp/in.err"
[ "$(grep -c 'libmpcallee.so" is not the file the program mapped (inode' "$tmp/in.err")" = 1 ] &&
    [ "$(cum "$tmp/in.top" mp_cs_in_lib)" = 32768 ]
expect $? "a replaced library (another inode): one warning, still named"

# 38: two profiles add up.
"$mp" top "$final" "$final" >"$tmp/two" 2>/dev/null
check "two profiles: totals add ($(total "$tmp/two") = 2 x $t)" [ "$(total "$tmp/two")" = $((2 * t)) ]

# 39-40: jeprof agrees on the top functions.
# (The same in a prefixed build, whose dumps start at the call into the
# allocator: see src/prof/prof_heap_v2.c.)
if command -v jeprof >/dev/null 2>&1; then
	jeprof --text --show_bytes "$cs" "$final" >"$tmp/jp" 2>"$tmp/jp.err"
	jtop=$(awk '$2 ~ /%$/ && $3 ~ /%$/ && $5 ~ /%$/ && $1 > 0 { printf "%s ", $6; if (++k == 3) exit }' "$tmp/jp")
	mtop=$(awk '$2 ~ /%$/ && $1 > 0 { printf "%s ", $6; if (++k == 3) exit }' "$tmp/top")
	if [ -n "$jtop" ] && [ "$jtop" = "$mtop" ]; then
		ok "jeprof --text agrees on the top three: $jtop"
	else
		fail "jeprof --text top three '$jtop', malloc-prof '$mtop'"
		show "$tmp/jp" "$tmp/jp.err"
	fi
	jb=$(awk '$6 == "alloc_b" { print $1; exit }' "$tmp/jp")
	check "jeprof and malloc-prof agree on alloc_b's bytes ($jb)" [ "$jb" = 327680 ]
else
	skip "jeprof is not installed (Debian: apt-get install libjemalloc-dev)"
	skip "jeprof is not installed"
fi

# ---- pprof on our dumps
# heap_v2 -> pprof -> top and collapsed: the same tables.
"$mp" pprof -o "$tmp/final.pb.gz" "$final" 2>/dev/null
rc=$?
"$mp" top "$tmp/final.pb.gz" >"$tmp/pp.top" 2>"$tmp/pp.err"
if [ "$rc" = 0 ] && cmp -s "$tmp/top" "$tmp/pp.top"; then
	ok "pprof: the dump converted gives top's table back"
else
	fail "pprof: the dump converted (status $rc) gives another table"
	show "$tmp/pp.top" "$tmp/pp.err"
fi
"$mp" collapsed "$tmp/final.pb.gz" >"$tmp/pp.col" 2>/dev/null
check "pprof: ... and collapsed's stacks" cmp -s "$tmp/col" "$tmp/pp.col"
"$mp" pprof --base "$base" -o "$tmp/growth.pb.gz" "$final" 2>/dev/null
"$mp" top "$tmp/growth.pb.gz" >"$tmp/ppg.top" 2>/dev/null
[ "$(total "$tmp/ppg.top")" = 40960 ] && [ "$(flat "$tmp/ppg.top" grow)" = 40960 ]
expect $? "pprof --base: the converted growth is grow's 40960 bytes"

# The library's own pprof dumps of the same program: the same tables as
# its heap_v2 dump (every allocation is sampled: the runs agree).
libf=
for sy in false true; do
	env "$var=prof:true,prof_final:true,lg_prof_sample:0,prof_format:pprof,prof_symbolize:$sy,prof_prefix:$tmp/lib$sy" \
	    "$cs" "$tmp/lib$sy.base.pb.gz" >/dev/null 2>"$tmp/lib$sy.err"
	lf=
	for f in "$tmp"/lib$sy.*.f.pb.gz; do [ -f "$f" ] && lf=$f; done
	[ "$sy" = false ] && libf=$lf
	"$mp" top "$lf" >"$tmp/lib$sy.top" 2>"$tmp/lib$sy.top.err"
	if [ -n "$lf" ] && cmp -s "$tmp/top" "$tmp/lib$sy.top"; then
		ok "library pprof dump (prof_symbolize:$sy): top's table as from heap_v2"
	else
		fail "library pprof dump (prof_symbolize:$sy): '$lf' gives another table"
		show "$tmp/lib$sy.top" "$tmp/lib$sy.top.err" "$tmp/lib$sy.err"
	fi
done
"$mp" diff "$tmp/libfalse.base.pb.gz" "$libf" >"$tmp/libd.top" 2>/dev/null
[ "$(total "$tmp/libd.top")" = 40960 ] && [ "$(flat "$tmp/libd.top" grow)" = 40960 ]
expect $? "library pprof dumps: diff BASE FINAL is grow's 40960 bytes"
"$mp" top --lines "$libf" >"$tmp/libl.top" 2>/dev/null
awk -v l="callsites.c:$la" '$1 == 102400 && $6 == "alloc_a" && $7 ~ ("/test/bin/" l "$") { k++ } END { exit !k }' "$tmp/libl.top"
expect $? "library pprof dump --lines: alloc_a at callsites.c:$la (addresses through its mappings)"
# Another build ID in its mapping than the program's: one warning, and
# the names still come from the file found.
id=$(readelf -n "$cs" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
if [ -n "$id" ] && [ -n "$libf" ]; then
	python3 -c '
import gzip, sys
d = gzip.open(sys.argv[1]).read().replace(sys.argv[2].encode(), b"0" * len(sys.argv[2]))
open(sys.argv[3], "wb").write(gzip.compress(d))' "$libf" "$id" "$tmp/otherid.pb.gz"
	"$mp" top "$tmp/otherid.pb.gz" >"$tmp/oid.top" 2>"$tmp/oid.err"
	[ "$(grep -c "callsites\" is not the file the program mapped (build ID 0* in the profile, $id now)" "$tmp/oid.err")" = 1 ] &&
	    [ "$(flat "$tmp/oid.top" alloc_a)" = 102400 ]
	expect $? "library pprof dump, another build ID in the mapping: one warning, still named"
else
	skip "the program has no build ID (or readelf is missing)"
fi

# go tool pprof reads the converted dump: the same top function and
# total, and the program's build ID in its mapping.
if [ -n "$have_go" ]; then
	go_pprof "$tmp/final.pb.gz" "$tmp/final.gp"
	gt=$(go_top "$tmp/final.gp"); gtot=$(go_total "$tmp/final.gp")
	if [ "$gt" = alloc_b ] && [ "$gtot" = "$t" ]; then
		ok "go tool pprof -top on the converted dump: $gt first, total $gtot B"
	else
		fail "go tool pprof -top: '$gt' first, total '$gtot' (want alloc_b, $t)"
		show "$tmp/final.gp"
	fi
	id=$(readelf -n "$cs" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
	if [ -z "$id" ]; then
		skip "the program has no build ID (or readelf is missing)"
	else
		check "go tool pprof: the program's mapping has its build ID $id" \
		    grep -q "^Build ID: $id" "$tmp/final.gp"
	fi
else
	skip "go is not installed (Debian: apt-get install golang-go)"
	skip "go is not installed"
fi
