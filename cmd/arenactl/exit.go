package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/exporter"
	"github.com/arenactl/arenactl/internal/inspect"
)

// Exit codes. They are documented in docs/exit-codes.md; keep the two in step.
const (
	exitOK          = 0
	exitError       = 1   // anything not listed below
	exitUsage       = 2   // bad command line
	exitNoProcess   = 3   // no such process
	exitPermission  = 4   // not allowed to trace it
	exitTraced      = 5   // already traced by another debugger
	exitState       = 6   // a zombie or a kernel thread
	exitNotGlibc    = 7   // static, musl, or another allocator
	exitNoSafe      = 8   // no thread was safe to borrow in time
	exitCallFailed  = 9   // the injected call failed, faulted or timed out; target restored
	exitGone        = 10  // the target exited while we worked
	exitDamaged     = 11  // the heap is damaged where glibc would abort or hang: nothing injected
	exitBadCore     = 12  // the file is not a usable core (only x86_64 cores' heaps are read yet), or its libc memory matches no glibc layout; or not a recording (record show)
	exitLockedStop  = 13  // an arena lock is held while threads are stopped: nothing injected
	exitNoImage     = 14  // --freeze image: no copy-on-write image can be made safely; none made
	exitNoSampler   = 15  // leaks: the process cannot be profiled safely (seccomp); nothing placed
	exitNoPerf      = 16  // growth: perf events are not allowed or not available (paranoid, CAP_PERFMON, container, tracefs)
	exitNoMemory    = 17  // a walk or scan would need more memory than --max-memory, the machine or the cgroup allows; target untouched
	exitArch        = 18  // a 32-bit program, or one of another machine than arenactl's (binfmt emulation); a call into an aarch64 process under pages other than 4 KiB, for now
	exitInterrupted = 130 // a signal ended the run before it had a report (endsByInterrupt: exit 0 with one)
)

var errInterrupted = inspect.ErrInterrupted

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// errUsage is the kind of a bad command line, as errkind's are of the
// conditions the packages below meet.
var errUsage = errors.New("usage")

func (e *usageError) Is(target error) bool { return target == errUsage }

// outcome is what is done about the errors a match accepts: the exit code,
// the hint added to the message, and the exporter's reason label. A zero
// field says nothing: that column is decided by a later row.
type outcome struct {
	match  func(error) bool
	exit   int
	hint   string
	hintOf func() string // a hint that reads the system's state when it is given
	reason string
}

