package ptrace

import (
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stop is one decoded wait status of a traced thread.
type stop struct {
	exited  bool        // the thread (or the process) is gone
	signal  unix.Signal // stop signal (signal-delivery-stop or group-stop)
	event   int         // PTRACE_EVENT_* in status>>16; PTRACE_EVENT_STOP for interrupts and group-stops
	rawCode int
}

func decode(ws unix.WaitStatus) stop {
	if ws.Exited() || ws.Signaled() {
		return stop{exited: true, rawCode: int(ws)}
	}
	return stop{signal: unix.Signal((uint32(ws) >> 8) & 0xff), event: int(uint32(ws) >> 16), rawCode: int(ws)}
}

// exec reports the stop a thread seized with PTRACE_O_TRACEEXEC makes once
// it has replaced the program: it is reported under the process id, whatever
// thread called execve, and every other thread is gone by then.
func (s stop) exec() bool { return s.event == unix.PTRACE_EVENT_EXEC }

// interruptStop reports a PTRACE_INTERRUPT trap or a group-stop seen through
// PTRACE_SEIZE; signal-delivery-stops have event 0.
func (s stop) interruptStop() bool { return s.event == unix.PTRACE_EVENT_STOP }

// syscallStop: a syscall-entry- or -exit-stop (PTRACE_O_TRACESYSGOOD).
func (s stop) syscallStop() bool { return s.event == 0 && s.signal == unix.SIGTRAP|0x80 }

// groupStop: a SIGSTOP-like stop of the whole process reported to us.
func (s stop) groupStop() bool {
	if !s.interruptStop() {
		return false
	}
	switch s.signal {
	case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return true
	}
	return false
}

// Bound limits a wait: it ends at Deadline (the zero time: never) or when
// Cancel is closed (nil: never).
type Bound struct {
	Deadline time.Time
	Cancel   <-chan struct{}
}

// Within is a Bound of d from now, cancelled by cancel.
func Within(d time.Duration, cancel <-chan struct{}) Bound {
	return Bound{Deadline: time.Now().Add(d), Cancel: cancel}
}

func (b Bound) expired() error {
	select {
	case <-b.Cancel:
		return errWaitCancel
	default:
	}
	if !b.Deadline.IsZero() && time.Now().After(b.Deadline) {
		return errWaitTimeout
	}
	return nil
}

var (
	errWaitTimeout = errors.New("wait timed out")
	errWaitCancel  = errors.New("wait cancelled")
)

// waitFor polls for a state change of tid until deadline. Polling (rather than
// a blocking wait4) keeps the tracer thread able to act on a timeout, and only
// the tracer thread may send PTRACE_INTERRUPT. The first polls spin briefly
// because most injected calls finish within a millisecond.
//
// A nil cancel channel never fires.
func waitFor(tid int, deadline time.Time, cancel <-chan struct{}) (stop, error) {
	pause := 5 * time.Microsecond
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			return stop{exited: true}, nil
		case err != nil:
			return stop{}, err
		case got == tid:
			return decode(ws), nil
		}
		if time.Now().After(deadline) {
			return stop{}, errWaitTimeout
		}
		select {
		case <-cancel:
			return stop{}, errWaitCancel
		default:
		}
		time.Sleep(pause)
		if pause < time.Millisecond {
			pause *= 2
		}
	}
}

// poll collects one pending wait status of tid without blocking; ok is false
// when there is none. A tid that is no child of ours (reaped already, or
// released by the kernel) reads as exited.
func poll(tid int) (s stop, ok bool, err error) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			return stop{exited: true}, true, nil
		case err != nil:
			return stop{}, false, err
		case got == tid:
			return decode(ws), true, nil
		}
		return stop{}, false, nil
	}
}

// reapIfDead reaps tid if it is a dead tracee of ours and reports whether it
// did (or whether tid is no child of ours at all). It only looks first
// (WNOWAIT), so a pending stop stays for the tracer thread to collect: this
// runs on any goroutine, because the kernel lets every thread of the
// tracer's process wait for its tracees.
func reapIfDead(tid int) bool {
	var si unix.Siginfo
	err := unix.Waitid(unix.P_PID, tid, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	if err == unix.ECHILD {
		return true
	}
	if err != nil {
		return false
	}
	b := (*[128]byte)(unsafe.Pointer(&si))
	pid := *(*int32)(unsafe.Pointer(&b[16]))
	const cldExited, cldKilled, cldDumped = 1, 2, 3
	if pid != int32(tid) || (si.Code != cldExited && si.Code != cldKilled && si.Code != cldDumped) {
		return false
	}
	var ws unix.WaitStatus
	unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
	return true
}
