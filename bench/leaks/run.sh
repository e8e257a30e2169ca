#!/usr/bin/env bash
# The heap profiler's cost on its worst case, bench/leaks/loop.c (one
# thread doing nothing but malloc+free), in one run:
#   before       the loop alone
#   arenactl     while `arenactl leaks PID` samples it (default rate 512 KiB)
#   after        once arenactl detached
#   heaptrack    while `heaptrack -p PID` traces it (if installed)
#   bpftrace     while a bpftrace uprobe on malloc counts calls (if installed)
# Each phase lasts SECONDS (default 4); the loop alone and arenactl's phases
# alternate CYCLES times (default 3). The loop reports ns per pair every
# 250 ms; the median of each kind of phase is printed, with its ratio to
# the loop alone.
#
# TOOL=record runs `arenactl record` (default interval, to a file) in
# arenactl's phases instead of `arenactl leaks`.
#
# usage: bench/leaks/run.sh [SECONDS]
# Needs root, go, gcc; a quiet machine. See bench/leaks/README.md.
set -eu
secs=${1:-4}
. "$(dirname "$0")/../lib.sh"
loop_pid=
heaptrack_failed=
bench_cleanup() { jobs -p | xargs -r kill 2>/dev/null || true; }
bench_work leaks
need go gcc
build_arenactl "$work/arenactl"
gcc -O2 -o "$work/loop" "$root/bench/leaks/loop.c" || die "building loop.c failed"
machine

"$work/loop" >"$work/ns" &
loop_pid=$!
own "$loop_pid"
sleep 1
mark() { wc -l <"$work/ns"; }
# phase NAME: the lines the loop printed from now for $secs seconds.
phase() {
	local from
	from=$(mark)
	sleep "$secs"
	tail -n +"$((from + 1))" "$work/ns" | head -n "$((secs * 4 - 1))" | awk -v name="$1" '{print name, $2}' >>"$work/phases"
}
: >"$work/phases"
# Unprofiled and profiled phases alternate CYCLES times (default 3), so
# that the machine's drift falls on both alike.
for c in $(seq "${CYCLES:-3}"); do
	phase before
	if [ "${TOOL:-leaks}" = record ]; then
		"$work/arenactl" record --duration "$((secs + 2))s" -o "$work/rec.$c" "$loop_pid" >"$work/arenactl.out" 2>&1 &
	else
		"$work/arenactl" leaks --duration "$((secs + 2))s" "$loop_pid" >"$work/arenactl.out" 2>&1 &
	fi
	ap=$!
	sleep 1
	phase arenactl
	wait "$ap" || die "arenactl leaks failed: $(cat "$work/arenactl.out")"
	sleep 0.5
	phase after
done
if command -v bpftrace >/dev/null; then
	libc=$(awk '$6 ~ /libc\.so\.6$/ {print $6; exit}' /proc/$loop_pid/maps)
	bpftrace -p "$loop_pid" -e "uprobe:$libc:malloc { @n = count(); }" >"$work/bpftrace.out" 2>&1 &
	bp=$!
	sleep 2
	phase bpftrace
	kill -INT "$bp" 2>/dev/null || true
	wait "$bp" 2>/dev/null || true
fi
# heaptrack last: it traces until the target exits (its library in the
# target writes to a pipe its interpreter reads), so the loop ends with it.
if command -v heaptrack >/dev/null; then
	setsid heaptrack -o "$work/ht" -p "$loop_pid" >"$work/heaptrack.out" 2>&1 &
	hp=$!
	sleep 3
	# heaptrack -p injects its library through gdb; when that fails the
	# loop runs on untraced, and a phase would read 1.00x of nothing.
	if grep -q heaptrack "/proc/$loop_pid/maps" 2>/dev/null; then
		phase heaptrack
	else
		heaptrack_failed="heaptrack: \`heaptrack -p\` did not attach (its library is not in the loop's mappings), so it measured nothing: $(grep -v '^$' "$work/heaptrack.out" | tail -n 1)"
	fi
	kill "$loop_pid" 2>/dev/null || true
	loop_pid=
	sleep 1
	kill -- -"$hp" 2>/dev/null || true
	wait "$hp" 2>/dev/null || true
fi
awk "$awk_median"'
{ k = $1; if (!(k in n)) order[++m] = k; n[k]++; v[k, n[k]] = $2 }
END {
	printf "%-10s %14s %10s\n", "phase", "ns per pair", "vs before"
	for (i = 1; i <= m; i++) {
		k = order[i]
		for (j = 1; j <= n[k]; j++) a[j] = v[k, j]
		med[k] = median(a, n[k])
		printf "%-10s %11.1f ns %9.2fx\n", k, med[k], med[k] / med["before"]
	}
}' "$work/phases"
[ -z "${heaptrack_failed:-}" ] || echo "$heaptrack_failed"
echo
sed -n '1,3p' "$work/arenactl.out"
