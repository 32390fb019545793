#!/bin/sh
# scripts/test.sh: build and run `make check` in out-of-tree builds
# (build/default, build/prefix with --with-prefix=mp_, build/noprof with
# --disable-prof, build/debug with --enable-debug: assertions, junk
# filling and lock-order checks; build/asan: --with-prefix=mp_ with
# AddressSanitizer + UndefinedBehaviorSanitizer, every test; build/tsan:
# --with-prefix=mp_ with ThreadSanitizer, the multi-threaded tests), run
# the libFuzzer targets for MP_FUZZ_SECONDS (default 20) each, then print
# one last line "N passed, N failed".  doc/reliability.md has more.
# passed = sum of # PASS; failed = sum of # FAIL + # ERROR + # XPASS, plus 1
# for each build that did not configure or compile.  Exit 0 iff failed = 0.
# Idempotent; as root on a fresh Debian 12 it installs what is missing.
set -u
cd "$(dirname "$0")/.." || exit 1
. ./scripts/lib.sh

mp_install_deps build-essential autoconf automake libtool pkg-config \
    libcmocka-dev python3 git binutils
# jeprof (with perl) for test/integration/prof_jeprof.sh, which skips
# without it.
mp_try_install_deps libjemalloc-dev
# ld.lld for test/bin/cfi_chain.sh's case of a program whose segments lie
# apart (Rust's linker's layout), which skips without it.
mp_try_install_deps lld
# go tool pprof for test/integration/prof_pprof_fd, which skips without it
# (apt-get install golang-go takes about 10 s).
mp_try_install_deps golang-go

# The tests a build/tsan runs (make check TESTS=...): those with several
# threads, among them the prof_* tests that count samples per call site in
# threads (libtsan's thread start keeps no frame pointer, so a thread's
# stacks would end in a garbage frame: the profiler's walk stops at a
# return address outside executable text), and those of the .eh_frame
# walk (prof_cfi*: a thread, dlopen/dlclose racing samplers, a signal
# handler that allocates).  Left out: prof_accum (too slow under TSan).
tsan_tests="test/unit/base test/unit/pagemap test/unit/tcache
test/unit/prof_dump test/unit/tcache_trim test/integration/mallctl
test/integration/prof_fork
test/integration/prof_mdump test/integration/background_thread
test/integration/prof_threads test/integration/prof_active
test/integration/prof_http
test/integration/prof_reset test/integration/prof_pprof
test/integration/prof_nofp test/integration/prof_callsite
test/integration/prof_cfi test/integration/prof_cfi_dlopen
test/integration/prof_cfi_signal test/integration/tcache_explicit
test/integration/prof_recent test/integration/prof_peak
test/integration/prof_label test/integration/prof_http_delta
test/integration/prof_lifetime test/integration/prof_lifetime_age
test/integration/extent_hooks test/integration/xthread_rss
test/stress/prof_getattr
test/stress/threads test/stress/fork test/stress/first_op
test/stress/fork_storm test/stress/thread_churn"

# The profiler's tests that check stacks, run a second time in
# build/default with prof_unwind:cfi appended to their options (test/run.sh
# appends $MALLOC_PROF_EXTRA_CONF to a test's .conf line): every stack
# they expect from frame pointers must come out of .eh_frame too.  Left
# out: prof_nofp (its prof_unwind:fp is the point: it checks that the
# frame pointer walk follows chains of fake frames exactly and stops at
# bad ones, which .eh_frame would walk past), prof_leak and prof_jeprof.sh
# (no .conf: they set their children's options themselves), prof_cfi*
# (prof_unwind:cfi already), and the tests of dump files and failures,
# which check no stack.
cfi_tests="test/integration/prof_accum test/integration/prof_accuracy
test/integration/prof_active test/integration/prof_callsite
test/integration/prof_fork test/integration/prof_gdump
test/integration/prof_idump test/integration/prof_mdump
test/integration/prof_pprof test/integration/prof_pprof_fd
test/integration/prof_reset test/integration/prof_threads
test/integration/prof_http test/unit/prof_stack_depth"

total_pass=0
total_fail=0
report=

# count NAME FIELD [LOG]: the automake counter "# FIELD: n" of build/NAME
# (its test-suite.log, or LOG there).
count() {
	sed -n "s/^# $2: *\([0-9][0-9]*\)\$/\1/p" \
	    "$MP_ROOT/build/$1/${3:-test-suite.log}" | head -n 1
}

