package ptrace

import (
	"errors"
	"time"

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
