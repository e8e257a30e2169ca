package ptrace

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
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
	saved       *Regs  // registers as the target had them when we stopped it
	xstate      []byte // read when first asked for (XState)
	xsRead      bool
	tainted     bool      // a call was abandoned: no further calls on this thread
	held        []siginfo // signals that arrived while we held the thread
	detached    bool
	tramp       uint64    // the target's signal trampoline (SetTrampoline)
	inj         *injector // set from the first Call until the thread is restored
	// written: a call was made on the thread (its registers, extended
	// state or stack written). Only such a thread has registers to put
	// back; one that was only stopped is let go as it is.
	written bool
	// execStop: the thread is the process's new program, stopped right
	// after execve (PTRACE_EVENT_EXEC). Nothing of the old program may be
	// put back into it; it is let go as it is.
	execStop bool
	reaped   atomic.Bool // reaped by reapDead while the tracer thread was blocked
	unreaped bool        // detached because it died, but its exit not collected yet
}

// seizeOptions: a thread that calls execve while seized stops once the new
// program is in place (PTRACE_EVENT_EXEC), reported under the process id.
// Without it, a thread we asked to stop would stop somewhere in the new
// program with no sign of the change, and registers saved from the old one
// could be written into it.
const seizeOptions = unix.PTRACE_O_TRACEEXEC

// seizePatience bounds Seize. PTRACE_SEIZE waits while the process is inside
// execve, and an exec waits for the threads it kills to be reaped: reapDead
// does that meanwhile, so a longer wait means something else holds the
// exec (a program file on a hung file system, say).
const seizePatience = 10 * time.Second

// seizeGrace is the least time a bounded Seize waits before it says the
// kernel holds the request.
const seizeGrace = 50 * time.Millisecond

// Seize attaches to one thread without stopping it (PTRACE_SEIZE).
func (p *Process) Seize(tid int) (*Thread, error) {
	return p.SeizeWithin(tid, Within(seizePatience, nil))
}

// SeizeWithin is Seize bounded by b. While the request waits, the threads we
// hold that have died are reaped: an execve by another thread kills them
// and then waits, with attaching blocked, until they are.
func (p *Process) SeizeWithin(tid int, b Bound) (*Thread, error) {
	if err := b.expired(); err == errWaitCancel {
		return nil, &StuckError{Pid: p.Pid, Tid: tid, Cancelled: true}
	}
	// The request itself takes microseconds: a deadline that has passed,
	// or nearly, still gives it the time to say whether it is held.
	if min := time.Now().Add(seizeGrace); b.Deadline.Before(min) {
		b.Deadline = min
	}
	th := &Thread{p: p, Tid: tid}
	err, gaveUp := p.t.doBounded(func() error {
		return ptraceRaw(unix.PTRACE_SEIZE, tid, 0, seizeOptions)
	}, b, p.reapDead, func(err error) {
		if err == nil {
			// Attached after we stopped waiting: Close stops and releases it.
			p.track(th)
		}
	})
	if gaveUp {
		return nil, &StuckError{Pid: p.Pid, Tid: tid, Cancelled: b.expired() == errWaitCancel}
	}
	if err != nil {
		return nil, p.seizeErr(tid, err)
	}
	p.track(th)
	return th, nil
}

