package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// RecordOptions say what a recording keeps, how often, and what it does
// when a threshold is crossed.
type RecordOptions struct {
	Options
	// Out is the recording's file, created new (0600; an existing path
	// is refused).
	Out string
	// Interval is the finest interval; Duration the recording's length
	// (0: until ctx is done).
	Interval, Duration time.Duration
	// Rate is the sampler's mean bytes between samples
	// (sampler.DefaultRate when 0).
	Rate uint64
	// MaxStacks is how many stacks each interval names (the rest are
	// summed); MaxDisk the size the file is compacted at (0: only as it
	// doubles).
	MaxStacks int
	MaxDisk   int64
	// Tiers of the merging (nil: record.DefaultTiers(Interval)).
	Tiers []report.RecordingTier
	// Triggers: a snapshot is written when the process's RSS reaches
	// TriggerRss, its cgroup's memory.current reaches TriggerCgroup, or
	// (TriggerHigh) its cgroup's memory.events counts a new "high"
	// event; at most one per Cooldown, at most MaxSnapshots in all. Each
	// is written to SnapshotPrefix + "-N.core.zst".
	TriggerRss, TriggerCgroup uint64
	TriggerHigh               bool
	Cooldown                  time.Duration
	MaxSnapshots              int
	SnapshotPrefix            string
	// PprofDir, when set, receives a pprof profile of what is held
	// (allocated since the recording began and still held) every
	// PprofEvery, at most PprofKeep of them (the oldest removed).
	PprofDir   string
	PprofEvery time.Duration
	PprofKeep  int
	// WalkEvery is how often the heaps are walked over a copy-on-write
	// image for malloc's held, trimmable and pinned bytes (0: never);
	// a walk whose stop would pass WalkMaxStop is not made, and the
	// cadence stretches with what the last walk cost (recordwalk.go).
	WalkEvery, WalkMaxStop time.Duration
	// WalkStopShare and WalkCPUShare bound the walks over time: the
	// share of the time the process is stopped for them, and of one CPU
	// they take (0: DefaultStopShare, DefaultCPUShare).
	WalkStopShare, WalkCPUShare float64
	// Tick, when set, hears each interval as it is kept.
	Tick func(iv *report.RecordedInterval)
}

// Recorded is what a recording did.
type Recorded struct {
	Recording *report.Recording
	// FileBytes is the file's size at the end; Compactions how many
	// times it was rewritten.
	FileBytes   int64
	Compactions int
	// Pprof are the pprof files written and kept.
	Pprof []string
}