// outcomes is the one table of what an error means to the user: exitCode,
// hint and reason each take the first row that matches and fills their
// column. The order decides between kinds an error has at once: a process
// that exits or execs under us fails in many ways (a thread or file missing
// among them), and ErrGone is what was found to be their cause, so it comes
// before ErrNoProcess; a call abandoned because arenactl was signalled is
// an interrupt, not a failed call.
var outcomes = []outcome{
	{match: is(errkind.ErrInterrupted, context.Canceled), exit: exitInterrupted},
	{match: is(errUsage), exit: exitUsage},
	{match: is(errkind.ErrCoreTooLarge), exit: exitBadCore, hint: " (a larger --max-unpacked opens it)"},
	{match: is(errkind.ErrBadCore), exit: exitBadCore},
	{match: is(errkind.ErrBadRecording), exit: exitBadCore},
	{match: is(errkind.ErrTraced), exit: exitTraced, reason: exporter.ReasonTraced},
	{match: is(errkind.ErrState), exit: exitState, reason: exporter.ReasonGone},
	{match: is(errkind.ErrGone), exit: exitGone, reason: exporter.ReasonGone},
	{match: is(errkind.ErrNoProcess), exit: exitNoProcess, reason: exporter.ReasonGone},
	{match: is(errkind.ErrPerfNotAllowed), exit: exitNoPerf, hintOf: perfParanoidHint},
	{match: is(errkind.ErrNoTracefs), exit: exitNoPerf,
		hint: " (the syscall tracepoints need tracefs: mount -t tracefs nodev /sys/kernel/tracing, as root or with CAP_PERFMON)"},
	{match: is(errkind.ErrNoPerf), exit: exitNoPerf},
	{match: is(errkind.ErrResources), hint: " (raise the open file limit, or perf_event_mlock_kb for the rings)"},
	{match: unhintedPermission, exit: exitPermission, reason: exporter.ReasonPermission,
		hint: " (run arenactl as the same user as the process, or as root; with Yama, kernel.yama.ptrace_scope must allow attaching)"},
	{match: is(errkind.ErrPermission), exit: exitPermission, reason: exporter.ReasonPermission},
	{match: isFilePermission, exit: exitPermission},
	{match: is(errkind.ErrArch), exit: exitArch},
	{match: is(errkind.ErrNoCalls), exit: exitNotGlibc, reason: exporter.ReasonNotGlibc,
		hint: " (info --read-only reads its allocator without calling anything)"},
	{match: is(errkind.ErrNotGlibc), exit: exitNotGlibc, reason: exporter.ReasonNotGlibc},
	{match: is(errkind.ErrNoSafeThread), exit: exitNoSafe},
	{match: is(errkind.ErrDamaged), exit: exitDamaged, reason: exporter.ReasonDamaged, hint: "; use --read-only"},
	{match: is(errkind.ErrLockedStop), exit: exitLockedStop, hint: "; continue the process (kill -CONT) or use --read-only"},
	{match: is(errkind.ErrNoImage), exit: exitNoImage,
		hint: " (--freeze walk stops the process for the whole read instead, and writes nothing into it)"},
	{match: is(errkind.ErrNoSampler), exit: exitNoSampler},
	{match: is(errkind.ErrNoMemory), exit: exitNoMemory,
		hint: " (a larger --max-memory allows it; docs/scale.md says what a walk and a scan take)"},
	{match: is(errkind.ErrArenaUnchecked), exit: exitCallFailed,
		hint: " (--read-only reads the heap without calling anything; --no-heap-check skips the check on a heap you trust)"},
	{match: is(errkind.ErrCallFailed), exit: exitCallFailed},
	{match: is(errkind.ErrTimeout, os.ErrDeadlineExceeded), reason: exporter.ReasonTimeout},
	// ptrace's wait for a stop does not export its timeout.
	{match: func(err error) bool { return strings.Contains(err.Error(), "timed out") }, reason: exporter.ReasonTimeout},
	{match: is(errkind.ErrImageGone), hint: " (its lease runs out when arenactl is stopped for 2 s; run it again)"},
	{match: is(errkind.ErrNoSpace), hint: " (free space there, or set TMPDIR to a directory with more)"},
	{match: is(errkind.ErrMemoryOnly),
		hint: " (no file to read it with: give libc's, or a static program's executable, with --libc, or the machine's files with --sysroot)"},
	{match: func(err error) bool { return strings.HasPrefix(err.Error(), "unknown command") }, exit: exitUsage}, // cobra's, for a mistyped subcommand
}

// is matches an error of any of kinds.
func is(kinds ...error) func(error) bool {
	return func(err error) bool {
		for _, k := range kinds {
			if errors.Is(err, k) {
				return true
			}
		}
		return false
	}
}

// unhintedPermission: ptrace refused, and the message does not say already
// what to do about it.
func unhintedPermission(err error) bool {
	return errors.Is(err, errkind.ErrPermission) && !strings.Contains(err.Error(), "same user")
}

// isFilePermission: a file arenactl was given (a core, the directory it is
// in, snapshot's -o) may not be read or written. Only a path's error: a
// bare EPERM from a system call on a process means something else.
func isFilePermission(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && errors.Is(pe.Err, fs.ErrPermission)
}

// decide is the first row of outcomes that fills the column has asks for
// and matches err; nil when none does.
func decide(err error, has func(*outcome) bool) *outcome {
	for i := range outcomes {
		if o := &outcomes[i]; has(o) && o.match(err) {
			return o
		}
	}
	return nil
}

// exitCode maps an error to its documented exit code; the one place that does.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if o := decide(err, func(o *outcome) bool { return o.exit != 0 }); o != nil {
		return o.exit
	}
	return exitError
}

// hint is what the user can do about err, added to its one line; the
// packages below describe conditions and leave this to the command line.
func hint(err error) string {
	if o := decide(err, func(o *outcome) bool { return o.hint != "" || o.hintOf != nil }); o != nil {
		if o.hintOf != nil {
			return o.hintOf()
		}
		return o.hint
	}
	return ""
}

// perfParanoidHint: what lets perf events be opened, with the setting that
// refused them.
func perfParanoidHint() string {
	p := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
		p = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf(" (perf_event_paranoid is %s: run as root or with CAP_PERFMON, or lower it; in a container, its seccomp profile must allow perf_event_open)", p)
}

// reason is the exporter's label for a collection's error.
func reason(err error) string {
	if o := decide(err, func(o *outcome) bool { return o.reason != "" }); o != nil {
		return o.reason
	}
	return exporter.ReasonOther
}
