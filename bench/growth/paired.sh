#!/bin/bash
# Two arenactl binaries' growth windows on one target, alternated, for a
# machine shared with other work, where run.sh's before/after figures
# drift more than the difference sought: one pace target (pace.c, its pace
# in its own CPU time) runs throughout; PAIRS times, a 2 s gap, a WINDOW s
# growth window of A, a gap, a window of B. Each segment's figure is the
# median of its lines (the first and last left out); the output is every
# segment, then the median of the gaps, of A's windows and of B's.
# Usage: bench/growth/paired.sh A-ARENACTL B-ARENACTL [PAIRS] (as root;
# needs gcc). TARGET=touch for the page-touching target (default mmap).
set -eu
. "$(dirname "$0")/../lib.sh"
cd "$root"
A=$1 B=$2 PAIRS=${3:-8}
TARGET=${TARGET:-mmap} WINDOW=${WINDOW:-5}
bench_cleanup() { kill $(jobs -p) 2>/dev/null || true; }
bench_work growth
D=$work
gcc -O2 -o "$D/pace" bench/growth/pace.c
PACE_CLOCK=cpu "$D/pace" "$TARGET" >"$D/out" &
P=$!
sleep 3
mark() { echo "$1 $(wc -l <"$D/out")" >>"$D/marks"; }
for i in $(seq "$PAIRS"); do
	for b in A B; do
		bin=$A
		if [ $b = B ]; then bin=$B; fi
		mark gap; sleep 2; mark gap
		mark $b; "$bin" growth --duration "${WINDOW}s" $P >/dev/null 2>&1; mark $b
	done
done
while read -r k a && read -r _ b; do
	echo "$k $(sed -n "$((a + 2)),$((b - 1))p" "$D/out" | median)"
done <"$D/marks" >"$D/segs"
tr '\n' ' ' <"$D/segs"; echo
for k in gap A B; do
	echo "$k: median $(awk -v k=$k '$1 == k {print $2}' "$D/segs" | median) ns per operation ($TARGET, CPU time)"
done