# run_build NAME [CONFIGURE-ARGS...]: make check runs $check_tests if set,
# else every test.
check_tests=
run_build() {
	name=$1
	dir=$MP_ROOT/build/$name
	if ! mp_configure "$@"; then
		mp_log "build/$name: CONFIGURE FAILED (see build/$name/config.log)"
		total_fail=$((total_fail + 1))
		report="$report
build/$name: configure failed"
		return
	fi
	if ! mp_make "$name"; then
		mp_log "build/$name: BUILD FAILED"
		total_fail=$((total_fail + 1))
		report="$report
build/$name: build failed"
		return
	fi
	rm -f "$dir/test-suite.log"
	if [ -n "$check_tests" ]; then
		# shellcheck disable=SC2086
		mp_make "$name" check TESTS="$(echo $check_tests)"
	else
		mp_make "$name" check
	fi
	if [ ! -f "$dir/test-suite.log" ]; then
		mp_log "build/$name: make check did not run the tests (test programs failed to build?)"
		total_fail=$((total_fail + 1))
		report="$report
build/$name: make check failed before running tests"
		return
	fi
	pass=$(count "$name" PASS)
	fail=$(count "$name" FAIL)
	error=$(count "$name" ERROR)
	xpass=$(count "$name" XPASS)
	bad=$((${fail:-0} + ${error:-0} + ${xpass:-0}))
	total_pass=$((total_pass + ${pass:-0}))
	total_fail=$((total_fail + bad))
	echo
	if [ "$bad" -ne 0 ]; then
		# test-suite.log holds the summary and the failing tests' logs.
		mp_log "build/$name: test-suite.log"
		cat "$dir/test-suite.log"
	else
		mp_log "build/$name: test-suite.log summary"
		sed -n '/^# TOTAL:/,/^# ERROR:/p' "$dir/test-suite.log"
	fi
	report="$report
build/$name: ${pass:-0} passed, $bad failed"
}

mp_autogen || {
	echo "autogen failed"
	echo "0 passed, 1 failed"
	exit 1
}

# run_cfi_pass NAME: $cfi_tests again in build/NAME, already built, with
# prof_unwind:cfi; counted like a build, in cfi-test-suite.log.
run_cfi_pass() {
	name=$1
	dir=$MP_ROOT/build/$name
	log=cfi-test-suite.log
	# A build that failed is counted already.
	[ -f "$dir/.libs/libmalloc_prof.so" ] || return
	rm -f "$dir/$log"
	# shellcheck disable=SC2086
	MALLOC_PROF_EXTRA_CONF=prof_unwind:cfi mp_make "$name" check \
	    TESTS="$(echo $cfi_tests)" TEST_SUITE_LOG=$log
	if [ ! -f "$dir/$log" ]; then
		mp_log "build/$name (prof_unwind:cfi): make check did not run the tests"
		total_fail=$((total_fail + 1))
		report="$report
build/$name (prof_unwind:cfi): make check failed before running tests"
		return
	fi
	pass=$(count "$name" PASS $log)
	fail=$(count "$name" FAIL $log)
	error=$(count "$name" ERROR $log)
	xpass=$(count "$name" XPASS $log)
	bad=$((${fail:-0} + ${error:-0} + ${xpass:-0}))
	total_pass=$((total_pass + ${pass:-0}))
	total_fail=$((total_fail + bad))
	echo
	if [ "$bad" -ne 0 ]; then
		mp_log "build/$name (prof_unwind:cfi): $log"
		cat "$dir/$log"
	else
		mp_log "build/$name (prof_unwind:cfi): $log summary"
		sed -n '/^# TOTAL:/,/^# ERROR:/p' "$dir/$log"
	fi
	report="$report
build/$name (prof_unwind:cfi): ${pass:-0} passed, $bad failed"
}

run_build default --prefix="$MP_ROOT/build/install"
run_cfi_pass default
run_build prefix --with-prefix=mp_
run_build noprof --disable-prof
run_build debug --enable-debug
# Sanitizers: a prefixed build, so that the sanitizer's runtime keeps the
# real malloc.  Tests that cannot work under one skip, naming why
# (MALLOC_PROF_SANITIZER, set by configure from CFLAGS).
san_cflags="-O2 -g -fno-omit-frame-pointer"
run_build asan --with-prefix=mp_ \
    CFLAGS="$san_cflags -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
    LDFLAGS="-fsanitize=address,undefined"
