#!/usr/bin/env bash
# How long do the worker threads of a busy process stall while a tool reads
# its malloc state? arenactl info against gdb's classic recipe
#   gdb -q -nx --batch -p PID -ex 'call (int) malloc_info(0, stdout)'
# on the same target (stall_target.c), in one run.
#
# usage: bench/run.sh [ROUNDS [WORKERS [PAUSE_US]]]
#   ROUNDS    rounds per tool (default 5)
#   WORKERS   worker threads of the target (default 8)
#   PAUSE_US  sleep at the end of each worker iteration (default 0: the
#             workers never stop running)
# A round is: reset the target's gap records, run the tool (timing its wall
# clock), read the longest gap any worker saw. The rounds go arenactl,
# baseline, gdb, arenactl, baseline, gdb, ...; a baseline round runs no tool
# and just waits as long as the arenactl run before it took, so it shows the
# stalls the workers see anyway (the scheduler, page faults) in a window of
# the same length.
#
# TOOLS (environment) changes the list of rounds, from: arenactl, baseline,
# gdb, and two controls for finding where a stall comes from: maps
# ("arenactl maps": starting arenactl and reading /proc, borrowing no thread)
# and self (the target's main thread calls malloc_info itself: what the call
# alone costs the workers). The baseline waits as long as the last arenactl
# round took, so list arenactl before it.
#
# PIN=1 pins the target's main thread and the tools to CPU 0 and the workers
# to the other CPUs: the stall a tool causes when it does not compete with
# the workers for their CPUs.
#
# The target reports how the worst iteration lost its time: "blocked"
# (voluntary context switches: a lock, a syscall), "preempted" (another
# task took its CPU) or "no-switch" (neither: the whole virtual CPU lost the
# time, to the hypervisor or to interrupts); every round shows it, and the
# steal time of the run (time the hypervisor gave to others) is printed.
#
# Needs go, gcc and gdb (gdb's recipe needs libc6-dbg for stdout's type). Run
# it as root, or as the user that may ptrace the target, on a quiet machine.
set -eu

rounds=${1:-5}
workers=${2:-8}
pause_us=${3:-0}
tools=${TOOLS:-arenactl baseline gdb}
pin_arg= on_cpu0=
if [ "${PIN:-0}" = 1 ]; then
	command -v taskset >/dev/null || { echo "run.sh: PIN=1 needs taskset (util-linux)" >&2; exit 1; }
	pin_arg=pin on_cpu0="taskset -c 0"
fi

. "$(dirname "$0")/lib.sh"
tpid=
bench_work bench
need go gcc gdb
build_arenactl "$work/arenactl"
gcc -O2 -g -Wall -pthread -o "$work/stall_target" "$root/bench/stall_target.c" || die "building stall_target failed"

# The target reads commands from one FIFO and answers on another (its fd 3);
# its stdout goes to a file, where gdb's malloc_info XML lands. Opening the
# FIFOs read-write never blocks, so a target that dies early cannot hang us.
mkfifo "$work/cmd" "$work/ans"
"$work/stall_target" "$workers" "$pause_us" $pin_arg <"$work/cmd" >"$work/target.stdout" 3>"$work/ans" &
tpid=$!
own "$tpid"
exec 4<>"$work/cmd" 5<>"$work/ans"

reply=
ask() {
	echo "$1" >&4
	IFS= read -r -t 60 reply <&5 || die "the target did not answer '$1' (exited?)"
}

loadavg=$(cut -d' ' -f1-3 /proc/loadavg) # the machine should be quiet: see README
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $9 }' /proc/stat; } # all, steal
read -r ticks0 steal0 <<EOF_TICKS
$(cpu_ticks)
EOF_TICKS
IFS= read -r -t 60 reply <&5 || die "the target did not start"
case $reply in ready*) ;; *) die "the target said '$reply'" ;; esac


results=$work/results # tool wall_us stall_ns stopped_us borrowed cause
: >"$results"

