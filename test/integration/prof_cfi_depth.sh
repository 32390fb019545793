#!/bin/sh
# test/integration/prof_cfi_depth.sh: how deep the stacks of a real
# program built without frame pointers are, against jemalloc's (TAP).
#
# Debian's /usr/bin/python3 (built with -fomit-frame-pointer: a frame
# pointer walk gives about one frame) runs a small JSON and regex
# workload with this library preloaded, and again with Debian's jemalloc
# preloaded if installed (libjemalloc-dev), both with
#   prof:true,lg_prof_sample:12
# (our default prof_unwind, auto).  Each writes a heap_v2 dump at the end
# of the script, with its data live (mallctl("prof.dump") through
# ctypes: about 120-140 stacks each).
# The depth of a stack is the number of its addresses outside the
# allocator's own mapping (our frame 0 is the entry point in the
# library; jemalloc records four of its own frames: neither is the
# program's).  The byte-weighted means over the live stacks of each dump
# are printed (program frames and raw: every address on the '@' line).
# Checked: ours is at least 5 (a frame pointer walk gives about 2), and
# at least 0.95 x jemalloc's over all stacks (ours 17.6-17.8 program
# frames, jemalloc's 16.9-17.3 in three runs each: the margin is for the
# sampling, which picks different objects in the two runs).  The means
# over the call sites both sampled (same first three program frames) are
# printed: they came out equal to within 0.01 frames, on either side, so
# they cannot be asserted without flaking.  PYTHONMALLOC=malloc: objects
# come from malloc, not from arenas python maps itself.  Only in the
# unprefixed, unsanitized build with the profiler: elsewhere the library
# cannot replace python's malloc.
set -u

