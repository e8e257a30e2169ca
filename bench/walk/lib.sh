# What bench/walk/run.sh and bench/core/run.sh share: sourced, not run.
# bench_init NAME makes $work (removed on exit with every process listed in
# $owned), builds arenactl (or copies $ARENACTL) and bigheap into it.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=
owned=

bench_exit() {
	exec 4>&- 5<&- 2>/dev/null || true
	local p
	for p in $owned; do
		kill -0 "$p" 2>/dev/null || continue
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -z "$work" ] || rm -rf "$work"
}

die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}

bench_init() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/arenactl-$1.XXXXXX")
	trap bench_exit EXIT
	trap 'exit 130' INT TERM HUP
	local prog
	for prog in go gcc; do
		command -v "$prog" >/dev/null || die "$prog is not installed"
	done
	if [ -n "${ARENACTL:-}" ]; then
		cp "$ARENACTL" "$work/arenactl" || die "no arenactl at $ARENACTL"
	else
		(cd "$root" && go build -o "$work/arenactl" ./cmd/arenactl) || die "building arenactl failed"
	fi
	gcc -O2 -g -Wall -pthread -o "$work/bigheap" "$root/bench/walk/bigheap.c" || die "building bigheap failed"
	echo "machine: $(nproc) CPUs, $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | sed -n '1s/.* //p'), kernel $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

now_us() { echo "${EPOCHREALTIME/./}"; }

# start_bigheap DIR ARGS...: runs bigheap ARGS in DIR (where a kernel core
# of it lands), cores enabled, commands through FIFOs (fds 4 and 5); sets
# tpid and reply (its "ready" line).
start_bigheap() {
	local dir=$1
	shift
	rm -rf "$dir" && mkdir "$dir" && mkfifo "$dir/cmd" "$dir/ans"
	(cd "$dir" && ulimit -c unlimited && exec "$work/bigheap" "$@" <cmd >stdout 3>ans) &
	tpid=$!
	owned="$owned $tpid"
	exec 4<>"$dir/cmd" 5<>"$dir/ans"
	IFS= read -r -t 600 reply <&5 || die "bigheap did not start"
	case $reply in ready*) ;; *) die "bigheap said '$reply'" ;; esac
}

# ask CMD: one command to bigheap, its answer in reply.
ask() {
	echo "$1" >&4
	IFS= read -r -t 120 reply <&5 || die "bigheap did not answer '$1' (exited?)"
}