// SeizeAllWithin is SeizeWithin for each of tids, in one bounded request
// to the tracer thread (see InterruptAll): one request per thread, each
// with its own timers, cost more than the PTRACE_SEIZEs. It returns a
// Thread per tid, nil for one that exited (SeizeWithin's ErrNoProcess),
// and stops at the first other error, returning it with what was seized
// until then. Given up on at b (a seize held while an execve waits), it
// returns a StuckError and nothing: what the tracer thread seized is
// tracked, and Close or Settle lets it go, as SeizeWithin's late seize.
func (p *Process) SeizeAllWithin(tids []int, b Bound) ([]*Thread, error) {
	if len(tids) == 0 {
		return nil, nil
	}
	if err := b.expired(); err == errWaitCancel {
		return nil, &StuckError{Pid: p.Pid, Tid: tids[0], Cancelled: true}
	}
	if min := time.Now().Add(seizeGrace); b.Deadline.Before(min) {
		b.Deadline = min
	}
	out := make([]*Thread, len(tids))
	var at atomic.Int64 // the index being seized
	var stop atomic.Bool
	last := int64(-1)
	err, gaveUp := p.t.doBounded(func() error {
		for i, tid := range tids {
			if stop.Load() {
				return nil
			}
			at.Store(int64(i))
			if err := ptraceRaw(unix.PTRACE_SEIZE, tid, 0, seizeOptions); err != nil {
				if err := p.seizeErr(tid, err); !errors.Is(err, ErrNoProcess) {
					return err
				}
				continue
			}
			th := &Thread{p: p, Tid: tid}
			p.track(th)
			out[i] = th
		}
		return nil
	}, b, func() {
		// Reaped only while a seize is held (no progress since the last
		// tick), as SeizeWithin reaps while its one seize waits: not
		// every 2 ms of a batch that is moving.
		if n := at.Load(); n == last {
			p.reapDead()
		} else {
			last = n
		}
	}, func(error) {})
	if gaveUp {
		stop.Store(true)
		return nil, &StuckError{Pid: p.Pid, Tid: tids[at.Load()], Cancelled: b.expired() == errWaitCancel}
	}
	return out, err
}

func (p *Process) track(th *Thread) {
	p.mu.Lock()
	p.threads[th.Tid] = th
	p.mu.Unlock()
}

// seizeErr names why PTRACE_SEIZE failed. EPERM also means the thread is
// already exiting, or already ours: that is a thread gone, not a permission.
func (p *Process) seizeErr(tid int, err error) error {
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("thread %d of process %d: %w", tid, p.Pid, ErrNoProcess)
	}
	if errors.Is(err, unix.EPERM) {
		st, serr := p.ReadStatus(tid)
		switch {
		case serr != nil || st.Dead():
			return fmt.Errorf("thread %d of process %d: %w", tid, p.Pid, ErrNoProcess)
		case ours(st.TracerPid):
			// Only a thread that exec'd while we held it is ours without
			// our knowing: the new program, under the process id.
			return p.Explain(fmt.Errorf("thread %d of process %d: %w", tid, p.Pid, ErrExec))
		case st.TracerPid != 0:
			return tracedError(p.Pid, st.TracerPid)
		}
	}
	return procErr(p.Pid, err)
}

// reapDead reaps the threads we hold that have died. It runs on the
// goroutine waiting for a blocked PTRACE_SEIZE, not on the tracer thread.
func (p *Process) reapDead() {
	p.mu.Lock()
	ths := make([]*Thread, 0, len(p.threads))
	for _, th := range p.threads {
		ths = append(ths, th)
	}
	p.mu.Unlock()
	for _, th := range ths {
		if !th.reaped.Load() && reapIfDead(th.Tid) {
			th.reaped.Store(true)
		}
	}
}

// Stop interrupts the thread and waits until it is stopped, then saves its
// registers and extended state. Signals that arrive meanwhile are held back
// and re-sent on Detach.
func (th *Thread) Stop(timeout time.Duration) error {
	return th.StopWithin(Within(timeout, nil))
}

// StopWithin is Stop bounded by b.
func (th *Thread) StopWithin(b Bound) error {
	if err := th.Interrupt(); err != nil {
		return err
	}
	return th.WaitStoppedWithin(b)
}

// Interrupt asks the thread to stop (PTRACE_INTERRUPT) without waiting, so
// that a whole process can be asked at once and then waited for.
func (th *Thread) Interrupt() error {
	if th.stopped || th.interrupted || th.detached {
		return nil
	}
	return th.p.t.do(th.interruptLocked)
}

// InterruptAll is Interrupt for each of ths, in one request to the tracer
// thread: a request costs two thread wake-ups (a futex each way), which
// for a process of 2,000 threads came to more than its PTRACE_INTERRUPTs.
// It returns the first error other than a thread gone.
func (p *Process) InterruptAll(ths []*Thread) error {
	return p.t.do(func() error {
		defer hurry(len(ths))()
		for _, th := range ths {
			if err := th.interruptLocked(); err != nil && !errors.Is(err, ErrGone) {
				return err
			}
		}
		return nil
	})
}

