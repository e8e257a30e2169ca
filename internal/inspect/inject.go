package inspect

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

// preflight is the check made before glibc's malloc_info or malloc_trim
// runs in a borrowed thread: the lists both calls walk (the arena ring,
// each arena's fastbins, bins, top and heaps) must not make glibc abort or
// loop forever with an arena's lock held. No thread but the borrowed one
// is stopped for it:
//
//  1. before a thread is borrowed, every arena's lists are walked with
//     nothing stopped. Other threads change them under the walk (under a
//     steady malloc/free load nearly every such walk of a large heap reads
//     some chunk that was reused meanwhile), so the damage it finds is only
//     suspected;
//  2. once a thread is borrowed, each arena with suspected damage is
//     walked again while the borrowed thread holds that arena's lock
//     (confirm). Its lists are then those glibc's own call would walk: it
//     walks them under the same lock, and fastbins, pushed without it, only
//     grow at their head. Damage found there refuses the injection. Damage
//     to the ring of arenas itself is read again in step 1, before any
//     thread is borrowed (recheckRing): no arena lock guards the ring.
//
// The other threads wait only where glibc's call would make them wait: on
// an arena's lock while that arena is read. A walk that cannot be made at
// all (no layout for the version, main_arena not found) does not refuse:
// the injection goes ahead as without this check, and the report says why
// it was skipped.
type preflight struct {
	walk     *glibc.Walk // the walk made with nothing stopped; nil when skipped
	heap     *heap.Heap  // the allocator located; nil when skipped or not found
	took     time.Duration
	walks    int           // walks of the whole ring
	locked   int           // arenas walked again under their lock
	lockHeld time.Duration // how long the borrowed thread held those locks, in all
	skipped  string
}

func runPreflight(ctx context.Context, t *live.Target, o Options) (*preflight, error) {
	start := time.Now()
	pf := &preflight{}
	defer func() { pf.took = time.Since(start) }()
	if o.NoHeapCheck {
		pf.skipped = "--no-heap-check"
		return pf, nil
	}
	h, err := openHeap(t, o.DebugDirs, o.Jobs)
	if err != nil {
		pf.skipped = err.Error()
		return pf, nil
	}
	pf.heap = h
	w, err := h.WalkLists()
	if err != nil {
		if live.IsGone(err) {
			return nil, err
		}
		pf.skipped = err.Error()
		return pf, nil
	}
	pf.walk, pf.walks = w, 1
	if err := pf.recheckRing(t); err != nil {
		return nil, err
	}
	return pf, nil
}

// recheckRing reads the arena ring again, before any thread is stopped,
// when the first walk found it damaged: no arena lock guards the ring, and
// an arena, once linked, is never unlinked (malloc/arena.c,
// _int_new_arena), so nothing a borrowed thread could hold makes a second
// read surer. The maps are read again first: a thread that starts under
// load gets a new arena in a heap mapped after they were read
// (TestSoakMariaDB once refused a healthy mariadbd so: "next arena pointer
// ... is not in writable memory"). An arena can be linked between the two
// reads again, so a few tries; a damaged pointer stays damaged, and
// refuses the injection here.
func (pf *preflight) recheckRing(t live.Observed) error {
	for try := 0; try < ringTries && ringDamage(pf.walk) != nil; try++ {
		if err := t.RefreshRanges(); err != nil {
			return fmt.Errorf("process %d: %w", t.Process().Pid, err)
		}
		w, err := pf.heap.WalkLists()
		if err != nil {
			return fmt.Errorf("process %d: %w", t.Process().Pid, err)
		}
		pf.walk = w
		pf.walks++
	}
	if fatal := ringDamage(pf.walk); fatal != nil {
		return fmt.Errorf("process %d: %w", t.Process().Pid, &glibc.HeapDamageError{Damage: fatal[0], More: len(fatal) - 1})
	}
	return nil
}

// ringDamage is the damage a walk found to the arena ring itself.
func ringDamage(w *glibc.Walk) []glibc.Damage {
	var out []glibc.Damage
	for _, d := range w.FatalDamage() {
		if d.Ring {
			out = append(out, d)
		}
	}
	return out
}

// confirm is the second step of the check, made in the borrowed thread:
// the damage the first walk suspected, read again where it can be decided.
// It refuses the injection (glibc.HeapDamageError) on damage that stays.
func (pf *preflight) confirm(t live.Observed, sess *live.Session, o Options) error {
	if pf.walk == nil {
		return nil
	}
	start := time.Now()
	defer func() { pf.took += time.Since(start) }()
	// Per arena, the lists to walk again: those the first walk found
	// damaged (its top and heaps are read again in any case); the others
	// it read whole, and a damaged list does not heal. Walking every list
	// of a large arena would hold its lock far longer than glibc's own
	// call does. Damage the walk could not place in a list has every list
	// walked again (nil).
	suspect := map[uint64][]int{}
	all := map[uint64]bool{}
	for _, d := range pf.walk.FatalDamage() {
		switch {
		case d.Ring: // read again before the thread was borrowed (recheckRing)
		case d.List == 0:
			all[d.Arena] = true
			suspect[d.Arena] = nil
		case all[d.Arena]:
		case d.List == glibc.ListTop, d.List == glibc.ListHeaps:
			if _, ok := suspect[d.Arena]; !ok {
				suspect[d.Arena] = []int{} // top and heaps are read again in any case
			}
		default:
			suspect[d.Arena] = append(suspect[d.Arena], d.List)
		}
	}
	var fatal []glibc.Damage
	for i, a := range pf.walk.Arenas {
		lists, ok := suspect[a.Addr]
		if !ok {
			continue
		}
		var w *glibc.Walk
		held := time.Now()
		err := sess.HoldLock(a.Addr, lockHold(o), func() error {
			// The arena's heaps may have grown since the maps were
			// read; under its lock they cannot grow again.
			if err := t.RefreshRanges(); err != nil {
				return err
			}
			var err error
			w, err = pf.heap.WalkArenaLists(a.Addr, i, lists)
			return err
		})
		pf.lockHeld += time.Since(held)
		pf.locked++
		if errors.Is(err, ptrace.ErrLockLapsed) {
			return &ArenaCheckError{Pid: t.Process().Pid, Index: i, Arena: a.Addr, Held: lockHold(o)}
		}
		if err != nil {
			return fmt.Errorf("process %d: checking arena %d (%#x) under its lock: %w", t.Process().Pid, i, a.Addr, err)
		}
		fatal = append(fatal, w.FatalDamage()...)
	}
	if len(fatal) == 0 {
		return nil
	}
	return fmt.Errorf("process %d: %w", t.Process().Pid, &glibc.HeapDamageError{Damage: fatal[0], More: len(fatal) - 1})
}

