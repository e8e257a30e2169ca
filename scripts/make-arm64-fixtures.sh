#!/usr/bin/env bash
# make-arm64-fixtures.sh [OUTDIR] - make the arm64 core fixtures of
# testdata/cores/arm64 in the emulated Debian 12 of scripts/arm64-vm.sh.
#
# testdata/arenas.c is cross-built on the host with aarch64-linux-gnu-gcc
# (Debian 12's cross glibc, 2.36, the version the image runs) and run in the
# VM under the image's own glibc with a small heap (2 worker threads, 200
# blocks each), as scripts/make-core-fixtures.sh does on x86_64. It writes:
#
#   arenas-2.36-kernel.core.zst  the kernel's core of the target ("crash":
#                                SIGABRT right after malloc_info), zstd -19
#   arenas-2.36-kernel.xml       glibc's own malloc_info at that moment
#   arenas-2.36-snapshot.core.zst, arenas-2.36-snapshot.xml
#                                the same by `arenactl snapshot` of the target
#                                stopped by itself ("freeze"), only with
#                                ARENACTL_ARM64_BIN=an arm64 arenactl build
#                                that can trace arm64 processes
#   heapobjs-2.36-kernel.core.zst the kernel's core of testdata/heapobjs.cpp
#                                (g++ -O2), killed by SIGABRT from outside
#                                right after it told its objects
#   heapobjs-2.36-kernel.truth   what it told ("truth": CLASS ADDR TYPE per
#                                object, then "pin ADDR FREE")
#   sysroot/usr/lib/aarch64-linux-gnu/{libc.so.6,ld-linux-aarch64.so.1}
#                                the image's libc and loader, at the paths the
#                                core records (--sysroot reads them)
#   sysroot/usr/lib/debug/.build-id/XX/YYYY.debug
#                                libc's detached debug file from the image's
#                                libc6-dbg of the same version (main_arena and
#                                mp_ by symbol; --debug-dir DIR/sysroot/usr/lib/debug)
#   sysroot/job/{arenas,heapobjs} the arm64 targets, at the path the cores
#                                record (the VM runs them from /job)
#
# Needs what `scripts/arm64-vm.sh check` lists, zstd, and a built image
# (`scripts/arm64-vm.sh build`). Takes about two minutes (one boot).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/testdata/cores/arm64}
VM=$ROOT/scripts/arm64-vm.sh
THREADS=2
BLOCKS=200
VERSION=2.36
# ARENACTL_ARM64_PAGES=16k makes the same fixtures under the 16 KiB-page
# kernel, named arenas-2.36-16k-kernel.* and so on (the userland, and so the
# sysroot, is the same).
PAGES=${ARENACTL_ARM64_PAGES:-4k}
NAMEV=$VERSION
[ "$PAGES" = 4k ] || NAMEV=$VERSION-$PAGES

die() {
	echo "make-arm64-fixtures.sh: $*" >&2
	exit 1
}

for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ zstd; do
	command -v "$tool" >/dev/null || die "$tool is not installed"
done
CACHE=$("$VM" path)
[ -f "$CACHE/root.img" ] || die "no image in $CACHE (scripts/arm64-vm.sh build)"
libdir=$CACHE/rootfs/usr/lib/aarch64-linux-gnu
v=$(sed -n 's/^glibc: \([0-9]*\.[0-9]*\).*/\1/p' "$CACHE/VERSION")
[ "$v" = "$VERSION" ] || die "the image's glibc is '$v', not $VERSION"

work=$(mktemp -d /tmp/arenactl-arm64fx.XXXXXX)
trap 'rm -rf "$work"' EXIT
job=$work/job
mkdir -p "$job" "$OUT"
aarch64-linux-gnu-gcc -pthread -O1 -g -Wall -o "$job/arenas" "$ROOT/testdata/arenas.c"
aarch64-linux-gnu-g++ -pthread -O2 -g -Wall -o "$job/heapobjs" "$ROOT/testdata/heapobjs.cpp"
snapshot=0
if [ -n "${ARENACTL_ARM64_BIN:-}" ]; then
	cp "$ARENACTL_ARM64_BIN" "$job/arenactl"
	snapshot=1
fi

