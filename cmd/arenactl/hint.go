package main

import (
	"errors"
	"strings"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// hint is what the user can do about err, added to its one line; the
// packages below describe conditions and leave this to the command line.
func hint(err error) string {
	var (
		memOnly *heap.MemoryOnlyError
		damaged *glibc.HeapDamageError
		locked  *glibc.LockedArenaError
		nonGlib *live.NotGlibcError
		large   *core.TooLargeError
		space   *core.SpaceError
		noImage *live.ImageUnavailableError
		unsure  *inspect.ArenaCheckError
	)
	switch {
	case errors.As(err, &nonGlib) && (nonGlib.Allocator.Kind == glibc.AllocStatic || nonGlib.Allocator.MallocDebug):
		return " (info --read-only reads its allocator without calling anything)"
	case errors.As(err, &damaged):
		return "; use --read-only"
	case errors.As(err, &unsure):
		return " (--read-only reads the heap without calling anything; --no-heap-check skips the check on a heap you trust)"
	case errors.As(err, &locked):
		return "; continue the process (kill -CONT) or use --read-only"
	case errors.As(err, &noImage):
		return " (--freeze walk stops the process for the whole read instead, and writes nothing into it)"
	case errors.Is(err, live.ErrImageGone):
		return " (its lease runs out when arenactl is stopped for 2 s; run it again)"
	case errors.As(err, &large):
		return " (a larger --max-unpacked opens it)"
	case errors.As(err, &space):
		return " (free space there, or set TMPDIR to a directory with more)"
	case errors.Is(err, ptrace.ErrPermission) && !strings.Contains(err.Error(), "same user"):
		return " (run arenactl as the same user as the process, or as root; with Yama, kernel.yama.ptrace_scope must allow attaching)"
	case errors.As(err, &memOnly):
		return " (no libc file to read it with: give the matching one with --libc, or the machine's files with --sysroot)"
	}
	return ""
}
