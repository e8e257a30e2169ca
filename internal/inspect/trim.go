package inspect

import (
	"context"
	"fmt"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/glibc/predict"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/report"
)

// Trim runs glibc's malloc_trim(pad) in one borrowed thread and measures
// what it gave back: the memory map before and after, next to what the free
// lists predicted just before the call.
func Trim(ctx context.Context, pid int, pad uint64, o Options) (_ *report.TrimReport, err error) {
	// The pre-flight walks the lists over copies of the arenas' heaps.
	if err := budget.Check(pid, budget.Walk, o.MaxMemory, o.Jobs); err != nil {
		return nil, err
	}
	t, done, err := openLive(pid, false)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	pid = t.Pid
	if err := checkThread(t.Proc(), o.Tid); err != nil {
		return nil, err
	}
	pf, err := runPreflight(ctx, t, o)
	if err != nil {
		return nil, err
	}
	// The prediction reuses the pre-flight walk, made with no thread
	// stopped, rather than a walk of its own with the process frozen:
	// freezing every thread is what trim exists to avoid, the walk is a few
	// milliseconds old when the call starts, and the free lists of a busy
	// process change during the call anyway. A prediction that cannot be
	// made leaves Prediction nil; it never stops the trim.
	var pred *predict.Trim
	if pf.walk != nil {
		pred, _ = predictTrim(t.Proc(), pf.walk, pad)
	}
	before, err := readMaps(t, pf.heap)
	if err != nil {
		return nil, err
	}
	var result int
	in, err := injectCall(ctx, t, pf, o, func(c inject.Caller) (err error) {
		result, err = inject.RunMallocTrim(ctx, c, t.Libc, pad)
		return err
	})
	if err != nil {
		return nil, err
	}
	after, err := readMaps(t, pf.heap)
	if err != nil {
		return nil, err
	}
	rep := &report.TrimReport{
		Pid: pid, Libc: report.LibcOf(t.Libc), Pad: pad, Result: result,
		Injection: in,
		Before:    before, After: after, Prediction: pred, Hold: "none",
	}
	return rep, nil
}

// DryRunTrim predicts malloc_trim(pad) without running anything of the
// target's. The free lists are walked with the process held as mode says:
// by default from a copy-on-write image, so that every thread is stopped
// only while it is made; main_arena is found before, and which pages are
// resident is read after. The pages of free chunks stay as they are unless
// the process allocates them meanwhile, which would change the lists as
// much.
func DryRunTrim(ctx context.Context, pid int, pad uint64, o Options, mode Hold) (_ *report.TrimReport, err error) {
	if err := budget.Check(pid, budget.Walk, o.MaxMemory, o.Jobs); err != nil {
		return nil, err
	}
	t, done, err := openLive(pid, false)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	pid = t.Pid
	h, err := openHeap(t, o.DebugDirs, o.Jobs)
	if err != nil {
		return nil, err
	}
	var walk *glibc.Walk
	ro, err := readHeld(ctx, t, h, mode, o, func(hh *heap.Heap) (err error) {
		walk, err = hh.WalkLists()
		return err
	})
	if err != nil {
		return nil, err
	}
	pred, err := predictTrim(t.Proc(), walk, pad)
	if err != nil {
		return nil, err
	}
	before, err := readMaps(t, h)
	if err != nil {
		return nil, err
	}
	return &report.TrimReport{Pid: pid, Libc: report.LibcOf(t.Libc), Pad: pad, Before: before,
		Prediction: pred, DryRun: true, Frozen: ro.Frozen, Hold: ro.Hold, ImageSkipped: ro.ImageSkipped, Damage: walk.Damage}, nil
}

// predictTrim predicts malloc_trim(pad) from w, with the residency of the
// process p holds.
func predictTrim(p *procfs.Proc, w *glibc.Walk, pad uint64) (*predict.Trim, error) {
	pid := p.Pid
	pm, err := p.OpenPagemap()
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	pred, err := predict.MallocTrim(w, pad, pm)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return pred, nil
}