# The guest's part: the same dance as make-core-fixtures.sh, in bash.
cat >"$job/fixtures.sh" <<'EOF'
set -u
THREADS=$1 BLOCKS=$2 SNAPSHOT=$3 V=$4
die() { echo "guest: $*" >&2; exit 1; }
expect() {
	local line
	IFS= read -r -t 120 line <&"$1" || die "the target said nothing (waiting for '$2')"
	[ "${line%% *}" = "$2" ] || die "the target said '$line', not '$2'"
}
state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null || echo gone; }
mkdir -p /tmp/k
echo "/tmp/k/core.%p" >/proc/sys/kernel/core_pattern
coproc TARGET { cd /tmp/k && ulimit -c unlimited && echo 0x33 >/proc/self/coredump_filter && exec /job/arenas park "$THREADS" "$BLOCKS"; }
pid=$TARGET_PID
exec {from}<&"${TARGET[0]}" {to}>&"${TARGET[1]}"
expect "$from" ready
echo "crash /job/out/arenas-$V-kernel.xml" >&"$to"
expect "$from" crashing
{ wait "$pid"; } 2>/dev/null || true
exec {from}<&- {to}>&-
[ -f "/tmp/k/core.$pid" ] || die "no core in /tmp/k: $(ls /tmp/k)"
mv "/tmp/k/core.$pid" "/job/out/arenas-$V-kernel.core"
# heapobjs: its own account of every object ("truth"), then SIGABRT from
# outside, every thread where it was parked (one spinning with an object in
# a register only).
coproc TARGET { cd /tmp/k && ulimit -c unlimited && echo 0x33 >/proc/self/coredump_filter && exec /job/heapobjs; }
pid=$TARGET_PID
exec {from}<&"${TARGET[0]}" {to}>&"${TARGET[1]}"
expect "$from" ready
echo truth >&"$to"
: >"/job/out/heapobjs-$V-kernel.truth"
while IFS= read -r -t 120 line <&"$from" && [ "$line" != end ]; do echo "$line" >>"/job/out/heapobjs-$V-kernel.truth"; done
[ "$line" = end ] || die "heapobjs's truth ended early"
kill -ABRT "$pid"
{ wait "$pid"; } 2>/dev/null || true
exec {from}<&- {to}>&-
[ -f "/tmp/k/core.$pid" ] || die "no heapobjs core in /tmp/k: $(ls /tmp/k)"
mv "/tmp/k/core.$pid" "/job/out/heapobjs-$V-kernel.core"
if [ "$SNAPSHOT" = 1 ]; then
	coproc TARGET { exec /job/arenas park "$THREADS" "$BLOCKS"; }
	pid=$TARGET_PID
	exec {from}<&"${TARGET[0]}" {to}>&"${TARGET[1]}"
	expect "$from" ready
	echo "freeze /job/out/arenas-$V-snapshot.xml" >&"$to"
	for _ in $(seq 1200); do [ "$(state "$pid")" = T ] && break; sleep 0.1; done
	[ "$(state "$pid")" = T ] || die "the target did not stop itself"
	/job/arenactl snapshot "$pid" -o "/job/out/arenas-$V-snapshot.core" >/dev/null || die "arenactl snapshot failed"
	kill -CONT "$pid"
	expect "$from" ok
	echo quit >&"$to"
	expect "$from" clean
	wait "$pid" || die "the target exited $? after the snapshot"
fi
cat /proc/sys/kernel/osrelease >/job/out/kernel
getconf PAGESIZE >/job/out/pagesize
EOF

res=$work/res
"$VM" run -t 600 -o "$res" "$job" "bash /job/fixtures.sh $THREADS $BLOCKS $snapshot $NAMEV" ||
	die "the run in the VM failed"
for f in arenas-$NAMEV-kernel arenas-$NAMEV-snapshot heapobjs-$NAMEV-kernel; do
	[ -f "$res/$f.core" ] || continue
	zstd -q -19 -f "$res/$f.core" -o "$OUT/$f.core.zst"
	cp "$res/$f".xml "$res/$f".truth "$OUT/" 2>/dev/null || true
	echo "$f: $(du -k "$OUT/$f.core.zst" | cut -f1) KiB ($(du -k --apparent-size "$res/$f.core" | cut -f1) KiB apparent)"
done
mkdir -p "$OUT/sysroot/usr/lib/aarch64-linux-gnu"
cp "$libdir/libc.so.6" "$libdir/ld-linux-aarch64.so.1" "$OUT/sysroot/usr/lib/aarch64-linux-gnu/"
mkdir -p "$OUT/sysroot/job"
cp "$job/arenas" "$job/heapobjs" "$OUT/sysroot/job/"
chmod 644 "$OUT"/arenas-* "$OUT"/heapobjs-* "$OUT"/sysroot/usr/lib/aarch64-linux-gnu/*
chmod 755 "$OUT"/sysroot/job/*

# libc's debug file: the image's libc6-dbg of the very same version, fetched
# with a private apt state (the host's package lists are untouched).
ver=$(sed -n 's/^glibc: //p' "$CACHE/VERSION")
uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
uri=${uri:-http://deb.debian.org/debian}
apt=$work/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/empty.d"
: >"$apt/status"
# The image came from bookworm main (debootstrap), so its libc6-dbg is there.
echo "deb $uri bookworm main" >"$apt/sources.list"
o=(-o APT::Architecture=arm64 -o APT::Architectures=arm64
	-o Dir::Etc::sourcelist="$apt/sources.list" -o Dir::Etc::sourceparts="$apt/empty.d"
	-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o Dir::State::status="$apt/status"
	-o Dir::Etc::preferencesparts="$apt/empty.d" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
timeout 600 apt-get "${o[@]}" update >"$work/apt.log" 2>&1 || die "apt-get update (arm64) failed: $(tail -n 2 "$work/apt.log")"
(cd "$work" && timeout 600 apt-get "${o[@]}" download "libc6-dbg=$ver" >>"$work/apt.log" 2>&1) ||
	die "apt-get download libc6-dbg=$ver failed: $(tail -n 2 "$work/apt.log")"
dpkg -x "$work"/libc6-dbg_*.deb "$work/dbg"
id=$(aarch64-linux-gnu-readelf -n "$libdir/libc.so.6" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
[ -n "$id" ] || die "libc.so.6 has no build-id"
dbg=usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
[ -f "$work/dbg/$dbg" ] || die "libc6-dbg $ver has no $dbg"
rm -rf "$OUT/sysroot/usr/lib/debug"
mkdir -p "$OUT/sysroot/$(dirname "$dbg")"
cp "$work/dbg/$dbg" "$OUT/sysroot/$dbg"
chmod 644 "$OUT/sysroot/$dbg"
echo "kernel $(cat "$res/kernel"), page size $(cat "$res/pagesize"), libc build-id $id"
