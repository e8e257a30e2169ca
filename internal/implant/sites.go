package implant

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/ptrace"
)

// KeepSites judges the call sites earlier runs left (ptrace.FindSites):
// for each, why it must stay, or "" when nothing can run in it any more
// and it may be removed. A site stays while the arenactl that made it
// runs; while a call it started has not returned (the call may still run,
// say wait for a lock, and return into the routine later); while busy, the
// caller's own look (is a thread executing in it, does it hold what only
// an injected run can remove), says so; and while a kept site restores its
// thread into it. busy is asked only about sites no earlier check keeps.
func KeepSites(sites []ptrace.SiteInfo, busy func(si *ptrace.SiteInfo) string) []string {
	why := make([]string, len(sites))
	for i := range sites {
		si := &sites[i]
		switch {
		case si.CreatorAlive():
			why[i] = "that arenactl still runs"
		case !si.Restored && si.Pending != si.Done:
			why[i] = fmt.Sprintf("a call it started in thread %d has not returned", si.Tid)
		default:
			// No call can return into it (none started, or the last one
			// returned); only a thread still in the routine could run
			// there, which busy rules out.
			why[i] = busy(si)
		}
	}
	keepChained(sites, why)
	return why
}

// Kept is the note that tells the user a leftover site stays, and why.
func Kept(si *ptrace.SiteInfo, why string) string {
	return fmt.Sprintf("the call site at %#x left by arenactl (pid %d) is kept: %s", si.Addr, si.Creator, why)
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
				if j != i && why[j] == "" && sites[j].Contains(sites[i].Resume) {
					why[j] = fmt.Sprintf("thread %d returns into it from the call site at %#x, which is kept", sites[i].Tid, sites[i].Addr)
					changed = true
				}
			}
		}
	}
}
