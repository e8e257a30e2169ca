# What every bench script shares: sourced, not run (. "$(dirname "$0")/lib.sh"
# or ../lib.sh). bench_work NAME makes $work, removed on exit with every
# process own'd; bench_init NAME also builds arenactl (or copies $ARENACTL)
# and bigheap into it and prints the machine.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=
owned=

# own PID [SIGNAL]: kill PID (with SIGNAL, TERM unless given: perf writes
# its file on INT) and wait for it when the script exits.
own() { owned="$owned $1:${2:-TERM}"; }

bench_exit() {
	exec 4>&- 5<&- 2>/dev/null || true
	local o p rev=
	for o in $owned; do rev="$o $rev"; done # the last started first
	for o in $rev; do
		p=${o%%:*}
		# Only a job of this shell not yet waited for: a pid reaped
		# already may be another process's by now.
		jobs -p | grep -qx "$p" || continue
		kill -"${o##*:}" "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	! declare -F bench_cleanup >/dev/null || bench_cleanup
	[ -z "$work" ] || rm -rf "$work"
}

die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}

# need PROG...: die unless each is installed.
need() {
	local prog
	for prog in "$@"; do
		command -v "$prog" >/dev/null || die "$prog is not installed"
	done
}

# bench_work NAME: a fresh $work, and the traps that clean up on exit
# (bench_cleanup too, when the script defines it).
bench_work() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/arenactl-$1.XXXXXX")
	trap bench_exit EXIT
	trap 'exit 130' INT TERM HUP
}

# build_arenactl FILE: arenactl built from this tree, or $ARENACTL copied.
build_arenactl() {
	if [ -n "${ARENACTL:-}" ]; then
		cp "$ARENACTL" "$1" || die "no arenactl at $ARENACTL"
	else
		(cd "$root" && go build -o "$1" ./cmd/arenactl) || die "building arenactl failed"
	fi
}

machine() {
	echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | sed -n '1s/.* //p'), kernel $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

bench_init() {
	bench_work "$1"
	need go gcc
	build_arenactl "$work/arenactl"
	gcc -O2 -g -Wall -pthread -o "$work/bigheap" "$root/bench/walk/bigheap.c" || die "building bigheap failed"
	machine
}

now_us() { echo "${EPOCHREALTIME/./}"; }

# gdb_malloc_info PID: the recipe arenactl replaces, glibc's malloc_info
# called by gdb in the process (run under $gdb_prefix, e.g. taskset, when
# set); its output in $work/gdb.out. Fails (1) when gdb does, (2) when
# malloc_info did not return 0.
gdb_malloc_info() {
	${gdb_prefix:-} gdb -q -nx --batch -p "$1" -ex 'call (int) malloc_info(0, stdout)' >"$work/gdb.out" 2>&1 || return 1
	grep -q '^\$1 = 0$' "$work/gdb.out" || return 2
}

# gdb_check RC: dies with gdb's words unless gdb_malloc_info's RC is 0.
gdb_check() {
	case $1 in
	0) ;;
	1) die "gdb failed: $(cat "$work/gdb.out")" ;;
	*) die "gdb's malloc_info did not return 0: $(cat "$work/gdb.out")" ;;
	esac
}

# gdb_malloc_info_or_die PID: gdb_malloc_info, dying with gdb's words.
gdb_malloc_info_or_die() {
	local rc=0
	gdb_malloc_info "$1" || rc=$?
	gdb_check "$rc"
}

# median: the median of the numbers on stdin, one a line (the mean of the
# middle two of an even count); nan for none.
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print "nan"} else if (NR%2) {print a[(NR+1)/2]} else {print (a[NR/2]+a[NR/2+1])/2}}'; }

# awk_median is median() for awk programs: awk "$awk_median"'...' gives
# them median(a, n), the median of a[1..n] (a is sorted in place).
awk_median='
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
'

# start_bigheap DIR ARGS...: runs bigheap ARGS ($bigheap, or the one
# bench_init built) in DIR (where a kernel core of it lands), cores
# enabled (unless bigheap_cores=0), commands through FIFOs (fds 4 and 5); sets tpid and reply (its
# "ready" line, awaited $bigheap_wait seconds, 600 unless set).
start_bigheap() {
	local dir=$1
	shift
	rm -rf "$dir" && mkdir "$dir" && mkfifo "$dir/cmd" "$dir/ans"
	(cd "$dir" && ulimit -c "${bigheap_cores:-unlimited}" && exec "${bigheap:-$work/bigheap}" "$@" <cmd >stdout 3>ans) &
	tpid=$!
	own "$tpid"
	exec 4<>"$dir/cmd" 5<>"$dir/ans"
	IFS= read -r -t "${bigheap_wait:-600}" reply <&5 || die "bigheap did not start"
	case $reply in ready*) ;; *) die "bigheap said '$reply'" ;; esac
}

# ask CMD: one command to bigheap, its answer in reply.
ask() {
	echo "$1" >&4
	IFS= read -r -t 120 reply <&5 || die "bigheap did not answer '$1' (exited?)"
}
