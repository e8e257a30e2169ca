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

// traceOptions: syscall stops must be told from SIGTRAPs, because the end of
// a call is a syscall-entry-stop. Never PTRACE_O_EXITKILL: the target must
// outlive arenactl.
const traceOptions = unix.PTRACE_O_TRACESYSGOOD

// Where a borrowed thread is stopped, which decides what resuming it does.
type stopAt int

const (
	atOther stopAt = iota // interrupt-, group- or signal-delivery-stop
	atEntry               // syscall-entry-stop: the syscall in orig_rax runs on resume
	atExit                // syscall-exit-stop
)

// injector is the state of a thread that runs calls. From the first
// register change on, the thread is at every instant either in its own
// state or in one that restores it without arenactl: a call returning into
// the call site's routine, or (while the site is made or removed) a syscall
// returning into the signal trampoline with a signal frame on its stack.
type injector struct {
	exact    Regs // the thread's own registers as a user-mode resume point (orig_rax -1, syscall restart applied)
	fallback Regs // the same for the signal frame (see frame.go)
	xs       []byte
	sp       uint64 // return-address slot; the signal frame starts at sp+8
	base     uint64 // the call site, 0 while it does not exist
	size     uint64
	entry    uint64 // where calls return to
	image    uint64 // the copy-on-write image routine (clone.go)
	raw      uint64 // the raw syscall routine (clone.go)
	lock     uint64 // the lock routine (lock.go), its end, and where its futex wait returns
	lockEnd  uint64
	lockWait uint64
	hold     *lockHold // the HoldLock call under way, if any
	restore  uint64    // just after the marker syscall
	seq      uint64
	at       stopAt
	escaped  bool // the thread restored itself (we were too slow at the gate)
}

// SetTrampoline gives the address of the target's signal trampoline (glibc's
// __restore_rt), which the call site's creation and removal fall back on.
// Without it no call can be made.
func (th *Thread) SetTrampoline(addr uint64) { th.tramp = addr }

// Call runs fn(args...) on the stopped thread and returns its rax. The
// first call makes the thread's call site; Detach (or Restore) removes it
// and puts the thread's registers back.
func (th *Thread) Call(lim CallLimits, fn uint64, args ...uint64) (uint64, error) {
	if !th.stopped || th.saved == nil {
		return 0, errors.New("ptrace: Call on a thread that was not stopped")
	}
	if th.tainted && th.inj != nil && th.inj.escaped {
		return 0, fmt.Errorf("thread %d: %w (held up longer than the call site's gate); no further calls", th.Tid, ErrRestoredItself)
	}
	if th.tainted {
		return 0, errors.New("ptrace: thread has an abandoned call; no further calls")
	}
	if len(args) > 6 {
		return 0, errors.New("ptrace: at most 6 integer arguments")
	}
	return th.invoke(lim, func(*injector) uint64 { return fn }, args)
}

// invoke makes the call site if there is none yet, then calls the address
// fn gives (which may lie in the site itself).
func (th *Thread) invoke(lim CallLimits, fn func(*injector) uint64, args []uint64) (uint64, error) {
	var ret uint64
	err := th.p.t.do(func() error {
		if th.inj == nil {
			if err := th.arm(); err != nil {
				if th.inj != nil {
					return errors.Join(err, th.teardown())
				}
				return err
			}
		}
		var err error
		ret, err = th.call(lim, fn(th.inj), args)
		return err
	})
	return ret, err
}

// waitSyscall resumes through other stops until the thread reaches a
// syscall stop of the kind asked for. Signals meanwhile are held back.
func (th *Thread) waitSyscall(want byte) (Regs, error) {
	deadline := time.Now().Add(5 * time.Second)
	late := false
	for {
		s, err := waitFor(th.Tid, deadline, nil)
		if errors.Is(err, errWaitTimeout) {
			// It should have taken microseconds. Take the thread back
			// wherever it is; the caller restores it.
			if err := unix.PtraceInterrupt(th.Tid); err != nil {
				return Regs{}, th.gone(err)
			}
			deadline = time.Now().Add(5 * time.Second)
			late = true
			continue
		}
		if err != nil {
			return Regs{}, fmt.Errorf("thread %d: %w", th.Tid, err)
		}
		if s.exited {
			th.detached = true
			return Regs{}, fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
		}
		var r Regs
		if err := getRegs(th.Tid, &r); err != nil {
			return Regs{}, th.gone(err)
		}
		if th.inj != nil {
			th.inj.at = atOther
		}
		if late {
			return Regs{}, fmt.Errorf("thread %d: no syscall stop came", th.Tid)
		}
		switch {
		case s.syscallStop():
			op, err := syscallOp(th.Tid)
			if err != nil {
				return Regs{}, th.gone(err)
			}
			if th.inj != nil {
				th.inj.at = atExit
				if op == syscallInfoEntry {
					th.inj.at = atEntry
				}
			}
			if op == want {
				return r, nil
			}
		case s.interruptStop():
			if s.groupStop() {
				th.holdSignal(s.signal)
			}
		default:
			si, err := getSiginfo(th.Tid)
			if err != nil {
				return Regs{}, th.gone(err)
			}
			if fatal(s.signal) && si.code() > 0 {
				return Regs{}, &FaultError{Signal: unix.SignalName(s.signal), PC: PC(&r), Addr: si.addr()}
			}
			th.held = append(th.held, si)
		}
		if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
			return Regs{}, th.gone(err)
		}
	}
}

