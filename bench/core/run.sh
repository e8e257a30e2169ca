#!/usr/bin/env bash
# Cores of a large heap: `arenactl snapshot` against gcore and the kernel's
# own core on the same kind of process, then `arenactl info CORE` on each
# (time and peak RSS, from /usr/bin/time -v). Optionally the same snapshot
# and analysis on a loaded MariaDB server (no gcore there: it dumps
# mariadbd's 8 TiB reservation and fills the disk).
# See README.md beside this file.
#
# usage: bench/core/run.sh [CASE...]
#   CASE is one of
#     medium    bigheap 16 24000 500: 16 threads and arenas, 200 MiB, 0.8 M
#               chunks; snapshot, gcore and kernel core
#     big       bigheap 16 131072 500: 16 threads and arenas, 1.1 GiB, 4.2 M
#               chunks; snapshot, gcore and kernel core (the default)
#     huge      bigheap 16 320000 400: 2.3 GiB, 10.2 M chunks; snapshot and
#               kernel core (no gcore)
#     mariadb   mariadbd after mariadb-slap; snapshot only
#   ROUNDS (environment, default 3): snapshots and analyses per core.
#   ARENACTL (environment): an arenactl binary to measure instead of one
#   built from this tree (to compare two builds).
# Needs go, gcc, gdb (gcore) and /usr/bin/time; mariadb-server and
# mariadb-client for the mariadb case. Run it as root on a quiet machine
# with free disk: about 3 GiB for big, 6 GiB for huge (checked first).
set -eu

cases=${*:-big}
rounds=${ROUNDS:-3}
dbpid=

. "$(dirname "$0")/../lib.sh"
bench_init core
need gcore /usr/bin/time

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
ms() { awk -v us="$1" 'BEGIN { printf "%.0f ms", us / 1000 }'; }
json() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$2" | head -1; }
ondisk() { du -B1 "$1" | cut -f1; }
anon_rss() { awk '/RssAnon/ { print $2 * 1024 }' "/proc/$1/status"; }
need_disk() { # need_disk GiB
	local avail
	avail=$(df -B1G --output=avail "$work" | tail -1 | tr -d ' ')
	[ "$avail" -ge "$1" ] || die "needs $1 GiB free in $work, has $avail GiB"
}

# start_target ARGS...: bigheap ARGS in $work/run, where its kernel core
# lands.
start_target() {
	start_bigheap "$work/run" "$@"
	set -- $reply
	echo "target: bigheap $*: pid $tpid, RSS $(mib "$(($(awk '/VmRSS/ {print $2}' /proc/$tpid/status) * 1024))"), anonymous RSS $(mib "$(anon_rss $tpid)")"
}

# analyze LABEL CORE: arenactl info CORE, ROUNDS times, with /usr/bin/time.
analyze() {
	local label=$1 core=$2 i
	for i in $(seq "$rounds"); do
		/usr/bin/time -v "$work/arenactl" info --json "$core" >"$work/info.json" 2>"$work/time.txt" ||
			die "arenactl info $core failed: $(tail -5 "$work/time.txt")"
		local wall rss chunks
		wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.txt")
		rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
		echo "  info $label: wall $wall, peak RSS $(mib $((rss * 1024))), user $(sed -n 's/.*User time (seconds): //p' "$work/time.txt") s, sys $(sed -n 's/.*System time (seconds): //p' "$work/time.txt") s"
	done
	chunks=$(awk '/"in_use_chunks"|"free_chunks"|"fast_chunks"/ { gsub(/[^0-9]/, "", $2); s += $2 } END { print s + 0 }' FS=: "$work/info.json")
	echo "  info $label: $chunks chunks walked"
}

# snapshots LABEL PID: arenactl snapshot ROUNDS times; keeps the last.
snapshots() {
	local label=$1 pid=$2 i start end
	for i in $(seq "$rounds"); do
		rm -f "$work/snap.core"
		start=$(now_us)
		"$work/arenactl" snapshot --json "$pid" -o "$work/snap.core" >"$work/snap.json" || die "arenactl snapshot failed (exit $?)"
		end=$(now_us)
		local size anon
		size=$(json file_bytes "$work/snap.json")
		anon=$(json anonymous_rss "$work/snap.json")
		echo "  snapshot $label: wall $(ms $((end - start))), frozen $(ms "$(json frozen_us "$work/snap.json")"), file $(mib "$size") ($(mib "$(ondisk "$work/snap.core")") on disk), anonymous RSS $(mib "$anon"): $(awk -v s="$size" -v a="$anon" 'BEGIN { printf "%.2f", s / a }')x"
	done
}

