#!/usr/bin/env bash
# The read-only walker on a large heap: bigheap.c (16 threads, 16 arenas,
# about 1.1 GiB of heap, 4.2 M chunks of which 2.1 M free in bins), then
#   1. walkbench: the free-list walk (glibc.WalkLists) and the full walk
#      (glibc.WalkAll: tcaches, then every chunk) with the process frozen,
#      chunks/s and GiB/s;
#   2. `arenactl info --read-only --json`: its frozen_us, its own peak RSS
#      (/usr/bin/time), and the longest gap the target's ticker thread saw
#      while it ran;
#   3. gdb's recipe `call (int) malloc_info(0, stdout)`: its wall time, and
#      the longest gap the ticker saw (gdb stops every thread for its run).
# See README.md beside this file.
#
# usage: bench/walk/run.sh [ROUNDS [THREADS [PAIRS [MAXREQ]]]]
#   ROUNDS  walks of each kind, and runs of each tool (default 5)
#   the rest are bigheap's arguments (default 16 131072 500)
# PROFILE=DIR also writes walkbench's CPU and allocation profiles to DIR.
# ARENACTL=FILE and WALKBENCH=FILE measure those binaries instead of ones
# built from this tree (walkbench: go build ./bench/walk/walkbench), to
# compare two builds.
# Needs go, gcc and gdb (with libc6-dbg, for gdb's recipe). Run it as root on
# a quiet machine.
set -eu

rounds=${1:-5}
threads=${2:-16}
pairs=${3:-131072}
maxreq=${4:-500}

. "$(dirname "$0")/../lib.sh"
bench_init walk
need gdb
[ -x /usr/bin/time ] || die "/usr/bin/time is not installed (Debian: apt-get install time)"
(cd "$root" && go build -o "$work/walkbench" ./bench/walk/walkbench) || die "building walkbench failed"
if [ -n "${WALKBENCH:-}" ]; then cp "$WALKBENCH" "$work/walkbench" || die "no walkbench at $WALKBENCH"; fi

# Its stdout, where gdb's malloc_info XML lands, goes to a file.
start_bigheap "$work/run" "$threads" "$pairs" "$maxreq"
set -- $reply
echo "target: bigheap $threads $pairs $maxreq: $2 threads, $(($4 / 1048576)) MiB requested, $5 blocks freed; RSS $(awk '/VmRSS/ {printf "%.0f MiB", $2 / 1024}' /proc/$tpid/status)"
echo

prof=
if [ -n "${PROFILE:-}" ]; then
	mkdir -p "$PROFILE"
	prof="-cpuprofile $PROFILE/cpu.prof -memprofile $PROFILE/mem.prof"
	cp "$work/walkbench" "$PROFILE/walkbench"
fi
"$work/walkbench" -pid "$tpid" -n "$rounds" $prof || die "walkbench failed"
echo

ask tick
[ "$reply" = ok ] || die "tick: '$reply'"
results=$work/results # tool wall_us gap_ns frozen_us rss_kib
: >"$results"
for i in $(seq "$rounds"); do
	for tool in arenactl gdb baseline; do
		ask gaps # start afresh
		start=$(now_us)
		frozen=-
		rss=-
		case $tool in
		arenactl)
			/usr/bin/time -f %M -o "$work/rss" "$work/arenactl" info --read-only --json "$tpid" >"$work/info.json" ||
				die "arenactl info --read-only failed (exit $?)"
			frozen=$(sed -n 's/.*"frozen_us": *\([0-9]*\).*/\1/p' "$work/info.json" | head -1)
			rss=$(tail -1 "$work/rss")
			;;
		gdb)
			gdb_malloc_info_or_die "$tpid"
			;;
		baseline) sleep 1 ;;
		esac
		end=$(now_us)
		ask gaps
		set -- $reply
		[ "$1" = gaps ] || die "gaps: '$reply'"
		echo "$tool $((end - start)) $2 $frozen $rss" >>"$results"
	done
done
ask quit

awk -v rounds="$rounds" "$awk_median"'
{
	k = $1; n[k]++
	wall[k, n[k]] = $2 / 1000; gap[k, n[k]] = $3 / 1e6
	if ($4 != "-") frozen[k, n[k]] = $4 / 1000
	if ($5 != "-") rss[k, n[k]] = $5 / 1024
	rows = rows sprintf("  %-9s %10.1f %14.1f %12s %10s\n", k, $2 / 1000, $3 / 1e6, $4 == "-" ? "-" : sprintf("%.1f", $4 / 1000), $5 == "-" ? "-" : sprintf("%.0f", $5 / 1024))
}
END {
	printf "every run (ms; peak RSS in MiB):\n  tool            wall  longest gap   frozen_us   peak RSS\n%s\n", rows
	printf "%-9s %12s %20s %18s %16s\n", "tool", "median wall", "median longest gap", "median frozen", "median peak RSS"
	split("arenactl gdb baseline", order, " ")
	for (t = 1; t <= 3; t++) {
		k = order[t]
		for (i = 1; i <= n[k]; i++) { w[i] = wall[k, i]; g[i] = gap[k, i]; f[i] = frozen[k, i]; r[i] = rss[k, i] }
		mw[k] = median(w, n[k]); mg[k] = median(g, n[k])
		printf "%-9s %9.1f ms %17.1f ms %15s %16s\n", k, mw[k], mg[k], k == "arenactl" ? sprintf("%.1f ms", median(f, n[k])) : "-", k == "arenactl" ? sprintf("%.0f MiB", median(r, n[k])) : "-"
	}
	printf "\nthe longest stop the process saw: gdb %.1f ms, arenactl --read-only %.1f ms (%.1fx)\n", mg["gdb"], mg["arenactl"], mg["gdb"] / mg["arenactl"]
}' "$results"