// ringTries bounds the reads of a ring that looks damaged.
const ringTries = 3

// lockHold bounds how long the borrowed thread holds an arena's lock for
// the check: half of --timeout, and a second at most. Walking the
// suspected lists again takes milliseconds to a few hundred; killed or
// stopped, arenactl leaves the lock held no longer than this, so a run
// after a killed one, whose calls wait up to --timeout for that lock, gets
// it in time (TestSoakMariaDB kills runs at random moments).
func lockHold(o Options) time.Duration {
	if o.Timeout <= 0 {
		return time.Second
	}
	return min(o.Timeout/2, time.Second)
}

// ArenaCheckError: an arena whose lists looked damaged to a walk made with
// nothing stopped could not be walked again within the time its lock may be
// held; nothing was injected.
type ArenaCheckError struct {
	Pid   int
	Index int
	Arena uint64
	Held  time.Duration
}

func (e *ArenaCheckError) Error() string {
	return fmt.Sprintf("process %d: arena %d (%#x) looked damaged to a walk made while it changed, and could not be walked again within %s holding its lock; nothing was injected",
		e.Pid, e.Index, e.Arena, e.Held)
}

func (e *ArenaCheckError) Is(target error) bool { return target == errkind.ErrArenaUnchecked }

// checkLocks is the second half of the check, made once a thread is
// borrowed (and so known): the arenas' lock words, read again now, against
// the other threads' states as read just before the thread was held (read
// while it is held, they would hold it for as long as reading every
// thread's status takes). The caller releases the thread on an error.
func (pf *preflight) checkLocks(t live.Observed, stopped []int) error {
	if pf.walk == nil || len(stopped) == 0 {
		return nil
	}
	if err := glibc.RefreshLocks(t, pf.walk); err != nil {
		return err
	}
	if err := glibc.PreflightLocks(pf.walk, stopped); err != nil {
		return fmt.Errorf("process %d: %w", t.Process().Pid, err)
	}
	return nil
}

// record notes the check in the injection's report.
func (pf *preflight) record(in *report.Injection) {
	in.Preflight, in.PreflightWalks, in.PreflightSkipped = pf.took, pf.walks, pf.skipped
	in.PreflightLocked, in.PreflightLockHeld = pf.locked, pf.lockHeld
}

// injectCall borrows a thread that is safe to borrow, checks the arena
// locks again now that it is known which thread that is, runs call in it and
// gives it back. It reports the borrowed thread, the time it was held and
// the pre-flight walk that preceded it.
func injectCall(ctx context.Context, t live.Borrower, pf *preflight, o Options, call func(inject.Caller) error) (report.Injection, error) {
	// From the hijack's first stop to the release, every ptrace round trip
	// waits for arenactl to run: its threads run at the normal level
	// (priority.go), and no garbage collection starts meanwhile. Turning
	// it off waits for a cycle under way to end, so that ends before a
	// thread is stopped; what the call allocates is bounded by its buffer.
	pr := raisePriority()
	defer pr.restore()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	sess, err := t.Hijack(ctx, live.HijackOptions{Timeout: o.Timeout, Tid: o.Tid})
	if err != nil {
		return report.Injection{}, err
	}
	if err := pf.checkLocks(t, sess.Stopped); err != nil {
		sess.Release()
		return report.Injection{}, err
	}
	if err := pf.confirm(t, sess, o); err != nil {
		sess.Release()
		return report.Injection{}, firstErr(ctx, err, nil)
	}
	start := time.Now()
	callErr := call(sess)
	dur := time.Since(start)
	held, relErr := sess.Release()
	if o.Note != nil {
		for _, n := range sess.Notes {
			o.Note(n)
		}
	}
	if err := firstErr(ctx, callErr, relErr); err != nil {
		return report.Injection{}, err
	}
	in := report.Injection{Tid: sess.Tid, Blocked: blockedName(sess.Syscall), Refusals: sess.Refusals, Stopped: held, Call: dur}
	pf.record(&in)
	return in, nil
}

// firstErr decides what a finished injection reports: the call's own error,
// then a failure to release, then a signal that arrived meanwhile (the
// target is restored in every case by then).
func firstErr(ctx context.Context, callErr, relErr error) error {
	switch {
	case callErr != nil && errors.Is(callErr, context.Canceled):
		return ErrInterrupted
	case callErr != nil:
		return callErr
	case relErr != nil:
		return relErr
	case ctx.Err() != nil:
		return ErrInterrupted
	}
	return nil
}

func blockedName(nr int64) string {
	if nr < 0 {
		return "running"
	}
	return inject.SyscallName(nr)
}
