#!/usr/bin/env bash
# What the copy-on-write image's stop costs a process with many threads:
# testdata/many_threads.c with THREADS parked threads and a ticker thread
# that allocates nothing; each round runs `info --read-only` with every
# arenactl named and prints the stop it reports and the longest gap the
# ticker saw. See docs/scale.md.
#
# usage: bench/scale/threads.sh [ARENACTL...]     (default: arenactl built from this tree)
# Environment: THREADS (default 2000), ROUNDS (default 5). Needs root, go, gcc.
set -eu
. "$(dirname "$0")/../lib.sh"
bench_work threads
tmp=$work
need gcc
gcc -O2 -pthread -o "$tmp/many_threads" "$root/testdata/many_threads.c" || die "building many_threads failed"
if [ $# -eq 0 ]; then
	need go
	build_arenactl "$tmp/arenactl"
	set -- "$tmp/arenactl"
fi
mkfifo "$tmp/in"
"$tmp/many_threads" "${THREADS:-2000}" >"$tmp/out" 2>&1 <"$tmp/in" &
mt=$!
own "$mt"
exec 7>"$tmp/in"
for _ in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.2; done
answer() { # ask "gaps" and print the answer
	local n
	n=$(grep -c '^gaps' "$tmp/out" || true)
	echo gaps >&7
	for _ in $(seq 100); do [ "$(grep -c '^gaps' "$tmp/out")" -gt "$n" ] && break; sleep 0.05; done
	grep '^gaps' "$tmp/out" | tail -1 | awk '{printf "%.1f", $2 / 1e6}'
}
echo tick >&7
sleep 0.5
echo "threads: $(ls /proc/$mt/task | wc -l); stop as reported / ticker's longest gap (ms) / load average"
for r in $(seq "${ROUNDS:-5}"); do
	for a in "$@"; do
		answer >/dev/null
		stop=$("$a" info --read-only "$mt" 2>&1 | grep -oE 'stopped for [0-9.]+ ?m?s' | awk '{print $3 ($4 == "" ? "" : " ms")}')
		echo "$r $a: ${stop:-?} / $(answer) / $(cut -d' ' -f1 /proc/loadavg)"
	done
done
echo quit >&7
