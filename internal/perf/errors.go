package perf

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
)

// Kind says what the user must do about a failure; Error.Is answers
// errkind's kinds from it, which cmd/arenactl maps to exit codes.
type Kind int

const (
	KindOther Kind = iota
	// KindNotAllowed: the kernel refused perf events for this process
	// (perf_event_paranoid, no CAP_PERFMON, a container's seccomp
	// profile).
	KindNotAllowed
	// KindNoProcess: the process (or every thread of it) is gone.
	KindNoProcess
	// KindUnsupported: the kernel has no such event (no tracepoint of
	// that name, no software events, no perf_event_open at all).
	KindUnsupported
	// KindNoTracefs: tracefs is not mounted and could not be mounted.
	KindNoTracefs
	// KindResources: out of file descriptors or locked memory for the
	// rings.
	KindResources
)

// Error is a failure of the perf interface, with its kind.
type Error struct {
	Kind Kind
	Op   string // what was being done, for the message
	Err  error
}

func (e *Error) Error() string { return e.Op + ": " + e.Err.Error() + e.hint() }
func (e *Error) Unwrap() error { return e.Err }

// Is: the kinds that decide what the user must do match errkind's (a gone
// process is errkind.ErrNoProcess, whoever saw it first).
func (e *Error) Is(target error) bool {
	switch e.Kind {
	case KindNotAllowed, KindNoTracefs, KindUnsupported:
		return target == errkind.ErrNoPerf
	case KindNoProcess:
		return target == errkind.ErrNoProcess
	}
	return false
}

func (e *Error) hint() string {
	switch e.Kind {
	case KindNotAllowed:
		p := "unknown"
		if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err == nil {
			p = strings.TrimSpace(string(b))
		}
		return fmt.Sprintf(" (perf_event_paranoid is %s: run as root or with CAP_PERFMON, or lower it; in a container, its seccomp profile must allow perf_event_open)", p)
	case KindResources:
		return " (raise the open file limit, or perf_event_mlock_kb for the rings)"
	}
	return ""
}

// KindOf is err's kind, KindOther for an error not of this package.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindOther
}

// wrap classifies a syscall error.
func wrap(op string, err error) error {
	k := KindOther
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		k = KindNotAllowed
	case errors.Is(err, unix.ESRCH):
		k = KindNoProcess
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		k = KindUnsupported
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM):
		k = KindResources
	}
	return &Error{Kind: k, Op: op, Err: err}
}
