#!/bin/sh
# fetch-glibc.sh [DIR] - fetch Debian's glibc for other versions, without
# touching the system's apt state or its libc.
#
# For each suite below it downloads libc6 (and, for the oldest, libc6-dev and
# linux-libc-dev, so the tree doubles as a sysroot to build test programs that
# run under every newer loader) and libc6-dbg of the same version (libc's
# detached debug file, under usr/lib/debug/.build-id, for the tests that read
# main_arena and mp_ from symbols), and extracts them into DIR/glibc-<version>.
# It uses a private apt state under DIR/apt and reads the archive URI from the
# system's own deb822 sources, so it works behind the same mirror as apt.
#
# Idempotent: a suite whose tree holds the same packages is skipped. Prints
# one line per version: "<version> <loader path> <library dir>".
#
# Default DIR is testdata/glibc at the repository root (gitignored).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-$ROOT/testdata/glibc}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
case $DIR in
*[[:space:]]*)
	echo "fetch-glibc.sh: $DIR: apt options cannot hold a path with spaces" >&2
	exit 1
	;;
esac

# suite:packages. bullseye is the oldest the archive still serves (2.31), so
# it also provides the sysroot (headers, crt files, libc.so linker script).
SUITES="bullseye:libc6,libc6-dev,linux-libc-dev trixie:libc6 sid:libc6"

SOURCES=/etc/apt/sources.list.d/debian.sources
uri() {
	# First "URIs:" line of the deb822 sources; fall back to the main archive.
	u=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$SOURCES" 2>/dev/null | head -n 1)
	echo "${u:-http://deb.debian.org/debian}"
}

# rewrite_symlinks makes absolute symlinks inside a tree point inside it, so
# the tree works as a --sysroot and as a --library-path.
rewrite_symlinks() {
	tree=$1
	find "$tree" -type l | while read -r link; do
		target=$(readlink "$link")
		case $target in
		/*) ln -sfn "$tree$target" "$link" ;;
		esac
	done
}

# loader prints the dynamic loader of an extracted tree: it lives in
# lib/x86_64-linux-gnu up to 2.35 and in usr/lib/x86_64-linux-gnu from 2.39.
loader() {
	for d in usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu; do
		if [ -e "$1/$d/ld-linux-x86-64.so.2" ]; then
			echo "$1/$d/ld-linux-x86-64.so.2 $1/$d"
			return
		fi
	done
	echo "missing-loader"
}

B=$DIR/apt
APTOPTS=""
apt_setup() {
	[ -n "$APTOPTS" ] && return
	mkdir -p "$B/lists/partial" "$B/cache/archives/partial" "$B/empty.d"
	[ -e "$B/status" ] || : >"$B/status"
	APTOPTS="-o Dir::Etc::sourcelist=$B/sources.list -o Dir::Etc::sourceparts=$B/empty.d \
-o Dir::State::Lists=$B/lists -o Dir::Cache=$B/cache -o Dir::State::status=$B/status \
-o Dir::Etc::preferencesparts=$B/empty.d -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
}

# fetch PKG[=VERSION]... downloads packages of the current $suite into
# $debs, updating the private lists once per suite ($updated).
fetch() {
	apt_setup
	echo "deb $URI $suite main" >"$B/sources.list"
	if [ -z "$updated" ]; then
		# shellcheck disable=SC2086 # APTOPTS is a list of words on purpose
		apt-get -q $APTOPTS update >&2
		updated=1
	fi
	# shellcheck disable=SC2086
	(cd "$debs" && apt-get -q $APTOPTS download "$@" >&2)
}

URI=$(uri)
for entry in $SUITES; do
	suite=${entry%%:*}
	pkgs=$(echo "${entry#*:}" | tr , ' ')
	debs=$DIR/debs/$suite
	mkdir -p "$debs"
	missing=""
	for pkg in $pkgs; do
		ls "$debs/${pkg}"_*.deb >/dev/null 2>&1 || missing="$missing $pkg"
	done
	updated=""
	if [ -n "$missing" ]; then
		# shellcheck disable=SC2086 # one word per package
		fetch $missing
	fi
	deb=$(ls "$debs"/libc6_*.deb | head -n 1)
	# libc6-dbg must be the very build of libc6 (its files are named by
	# build-id), so it is pinned to libc6's version. A suite that no longer
	# serves that version only loses the debug-symbol tests.
	if ! ls "$debs"/libc6-dbg_*.deb >/dev/null 2>&1; then
		full=$(dpkg-deb -f "$deb" Version)
		fetch "libc6-dbg=$full" ||
			echo "fetch-glibc.sh: no libc6-dbg $full in $suite; its debug-symbol tests will skip" >&2
	fi
	# libc6_2.31-13+deb11u11_amd64.deb -> 2.31
	ver=$(basename "$deb" | sed -n 's/^libc6_\([0-9]*\.[0-9]*\).*/\1/p')
	tree=$DIR/glibc-$ver
	# The stamp names the packages in the tree, so that a package added
	# here (or fetched late) re-extracts it.
	stamp="$suite $(cd "$debs" && ls -- *.deb | tr '\n' ' ')"
	if [ "$(cat "$tree/.extracted" 2>/dev/null)" != "$stamp" ]; then
		rm -rf "$tree"
		mkdir -p "$tree"
		for d in "$debs"/*.deb; do
			dpkg -x "$d" "$tree"
		done
		rewrite_symlinks "$tree"
		echo "$stamp" >"$tree/.extracted"
	fi
	echo "$ver $(loader "$tree")"
done
