package live

import (
	"cmp"
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

// caller prepares calls in the first stopped thread that none of sites
// (an earlier run's call sites, ptrace.FindSites) holds: one that is held
// is not in its own state, and a site made for it would restore it into
// the old one. When every thread is held, the error is the first one's
// *ptrace.AtCallSiteError: thawed, such a thread leaves the old site within
// ptrace.GateWait. tramp is the process's signal trampoline
// (ptrace.FindTrampoline, found before the freeze, since finding it reads
// libc's code).
func (f *Frozen) caller(tramp uint64, timeout time.Duration, sites []ptrace.SiteInfo) (*FrozenCaller, error) {
	if len(f.threads) == 0 {
		return nil, errors.New("live: no stopped thread to call in")
	}
	var held error
	for _, th := range f.threads {
		r := th.Regs()
		if err := ptrace.Holding(sites, th.Tid, &r); err != nil {
			held = cmp.Or(held, err)
			continue
		}
		th.SetTrampoline(tramp)
		return &FrozenCaller{f: f, th: th, tramp: tramp, lim: ptrace.CallLimits{Soft: timeout, Hard: timeout + time.Second}}, nil
	}
	return nil, held
}

// CallFrozen freezes the process, runs fn with a caller in one of its
// threads, and thaws it; held is how long the threads stood stopped.
// Leftover call sites are looked for before anything is stopped, and only
// when some exist again while every thread is (as Image does). When every
// thread is still in one (a record killed while it walked, then started
// again), they are let go to leave it and stopped again (waitOutSites).
func (t *Target) CallFrozen(ctx context.Context, timeout time.Duration, tramp uint64, fn func(c *FrozenCaller) error) (held time.Duration, err error) {
	sites, _ := t.proc.FindSites()
	lookForSites := len(sites) > 0
	err = waitOutSites(ctx, func() (bool, error) {
		f, err := t.Freeze(ctx, timeout)
		if err != nil {
			return false, err
		}
		if lookForSites {
			if sites, err = t.proc.FindSites(); err != nil {
				h, terr := f.Thaw()
				held += h
				return false, errors.Join(err, terr)
			}
		}
		c, err := f.caller(tramp, timeout, sites)
		if err == nil {
			err = fn(c)
		}
		h, terr := f.Thaw()
		held += h
		return c == nil && terr == nil, errors.Join(err, terr)
	})
	return held, err
}

// waitOutSites runs try (a freeze, what is done frozen, the thaw) until it
// succeeds, fails otherwise than with every thread still in a call site an
// arenactl killed a moment ago left (atSites), or siteRetries times more:
// between tries, the threads run and leave the old site, which each does
// within ptrace.GateWait.
func waitOutSites(ctx context.Context, try func() (atSites bool, err error)) error {
	for n := 0; ; n++ {
		atSites, err := try()
		if err == nil || !atSites || n == siteRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(ptrace.GateWait + siteMargin):
		}
	}
}

// siteRetries and siteMargin bound waitOutSites' waits: the gate's wait
// and a margin for a loaded machine, three times.
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
