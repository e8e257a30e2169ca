package live

import (
	"context"
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

// Caller prepares calls in the first stopped thread that no earlier run's
// call site holds (see ptrace.SiteInfo.Holds): one that does is not in its
// own state, and a site made for it would restore it into the old one.
// When every thread is held, the error is the first one's
// *ptrace.AtCallSiteError: thawed, such a thread leaves the old site within
// ptrace.GateWait, so the caller may thaw, wait and freeze again. tramp is
// the process's signal trampoline (ptrace.FindTrampoline, found before the
// freeze, since finding it reads libc's code).
func (f *Frozen) Caller(tramp uint64, timeout time.Duration) (*FrozenCaller, error) {
	if len(f.threads) == 0 {
		return nil, errors.New("live: no stopped thread to call in")
	}
	// One listing of the sites for every thread: with thousands of
	// threads, a listing each would read the maps thousands of times.
	sites, err := f.t.proc.FindSites()
	if err != nil {
		return nil, err
	}
	var held error
	for _, th := range f.threads {
		r := th.Regs()
		why := ""
		var at *ptrace.SiteInfo
		for i := range sites {
			if why = sites[i].Holds(th.Tid, &r); why != "" {
				at = &sites[i]
				break
			}
		}
		if at != nil {
			if held == nil {
				held = &ptrace.AtCallSiteError{Tid: th.Tid, Site: at.Addr, Creator: at.Creator, Why: why}
			}
			continue
		}
		th.SetTrampoline(tramp)
		return &FrozenCaller{f: f, th: th, tramp: tramp, lim: ptrace.CallLimits{Soft: timeout, Hard: timeout + time.Second}}, nil
	}
	return nil, held
}

// CallFrozen freezes the process, runs fn with a Caller in one of its
// threads, and thaws it; held is how long the threads stood stopped. When
// every thread is still in a call site an arenactl killed a moment ago left
// (a record killed while it walked, then started again), they are let go
// to leave it, which each does within ptrace.GateWait, and stopped again:
// a few times, then the error stands.
func (t *Target) CallFrozen(ctx context.Context, timeout time.Duration, tramp uint64, fn func(c *FrozenCaller) error) (held time.Duration, err error) {
	for try := 0; ; try++ {
		f, err := t.Freeze(ctx, timeout)
		if err != nil {
			return held, err
		}
		c, err := f.Caller(tramp, timeout)
		if err == nil {
			err = fn(c)
		}
		h, terr := f.Thaw()
		held += h
		var at *ptrace.AtCallSiteError
		if c != nil || !errors.As(err, &at) || terr != nil || try == siteRetries {
			return held, errors.Join(err, terr)
		}
		select {
		case <-ctx.Done():
			return held, errors.Join(err, ctx.Err())
		case <-time.After(ptrace.GateWait + siteMargin):
		}
	}
}

// siteRetries and siteMargin bound CallFrozen's waits for threads to leave
// an earlier run's call site: the gate's wait and a margin for a loaded
// machine, three times.
const (
	siteRetries = 3
	siteMargin  = 250 * time.Millisecond
)

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
