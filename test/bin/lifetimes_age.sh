#!/bin/sh
# test/bin/lifetimes_age.sh: the live objects' ages of a lifetime profile
# in malloc-prof (TAP).
#
# test/bin/lifetimes_age (see its comment) runs with prof:true,
# lg_prof_sample:0,prof_time_resolution:high, so every count is exact: 30
# objects kept across a 1.1 s sleep, 20 allocated just before the dump.
# Nothing depends on the machine's speed: the program prints how old the
# new objects can be at most (young_ms); below 1000 exactly the 30 old
# ones are older than 1 s, else from 30 to 50.
#   1. malloc-prof temporary's summary: 50 live, 30 of them for more
#      than 1s;
#   2. top --alloc_objects --tag age: age=>1s has old_site's 30.
# Skipped in a --disable-prof build.
set -u

. "$(dirname "$0")/tap_prof.sh"
tap_prof_init lifetimes_age 2
life=$tmp/l.pb.gz
if ! env "$var=prof:true,lg_prof_sample:0,prof_time_resolution:high" \
    "$prog" "$life" >"$tmp/run.out" 2>&1; then
	show "$tmp/run.out"
	echo "Bail out! test/bin/lifetimes_age failed"
	exit 1
fi
young=$(sed -n 's/^young_ms=//p' "$tmp/run.out")
if [ -z "$young" ]; then
	show "$tmp/run.out"
	echo "Bail out! test/bin/lifetimes_age printed no young_ms"
	exit 1
fi
if [ "$young" -lt 1000 ]; then max_old=30; else max_old=50; fi

# 1. The summary counts the live objects and the old ones.
"$mp" temporary "$life" >"$tmp/t1" 2>&1
check "temporary: 50 live, 30 (<= $max_old) for more than 1s" "$tmp/t1" \
    awk -v max="$max_old" 'NR == 1 {
		if (match($0, /; [0-9]+ live, [0-9]+ of them for more than 1s$/)) {
			split(substr($0, RSTART + 2), w, " ")
			good = w[1] == 50 && w[3] >= 30 && w[3] <= max
		}
	}
	END { exit !good }' "$tmp/t1"

# 2. The age label groups like any other.
"$mp" top --alloc_objects --tag age "$life" >"$tmp/t2" 2>&1
check "top --alloc_objects --tag age: age=>1s 30 (<= $max_old)" "$tmp/t2" \
    awk -v max="$max_old" '$3 == "age=>1s" && $1 >= 30 && $1 <= max {
		good = 1 }
	END { exit !good }' "$tmp/t2"
