package live

import (
	"errors"
	"fmt"
	"time"

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
// the list is stable; threads that exit meanwhile are left out.
func (t *Target) Freeze(timeout time.Duration) (*Frozen, error) {
	f := &Frozen{t: t, start: time.Now()}
	seized := map[int]*ptrace.Thread{}
	for round := 0; ; round++ {
		tids, err := ptrace.Tasks(t.Pid)
		if err != nil {
			f.Thaw()
			return nil, err
		}
		var fresh []*ptrace.Thread
		for _, tid := range tids {
			if seized[tid] != nil {
				continue
			}
			th, err := t.proc.Seize(tid)
			if errors.Is(err, ptrace.ErrNoProcess) && tid != t.Pid {
				continue
			}
			if err != nil {
				f.Thaw()
				return nil, err
			}
			seized[tid] = th
			fresh = append(fresh, th)
			th.Interrupt()
		}
		if len(fresh) == 0 {
			break
		}
		if round == 20 {
			f.Thaw()
			return nil, fmt.Errorf("process %d creates threads faster than they can be stopped", t.Pid)
		}
		for _, th := range fresh {
			err := th.WaitStopped(timeout)
			if errors.Is(err, ptrace.ErrGone) && th.Tid != t.Pid {
				th.Detach()
				continue
			}
			if err != nil {
				th.Detach()
				f.Thaw()
				return nil, err
			}
			f.threads = append(f.threads, th)
		}
	}
	// The mappings read before the freeze may be stale by now: a busy
	// process grows its heaps (mprotect) all the time, and a walk against
	// the old list takes a top chunk in the new part for a wild pointer.
	// Now that nothing runs, the list read here stays true until Thaw.
	if err := t.refreshMaps(f); err != nil {
		f.Thaw()
		return nil, err
	}
	t.frozen = f
	return f, nil
}

// refreshMaps re-reads /proc/PID/maps (without smaps: the walk needs only
// the ranges) and classifies it with the frozen threads' stack pointers.
func (t *Target) refreshMaps(f *Frozen) error {
	sps := map[int]uint64{}
	for _, th := range f.threads {
		sps[th.Tid] = th.Regs().Rsp
	}
	return t.readMappings(false, sps)
}

// FrozenThread is one stopped thread's full register state, for writing a
// core.
type FrozenThread struct {
	Tid    int
	Regs   ptrace.Regs
	XState []byte // NT_X86_XSTATE layout; nil if it could not be read
}

// Threads lists the stopped threads with their registers, in the order they
// were stopped: the main thread first.
func (f *Frozen) Threads() []FrozenThread {
	out := make([]FrozenThread, 0, len(f.threads))
	for _, th := range f.threads {
		out = append(out, FrozenThread{Tid: th.Tid, Regs: th.Regs(), XState: th.XState()})
	}
	return out
}

// Thaw lets every thread run again, exactly as it was, and returns how long
// the process was frozen.
func (f *Frozen) Thaw() (time.Duration, error) {
	var first error
	for _, th := range f.threads {
		if err := th.Detach(); err != nil && first == nil {
			first = err
		}
	}
	f.threads = nil
	if f.t.frozen == f {
		f.t.frozen = nil
	}
	return time.Since(f.start), first
}
