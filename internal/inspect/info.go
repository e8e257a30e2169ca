package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

// Info runs glibc's own malloc_info in one borrowed thread of the process
// and builds the report. The maps are read after the thread is released, so
// that reading them adds nothing to the time the thread is held.
func Info(ctx context.Context, pid int, o Options) (_ *report.Report, err error) {
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
	if err := sameProcess(t, o.Same); err != nil {
		return nil, err
	}
	fillEnv(t, o)
	if err := checkThread(t.Proc(), o.Tid); err != nil {
		return nil, err
	}
	pf, err := runPreflight(ctx, t, o)
	if err != nil {
		return nil, err
	}
	var raw []byte
	in, err := injectCall(ctx, t, pf, o, func(c inject.Caller) (err error) {
		raw, err = inject.RunMallocInfo(ctx, c, t.Libc)
		return err
	})
	if err != nil {
		return nil, err
	}
	mi, err := mallocinfo.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("glibc's malloc_info output could not be parsed: %w", err)
	}
	rep := &report.Report{
		Pid:       pid,
		Exe:       t.Exe,
		Libc:      report.LibcOf(t.Libc),
		Malloc:    mi,
		Injection: &in,
	}
	rep.Threads = countThreads(t.Proc())
	rep.Maps, err = readMaps(t, pf.heap)
	if err == nil && pf.walk != nil && !o.NoResidency {
		// The pre-flight walks the lists only: the mmapped chunks are
		// looked for here, with no thread stopped, in the maps just read.
		w := *pf.walk
		w.Mmapped = findMmapped(t, pf.heap.Layout, t.Mappings(), mi)
		rep.Residency = measureResidency(t.Proc(), &w, t.Mappings())
	}
	return rep, err
}

// findMmapped finds the chunks glibc mmapped one by one (glibc.ScanMmapped)
// as the read-only walk does: the smaller mappings first, until as many
// chunks of as many bytes as malloc_info counted are found, so that a large
// mapping of the program's (a buffer pool) is read through only while a
// chunk is still missing. What it cannot find leaves Count short, and the
// waterfall then takes malloc's total instead.
func findMmapped(mem glibc.Memory, lay layouts.Layout, ms []maps.Mapping, mi *mallocinfo.Info) glibc.MmappedChunks {
	var mc glibc.MmappedChunks
	if !mi.HasMmap || mi.MmapCount == 0 {
		return mc
	}
	var cand []maps.Mapping
	for _, m := range ms {
		if glibc.MayHoldMmapped(m) {
			cand = append(cand, m)
		}
	}
	sort.SliceStable(cand, func(i, j int) bool { return cand[i].Size() < cand[j].Size() })
	done := func() bool { return mc.Count >= mi.MmapCount && mc.Bytes >= mi.MmapBytes }
	for _, m := range cand {
		if done() {
			break
		}
		glibc.ScanMmapped(mem, lay, m, 0, func(c glibc.MmappedChunk) bool {
			r := c.Region()
			mc.Count++
			mc.Bytes += r.End - r.Start
			mc.Regions = append(mc.Regions, r)
			return !done()
		})
	}
	if !done() {
		mc = glibc.MmappedChunks{}
	}
	return mc
}

// Hold says how a read-only use case keeps the process still while it
// reads it.
type Hold int

const (
	// HoldAuto: an image when one can be made safely, else HoldWalk, and
	// the report says why.
	HoldAuto Hold = iota
	// HoldImage: every thread is stopped only while a copy-on-write image
	// is made (live.Image), which is then read while the process runs.
	// Raw syscalls run in one thread; no code of the program's.
	HoldImage
	// HoldWalk: every thread is stopped for the whole read; nothing at
	// all is written into the process.
	HoldWalk
	// HoldNone: nothing is stopped; numbers may be torn.
	HoldNone
)

// ParseHold reads a Hold's name, as --freeze gives it.
func ParseHold(s string) (Hold, error) {
	for h, name := range holdNames {
		if s == name {
			return Hold(h), nil
		}
	}
	return 0, fmt.Errorf("unknown freeze mode %q (auto, image, walk or none)", s)
}

var holdNames = []string{"auto", "image", "walk", "none"}

func (h Hold) String() string { return holdNames[h] }

