package inspect

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/report"
)

// A recording's walks: every WalkEvery, the heaps are walked read-only
// over a copy-on-write image (ReadOnly with HoldImage, as `info
// --read-only`), and the RSS waterfall of that walk (Report.Waterfall)
// gives malloc's held, trimmable and pinned bytes. The image stops every
// thread for as long as the kernel copies the heaps' page tables; the
// walk then runs beside the process, on arenactl's CPU. Both are bounded:
//
//   - before a walk, its stop is predicted from the heaps' resident
//     bytes at the least stop per GiB a walk of at least 1 GiB measured
//     (before one, stopPerGiB); a walk whose stop would pass WalkMaxStop
//     is not made, and the recording says so once (an EventWalk), and
//     again when walks resume. A smaller heap's stop is mostly the
//     machine's noise (stopping the threads, the scheduler), not the
//     heap's: it stretches the cadence below, it does not pause walks;
//   - after a walk, the next waits at least stop/StopShare and
//     cpu/CPUShare, so that over time the process is stopped at most
//     StopShare of the time and arenactl's walks take at most CPUShare of
//     one CPU; the recording says when that stretches the cadence.
//
// An image that cannot be made ends the walks: a freeze for the whole
// walk (HoldWalk) is never taken instead.
const (
	// stopPerGiB is the prior of the image's stop: docs/scale.md measured
	// 16.5 ms per GiB of heap; rounded up for a loaded machine.
	stopPerGiB = 20 * time.Millisecond
	// DefaultStopShare and DefaultCPUShare are the walks' budget: at
	// the default 30 s, a walk may stop the process 30 ms and take
	// 600 ms of CPU before the cadence stretches.
	DefaultStopShare = 0.001
	DefaultCPUShare  = 0.02
	// maxWalkFailures ends the walks after this many failures in a row.
	maxWalkFailures = 3
)

// DefaultWalkEvery and DefaultWalkMaxStop are record's defaults
// (docs/commands/record.md says why).
const (
	DefaultWalkEvery   = 30 * time.Second
	DefaultWalkMaxStop = 100 * time.Millisecond
)

// walker is the state of a recording's walks: the collector decides when
// one is due (due), one goroutine makes it, and the next interval the
// collector keeps takes its figures (take).
type walker struct {
	every, maxStop      time.Duration
	stopShare, cpuShare float64
	wg                  sync.WaitGroup
	busy                atomic.Bool
	mu                  sync.Mutex
	result              *report.MallocLevel
	// The collector's own, and the walk goroutine's once it ends (under
	// mu): when the next walk is due, the stop per heap byte measured,
	// the failures in a row.
	next        time.Time
	perGiB      time.Duration // the least stop per GiB of a walk of at least 1 GiB
	failures    int
	paused, off bool
	stretched   time.Duration // the most stretched cadence said
	// The process and its allocator, opened read-only at the first walk
	// and kept: the walk goroutine's (one at a time), closed by waitWalks.
	t *live.Target
	h *heap.Heap
}

// take returns the figures of a walk that ended since the last call.
func (w *walker) take() *report.MallocLevel {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.result
	w.result = nil
	return r
}

// heapRss is the resident bytes an image's stop grows with: the heaps'
// and the mmapped chunks' (the image leaves out what malloc does not own).
func heapRss(iv *report.RecordedInterval) uint64 {
	var n uint64
	for _, c := range iv.Classes {
		switch c.Class {
		case "main-heap", "arena-heaps", "mmapped-chunks":
			n += c.Rss
		}
	}
	return n
}

// walk starts a walk when one is due at the end of iv.
func (rc *recSession) walk(iv *report.RecordedInterval) {
	w := &rc.walks
	if w.every <= 0 || w.busy.Load() {
		return
	}
	w.mu.Lock()
	now := time.Now()
	due := !w.off && !now.Before(w.next)
	bytes := heapRss(iv)
	pred := w.predict(bytes)
	w.mu.Unlock()
	if !due {
		return
	}
	if pred > w.maxStop {
		w.mu.Lock()
		w.next = now.Add(w.every)
		w.mu.Unlock()
		if !w.paused {
			w.paused = true
			rc.event(report.RecordingEvent{At: now.Round(0), Kind: report.EventWalk,
				Text: fmt.Sprintf("walks paused: the image's stop would be about %s for %s of heap, over --walk-max-stop %s; malloc's split is not recorded until it fits",
					pred.Round(time.Millisecond), mib(bytes), w.maxStop)})
		}
		return
	}
	if w.paused {
		w.paused = false
		rc.event(report.RecordingEvent{At: now.Round(0), Kind: report.EventWalk,
			Text: fmt.Sprintf("walks resumed: the image's stop should be about %s for %s of heap", pred.Round(time.Millisecond), mib(bytes))})
	}
	w.busy.Store(true)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.busy.Store(false)
		lvl, err := rc.walkOnce(bytes)
		rc.walked(lvl, err)
	}()
}

