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
	why := make([]string, len(sites)) // why each is kept, "" if removable
	for i := range sites {
		si := &sites[i]
		switch {
		case si.CreatorAlive():
			why[i] = "that arenactl still runs"
			continue
		case !si.Restored && si.Pending != si.Done:
			// A call started and did not return: it may still run (say,
			// wait for a lock) and return into the routine later.
			why[i] = fmt.Sprintf("a call it started in thread %d has not returned", si.Tid)
			continue
		}
		// Otherwise no call can return into it (none started, or the
		// last one returned); only the thread itself could still be in
		// the routine, if it never ran on since, which runsIn rules out.
		if in, err := s.runsIn(si); err != nil || in {
			why[i] = "thread " + fmt.Sprint(si.Tid) + " is still executing in it"
			if err != nil {
				why[i] = err.Error()
			}
		}
	}
	keepChained(sites, why)
	var out []glibc.LeftoverSite
	var notes []string
	for i, si := range sites {
		if why[i] != "" {
			notes = append(notes, fmt.Sprintf("the call site at %#x left by arenactl (pid %d) is kept: %s", si.Addr, si.Creator, why[i]))
			continue
		}
		out = append(out, glibc.LeftoverSite{Addr: si.Addr, Size: si.Size, Creator: si.Creator,
			Pending: si.Pending, Done: si.Done, Result: si.Result, Journal: si.Journal})
	}
	return out, notes, nil
}

// keepChained keeps every site that a kept site restores its thread into.
// A run that borrowed a thread still inside an older site (which this
// arenactl no longer does) made a site whose saved rip is in the older
// one: while the newer one is kept, its thread can still pass through the
// older one, which must stay mapped until then.
func keepChained(sites []ptrace.SiteInfo, why []string) {
	for changed := true; changed; {
		changed = false
		for i := range sites {
			if why[i] == "" {
				continue
			}
			for j := range sites {
				if j != i && why[j] == "" && sites[j].Contains(sites[i].Rip) {
					why[j] = fmt.Sprintf("thread %d returns into it from the call site at %#x, which is kept", sites[i].Tid, sites[i].Addr)
					changed = true
				}
			}
		}
	}
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