func (th *Thread) interruptLocked() error {
	if th.stopped || th.interrupted || th.detached {
		return nil
	}
	if err := unix.PtraceInterrupt(th.Tid); err != nil {
		return th.gone(err)
	}
	th.interrupted = true
	return nil
}

// WaitStopped waits for the stop Interrupt asked for, then saves the
// thread's registers and extended state.
func (th *Thread) WaitStopped(timeout time.Duration) error {
	return th.WaitStoppedWithin(Within(timeout, nil))
}

// WaitStoppedWithin is WaitStopped bounded by b.
func (th *Thread) WaitStoppedWithin(b Bound) error {
	if th.stopped {
		return nil
	}
	if th.detached {
		return fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
	}
	return th.p.t.do(func() error {
		deadline := b.Deadline
		if deadline.IsZero() {
			deadline = time.Now().Add(24 * time.Hour)
		}
		for {
			// In slices, to notice between them a process that has
			// exec'd or exited: a thread killed by that before it
			// stopped may report nothing we can wait for.
			slice := time.Now().Add(50 * time.Millisecond)
			if slice.After(deadline) {
				slice = deadline
			}
			s, err := waitFor(th.Tid, slice, b.Cancel)
			if errors.Is(err, errWaitTimeout) && slice.Before(deadline) {
				if cerr := th.p.Check(); cerr != nil {
					return cerr
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("thread %d did not stop: %w", th.Tid, err)
			}
			done, err := th.step(s)
			if done {
				return err
			}
		}
	})
}

// WaitAll waits until every one of ths is stopped (registers saved) or gone,
// all at once: an execve by one thread waits for the others to be reaped,
// so waiting for one at a time could wait on the exec. It returns ErrExec
// if the process exec'd, and a timeout or cancellation from b; a thread
// that exited is only marked gone (Gone reports it).
func (p *Process) WaitAll(ths []*Thread, b Bound) error {
	return p.t.do(func() error {
		pending := append([]*Thread(nil), ths...)
		pause := 5 * time.Microsecond
		lastReap := time.Now()
		var execErr error
		for {
			next := pending[:0]
			for _, th := range pending {
				if th.stopped || th.detached || th.execStop {
					continue
				}
				s, ok, err := poll(th.Tid)
				if err != nil {
					return fmt.Errorf("thread %d: %w", th.Tid, err)
				}
				if !ok {
					next = append(next, th)
					continue
				}
				done, err := th.step(s)
				if !done {
					next = append(next, th)
					continue
				}
				if errors.Is(err, ErrExec) {
					execErr = err
				} else if err != nil && !errors.Is(err, ErrGone) {
					return err
				}
			}
			pending = next
			if len(pending) == 0 {
				return execErr
			}
			// Threads stopped in an earlier round that an execve has
			// killed since: the exec waits for them to be reaped.
			if time.Since(lastReap) > 5*time.Millisecond {
				p.reapDead()
				lastReap = time.Now()
				// A thread the exec killed before it stopped may never
				// report anything we can wait for (a main thread that
				// is a zombie until the exec releases it).
				if err := p.Check(); err != nil {
					return err
				}
			}
			if err := b.expired(); err != nil {
				return fmt.Errorf("thread %d did not stop: %w", pending[0].Tid, err)
			}
			time.Sleep(pause)
			if pause < time.Millisecond {
				pause *= 2
			}
		}
	})
}

// Gone reports a thread known to have exited.
func (th *Thread) Gone() bool { return th.detached && !th.execStop }

// step takes one wait status of a thread we asked to stop. done: the thread
// is stopped with its registers saved, or gone (err says which). Runs on the
// tracer thread.
func (th *Thread) step(s stop) (done bool, err error) {
	switch {
	case s.exited:
		th.detached, th.unreaped = true, false
		th.held = nil
		return true, fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
	case s.exec():
		th.onExec()
		return true, fmt.Errorf("process %d: %w", th.p.Pid, ErrExec)
	case s.interruptStop():
		if s.groupStop() {
			th.holdSignal(s.signal)
		}
		th.stopped = true
		return true, th.save()
	}
	// A signal-delivery-stop: hold the signal back so that the target's
	// handler does not run on registers we are about to borrow; wait for
	// our interrupt trap.
	if err := th.holdPending(); err != nil {
		return true, err
	}
	if err := unix.PtraceCont(th.Tid, 0); err != nil {
		return true, th.gone(err)
	}
	return false, nil
}

// onExec marks th as the new program of the process, stopped after execve.
// The registers and signals we held were the old program's, whose threads
// are all gone.
func (th *Thread) onExec() {
	th.execStop, th.stopped = true, true
	th.saved, th.xstate, th.held = nil, nil, nil
	th.p.mu.Lock()
	th.p.execed = true
	th.p.mu.Unlock()
}

// save keeps the registers of a thread that has just stopped. Its
// extended state is read when asked for (XState): of a process with
// thousands of threads stopped at once, most are only let go again, and
// reading each one's XSAVE area (into a 16 KiB buffer) while every other
// waits was a good part of the stop.
func (th *Thread) save() error {
	var r Regs
	if err := getRegs(th.Tid, &r); err != nil {
		return th.gone(err)
	}
	th.saved, th.xstate, th.xsRead = &r, nil, false
	return nil
}

// Regs returns the registers saved by Stop.
func (th *Thread) Regs() Regs {
	if th.saved == nil {
		return Regs{}
	}
	return *th.saved
}

// XState returns the extended (FPU, SSE, AVX) state the thread stopped
// with, as PTRACE_GETREGSET gives NT_X86_XSTATE: an XSAVE area whose first
// 512 bytes are the FXSAVE layout of NT_PRFPREG. It is read the first time
// it is asked for (or by ReadXStates), while the thread is still stopped;
// nil where it could not be read.
func (th *Thread) XState() []byte {
	if th.xsRead || th.saved == nil || !th.stopped || th.detached || th.execStop {
		return th.xstate
	}
	th.p.ReadXStates([]*Thread{th})
	return th.xstate
}

// ReadXStates reads the extended state of those of ths that are stopped
// and have not had it read, in one request to the tracer thread: a request
// per thread costs a switch to the tracer thread each, thousands of them
// while every thread of the process waits.
func (p *Process) ReadXStates(ths []*Thread) {
	p.t.do(func() error {
		for _, th := range ths {
			if !th.xsRead && th.saved != nil && th.stopped && !th.detached && !th.execStop {
				if xs, err := getXState(th.Tid); err == nil {
					th.xstate = xs
				}
				th.xsRead = true
			}
		}
		return nil
	})
}

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
	if th.saved == nil || th.execStop {
		return nil
	}
	if th.inj != nil {
		return th.teardown()
	}
	r := *th.saved
	if err := setRegs(th.Tid, &r); err != nil {
		return th.gone(err)
	}
	if err := setXState(th.Tid, th.xstate); err != nil {
		return fmt.Errorf("thread %d: restoring extended registers: %w", th.Tid, err)
	}
	return nil
}

