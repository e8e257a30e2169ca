package main

import (
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/live"
)

// preflight is the check made before a thread is borrowed for malloc_info
// or malloc_trim: a read-only walk of the lists both calls walk (the arena
// ring, fastbins, bins, heaps), with no thread stopped. A walk of a running
// process reads lists that other threads change under it, so damage on
// which glibc would abort or loop forever is only a suspicion: it is
// confirmed by a second walk with every thread stopped for the few
// milliseconds it takes (glibc.PreflightDamage), and refuses the injection
// if it is still there. A walk that cannot be made at all (no layout for
// the version, main_arena not found) does not refuse: the injection goes
// ahead as without this check, and the report says why it was skipped.
type preflight struct {
	walk    *glibc.Walk // the last walk; nil when skipped
	took    time.Duration
	walks   int
	frozen  time.Duration // how long every thread was stopped for the second walk
	skipped string
}

func runPreflight(t *live.Target, f injectFlags) (*preflight, error) {
	start := time.Now()
	pf := &preflight{}
	defer func() { pf.took = time.Since(start) }()
	if f.noHeapCheck {
		pf.skipped = "--no-heap-check"
		return pf, nil
	}
	lay, anchors, err := listsAnchors(t, f)
	if err != nil {
		pf.skipped = err.Error()
		return pf, nil
	}
	w, err := glibc.WalkLists(t, lay, anchors, t.Mappings)
	if err != nil {
		if live.IsGone(err) {
			return nil, err
		}
		pf.skipped = err.Error()
		return pf, nil
	}
	pf.walk, pf.walks = w, 1
	if len(w.FatalDamage()) == 0 {
		return pf, nil
	}
	// Heaps may have grown since the target was opened: the freeze re-reads
	// the mappings once nothing runs, so a chunk in new memory cannot look
	// wild to this walk.
	if pf.frozen, err = whileFrozen(t, f.timeout, func() (err error) {
		w, err = glibc.WalkLists(t, lay, anchors, t.Mappings)
		return err
	}); err != nil {
		return nil, err
	}
	pf.walk, pf.walks = w, 2
	if err := glibc.PreflightDamage(w); err != nil {
		return nil, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	return pf, nil
}

// listsAnchors finds what a walk of t's free lists starts from.
func listsAnchors(t *live.Target, f injectFlags) (glibc.Layout, glibc.Anchors, error) {
	lay, err := glibc.LayoutFor(t.Libc.Version)
	if err != nil {
		return lay, glibc.Anchors{}, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	anchors, err := glibc.FindAnchorsWith(t.Libc, lay, t, f.debugDirs)
	if err != nil {
		return lay, anchors, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	return lay, anchors, nil
}

// whileFrozen stops every thread of t, runs read and lets them all go; it
// returns how long they were stopped.
func whileFrozen(t *live.Target, timeout time.Duration, read func() error) (time.Duration, error) {
	frozen, err := t.Freeze(timeout)
	if err != nil {
		return 0, err
	}
	rerr := read()
	held, err := frozen.Thaw()
	if rerr != nil {
		err = fmt.Errorf("process %d: %w", t.Pid, rerr)
	}
	return held, err
}

// checkLocks is the second half of the check, made once a thread is
// borrowed (and so known): the arenas' lock words, read again now, against
// the other threads' states. The caller releases the thread on an error.
func (pf *preflight) checkLocks(t *live.Target, borrowed int) error {
	if pf.walk == nil {
		return nil
	}
	stopped, err := live.StoppedThreads(t.Pid, borrowed)
	if err != nil || len(stopped) == 0 {
		return err
	}
	if err := glibc.RefreshLocks(t, pf.walk); err != nil {
		return err
	}
	if err := glibc.PreflightLocks(pf.walk, stopped); err != nil {
		return fmt.Errorf("process %d: %w", t.Pid, err)
	}
	return nil
}

// record notes the check in the injection's report.
func (pf *preflight) record(in *glibc.Injection) {
	in.Preflight, in.PreflightWalks, in.PreflightFrozen, in.PreflightSkipped = pf.took, pf.walks, pf.frozen, pf.skipped
}
