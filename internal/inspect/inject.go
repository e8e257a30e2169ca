package inspect

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/report"
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
	heap    *heap.Heap  // the allocator located; nil when skipped or not found
	took    time.Duration
	walks   int
	frozen  time.Duration // how long every thread was stopped for the second walk
	skipped string
}

func runPreflight(ctx context.Context, t *live.Target, o Options) (*preflight, error) {
	start := time.Now()
	pf := &preflight{}
	defer func() { pf.took = time.Since(start) }()
	if o.NoHeapCheck {
		pf.skipped = "--no-heap-check"
		return pf, nil
	}
	h, err := openHeap(t, o.DebugDirs)
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
	if len(w.FatalDamage()) == 0 {
		return pf, nil
	}
	// Heaps may have grown since the target was opened: the freeze re-reads
	// the mappings once nothing runs, so a chunk in new memory cannot look
	// wild to this walk.
	if pf.frozen, err = whileFrozen(ctx, t, o.Timeout, func() (err error) {
		w, err = h.WalkLists()
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

// whileFrozen stops every thread of t, runs read and lets them all go; it
// returns how long they were stopped.
func whileFrozen(ctx context.Context, t *live.Target, timeout time.Duration, read func() error) (time.Duration, error) {
	pr := raisePriority()
	defer pr.restore()
	frozen, err := t.Freeze(ctx, timeout)
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
// the other threads' states as read just before the thread was held (read
// while it is held, they would hold it for as long as reading every
// thread's status takes). The caller releases the thread on an error.
func (pf *preflight) checkLocks(t *live.Target, stopped []int) error {
	if pf.walk == nil || len(stopped) == 0 {
		return nil
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
func (pf *preflight) record(in *report.Injection) {
	in.Preflight, in.PreflightWalks, in.PreflightFrozen, in.PreflightSkipped = pf.took, pf.walks, pf.frozen, pf.skipped
}

// injectCall borrows a thread that is safe to borrow, checks the arena
// locks again now that it is known which thread that is, runs call in it and
// gives it back. It reports the borrowed thread, the time it was held and
// the pre-flight walk that preceded it.
func injectCall(ctx context.Context, t *live.Target, pf *preflight, o Options, call func(glibc.Caller) error) (report.Injection, error) {
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
	return glibc.SyscallName(nr)
}