// Detach restores the thread's registers, lets it go, and re-sends the
// signals held back while we had it. It is idempotent. A thread that was
// asked to stop but has not stopped yet cannot be let go before it does:
// it stays with the Process, whose Close waits for it.
func (th *Thread) Detach() error {
	if th.detached && !th.unreaped {
		th.p.untrack(th)
		return nil
	}
	err := th.p.t.do(th.detachLocked)
	if th.detached && !th.unreaped {
		th.p.untrack(th)
	}
	if errors.Is(err, ErrGone) && th.detached {
		err = nil // died while we held it: nothing left to give back
	}
	return err
}

// DetachAll is Detach for each of ths, in one request to the tracer
// thread (see InterruptAll). It returns the first error.
func (p *Process) DetachAll(ths []*Thread) error {
	errs := make([]error, len(ths))
	first := p.t.do(func() error {
		defer hurry(len(ths))()
		for i, th := range ths {
			if !th.detached || th.unreaped {
				errs[i] = th.detachLocked()
			}
		}
		return nil
	})
	for i, th := range ths {
		if th.detached && !th.unreaped {
			p.untrack(th)
		}
		if err := errs[i]; err != nil && !(errors.Is(err, ErrGone) && th.detached) && first == nil {
			first = err
		}
	}
	return first
}

