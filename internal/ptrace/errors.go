package ptrace

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/procfs"
)

var (
	// ErrNoProcess: the process or thread does not exist (any more). The
	// same condition as procfs's: a /proc file or a ptrace call may be the
	// first to see it.
	ErrNoProcess = procfs.ErrNoProcess
	// ErrPermission: the kernel refused to let us trace the process.
	ErrPermission = procfs.ErrPermission
	// ErrRestoredItself: a borrowed thread put its own registers back and
	// went on (its call site's gate timed out while arenactl was held up):
	// the target is whole, but the thread is no longer ours to call in.
	// It is a call that failed (errkind.ErrCallFailed).
	ErrRestoredItself error = restoredError{}
	// ErrGone: the target exited or was killed while we worked on it.
	ErrGone = procfs.ErrGone
	// ErrExec: the target replaced its program (execve) while we worked on
	// it. The memory and threads we had are gone, so it is a kind of
	// ErrGone: errors.Is(ErrExec, ErrGone) holds.
	ErrExec error = execError{}
)

type execError struct{}

func (execError) Error() string     { return "target executed a new program" }
func (execError) Is(err error) bool { return err == ErrGone }

type restoredError struct{}

func (restoredError) Error() string {
	return "the thread restored itself while arenactl was not watching"
}
func (restoredError) Is(err error) bool { return err == errkind.ErrCallFailed }

// StuckError: a ptrace request did not return before the deadline or the
// cancellation. The kernel blocks PTRACE_SEIZE while the target is inside
// execve (or while another tracer attaches); what we held was given back,
// except any thread the tracer thread is still waiting on, which the kernel
// lets go when arenactl exits.
type StuckError struct {
	Pid, Tid  int
	Cancelled bool
}

func (e *StuckError) Error() string {
	why := "did not return in time"
	if e.Cancelled {
		why = "was interrupted by a signal to arenactl"
	}
	return fmt.Sprintf("attaching to thread %d of process %d %s (the kernel holds attach requests while the process is inside execve)", e.Tid, e.Pid, why)
}

// Is: a cancelled attach is an interrupt (errkind.ErrInterrupted); one that
// ran out of time is no kind of its own.
func (e *StuckError) Is(target error) bool { return e.Cancelled && target == errkind.ErrInterrupted }

// TracedError: another tracer (a debugger) already holds the process.
type TracedError struct {
	Pid, TracerPid int
	TracerName     string
}

func (e *TracedError) Error() string {
	return fmt.Sprintf("process %d is already traced by process %d (%s)", e.Pid, e.TracerPid, e.TracerName)
}

func (e *TracedError) Is(target error) bool { return target == errkind.ErrTraced }

// FaultError: the injected function itself raised a fatal signal. The signal
// was not passed to the target and its registers were restored.
type FaultError struct {
	Signal string
	PC     uint64
	Addr   uint64
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("injected call faulted with %s at pc=%#x (fault address %#x); the signal was not delivered to the target", e.Signal, e.PC, e.Addr)
}

func (e *FaultError) Is(target error) bool { return target == errkind.ErrCallFailed }

// TimeoutError: the injected call did not return in time and was abandoned.
// Blocked tells whether the thread sat in a blocking syscall when we took it
// back (the safe case: it held nothing it had taken during the call) or was
// still executing code.
// Cancelled tells that we gave up because arenactl was asked to stop rather
// than because the time ran out.
type TimeoutError struct {
	Blocked   bool
	Syscall   int64
	PC        uint64
	Cancelled bool
}

func (e *TimeoutError) Error() string {
	why := "did not return in time"
	if e.Cancelled {
		why = "was interrupted by a signal to arenactl"
	}
	if e.Blocked && e.Syscall == int64(arch.Host().MustSys("futex")) {
		return fmt.Sprintf("injected call %s while waiting in futex (pc=%#x) for a lock another thread holds; it was abandoned and the thread's registers restored", why, e.PC)
	}
	if e.Blocked {
		return fmt.Sprintf("injected call %s while blocked in syscall %d (pc=%#x); it was abandoned and the thread's registers restored", why, e.Syscall, e.PC)
	}
	return fmt.Sprintf("injected call %s and was still running at pc=%#x after the hard limit; it was abandoned and the thread's registers restored", why, e.PC)
}

// Is: an abandoned call is a failed call that timed out, and, when
// arenactl was asked to stop, an interrupt as well.
func (e *TimeoutError) Is(target error) bool {
	return target == errkind.ErrCallFailed || target == errkind.ErrTimeout ||
		e.Cancelled && target == errkind.ErrInterrupted
}

// AtCallSiteError: the thread is inside, or can still return into, a call
// site an earlier arenactl left. Its registers there are the routine's, not
// its own: a site made for it now would restore it into the old one, which
// a later run could remove while the thread still has to pass through it.
// It is let go untouched; the old site puts it back by itself.
type AtCallSiteError struct {
	Tid     int
	Site    uint64 // the call site's address
	Creator int    // the arenactl that made it
	Why     string // how the thread is tied to it
}

func (e *AtCallSiteError) Error() string {
	return fmt.Sprintf("thread %d %s the call site at %#x left by arenactl (pid %d)", e.Tid, e.Why, e.Site, e.Creator)
}

// Is: the thread is not safe to borrow (errkind.ErrNoSafeThread).
func (e *AtCallSiteError) Is(target error) bool { return target == errkind.ErrNoSafeThread }
