# test/bin/tap_prof.sh: the prelude the TAP scripts of test/bin share
# (sourced, not run).  tap_prof_init NAME NTESTS sets:
#   builddir, var (this build's MALLOC_CONF variable), mp (malloc-prof,
#   through MALLOC_PROF_TOOL_WRAPPER when set, e.g. valgrind memcheck with
#   an error exit status), prog (test/bin/NAME, an absolute path), tmp (a
#   directory removed at exit);
# prints the plan, bails out when mp or prog is missing, skips every test
# in a --disable-prof build (prog --config prints 1 when the profiler is
# built), and unsets the MALLOC_CONF variables so each run sets its own.
# ok, fail, skip, show and check print the TAP lines.

n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
show() { sed 's/^/# /' "$@" | head -n 30; }
# check DESCRIPTION FILE COMMAND...: ok if the command succeeds, else the
# file is shown.
check() {
	d=$1
	f=$2
	shift 2
	if "$@"; then ok "$d"; else fail "$d"; show "$f"; fi
}

tap_prof_init() {
	builddir=${top_builddir:-.}
	var=${MALLOC_PROF_CONF_ENV:-MALLOC_CONF}
	mp=$builddir/bin/malloc-prof
	prog=$builddir/test/bin/$1
	case $prog in
	/*) ;;
	*) prog=$(pwd)/$prog;;
	esac
	ntests=$2
	echo "1..$ntests"
	for f in "$mp" "$prog"; do
		if [ ! -x "$f" ]; then
			echo "Bail out! $f is missing"
			exit 1
		fi
	done
	if [ "$("$prog" --config)" != 1 ]; then
		while [ "$n" -lt "$ntests" ]; do
			skip "built with --disable-prof"
		done
		exit 0
	fi
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/mp-$1.XXXXXX") || exit 99
	trap 'rm -rf "$tmp"' EXIT
	if [ -n "${MALLOC_PROF_TOOL_WRAPPER-}" ]; then
		case $mp in /*) ;; *) mp=$(pwd)/$mp;; esac
		printf '#!/bin/sh\nexec %s "%s" "$@"\n' \
		    "$MALLOC_PROF_TOOL_WRAPPER" "$mp" >"$tmp/malloc-prof"
		chmod +x "$tmp/malloc-prof"
		mp=$tmp/malloc-prof
	fi
	unset MALLOC_CONF MP_MALLOC_CONF 2>/dev/null || :
}