// Record records the process until o.Duration passes, ctx is done or the
// process exits, each of which ends it cleanly: the sampler is detached
// and the file holds the recording with its end. The file is readable at
// every moment before that too (record.Read).
func Record(ctx context.Context, pid int, o RecordOptions) (_ *Recorded, err error) {
	if o.Interval <= 0 {
		return nil, errors.New("the interval must be positive")
	}
	if err := hostfs.CheckOutput(o.Out); err != nil {
		return nil, &OutputError{Path: o.Out, Err: err}
	}
	if _, err := os.Lstat(o.Out); err == nil {
		return nil, &OutputError{Path: o.Out, Err: os.ErrExist}
	}
	t, done, err := openLive(pid, false)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	pid = t.Pid
	mem := newMemReader(t, o.DebugDirs)
	rate := o.Rate
	if rate == 0 {
		rate = sampler.DefaultRate
	}
	meta := report.RecordingMeta{Pid: pid, Exe: t.Exe, Libc: report.LibcOf(t.Libc), Start: time.Now().Round(0), Interval: o.Interval,
		Rate: rate, MaxStacks: o.MaxStacks, Tiers: o.Tiers, Triggers: o.triggers()}
	st := record.NewStore(meta)
	w, err := record.Create(o.Out, st, o.MaxDisk)
	if err != nil {
		return nil, &OutputError{Path: o.Out, Err: err}
	}
	defer w.Close()
	rc := &recSession{o: o, pid: pid, st: st, w: w, mem: mem, ids: map[string]int{}, ctx: ctx}
	rc.walks.every, rc.walks.maxStop = o.WalkEvery, o.WalkMaxStop
	// The first walk comes one --walk-every in, not at the first
	// interval: the start is already arenactl's busiest time (the
	// tables read, the sampler placed), and on mariadbd under
	// mariadb-slap a first walk there (249 ms of CPU) more than doubled
	// what a recording of a few seconds cost the machine's CPUs
	// (docs/commands/record.md, Cost).
	rc.walks.next = time.Now().Add(o.WalkEvery)
	rc.walks.stopShare, rc.walks.cpuShare = cmp.Or(o.WalkStopShare, DefaultStopShare), cmp.Or(o.WalkCPUShare, DefaultCPUShare)
	if o.Note != nil {
		for _, n := range mem.notes {
			o.Note(n)
		}
	}
	lo := LeaksOptions{Options: o.Options, Duration: o.Duration, Rate: o.Rate, NoScan: true, Stops: &rc.stops}
	lo.Note = func(s string) {
		if o.Note != nil {
			o.Note(s)
		}
		rc.post(report.RecordingEvent{At: time.Now().Round(0), Kind: report.EventNote, Text: s})
	}
	rc.ticks = make(chan tick, 1)
	sp, err := startSampler(ctx, t, lo)
	if err != nil {
		// Nothing was recorded: the file made for it goes.
		w.Close()
		os.Remove(o.Out)
		return nil, err
	}
	collected := make(chan error, 1)
	go func() { collected <- rc.collect(context.WithoutCancel(ctx)) }()
	var last, lastDrop time.Duration
	send := func(b *stackprof.Builder, at time.Duration) *stackprof.Profile {
		p := b.Profile(stackprof.Window{Start: sp.start, Duration: at, Rate: sp.rate})
		// The latest wins: a tick the collector has not taken (it is
		// writing a trigger's snapshot) is replaced, so the live set it
		// keeps is never older than a drain.
		tk := tick{at: sp.start.Add(at).Round(0), p: p}
		select {
		case rc.ticks <- tk:
		default:
			select {
			case <-rc.ticks:
			default:
			}
			select {
			case rc.ticks <- tk:
			default:
			}
		}
		return p
	}
	lo.Drained = func(b *stackprof.Builder, at time.Duration) {
		if at-last < o.Interval {
			return
		}
		last = at
		p := send(b, at)
		// Freed samples are forgotten once they are most: the builder
		// then holds what is held, not the recording's history.
		if c, _ := p.Total(); p.Samples-c.InUse > max(1024, c.InUse) || at-lastDrop > orphanAge {
			b.DropFreed(at - orphanAge)
			lastDrop = at
		}
	}
	rep := &report.Leaks{Pid: pid}
	b, end, runErr := sample(ctx, t, sp.s, sp.mods, sp.u, sp.sym, lo, sp.start, sp.startClock, rep)
	if runErr == nil && b != nil && end > last {
		send(b, end) // the levels where the recording ends
	}
	// The collector ends, and a trigger's snapshot, before the sampler is
	// taken out: both stop every thread, which two cannot do at once.
	close(rc.ticks)
	cerr := <-collected
	rc.snapping.Wait()
	rc.waitWalks()
	left, derr := sp.s.Detach(context.WithoutCancel(ctx))
	fin := report.RecordingEnd{At: time.Now().Round(0), Why: report.EndDuration, Left: report.SamplerLeft(left)}
	switch {
	case runErr != nil && errors.Is(runErr, procfs.ErrGone), derr != nil && errors.Is(derr, procfs.ErrGone):
		fin.Why, runErr, derr = report.EndExited, nil, nil
	case ctx.Err() != nil:
		fin.Why = report.EndInterrupted
	}
	if runErr == nil || errors.Is(runErr, context.Canceled) {
		runErr = derr
	}
	if runErr == nil {
		runErr = cerr
	}
	if runErr != nil {
		fin.Why, fin.Err = report.EndError, runErr.Error()
	}
	rc.drainEvents()
	st.SetEnd(fin)
	if werr := w.End(fin); werr != nil && runErr == nil {
		runErr = werr
	}
	out := &Recorded{Recording: st.Recording(), FileBytes: w.Size(), Compactions: w.Compactions, Pprof: rc.pprofs}
	if runErr != nil {
		return out, runErr
	}
	return out, nil
}