# kernel_core: kill -SEGV the target, wait for its core.
kernel_core() {
	local start end
	start=$(now_us)
	kill -SEGV "$tpid"
	wait "$tpid" 2>/dev/null || true
	end=$(now_us)
	tpid=
	exec 4>&- 5<&-
	[ -s "$work/run/core" ] || die "no kernel core in $work/run (core_pattern: $(cat /proc/sys/kernel/core_pattern))"
	mv "$work/run/core" "$work/kernel.core"
	echo "  kernel core: $(ms $((end - start))) from kill to exit (the process dies), file $(mib "$(stat -c %s "$work/kernel.core")") ($(mib "$(ondisk "$work/kernel.core")") on disk)"
}

case_bigheap() { # case_bigheap GCORE ARGS...
	local gc=$1
	shift
	start_target "$@"
	snapshots bigheap "$tpid"
	if [ "$gc" = yes ]; then
		local start end
		start=$(now_us)
		gcore -o "$work/gcore" "$tpid" >"$work/gcore.out" 2>&1 || die "gcore failed: $(tail -3 "$work/gcore.out")"
		end=$(now_us)
		echo "  gcore: $(ms $((end - start))) (every thread stopped throughout), file $(mib "$(stat -c %s "$work/gcore.$tpid")") ($(mib "$(ondisk "$work/gcore.$tpid")") on disk)"
	fi
	kernel_core
	analyze snapshot "$work/snap.core"
	analyze "kernel core" "$work/kernel.core"
	if [ "$gc" = yes ]; then
		analyze gcore "$work/gcore."*
	fi
	rm -f "$work/snap.core" "$work/kernel.core" "$work/gcore."*
}

case_mariadb() {
	need mariadbd mariadb-install-db mariadb-slap
	local d=$work/mariadb
	mkdir -p "$d"
	mariadb-install-db --no-defaults --user=root --datadir="$d/db" --auth-root-authentication-method=normal >"$d/install.log" 2>&1 ||
		die "mariadb-install-db failed: $(tail -3 "$d/install.log")"
	mariadbd --no-defaults --user=root --datadir="$d/db" --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" \
		--skip-networking --log-error="$d/err.log" --innodb-buffer-pool-size=256M >"$d/stdout.log" 2>&1 &
	dbpid=$!
	own "$dbpid"
	local i
	for i in $(seq 300); do
		[ -S "$d/mysqld.sock" ] && break
		kill -0 "$dbpid" 2>/dev/null || die "mariadbd exited: $(tail -3 "$d/err.log")"
		sleep 0.1
	done
	[ -S "$d/mysqld.sock" ] || die "mariadbd did not open its socket"
	mariadb-slap --no-defaults -S "$d/mysqld.sock" -uroot --concurrency=64 --iterations=3 \
		--number-of-queries=20000 --auto-generate-sql --auto-generate-sql-load-type=mixed \
		--auto-generate-sql-add-autoincrement >"$d/slap.log" 2>&1 || die "mariadb-slap failed: $(tail -3 "$d/slap.log")"
	echo "target: mariadbd after mariadb-slap: pid $dbpid, $(ls /proc/$dbpid/task | wc -l) threads, RSS $(mib "$(($(awk '/VmRSS/ {print $2}' /proc/$dbpid/status) * 1024))"), anonymous RSS $(mib "$(anon_rss $dbpid)")"
	snapshots mariadbd "$dbpid"
	analyze snapshot "$work/snap.core"
	rm -f "$work/snap.core"
	kill "$dbpid"
	wait "$dbpid" 2>/dev/null || true
	dbpid=
}

for c in $cases; do
	echo
	case $c in
	medium)
		need_disk 2
		echo "== medium: snapshot, gcore and kernel core"
		case_bigheap yes 16 24000 500
		;;
	big)
		need_disk 4
		echo "== big: snapshot, gcore and kernel core"
		case_bigheap yes 16 131072 500
		;;
	huge)
		need_disk 7
		echo "== huge: snapshot and kernel core"
		case_bigheap no 16 320000 400
		;;
	mariadb)
		need_disk 2
		echo "== mariadb: snapshot"
		case_mariadb
		;;
	*) die "unknown case $c" ;;
	esac
done
