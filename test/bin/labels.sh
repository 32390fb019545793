#!/bin/sh
# test/bin/labels.sh: thread.prof.label's labels in the readers of the
# profile (TAP).
#
# test/bin/labels (see its comment) runs with prof:true,lg_prof_sample:0,
# so every count is exact: thread "alpha" keeps 81920 bytes at
# labels_site under tenant=alpha (40960 of them also under phase=two),
# thread "beta" 40960 under tenant=beta, from the same stack; main 40960
# unlabeled.  It writes a pprof dump and a heap_v2 dump of one moment.
#   1-5. malloc-prof on the pprof dump: top --tag tenant lists the groups
#        (alpha first, with its bytes), --tag KEY=VALUE filters (tenant,
#        phase), collapsed --tag puts the root frame tenant=alpha above
#        the stack, --thread N reads the thread_id label;
#   6-7. on the heap_v2 dump: --tag thread_name groups by its tN lines
#        exactly as the pprof dump's labels do; --tag tenant warns (no
#        such label there) and groups everything under tenant=(none);
#   8.   bad --tag values and --tag with info are usage errors;
#   9.   go tool pprof -tags shows tenant: alpha 80kB, beta 40kB (go
#        installed);
#   10.  jeprof --text reads the heap_v2 dump (the label sets of one
#        thread summed into one line) with malloc-prof's total (jeprof
#        installed);
#   11.  malloc-prof pprof keeps the labels: top --tag tenant of its
#        output is that of the dump.
# Skipped in a --disable-prof build.
set -u

. "$(dirname "$0")/tap_prof.sh"
tap_prof_init labels 11
pb=$tmp/l.pb.gz
heap=$tmp/l.heap
if ! env "$var=prof:true,lg_prof_sample:0" "$prog" "$pb" "$heap" \
    >"$tmp/run.out" 2>&1; then
	show "$tmp/run.out"
	echo "Bail out! test/bin/labels failed"
	exit 1
fi

# 1. Grouped: the groups by bytes, alpha's and beta's exact.
"$mp" top --tag tenant "$pb" >"$tmp/t1" 2>&1
check "top --tag tenant: alpha 81920 first, beta 40960" "$tmp/t1" \
    awk 'NR == 1 && !/by label tenant/ { bad = 1 }
	NR == 2 && !($1 == 81920 && $3 == "tenant=alpha") { bad = 1 }
	$3 == "tenant=beta" && $1 == 40960 { beta = 1 }
	$3 == "tenant=(none)" { none = 1 }
	END { exit bad || !beta || !none }' "$tmp/t1"

# 2. Filtered by a label's value.
"$mp" top --tag tenant=beta "$pb" >"$tmp/t2" 2>&1
check "top --tag tenant=beta: Total: 40960 B at labels_site" "$tmp/t2" \
    awk 'NR == 1 && $2 != 40960 { bad = 1 }
	NR == 2 && $6 != "labels_site" { bad = 1 }
	END { exit bad || NR < 2 }' "$tmp/t2"

# 3. One thread's second label set alone.
"$mp" top --tag phase=two "$pb" >"$tmp/t3" 2>&1
check "top --tag phase=two: Total: 40960 B" "$tmp/t3" \
    grep -qx "Total: 40960 B" "$tmp/t3"

# 4. A root frame per group in the other reports.
"$mp" collapsed --tag tenant "$pb" >"$tmp/t4" 2>&1
check "collapsed --tag tenant: tenant=alpha;...;worker;labels_site 81920" \
    "$tmp/t4" grep -q "^tenant=alpha;.*;worker;labels_site 81920\$" "$tmp/t4"

# 5. --thread N through the thread_id label: alpha's uid from the
# heap_v2 dump's header (its thread line named alpha).
uid=$(sed -n 's/^  t\([0-9]*\): .* alpha$/\1/p' "$heap")
"$mp" top --thread "$uid" "$pb" >"$tmp/t5" 2>&1
check "top --thread $uid (alpha) on pprof: Total: 81920 B" "$tmp/t5" \
    grep -qx "Total: 81920 B" "$tmp/t5"

# 6. heap_v2: thread_name from the tN lines, as the pprof labels say.
"$mp" top --tag thread_name "$pb" >"$tmp/t6p" 2>&1
"$mp" top --tag thread_name "$heap" >"$tmp/t6h" 2>&1
check "top --tag thread_name: heap_v2 and pprof agree" "$tmp/t6h" \
    cmp -s "$tmp/t6p" "$tmp/t6h"

# 7. heap_v2 has no other labels: one warning, everything under (none).
"$mp" top --tag tenant "$heap" >"$tmp/t7" 2>"$tmp/t7.err"
check "top --tag tenant on heap_v2: a warning, all under tenant=(none)" \
    "$tmp/t7.err" awk -v err="$tmp/t7.err" '
	NR == 2 && $2 == "100.0%" && $3 == "tenant=(none)" { row = 1 }
	END { while ((getline l < err) > 0) {
		nerr++
		if (l ~ /^malloc-prof: .*heap_v2 dump.*--tag tenant/) w = 1 }
	      exit !(row && NR == 2 && nerr == 1 && w) }' "$tmp/t7"

# 8. Usage errors.
st=0
"$mp" top --tag "" "$pb" >/dev/null 2>&1; [ $? = 2 ] || st=1
"$mp" top --tag "a=1,b=2" "$pb" >/dev/null 2>&1; [ $? = 2 ] || st=1
"$mp" info --tag tenant "$pb" >/dev/null 2>&1; [ $? = 2 ] || st=1
if [ $st = 0 ]; then ok "bad --tag: exit status 2"; else fail "bad --tag"; fi

# 9. go tool pprof -tags.
if ! command -v go >/dev/null 2>&1; then
	skip "go is not installed (Debian: apt-get install golang-go)"
else
	GOCACHE=$tmp/gocache PPROF_TMPDIR=$tmp HOME=${HOME:-$tmp} \
	    go tool pprof -tags "$pb" >"$tmp/t9" 2>&1
	check "go tool pprof -tags: tenant alpha 80kB, beta 40kB" "$tmp/t9" \
	    awk '/^ *tenant: Total 120.0kB/ { t = 1 }
		t && /80.0kB .*: alpha$/ { a = 1 }
		t && /40.0kB .*: beta$/ { b = 1 }
		END { exit !(a && b) }' "$tmp/t9"
fi

# 10. jeprof reads the heap_v2 dump.
if ! command -v jeprof >/dev/null 2>&1; then
	skip "jeprof is not installed (Debian: apt-get install libjemalloc-dev)"
else
	jeprof --text --show_bytes "$prog" "$heap" >"$tmp/t10" 2>&1
	total=$("$mp" top "$heap" 2>/dev/null | sed -n '1s/^Total: \([0-9]*\) B$/\1/p')
	check "jeprof --text: Total: $total B, labels_site first" "$tmp/t10" \
	    awk -v total="$total" '/^Total:/ { t = ($2 == total) }
		/labels_site$/ && !seen { seen = 1; first = (NR == 4) }
		END { exit !(t && first) }' "$tmp/t10"
fi

# 11. The pprof command writes the samples' labels back.
"$mp" pprof -o "$tmp/conv.pb.gz" "$pb" >"$tmp/t11.err" 2>&1 &&
    "$mp" top --tag tenant "$tmp/conv.pb.gz" >"$tmp/t11" 2>&1
check "malloc-prof pprof keeps the labels (top --tag tenant agrees)" \
    "$tmp/t11" cmp -s "$tmp/t1" "$tmp/t11"
