#!/bin/sh
# bench/cxx.sh: C++'s operator new and sized delete against the peers.
# Builds libmalloc_prof in build/bench (the default configuration, shared
# with bench/run.sh) and bench/cxx_sized.cpp with -fsized-deallocation,
# then, with each allocator preloaded (ours, jemalloc, tcmalloc, mimalloc;
# glibc: none):
#   - the larson-style C++ server simulation (bench/cxx_sized.cpp says
#     what it does), REPS rounds of every allocator in a rotated order so
#     that the load of a shared machine falls on all alike: median wall
#     time and peak RSS, and ours against the best of jemalloc, tcmalloc
#     and mimalloc (the issue's target: <= 1.0);
#   - under callgrind (instruction counts do not depend on the load): the
#     larson workload at a small scale, and the instructions per pair of
#     operator new(64) + operator delete(p, 64), malloc(64) +
#     free_sized(p, 64) and malloc(64) + free(p): the difference of two
#     iteration counts, minus the empty loop's (as bench/run.py's micro).
# Usage: bench/cxx.sh [REPS (5)] [SCALE (1)] [CALLGRIND_SCALE (0.05)];
# NO_CALLGRIND=1 skips callgrind.  The report (Markdown) goes to standard
# output.  Not part of CI: a run takes a few minutes on 2 cores.
set -u
cd "$(dirname "$0")/.." || exit 1
. ./scripts/lib.sh

reps=${1:-5}
scale=${2:-1}
cg_scale=${3:-0.05}

# The report is standard output: the build's chatter goes to stderr.
{
	mp_install_deps build-essential autoconf automake libtool pkg-config \
	    valgrind libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 bc
	mp_autogen || mp_die "autogen failed"
	mp_configure bench ||
	    mp_die "configure failed (see build/bench/config.log)"
	mp_make bench libmalloc_prof.la >/dev/null ||
	    mp_die "building the library failed"
} >&2
out=build/bench/bench
mkdir -p "$out" || exit 1
c++ -O2 -g -std=c++17 -fsized-deallocation -fno-omit-frame-pointer \
    -pthread -Wall -Wextra -o "$out/cxx_sized" bench/cxx_sized.cpp -ldl ||
    mp_die "building bench/cxx_sized.cpp failed"
prog=$MP_ROOT/$out/cxx_sized

libdir=/usr/lib/x86_64-linux-gnu
names="ours jemalloc tcmalloc mimalloc glibc"
lib_of() {
	case $1 in
	ours) echo "$MP_ROOT/build/bench/.libs/libmalloc_prof.so";;
	jemalloc) echo "$libdir/libjemalloc.so.2";;
	tcmalloc) echo "$libdir/libtcmalloc_minimal.so.4";;
	mimalloc) echo "$libdir/libmimalloc.so.2";;
	glibc) echo "";;
	esac
}
for n in $names; do
	l=$(lib_of "$n")
	[ -z "$l" ] || [ -f "$l" ] || mp_die "$n: $l is missing"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-cxx.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# median FILE: the median of the numbers in FILE, one a line.
median() {
	sort -g "$1" | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2];
		else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---- larson, interleaved
checksum=
rep=0
while [ "$rep" -lt "$reps" ]; do
	# Rotate the order by one allocator per round.
	order=$(echo $names | awk -v r="$rep" '{
		for (i = 0; i < NF; i++) printf "%s ", $(((i + r) % NF) + 1) }')
	for n in $order; do
		line=$(LD_PRELOAD=$(lib_of "$n") "$prog" larson "$scale") ||
		    mp_die "$n: larson failed"
		cs=$(echo "$line" | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
		if [ -z "$checksum" ]; then
			checksum=$cs
		elif [ "$cs" != "$checksum" ]; then
			mp_die "$n: checksum $cs, others $checksum"
		fi
		echo "$line" | sed -n 's/.*time=\([0-9.]*\).*/\1/p' \
		    >>"$tmp/time.$n"
		echo "$line" | sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' \
		    >>"$tmp/rss.$n"
		printf '\rlarson round %d/%d %-9s %s   ' $((rep + 1)) "$reps" \
		    "$n" "$(echo "$line" | sed 's/.*time=/time=/')" >&2
	done
	rep=$((rep + 1))
done
printf '\n' >&2

echo "## C++ larson with sized delete (bench/cxx_sized.cpp)"
echo
echo "$(uname -srm), $(nproc) CPUs, load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg); medians of $reps interleaved runs" \
    "at scale $scale."
echo
echo "| allocator | time (s) | peak RSS (MiB) | time / ours |"
echo "| --- | ---: | ---: | ---: |"
t_ours=$(median "$tmp/time.ours")
for n in $names; do
	t=$(median "$tmp/time.$n")
	r=$(median "$tmp/rss.$n")
	printf '| %s | %.3f | %.1f | %.2f |\n' "$n" "$t" \
	    "$(echo "$r / 1024" | bc -l)" "$(echo "$t / $t_ours" | bc -l)"
done
best=
best_name=
for n in jemalloc tcmalloc mimalloc; do
	t=$(median "$tmp/time.$n")
	if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then
		best=$t
		best_name=$n
	fi
done
echo
printf 'ours / best peer (%s): **%.2f** (target <= 1.0)\n' "$best_name" \
    "$(echo "$t_ours / $best" | bc -l)"

[ "${NO_CALLGRIND:-0}" = 1 ] && exit 0

# ---- callgrind
# cg NAME ARGS...: total instructions of the program under allocator NAME.
cg() {
	cg_name=$1
	shift
	LD_PRELOAD=$(lib_of "$cg_name") valgrind --tool=callgrind \
	    --callgrind-out-file="$tmp/cg.out" "$prog" "$@" \
	    >/dev/null 2>"$tmp/cg.err" || { echo "-"; return; }
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg.err"
}
n1=100000
n2=1100000
e1=$(cg glibc micro_empty $n1)
e2=$(cg glibc micro_empty $n2)
loop=$(echo "($e2 - $e1) / ($n2 - $n1)" | bc -l)
echo
echo "## Instructions (callgrind)"
echo
echo "Per pair: (count at $n2 iterations - count at $n1) / $((n2 - n1))," \
    "minus the empty loop ($(printf '%.1f' "$loop") per iteration)." \
    "larson at scale $cg_scale: the whole program."
echo
echo "| allocator | new(64) + delete(p, 64) | malloc + free_sized |" \
    "malloc + free | larson total |"
echo "| --- | ---: | ---: | ---: | ---: |"
for n in $names; do
	row="| $n"
	for m in micro_new micro_free_sized micro_free; do
		a=$(cg "$n" $m $n1)
		b=$(cg "$n" $m $n2)
		if [ "$a" = - ] || [ "$b" = - ]; then
			row="$row | —"
		else
			row="$row | $(printf '%.1f' "$(echo "($b - $a) / \
			    ($n2 - $n1) - $loop" | bc -l)")"
		fi
	done
	row="$row | $(cg "$n" larson "$cg_scale")"
	echo "$row |"
done