check_tests=$tsan_tests
run_build tsan --with-prefix=mp_ CFLAGS="$san_cflags -fsanitize=thread" \
    LDFLAGS="-fsanitize=thread"
check_tests=
# malloc-prof's tests once more with the tool under valgrind memcheck: a
# memory error or a definite leak exits 97 and fails that check.
mp_try_install_deps valgrind
if command -v valgrind >/dev/null 2>&1; then
	MALLOC_PROF_TOOL_WRAPPER="valgrind -q --error-exitcode=97 \
--leak-check=full --errors-for-leak-kinds=definite"
	export MALLOC_PROF_TOOL_WRAPPER
	check_tests="test/bin/malloc_prof.sh test/bin/labels.sh
	    test/bin/lifetimes.sh"
	run_build memcheck
	check_tests=
	unset MALLOC_PROF_TOOL_WRAPPER
else
	mp_log "build/memcheck: valgrind is missing: malloc-prof not checked"
	total_fail=$((total_fail + 1))
	report="$report
build/memcheck: valgrind missing"
fi

# libFuzzer targets (scripts/fuzz.sh, test/fuzz/): a short run of each, one
# pass or fail per target.  Needs clang's libFuzzer (installed when root);
# MP_FUZZ_SECONDS=0 leaves them out.
fuzz_secs=${MP_FUZZ_SECONDS:-20}
if [ "$fuzz_secs" -gt 0 ]; then
	mp_try_install_deps clang libclang-rt-14-dev
	if mp_have_pkg clang && mp_have_pkg libclang-rt-14-dev; then
		fuzzlog=$MP_ROOT/build/fuzz.log
		mkdir -p "$MP_ROOT/build"
		sh scripts/fuzz.sh "$fuzz_secs" 2>&1 | tee "$fuzzlog"
		line=$(tail -n 1 "$fuzzlog")
		fp=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
		ff=$(echo "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
		if [ -z "$fp" ]; then
			fp=0
			ff=1
		fi
		total_pass=$((total_pass + fp))
		total_fail=$((total_fail + ff))
		report="$report
build/fuzz: $fp passed, $ff failed (${fuzz_secs} s per target)"
	else
		mp_log "fuzzing skipped: clang or libclang-rt-14-dev missing"
		report="$report
build/fuzz: skipped (no clang libFuzzer)"
	fi
fi

# ---- Rust crate (bindings/rust): cargo test --offline ----
# The crate's build script compiles the library (prefixed) into
# build/rust; its tests run without the options variables so that the
# prof:false tests see the defaults.  Counts: the sum of cargo's "test
# result: ... N passed; M failed" lines; a build failure (no count but a
# non-zero exit) counts as 1 failed.  No cargo: skipped, not failed.
if command -v cargo >/dev/null 2>&1; then
	rustlog=$MP_ROOT/build/rust-test.log
	mkdir -p "$MP_ROOT/build"
	mp_log "bindings/rust: cargo test --offline"
	{
		(cd bindings/rust && env -u MP_MALLOC_CONF -u MALLOC_CONF \
		    CARGO_TARGET_DIR="$MP_ROOT/build/rust" cargo test --offline)
		echo $? >"$rustlog.rc"
	} 2>&1 | tee "$rustlog"
	rrc=$(cat "$rustlog.rc" 2>/dev/null || echo 1)
	rm -f "$rustlog.rc"
	rsum() {
		sed -n "s/^test result: [A-Za-z]*\. \([0-9][0-9]*\) passed; \([0-9][0-9]*\) failed.*/\\$1/p" \
		    "$rustlog" | awk '{ s += $1 } END { print s + 0 }'
	}
	rp=$(rsum 1)
	rf=$(rsum 2)
	if [ "$rrc" -ne 0 ] && [ "$rf" -eq 0 ]; then
		rf=1
	fi
	total_pass=$((total_pass + rp))
	total_fail=$((total_fail + rf))
	report="$report
bindings/rust: $rp passed, $rf failed (cargo test, log: build/rust-test.log)"
else
	mp_log "bindings/rust: cargo is missing: Rust crate not tested (skipped)"
	report="$report
bindings/rust: skipped (no cargo)"
fi
# ---- end of the Rust crate's block ----

echo
mp_log "summary:$report"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
