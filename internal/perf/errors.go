package perf

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
)

// Error is a failure of the perf interface. Kind is the errkind sentinel it
// matches through errors.Is, nil for none: what the user must do about it
// (an exit code, a hint) is cmd/arenactl's to say, from the kind.
type Error struct {
	// Kind: errkind.ErrPerfNotAllowed (the kernel refused perf events
	// for this process: perf_event_paranoid, no CAP_PERFMON, a
	// container's seccomp profile), errkind.ErrNoTracefs (tracefs is not
	// mounted, and could not be), errkind.ErrNoPerf (no such event, no
	// perf_event_open at all), errkind.ErrNoProcess (the
	// process, or every thread of it, is gone), errkind.ErrResources
	// (out of file descriptors or locked memory for the rings), or nil.
	Kind error
	Op   string // what was being done, for the message
	Err  error
}

func (e *Error) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Is answers the error's kind, and errkind.ErrNoPerf for the finer
// ErrPerfNotAllowed and ErrNoTracefs. A gone process is
// errkind.ErrNoProcess, whoever saw it first.
func (e *Error) Is(target error) bool {
	if e.Kind == nil {
		return false
	}
	return target == e.Kind || target == errkind.ErrNoPerf && (e.Kind == errkind.ErrPerfNotAllowed || e.Kind == errkind.ErrNoTracefs)
}

// wrap classifies a syscall error.
func wrap(op string, err error) error {
	var k error
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		k = errkind.ErrPerfNotAllowed
	case errors.Is(err, unix.ESRCH):
		k = errkind.ErrNoProcess
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		k = errkind.ErrNoPerf
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM):
		k = errkind.ErrResources
	}
	return &Error{Kind: k, Op: op, Err: err}
}
