#!/usr/bin/env bash
# How long info and trim stop the threads of a busy process, against gdb's
# recipe and a plain fork, in one run: bigheap.c (bench/walk) at one or more
# sizes, with BUSY churn threads rewriting its fragmented arenas without
# pause (bigheap "busy": they free kept blocks, which coalesce with the free
# chunks beside them, and allocate new ones from the bins). On each, ROUNDS
# times, interleaved:
#   info      arenactl info (glibc's malloc_info in one borrowed thread,
#             after the damage check)
#   trim      arenactl trim
#   old       $ARENACTL_OLD info, when set: an earlier arenactl to compare
#   gdb       gdb -p PID -ex 'call (int) malloc_info(0, stdout)'
#   fork      the target forks once and reaps the child: what a plain fork
#             costs the other threads
#   baseline  nothing for 1 s: the gaps the machine causes anyway
# For each: the wall time and the longest gap of bigheap's ticker, a thread
# that allocates nothing (a tool that stops every thread shows up there;
# arenas' locks do not touch it), and for arenactl how long the borrowed
# thread was held, how many arenas the check walked again under their lock
# and for how long. Then the medians, and each stall against gdb's.
#
# usage: bench/busy/run.sh [ROUNDS [SIZE...]]
#   ROUNDS  default 3
#   SIZE    bigheap's "THREADS PAIRS MAXREQ" in quotes; default
#           "16 36000 500" (0.3 GiB), "16 131072 500" (1.1 GiB) and
#           "16 524288 500" (4.3 GiB)
# BUSY=4 churn threads; TOOLS="info gdb" limits the tools. Needs root, go,
# gcc, gdb (with libc6-dbg); a quiet machine. See bench/busy/README.md.
set -eu

rounds=${1:-3}
shift || true
[ $# -gt 0 ] || set -- "16 36000 500" "16 131072 500" "16 524288 500"
tools=${TOOLS:-info trim gdb fork baseline}
[ -z "${ARENACTL_OLD:-}" ] || tools="$tools old"
busy=${BUSY:-4}

. "$(dirname "$0")/../lib.sh"
bench_init busy
need gdb

# field NAME: an integer field of $work/out.json.
field() { sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$work/out.json" | head -1; }

for size in "$@"; do
	start_bigheap "$work/run" $size
	set -- $reply
	echo "target: bigheap $size: $2 threads, $(($4 / 1048576)) MiB requested, $5 blocks freed; RSS $(awk '/VmRSS/ {printf "%.0f MiB", $2 / 1024}' /proc/$tpid/status); $busy churn threads"
	ask tick
	[ "$reply" = ok ] || die "tick: '$reply'"
	ask "busy $busy"
	[ "$reply" = ok ] || die "busy: '$reply'"
	sleep 1
	results=$work/results
	: >"$results"
	gdb_broke=0
	for i in $(seq "$rounds"); do
		for tool in $tools; do
			ask gaps # start afresh
			start=$(now_us)
			held=- locked=- lockus=-
			case $tool in
			info | trim)
				"$work/arenactl" "$tool" --json "$tpid" >"$work/out.json" || die "$tool failed (exit $?)"
				held=$(field stopped_us) locked=$(field preflight_locked_arenas) lockus=$(field preflight_lock_held_us)
				;;
			old)
				"$ARENACTL_OLD" info --json "$tpid" >"$work/out.json" || die "$tool failed (exit $?)"
				held=$(field stopped_us)
				;;
			gdb)
				# On a CPU with AMX, gdb 13 runs the call but then cannot
				# write the thread's extended state back ("Couldn't write
				# extended state status") and exits 1, leaving the thread
				# with a kernel restart code in rax (bigheap reads again).
				# The stop is measured all the same; such rounds are counted.
				rc=0
				gdb_malloc_info "$tpid" || rc=$?
				if [ "$rc" = 1 ] && grep -q "Couldn't write extended state" "$work/gdb.out"; then
					gdb_broke=$((gdb_broke + 1))
				else
					gdb_check "$rc"
				fi
				;;
			fork)
				ask fork
				[ "$reply" = ok ] || die "fork: '$reply'"
				;;
			baseline) sleep 1 ;;
			esac
			end=$(now_us)
			ask gaps
			set -- $reply
			[ "$1" = gaps ] || die "gaps: '$reply'"
			echo "$tool $((end - start)) $2 $held $locked $lockus" >>"$results"
		done
	done
	ask churned
	echo "churn: $reply replacements in all; gdb could not put the thread back after $gdb_broke of its calls"
	ask quit
	exec 4>&- 5<&-
	wait "$tpid" 2>/dev/null || true

	awk -v tools="$tools" "$awk_median"'
	{
		k = $1; n[k]++
		wall[k, n[k]] = $2 / 1000; gap[k, n[k]] = $3 / 1e6
		held[k, n[k]] = $4 == "-" ? -1 : $4 / 1000
		locked[k, n[k]] = $5 == "-" ? -1 : $5
		lockms[k, n[k]] = $6 == "-" ? -1 : $6 / 1000
		rows[k] = rows[k] sprintf(" %.1f", $3 / 1e6)
	}
	END {
		printf "%-9s %10s %12s %12s %14s %12s   %s\n", "tool", "wall", "longest gap", "thread held", "locks (held)", "gdb / tool", "every gap (ms)"
		split(tools, order, " ")
		for (ti = 1; ti in order; ti++) {
			k = order[ti]
			for (i = 1; i <= n[k]; i++) { w[i] = wall[k, i]; g[i] = gap[k, i]; h[i] = held[k, i]; l[i] = locked[k, i]; m[i] = lockms[k, i] }
			mw[k] = median(w, n[k]); mg[k] = median(g, n[k]); mh[k] = median(h, n[k]); ml[k] = median(l, n[k]); mm[k] = median(m, n[k])
		}
		for (ti = 1; ti in order; ti++) {
			k = order[ti]
			hs = "-"; if (mh[k] >= 0) hs = sprintf("%.1f ms", mh[k])
			ls = "-"; if (ml[k] >= 0) ls = sprintf("%d (%.1f ms)", ml[k], mm[k])
			rs = "-"; if (n["gdb"] > 0 && mg[k] > 0) rs = sprintf("%.1fx", mg["gdb"] / mg[k])
			printf "%-9s %7.1f ms %9.1f ms %12s %14s %12s  %s\n", k, mw[k], mg[k], hs, ls, rs, rows[k]
		}
	}' "$results"
	echo
done
