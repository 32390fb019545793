#!/bin/sh
# test/run.sh TEST [ARGS...]: start one test for the automake harness
# (LOG_COMPILER / SH_LOG_COMPILER); its stdout is read as TAP.
#
# - If $srcdir/<TEST without .sh>.conf exists (test/unit/conf.conf for
#   test/unit/conf), its first line is exported as the value of the variable
#   named by $MALLOC_PROF_CONF_ENV (MALLOC_CONF, or MP_MALLOC_CONF in a
#   --with-prefix=mp_ build).  $MALLOC_PROF_EXTRA_CONF, if set, is
#   appended to it (scripts/test.sh reruns the profiler's tests with
#   prof_unwind:cfi that way); tests without a .conf are left alone.
# - *.sh tests run with sh; anything else is executed directly (programs
#   linked with the shared library are libtool wrapper scripts).
# - cmocka exits with the number of failed tests; when the TAP output
#   already holds a "not ok" line that status is not reported a second time.
#   Any other non-zero status (crash, abort, ...) ends the TAP stream with
#   "Bail out!", which the TAP driver counts as exactly one ERROR.  A
#   missing or incomplete plan is an ERROR too.
# - A test running longer than $MALLOC_PROF_TEST_TIMEOUT seconds (default
#   900, 0 = no limit) gets SIGALRM, which the C tests' hang detector
#   (test_util.h, mp_alarm_arm) turns into a dump of every thread's state
#   before it exits, then SIGKILL 10 s later; it is reported as an ERROR.
set -u

if [ $# -lt 1 ]; then
	echo "usage: $0 TEST [ARGS...]" >&2
	exit 99
fi
t=$1
shift

# ---- options file
base=${t%.sh}
src=${srcdir:-.}
conf=
if [ -f "$src/$base.conf" ]; then
	conf=$src/$base.conf
elif [ -f "$base.conf" ]; then
	conf=$base.conf
fi
if [ -n "$conf" ]; then
	var=${MALLOC_PROF_CONF_ENV:-MALLOC_CONF}
	case $var in
	''|[!A-Za-z_]*|*[!A-Za-z0-9_]*)
		echo "Bail out! bad MALLOC_PROF_CONF_ENV '$var'"
		exit 99;;
	esac
	value=
	IFS= read -r value <"$conf" || :
	if [ -n "${MALLOC_PROF_EXTRA_CONF-}" ]; then
		value=$value${value:+,}$MALLOC_PROF_EXTRA_CONF
	fi
	eval "$var=\$value"
	# shellcheck disable=SC2163
	export "$var"
	echo "# $var=$value (from $conf)" >&2
fi

# ---- command
case $t in
*/*) ;;
*) t=./$t;;
esac
case $t in
*.sh) set -- sh "$t" "$@";;
*) set -- "$t" "$@";;
esac
limit=${MALLOC_PROF_TEST_TIMEOUT:-900}
if [ "$limit" != 0 ] && command -v timeout >/dev/null 2>&1; then
	set -- timeout -s ALRM -k 10 "$limit" "$@"
fi

out=$(mktemp "${TMPDIR:-/tmp}/mp-test-out.XXXXXX") || exit 99
st=$(mktemp "${TMPDIR:-/tmp}/mp-test-status.XXXXXX") || exit 99
trap 'rm -f "$out" "$st"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

{ "$@"; echo $? >"$st"; } | tee "$out"

status=$(cat "$st")
case $status in
''|*[!0-9]*) status=99;;
esac
[ "$status" -eq 0 ] && exit 0
if [ "$status" -lt 128 ] && [ "$status" -ne 124 ] &&
    grep -q '^1\.\.[0-9]' "$out" && grep -q '^not ok' "$out"; then
	# cmocka's count of failed tests: already in the TAP stream.
	echo "# $t: exit status $status (failures reported above)" >&2
	exit 0
fi
# Anything else (crash, abort, timeout, failure outside a test case) is one
# ERROR: "Bail out!" makes the driver report it once, ignoring the
# incomplete plan and the exit status.
if [ "$status" -eq 124 ] && [ "$limit" != 0 ]; then
	why="killed after ${limit}s (MALLOC_PROF_TEST_TIMEOUT)"
elif [ "$status" -gt 128 ]; then
	why="terminated by signal $((status - 128))"
else
	why="exited with status $status"
fi
echo "Bail out! $t $why"
exit "$status"