// run resumes the thread and waits for the call to end. Runs on the tracer.
// The end shows in the site's done word: the routine then waits at its gate,
// where we interrupt it and park it for the next call.
func (th *Thread) run(lim CallLimits) (uint64, error) {
	in := th.inj
	start := time.Now()
	check := start.Add(lim.Soft)
	hard := start.Add(lim.Hard)
	if err := unix.PtraceCont(th.Tid, 0); err != nil {
		return 0, th.gone(err)
	}
	interrupted, cancelled, finishing := false, false, false
	cancel := lim.Cancel
	for {
		slice := time.Now().Add(500 * time.Microsecond)
		if slice.After(check) {
			slice = check
		}
		s, err := waitFor(th.Tid, slice, cancel)
		if errors.Is(err, errWaitTimeout) && time.Now().Before(check) {
			if h := in.hold; h != nil && !h.ran && !finishing {
				th.holdStep(h)
			}
			if !finishing {
				done, rerr := th.p.ReadUint64(in.base + hdrDone)
				if rerr == nil && done == in.seq {
					if err := unix.PtraceInterrupt(th.Tid); err != nil {
						return 0, th.gone(err)
					}
					finishing = true
				}
			}
			continue
		}
		if errors.Is(err, errWaitCancel) {
			cancelled, cancel = true, nil // a closed channel would fire on every poll
			err = errWaitTimeout
		}
		if errors.Is(err, errWaitTimeout) {
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
		if err := getRegs(th.Tid, &r); err != nil {
			return 0, th.gone(err)
		}
		in.at = atOther
		switch {
		case s.interruptStop() && (finishing || th.inSite(PC(&r)) && !in.inLockRoutine(PC(&r))):
			// In a stopped process our interrupt is reported as a
			// group-stop.
			if s.groupStop() {
				th.holdSignal(s.signal)
			}
			return th.finish(&r)
		case s.interruptStop() && interrupted && !s.groupStop() && in.hold != nil && !th.holdAbandonable(in.hold, &r):
			// The lock routine holds the lock, or is taking it and about
			// to say so: never abandoned then. The polls run the reads
			// and release it, and it returns within a poll of that.
			interrupted = false
			check = time.Now().Add(lim.Soft / 4)
		case s.interruptStop() && interrupted && !s.groupStop():
			interrupted = false
			if nr, _, blocked := th.blockedIn(&r); blocked {
				return 0, th.abandon(&TimeoutError{Blocked: true, Syscall: nr, PC: PC(&r), Cancelled: cancelled})
			}
			if time.Now().After(hard) {
				return 0, th.abandon(&TimeoutError{PC: PC(&r), Cancelled: cancelled})
			}
			check = time.Now().Add(lim.Soft / 4)
		case s.interruptStop():
			if s.groupStop() {
				th.holdSignal(s.signal)
			}
		default:
			si, err := getSiginfo(th.Tid)
			if err != nil {
				return 0, th.gone(err)
			}
			if fatal(s.signal) && (si.code() > 0 || int(si.pid()) == th.p.Pid) {
				// The call itself faulted (or aborted). The signal is not
				// ours to give to the target: its handler would see a
				// crash that never happened in its own code.
				return 0, th.abandon(&FaultError{Signal: unix.SignalName(s.signal), PC: PC(&r), Addr: si.addr()})
			}
			th.held = append(th.held, si)
		}
		if err := unix.PtraceCont(th.Tid, 0); err != nil {
			return 0, th.gone(err)
		}
	}
}

// inLockRoutine reports whether pc is in the lock routine while a HoldLock
// call runs: a stop there is not the call's end.
func (in *injector) inLockRoutine(pc uint64) bool {
	return in.hold != nil && in.hold.holds(pc)
}

func (th *Thread) inSite(pc uint64) bool {
	in := th.inj
	return in.base != 0 && pc >= in.base && pc < in.base+in.size
}

// finish takes the thread back after its call returned. Normally it waits
// at the gate; if we were too slow (stopped longer than the gate waits), it
// has restored itself and runs its own code again: the result stands, but
// the thread is no longer ours to call in.
func (th *Thread) finish(r *Regs) (uint64, error) {
	in := th.inj
	res, err := th.p.ReadUint64(in.base + hdrResult)
	if err != nil {
		return 0, err
	}
	if th.inSite(PC(r)) {
		return res, th.park()
	}
	th.tainted, in.escaped = true, true
	return res, nil
}

// abandon gives up the call: the thread is parked on the restore code, so
// it is whole again whether we release it or die.
func (th *Thread) abandon(why error) error {
	th.tainted = true
	if err := th.park(); err != nil {
		return errors.Join(why, err)
	}
	return why
}

// teardown removes the call site (returning into the signal trampoline
// meanwhile), then puts the thread's own registers back, extended state
// first: until the general registers change, a thread resumed without us
// would still restore itself. Runs on the tracer.
func (th *Thread) teardown() error {
	in := th.inj
	if in.escaped {
		// Its registers are its own again and it ran on: nothing to put
		// back. The site stays, marked restored, for the next run.
		var r Regs
		if err := getRegs(th.Tid, &r); err != nil {
			return th.gone(err)
		}
		th.saved, th.inj = &r, nil
		if xs, err := getXState(th.Tid); err == nil {
			th.xstate, th.xsRead = xs, true
		}
		return nil
	}
	var first error
	keep := false
	if in.base != 0 {
		hold, err := th.p.ReadUint64(in.base + journalOff + JournalHolds)
		keep = err == nil && hold != 0
	}
	if in.base != 0 && !keep {
		err := func() error {
			if in.at != atEntry {
				if err := th.enterTrampoline(); err != nil {
					return err
				}
			}
			rv, err := th.trampSyscall(unix.SYS_MUNMAP, in.base, in.size)
			if err == nil && rv != 0 {
				err = unix.Errno(-rv)
			}
			return err
		}()
		if err != nil {
			first = fmt.Errorf("thread %d: removing the call site at %#x: %w", th.Tid, in.base, err)
		}
		if err == nil {
			in.base = 0
		}
	}
	if th.detached {
		return first
	}
	if err := setXState(th.Tid, in.xs); err != nil && first == nil {
		first = fmt.Errorf("thread %d: restoring extended registers: %w", th.Tid, err)
	}
	r := in.exact
	if err := th.setResume(&r); err != nil {
		return errors.Join(first, th.gone(err))
	}
	if in.base != 0 {
		// Left behind, but nothing runs in it any more: say so for the
		// next run, which removes it.
		var one [8]byte
		one[0] = 1
		th.p.WriteAt(one[:], in.base+hdrRestored)
		if !keep {
			first = &SiteLeftError{Addr: in.base, Size: in.size, Err: first}
		}
	}
	th.saved, th.inj = &r, nil
	return first
}

// SiteLeftError: the call site could not be removed; it stays in the target,
// marked, with nothing running in it, for a later run to remove.
type SiteLeftError struct {
	Addr, Size uint64
	Err        error
}

func (e *SiteLeftError) Error() string {
	return fmt.Sprintf("%v; the %d-byte call site at %#x stays in the target, marked for the next run to remove", e.Err, e.Size, e.Addr)
}

func (e *SiteLeftError) Unwrap() error { return e.Err }

// Site returns the call site's address and size, and where its journal is
// (512 bytes the caller may use to record what else it creates in the
// target, so a later run can find it). Zero before the first Call.
func (th *Thread) Site() (base, size, journal uint64) {
	if th.inj == nil || th.inj.base == 0 {
		return 0, 0, 0
	}
	return th.inj.base, th.inj.size, th.inj.base + journalOff
}

func fatal(sig unix.Signal) bool {
	switch sig {
	case unix.SIGSEGV, unix.SIGBUS, unix.SIGILL, unix.SIGFPE, unix.SIGABRT, unix.SIGTRAP, unix.SIGSYS:
		return true
	}
	return false
}

func errnoOf(v int64) error { return unix.Errno(-v) }

// le64 decodes a little-endian word; x86_64 and aarch64 (as Linux runs
// it) are both little-endian.
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