func (p *Process) untrack(th *Thread) {
	p.mu.Lock()
	if p.threads[th.Tid] == th {
		delete(p.threads, th.Tid)
	}
	p.mu.Unlock()
}

func (th *Thread) detachLocked() error {
	if th.detached {
		if th.unreaped && !th.reaped.Load() {
			if s, ok, _ := poll(th.Tid); ok && s.exited {
				th.unreaped = false
			}
		} else {
			th.unreaped = false
		}
		return nil
	}
	if th.reaped.Load() {
		th.detached, th.held = true, nil
		return nil
	}
	// A thread held in a stop changes only by dying, or by a sibling's
	// execve putting the new program in its place (under the process id);
	// either shows as a wait status, looked for before anything is written.
	for !th.detached {
		s, ok, err := poll(th.Tid)
		if err != nil || !ok {
			break
		}
		if th.stopped && !s.exited && !s.exec() {
			break // not ours to interpret here; PTRACE_DETACH discards it
		}
		th.step(s)
	}
	if th.detached {
		return nil
	}
	if !th.stopped && th.Tid == th.p.Pid {
		// A main thread killed by another's execve is released by the
		// kernel without a word, and the id passes to the new program;
		// whether we still trace anything under it is in its status.
		if st, err := th.p.ReadStatus(th.Tid); err != nil || !ours(st.TracerPid) {
			th.detached, th.held = true, nil
			return nil
		}
	}
	if !th.stopped {
		// PTRACE_DETACH needs a stopped tracee: ask for the stop, and let
		// Process.settle give the thread back once it is there (or reap it
		// once it has died).
		if err := th.interruptLocked(); err != nil && !errors.Is(err, ErrGone) {
			return err
		}
		return nil
	}
	var first error
	// A thread nothing was written to has its registers as it stopped
	// with: putting them back would cost three system calls a thread
	// while every other thread of the process waits (an image of a
	// process with 2,000 threads stopped them all 120-360 ms longer).
	if th.written && th.saved != nil && !th.p.execed && !th.execStop && !th.looksExeced() {
		first = th.restoreLocked()
	}
	if !th.stopped {
		return nil // killed under us: settle reaps it
	}
	if err := unix.PtraceDetach(th.Tid); err != nil {
		if errors.Is(err, unix.ESRCH) {
			th.stopped = false
			return nil // killed under us: settle reaps it
		}
		if first == nil {
			first = fmt.Errorf("thread %d: detach: %w", th.Tid, err)
		}
	}
	th.detached = true
	if !th.execStop && !th.p.execed {
		held := th.held
		if slices.ContainsFunc(held, isStop) && th.p.continuedLocked() {
			held = slices.DeleteFunc(slices.Clone(held), isStop)
		}
		for _, si := range held {
			redeliver(th.p.Pid, th.Tid, si)
		}
	}
	th.held = nil
	return first
}

// looksExeced reports registers that only a thread just out of a successful
// execve has: a last resort against writing the old program's registers
// into a new one whose exec stop we have not seen yet.
func (th *Thread) looksExeced() bool {
	var r Regs
	if err := getRegs(th.Tid, &r); err != nil {
		return false
	}
	return justExeced(&r, th.saved)
}

// Settle gives back what Detach could not (see settle), waiting at most d.
func (p *Process) Settle(d time.Duration) { p.settle(time.Now().Add(d)) }

