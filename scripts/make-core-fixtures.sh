#!/usr/bin/env bash
# make-core-fixtures.sh [OUTDIR] - make the core fixtures of testdata/cores.
#
# For glibc 2.31, 2.36, 2.41 and 2.43 it runs testdata/arenas.c (built once
# against the 2.31 tree of scripts/fetch-glibc.sh, so that it runs under
# every loader) with a small heap (2 worker threads, 200 blocks each), and
# writes, per version:
#
#   arenas-<v>-kernel.core.zst   the kernel's core of the target ("crash":
#                                SIGABRT right after malloc_info), zstd -19
#   arenas-<v>-kernel.xml        glibc's own malloc_info at that moment
#   arenas-<v>-snapshot.core.zst `arenactl snapshot` of the target stopped
#                                by itself ("freeze") right after malloc_info
#   arenas-<v>-snapshot.xml      glibc's own malloc_info at that moment
#
# 2.36 is the system's glibc (Debian 12): the target runs as a plain
# program. The others run under their tree's loader. The kernel cores record
# the paths of the libc they used (under this checkout's testdata/glibc, or
# the system's); the snapshots carry arenactl's allocator note and need no
# libc file at all.
#
# Needs root (ptrace, core dumps), gcc, zstd, go, the trees of
# scripts/fetch-glibc.sh (which it runs first: a no-op when they are there),
# and a core_pattern that writes cores into the process's directory (not a
# pipe to a crash collector).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/testdata/cores}
GLIBC=$ROOT/testdata/glibc
THREADS=2
BLOCKS=200
VERSIONS="2.31 2.36 2.41 2.43"
SYSTEM_VERSION=2.36

die() {
	echo "make-core-fixtures.sh: $*" >&2
	exit 1
}

for tool in gcc zstd go; do
	command -v "$tool" >/dev/null || die "$tool is not installed"
done
[ "$(id -u)" = 0 ] || die "run as root (arenactl snapshot traces the target)"
pattern=$(cat /proc/sys/kernel/core_pattern)
case $pattern in
'|'* | /*) die "core_pattern is '$pattern': cores must land in the process's directory (echo core >/proc/sys/kernel/core_pattern)" ;;
esac

# The trees, fetched if need be (idempotent): "<version> <loader> <libdir>".
trees=$("$ROOT/scripts/fetch-glibc.sh" "$GLIBC") || die "scripts/fetch-glibc.sh failed"

sysroot=$GLIBC/glibc-2.31
sysver=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
[ "$sysver" = "$SYSTEM_VERSION" ] || die "the system's glibc is $sysver; this script expects $SYSTEM_VERSION (Debian 12)"

work=$(mktemp -d /tmp/arenactl-fixtures.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$OUT"

(cd "$ROOT" && go build -o "$work/arenactl" ./cmd/arenactl)
lib=$sysroot/usr/lib/x86_64-linux-gnu
gcc -pthread -O1 -g -Wall -o "$work/arenas" "$ROOT/testdata/arenas.c" \
	--sysroot="$sysroot" -B"$lib/" -L"$lib" -L"$sysroot/lib/x86_64-linux-gnu" \
	-isystem "$sysroot/usr/include" -isystem "$sysroot/usr/include/x86_64-linux-gnu"

# runner VERSION prints the command prefix that runs a program under that
# glibc: nothing for the system's, the tree's loader otherwise.
runner() {
	[ "$1" = "$SYSTEM_VERSION" ] && return
	r=$(echo "$trees" | awk -v v="$1" '$1 == v && $2 != "missing-loader" { print $2 " --library-path " $3 }')
	[ -n "$r" ] || die "no glibc $1 tree under $GLIBC"
	echo "$r"
}

# expect FD WANT: read one line from the target and check its first word.
expect() {
	local line
	IFS= read -r -t 60 line <&"$1" || die "the target said nothing (waiting for '$2')"
	[ "${line%% *}" = "$2" ] || die "the target said '$line', not '$2'"
}

state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null || echo gone; }

for v in $VERSIONS; do
	run=$(runner "$v")
	name=arenas-$v

	# The kernel's core: the target writes its malloc_info, then aborts.
	dir=$work/$v-kernel
	mkdir -p "$dir"
	# Bit 4 of coredump_filter (the first page of ELF files, libc's
	# build-id note among them) is on by default; make sure of it.
	# shellcheck disable=SC2086 # $run is a command prefix
	coproc TARGET { cd "$dir" && ulimit -c unlimited && echo 0x33 >/proc/self/coredump_filter && exec $run "$work/arenas" park "$THREADS" "$BLOCKS"; }
	pid=$TARGET_PID
	# Bash forgets a coproc's descriptors once it exits: keep copies.
	exec {from}<&"${TARGET[0]}" {to}>&"${TARGET[1]}"
	expect "$from" ready
	echo "crash $dir/own.xml" >&"$to"
	expect "$from" crashing
	{ wait "$pid"; } 2>/dev/null || true # killed by SIGABRT, as meant
	exec {from}<&- {to}>&-
	core=""
	for c in "$dir/${pattern//%p/$pid}" "$dir/core.$pid" "$dir/core"; do
		[ -f "$c" ] && core=$c && break
	done
	[ -n "$core" ] || die "glibc $v: the target left no core in $dir"
	zstd -q -19 -f "$core" -o "$OUT/$name-kernel.core.zst"
	cp "$dir/own.xml" "$OUT/$name-kernel.xml"

	# The snapshot: the target writes its malloc_info and stops itself.
	dir=$work/$v-snapshot
	mkdir -p "$dir"
	# shellcheck disable=SC2086
	coproc TARGET { exec $run "$work/arenas" park "$THREADS" "$BLOCKS"; }
	pid=$TARGET_PID
	exec {from}<&"${TARGET[0]}" {to}>&"${TARGET[1]}"
	expect "$from" ready
	echo "freeze $dir/own.xml" >&"$to"
	for _ in $(seq 600); do
		[ "$(state "$pid")" = T ] && break
		sleep 0.1
	done
	[ "$(state "$pid")" = T ] || die "glibc $v: the target did not stop itself"
	"$work/arenactl" snapshot "$pid" -o "$dir/snap.core" >/dev/null
	kill -CONT "$pid"
	expect "$from" ok
	echo quit >&"$to"
	expect "$from" clean
	wait "$pid"
	exec {from}<&- {to}>&-
	zstd -q -19 -f "$dir/snap.core" -o "$OUT/$name-snapshot.core.zst"
	cp "$dir/own.xml" "$OUT/$name-snapshot.xml"
	chmod 644 "$OUT/$name"-*
	echo "glibc $v: $(du -k "$OUT/$name-kernel.core.zst" | cut -f1) KiB kernel core, $(du -k "$OUT/$name-snapshot.core.zst" | cut -f1) KiB snapshot"
done
