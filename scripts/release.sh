#!/usr/bin/env bash
# Build a release of arenactl for linux/amd64 (x86_64, the only target
# arenactl supports) under dist/ (or $DIST):
#
#   arenactl-VERSION-linux-amd64/arenactl       static, stripped, version-stamped
#   arenactl-VERSION-linux-amd64/man/man1/*.1   man pages, from the cobra tree
#   arenactl-VERSION-linux-amd64/completions/   arenactl.bash, _arenactl (zsh), arenactl.fish
#   arenactl-VERSION-linux-amd64/README.md
#   arenactl-VERSION-linux-amd64.tar.gz         all of the above
#   SHA256SUMS                                  of every file above (sha256sum -c SHA256SUMS)
#
# Usage: scripts/release.sh [VERSION]
# VERSION defaults to `git describe --tags --always --dirty`. Needs go, and
# git for the commit stamp (without git the commit is "unknown").
# SOURCE_DATE_EPOCH, if set, dates the man pages and the tarball's files;
# otherwise the commit's time does, so a rebuild of a commit gives the same
# tarball.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

die() {
	echo "release.sh: $*" >&2
	exit 2
}

version=${1:-$(git describe --tags --always --dirty 2>/dev/null || true)}
[ -n "$version" ] || die "no VERSION given and git cannot describe this tree"
# It goes into -ldflags and file names: no spaces, quotes or slashes.
case "$version" in
*[!A-Za-z0-9._+-]* | -*) die "VERSION '$version': use letters, digits and . _ + - only" ;;
esac

commit= commit_time= dirty=
if git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	commit=$(git rev-parse HEAD)
	# In UTC with a Z, as Go writes vcs.time.
	commit_time=$(TZ=UTC0 git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
	# As Go's own vcs.modified: any change, untracked files included (an
	# untracked .go file is compiled).
	if [ -n "$(git status --porcelain)" ]; then dirty=true; else dirty=false; fi
	: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct HEAD)}"
fi
: "${SOURCE_DATE_EPOCH:=$(date +%s)}"
export SOURCE_DATE_EPOCH

dist=${DIST:-dist}
name=arenactl-$version-linux-amd64
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
stage=$dist/$name
rm -rf "$stage" "$stage.tar.gz" "$dist/SHA256SUMS"
mkdir -p "$stage"

# The commit is stamped rather than left to the toolchain, which records
# none in a linked git worktree (golang/go#58218) and may record the
# enclosing checkout's in a nested one; -buildvcs=false so the two never
# disagree.
pkg=github.com/arenactl/arenactl/internal/buildinfo
stamp="-X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.commitTime=$commit_time -X $pkg.dirty=$dirty"

# CGO_ENABLED=0: pflag imports net, and with cgo net's resolver links libc
# dynamically; a tool copied onto a server in a hurry must be one static
# file. -trimpath: no build machine paths in the binary. -s -w: no symbol
# table or DWARF (panics still print Go stack traces).
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false \
	-ldflags "-s -w $stamp" -o "$stage/arenactl" ./cmd/arenactl

# The docs come from a build with the gendocs tag (the shipped binary does
# not carry cobra's doc package), stamped the same so the pages name the
# release.
go run -buildvcs=false -tags gendocs -ldflags "$stamp" ./cmd/arenactl gen-docs "$stage"
cp README.md "$stage/"

# Check what is promised, on the binary that ships.
headers=$(readelf -lW "$stage/arenactl") || die "cannot read the ELF headers (readelf, from binutils)"
if grep -q INTERP <<<"$headers"; then
	die "$stage/arenactl is dynamically linked"
fi
if [ "$(uname -m)" = x86_64 ]; then
	# Not through head: it exits after a line, and a later line's write
	# then ends arenactl by SIGPIPE, which pipefail made this script's
	# exit (141, once in CI).
	first=$("$stage/arenactl" version)
	first=${first%%$'\n'*}
	[ "$first" = "arenactl $version" ] || die "the built binary says '$first', not 'arenactl $version'"
fi

# Reproducible: sorted names, fixed owner and time, no gzip timestamp.
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
	-C "$dist" -cf - "$name" | gzip -9n >"$stage.tar.gz"
(
	cd "$dist"
	find "$name" -type f | LC_ALL=C sort | xargs sha256sum
	sha256sum "$name.tar.gz"
) >"$dist/SHA256SUMS"

echo "$stage/arenactl"
echo "$stage.tar.gz"
echo "$dist/SHA256SUMS"