// held is a process kept still for a read: its image, or itself frozen.
type held struct {
	mem     debuggee.Target // what to read: the image, or the live target
	image   *live.Image
	frozen  *live.Frozen
	skipped string // why no image was made, under HoldAuto
	boost   *boost // arenactl at normal priority while the process is stopped
}

// holder is a live process that can be kept still either way: an image
// or a freeze.
type holder interface {
	live.Freezer
	live.Imager
}

// hold keeps t still as mode says. The caller reads h.mem, then calls
// release, which says how long the process was stopped.
func hold(ctx context.Context, t holder, mode Hold, timeout time.Duration, leaveOut ...maps.Range) (*held, error) {
	h := &held{mem: t}
	switch mode {
	case HoldNone:
		return h, nil
	case HoldAuto, HoldImage:
		b := raisePriority()
		im, err := t.Image(ctx, timeout, leaveOut...)
		b.restore()
		var un *live.ImageUnavailableError
		switch {
		case err == nil:
			h.mem, h.image = im, im
			return h, nil
		case mode == HoldAuto && errors.As(err, &un):
			h.skipped = un.Reason
		default:
			return nil, err
		}
	}
	h.boost = raisePriority()
	f, err := t.Freeze(ctx, timeout)
	if err != nil {
		h.boost.restore()
		return nil, err
	}
	h.frozen = f
	return h, nil
}

// release lets the process go (or ends its image) and fills in how it was
// held.
func (h *held) release(ro *report.ReadOnly) error {
	switch {
	case h.image != nil:
		ro.Hold, ro.Frozen, ro.Cloned = "image", h.image.Stopped, h.image.Cloned
		for _, sp := range h.image.LeftOut {
			ro.LeftOut++
			ro.LeftOutBytes += sp.End - sp.Start
		}
		// An image that ended under the read leaves it short, not
		// wrong where it says so: a walk takes an unreadable chunk for
		// the end of its heap, a scan an unreadable root for none.
		gone := h.image.Gone()
		if err := h.image.Close(); gone == nil {
			return err
		}
		return fmt.Errorf("image %d: %w", h.image.Pid, gone)
	case h.frozen != nil:
		d, err := h.frozen.Thaw()
		h.boost.restore()
		h.boost = nil
		ro.Hold, ro.Frozen, ro.ImageSkipped = "walk", d, h.skipped
		return err
	}
	ro.Hold, ro.Torn = "none", true
	return nil
}

// leaveOut names what an image for mode may be made without. A walk reads
// nothing of the memory the allocator does not own, whose page tables
// would otherwise make most of the stop (a database's buffer pool); a
// full snapshot dumps it, so keeps it.
func leaveOut(h *heap.Heap, mode Hold, full bool) []maps.Range {
	if full || mode != HoldAuto && mode != HoldImage {
		return nil
	}
	return h.LeaveOut()
}

// readHeld holds t as mode says, runs read on h over what is held (the
// image, or the stopped process), lets the process go, and says how it was
// held and how long read took.
func readHeld(ctx context.Context, t holder, h *heap.Heap, mode Hold, o Options, read func(*heap.Heap) error) (*report.ReadOnly, error) {
	ro := &report.ReadOnly{}
	hd, err := hold(ctx, t, mode, o.Timeout, leaveOut(h, mode, false)...)
	if err != nil {
		return nil, err
	}
	if hd.image != nil && o.Note != nil {
		for _, n := range hd.image.Notes {
			o.Note(n)
		}
	}
	hh := *h
	hh.T = hd.mem
	start := time.Now()
	err = read(&hh)
	ro.Walked = time.Since(start)
	if rerr := hd.release(ro); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.Process().Pid, err)
	}
	return ro, nil
}

// ReadOnly builds the info report from memory alone, holding the process
// as mode says; the libc file and the maps are read before, the smaps
// summary after. A static executable is accepted: its own copy of glibc's
// malloc is read.
func ReadOnly(ctx context.Context, pid int, o Options, mode Hold) (_ *report.Report, err error) {
	if err := budget.Check(pid, budget.Walk, o.MaxMemory, o.Jobs); err != nil {
		return nil, err
	}
	t, done, err := openLive(pid, true)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	if err := sameProcess(t, o.Same); err != nil {
		return nil, err
	}
	fillEnv(t, o)
	// Symbols and static signatures come from files: found before anything
	// is stopped, so the freeze lasts only as long as the walk itself.
	h, err := openHeap(t, o.DebugDirs, o.Jobs)
	if err != nil {
		return nil, err
	}
	return readOnlyWith(ctx, t, h, o, mode, nil)
}