// orphanAge is how long a free whose allocation's record has not come
// is kept for it (stackprof.Builder.DropFreed): an allocation's record
// comes a few drains late at most; one dropped never comes.
const orphanAge = 10 * time.Second

// triggers are the thresholds armed, as the recording says them.
func (o *RecordOptions) triggers() []string {
	var t []string
	if o.TriggerRss > 0 {
		t = append(t, "rss >= "+strconv.FormatUint(o.TriggerRss, 10))
	}
	if o.TriggerCgroup > 0 {
		t = append(t, "cgroup memory.current >= "+strconv.FormatUint(o.TriggerCgroup, 10))
	}
	if o.TriggerHigh {
		t = append(t, "cgroup memory.events high")
	}
	return t
}

// tick is one interval's live set, handed from the sampler's loop to the
// collector.
type tick struct {
	at time.Time
	p  *stackprof.Profile
}

// recSession is the collector's state: it owns the store and the file.
type recSession struct {
	o     RecordOptions
	pid   int
	st    *record.Store
	w     *record.Writer
	mem   *memReader
	ids   map[string]int // a stack's key -> its ID
	ticks chan tick
	// posted are events from other goroutines (the sampler's notes, a
	// snapshot's outcome), for the collector to keep.
	postMu sync.Mutex
	posted []report.RecordingEvent
	// stops is held while a trigger's snapshot stops the process; the
	// sampler's rescans skip their turn meanwhile.
	stops sync.Mutex
	// snapping counts the trigger snapshots being written (at most one);
	// ctx ends them.
	snapping sync.WaitGroup
	snapBusy atomic.Bool
	ctx      context.Context
	// walks are the walks of the heaps at their slower cadence.
	walks walker

	prevEnd                 time.Time
	snapshots               int
	lastSnap                time.Time
	highSeen                uint64
	highKnown               bool
	cgroupDir               string
	cgroupRead              bool
	pprofs                  []string
	lastPprof               time.Time
	firstErr                error
	stackCount, stackFrames int
}

// collect keeps an interval for every tick, until the ticks end.
func (rc *recSession) collect(ctx context.Context) error {
	rc.prevEnd = rc.st.Meta().Start
	for tk := range rc.ticks {
		rc.drainEvents()
		if err := rc.interval(ctx, tk); err != nil && rc.firstErr == nil {
			rc.firstErr = err
			return err
		}
	}
	return rc.firstErr
}

// maxPosted bounds the events waiting for the collector; beyond, the
// first ones are kept.
const maxPosted = 64

// post hands an event to the collector, from any goroutine, never
// waiting.
func (rc *recSession) post(e report.RecordingEvent) {
	rc.postMu.Lock()
	defer rc.postMu.Unlock()
	if len(rc.posted) < maxPosted {
		rc.posted = append(rc.posted, e)
	}
}

// drainEvents keeps the events posted.
func (rc *recSession) drainEvents() {
	rc.postMu.Lock()
	posted := rc.posted
	rc.posted = nil
	rc.postMu.Unlock()
	for _, e := range posted {
		rc.event(e)
	}
}

func (rc *recSession) event(e report.RecordingEvent) {
	rc.st.AddEvent(e)
	if err := rc.w.Event(e); err != nil && rc.firstErr == nil {
		rc.firstErr = err
	}
}

