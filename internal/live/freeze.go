package live

import (
	"context"
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Frozen is a process with every thread stopped, for reading the allocator
// without tearing. Nothing runs in it; Thaw lets every thread go.
type Frozen struct {
	t       *Target
	threads []*ptrace.Thread
	start   time.Time
}

// Freeze stops every thread: all are interrupted at once, then waited for.
// Threads created meanwhile are caught by listing the threads again until
// the list is stable; threads that exit meanwhile are left out, and so is a
// main thread that has exited while others run. Everything is bounded by
// timeout and ends early when ctx is done; a process that exits or execs
// meanwhile is let go whole and reported as gone (ptrace.ErrGone,
// ptrace.ErrExec).
func (t *Target) Freeze(ctx context.Context, timeout time.Duration) (*Frozen, error) {
	b := ptrace.Within(timeout, ctx.Done())
	f := &Frozen{t: t, start: time.Now()}
	seized := map[int]*ptrace.Thread{}
	fail := func(err error) (*Frozen, error) {
		f.Thaw()
		for _, th := range seized {
			if th != nil {
				th.Detach()
			}
		}
		t.proc.Settle(releasePatience)
		return nil, t.explain(ctx, err)
	}
	for round := 0; ; round++ {
		tids, err := t.proc.Tasks()
		if err != nil {
			return fail(err)
		}
		var todo []int
		for _, tid := range tids {
			if _, ok := seized[tid]; !ok {
				todo = append(todo, tid)
			}
		}
		// Seized in one request to the tracer thread, as they are then
		// interrupted and let go: see ptrace.SeizeAllWithin.
		ths, err := t.proc.SeizeAllWithin(todo, b)
		var fresh []*ptrace.Thread
		for i, th := range ths {
			seized[todo[i]] = th // nil: exited, or an exited main thread
			if th != nil {
				fresh = append(fresh, th)
			}
		}
		if err != nil {
			return fail(err)
		}
		if len(fresh) == 0 {
			break
		}
		// Asked to stop all at once, in one request to the tracer thread:
		// one request per thread cost more than the kernel's work.
		if round == 0 {
			// The process runs on while its threads are seized: its stop
			// begins with the first request to stop.
			f.start = time.Now()
		}
		if err := t.proc.InterruptAll(fresh); err != nil {
			return fail(err)
		}
		if round == 20 {
			return fail(fmt.Errorf("process %d creates threads faster than they can be stopped", t.Pid))
		}
		if err := t.proc.WaitAll(fresh, b); err != nil {
			return fail(err)
		}
		for _, th := range fresh {
			if th.Gone() {
				continue
			}
			f.threads = append(f.threads, th)
		}
	}
	// Every thread we stopped may have been the old program's, killed by
	// an execve of one we had not stopped yet, or the process may be on
	// its way out: what is frozen must still be the process Open found.
	if err := t.proc.Check(); err != nil {
		return fail(err)
	}
	if len(f.threads) == 0 {
		return fail(fmt.Errorf("process %d: %w", t.Pid, ptrace.ErrGone))
	}
	// The mappings read before the freeze may be stale by now: a busy
	// process grows its heaps (mprotect) all the time, and a walk against
	// the old list takes a top chunk in the new part for a wild pointer.
	// Now that nothing runs, the list read here stays true until Thaw.
	if err := t.refreshMaps(f); err != nil {
		return fail(err)
	}
	t.frozen = f
	return f, nil
}

// releasePatience bounds the wait for threads that were asked to stop when
// something failed, so that they are let go before the error is reported
// rather than at exit.
const releasePatience = 500 * time.Millisecond

// refreshMaps re-reads /proc/PID/maps (without smaps: the walk needs only
// the ranges) and classifies it with the frozen threads' stack pointers.
func (t *Target) refreshMaps(f *Frozen) error {
	sps := map[int]uint64{}
	for _, th := range f.threads {
		r := th.Regs()
		sps[th.Tid] = ptrace.SP(&r)
	}
	return t.readMappings(false, sps)
}

// Threads lists the stopped threads with their registers and extended
// state (XState nil where it could not be read), in the order they were
// stopped: the main thread first.
func (f *Frozen) Threads() []debuggee.Thread { return f.threadList(true) }

// threadList is Threads, with their extended state only when xstate says:
// it is read from each thread (a system call) while every thread waits.
func (f *Frozen) threadList(xstate bool) []debuggee.Thread {
	if xstate {
		f.t.proc.ReadXStates(f.threads)
	}
	out := make([]debuggee.Thread, 0, len(f.threads))
	for _, th := range f.threads {
		t := debuggee.Thread{Tid: th.Tid, Regs: threadRegs(th), Arch: f.t.arch}
		if xstate {
			t.XState = th.XState()
		}
		out = append(out, t)
	}
	return out
}

// Thaw lets every thread run again, exactly as it was, and returns how long
// the process was frozen.
func (f *Frozen) Thaw() (time.Duration, error) {
	first := f.t.proc.DetachAll(f.threads)
	held := time.Since(f.start)
	if f.threads != nil {
		// A thread that exec'd while the others were stopped can only be
		// let go once they are (its exec waits for them).
		f.t.proc.Settle(releasePatience)
		if err := f.t.proc.Check(); err != nil {
			first = err
		}
	}
	f.threads = nil
	if f.t.frozen == f {
		f.t.frozen = nil
	}
	return held, first
}
