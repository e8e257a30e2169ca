#!/usr/bin/env bash
# The main job on a target that ships in the repo: build arenactl and a
# bloated C program (testdata/trimmable.c: ~170 MiB freed but still
# resident, in the main heap and a thread's arena), show `arenactl info`,
# run `arenactl trim`, and show what was released. Needs go and gcc; run as
# root or as the user who may ptrace the target (this script's own child).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
target_pid=
cleanup() {
	[ -n "$target_pid" ] && kill "$target_pid" 2>/dev/null || true
	rm -rf "$out"
}
trap cleanup EXIT

go build -o "$out/arenactl" ./cmd/arenactl
gcc -O1 -g -pthread -o "$out/trimmable" testdata/trimmable.c

mkfifo "$out/in"
"$out/trimmable" <"$out/in" >"$out/target.out" &
target_pid=$!
exec 3>"$out/in" # keep the target's stdin open; it waits for "quit"
until grep -q ready "$out/target.out" 2>/dev/null; do sleep 0.05; done
echo "target: pid $target_pid, $(awk '/ready/ {printf "%.0f MiB", $2/1048576}' "$out/target.out") freed but still resident"
echo

echo "\$ arenactl info $target_pid"
"$out/arenactl" info "$target_pid"
echo
echo "\$ arenactl trim $target_pid"
"$out/arenactl" trim "$target_pid"

echo check >&3
echo quit >&3
wait "$target_pid"
target_pid=
echo
echo "the target verified its own data after the injections: $(tail -1 "$out/target.out")"
