#!/usr/bin/env bash
# Every command that walks or scans a large heap, at one worker and at two
# (and at N), on bench/walk/bigheap.c grown to the sizes asked for: wall
# time, CPU time, peak RSS, RSS per GiB of heap, and how much faster two
# workers are than one. See docs/scale.md.
#
# usage: bench/scale/run.sh [SIZE_GiB...]        (default: 1 4)
#        bench/scale/run.sh build DIR            static binaries and this script into DIR
# Environment:
#   JOBS=N      also run every command at --jobs N (e.g. 8 on 16 cores)
#   ROUNDS=R    runs of each command at each worker count (default 3; the
#               median is printed)
#   BUSY=B      start B churn threads in bigheap before the injected
#               commands (info, trim): the busy heap of issue 28 (default 0:
#               the heap stays still, so that only arenactl's own work is
#               measured)
#   ONLY="..."  the commands to run, of: info-ro heap snapshot info-core
#               info trim (default: all)
# It needs root (ptrace) and nothing else on the machine it measures: run
# from DIR (made by "build" on a machine with go and gcc), it uses the
# arenactl, bigheap, rusage and copyrate found there.
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=$here/lib.sh # in a DIR made by build
[ -f "$lib" ] || lib=$here/../lib.sh
. "$lib"

build() { # DIR: arenactl, rusage and copyrate static, bigheap against the system's glibc
	local dir=$1 root
	root=$(cd "$here/../.." && pwd)
	mkdir -p "$dir" || die "cannot make $dir"
	(cd "$root" && CGO_ENABLED=0 go build -o "$dir/arenactl" ./cmd/arenactl) || die "building arenactl failed"
	(cd "$root" && CGO_ENABLED=0 go build -o "$dir/rusage" ./bench/scale/rusage) || die "building rusage failed"
	(cd "$root" && CGO_ENABLED=0 go build -o "$dir/copyrate" ./bench/scale/copyrate) || die "building copyrate failed"
	gcc -O2 -g -Wall -pthread -o "$dir/bigheap" "$root/bench/walk/bigheap.c" || die "building bigheap failed"
	[ "$dir/run.sh" -ef "$here/run.sh" ] || cp "$here/run.sh" "$dir/run.sh"
	[ "$dir/lib.sh" -ef "$lib" ] || cp "$lib" "$dir/lib.sh"
}

if [ "${1:-}" = build ]; then
	[ $# -eq 2 ] || die "usage: $0 build DIR"
	build "$2"
	echo "built into $2: copy it to the machine to measure and run $2/run.sh there"
	exit 0
fi

sizes=${*:-1 4}
rounds=${ROUNDS:-3}
busy=${BUSY:-0}
only=${ONLY:-info-ro heap snapshot info-core info trim}
jobs_list="1 2"
[ -z "${JOBS:-}" ] || [ "$JOBS" = 1 ] || [ "$JOBS" = 2 ] || jobs_list="1 2 $JOBS"
[ "$(id -u)" = 0 ] || die "run it as root (arenactl reads another process's memory)"

tpid=
bench_work scale

if [ -x "$here/arenactl" ] && [ -x "$here/bigheap" ] && [ -x "$here/rusage" ] && [ -x "$here/copyrate" ]; then
	bin=$here
else
	bin=$work/bin
	build "$bin"
fi
arenactl=$bin/arenactl

machine
echo "arenactl: $("$arenactl" version 2>/dev/null | head -1); default --jobs: $("$arenactl" --help 2>/dev/null | sed -n 's/.*here \([0-9]*\)).*/\1/p' | head -1)"
echo "rounds: $rounds (medians); busy churn threads: $busy"
# What the machine's memory allows: a walk copies the heap (pread of a
# core, /proc/PID/mem of an image), so its workers go no faster together
# than this.
"$bin/copyrate" $jobs_list

bigheap=$bin/bigheap bigheap_wait=3600 bigheap_cores=0 # growing a heap of GiB takes a while; no cores of it
stop_bigheap() {
	ask quit
	wait "$tpid" 2>/dev/null || true
	tpid=
	exec 4>&- 5<&-
}


# field NAME: the first number named NAME in the run's JSON, or -.
field() {
	local v
	v=$(grep -o "\"$1\": *[0-9]*" "$work/out.json" | head -1 | grep -o '[0-9]*$')
	echo "${v:--}"
}

# run NAME JOBS: one run of command NAME at --jobs JOBS; appends
# "NAME JOBS WALL_US CPU_US MAXRSS_KIB FROZEN_US PREFLIGHT_US HELD_US" to
# $work/res (from its JSON: how long the process was stopped, the
# pre-flight walk, how long the borrowed thread was held; - where none).
run() {
	local name=$1 j=$2 out=$work/out.json
	local -a cmd
	case $name in
	info-ro) cmd=(info --read-only --json "$tpid") ;;
	heap) cmd=(heap --json "$tpid") ;;
	snapshot) cmd=(snapshot --json -o "$work/snap.core" "$tpid") ;;
	info-core) cmd=(info --json "$work/snap.core") ;;
	info) cmd=(info --json "$tpid") ;;
	trim) cmd=(trim --json "$tpid") ;;
	esac
	"$bin/rusage" "$work/ru" "$arenactl" --jobs "$j" "${cmd[@]}" >"$out" 2>"$work/err" ||
		die "arenactl ${cmd[*]} --jobs $j failed: $(head -c 500 "$work/err")"
	echo "$name $j $(cut -d' ' -f1-3 "$work/ru") $(field frozen_us) $(field preflight_us) $(field stopped_us)" >>"$work/res"
	awk -v n="$name" -v j="$j" '{printf "  %s --jobs %s: %.2f s\n", n, j, $1 / 1e6}' "$work/ru" >&2 # progress
}