// walkOnce walks the heaps over an image and splits malloc's memory as
// the waterfall does.
func (rc *recSession) walkOnce(bytes uint64) (*report.MallocLevel, error) {
	o := rc.o.Options
	o.Note, o.NoResidency = nil, false
	// A trigger's snapshot and the sampler's rescans stop the threads
	// too: one at a time.
	cpu0 := processCPU()
	rep, at, err := rc.readOnly(o)
	if err != nil {
		return nil, err
	}
	wf := rep.Waterfall()
	if wf == nil {
		return nil, errors.New("the walk gave no waterfall (no RSS or no malloc figures)")
	}
	line := func(id string) uint64 {
		l, _ := wf.Line(id)
		return l.Bytes
	}
	lvl := &report.MallocLevel{At: at.Walked.Round(0), ResidentAt: at.Resident.Round(0), Held: line(report.LineHeld), Tcache: line(report.LineTcache),
		Trimmable: line(report.LineTrimmable), Pinned: line(report.LinePinned), Mmapped: line(report.LineMmapped),
		Cpu: processCPU() - cpu0}
	if ro := rep.ReadOnly; ro != nil {
		lvl.Stop = ro.Frozen
	}
	if r := rep.Residency; r != nil {
		lvl.FreeNotResident = r.FreeWhole - min(r.FreeWhole, r.FreeWholeResident)
		lvl.PinnedTops = min(r.ThreadTops, lvl.Pinned) // as the waterfall's pinned line details it
	}
	for i := range rep.Malloc.Arenas {
		a := &rep.Malloc.Arenas[i]
		lvl.Arenas = append(lvl.Arenas, report.ArenaMalloc{Index: a.Index, InUse: a.InUse(), Free: a.FreeBytes()})
	}
	rc.walks.measured(bytes, lvl.Stop)
	return lvl, nil
}

// predict is the stop a walk's image would take with bytes of heap
// resident. Under mu.
func (w *walker) predict(bytes uint64) time.Duration {
	per := w.perGiB
	if per == 0 {
		per = stopPerGiB
	}
	return time.Duration(float64(per) * float64(bytes) / (1 << 30))
}

// measured learns from a walk's stop with bytes of heap resident.
func (w *walker) measured(bytes uint64, stop time.Duration) {
	if stop <= 0 || bytes < 1<<30 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// The least measured: the machine's load only adds to a stop, and a
	// stop taken too high would pause the walks for good.
	if per := time.Duration(float64(stop) / (float64(bytes) / (1 << 30))); w.perGiB == 0 || per < w.perGiB {
		w.perGiB = per
	}
}

// readOnly walks the process over an image. The process and its
// allocator are opened at the first walk and kept (their symbols come
// from files: reading them again at every walk cost more than the walk of
// a small heap); the mappings are read again before each.
func (rc *recSession) readOnly(o Options) (*report.Report, readTimes, error) {
	var at readTimes
	// A trigger's snapshot and the sampler's rescans stop the threads
	// too: one at a time. And budget.Check sets the process-wide limits
	// of the walk's caches, which a snapshot's sets too.
	rc.stops.Lock()
	defer rc.stops.Unlock()
	if err := budget.Check(rc.pid, budget.Walk, o.MaxMemory, o.Jobs); err != nil {
		return nil, at, err
	}
	w := &rc.walks
	if w.t == nil {
		t, err := live.OpenReadOnly(rc.pid)
		if err != nil {
			return nil, at, err
		}
		h, err := openHeap(t, o.DebugDirs, o.Jobs)
		if err != nil {
			t.Close()
			return nil, at, err
		}
		w.t, w.h = t, h
	} else if err := w.t.RefreshRanges(); err != nil {
		return nil, at, w.t.Explain(err)
	}
	rep, err := readOnlyWith(rc.ctx, w.t, w.h, o, HoldImage, &at)
	if err != nil {
		return nil, at, w.t.Explain(err)
	}
	return rep, at, nil
}

// walked keeps a walk's figures for the next interval and sets when the
// next is due, or says why it failed.
func (rc *recSession) walked(lvl *report.MallocLevel, err error) {
	w := &rc.walks
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if errors.Is(err, procfs.ErrGone) || errors.Is(err, procfs.ErrNoProcess) || live.IsGone(err) || rc.ctx.Err() != nil {
			w.off = true
			return
		}
		w.failures++
		var un *live.ImageUnavailableError
		text := "a walk failed: " + err.Error()
		if errors.As(err, &un) || w.failures >= maxWalkFailures {
			w.off = true
			text += "; no more walks in this recording"
		}
		w.next = now.Add(w.every)
		rc.post(report.RecordingEvent{At: now.Round(0), Kind: report.EventWalk, Text: text})
		return
	}
	w.failures = 0
	w.result = lvl
	gap := max(w.every, time.Duration(float64(lvl.Stop)/w.stopShare), time.Duration(float64(lvl.Cpu)/w.cpuShare))
	w.next = now.Add(gap)
	// Said when the cadence first stretches, and again only when it
	// stretches to twice the most said so far: a few events over any
	// duration, however the walks' cost goes up and down.
	if gap > w.every && gap > 2*w.stretched {
		w.stretched = gap
		rc.post(report.RecordingEvent{At: now.Round(0), Kind: report.EventWalk,
			Text: fmt.Sprintf("walks stretched to every %s: the last stopped the process %s and took %s of CPU (at most %.1f%% of the time stopped, %.0f%% of a CPU)",
				gap.Round(time.Millisecond), lvl.Stop.Round(time.Microsecond), lvl.Cpu.Round(time.Millisecond), 100*w.stopShare, 100*w.cpuShare)})
	}
}

// processCPU is the CPU time arenactl has used, all threads: the walk's
// workers run on several. The sampler's drains meanwhile count too, so a
// walk's figure is an upper bound.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// waitWalks waits for a walk under way, and closes what the walks kept
// open.
func (rc *recSession) waitWalks() {
	w := &rc.walks
	w.wg.Wait()
	if w.t != nil {
		w.t.Close()
		w.t, w.h = nil, nil
	}
}
