package main

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/perf"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/sampler"
)

// Exit codes. They are documented in README.md; keep the two in step.
const (
	exitOK          = 0
	exitError       = 1  // anything not listed below
	exitUsage       = 2  // bad command line
	exitNoProcess   = 3  // no such process
	exitPermission  = 4  // not allowed to trace it
	exitTraced      = 5  // already traced by another debugger
	exitState       = 6  // a zombie or a kernel thread
	exitNotGlibc    = 7  // static, musl, or another allocator
	exitNoSafe      = 8  // no thread was safe to borrow in time
	exitCallFailed  = 9  // the injected call failed, faulted or timed out; target restored
	exitGone        = 10 // the target exited while we worked
	exitDamaged     = 11 // the heap is damaged where glibc would abort or hang: nothing injected
	exitBadCore     = 12 // the file is not a usable x86_64 core
	exitLockedStop  = 13 // an arena lock is held while threads are stopped: nothing injected
	exitNoImage     = 14 // --freeze image: no copy-on-write image can be made safely; none made
	exitNoSampler   = 15 // leaks: the process cannot be profiled safely (seccomp); nothing placed
	exitNoPerf      = 16 // growth: perf events are not allowed or not available (paranoid, CAP_PERFMON, container, tracefs)
	exitInterrupted = 130
)

var errInterrupted = inspect.ErrInterrupted

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitCode maps an error to its documented exit code; the one place that does.
func exitCode(err error) int {
	var (
		badCore  *core.Error
		tooLarge *core.TooLargeError
		traced   *ptrace.TracedError
		state    *ptrace.StateError
		notGlibc *live.NotGlibcError
		noSafe   *live.NoSafeThreadError
		inject   *glibc.InjectError
		fault    *ptrace.FaultError
		timeout  *ptrace.TimeoutError
		usage    *usageError
		damaged  *glibc.HeapDamageError
		locked   *glibc.LockedArenaError
		stuck    *ptrace.StuckError
		atSite   *ptrace.AtCallSiteError
		noImage  *live.ImageUnavailableError
		noSample *sampler.NotSampledError
		active   *sampler.ActiveError
		unsure   *inspect.ArenaCheckError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &timeout) && timeout.Cancelled:
		return exitInterrupted
	case errors.As(err, &stuck) && stuck.Cancelled:
		return exitInterrupted
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &badCore), errors.As(err, &tooLarge):
		return exitBadCore
	case errors.As(err, &traced):
		return exitTraced
	case errors.As(err, &state):
		return exitState
	case errors.Is(err, ptrace.ErrGone):
		// Before ErrNoProcess: a process that exits or execs under us
		// fails in many ways (a thread or file missing among them), and
		// ErrGone is what was found to be their cause.
		return exitGone
	case errors.Is(err, ptrace.ErrNoProcess):
		return exitNoProcess
	case perf.KindOf(err) == perf.KindNotAllowed, perf.KindOf(err) == perf.KindNoTracefs, perf.KindOf(err) == perf.KindUnsupported:
		return exitNoPerf
	case perf.KindOf(err) == perf.KindNoProcess:
		return exitNoProcess
	case errors.Is(err, ptrace.ErrPermission), isFilePermission(err):
		return exitPermission
	case errors.As(err, &notGlibc):
		return exitNotGlibc
	case errors.As(err, &noSafe), errors.As(err, &atSite):
		return exitNoSafe
	case errors.As(err, &damaged):
		return exitDamaged
	case errors.As(err, &locked):
		return exitLockedStop
	case errors.As(err, &noImage):
		return exitNoImage
	case errors.As(err, &noSample):
		return exitNoSampler
	case errors.As(err, &active):
		return exitTraced
	case errors.As(err, &fault), errors.As(err, &timeout), errors.As(err, &inject), errors.Is(err, ptrace.ErrRestoredItself), errors.As(err, &unsure):
		return exitCallFailed
	case strings.HasPrefix(err.Error(), "unknown command"):
		return exitUsage // cobra's own error for a mistyped subcommand
	}
	return exitError
}

// isFilePermission: a file arenactl was given (a core, the directory it is
// in, snapshot's -o) may not be read or written. Only a path's error: a
// bare EPERM from a system call on a process means something else.
func isFilePermission(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && errors.Is(pe.Err, fs.ErrPermission)
}
