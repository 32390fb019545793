#!/bin/sh
# test/integration/real_programs.sh: real programs run with the library
# preloaded (LD_PRELOAD) give the same output as without it (TAP).
#
# Workloads: python3 (dicts, lists, strings, JSON round trip, threads), git
# (init, add, commit, log, fsck), gcc (compile a C file to assembly and to a
# program, run it), sort (200k lines, several threads, temporary files).
# A program that is not installed is skipped.  Only meaningful in the
# unprefixed build: a prefixed library does not replace malloc.
set -u

prefix=${MALLOC_PROF_PREFIX-}
builddir=${top_builddir:-.}
lib=$builddir/.libs/libmalloc_prof.so
case $lib in
/*) ;;
*) lib=$(pwd)/$lib;;
esac

# LD_PRELOAD of a sanitized library into uninstrumented programs fails.
if [ -n "${MALLOC_PROF_SANITIZER-}" ]; then
	echo "1..0 # SKIP sanitizer build ($MALLOC_PROF_SANITIZER): its runtime cannot be preloaded into real programs"
	exit 0
fi

if [ -n "$prefix" ]; then
	echo "1..0 # SKIP prefixed build ('$prefix'): the library does not replace malloc"
	exit 0
fi

echo "1..6"

if [ ! -f "$lib" ]; then
	for i in 1 2 3 4 5 6; do
		echo "not ok $i - $lib is missing"
	done
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-real.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
# The conf variable must not leak into the programs from the harness.
unset MALLOC_CONF MP_MALLOC_CONF 2>/dev/null || :

to=120
run_timeout() {
	if command -v timeout >/dev/null 2>&1; then
		timeout -k 5 "$to" "$@"
	else
		"$@"
	fi
}

# compare N NAME: compares $tmp/plain.{out,rc} with $tmp/preload.{out,rc}.
compare() {
	n=$1
	name=$2
	prc=$(cat "$tmp/plain.rc")
	lrc=$(cat "$tmp/preload.rc")
	if [ "$prc" != 0 ]; then
		echo "not ok $n - $name: fails even without the library (status $prc)"
		sed -n '1,20s/^/#   /p' "$tmp/plain.err"
	elif [ "$lrc" != 0 ]; then
		echo "not ok $n - $name: status $lrc with LD_PRELOAD (0 without)"
		sed -n '1,20s/^/#   /p' "$tmp/preload.err"
	elif ! cmp -s "$tmp/plain.out" "$tmp/preload.out"; then
		echo "not ok $n - $name: output differs with LD_PRELOAD"
		diff "$tmp/plain.out" "$tmp/preload.out" | sed -n '1,20s/^/#   /p'
	elif [ ! -s "$tmp/plain.out" ]; then
		echo "not ok $n - $name: no output"
	else
		echo "ok $n - $name: same output with and without LD_PRELOAD"
	fi
}

# run MODE CMD...: runs CMD plainly (MODE=plain) or preloaded (MODE=preload)
# with stdout to $tmp/MODE.out, stderr to $tmp/MODE.err, status in MODE.rc.
run() {
	mode=$1
	shift
	if [ "$mode" = preload ]; then
		LD_PRELOAD=$lib run_timeout "$@" >"$tmp/$mode.out" 2>"$tmp/$mode.err"
	else
		run_timeout "$@" >"$tmp/$mode.out" 2>"$tmp/$mode.err"
	fi
	echo $? >"$tmp/$mode.rc"
}

# ---------------------------------------------------------------- 1: loaded
maps=$(LD_PRELOAD=$lib cat /proc/self/maps 2>"$tmp/maps.err")
if echo "$maps" | grep -q 'libmalloc_prof'; then
	echo "ok 1 - LD_PRELOAD maps libmalloc_prof into a program"
else
	echo "not ok 1 - LD_PRELOAD did not map libmalloc_prof"
	sed 's/^/#   /' "$tmp/maps.err"
fi

# ---------------------------------------------------------------- 2: python3
if command -v python3 >/dev/null 2>&1; then
	cat >"$tmp/work.py" <<'EOF'
import collections, hashlib, json, random, threading

def work(seed, out):
    r = random.Random(seed)
    d = {}
    for i in range(20000):
        key = "k%d_%s" % (i, "x" * r.randrange(0, 60))
        d[key] = [r.random() for _ in range(r.randrange(0, 10))]
        if i % 7 == 0:
            d[key].append({"s": "y" * r.randrange(0, 300), "n": i})
    for i in range(0, 20000, 3):
        d.pop("k%d_" % i, None)
    text = json.dumps(d, sort_keys=True)
    back = json.loads(text)
    assert back == d
    words = collections.Counter(text[j:j + 3] for j in range(0, len(text), 5))
    lst = sorted(d.items(), key=lambda kv: (len(kv[1]), kv[0]))
    out[seed] = "%d %s %d %s" % (len(text), hashlib.sha256(text.encode()).hexdigest(),
                                 len(words), lst[len(lst) // 2][0])

out = {}
threads = [threading.Thread(target=work, args=(s, out)) for s in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for s in sorted(out):
    print(s, out[s])
big = ["%08d" % i * 3 for i in range(200000)]
print(len("".join(big)), hashlib.md5("|".join(reversed(big)).encode()).hexdigest())
EOF
	run plain python3 "$tmp/work.py"
	run preload python3 "$tmp/work.py"
	compare 2 "python3 dict/list/str/json with threads"
else
	echo "ok 2 # SKIP python3 not installed"
fi

# ---------------------------------------------------------------- 3: git
if command -v git >/dev/null 2>&1; then
	cat >"$tmp/git.sh" <<'EOF'
set -e
d=$1
rm -rf "$d"
mkdir -p "$d"
cd "$d"
export HOME="$d" GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z'
g() { git -c user.name=t -c user.email=t@t -c init.defaultBranch=main "$@"; }
g init -q .
i=0
while [ $i -lt 15 ]; do
	j=0
	while [ $j -lt 20 ]; do
		echo "file $j revision $i $(printf '%0200d' $((i * j)))" >"f$j.txt"
		j=$((j + 1))
	done
	mkdir -p "dir$((i % 3))"
	seq 1 $((i * 100 + 1)) >"dir$((i % 3))/seq$i"
	g add -A
	g commit -q -m "commit $i"
	i=$((i + 1))
done
g log --format='%H %T %s'
g log --stat --format=%s -3
g fsck --no-progress 2>&1
g gc -q 2>&1
g rev-list --all --objects | wc -l
EOF
	run plain sh "$tmp/git.sh" "$tmp/git-plain"
	run preload sh "$tmp/git.sh" "$tmp/git-preload"
	compare 3 "git init/add/commit/log/fsck/gc"
else
	echo "ok 3 # SKIP git not installed"
fi

# ---------------------------------------------------------------- 4: gcc
if command -v gcc >/dev/null 2>&1; then
	mkdir -p "$tmp/cc"
	cat >"$tmp/cc/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node { struct node *next; char name[40]; unsigned long v; };

static int cmp(const void *a, const void *b) {
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

int main(void) {
	struct node *head = NULL;
	unsigned long seed = 12345, sum = 0;
	for (int i = 0; i < 100000; i++) {
		struct node *n = malloc(sizeof(*n) + (size_t)(i % 97));
		if (n == NULL) return 1;
		seed = seed * 6364136223846793005ul + 1442695040888963407ul;
		n->v = seed >> 33;
		snprintf(n->name, sizeof(n->name), "node-%d", i);
		n->next = head;
		head = n;
	}
	unsigned long *arr = calloc(100000, sizeof(*arr));
	int k = 0;
	while (head != NULL) {
		struct node *n = head;
		head = n->next;
		arr[k++] = n->v;
		sum += strlen(n->name);
		free(n);
	}
	qsort(arr, (size_t)k, sizeof(*arr), cmp);
	arr = realloc(arr, 10 * sizeof(*arr));
	printf("%d %lu %lu %lu %lu\n", k, sum, arr[0], arr[5], arr[9]);
	free(arr);
	return 0;
}
EOF
	cat >"$tmp/cc.sh" <<'EOF'
set -e
cd "$1"
gcc -O2 -S -o - prog.c | grep -v '^[[:space:]]*\.ident'
gcc -O2 -Wall -o "prog-$2" prog.c
"./prog-$2"
EOF
	run plain sh "$tmp/cc.sh" "$tmp/cc" plain
	run preload sh "$tmp/cc.sh" "$tmp/cc" preload
	compare 4 "gcc compiles and runs a C program"
else
	echo "ok 4 # SKIP gcc not installed"
fi

# ---------------------------------------------------------------- 5: sort
if command -v sort >/dev/null 2>&1; then
	awk 'BEGIN {
		for (i = 1; i <= 200000; i++)
			printf "%d %s%d\n", (i * 7919) % 200003,
			    substr("qwertyuiopasdfghjklz", i % 20 + 1), i % 1000
	}' >"$tmp/lines"
	cat >"$tmp/sort.sh" <<'EOF'
set -e
export LC_ALL=C
sort -k1,1n -k2 "$1" | cksum
sort --parallel=2 -S 1M -T "$2" -k2 -k1,1nr "$1" | cksum
sort -u -t' ' -k2,2 "$1" | wc -l
EOF
	mkdir -p "$tmp/sorttmp"
	run plain sh "$tmp/sort.sh" "$tmp/lines" "$tmp/sorttmp"
	run preload sh "$tmp/sort.sh" "$tmp/lines" "$tmp/sorttmp"
	compare 5 "sort of 200k lines (threads, temporary files)"
else
	echo "ok 5 # SKIP sort not installed"
fi

# ---------------------------------------------------------------- 6: in use
# The preloaded allocator really serves the program: with stats_print:true
# it prints its statistics when the program exits.  (Not with coreutils:
# they close stderr in an atexit handler before the library's runs.)
if command -v python3 >/dev/null 2>&1; then
	LD_PRELOAD=$lib MALLOC_CONF=stats_print:true run_timeout python3 -c \
	    'print(sum(len(str(i)) for i in range(100000)))' \
	    >"$tmp/stats.out" 2>"$tmp/stats.err"
	rc=$?
	if [ "$rc" = 0 ] && grep -q '^488890$' "$tmp/stats.out" &&
	    grep -qi 'allocated' "$tmp/stats.err"; then
		echo "ok 6 - stats_print:true reports statistics at exit of a preloaded program"
	else
		echo "not ok 6 - no statistics at exit with MALLOC_CONF=stats_print:true (status $rc)"
		sed -n '1,10s/^/#   /p' "$tmp/stats.out" "$tmp/stats.err"
	fi
else
	echo "ok 6 # SKIP python3 not installed"
fi
exit 0