// settle gives back, until deadline, the threads Detach could not: those
// still on their way into a stop we asked for, those that attached after we
// stopped waiting, and the new program of a thread that exec'd while we had
// it. Dead ones are reaped, so that an exec waiting for them can finish.
func (p *Process) settle(deadline time.Time) {
	p.mu.Lock()
	t := p.t
	p.mu.Unlock()
	if t == nil {
		return // closed: the tracer thread, and with it every tracee, is gone
	}
	t.do(func() error {
		for {
			p.mu.Lock()
			ths := make([]*Thread, 0, len(p.threads))
			for _, th := range p.threads {
				ths = append(ths, th)
			}
			p.mu.Unlock()
			// Once the program is gone, a thread of it that has not
			// stopped never will: it is dying. Not so the process id: it
			// may stand for the new program, on its way to its exec stop.
			pending := 0
			for _, th := range ths {
				if !th.detached || th.unreaped {
					th.detachLocked()
				}
				switch {
				case th.detached && !th.unreaped:
					p.untrack(th)
				case th.detached:
					// Dead, not reaped: an exec waits for it. A main
					// thread is reaped only with the whole process.
					if th.Tid != p.Pid {
						pending++
					}
				case th.stopped || th.Tid == p.Pid || p.Check() == nil:
					pending++
				}
			}
			if p.claimExec() {
				pending++
			}
			if pending == 0 || time.Now().After(deadline) {
				return nil
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// ours reports whether tracer, a TracerPid, is a thread of this process:
// /proc shows the tracer's thread id, not its process id.
func ours(tracer int) bool {
	if tracer == 0 {
		return false
	}
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tracer))
	return err == nil
}

// claimExec lets go of the process's new program when a thread we had
// seized exec'd and no Thread stands for it: that thread's id went away
// with the exec, and the program stops under the process id. It reports
// whether such a program is still traced by us but not stopped yet.
func (p *Process) claimExec() bool {
	p.mu.Lock()
	_, tracked := p.threads[p.Pid]
	p.mu.Unlock()
	if tracked {
		return false
	}
	st, err := p.ReadStatus(p.Pid)
	if err != nil || !ours(st.TracerPid) {
		return false
	}
	s, ok, err := poll(p.Pid)
	if err != nil || !ok {
		return true
	}
	if s.exited {
		return false
	}
	if s.exec() {
		p.mu.Lock()
		p.execed = true
		p.mu.Unlock()
	}
	unix.PtraceDetach(p.Pid)
	return false
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

// isStop reports a held job-control stop (SIGSTOP, SIGTSTP, SIGTTIN,
// SIGTTOU): the stop the thread was in, or was about to enter, when we
// took it.
func isStop(si siginfo) bool {
	switch unix.Signal(si.signo()) {
	case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return true
	}
	return false
}

// continuedLocked reports whether the process was continued (SIGCONT)
// since we took threads of it that were stopped: a stop given back after
// that would undo it, and leave stopped a process someone had just told
// to go on. It is read only when a stop is to be given back. The SIGCONT
// shows as a signal one of our threads holds; pending for the process
// (kill() queues it for a traced main thread); or in the threads we do
// not trace, which it set running. A thread we let go with its stop given
// back may run for a moment before that stop reaches it, but its stop
// already covers the process then. Runs on the tracer.
func (p *Process) continuedLocked() bool {
	p.mu.Lock()
	for _, th := range p.threads {
		if slices.ContainsFunc(th.held, func(si siginfo) bool { return unix.Signal(si.signo()) == unix.SIGCONT }) {
			p.mu.Unlock()
			return true
		}
	}
	p.mu.Unlock()
	if st, err := p.ReadStatus(p.memTid); err == nil && st.ShdPnd&(1<<(unix.SIGCONT-1)) != 0 {
		return true
	}
	tids, err := p.Tasks()
	if err != nil {
		return false
	}
	for _, tid := range tids {
		st, err := p.ReadStatus(tid)
		if err != nil || st.TracerPid != 0 || st.Dead() {
			continue
		}
		if st.State != 'T' && st.State != 't' {
			return true
		}
	}
	return false
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
		// ESRCH on a seized thread means it is not in a ptrace-stop: it
		// was killed. Nothing more can be done to it, but it is still
		// ours until we reap it (settle), and until then an execve in
		// the process waits for it.
		th.detached, th.unreaped, th.stopped = true, true, false
		return fmt.Errorf("thread %d: %w", th.Tid, ErrGone)
	}
	return fmt.Errorf("thread %d: %w", th.Tid, err)
}