// interval reads the memory map and the arenas, and keeps the interval
// that ends now.
func (rc *recSession) interval(ctx context.Context, tk tick) error {
	iv := report.RecordedInterval{Start: rc.prevEnd, Samples: tk.p.Samples, Dropped: tk.p.Window.Dropped}
	classes, rss, rssAt, err := rc.mem.classes()
	if err != nil {
		if errors.Is(err, procfs.ErrGone) || errors.Is(err, procfs.ErrNoProcess) {
			return nil // the sampler's loop sees it too, and ends
		}
		return err
	}
	now := time.Now().Round(0)
	iv.Classes, iv.Rss, iv.RssAt = classes, rss, rssAt.Round(0)
	iv.Arenas, iv.MmappedBytes = rc.mem.arenas()
	iv.Duration = now.Sub(rc.prevEnd)
	rc.prevEnd = now
	rc.held(&iv, tk.p)
	iv.Malloc = rc.walks.take()
	rc.st.Add(iv)
	if err := rc.w.Interval(iv, rc.st); err != nil {
		return err
	}
	if rc.o.Tick != nil {
		rc.o.Tick(&iv)
	}
	rc.trigger(ctx, &iv)
	rc.walk(&iv)
	rc.pprof(tk)
	return nil
}

// held puts the profile's top stacks in the interval, defining the ones
// new to the recording.
func (rc *recSession) held(iv *report.RecordedInterval, p *stackprof.Profile) {
	max := rc.o.MaxStacks
	for i := range p.Sites {
		s := &p.Sites[i]
		if s.Est.InUseBytes <= 0 && s.Sampled.InUse == 0 {
			continue
		}
		h := report.StackHeld{Bytes: s.Est.InUseBytes, Var: s.Est.InUseBytesVar, Objects: s.Est.InUseObjects, Sampled: s.Sampled.InUse}
		if len(iv.Held) >= max {
			o := &iv.OtherHeld
			o.Bytes, o.Var, o.Objects, o.Sampled = o.Bytes+h.Bytes, o.Var+h.Var, o.Objects+h.Objects, o.Sampled+h.Sampled
			continue
		}
		key := frameKey(s.Frames)
		id, ok := rc.ids[key]
		if !ok {
			id = len(rc.ids) + 1
			rc.ids[key] = id
		}
		if _, kept := rc.st.Stack(id); !kept {
			st := report.RecordedStack{ID: id, Frames: s.Frames}
			rc.st.AddStack(st)
			if err := rc.w.Stack(st); err != nil && rc.firstErr == nil {
				rc.firstErr = err
			}
		}
		h.Stack = id
		iv.Held = append(iv.Held, h)
	}
}

// frameKey identifies a stack across profiles: its frames' addresses and
// functions.
func frameKey(fs []stackprof.Frame) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(strconv.FormatUint(f.Addr, 16))
		b.WriteByte(' ')
		b.WriteString(f.Function)
		if f.Inlined {
			b.WriteByte('+')
		}
		b.WriteByte(';')
	}
	return b.String()
}