for size in $sizes; do
	# bigheap's default 131072 pairs a thread make about 1.1 GiB in 16 arenas.
	pairs=$(awk -v s="$size" 'BEGIN {printf "%d", s * 131072 / 1.1}')
	start_bigheap "$work/t" 16 "$pairs" 500
	heap_kib=$(awk '/VmRSS/ {print $2}' /proc/"$tpid"/status)
	set -- $reply
	echo
	echo "== bigheap 16 $pairs 500: $(awk -v k="$heap_kib" 'BEGIN {printf "%.2f GiB", k / 1048576}') resident, $(($4 / 1048576)) MiB requested, $5 blocks freed"
	: >"$work/res"
	for name in $only; do
		case $name in
		info-ro | heap | snapshot | info-core | info | trim) ;;
		*) die "unknown command '$name' in ONLY" ;;
		esac
		if [ "$busy" -gt 0 ] && { [ "$name" = info ] || [ "$name" = trim ]; } && [ -z "${churning:-}" ]; then
			ask "busy $busy"
			[ "$reply" = ok ] || die "busy: '$reply'"
			churning=1
		fi
		if [ "$name" = info-core ] && [ ! -f "$work/snap.core" ]; then
			run snapshot 1 # the core to read; not counted
			sed -i '$d' "$work/res"
		fi
		for _ in $(seq "$rounds"); do
			for j in $jobs_list; do # interleaved: both see the same machine
				run "$name" "$j"
			done
		done
	done
	unset churning
	rm -f "$work/snap.core"
	stop_bigheap
	printf '%-10s %5s %9s %9s %10s %12s %10s  %s\n' command jobs wall_s cpu_s peak_MiB "RSS B/GiB" "j1/j2 wall" "stop / pre-flight / thread held (ms)"
	for name in $only; do
		w1=
		for j in $jobs_list; do
			wall=$(awk -v n="$name" -v j="$j" '$1 == n && $2 == j {print $3}' "$work/res" | median)
			cpu=$(awk -v n="$name" -v j="$j" '$1 == n && $2 == j {print $4}' "$work/res" | median)
			rss=$(awk -v n="$name" -v j="$j" '$1 == n && $2 == j {print $5}' "$work/res" | median)
			[ -n "$w1" ] || w1=$wall
			ratio=-
			[ "$j" != 2 ] || ratio=$(awk -v a="$w1" -v b="$wall" 'BEGIN {printf "%.2fx", a / b}')
			detail=
			for f in 6 7 8; do
				v=$(awk -v n="$name" -v j="$j" -v f="$f" '$1 == n && $2 == j && $f != "-" {print $f}' "$work/res" | median)
				detail="$detail $(awk -v v="$v" 'BEGIN {if (v == "" || v == "nan") print "-"; else printf "%.1f", v / 1e3}')"
			done
			awk -v n="$name" -v j="$j" -v w="$wall" -v c="$cpu" -v r="$rss" -v h="$heap_kib" -v x="$ratio" -v d="$detail" 'BEGIN {
				split(d, a, " ")
				printf "%-10s %5s %9.2f %9.2f %10.0f %12.0f %10s  %s / %s / %s\n", n, j, w / 1e6, c / 1e6, r / 1024, r * 1024 / (h / 1048576), x, a[1], a[2], a[3] }'
		done
	done
done