// readTimes are when a read-only walk read what: Walked when the walk
// began (the image, or the freeze, holds the memory of that moment), and
// Resident when the pagemap was read, of the live process, after the
// walk.
type readTimes struct{ Walked, Resident time.Time }

// readOnlyWith is ReadOnly's walk of a target and allocator already
// opened (a recording walks the same process again and again); at, when
// set, is told when it read what.
func readOnlyWith(ctx context.Context, t *live.Target, h *heap.Heap, o Options, mode Hold, at *readTimes) (*report.Report, error) {
	pid := t.Pid
	var walk *glibc.Walk
	var caches []glibc.ThreadCache
	ro, err := readHeld(ctx, t, h, mode, o, func(hh *heap.Heap) (err error) {
		if at != nil {
			at.Walked = time.Now()
		}
		walk, caches, err = hh.Walk()
		return err
	})
	if err != nil {
		return nil, err
	}
	ro.TcachesSkipped = h.TcachesSkipped
	ro.Walk, ro.Tcaches = walk, caches
	// h.Libc, not t.Libc: the allocator read may be another object's
	// (libc's, behind libc_malloc_debug.so without MALLOC_CHECK_).
	rep := &report.Report{Pid: pid, Exe: t.Exe, Libc: report.LibcOf(h.Libc), Malloc: walk.Malloc, ReadOnly: ro}
	if !o.NoResidency {
		if at != nil {
			at.Resident = time.Now()
		}
		rep.Residency = measureResidency(t.Proc(), walk, t.Mappings())
	}
	rep.Threads = countThreads(t.Proc())
	rep.Maps, err = readMaps(t, h)
	return rep, err
}

// CoreOptions say where a core's files are when it comes from another
// machine, and where debug files are.
type CoreOptions struct {
	Sysroot string
	Jobs    int // workers the walk and scan may use (as Options.Jobs)
	heap.Options
	Unpack core.Options // for a compressed core
	// Note, when set, is told what a user should know that is not an
	// error (a debug file fetched or not).
	Note func(string)
}

// Core builds the info report of a core: the same read-only walk as for a
// live process, over the core's memory (and the files it maps, for pages
// the kernel did not dump).
func Core(ctx context.Context, path string, o CoreOptions) (*report.Report, error) {
	t, h, err := openCore(ctx, path, o)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	walk, caches, err := h.Walk()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, ths := t.Process(), t.Threads()
	h.Unclaim(t.Mappings())
	rep := &report.Report{
		Pid: p.Pid, Exe: p.Exe, Libc: report.LibcOf(h.Libc), Threads: len(ths), Malloc: walk.Malloc,
		ReadOnly: &report.ReadOnly{Walk: walk, Tcaches: caches, TcachesSkipped: h.TcachesSkipped},
		Maps:     coreMapsSummary(t),
		Core:     &report.CoreInfo{Path: path, CrashTid: ths[0].Tid, Command: p.Command, LibcNotes: h.LibcNotes},
	}
	// A core has no pagemap: its free pages are counted as resident.
	rep.Residency, _ = report.MeasureResidency(walk, nil, t.Mappings())
	if t.Signal != nil {
		rep.Core.Signal, rep.Core.FaultAddr = int(t.Signal.Signo), t.Signal.Addr
	}
	if t.FilesFromLinkMap {
		rep.Core.LibcNotes = append([]string{"the core has no NT_FILE note: its objects were found through the executable's DT_DEBUG (ld.so's r_debug and link_map list)"},
			rep.Core.LibcNotes...)
	}
	return rep, nil
}

