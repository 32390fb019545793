#!/bin/sh
# scripts/soak.sh [SECONDS]: the soak run (default 600 s; not part of
# scripts/test.sh or CI).  Builds build/default (the same configuration
# scripts/test.sh uses) and its test/stress/soak, then runs it with the
# profiler on, sampling every 16 KiB on average and the scrape endpoint
# on a free port:
#   prof:true,prof_active:true,lg_prof_sample:14,prof_http:127.0.0.1:0
# 4 threads churn mixed sizes while, every second, the main thread stops
# them and checks stats.allocated against the live bytes they track
# (exactly), reads RSS and writes a dump it parses; a poller scrapes
# /debug/pprof/heap every 250 ms.  The last dump is then read by
# `malloc-prof top`.  doc/reliability.md ("Soak") has the details and the
# measured numbers.  The run is niced (nice -n 19; MP_SOAK_NICE=0 turns
# that off); MP_SOAK_THREADS sets the worker count (default 4).
# Output in build/soak/ (soak.log, the last dump soak.heap).  Ends with
# one line "soak: PASS ..." or "soak: FAIL: <reason>"; exit 0 iff PASS.
set -u
cd "$(dirname "$0")/.." || exit 1
. ./scripts/lib.sh

secs=${1:-600}
case $secs in
''|*[!0-9]*|0) mp_die "usage: sh scripts/soak.sh [SECONDS] (a positive number)";;
esac
threads=${MP_SOAK_THREADS:-4}
niceness=${MP_SOAK_NICE:-19}

fail() {
	echo "soak: FAIL: $*"
	exit 1
}

mp_install_deps build-essential autoconf automake libtool pkg-config \
    libcmocka-dev
mp_autogen || fail "autogen failed"
mp_configure default --prefix="$MP_ROOT/build/install" ||
    fail "configure failed (see build/default/config.log)"
mp_make default || fail "build failed"
mp_make default test/stress/soak || fail "test/stress/soak did not build"

bdir=$MP_ROOT/build/default
out=$MP_ROOT/build/soak
rm -rf "$out"
mkdir -p "$out" || fail "cannot create $out"
log=$out/soak.log

conf_env=$(sed -n 's/^#define MALLOC_PROF_CONF_ENV "\(.*\)"$/\1/p' \
    "$bdir/include/malloc_prof.h")
[ -n "$conf_env" ] || conf_env=MALLOC_CONF
conf=prof:true,prof_active:true,lg_prof_sample:14,prof_http:127.0.0.1:0

mp_log "test/stress/soak: $secs s, $threads threads, nice -n $niceness, $conf_env=$conf"
start=$(date +%s)
env "$conf_env=$conf" nice -n "$niceness" "$bdir/test/stress/soak" \
    -t "$secs" -j "$threads" -o "$out" >"$log" 2>&1 &
pid=$!
# Progress lines as they come (the log keeps everything).
tail -n +1 -f "$log" --pid="$pid" 2>/dev/null || wait "$pid"
wait "$pid"
status=$?
end=$(date +%s)
mp_log "test/stress/soak exited with status $status after $((end - start)) s"

reason=
if [ "$status" -ne 0 ]; then
	reason=$(sed -n 's/^soak: FAIL: //p' "$log" | tail -n 1)
	[ -n "$reason" ] || reason="test/stress/soak exited with status $status"
elif ! grep -q '^soak: PASS$' "$log"; then
	reason="test/stress/soak printed no PASS line"
fi

# The last dump through the analysis tool: it must read it and name the
# top stacks.
if [ -z "$reason" ]; then
	if [ ! -s "$out/soak.heap" ]; then
		reason="no dump left in $out/soak.heap"
	elif ! "$bdir/bin/malloc-prof" top "$out/soak.heap" >"$out/top.txt" \
	    2>"$out/top.err"; then
		reason="malloc-prof top $out/soak.heap failed: $(head -n 1 "$out/top.err")"
	elif ! grep -q 'worker_main' "$out/top.txt"; then
		reason="malloc-prof top: no worker_main frame in the last dump"
	else
		mp_log "malloc-prof top build/soak/soak.heap (first lines):"
		head -n 8 "$out/top.txt"
	fi
fi

if [ -n "$reason" ]; then
	echo "soak: FAIL: $reason"
	exit 1
fi
ops=$(sed -n 's/^soak: ran [0-9.]* s, [0-9]* worker threads, \([0-9]*\) operations.*/\1/p' "$log")
checks=$(sed -n 's/^soak: \([0-9]*\) checks at quiescent points.*/\1/p' "$log")
dumps=$(sed -n 's/^soak: \([0-9]*\) dumps written and parsed.*/\1/p' "$log")
scrapes=$(sed -n 's/^soak: \([0-9]*\) scrapes of.*/\1/p' "$log")
rss=$(sed -n 's/^soak: RSS at start .*, at [0-9]* s (warm-up) \([0-9.]*\) MiB, max after it \([0-9.]*\) MiB.*/\1 -> max \2 MiB/p' "$log")
echo "soak: PASS: $secs s, $threads threads, $ops operations, $checks exact stats.allocated checks, $dumps dumps parsed, $scrapes scrapes, RSS $rss"