// trigger writes a snapshot when a threshold is crossed, outside the
// cooldown.
func (rc *recSession) trigger(ctx context.Context, iv *report.RecordedInterval) {
	o := &rc.o
	if o.TriggerRss == 0 && o.TriggerCgroup == 0 && !o.TriggerHigh {
		return
	}
	var why string
	var value, limit uint64
	if o.TriggerRss > 0 && iv.Rss >= o.TriggerRss {
		why, value, limit = fmt.Sprintf("RSS %d bytes reached --trigger-rss %d", iv.Rss, o.TriggerRss), iv.Rss, o.TriggerRss
	}
	if (o.TriggerCgroup > 0 || o.TriggerHigh) && why == "" {
		if !rc.cgroupRead {
			rc.cgroupRead = true
			rc.cgroupDir, _ = rc.mem.t.Proc().MemoryCgroupDir()
		}
		if rc.cgroupDir != "" {
			if cg, err := procfs.ReadCgroupMemory(rc.cgroupDir); err == nil {
				switch {
				case o.TriggerCgroup > 0 && cg.Current >= o.TriggerCgroup:
					why, value, limit = fmt.Sprintf("the cgroup's memory %d bytes reached --trigger-cgroup %d (%s)", cg.Current, o.TriggerCgroup, cg.Dir), cg.Current, o.TriggerCgroup
				case o.TriggerHigh && cg.HasHighEvent && rc.highKnown && cg.HighEvents > rc.highSeen:
					why, value = fmt.Sprintf("the cgroup went over memory.high (%d more high events)", cg.HighEvents-rc.highSeen), cg.HighEvents
				}
				rc.highSeen, rc.highKnown = cg.HighEvents, cg.HasHighEvent
			}
		}
	}
	if why == "" || rc.snapshots >= o.MaxSnapshots || !rc.lastSnap.IsZero() && time.Since(rc.lastSnap) < o.Cooldown || rc.snapBusy.Load() {
		return
	}
	rc.snapshots++
	rc.lastSnap = time.Now()
	rc.event(report.RecordingEvent{At: time.Now().Round(0), Kind: report.EventTrigger, Text: why, Value: value, Limit: limit})
	path := fmt.Sprintf("%s-%d.core.zst", o.SnapshotPrefix, rc.snapshots)
	// Written beside the recording, which goes on meanwhile: a snapshot
	// of a large heap takes seconds, the intervals of which are the
	// ones that matter most.
	rc.snapping.Add(1)
	rc.snapBusy.Store(true)
	go func() {
		defer rc.snapping.Done()
		defer rc.snapBusy.Store(false)
		rc.stops.Lock()
		_, err := Snapshot(rc.ctx, rc.pid, SnapshotOptions{Out: path, Zstd: true, Timeout: o.Timeout, DebugDirs: o.DebugDirs, MaxMemory: o.MaxMemory, Jobs: o.Jobs})
		rc.stops.Unlock()
		e := report.RecordingEvent{At: time.Now().Round(0), Kind: report.EventSnapshot, Path: path, Text: "snapshot written (" + why + ")"}
		note := fmt.Sprintf("%s: snapshot written to %s", why, path)
		if err != nil {
			e = report.RecordingEvent{At: time.Now().Round(0), Kind: report.EventSnapshotFailed, Text: err.Error()}
			note = "a trigger's snapshot failed: " + err.Error()
		}
		rc.post(e)
		if o.Note != nil {
			o.Note(note)
		}
	}()
}

// pprof writes the profile of what is held now, every PprofEvery, and
// removes the oldest beyond PprofKeep.
func (rc *recSession) pprof(tk tick) {
	o := &rc.o
	if o.PprofDir == "" || !rc.lastPprof.IsZero() && tk.at.Sub(rc.lastPprof) < o.PprofEvery {
		return
	}
	rc.lastPprof = tk.at
	name := filepath.Join(o.PprofDir, fmt.Sprintf("heap-%d-%s.pb.gz", rc.pid, tk.at.UTC().Format("20060102T150405.000Z")))
	f, err := createNew(name)
	if err == nil {
		err = stackprof.WritePprof(f, tk.p)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
		}
	}
	if err != nil {
		if rc.firstErr == nil && o.Note != nil {
			o.Note("a pprof profile was not written: " + err.Error())
		}
		return
	}
	rc.pprofs = append(rc.pprofs, name)
	for o.PprofKeep > 0 && len(rc.pprofs) > o.PprofKeep {
		os.Remove(rc.pprofs[0])
		rc.pprofs = rc.pprofs[1:]
	}
}

// createNew creates a file that is not there, 0600, following no link.
func createNew(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}
