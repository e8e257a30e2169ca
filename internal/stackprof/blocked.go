package stackprof

import (
	"time"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/unwind"
)

// Bounds on learning the threads' outer frames: a thread's stack read
// from its sp up (the frames in use; a default thread stack is 8 MiB, a
// server's a few hundred KiB of which little is in use), how many
// threads are read each time, and how often at most, however often a
// read is asked for.
const (
	learnStack   = 512 << 10
	learnThreads = 1024
	learnEvery   = 100 * time.Millisecond
)

// BlockedStacks reads the whole stack of each of a process's threads
// blocked in a system call, without stopping it, and gives it to learn
// (the profile's Learn: which frame called which, so that a sample whose
// stack copy is cut short in the same frames is joined to its outer ones,
// unwind.Outer). A blocked thread's registers are what
// /proc/PID/task/TID/syscall shows; its stack is read between two reads of
// that file, and kept only if the two agree (the thread stayed in the same
// call at the same sp, so what was read is one state of its stack).
// Running threads are skipped: their stacks change as they are read; so
// is a thread still blocked as when last read (nothing new to learn).
// Errors skip a thread: this only helps.
type BlockedStacks struct {
	t     debuggee.Target
	learn func(unwind.Start, unwind.Stack)
	last  map[int]procfs.Syscall
	buf   []byte
	at    time.Time // the last read
}

// NewBlockedStacks reads t's blocked threads for learn; t is a live
// process (a core's threads are read whole by the caller).
func NewBlockedStacks(t debuggee.Target, learn func(unwind.Start, unwind.Stack)) *BlockedStacks {
	return &BlockedStacks{t: t, learn: learn, last: map[int]procfs.Syscall{}}
}

// Read reads the threads blocked now, unless it did less than learnEvery
// ago.
func (r *BlockedStacks) Read() {
	if !r.at.IsZero() && time.Since(r.at) < learnEvery {
		return
	}
	r.at = time.Now()
	t := r.t
	// A live target holds its /proc directory (live.Observed): its
	// threads are read there, never a later process's with its pid.
	proc := procfs.ByPid(t.Process().Pid)
	if o, ok := t.(interface{ Proc() *procfs.Proc }); ok {
		proc = o.Proc()
	}
	tids, err := proc.Tasks()
	if err != nil {
		return
	}
	if len(r.last) > 2*learnThreads {
		clear(r.last) // threads come and go
	}
	for i, tid := range tids {
		if i == learnThreads {
			break
		}
		before, err := proc.ReadSyscall(tid)
		if err != nil || before.Running || !before.InSyscall || r.last[tid] == before {
			continue
		}
		m, ok := maps.Find(t.Mappings(), before.SP)
		if !ok || m.End <= before.SP {
			continue
		}
		n := min(m.End-before.SP, learnStack)
		if uint64(cap(r.buf)) < n {
			r.buf = make([]byte, n)
		}
		got, _ := t.ReadAt(r.buf[:n], before.SP)
		if got <= 0 {
			continue
		}
		after, err := proc.ReadSyscall(tid)
		if err != nil || after != before {
			continue
		}
		r.last[tid] = before
		var st unwind.Start
		st.Regs.SetPCOf(liveMachine, before.PC)
		st.Regs.SetSPOf(liveMachine, before.SP)
		r.learn(st, unwind.Stack{Addr: before.SP, Data: r.buf[:got], End: m.End})
	}
}
