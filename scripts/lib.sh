# scripts/lib.sh: shared by scripts/demo.sh and scripts/test.sh (POSIX sh).
# Source it after cd'ing to the repository root; it sets MP_ROOT.

MP_ROOT=$(pwd)
MP_JOBS=${MP_JOBS:-2}

mp_log() {
	printf '==> %s\n' "$*"
}

# mp_newer A B: true when file A was modified after file B (POSIX: no -nt).
mp_newer() {
	[ -n "$(find "$1" -prune -newer "$2" 2>/dev/null)" ]
}

mp_die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# mp_have_pkg PACKAGE: true when the package's files are present.  Tools are
# checked with command -v, libraries by their header, anything else through
# dpkg.
mp_have_pkg() {
	case $1 in
	build-essential)
		command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 &&
		    [ -f /usr/include/stdio.h ];;
	autoconf) command -v autoconf >/dev/null 2>&1;;
	automake) command -v automake >/dev/null 2>&1 &&
		    command -v aclocal >/dev/null 2>&1;;
	libtool) command -v libtoolize >/dev/null 2>&1;;
	pkg-config) command -v pkg-config >/dev/null 2>&1;;
	libcmocka-dev) [ -f /usr/include/cmocka.h ];;
	python3) command -v python3 >/dev/null 2>&1;;
	git) command -v git >/dev/null 2>&1;;
	binutils) command -v nm >/dev/null 2>&1;;
	libjemalloc-dev) command -v jeprof >/dev/null 2>&1 &&
		    command -v perl >/dev/null 2>&1;;
	*) dpkg-query -W -f='${Status}' "$1" 2>/dev/null |
		    grep -q 'install ok installed';;
	esac
}

# mp_install_deps PACKAGE...: install the missing ones with apt-get;
# `apt-get update` runs only when something is missing.
mp_install_deps() {
	mp_missing=
	for mp_p in "$@"; do
		mp_have_pkg "$mp_p" || mp_missing="$mp_missing $mp_p"
	done
	if [ -z "$mp_missing" ]; then
		mp_log "build dependencies present"
		return 0
	fi
	mp_log "installing:$mp_missing"
	command -v apt-get >/dev/null 2>&1 ||
	    mp_die "missing:$mp_missing (no apt-get here; install them by hand)"
	if [ "$(id -u)" -eq 0 ]; then
		mp_sudo=
	elif command -v sudo >/dev/null 2>&1; then
		mp_sudo=sudo
	else
		mp_die "missing:$mp_missing (run as root or install them by hand)"
	fi
	# shellcheck disable=SC2086
	$mp_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null ||
	    mp_die "apt-get update failed"
	# shellcheck disable=SC2086
	$mp_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends $mp_missing </dev/null ||
	    mp_die "apt-get install$mp_missing failed"
}

# mp_try_install_deps PACKAGE...: like mp_install_deps for packages that
# are only nice to have (libjemalloc-dev brings jeprof, which the jeprof
# test and the demo use when present): installs the missing ones quietly
# when root or sudo is available, and only warns if that cannot be done.
mp_try_install_deps() {
	mp_missing=
	for mp_p in "$@"; do
		mp_have_pkg "$mp_p" || mp_missing="$mp_missing $mp_p"
	done
	[ -z "$mp_missing" ] && return 0
	if ! command -v apt-get >/dev/null 2>&1; then
		mp_log "optional, not installed:$mp_missing (no apt-get here)"
		return 0
	fi
	if [ "$(id -u)" -eq 0 ]; then
		mp_sudo=
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		mp_sudo="sudo -n"
	else
		mp_log "optional, not installed:$mp_missing (not root)"
		return 0
	fi
	mp_log "installing (optional):$mp_missing"
	mp_aptlog=${TMPDIR:-/tmp}/mp-apt.$$.log
	# shellcheck disable=SC2086
	if { $mp_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $mp_missing ||
	    { $mp_sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
	    $mp_sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends $mp_missing; }; } \
	    </dev/null >"$mp_aptlog" 2>&1; then
		rm -f "$mp_aptlog"
	else
		mp_log "optional packages$mp_missing could not be installed (see $mp_aptlog)"
	fi
	return 0
}

# mp_autogen: generate configure when it is missing or older than its
# inputs.  An in-tree configuration would stop out-of-tree builds: clean it.
mp_autogen() {
	mp_regen=
	if [ ! -x configure ] || [ ! -f Makefile.in ] ||
	    [ ! -f build-aux/tap-driver.sh ]; then
		mp_regen=1
	else
		for mp_f in configure.ac Makefile.am test/unit/local.am \
		    test/integration/local.am test/stress/local.am; do
			if [ -f "$mp_f" ] && mp_newer "$mp_f" Makefile.in; then
				mp_regen=1
			fi
		done
		mp_newer configure.ac configure && mp_regen=1
	fi
	if [ -n "$mp_regen" ]; then
		mp_log "sh autogen.sh"
		sh ./autogen.sh || return 1
	fi
	if [ -f config.status ]; then
		mp_log "source tree was configured in place; make distclean there"
		make distclean >/dev/null 2>&1 || rm -f config.status
	fi
	return 0
}

# mp_configure NAME [CONFIGURE-ARGS...]: configure build/NAME out of tree,
# unless it is already configured with the same arguments (make then
# re-runs configure by itself when configure changes).
mp_configure() {
	mp_name=$1
	shift
	mp_dir=$MP_ROOT/build/$mp_name
	mkdir -p "$mp_dir" || return 1
	mp_args="$*"
	if [ -f "$mp_dir/Makefile" ] && [ -f "$mp_dir/config.status" ] &&
	    [ -f "$mp_dir/.mp-configure-args" ] &&
	    [ "$(cat "$mp_dir/.mp-configure-args")" = "$mp_args" ] &&
	    ! mp_newer "$MP_ROOT/configure" "$mp_dir/config.status"; then
		mp_log "build/$mp_name: already configured ($mp_args)"
		return 0
	fi
	mp_log "build/$mp_name: configure $mp_args"
	rm -f "$mp_dir/.mp-configure-args"
	(cd "$mp_dir" && ../../configure "$@") || return 1
	printf '%s\n' "$mp_args" >"$mp_dir/.mp-configure-args"
}

# mp_make NAME [MAKE-ARGS...]: make in build/NAME.
mp_make() {
	mp_name=$1
	shift
	mp_log "build/$mp_name: make -j$MP_JOBS $*"
	(cd "$MP_ROOT/build/$mp_name" && make -j"$MP_JOBS" "$@")
}
