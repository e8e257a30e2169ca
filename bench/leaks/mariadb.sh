#!/usr/bin/env bash
# arenactl leaks on a loaded MariaDB: mariadb-slap's queries per second
# without profiling, while `arenactl leaks` samples the server (default
# rate), and again without, ROUNDS times interleaved; medians and the
# ratio. A private mariadbd in a temporary directory (no network).
#
# TOOL=record measures `arenactl record` (default flags, a new recording
# each round) instead of leaks.
#
# usage: [TOOL=record] bench/leaks/mariadb.sh [ROUNDS [CLIENTS [QUERIES]]]   # defaults 3 16 20000
# Needs root, go, mariadb-server and mariadb-client; a quiet machine.
set -eu
rounds=${1:-3}
clients=${2:-16}
queries=${3:-20000}
tool=${TOOL:-leaks}
case $tool in leaks | record) ;; *) echo "TOOL is leaks or record" >&2; exit 2 ;; esac
. "$(dirname "$0")/../lib.sh"
server=
bench_work maria
need go mariadbd mariadb-install-db mariadb mariadb-slap
build_arenactl "$work/arenactl"
mariadb-install-db --no-defaults --user=root --datadir="$work/db" --auth-root-authentication-method=normal >/dev/null 2>&1 || die "mariadb-install-db failed"
mariadbd --no-defaults --user=root --datadir="$work/db" --socket="$work/sock" --pid-file="$work/pid" --skip-networking \
	--log-error="$work/err.log" --innodb-buffer-pool-size=256M &
server=$!
own "$server"
for i in $(seq 100); do mariadb --no-defaults -S "$work/sock" -uroot -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
echo "$(machine); $(mariadbd --version)"
# slap: the seconds mariadb-slap's run took.
slap() {
	mariadb-slap --no-defaults -S "$work/sock" -uroot --concurrency="$clients" --iterations=1 --number-of-queries="$queries" \
		--auto-generate-sql --auto-generate-sql-load-type=mixed --auto-generate-sql-add-autoincrement |
		awk '/Average number of seconds to run all queries/ {print $(NF-1)}'
}
slap >/dev/null # warm up
: >"$work/res"
: >"$work/cpu"
# ticks PID: the process's utime+stime in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
for i in $(seq "$rounds"); do
	echo "without $(slap)" >>"$work/res"
	if [ "$tool" = record ]; then
		"$work/arenactl" record -o "$work/rec.$i" "$server" >"$work/leaks.out" 2>&1 &
	else
		"$work/arenactl" leaks --duration 0 "$server" >"$work/leaks.out" 2>&1 &
	fi
	ap=$!
	for j in $(seq 100); do grep -q "window is open" "$work/leaks.out" && break; sleep 0.1; done
	# arenactl's own CPU (utime+stime, all threads) over the profiled
	# slap, per second of it: a figure the machine's other load moves
	# far less than the queries per second.
	c0=$(ticks "$ap")
	t0=$(date +%s%N)
	echo "profiled $(slap)" >>"$work/res"
	echo "$(($(ticks "$ap") - c0)) $(($(date +%s%N) - t0))" >>"$work/cpu"
	kill -INT "$ap"
	wait "$ap" || die "arenactl $tool failed: $(cat "$work/leaks.out")"
done
awk -v q="$queries" "$awk_median"'
{ n[$1]++; v[$1, n[$1]] = q / $2; printf "  %-9s %8.0f queries/s\n", $1, q / $2 }
END {
	for (k in n) { for (j = 1; j <= n[k]; j++) a[j] = v[k, j]; m[k] = median(a, n[k]) }
	printf "median: without %.0f, profiled %.0f queries/s: %.1f%% fewer\n", m["without"], m["profiled"], 100 * (1 - m["profiled"] / m["without"])
}' "$work/res"
awk -v hz="$hz" "$awk_median"'
{ n++; a[n] = $1 / hz / ($2 / 1e9) }
END { printf "arenactl %s: median %.3f CPU-seconds per second of the profiled slap\n", tool, median(a, n) }' tool="$tool" "$work/cpu"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E "samples|explains" "$work/leaks.out" | head -3
