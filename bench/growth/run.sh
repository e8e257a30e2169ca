#!/bin/bash
# Overhead of arenactl growth on a process that only touches new pages and
# on one that only maps and unmaps, beside perf record --call-graph dwarf
# and strace -k on the same targets in the same run. Each tool runs for
# WINDOW seconds on a target already running; the figure is the target's
# median pace with the tool over its median pace in the 2 s before.
# Usage: bench/growth/run.sh [ROUNDS] [ARENACTL] (as root; needs gcc, perf,
# strace). ARENACTL: a binary to measure instead of building this tree (an
# older arenactl, to compare on the same machine). TOOLS="none arenactl"
# runs only the tools named, TARGETS="mmap" only the targets named.
# PACE_CLOCK=cpu takes the target's pace in its own CPU time (pace.c): on
# a machine shared with other work, whose waits would otherwise swamp the
# figures (a tool's work on the machine's other CPUs is then not counted);
# WINDOW=8 or so leaves it enough lines. paired.sh compares two binaries
# more closely there.
set -eu
. "$(dirname "$0")/../lib.sh"
cd "$root"
ROUNDS=${1:-3}
WINDOW=${WINDOW:-3}
bench_cleanup() { kill $(jobs -p) 2>/dev/null || true; }
bench_work growth
D=$work
gcc -O2 -o "$D/pace" bench/growth/pace.c
ARENACTL=${2:-} CGO_ENABLED=0 build_arenactl "$D/arenactl"

tool() { # tool MODE PID: runs for WINDOW seconds
	case $1 in
	none) sleep "$WINDOW" ;;
	arenactl) "$D/arenactl" growth --duration "${WINDOW}s" "$2" >/dev/null 2>&1 ;;
	arenactl-tracepoints) "$D/arenactl" growth --tracepoints --duration "${WINDOW}s" "$2" >/dev/null 2>&1 ;;
	perf-page-faults) timeout -s INT "$WINDOW" perf record -q -o "$D/perf.data" -e page-faults -c 16 --call-graph dwarf -p "$2" >/dev/null 2>&1 || true ;;
	perf-mmap) timeout -s INT "$WINDOW" perf record -q -o "$D/perf.data" -e syscalls:sys_enter_mmap -e syscalls:sys_enter_munmap --call-graph dwarf -p "$2" >/dev/null 2>&1 || true ;;
	strace) timeout -s INT "$WINDOW" strace -k -f -qq -e trace=%memory -o "$D/strace.out" -p "$2" >/dev/null 2>&1 || true ;;
	esac
}

# perf record needs tracefs for the syscall tracepoints.
if [ ! -d /sys/kernel/tracing/events ]; then mount -t tracefs nodev /sys/kernel/tracing; MOUNTED=1; fi

printf '| target | tool | pace before | pace with the tool | slowdown |\n|---|---|---|---|---|\n'
for target in ${TARGETS:-touch mmap}; do
	tools="none arenactl strace"
	if [ $target = touch ]; then tools="$tools perf-page-faults"; else tools="$tools arenactl-tracepoints perf-mmap"; fi
	for t in $tools; do
		if [ -n "${TOOLS:-}" ] && ! grep -qw -- "$t" <<<"$TOOLS"; then continue; fi
		rs=""
		for r in $(seq "$ROUNDS"); do
			: >"$D/out"
			"$D/pace" $target >>"$D/out" &
			P=$!
			# 2 s of pace (8 lines) before the tool.
			while [ "$(wc -l <"$D/out")" -lt 9 ]; do sleep 0.1; done
			a=$(wc -l <"$D/out")
			tool $t $P
			b=$(wc -l <"$D/out")
			kill $P; wait $P 2>/dev/null || true
			before=$(sed -n "$((a - 7)),${a}p" "$D/out" | median)
			with=$(sed -n "$((a + 2)),$((b - 1))p" "$D/out" | median)
			rs="$rs $before:$with"
		done
		bm=$(for x in $rs; do echo "${x%%:*}"; done | median)
		wm=$(for x in $rs; do echo "${x##*:}"; done | median)
		printf '| %s | %s | %s ns | %s ns | %s× |\n' $target $t "$bm" "$wm" "$(awk -v w="$wm" -v b="$bm" 'BEGIN {printf "%.2f", w / b}')"
	done
done
if [ -n "${MOUNTED:-}" ]; then umount /sys/kernel/tracing; fi
