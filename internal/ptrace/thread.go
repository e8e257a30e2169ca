package ptrace

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Thread is one seized thread of a Process. Only this thread is ever stopped;
// the rest of the process keeps running.
type Thread struct {
	p   *Process
	Tid int

	stopped     bool
	interrupted bool
	saved       *Regs // registers as the target had them when we stopped it
	xstate      []byte
	tainted     bool      // a call was abandoned: no further calls on this thread
	held        []siginfo // signals that arrived while we held the thread
	detached    bool
	tramp       uint64    // the target's signal trampoline (SetTrampoline)
	inj         *injector // set from the first Call until the thread is restored
}

// Seize attaches to one thread without stopping it (PTRACE_SEIZE).
func (p *Process) Seize(tid int) (*Thread, error) {
	err := p.t.do(func() error { return unix.PtraceSeize(tid) })
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			if st, serr := ReadStatus(p.Pid, tid); serr == nil && st.TracerPid != 0 {
				return nil, tracedError(p.Pid, st.TracerPid)
			}
		}
		return nil, procErr(p.Pid, err)
	}
	th := &Thread{p: p, Tid: tid}
	p.mu.Lock()
	p.threads[tid] = th
	p.mu.Unlock()
	return th, nil
}

// Stop interrupts the thread and waits until it is stopped, then saves its
// registers and extended state. Signals that arrive meanwhile are held back
// and re-sent on Detach.
func (th *Thread) Stop(timeout time.Duration) error {
	if err := th.Interrupt(); err != nil {
		return err
	}
	return th.WaitStopped(timeout)
}

// Interrupt asks the thread to stop (PTRACE_INTERRUPT) without waiting, so
// that a whole process can be asked at once and then waited for.
func (th *Thread) Interrupt() error {
	if th.stopped || th.interrupted {
		return nil
	}
	return th.p.t.do(func() error {
		if err := unix.PtraceInterrupt(th.Tid); err != nil {
			return th.gone(err)
		}
		th.interrupted = true
		return nil
	})
}

// WaitStopped waits for the stop Interrupt asked for, then saves the
// thread's registers and extended state.
func (th *Thread) WaitStopped(timeout time.Duration) error {
	if th.stopped {
		return nil
	}
	return th.p.t.do(func() error {
		deadline := time.Now().Add(timeout)
		for {
			s, err := waitFor(th.Tid, deadline, nil)
			if err != nil {
				return fmt.Errorf("thread %d did not stop: %w", th.Tid, err)
			}
			if s.exited {
				th.detached = true
				return fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
			}
			if s.interruptStop() {
				if s.groupStop() {
					th.holdSignal(s.signal)
				}
				break
			}
			// A signal-delivery-stop: hold the signal back so that the
			// target's handler does not run on registers we are about to
			// borrow; wait for our interrupt trap.
			if err := th.holdPending(); err != nil {
				return err
			}
			if err := unix.PtraceCont(th.Tid, 0); err != nil {
				return th.gone(err)
			}
		}
		th.stopped = true
		var r Regs
		if err := unix.PtraceGetRegs(th.Tid, &r); err != nil {
			return th.gone(err)
		}
		xs, err := getXState(th.Tid)
		if err != nil {
			return fmt.Errorf("thread %d: reading extended registers: %w", th.Tid, err)
		}
		th.saved, th.xstate = &r, xs
		return nil
	})
}

// Regs returns the registers saved by Stop.
func (th *Thread) Regs() Regs {
	if th.saved == nil {
		return Regs{}
	}
	return *th.saved
}

// XState returns the extended (FPU, SSE, AVX) state saved by Stop, as
// PTRACE_GETREGSET gives NT_X86_XSTATE: an XSAVE area whose first 512 bytes
// are the FXSAVE layout of NT_PRFPREG.
func (th *Thread) XState() []byte { return th.xstate }

// Restore puts back the registers and extended state saved by Stop, after
// removing the call site if a Call made one. A thread stopped in a syscall
// is then about to issue it again (restarted as the kernel would).
func (th *Thread) Restore() error {
	if th.saved == nil || th.detached {
		return nil
	}
	return th.p.t.do(th.restoreLocked)
}

func (th *Thread) restoreLocked() error {
	if th.inj != nil {
		return th.teardown()
	}
	r := *th.saved
	if err := unix.PtraceSetRegs(th.Tid, &r); err != nil {
		return th.gone(err)
	}
	if err := setXState(th.Tid, th.xstate); err != nil {
		return fmt.Errorf("thread %d: restoring extended registers: %w", th.Tid, err)
	}
	return nil
}

// Detach restores the thread's registers, lets it go, and re-sends the
// signals held back while we had it. It is idempotent.
func (th *Thread) Detach() error {
	if th.detached {
		return nil
	}
	err := th.p.t.do(func() error {
		var first error
		if th.saved != nil {
			first = th.restoreLocked()
		}
		if err := unix.PtraceDetach(th.Tid); err != nil && first == nil && !errors.Is(err, unix.ESRCH) {
			first = fmt.Errorf("thread %d: detach: %w", th.Tid, err)
		}
		th.detached = true
		for _, si := range th.held {
			redeliver(th.p.Pid, th.Tid, si)
		}
		th.held = nil
		return first
	})
	th.p.mu.Lock()
	delete(th.p.threads, th.Tid)
	th.p.mu.Unlock()
	return err
}

// holdPending records the signal of the current signal-delivery-stop.
func (th *Thread) holdPending() error {
	si, err := getSiginfo(th.Tid)
	if err != nil {
		return th.gone(err)
	}
	th.held = append(th.held, si)
	return nil
}

func (th *Thread) holdSignal(sig unix.Signal) {
	var si siginfo
	*(*int32)(ptr(&si[0])) = int32(sig)
	*(*int32)(ptr(&si[8])) = -6 // SI_TKILL: re-sent with tgkill
	th.held = append(th.held, si)
}

// redeliver queues a held-back signal again. Signals queued with a payload
// (sigqueue) keep it; kill()/tgkill() ones are re-sent with tgkill, the only
// way the kernel lets another process send them.
func redeliver(pid, tid int, si siginfo) {
	if c := si.code(); c < 0 && c != -6 {
		_, _, errno := unix.Syscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(pid), uintptr(tid), uintptr(si.signo()), uintptr(ptr(&si[0])), 0, 0)
		if errno == 0 {
			return
		}
	}
	unix.Tgkill(pid, tid, unix.Signal(si.signo()))
}

func (th *Thread) gone(err error) error {
	if errors.Is(err, unix.ESRCH) {
		// ESRCH on a seized thread means it is not in a ptrace-stop: it died.
		th.detached = true
		return fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
	}
	return fmt.Errorf("thread %d: %w", th.Tid, err)
}
