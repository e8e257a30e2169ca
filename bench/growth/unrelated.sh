#!/bin/bash
# What arenactl growth costs a process it does not watch: an unrelated
# process, run as nobody, calls getppid in a loop and prints its pace (ns
# per call of its own CPU time, a line per 100 ms of it: other work on a
# shared machine does not count), while growth watches another, idle
# process for WINDOW seconds. The figure is the loop's median pace with the
# window open over its median pace in the 8 lines before, as in run.sh.
# getppid runs no eBPF program of arenactl's (they are attached to the
# memory syscalls' own tracepoints), but while any syscall tracepoint is
# enabled every task takes the kernel's slow syscall path: that is what
# remains. --tracepoints (perf's sys_enter and sys_exit events) is
# measured beside it.
# UNRELATED=touch has the unrelated process touch new pages instead (its
# pace in its own CPU time too): the rss_stat program runs at every change
# of every process's page counters, and returns at once for anonymous ones.
# Usage: bench/growth/unrelated.sh [ROUNDS] [ARENACTL] (as root; needs gcc
# and setpriv). ARENACTL: a binary to measure instead of building this
# tree (an older arenactl, to compare on the same machine).
set -eu
. "$(dirname "$0")/../lib.sh"
cd "$root"
ROUNDS=${1:-3}
WINDOW=${WINDOW:-4}
bench_cleanup() { kill $(jobs -p) 2>/dev/null || true; }
bench_work growth
D=$work
chmod 755 "$D"
gcc -O2 -o "$D/pace" bench/growth/pace.c
ARENACTL=${2:-} CGO_ENABLED=0 build_arenactl "$D/arenactl"

sleep 1000000 &
IDLE=$!
tool() { # tool MODE: runs for WINDOW seconds
	case $1 in
	none) sleep "$WINDOW" ;;
	arenactl) "$D/arenactl" growth --duration "${WINDOW}s" "$IDLE" >/dev/null 2>&1 ;;
	arenactl-tracepoints) "$D/arenactl" growth --tracepoints --duration "${WINDOW}s" "$IDLE" >/dev/null 2>&1 ;;
	esac
}

printf '| unrelated process | growth on another | pace before | pace with the window | slowdown |\n|---|---|---|---|---|\n'
for t in none arenactl arenactl-tracepoints; do
	rs=""
	for r in $(seq "$ROUNDS"); do
		: >"$D/out"
		PACE_CLOCK=cpu setpriv --reuid nobody --regid nogroup --clear-groups "$D/pace" "${UNRELATED:-getppid}" >>"$D/out" &
		P=$!
		while [ "$(wc -l <"$D/out")" -lt 9 ]; do sleep 0.1; done
		a=$(wc -l <"$D/out")
		tool $t
		b=$(wc -l <"$D/out")
		kill $P; wait $P 2>/dev/null || true
		before=$(sed -n "$((a - 7)),${a}p" "$D/out" | median)
		with=$(sed -n "$((a + 2)),$((b - 1))p" "$D/out" | median)
		rs="$rs $before:$with"
	done
	bm=$(for x in $rs; do echo "${x%%:*}"; done | median)
	wm=$(for x in $rs; do echo "${x##*:}"; done | median)
	printf '| %s as nobody | %s | %s ns | %s ns | %s ns (%s×) |\n' "${UNRELATED:-getppid}" $t "$bm" "$wm" \
		"$(awk -v w="$wm" -v b="$bm" 'BEGIN {printf "%+.0f", w - b}')" "$(awk -v w="$wm" -v b="$bm" 'BEGIN {printf "%.2f", w / b}')"
done
