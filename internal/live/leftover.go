package live

import (
	"errors"
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/implant"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Journal gives glibc's injection the journal of the call site (see
// inject.Journaler).
func (s *Session) Journal() (addr, seq uint64) {
	_, _, j := s.th.Site()
	return j, s.th.CallSeq()
}

// Note keeps a message about leftovers for the user.
func (s *Session) Note(msg string) { s.Notes = append(s.Notes, msg) }

// Leftovers finds the call sites earlier runs left in the target and keeps
// those it cannot prove idle (implant.KeepSites): here, a site's thread is
// stopped for a moment to see that it is not executing in it.
func (s *Session) Leftovers() ([]inject.LeftoverSite, []string, error) {
	sites, err := s.t.proc.FindSites()
	if err != nil {
		return nil, nil, err
	}
	why := implant.KeepSites(sites, func(si *ptrace.SiteInfo) string {
		in, err := s.runsIn(si)
		switch {
		case err != nil:
			return err.Error()
		case in:
			return fmt.Sprintf("thread %d is still executing in it", si.Tid)
		}
		return ""
	})
	var out []inject.LeftoverSite
	var notes []string
	for i, si := range sites {
		if why[i] != "" {
			notes = append(notes, implant.Kept(&si, why[i]))
			continue
		}
		out = append(out, inject.LeftoverSite{Addr: si.Addr, Size: si.Size, Creator: si.Creator,
			Pending: si.Pending, Done: si.Done, Result: si.Result, Journal: si.Journal, JournalAddr: si.JournalAddr()})
	}
	return out, notes, nil
}

// RemoveSite unmaps a leftover site that glibc's calls emptied, by a raw
// munmap in the borrowed thread: the site is arenactl's memory, not the
// program's, so no code of the program's runs to remove it.
func (s *Session) RemoveSite(ls inject.LeftoverSite) error {
	return implant.Unmap(s, ls.Addr, ls.Size)
}

// RawSyscall issues syscall nr in the borrowed thread (an
// implant.Syscaller).
func (s *Session) RawSyscall(nr uint64, args ...uint64) (uint64, error) {
	return s.th.RawSyscall(s.lim, nr, args...)
}

// glibc finds the leftovers through its Caller by a type assertion: a
// Session that stopped being a LeftoverFinder would leave them silently.
var _ inject.LeftoverFinder = (*Session)(nil)

// runsIn stops the site's thread for a moment to see where it is. The
// routine marks the thread restored two instructions before it leaves.
func (s *Session) runsIn(si *ptrace.SiteInfo) (bool, error) {
	if si.Tid == s.Tid {
		r := s.th.Regs()
		return si.Contains(ptrace.PC(&r)), nil
	}
	th, err := s.t.proc.Seize(si.Tid)
	if errors.Is(err, ptrace.ErrNoProcess) {
		return false, nil // gone: nothing runs there
	}
	if err != nil {
		return true, err
	}
	defer th.Detach()
	if err := th.Stop(time.Second); err != nil {
		if errors.Is(err, ptrace.ErrGone) {
			return false, nil
		}
		return true, err
	}
	r := th.Regs()
	return si.Contains(ptrace.PC(&r)), nil
}
