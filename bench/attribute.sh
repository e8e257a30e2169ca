#!/usr/bin/env bash
# Where does the stall that arenactl adds come from? run.sh says how long
# the worst worker iteration was; this says what ran on the CPUs meanwhile.
# It runs `arenactl info` on stall_target while perf records every context
# switch, then prints for each round:
#   - arenactl's CPU time before the borrowed thread was first run, while it
#     was held, and after (the held window is the first to the last run of
#     the target's main thread, which otherwise sleeps in read(2));
#   - the longest time any worker spent off its CPU, and the CPU time each
#     kind of task (worker, the target's main thread, arenactl, other
#     processes, idle) used on all CPUs during it.
#
# usage: bench/attribute.sh [ROUNDS [WORKERS]]     (defaults: 5 rounds, 8 workers)
#   ARGS (environment) are added to arenactl's: ARGS=--no-heap-check
#   shows the stall without the pre-flight walk; PREFIX runs arenactl under
#   a command (PREFIX="nice -n 19").
# Needs perf with the sched tracepoints, run as root.
set -eu

rounds=${1:-5}
workers=${2:-8}
. "$(dirname "$0")/lib.sh"
tpid= ppid=
bench_work attr
need go gcc perf
build_arenactl "$work/arenactl"
gcc -O2 -g -Wall -pthread -o "$work/stall_target" "$root/bench/stall_target.c" || die "building stall_target failed"

mkfifo "$work/cmd" "$work/ans"
"$work/stall_target" "$workers" 0 <"$work/cmd" >/dev/null 3>"$work/ans" &
tpid=$!
own "$tpid" INT
exec 4<>"$work/cmd" 5<>"$work/ans"
IFS= read -r -t 60 reply <&5 || die "the target did not start"

perf record -q -e sched:sched_switch -a -o "$work/perf.data" >/dev/null 2>&1 &
ppid=$!
own "$ppid" INT
# perf's own start-up is not a round's: wait until it writes events.
for i in $(seq 100); do
	[ "$(stat -c %s "$work/perf.data" 2>/dev/null || echo 0)" -gt 0 ] && break
	sleep 0.1
done
sleep 1
tools=
for i in $(seq "$rounds"); do
	${PREFIX:-} "$work/arenactl" info --json ${ARGS:-} "$tpid" >"$work/info.json" &
	p=$!
	wait "$p" || die "arenactl info failed (exit $?)"
	tools="$tools $p"
	sleep 0.3
done
kill -INT "$ppid"
wait "$ppid" 2>/dev/null || true
ppid=
perf script -i "$work/perf.data" -F pid,tid,cpu,time,trace >"$work/trace" 2>/dev/null || die "perf script failed"

# Two passes over the trace: the first learns each thread's process (a
# line's own task is the one switched out), the second replays the CPUs.
awk -v T="$tpid" -v tools="$tools" -v workers="$workers" "$awk_median"'
function kind(tid,   g) {
	if (tid == 0) return "idle"
	g = tgid[tid]
	if (g == T) return tid == T ? "main" : "worker"
	if (g in tool) return "arenactl"
	return "other"
}
function field(s, key,   m) {
	if (!match(s, key "=[^ ]+")) return ""
	return substr(s, RSTART + length(key) + 1, RLENGTH - length(key) - 1)
}
BEGIN { n = split(tools, tl, " "); for (i = 1; i <= n; i++) { tool[tl[i]] = i } }
NR == FNR {
	split($1, pt, "/"); tgid[pt[2]] = pt[1]
	next
}
{
	split($1, pt, "/"); cpu = $2; gsub(/[\[\]]/, "", cpu); t = $3; sub(/:$/, "", t); t += 0
	prev = field($0, "prev_pid"); nxt = field($0, "next_pid")
	if (cpu in cur) { nr++; rs[nr] = since[cpu]; re[nr] = t; rt[nr] = cur[cpu] }
	cur[cpu] = nxt; since[cpu] = t
	if (tgid[prev] == T && prev != T) out[prev] = t
	if (tgid[nxt] == T && nxt != T && (nxt in out)) { ng++; gs[ng] = out[nxt]; ge[ng] = t; delete out[nxt] }
	g = tgid[prev]
	if (g in tool) { i = tool[g]; if (!(i in w0)) w0[i] = t; w1[i] = t }
}
END {
	printf "target: %d workers, pause 0; %d rounds; times in ms; cpu = CPU time used on all CPUs\n\n", workers, n
	printf "round  window  arenactl cpu: before  held(window)  after   worst gap   in it: worker  main  arenactl  other  idle\n"
	for (i = 1; i <= n; i++) {
		if (!(i in w0)) { printf "%5d  (no event of arenactl pid %s recorded)\n", i, tl[i]; continue }
		a = w0[i]; b = w1[i]; h0 = h1 = 0
		for (r = 1; r <= nr; r++) if (rt[r] == T && re[r] > a && rs[r] < b) { if (!h0 || rs[r] < h0) h0 = rs[r]; if (re[r] > h1) h1 = re[r] }
		if (!h0) h0 = h1 = b
		split("", c); split("", in_gap)
		for (r = 1; r <= nr; r++) {
			if (kind(rt[r]) != "arenactl" || tgid[rt[r]] != tl[i]) continue
			lo = rs[r] > a ? rs[r] : a; hi = re[r] < b ? re[r] : b
			if (hi <= lo) continue
			if (hi <= h0) c["before"] += hi - lo
			else if (lo >= h1) c["after"] += hi - lo
			else c["held"] += hi - lo
		}
		best = 0
		for (k = 1; k <= ng; k++) if (ge[k] > a && gs[k] < b && ge[k] - gs[k] > best) { best = ge[k] - gs[k]; bs = gs[k]; be = ge[k] }
		for (r = 1; r <= nr; r++) {
			lo = rs[r] > bs ? rs[r] : bs; hi = re[r] < be ? re[r] : be
			if (hi > lo) in_gap[kind(rt[r])] += hi - lo
		}
		printf "%5d %7.1f %20.1f %6.1f(%6.1f) %6.1f %10.1f %15.1f %5.1f %9.1f %6.1f %5.1f\n", i, (b - a) * 1e3, c["before"] * 1e3, c["held"] * 1e3, (h1 - h0) * 1e3, c["after"] * 1e3, best * 1e3,
			in_gap["worker"] * 1e3, in_gap["main"] * 1e3, in_gap["arenactl"] * 1e3, in_gap["other"] * 1e3, in_gap["idle"] * 1e3
		m++; mb[m] = c["before"] * 1e3; mh[m] = c["held"] * 1e3; ma[m] = c["after"] * 1e3; mg[m] = best * 1e3; mi[m] = in_gap["arenactl"] * 1e3; mo[m] = in_gap["other"] * 1e3
	}
	if (!m) exit 1
	printf "\nmedians: arenactl cpu before %.1f, held %.1f, after %.1f; worst gap %.1f, of which arenactl %.1f and other processes %.1f\n",
		median(mb, m), median(mh, m), median(ma, m), median(mg, m), median(mi, m), median(mo, m)
}' "$work/trace" "$work/trace"
echo quit >&4