// coreMapsSummary is a core's memory map by class. A snapshot recorded the
// process's smaps, whose sum over the mappings is its rollup; a kernel core
// recorded sizes only, and its counters are unknown.
func coreMapsSummary(t *core.Target) report.MapsSummary {
	ms := t.Mappings()
	s := report.MapsSummary{Classes: maps.Summarize(ms), Unmeasured: !t.Measured()}
	if t.Measured() {
		for _, m := range ms {
			r := &s.Rollup
			r.Rss += m.Rss
			r.Pss += m.Pss
			r.SharedClean += m.SharedClean
			r.SharedDirty += m.SharedDirty
			r.PrivateClean += m.PrivateClean
			r.PrivateDirty += m.PrivateDirty
			r.Anonymous += m.Anonymous
			r.AnonHugePages += m.AnonHugePages
			r.Swap += m.Swap
		}
	}
	return s
}

// openCore opens a core and locates its allocator; the caller closes the
// target.
func openCore(ctx context.Context, path string, o CoreOptions) (*core.Target, *heap.Heap, error) {
	t, err := core.OpenTargetContext(ctx, path, o.Sysroot, o.Unpack)
	if err != nil {
		return nil, nil, err
	}
	h, err := heap.OpenCore(t, o.Options)
	if err != nil {
		t.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	// No process to protect, but the machine's memory: a core's walk and
	// scan are held to the same budget as a live one's.
	budget.Apply(budget.Need(budget.Scan, budget.HeapOf(t.Mappings())), o.Jobs)
	h.Jobs = o.Jobs
	return t, h, nil
}

// measureResidency reads which of the walk's free pages and mmapped chunks
// are resident, for the RSS waterfall; nil when the pagemap cannot be read
// (the waterfall then says what it assumed). p is the process's held /proc
// directory: a pid read anew could name a later process.
func measureResidency(p *procfs.Proc, w *glibc.Walk, ms []maps.Mapping) *report.Residency {
	pm, err := p.OpenPagemap()
	if err != nil {
		return nil
	}
	defer pm.Close()
	r, err := report.MeasureResidency(w, pm, ms)
	if err != nil {
		return nil
	}
	return r
}

// countThreads is the number of threads the process has now; 0 when that
// cannot be read (the report says nothing then).
func countThreads(p *procfs.Proc) int {
	tids, err := p.Tasks()
	if err != nil {
		return 0
	}
	return len(tids)
}

// readMaps reads the memory map with its smaps counters, by class, and the
// process-wide rollup.
func readMaps(t live.Observed, h *heap.Heap) (report.MapsSummary, error) {
	if err := t.Refresh(); err != nil {
		return report.MapsSummary{}, err
	}
	if h != nil {
		h.Unclaim(t.Mappings())
	}
	roll, err := maps.ReadRollupProc(t.Proc())
	if err != nil {
		return report.MapsSummary{}, err
	}
	return report.MapsSummary{Classes: maps.Summarize(t.Mappings()), Rollup: roll}, nil
}

// openLive opens pid for injection, or with readOnly for reading its memory
// only (a static executable is accepted then). done, deferred with the use
// case's named error, turns an error that came from the process exiting or
// replacing its program meanwhile into one that says so (live.Explain), then
// gives every thread back: every use case ends the same way.
func openLive(pid int, readOnly bool) (t *live.Target, done func(*error), err error) {
	open := live.Open
	if readOnly {
		open = live.OpenReadOnly
	}
	if t, err = open(pid); err != nil {
		return nil, nil, err
	}
	return t, func(err *error) {
		*err = t.Explain(*err)
		t.Close()
	}, nil
}

// sameProcess checks that t, held, is the process id names (see
// Options.Same); any process when id.Start is 0.
func sameProcess(t *live.Target, id procfs.Identity) error {
	if id.Start == 0 {
		return nil
	}
	st, err := t.Proc().ReadStat()
	if err != nil {
		return err
	}
	if st.StartTime != id.Start || st.Exited() {
		return fmt.Errorf("process %d is not the one it was (it started later): %w", t.Pid, ptrace.ErrGone)
	}
	return nil
}

// openHeap locates a live process's allocator: its libc is the file its
// mapping points at. Symbols and static signatures come from files, so this
// is done before anything is stopped.
func openHeap(t *live.Target, debugDirs []string, jobs int) (*heap.Heap, error) {
	h, err := heap.Open(t, t.Libc, heap.Options{DebugDirs: debugDirs})
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	h.Jobs = jobs
	return h, nil
}
