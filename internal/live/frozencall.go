package live

import (
	"errors"
	"time"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// FrozenCaller runs calls and raw syscalls in one thread of a frozen
// process, for code that takes no lock any stopped thread could hold
// (mmap, mprotect, munmap: see internal/implant): the other threads stay
// stopped meanwhile. Its call site goes at Thaw.
type FrozenCaller struct {
	f     *Frozen
	th    *ptrace.Thread
	tramp uint64
	lim   ptrace.CallLimits
}

// Caller prepares calls in the first stopped thread. tramp is the
// process's signal trampoline (ptrace.FindTrampoline, found before the
// freeze, since finding it reads libc's code).
func (f *Frozen) Caller(tramp uint64, timeout time.Duration) (*FrozenCaller, error) {
	if len(f.threads) == 0 {
		return nil, errors.New("live: no stopped thread to call in")
	}
	th := f.threads[0]
	th.SetTrampoline(tramp)
	return &FrozenCaller{f: f, th: th, tramp: tramp, lim: ptrace.CallLimits{Soft: timeout, Hard: timeout + time.Second}}, nil
}

// Call runs fn(args...) and returns its rax.
func (c *FrozenCaller) Call(fn uint64, args ...uint64) (uint64, error) {
	return c.th.Call(c.lim, fn, args...)
}

// RawSyscall issues syscall nr in the thread (an implant.Syscaller).
func (c *FrozenCaller) RawSyscall(nr uint64, args ...uint64) (uint64, error) {
	return c.th.RawSyscall(c.lim, nr, args...)
}

// ReadAt reads the process's memory.
func (c *FrozenCaller) ReadAt(b []byte, addr uint64) (int, error) { return c.f.t.proc.ReadAt(b, addr) }

// WriteAt writes the process's memory (through /proc/PID/mem: read-only
// pages too). Nothing runs meanwhile, so no thread sees a write half done.
func (c *FrozenCaller) WriteAt(b []byte, addr uint64) (int, error) {
	return c.f.t.proc.WriteAt(b, addr)
}

// FindTrampoline finds the process's signal trampoline, which a call site
// falls back on while it is made and removed.
func (t *Target) FindTrampoline() (uint64, error) { return ptrace.FindTrampoline(t.proc) }

// Threads are the stopped threads with their registers.
func (c *FrozenCaller) Threads() []debuggee.Thread { return c.f.Threads() }