# round TOOL: one reset, tool, gaps cycle; appends a line to $results.
last_wall_us=0
round() {
	local tool=$1 start end stopped=- borrowed=- nap cause
	nap=$(awk -v us="$last_wall_us" 'BEGIN { printf "%.6f", us / 1e6 }')
	ask reset
	[ "$reply" = ok ] || die "reset: '$reply'"
	start=$(now_us)
	case $tool in
	arenactl)
		$on_cpu0 "$work/arenactl" info --json "$tpid" >"$work/info.json" || die "arenactl info failed (exit $?)"
		;;
	gdb)
		gdb_rc=0
		gdb_prefix=$on_cpu0 gdb_malloc_info "$tpid" || gdb_rc=$?
		[ "$gdb_rc" != 1 ] || gdb_check 1
		;;
	maps)
		$on_cpu0 "$work/arenactl" maps "$tpid" >/dev/null || die "arenactl maps failed (exit $?)"
		;;
	self)
		ask info
		case $reply in "ok "*) stopped=$((${reply#ok } / 1000)) ;; *) die "info: '$reply'" ;; esac
		;;
	baseline)
		sleep "$nap"
		;;
	*) die "unknown tool $tool" ;;
	esac
	end=$(now_us)
	ask gaps
	set -- $reply
	[ "$1" = gaps ] || die "gaps: '$reply'"
	# The worst iteration's context switches: voluntary ones mean the worker
	# blocked (a lock, a syscall), involuntary ones that it was preempted.
	case ${reply##* why } in
	"0 0") cause=no-switch ;;
	"0 "*) cause=preempted ;;
	*" 0") cause=blocked ;;
	*) cause=blocked+preempted ;;
	esac
	case $tool in
	arenactl)
		stopped=$(sed -n 's/.*"stopped_us": *\([0-9]*\).*/\1/p' "$work/info.json")
		borrowed=$(sed -n 's/.*"blocked_in": *"\([^"]*\)".*/\1/p' "$work/info.json")
		if [ "$(sed -n 's/.*"tid": *\([0-9]*\).*/\1/p' "$work/info.json")" = "$tpid" ]; then
			borrowed="main:$borrowed"
		else
			borrowed="worker:$borrowed"
		fi
		last_wall_us=$((end - start))
		;;
	gdb)
		gdb_check "$gdb_rc"
		;;
	esac
	echo "$tool $((end - start)) $2 $stopped $borrowed $cause" >>"$results"
}

for i in $(seq "$rounds"); do
	for tool in $tools; do
		round "$tool"
	done
done
ask quit
read -r ticks1 steal1 <<EOF_TICKS
$(cpu_ticks)
EOF_TICKS
steal=$(awk -v s=$((steal1 - steal0)) -v t=$((ticks1 - ticks0)) 'BEGIN { printf "%.1f%%", t ? 100 * s / t : 0 }')

# Every round, then the medians and the ratios.
awk -v rounds="$rounds" -v workers="$workers" -v pause="$pause_us" -v tools="$tools" -v loadavg="$loadavg" -v pin="$pin_arg" -v steal="$steal" \
	-v machine="$(nproc) CPUs, $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | sed -n '1s/.* //p'), kernel $(uname -r)" "$awk_median"'
{
	n[$1]++
	wall[$1, n[$1]] = $2 / 1000; stall[$1, n[$1]] = $3 / 1e6
	note = $1 == "arenactl" ? sprintf("  stopped %.2f ms, borrowed %s", $4 / 1000, $5) : $1 == "self" ? sprintf("  malloc_info took %.2f ms", $4 / 1000) : ""
	rows = rows sprintf("  %-9s %9.1f %9.2f  %-17s%s\n", $1, $2 / 1000, $3 / 1e6, $6, note)
	if ($1 == "arenactl") { ns++; stopped[ns] = $4 / 1000; who[$5]++ }
	if (!((k = $1 SUBSEP $6) in causes)) order_c[$1] = order_c[$1] (order_c[$1] == "" ? "" : " ") $6
	causes[k]++
}
END {
	printf "machine: %s\n", machine
	printf "target: %d workers, pause %d us per iteration%s; %d rounds per tool; load average before: %s\n\n", workers, pause, pin == "pin" ? ", pinned (tools on CPU 0, workers on the others)" : "", rounds, loadavg
	printf "every round (ms; how the worst iteration lost its time):\n  tool           wall     stall\n%s\n", rows
	printf "%-9s %16s %26s   %s\n", "tool", "median wall ms", "median worst stall ms", "worst iteration"
	nt = split(tools, order, " ")
	for (t = 1; t <= nt; t++) {
		k = order[t]
		for (i = 1; i <= n[k]; i++) { w[i] = wall[k, i]; s[i] = stall[k, i] }
		mw[k] = median(w, n[k]); ms[k] = median(s, n[k])
		nc = split(order_c[k], cs, " "); why = ""
		for (c = 1; c <= nc; c++) why = why (c > 1 ? ", " : "") cs[c] " x" causes[k, cs[c]]
		printf "%-9s %16.1f %26.2f   %s\n", k, mw[k], ms[k], why
	}
	printf "\ngdb/arenactl: wall %.1fx, worst stall %.1fx\n", mw["gdb"] / mw["arenactl"], ms["gdb"] / ms["arenactl"]
	if (n["baseline"]) printf "worst stall above the baseline: arenactl %+.2f ms, gdb %+.2f ms\n", ms["arenactl"] - ms["baseline"], ms["gdb"] - ms["baseline"]
	printf "arenactl injection.stopped_us, median: %.0f us (thread borrowed:", median(stopped, ns) * 1000
	for (k in who) printf " %s x%d", k, who[k]
	printf ")\n"
	printf "steal time during the run: %s of the CPUs\n", steal
	printf "goal (worst stall under arenactl >= 100x shorter than under gdb): %s\n",
		ms["gdb"] >= 100 * ms["arenactl"] ? "met" : "NOT met"
}' "$results"
