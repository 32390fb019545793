#!/bin/sh
# test/bin/lifetimes.sh: the lifetime profile in the readers of profiles
# (TAP).
#
# test/bin/lifetimes (see its comment) runs with prof:true,
# lg_prof_sample:0, so every count is exact: short_site allocates and
# frees 4000 objects, long_site keeps 40.  Nothing depends on the
# machine's speed: a free "at once" may take more than 10 ms on a loaded
# machine, so counts are checked with --within 1s, and the order alone
# (short_site is the only site that frees anything) at the default.
#   1. malloc-prof temporary lists short_site first, long_site nowhere;
#   2. --within 1s: short_site has >= 90% of its 4000 allocations, 100%
#      of the site;
#   3. a heap profile is refused: exit 2, "is not a lifetime profile";
#   4. bad --within, two profiles, --tag: exit 2;
#   5. top --alloc_objects --tag lifetime: lifetime=live has long_site's
#      40 objects;
#   6. go tool pprof -tags shows the lifetime label with its 40 live
#      (go installed).
# Skipped in a --disable-prof build.
set -u

. "$(dirname "$0")/tap_prof.sh"
tap_prof_init lifetimes 6
life=$tmp/l.pb.gz
heap=$tmp/h.pb.gz
if ! env "$var=prof:true,lg_prof_sample:0" "$prog" "$life" "$heap" \
    >"$tmp/run.out" 2>&1; then
	show "$tmp/run.out"
	echo "Bail out! test/bin/lifetimes failed"
	exit 1
fi

# 1. The churning site first; the keeping one freed nothing.
"$mp" temporary "$life" >"$tmp/t1" 2>&1
check "temporary: short_site first, long_site not listed" "$tmp/t1" \
    awk 'NR == 2 && $1 != "temporary" { bad = 1 }
	NR == 3 { first = ($6 == "short_site") }
	/long_site/ { bad = 1 }
	END { exit bad || !first }' "$tmp/t1"

# 2. Counts within 1 s: robust on a loaded machine.
"$mp" temporary --within 1s "$life" >"$tmp/t2" 2>&1
check "temporary --within 1s: short_site >= 3600 of 4000, 100.0% of it" \
    "$tmp/t2" awk 'NR == 3 && $6 == "short_site" && $1 >= 3600 &&
	$2 == "100.0%" && $4 == 4000 { good = 1 }
	END { exit !good }' "$tmp/t2"

# 3. Another kind of profile: said so.
"$mp" temporary "$heap" >"$tmp/t3" 2>&1
st=$?
check "temporary on a heap profile: exit 2, not a lifetime profile" \
    "$tmp/t3" sh -c "[ $st = 2 ] && grep -q 'is not a lifetime profile' \
    '$tmp/t3'"

# 4. Usage errors.
st=0
"$mp" temporary --within 5ms "$life" >/dev/null 2>&1; [ $? = 2 ] || st=1
"$mp" temporary "$life" "$life" >/dev/null 2>&1; [ $? = 2 ] || st=1
"$mp" temporary --tag lifetime "$life" >/dev/null 2>&1; [ $? = 2 ] || st=1
"$mp" top --within 1ms "$life" >/dev/null 2>&1; [ $? = 2 ] || st=1
if [ $st = 0 ]; then ok "bad options: exit status 2"; else
	fail "bad options"; fi

# 5. The profile is an allocation profile split by the label lifetime.
"$mp" top --alloc_objects --tag lifetime "$life" >"$tmp/t5" 2>&1
check "top --alloc_objects --tag lifetime: lifetime=live 40" "$tmp/t5" \
    awk '$3 == "lifetime=live" && $1 == 40 { good = 1 }
	END { exit !good }' "$tmp/t5"

# 6. go tool pprof -tags.
if ! command -v go >/dev/null 2>&1; then
	skip "go is not installed (Debian: apt-get install golang-go)"
else
	GOCACHE=$tmp/gocache PPROF_TMPDIR=$tmp HOME=${HOME:-$tmp} \
	    go tool pprof -tags "$life" >"$tmp/t6" 2>&1
	check "go tool pprof -tags: lifetime with 40 live, lifetime_mean" \
	    "$tmp/t6" awk '/^ *lifetime: Total 4040/ { t = 1 }
		t && /40\.0 .*: live$/ { live = 1 }
		/^ *lifetime_mean:/ { mean = 1 }
		END { exit !(live && mean) }' "$tmp/t6"
fi
