package live

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// HijackOptions say how long to look for a safe thread and how long a call
// may run.
type HijackOptions struct {
	Timeout time.Duration // for finding a thread, and the soft limit of each call
	Tid     int           // borrow only this thread (0: choose)
}

// NoSafeThreadError: no thread qualified before the timeout. Reasons holds,
// per thread id, why it was last refused.
type NoSafeThreadError struct {
	Pid     int
	Waited  time.Duration
	Reasons map[int]string
}

func (e *NoSafeThreadError) Is(target error) bool { return target == errkind.ErrNoSafeThread }

func (e *NoSafeThreadError) Error() string {
	tids := make([]int, 0, len(e.Reasons))
	for tid := range e.Reasons {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	var parts []string
	for i, tid := range tids {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more", len(tids)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("thread %d: %s", tid, e.Reasons[tid]))
	}
	return fmt.Sprintf("no thread of process %d was safe to borrow within %s (%s)", e.Pid, e.Waited.Round(time.Millisecond), strings.Join(parts, "; "))
}

// Session is one borrowed thread. It implements inject.Caller. Release must
// be called: it restores the thread and lets it go.
type Session struct {
	t        *Target
	th       *ptrace.Thread
	lim      ptrace.CallLimits
	Tid      int
	Syscall  int64    // what the thread was blocked in when we took it, -1 if running
	Refusals int      // threads stopped, examined and let go before this one
	Notes    []string // what was found of earlier runs' leftovers, and done with them
	// Stopped lists the other threads that were stopped (SIGSTOP, or by a
	// debugger) when the thread was chosen, read just before it was held.
	Stopped  []int
	start    time.Time
	reads    int64 // ptrace.ProcReads when the thread was stopped
	held     int64 // /proc reads of ptrace while the thread was held
	released bool
	stopped  time.Duration
}

// Hijack finds a thread that may run allocator code and stops it. Threads are
// tried one at a time, each stopped only while it is examined; the others
// never stop. It retries until opts.Timeout, or until ctx is done. What
// costs a /proc read per thread (which threads to try, which are stopped)
// is done before a thread is held, never while.
func (t *Target) Hijack(ctx context.Context, opts HijackOptions) (*Session, error) {
	s, err := t.hijack(ctx, opts)
	return s, t.explain(ctx, err)
}

func (t *Target) hijack(ctx context.Context, opts HijackOptions) (*Session, error) {
	// Found in libc's file: reading its text through the process would
	// map every page of it not touched yet into the process.
	tramp, _ := ptrace.FindTrampoline(t.proc)
	policy := inject.NewHijackPolicy(t.Libc, t.mappings, tramp)
	start := time.Now()
	deadline := start.Add(opts.Timeout)
	reasons := map[int]string{}
	refusals := 0
	pause := 2 * time.Millisecond
	for {
		tids, err := t.candidates(opts.Tid, reasons)
		if err != nil {
			return nil, err
		}
		stopped, err := t.StoppedThreads(0)
		if err != nil {
			return nil, err
		}
		for _, tid := range tids {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if time.Now().After(deadline) && len(reasons) > 0 {
				break
			}
			s, why, err := t.try(ctx, tid, policy, opts, deadline)
			if err != nil {
				return nil, err
			}
			if s != nil {
				s.Refusals = refusals
				for _, st := range stopped {
					if st != tid {
						s.Stopped = append(s.Stopped, st)
					}
				}
				return s, nil
			}
			reasons[tid] = why
			refusals++
		}
		// Threads of a program that has replaced itself are refused by a
		// policy made for the old one until the time runs out: stop now.
		if err := t.proc.Check(); err != nil {
			return nil, err
		}
		if time.Now().Add(pause).After(deadline) {
			if err := t.proc.Check(); err != nil {
				return nil, err
			}
			return nil, &NoSafeThreadError{Pid: t.Pid, Waited: time.Since(start), Reasons: reasons}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		if pause < 100*time.Millisecond {
			pause *= 2
		}
	}
}

// candidates orders the threads worth stopping: those /proc shows blocked in
// a syscall of the safe list first, then running ones. Threads blocked in an
// unsafe syscall are refused without being stopped, and so are threads that
// have exited (a main thread that called pthread_exit stays listed).
func (t *Target) candidates(only int, reasons map[int]string) ([]int, error) {
	tids := []int{only}
	if only == 0 {
		var err error
		if tids, err = t.proc.Tasks(); err != nil {
			return nil, err
		}
	}
	var blocked, running []int
	for _, tid := range tids {
		st, err := t.proc.ReadSyscall(tid)
		if err != nil {
			if only != 0 {
				return nil, fmt.Errorf("thread %d of process %d: %w", tid, t.Pid, err)
			}
			continue // exited meanwhile
		}
		switch {
		case st.Running:
			running = append(running, tid)
		case st.InSyscall && inject.SafeSyscall(st.Nr):
			blocked = append(blocked, tid)
		case st.InSyscall:
			reasons[tid] = fmt.Sprintf("blocked in syscall %d, which the allocator itself may issue", st.Nr)
		case st.SP == 0 && st.PC == 0 && tid == t.Pid:
			reasons[tid] = "exited (the main thread ended while other threads run)"
		default:
			running = append(running, tid) // blocked outside a syscall: look closer
		}
	}
	return append(blocked, running...), nil
}

// try stops one thread and asks the policy. A refused thread is let go at
// once with its registers untouched.
func (t *Target) try(ctx context.Context, tid int, policy *inject.HijackPolicy, opts HijackOptions, deadline time.Time) (*Session, string, error) {
	b := ptrace.Bound{Deadline: deadline, Cancel: ctx.Done()}
	th, err := t.proc.SeizeWithin(tid, b)
	if err != nil {
		if errors.Is(err, ptrace.ErrNoProcess) && opts.Tid == 0 {
			return nil, "exited", nil
		}
		return nil, "", err
	}
	start := time.Now()
	reads := ptrace.ProcReads()
	stopBound := ptrace.Within(time.Second, ctx.Done())
	if stopBound.Deadline.After(deadline) && opts.Timeout >= time.Second {
		stopBound.Deadline = deadline
	}
	if err := th.StopWithin(stopBound); err != nil {
		th.Detach()
		t.proc.Settle(releasePatience)
		if errors.Is(err, ptrace.ErrGone) && !errors.Is(err, ptrace.ErrExec) && opts.Tid == 0 {
			return nil, "exited", nil
		}
		return nil, "", err
	}
	r := th.Regs()
	// A thread an earlier run left in its call site (killed while the
	// thread waited at the gate, or ran a call) is not in its own state.
	// Borrowed there, our site would restore it into the old one, and a
	// later run could remove the old one while the thread waits in ours:
	// it would then jump into unmapped memory. Left alone, it leaves the
	// old site by itself within the gate's wait.
	if err := t.proc.SiteHolding(tid, &r); err != nil {
		if derr := th.Detach(); derr != nil {
			return nil, "", derr
		}
		var ae *ptrace.AtCallSiteError
		if errors.As(err, &ae) {
			return nil, fmt.Sprintf("%s the call site at %#x left by arenactl (pid %d), which puts it back by itself", ae.Why, ae.Site, ae.Creator), nil
		}
		return nil, "", err
	}
	// A thread whose state a call could not give back whole (aarch64's
	// live SVE state) is passed over, not failed on.
	if why := th.Uncallable(); why != "" {
		if derr := th.Detach(); derr != nil {
			return nil, "", derr
		}
		return nil, why, nil
	}
	ts := inject.ThreadState{Tid: tid, Regs: regsOf(&r), Syscall: -1}
	if nr, args, ok := th.Blocked(); ok {
		ts.Syscall = nr
		ts.Args = args
	}
	if err := policy.Check(ts, t); err != nil {
		if derr := th.Detach(); derr != nil {
			return nil, "", derr
		}
		return nil, err.Error(), nil
	}
	th.SetTrampoline(policy.Sigreturn())
	soft := opts.Timeout
	hard := 10 * soft
	if hard < 30*time.Second {
		hard = 30 * time.Second
	}
	return &Session{t: t, th: th, Tid: tid, Syscall: ts.Syscall, start: start, reads: reads, lim: ptrace.CallLimits{Soft: soft, Hard: hard, Cancel: ctx.Done()}}, "", nil
}

// Call runs fn in the borrowed thread.
func (s *Session) Call(fn uint64, args ...uint64) (uint64, error) {
	return s.th.Call(s.lim, fn, args...)
}

// HoldLock has the borrowed thread hold the lock word at addr (glibc's
// low-level lock protocol: an arena's mutex) while fn reads what it guards,
// and let it go after, or by itself after about most
// (ptrace.Thread.HoldLock).
func (s *Session) HoldLock(addr uint64, most time.Duration, fn func() error) error {
	return s.th.HoldLock(s.lim, addr, most, fn)
}

// ReadAt reads target memory.
func (s *Session) ReadAt(b []byte, addr uint64) (int, error) { return s.t.proc.ReadAt(b, addr) }

// WriteAt writes target memory.
func (s *Session) WriteAt(b []byte, addr uint64) (int, error) { return s.t.proc.WriteAt(b, addr) }

// ProcReadsHeld is how many per-thread /proc files were read while the
// thread was held (known once it is released): none should depend on how
// many threads the process has.
func (s *Session) ProcReadsHeld() int64 { return s.held }

// Release restores the thread's registers and lets it run. It returns how
// long the thread was held.
func (s *Session) Release() (time.Duration, error) {
	if s.released {
		return s.stopped, nil
	}
	err := s.th.Detach()
	s.stopped = time.Since(s.start)
	s.held = ptrace.ProcReads() - s.reads
	s.released = true
	return s.stopped, err
}