prefix=${MALLOC_PROF_PREFIX-}
builddir=${top_builddir:-.}
lib=$builddir/.libs/libmalloc_prof.so
case $lib in
/*) ;;
*) lib=$(pwd)/$lib;;
esac
py=/usr/bin/python3
je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2

if [ -n "${MALLOC_PROF_SANITIZER-}" ]; then
	echo "1..0 # SKIP sanitizer build ($MALLOC_PROF_SANITIZER): its runtime cannot be preloaded into python3"
	exit 0
fi
if [ -n "$prefix" ]; then
	echo "1..0 # SKIP prefixed build ('$prefix'): the library does not replace malloc"
	exit 0
fi
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP $py is not installed (Debian: apt-get install python3)"
	exit 0
fi
if [ ! -f "$lib" ]; then
	echo "Bail out! $lib is missing"
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-depth.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
# The harness's options must not reach python3; nor may a user's
# PYTHON* settings change what it runs.
unset MALLOC_CONF MP_MALLOC_CONF PYTHONPATH PYTHONHOME PYTHONSTARTUP \
    PYTHONMALLOC 2>/dev/null || :
# Every object from malloc (not from pymalloc's arenas, which it maps
# itself): thousands of sampled stacks instead of a few arenas'.
PYTHONMALLOC=malloc
export PYTHONMALLOC

to=120
run_timeout() {
	if command -v timeout >/dev/null 2>&1; then
		timeout -k 5 "$to" "$@"
	else
		"$@"
	fi
}

# Built with --disable-prof: config.prof is false.
cfg=$(run_timeout env LD_PRELOAD="$lib" "$py" -I -c '
import ctypes
v = ctypes.c_bool(False)
n = ctypes.c_size_t(1)
libc = ctypes.CDLL(None)
r = libc.mallctl(b"config.prof", ctypes.byref(v), ctypes.byref(n), None, 0)
print(1 if r == 0 and v.value else 0)' 2>/dev/null)
if [ "$cfg" != 1 ]; then
	echo "1..0 # SKIP built with --disable-prof (or mallctl unreachable: '$cfg')"
	exit 0
fi

if [ -f "$je" ]; then
	echo "1..3"
else
	echo "1..2"
fi

cat >"$tmp/work.py" <<'PY'
import json, re
data = [{"id": i, "name": "item%d" % i, "tags": ["t%d" % (i % 7),
         "x" * (i % 13)], "v": i * 1.5} for i in range(20000)]
s = json.dumps(data)
back = json.loads(s)
ids = [int(m.group(1)) for m in re.finditer(r'"name": "item(\d+)"', s)]
words = re.findall(r'[a-z]+\d*', s)
assert back == data and ids == list(range(20000))
# The profile while all of it is live (at exit little is: a few stacks
# would decide the means), through the mallctl both allocators export.
import ctypes, os
name = ctypes.c_char_p(os.environ["MP_DEPTH_DUMP"].encode())
r = ctypes.CDLL(None).mallctl(b"prof.dump", None, None, ctypes.byref(name),
    ctypes.c_size_t(ctypes.sizeof(name)))
print(len(s), len(words), r)
PY

# stacks FILE PATTERN: one line per live stack of a heap_v2 dump, "BYTES
# PROGRAM-DEPTH RAW-DEPTH KEY": addresses inside mappings whose path
# matches PATTERN (the allocator) are not the program's; KEY names the
# first three program frames as file+offset, the same in both runs.
stacks() {
	"$py" -I - "$1" "$2" <<'PY'
import re, sys
path, pat = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
maps = []
if "MAPPED_LIBRARIES:" in lines:
    for l in lines[lines.index("MAPPED_LIBRARIES:") + 1:]:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \S+\s+(\S+)",
            l)
        if m:
            maps.append((int(m.group(1), 16), int(m.group(2), 16),
                int(m.group(3), 16), m.group(4)))
def where(a):
    for lo, hi, off, f in maps:
        if lo <= a < hi:
            return f, a - lo + off
    return None, a
for i, l in enumerate(lines):
    if not l.startswith("@") or i + 1 >= len(lines):
        continue
    t = lines[i + 1].split()
    if len(t) < 3 or t[0] != "t*:" or int(t[2]) == 0:
        continue
    addrs = [int(a, 16) for a in l.split()[1:]]
    prog = [where(a) for a in addrs]
    prog = [(f, o) for f, o in prog if f is None or not re.search(pat, f)]
    key = ",".join("%s+%x" % (f.split("/")[-1] if f else "?", o)
        for f, o in prog[:3])
    print(t[2], len(prog), len(addrs), key or "-")
PY
}

# mean FILE: "PROGRAM RAW STACKS", byte-weighted means of a stacks list.
mean() {
	awk '{ b += $1; p += $1 * $2; r += $1 * $3; n++ }
	END { if (b > 0) printf "%.2f %.2f %d\n", p / b, r / b, n;
	else print "0 0 0" }' "$1"
}

# run N NAME PRELOAD PREFIX PATTERN: python3 under PRELOAD; sets $got to
# "program-depth raw-depth stacks", empty on failure.
run() {
	got=
	dump=$tmp/$4.heap
	out=$(run_timeout env LD_PRELOAD="$3" MP_DEPTH_DUMP="$dump" \
	    MALLOC_CONF="prof:true,lg_prof_sample:12" \
	    "$py" -I "$tmp/work.py" 2>"$tmp/$4.err")
	rc=$?
	if [ "$rc" != 0 ] || [ "$out" != "1490351 138461 0" ] ||
	    [ ! -s "$dump" ]
	then
		echo "not ok $1 - $2: python3 status $rc, output '$out', dump '$dump'"
		sed 's/^/# /' "$tmp/$4.err" | head -n 20
		return
	fi
	stacks "$dump" "$5" >"$tmp/$4.stacks"
	got=$(mean "$tmp/$4.stacks")
	# shellcheck disable=SC2086
	set -- "$1" "$2" $got
	if [ "$5" = 0 ]; then
		echo "not ok $1 - $2: no live stack in $dump"
		got=
		return
	fi
	echo "ok $1 - $2: mean depth $3 program frames ($4 with the allocator's), $5 stacks"
}

run 1 "python3 under libmalloc_prof" "$lib" mp 'libmalloc_prof'
ours=$got
theirs=
if [ -f "$je" ]; then
	run 2 "python3 under jemalloc" "$je" jp 'libjemalloc'
	theirs=$got
	n=3
else
	n=2
fi

# The comparison: ours over all stacks at least 5, and at least 0.95 x
# jemalloc's (see the top).
o=${ours%% *}
if [ -z "$ours" ]; then
	echo "not ok $n - no depth of our own to compare"
	exit 0
fi
if ! awk -v o="$o" 'BEGIN { exit !(o + 0 >= 5) }'; then
	echo "not ok $n - our mean depth $o < 5"
	exit 0
fi
if [ ! -f "$je" ]; then
	echo "ok $n - our mean depth $o >= 5 (jemalloc not installed)"
	exit 0
fi
if [ -z "$theirs" ]; then
	echo "not ok $n - no jemalloc depth to compare with ours ($o)"
	exit 0
fi
# "OURS THEIRS SITES" over the common sites (printed).
common=$(awk 'FNR == 1 { f++ }
	f == 1 { ob[$4] += $1; od[$4] += $1 * $2 }
	f == 2 { tb[$4] += $1; td[$4] += $1 * $2 }
	END {
		for (k in ob) if (k in tb) {
			n++; b += ob[k] + tb[k]
			o += od[k] / ob[k] * (ob[k] + tb[k])
			t += td[k] / tb[k] * (ob[k] + tb[k])
		}
		if (n > 0) printf "%.2f %.2f %d\n", o / b, t / b, n
	}' "$tmp/mp.stacks" "$tmp/jp.stacks")
t=${theirs%% *}
echo "# all stacks: ours ${ours% *} (program frames, raw), jemalloc's ${theirs% *}; common sites (ours, jemalloc's, sites): ${common:-none}"
if awk -v o="$o" -v t="$t" 'BEGIN { exit !(o + 0 >= 0.95 * t) }'; then
	echo "ok $n - our mean depth $o >= 0.95 x jemalloc's $t"
else
	echo "not ok $n - our mean depth $o < 0.95 x jemalloc's $t"
fi
exit 0
