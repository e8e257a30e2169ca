package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// CallLimits bound an injected call. After Soft, or when Cancel is closed,
// the thread is interrupted and looked at: a thread blocked in a syscall
// holds nothing the call took (the functions we inject take at most one lock
// and block only while waiting for it), so the call is abandoned. A thread
// still executing code may be inside a critical section, so it is let run
// until Hard.
type CallLimits struct {
	Soft, Hard time.Duration
	Cancel     <-chan struct{}
}

// redZone is the x86_64 SysV area below rsp that leaf code may use without
// moving rsp; the injected frame must start below it.
const redZone = 128

// Call runs fn(args...) on the stopped thread and returns its rax. The call
// returns to address 0, so its completion is a SIGSEGV at pc 0, which we
// catch and never deliver. The thread's registers are left as the call ended;
// the next Call starts again from the registers saved by Stop, and Detach
// restores them.
func (th *Thread) Call(lim CallLimits, fn uint64, args ...uint64) (uint64, error) {
	if !th.stopped || th.saved == nil {
		return 0, errors.New("ptrace: Call on a thread that was not stopped")
	}
	if th.tainted {
		return 0, errors.New("ptrace: thread has an abandoned call; no further calls")
	}
	if len(args) > 6 {
		return 0, errors.New("ptrace: at most 6 integer arguments")
	}
	r := *th.saved
	sp := (r.Rsp - redZone) &^ 15
	sp -= 8 // the return address slot: at entry (rsp+8) % 16 == 0 as the ABI wants
	var zero [8]byte
	if _, err := th.p.WriteAt(zero[:], sp); err != nil {
		return 0, fmt.Errorf("writing the return address on thread %d's stack: %w", th.Tid, err)
	}
	r.Rsp = sp
	r.Rip = fn
	r.Rax = 0 // variadic callees read al as the number of vector registers used
	// Without this, a thread stopped inside a blocking syscall would have its
	// rip moved back two bytes by the kernel's syscall-restart logic.
	r.Orig_rax = ^uint64(0)
	r.Eflags &^= 1 << 10 // the ABI wants DF clear at a call
	regs := []*uint64{&r.Rdi, &r.Rsi, &r.Rdx, &r.Rcx, &r.R8, &r.R9}
	for i, a := range args {
		*regs[i] = a
	}
	var ret uint64
	err := th.p.t.do(func() error {
		if err := unix.PtraceSetRegs(th.Tid, &r); err != nil {
			return th.gone(err)
		}
		var err error
		ret, err = th.run(lim)
		return err
	})
	return ret, err
}

// run resumes the thread and waits for the call to end. Runs on the tracer.
func (th *Thread) run(lim CallLimits) (uint64, error) {
	start := time.Now()
	check := start.Add(lim.Soft)
	hard := start.Add(lim.Hard)
	if err := unix.PtraceCont(th.Tid, 0); err != nil {
		return 0, th.gone(err)
	}
	interrupted, cancelled := false, false
	cancel := lim.Cancel
	for {
		s, err := waitFor(th.Tid, check, cancel)
		if errors.Is(err, errWaitCancel) {
			cancelled, cancel = true, nil // a closed channel would fire on every poll
			err = errWaitTimeout
		}
		if errors.Is(err, errWaitTimeout) {
			if interrupted { // the interrupt itself was not honoured: keep waiting
				check = time.Now().Add(lim.Soft)
				continue
			}
			if err := unix.PtraceInterrupt(th.Tid); err != nil {
				return 0, th.gone(err)
			}
			interrupted = true
			check = time.Now().Add(time.Second)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("thread %d: %w", th.Tid, err)
		}
		if s.exited {
			th.detached = true
			return 0, fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
		}
		var r Regs
		if err := unix.PtraceGetRegs(th.Tid, &r); err != nil {
			return 0, th.gone(err)
		}
		switch {
		case s.interruptStop() && interrupted && !s.groupStop():
			interrupted = false
			if nr, blocked := InSyscall(&r); blocked {
				th.tainted = true
				return 0, &TimeoutError{Blocked: true, Syscall: nr, PC: r.Rip, Cancelled: cancelled}
			}
			if time.Now().After(hard) {
				th.tainted = true
				return 0, &TimeoutError{PC: r.Rip, Cancelled: cancelled}
			}
			check = time.Now().Add(lim.Soft / 4)
		case s.interruptStop():
			if s.groupStop() {
				th.holdSignal(s.signal)
			}
		case s.signal == unix.SIGSEGV && r.Rip == 0:
			return r.Rax, nil
		default:
			si, err := getSiginfo(th.Tid)
			if err != nil {
				return 0, th.gone(err)
			}
			if fatal(s.signal) && (si.code() > 0 || int(si.pid()) == th.p.Pid) {
				// The call itself faulted (or aborted). The signal is not
				// ours to give to the target: its handler would see a
				// crash that never happened in its own code.
				th.tainted = true
				return 0, &FaultError{Signal: unix.SignalName(s.signal), PC: r.Rip, Addr: si.addr()}
			}
			th.held = append(th.held, si)
		}
		if err := unix.PtraceCont(th.Tid, 0); err != nil {
			return 0, th.gone(err)
		}
	}
}

func fatal(sig unix.Signal) bool {
	switch sig {
	case unix.SIGSEGV, unix.SIGBUS, unix.SIGILL, unix.SIGFPE, unix.SIGABRT, unix.SIGTRAP, unix.SIGSYS:
		return true
	}
	return false
}

// le64 decodes a little-endian word; the target is x86_64.
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
