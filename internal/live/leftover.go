package live

import (
	"errors"
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Journal gives glibc's injection the journal of the call site (see
// glibc.Journaler).
func (s *Session) Journal() (addr, seq uint64) {
	_, _, j := s.th.Site()
	return j, s.th.CallSeq()
}

// Note keeps a message about leftovers for the user.
func (s *Session) Note(msg string) { s.Notes = append(s.Notes, msg) }

// Leftovers finds the call sites earlier runs left in the target and keeps
// those it cannot prove idle: a site may be removed only when the arenactl
// that made it is gone, no call it started can still return into it, and
// its thread, stopped now, is not executing in it.
func (s *Session) Leftovers() ([]glibc.LeftoverSite, []string, error) {
	sites, err := s.t.proc.FindSites()
	if err != nil {
		return nil, nil, err
	}
	var out []glibc.LeftoverSite
	var notes []string
	for _, si := range sites {
		who := fmt.Sprintf("the call site at %#x left by arenactl (pid %d)", si.Addr, si.Creator)
		switch {
		case si.CreatorAlive():
			notes = append(notes, who+" is kept: that arenactl still runs")
			continue
		case !si.Restored && si.Pending != si.Done:
			// A call started and did not return: it may still run (say,
			// wait for a lock) and return into the routine later.
			notes = append(notes, fmt.Sprintf("%s is kept: a call it started in thread %d has not returned", who, si.Tid))
			continue
		}
		// Otherwise no call can return into it (none started, or the
		// last one returned); only the thread itself could still be in
		// the routine, if it never ran on since, which runsIn rules out.
		if in, err := s.runsIn(&si); err != nil || in {
			why := "thread " + fmt.Sprint(si.Tid) + " is still executing in it"
			if err != nil {
				why = err.Error()
			}
			notes = append(notes, who+" is kept: "+why)
			continue
		}
		out = append(out, glibc.LeftoverSite{Addr: si.Addr, Size: si.Size, Creator: si.Creator,
			Pending: si.Pending, Done: si.Done, Result: si.Result, Journal: si.Journal})
	}
	return out, notes, nil
}

// runsIn stops the site's thread for a moment to see where it is. The
// routine marks the thread restored two instructions before it leaves.
func (s *Session) runsIn(si *ptrace.SiteInfo) (bool, error) {
	if si.Tid == s.Tid {
		r := s.th.Regs()
		return si.Contains(r.Rip), nil
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
	return si.Contains(r.Rip), nil
}
