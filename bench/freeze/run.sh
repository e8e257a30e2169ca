#!/usr/bin/env bash
# How long each way of reading a large heap stops the process, in one run:
# bigheap.c (bench/walk) at one or more sizes, and on each, ROUNDS times,
# interleaved:
#   ro-image    arenactl info --read-only (the default: a copy-on-write image)
#   ro-walk     arenactl info --read-only --freeze walk (stopped for the walk)
#   snap-image  arenactl snapshot (written from an image)
#   snap-walk   arenactl snapshot --freeze walk (stopped while written)
#   inject      arenactl info (glibc's malloc_info in one borrowed thread)
#   gdb         gdb -p PID -ex 'call (int) malloc_info(0, stdout)'
#   baseline    nothing for 1 s: the gaps the machine causes anyway
# For each: the wall time, the longest gap the target's ticker thread saw
# (every tool that stops every thread shows up there), the frozen_us the
# tool reports, and arenactl's peak RSS. Then the medians, and the stall of
# each against gdb's as a ratio. walkbench's chunks/s come first.
#
# usage: bench/freeze/run.sh [ROUNDS [SIZE...]]
#   ROUNDS  default 3
#   SIZE    bigheap's "THREADS PAIRS MAXREQ" in quotes; default
#           "16 131072 500" (1.1 GiB) and "16 524288 500" (4.3 GiB)
# TOOLS="ro-image gdb" limits the tools. Needs root, go, gcc, gdb (with
# libc6-dbg) and /usr/bin/time; a quiet machine. See bench/freeze/README.md.
set -eu

rounds=${1:-3}
shift || true
[ $# -gt 0 ] || set -- "16 131072 500" "16 524288 500"
tools=${TOOLS:-ro-image ro-walk snap-image snap-walk inject gdb baseline}

. "$(dirname "$0")/../lib.sh"
bench_init freeze
need gdb
[ -x /usr/bin/time ] || die "/usr/bin/time is not installed"
(cd "$root" && go build -o "$work/walkbench" ./bench/walk/walkbench) || die "building walkbench failed"

# rss FILE: the peak RSS /usr/bin/time wrote, in KiB.
rss() { tail -1 "$1"; }

for size in "$@"; do
	start_bigheap "$work/run" $size
	set -- $reply
	echo "target: bigheap $size: $2 threads, $(($4 / 1048576)) MiB requested, $5 blocks freed; RSS $(awk '/VmRSS/ {printf "%.0f MiB", $2 / 1024}' /proc/$tpid/status), page tables $(awk '/VmPTE/ {printf "%.1f MiB", $2 / 1024}' /proc/$tpid/status)"
	"$work/walkbench" -pid "$tpid" -n 1 || die "walkbench failed"
	ask tick
	[ "$reply" = ok ] || die "tick: '$reply'"
	results=$work/results
	: >"$results"
	for i in $(seq "$rounds"); do
		for tool in $tools; do
			ask gaps # start afresh
			start=$(now_us)
			frozen=-
			peak=-
			timed() { /usr/bin/time -f %M -o "$work/time" "$@"; }
			case $tool in
			ro-image | ro-walk)
				mode=${tool#ro-}
				timed "$work/arenactl" info --read-only --freeze "$mode" --json "$tpid" >"$work/out.json" || die "$tool failed (exit $?)"
				frozen=$(sed -n 's/.*"frozen_us": *\([0-9]*\).*/\1/p' "$work/out.json" | head -1)
				peak=$(rss "$work/time")
				;;
			snap-image | snap-walk)
				mode=${tool#snap-}
				timed "$work/arenactl" snapshot --freeze "$mode" --json -o "$work/snap.core" "$tpid" >"$work/out.json" || die "$tool failed (exit $?)"
				frozen=$(sed -n 's/.*"frozen_us": *\([0-9]*\).*/\1/p' "$work/out.json" | head -1)
				peak=$(rss "$work/time")
				rm -f "$work/snap.core"
				;;
			inject)
				timed "$work/arenactl" info --json "$tpid" >"$work/out.json" || die "$tool failed (exit $?)"
				peak=$(rss "$work/time")
				;;
			gdb)
				gdb_malloc_info_or_die "$tpid"
				;;
			baseline) sleep 1 ;;
			esac
			end=$(now_us)
			ask gaps
			set -- $reply
			[ "$1" = gaps ] || die "gaps: '$reply'"
			echo "$tool $((end - start)) $2 $frozen $peak" >>"$results"
		done
	done
	ask quit
	exec 4>&- 5<&-
	wait "$tpid" 2>/dev/null || true

	awk -v tools="$tools" "$awk_median"'
	{
		k = $1; n[k]++
		wall[k, n[k]] = $2 / 1000; gap[k, n[k]] = $3 / 1e6
		frozen[k, n[k]] = $4 == "-" ? -1 : $4 / 1000
		peak[k, n[k]] = $5 == "-" ? -1 : $5 / 1024
	}
	END {
		printf "%-11s %10s %12s %12s %10s %12s\n", "tool", "wall", "longest gap", "frozen_us", "peak RSS", "gdb gap / gap"
		split(tools, order, " ")
		for (ti = 1; ti in order; ti++) {
			k = order[ti]
			for (i = 1; i <= n[k]; i++) { w[i] = wall[k, i]; g[i] = gap[k, i]; f[i] = frozen[k, i]; p[i] = peak[k, i] }
			mw[k] = median(w, n[k]); mg[k] = median(g, n[k]); mf[k] = median(f, n[k]); mp[k] = median(p, n[k])
		}
		for (ti = 1; ti in order; ti++) {
			k = order[ti]
			fs = "-"; if (mf[k] >= 0) fs = sprintf("%.1f ms", mf[k])
			ps = "-"; if (mp[k] >= 0) ps = sprintf("%.0f MiB", mp[k])
			rs = "-"; if (n["gdb"] > 0 && mg[k] > 0) rs = sprintf("%.1fx", mg["gdb"] / mg[k])
			printf "%-11s %7.1f ms %9.1f ms %12s %10s %12s\n", k, mw[k], mg[k], fs, ps, rs
		}
	}' "$results"
	echo
done
