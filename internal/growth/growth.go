// Package growth owns the RSS-growth engine: a window of a live process's
// page faults (sampled) and memory syscalls (every one, by the eBPF
// program or perf's tracepoints), each charged to its call stack and to
// the memory class it touched (main heap, each arena's heaps, mmapped
// chunks, other anonymous memory, stacks, files), with the process's RSS
// before and after. Nothing is placed in or written to the process. The
// kernel interface is internal/perf's; what glibc's heap is, internal/heap
// and internal/glibc say; the profile is stackprof's. inspect.Growth is the
// use case that opens the process and hands it here.
package growth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/perf"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/unwind"
)

// Options say how long and how finely to watch.
type Options struct {
	// Duration is the window; it ends earlier when ctx is done.
	Duration time.Duration
	// Period: one fault sample every Period page faults
	// (DefaultFaultPeriod when 0).
	Period uint64
	// StackSize is the bytes of stack copied per fault sample
	// (DefaultFaultStack when 0).
	StackSize uint32
	// RingPages per CPU (perf.DefaultRingPages when 0).
	RingPages int
	// SyscallStackSize is the stack copied per memory syscall recorded
	// by perf's tracepoints (DefaultSyscallStack when 0): every call is recorded,
	// so its copy is most of the cost to a process that maps in a loop.
	SyscallStackSize uint32
	// Tracepoints records the memory syscalls with perf's syscall
	// tracepoints, a perf sample and a whole stack copy each, instead of
	// the eBPF program (perf.Calls); it is the way taken where the
	// kernel refuses eBPF.
	Tracepoints bool
	// Note receives what the window does as it goes (nil drops it).
	Note func(string)
}

// DefaultFaultPeriod is one fault sample in 16: about 64 KiB of memory
// touched per sample.
const DefaultFaultPeriod = 16

// DefaultFaultStack is the stack copied per fault sample: 16 KiB. With
// 8 KiB, MariaDB's faults on deep paths (DROP DATABASE, a thread's stack
// growing) were cut short and often over before the thread's stack was
// read to complete them: under mariadb-slap 5 runs in 6 had 95% or more of
// growth's samples reach their thread's first frame (92.7-97.3%); with
// 16 KiB, 13 in 14 (97.4-99.3%; the 14th, 77.0%, one CREATE TABLE LIKE
// deeper than any copy). The larger copy costs a process touching
// new pages 1% more (bench/growth/paired.sh, TARGET=touch, six pairs:
// 2,028 against 2,048 ns a page, 1,775 with no window). A fault sample
// is one fault in DefaultFaultPeriod; calls have copies of their own
// (perf.Calls).
const DefaultFaultStack = 16 << 10

// DefaultSyscallStack is the stack copied per memory syscall recorded by
// perf's tracepoints: 8 KiB as for faults made a process mapping and
// unmapping 64 KiB in a loop run 3.5 times slower; most stacks from a
// syscall to the code that asked for the memory fit in less.
const DefaultSyscallStack = 8192

// drainEvery is how often the rings are read, as leaks reads its ring.
const drainEvery = 100 * time.Millisecond

// streamQueue bounds the samples read from the rings and not yet unwound.
const streamQueue = 64 << 20

// stopPatience bounds the unwinding of what is queued once the window is
// interrupted.
const stopPatience = 2 * time.Second

// The syscalls traced. Their exits are traced where the result matters:
// the address mmap and mremap chose, the break brk set.
var growthSyscalls = []string{"mmap", "munmap", "mremap", "brk", "madvise", "mprotect"}

var withExit = map[string]bool{"mmap": true, "mremap": true, "brk": true}

// syscallNrs are the traced syscalls' numbers on x86_64, for the eBPF
// program, which sees numbers; syscallNames the other way.
var (
	syscallNrs = map[string]int{"mmap": unix.SYS_MMAP, "munmap": unix.SYS_MUNMAP, "mremap": unix.SYS_MREMAP,
		"brk": unix.SYS_BRK, "madvise": unix.SYS_MADVISE, "mprotect": unix.SYS_MPROTECT}
	syscallNames = func() map[int]string {
		m := map[int]string{}
		for name, nr := range syscallNrs {
			m[nr] = name
		}
		return m
	}()
)

// syscallArgs name each traced syscall's arguments in order, as its
// sys_enter tracepoint's fields.
var syscallArgs = map[string][]string{
	"mmap":     {"addr", "len", "prot", "flags", "fd", "off"},
	"munmap":   {"addr", "len"},
	"mremap":   {"addr", "old_len", "new_len", "flags", "new_addr"},
	"brk":      {"brk"},
	"madvise":  {"start", "len_in", "behavior"},
	"mprotect": {"start", "len", "prot"},
}

// tpArgs reads a syscall's arguments from its sys_enter tracepoint's raw
// record.
func tpArgs(tp *perf.Tracepoint, name string, raw []byte) (args [6]uint64) {
	for i, f := range syscallArgs[name] {
		args[i] = tp.Uint(raw, f)
	}
	return args
}

// Linux's values, the same on every architecture arenactl supports.
const (
	madvDontneed = 4
	madvFree     = 8
	madvRemove   = 9
	mapShared    = 0x01
	mapFixed     = 0x10
	mapStack     = 0x20000
	mapAnonymous = 0x20
)

// Input is what a window watches: the process, observed only; its heap
// where its allocator is glibc's (nil: its heaps are not told apart by
// arena, NoArenas says why); the objects it has mapped.
type Input struct {
	Target   live.Observed
	Libc     report.LibcInfo
	Heap     *heap.Heap
	NoArenas string
	Modules  *module.Table
}

// Watch watches a process's page faults and memory syscalls over the
// window, with the kernel's perf events (nothing is placed in or written
// to the process), and charges them to call stacks and memory classes.
func Watch(ctx context.Context, in Input, o Options) (_ *report.Growth, err error) {
	if o.Period == 0 {
		o.Period = DefaultFaultPeriod
	}
	if o.StackSize == 0 {
		o.StackSize = DefaultFaultStack
	}
	if o.SyscallStackSize == 0 {
		o.SyscallStackSize = DefaultSyscallStack
	}
	t := in.Target
	// Every file of the process is read through its /proc directory held
	// since it was opened: a process that exits in the window and whose
	// pid is given to another is never read in its place.
	proc := t.Proc()
	pid := t.Process().Pid
	g := &report.Growth{Pid: pid, Exe: t.Process().Exe, Period: o.Period, PageSize: uint64(os.Getpagesize()), Libc: in.Libc, NoArenas: in.NoArenas}
	w := &growthWatch{t: t, g: g, h: in.Heap, pending: map[int]pendingCall{}, exits: map[int][]perf.Sample{},
		arenaOf: map[uint64]uint64{}, resident: map[uint64]float64{}, chunkCache: map[[2]uint64][][2]uint64{}, noChunks: map[[2]uint64]bool{}, acc: map[accKey]int{},
		partialIdx: map[string]int{}, tap: make([]float64, len(report.GrowthTypes)), rssLast: map[int64]int64{}, fileFault: map[int]fileFault{}}
	if w.h != nil {
		w.heapMax, _ = w.h.HeapMax()
	}
	mods := in.Modules
	u, sym := unwind.New(mods), symbolize.New(mods)
	u.Prepare()
	sym.Prepare()
	if o.Note != nil {
		for _, k := range sym.SkippedDWARF() {
			o.Note(k.String())
		}
	}
	// The tables are kept for the whole window: the collector's limit
	// follows them, with room for the samples queued (budget.Hold).
	budget.Hold()
	w.mods, w.u, w.sym = mods, u, sym
	w.stacks = stackprof.NewStacks(u, sym)
	w.stacks.SetMemory(w.readStack) // cut stacks completed where the thread is still in them (early.go)
	blocked := stackprof.NewBlockedStacks(t, w.stacks.Learn)
	blocked.Read()
	cut := 0

	if err := perf.Probe(pid); err != nil {
		return nil, err
	}
	events := []perf.Event{{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS,
		Period: o.Period, Stack: true, Addr: true}}
	// The memory syscalls: by the eBPF program, a short stack copy for
	// most calls; else by perf's tracepoints, a whole copy each.
	var calls *perf.Calls
	rssTP, rssWhy := rssStat()
	if !o.Tracepoints {
		var nrs []int
		for _, sc := range growthSyscalls {
			nrs = append(nrs, syscallNrs[sc])
		}
		calls, err = perf.OpenCallsProc(proc, perf.CallOptions{Nrs: nrs, WholeNrs: []int{unix.SYS_BRK}, RSS: rssTP != nil})
		if err != nil {
			g.NoBPF = err.Error()
			if o.Note != nil {
				o.Note("eBPF refused (" + err.Error() + "): memory syscalls are recorded by perf's tracepoints, which costs a process that maps in a loop more")
			}
		} else {
			defer calls.Close()
			g.CallsBy = "eBPF"
			if ok, why := calls.RSS(); ok {
				// The program counts the file pages: no perf
				// tracepoint on every fault.
				w.rssBPF, rssTP = true, nil
			} else if rssTP != nil && o.Note != nil {
				o.Note("file pages are counted by perf's kmem:rss_stat tracepoint, which costs every fault of the process more (" + why + ")")
			}
		}
	}
	if calls == nil {
		g.CallsBy = "tracepoints"
		names := []string{}
		for _, sc := range growthSyscalls {
			names = append(names, "syscalls/sys_enter_"+sc)
			if withExit[sc] {
				names = append(names, "syscalls/sys_exit_"+sc)
			}
		}
		tps, err := perf.Tracepoints(names...)
		if err != nil {
			return nil, err
		}
		for i := range tps {
			tp := &tps[i]
			enter := tp.Name[:len("sys_enter")] == "sys_enter"
			events = append(events, perf.Event{Name: tp.Group + ":" + tp.Name, Type: unix.PERF_TYPE_TRACEPOINT, Config: tp.ID,
				Period: 1, Stack: enter, Raw: true, StackSize: o.SyscallStackSize})
			w.tps = append(w.tps, tp)
		}
	}
	if rssTP != nil {
		w.rssTP, w.rssEvent = rssTP, len(events)
		events = append(events, perf.Event{Name: "kmem:rss_stat", Type: unix.PERF_TYPE_TRACEPOINT, Config: rssTP.ID,
			Period: 1, Stack: true, Raw: true, Filter: rssFilter})
	}
	if ru, err := maps.ReadRollupProc(proc); err == nil {
		g.RSSBefore = ru.Rss
	} else {
		return nil, t.Explain(fmt.Errorf("process %d: reading smaps_rollup: %w", pid, err))
	}
	if pm, err := proc.OpenPagemap(); err == nil {
		w.pm = pm
		defer pm.Close()
	}
	if o.RingPages == 0 {
		o.RingPages = ringPages()
	}
	s, err := perf.OpenProc(proc, events, perf.Options{StackSize: o.StackSize, RingPages: o.RingPages})
	var pe *perf.Error
	if err != nil && w.rssEvent > 0 && errors.As(err, &pe) && pe.Kind == errkind.ErrNoPerf {
		// A kernel whose rss_stat takes no filter (or has other
		// fields): file pages are counted a page a fault, as said.
		rssWhy = err.Error()
		events = events[:w.rssEvent]
		w.rssTP, w.rssEvent = nil, 0
		s, err = perf.OpenProc(proc, events, perf.Options{StackSize: o.StackSize, RingPages: o.RingPages})
	}
	if err != nil {
		if errors.Is(err, errkind.ErrNoProcess) {
			return nil, t.Explain(err)
		}
		return nil, err
	}
	defer s.Close()
	g.NoRSSStat = rssWhy
	switch {
	case w.rssBPF:
		g.RSSStatBy = "eBPF"
	case w.rssEvent > 0:
		g.RSSStatBy = "tracepoint"
	}
	if g.RSSStatBy != "" {
		// The counters as the events found them: each record's size
		// less the last one is what its fault mapped.
		w.rssLast = rssCounters(proc)
	}
	if calls != nil {
		// Attached once the events are open, as they are: a call
		// before is in RSSBefore and in the first read of the mappings.
		s.AddCalls(calls)
		if err := calls.Attach(); err != nil {
			return nil, err
		}
	}
	// The mappings and the break as they are once the events are open:
	// every brk after is seen (one between is in both, and changes
	// nothing).
	w.snap()
	if len(w.snaps) == 0 {
		return nil, t.Explain(fmt.Errorf("process %d: its mappings cannot be read", pid))
	}
	w.prev, w.cur = w.snaps[0].ms, w.snaps[0].ms
	w.brk = heapEnd(w.cur)
	g.Start = time.Now()
	g.Threads = s.Threads()
	if o.Note != nil {
		until := "until interrupted (Ctrl-C)"
		if o.Duration > 0 {
			until = "for " + o.Duration.String() + " (Ctrl-C ends it earlier)"
		}
		threads := fmt.Sprintf("%d threads", g.Threads)
		if g.Threads == 1 {
			threads = "1 thread"
		}
		o.Note(fmt.Sprintf("perf events are open on %s (and the threads they create); the window is open %s", threads, until))
	}
	end := g.Start.Add(o.Duration)
	if o.Duration > 0 {
		w.end = end
	}
	lastScan := g.Start
	early := &earlyReader{w: w, copy: int(o.StackSize &^ 7)}
	early.setMappings(w.cur)
	w.early = early
	stream := s.StreamEarly(streamQueue, early.read)
	defer stream.Stop()
	tick := time.NewTicker(drainEvery / 2)
	defer tick.Stop()
	for {
		stop := false
		select {
		case <-ctx.Done():
			stop = true
		case now := <-tick.C:
			stop = o.Duration > 0 && !now.Before(end)
		}
		if stop {
			stream.Stop()
			w.stacks.SampledBefore(time.Now())
			w.drain(ctx, stream.Take())
			stream.Recycle()
			break
		}
		// What Take gives was all sampled before now: a stack read kept
		// from an earlier drain completes none of it (stackprof's
		// RecentReads).
		w.stacks.SampledBefore(time.Now())
		w.drain(ctx, stream.Take())
		stream.Recycle()
		if n := w.stacks.Cut(); n > cut {
			cut = n
			blocked.Read() // as leaks does
		}
		if time.Since(lastScan) >= time.Second {
			lastScan = time.Now()
			was := mods.Modules()
			mods.Refresh()
			if !slices.Equal(mods.Modules(), was) {
				u.Forget()
				sym.Forget()
			}
		}
	}
	g.Duration = time.Since(g.Start)
	g.Interrupted = ctx.Err() != nil
	g.Lost, g.Throttled = s.Lost+stream.Dropped()+s.Unknown+w.skipped, s.Throttled
	if calls != nil {
		g.Lost += calls.Lost()
	}
	if ru, err := maps.ReadRollupProc(proc); err == nil {
		g.RSSAfter, g.Measured = ru.Rss, true
	}
	w.resolve(true)
	w.completeShort()
	g.Incomplete, g.Truncated = w.stacks.Incomplete()
	g.Incomplete += g.ShortLeft
	g.Truncated += g.ShortLeft
	g.Profile = w.profile()
	return g, nil
}

// growthWatch is one run's state: the process's mappings as last read and
// the ones before, syscall entries waiting for their exits, and the values
// so far by site and class.
type growthWatch struct {
	t live.Observed
	// early.go's: the reader, and the sample being unwound's early read.
	early     *earlyReader
	later     []byte
	laterAddr uint64
	g         *report.Growth
	h         *heap.Heap
	// heapMax: a thread arena's heaps' size and alignment (0: unknown).
	heapMax uint64
	pm      *procfs.Pagemap
	mods    *module.Table
	u       *unwind.Unwinder
	sym     *symbolize.Symbolizer
	stacks  *stackprof.Stacks
	tps     []*perf.Tracepoint // events[i+1]
	// rssTP is kmem:rss_stat, events[rssEvent] (0: not recorded);
	// rssLast the last size of each counter it reported, by member;
	// fileFault the class of the last sampled fault in memory backed by
	// a file (or shared) by site, which the rss_stat records of the
	// same stack are charged to.
	rssTP     *perf.Tracepoint
	rssEvent  int
	rssBPF    bool // the calls' program records the counters instead
	rssLast   map[int64]int64
	fileFault map[int]fileFault

	// snaps are the last reads of the mappings, oldest first, with when
	// each read began and ended. For each sample, prev is the last read
	// ended before it (the memory as the call found it) and cur the first
	// begun after it (what it became), or the last one.
	snaps     []mapsSnap
	prev, cur []maps.Mapping
	// recent are the mappings mmap made since prev was read: a munmap of
	// one made since is found there.
	recent       []recentMapping
	recentSorted []maps.Mapping // recentMaps's, until recent changes
	recentDirty  bool
	// stopBy: once the window is interrupted, the unwinding of what is
	// queued ends by then; skipped counts the samples it left.
	stopBy  time.Time
	skipped uint64
	end     time.Time // the window's end, zero for none
	// mmapLog are the last mmaps, for unresolved calls: those that found
	// their memory in no table (the mmap that made it not read yet).
	mmapLog    []recentMapping
	unresolved []unresolvedCall
	// resident estimates each mapping's resident bytes, by its start: its
	// Rss when the window opened, plus the bytes faults touched since,
	// less what was given back or unmapped.
	resident map[uint64]float64
	now      uint64 // the time of the sample being charged
	brk      uint64
	arenaOf  map[uint64]uint64 // heap start -> its arena (0: none found)
	// chunkCache: an anonymous mapping's mmapped chunks, by its extent,
	// read once per drain.
	chunkCache map[[2]uint64][][2]uint64
	// noChunks: anonymous mappings, by extent, found to hold no mmapped
	// chunk; kept across drains.
	noChunks map[[2]uint64]bool

	pending map[int]pendingCall   // by thread: an entry whose exit has not come
	exits   map[int][]perf.Sample // by thread: exits that came before their entry

	acc   map[accKey]int
	sites []accSite
	// partials are the short stacks of calls to complete, by index
	// (accKey.site -1 - index), and by key; completion has the whole ones,
	// with what each call was charged: tap, while whole is the call being
	// charged.
	partials   []partialStack
	partialIdx map[string]int
	completion stackprof.Completion
	tap        []float64
	whole      *wholeCall
}

type mapsSnap struct {
	start, end uint64 // perf.Now before and after the read
	ms         []maps.Mapping
}

type recentMapping struct {
	at uint64
	m  maps.Mapping
}

// maxSnaps bounds the reads kept: a sample is never read from the rings
// more than a few drains after it was taken.
const maxSnaps = 16

// snap reads the mappings again and keeps the read.
func (w *growthWatch) snap() {
	start := perf.Now()
	refresh := w.t.RefreshRanges
	first := len(w.snaps) == 0
	if first {
		// The first read has the smaps counters: what each mapping
		// held when the window opened.
		refresh = w.t.Refresh
	}
	if err := refresh(); err != nil {
		return
	}
	ms := w.t.Mappings()
	if first {
		for _, m := range ms {
			if m.Rss > 0 {
				w.resident[m.Start] += float64(m.Rss)
			}
		}
	}
	if w.h != nil {
		w.h.Unclaim(ms)
	}
	w.snaps = append(w.snaps, mapsSnap{start: start, end: perf.Now(), ms: ms})
	if w.early != nil {
		w.early.setMappings(ms)
	}
	if len(w.snaps) > maxSnaps {
		w.snaps = w.snaps[len(w.snaps)-maxSnaps:]
	}
}

// at sets prev, cur and recent for a sample taken at t.
func (w *growthWatch) at(t uint64) {
	if len(w.snaps) == 0 {
		return
	}
	p, c := 0, len(w.snaps)-1
	for i, s := range w.snaps {
		if s.end <= t {
			p = i
		}
	}
	for i := len(w.snaps) - 1; i >= 0; i-- {
		if w.snaps[i].start >= t {
			c = i
		}
	}
	w.prev, w.cur = w.snaps[p].ms, w.snaps[c].ms
	since := w.snaps[p].start
	kept := w.recent[:0]
	for _, r := range w.recent {
		if r.at >= since {
			kept = append(kept, r)
		}
	}
	if len(kept) != len(w.recent) {
		w.recentDirty = true
	}
	w.recent = kept
}

// recentMaps is recent as a sorted mapping list, made again only when
// recent changed.
func (w *growthWatch) recentMaps() []maps.Mapping {
	if !w.recentDirty {
		return w.recentSorted
	}
	w.recentDirty = false
	w.recentSorted = w.sortRecent()
	return w.recentSorted
}

// forget drops from recent the mappings munmap took whole, so that it
// stays short in a process that maps and unmaps in a loop.
func (w *growthWatch) forget(addr, n uint64) {
	kept := w.recent[:0]
	for _, r := range w.recent {
		if r.m.Start >= addr && r.m.End <= addr+n {
			w.recentDirty = true
			continue
		}
		kept = append(kept, r)
	}
	w.recent = kept
}

func (w *growthWatch) sortRecent() []maps.Mapping { return latestMappings(w.recent) }

// latestMappings is the mappings made at the times rs gives as one list,
// sorted, without overlaps: at each address the one made there last, and
// the parts of earlier ones that later ones leave uncovered (madeBefore
// takes it over a range). Sorted by start alone, a mapping
// overlapping another took its place whole whichever was made later: an
// arena heap reserved where an earlier reservation's trimmed ends had
// been could be classed by the earlier one.
func latestMappings(rs []recentMapping) []maps.Mapping {
	order := make([]int32, len(rs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(rs[a].m.Start, rs[b].m.Start) })
	// later: rs[a] was made after rs[b] (in rs's order, at one time).
	later := func(a, b int32) bool { return rs[a].at > rs[b].at || rs[a].at == rs[b].at && a > b }
	out := make([]maps.Mapping, 0, len(rs))
	src := make([]int32, 0, len(rs)) // the mapping of rs each piece of out is of
	var over []int32
	var cuts []uint64
	for _, r := range order {
		m := &rs[r].m
		// The pieces so far are sorted and apart, so sorted by end too:
		// the ones r overlaps are among the last few, whose ends pass
		// its start (each is of a mapping starting at or below r's).
		i := len(out)
		for i > 0 && out[i-1].End > m.Start {
			i--
		}
		if i == len(out) {
			out, src = append(out, *m), append(src, r)
			continue
		}
		// Painted again from r and what those pieces are of, each
		// piece of address taking the last made of those covering it.
		over = append(over[:0], src[i:]...)
		cuts = append(cuts[:0], m.Start, m.End)
		for j := i; j < len(out); j++ {
			cuts = append(cuts, out[j].Start, out[j].End)
		}
		overAt := slices.Clone(out[i:])
		out, src = out[:i], src[:i]
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for k := 0; k+1 < len(cuts); k++ {
			lo, hi := cuts[k], cuts[k+1]
			from := int32(-1)
			if m.Start <= lo && hi <= m.End {
				from = r
			}
			for j, q := range overAt {
				if q.Start <= lo && hi <= q.End && (from < 0 || later(over[j], from)) {
					from = over[j]
				}
			}
			if from < 0 {
				continue
			}
			if n := len(out); n > 0 && src[n-1] == from && out[n-1].End == lo {
				out[n-1].End = hi
				continue
			}
			p := rs[from].m
			if p.Inode != 0 {
				p.Offset += lo - p.Start // a file's pages: the offset moves with the start
			}
			p.Start, p.End = lo, hi
			out, src = append(out, p), append(src, from)
		}
	}
	return out
}

type pendingCall struct {
	smp  perf.Sample
	site int
}

type accKey struct {
	site         int
	class, arena string
}

type accSite struct {
	key    accKey
	values []float64
}

// drain handles one read of the rings: the mappings are read again (those
// read before stay, for calls that unmapped what the new ones lack), then
// every sample is charged.
func (w *growthWatch) drain(ctx context.Context, batches [][]perf.Sample) {
	if len(batches) == 0 {
		return
	}
	// Read after the samples were taken: every one has a read after it.
	w.snap()
	clear(w.chunkCache)
	for i, smps := range batches {
		if w.drainBatch(ctx, smps) {
			for _, rest := range batches[i+1:] {
				w.skipped += uint64(len(rest))
			}
			break
		}
	}
	w.resolve(false)
}

// drainBatch charges one read's samples; true once the window's end or
// Ctrl-C has waited long enough for the rest, which is counted skipped.
func (w *growthWatch) drainBatch(ctx context.Context, smps []perf.Sample) bool {
	for i := range smps {
		// Ctrl-C is answered within a bounded time however far the
		// unwinding is behind: what is left then is counted as lost.
		if i%256 == 0 && (ctx.Err() != nil || !w.end.IsZero() && time.Now().After(w.end)) {
			if w.stopBy.IsZero() {
				w.stopBy = time.Now().Add(stopPatience)
			}
			if time.Now().After(w.stopBy) {
				w.skipped += uint64(len(smps) - i)
				return true
			}
		}
		smp := &smps[i]
		w.at(smp.Time)
		w.now = smp.Time
		if smp.RSS.Set {
			w.rssChange(smp, int64(smp.RSS.Member), smp.RSS.Pages*int64(w.g.PageSize), true)
			continue
		}
		if smp.Event < 0 {
			w.call(smp)
			continue
		}
		if smp.Event == 0 {
			w.fault(smp)
			continue
		}
		if smp.Event == w.rssEvent {
			w.rss(smp)
			continue
		}
		tp := w.tps[smp.Event-1]
		if tp.Name[:len("sys_exit")] == "sys_exit" {
			w.exit(tp, smp)
			continue
		}
		w.enter(tp, smp)
	}
	return false
}

// site unwinds a sample's stack into its site.
func (w *growthWatch) site(smp *perf.Sample) int {
	w.later, w.laterAddr = smp.Later, smp.LaterAddr
	si, _ := w.stacks.Site(w.stackOf(smp))
	w.later = nil
	return si
}

// stackOf is where a sample's unwinding starts and the stack it reads,
// bounded by the mapping that holds it.
func (w *growthWatch) stackOf(smp *perf.Sample) (unwind.Start, unwind.Stack) {
	sp := smp.Regs.SPOf(arch.Host())
	st := unwind.Stack{Addr: sp, Data: smp.Stack}
	if m, ok := maps.Find(w.cur, sp); ok {
		st.End = m.End
	} else if m, ok := maps.Find(w.prev, sp); ok {
		st.End = m.End
	}
	return unwind.Start{Regs: smp.Regs, HaveCalleeSaved: true}, st
}

func (w *growthWatch) add(site int, class, arena string, typ int, v float64) {
	if w.whole != nil {
		w.tap[typ] += v
	}
	k := accKey{site, class, arena}
	i, ok := w.acc[k]
	if !ok {
		i = len(w.sites)
		w.acc[k] = i
		w.sites = append(w.sites, accSite{key: k, values: make([]float64, len(report.GrowthTypes))})
	}
	w.sites[i].values[typ] += v
}

func (w *growthWatch) fault(smp *perf.Sample) {
	if !smp.HaveRegs {
		return
	}
	w.g.FaultSamples++
	si := w.site(smp)
	class, arena := w.classify(smp.Addr, w.cur, w.prev, w.recentMaps())
	if w.ownStack(smp, smp.Addr) {
		class = maps.ClassThreadStack.String()
	}
	n := float64(w.g.Period)
	bytes := n * float64(w.g.PageSize)
	for _, ms := range [][]maps.Mapping{w.cur, w.prev, w.recentMaps()} {
		if m, ok := maps.Find(ms, smp.Addr); ok {
			if w.g.RSSStatBy != "" && fileBacked(m) {
				// A fault here maps as many pages as the page cache
				// holds around it (fault-around, a large folio): 16
				// to 512 where this sample stood for one. The pages
				// are counted by the rss_stat records of the faults
				// (rss); the sample names their class and mapping.
				w.fileFault[si] = fileFault{class: class, arena: arena, start: m.Start}
				w.g.ExactSamples++
				w.add(si, class, arena, report.GrowthFaults, n)
				w.add(si, class, arena, report.GrowthSamples, 1)
				return
			}
			w.resident[m.Start] += bytes
			break
		}
	}
	w.add(si, class, arena, report.GrowthTouched, bytes)
	w.add(si, class, arena, report.GrowthNet, bytes)
	w.add(si, class, arena, report.GrowthFaults, n)
	w.add(si, class, arena, report.GrowthSamples, 1)
}

// fileFault is where a site's last sampled fault in a file's pages was:
// its class, arena and mapping's start.
type fileFault struct {
	class, arena string
	start        uint64
}

// The rss_stat counters (include/linux/mm_types_task.h, MM_FILEPAGES and
// MM_SHMEMPAGES) and the filter that keeps only their changes made by the
// process itself: its faults, and its own unmapping. Anonymous faults map
// a page each and are counted by the fault samples; their records would
// cost every one of them a record.
const (
	mmFilePages  = 0
	mmShmemPages = 3
	rssFilter    = "curr == 1 && (member == 0 || member == 3)"
)

// rssStat is the kmem:rss_stat tracepoint, which reports in the faulting
// task each change of a process's page counters with the counter's new
// value (Linux 5.5, include/trace/events/kmem.h; exact since 6.2, when it
// began summing the per-CPU counters), or why it cannot be used.
func rssStat() (*perf.Tracepoint, string) {
	tps, err := perf.Tracepoints("kmem/rss_stat")
	if err != nil {
		return nil, err.Error()
	}
	for _, f := range []string{"curr", "member", "size"} {
		if _, ok := tps[0].Fields[f]; !ok {
			return nil, "kmem:rss_stat has no field " + f
		}
	}
	return &tps[0], ""
}

// rssCounters reads the process's file and shmem page counters from its
// status (kB), by member.
func rssCounters(proc *procfs.Proc) map[int64]int64 {
	out := map[int64]int64{}
	b, err := os.ReadFile(proc.Path("status"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "RssFile":
			out[mmFilePages] = n << 10
		case "RssShmem":
			out[mmShmemPages] = n << 10
		}
	}
	return out
}

// fileBacked says whether a fault in m maps pages of the page cache (a
// file's, or shared memory's), counted by rss_stat's file and shmem
// counters.
func fileBacked(m maps.Mapping) bool {
	switch m.Class {
	case maps.ClassFile, maps.ClassExecutable, maps.ClassSharedLib:
		return true
	}
	return len(m.Perms) > 3 && m.Perms[3] == 's'
}

// rss charges what one rss_stat record says a fault of the process
// mapped: its counter's new value less the last one seen, to the stack
// the record was taken with (the fault's), in the class of the last
// sampled fault in file pages from the same stack; "file" before any.
// (The class of the thread's last such fault charged a file's first
// faults, 4 of its 8 MiB, to the library whose code had faulted before.)
// A fall (unmapping, or pages the kernel reclaimed meanwhile) is the
// syscalls' to charge.
func (w *growthWatch) rss(smp *perf.Sample) {
	tp := w.rssTP
	w.rssChange(smp, tp.Int(smp.Raw, "member"), tp.Int(smp.Raw, "size"), tp.Uint(smp.Raw, "curr") != 0)
}

// rssChange charges a counter's new size (bytes), as rss says; changes
// the process did not make itself (curr false) are left out.
func (w *growthWatch) rssChange(smp *perf.Sample, member, size int64, curr bool) {
	if !curr || member != mmFilePages && member != mmShmemPages {
		return
	}
	prev, ok := w.rssLast[member]
	w.rssLast[member] = size
	if !ok || size <= prev || !smp.HaveRegs {
		return
	}
	d := float64(size - prev)
	si := w.site(smp)
	ff, ok := w.fileFault[si]
	if !ok {
		ff.class = maps.ClassFile.String()
	}
	if ff.start != 0 {
		w.resident[ff.start] += d
	}
	w.add(si, ff.class, ff.arena, report.GrowthTouched, d)
	w.add(si, ff.class, ff.arena, report.GrowthNet, d)
}

// enter handles a syscall's entry: charged now when its result does not
// matter, else kept for its exit.
func (w *growthWatch) enter(tp *perf.Tracepoint, smp *perf.Sample) {
	if !smp.HaveRegs {
		return
	}
	si := w.site(smp)
	name := tp.Name[len("sys_enter_"):]
	if withExit[name] {
		// An exit of this thread read before its entry (another CPU's
		// ring, read first) is matched now.
		if list := w.exits[smp.Tid]; len(list) > 0 {
			for i, e := range list {
				if e.Time >= smp.Time {
					w.exits[smp.Tid] = append(list[:i], list[i+1:]...)
					w.complete(name, pendingCall{*smp, si}, w.tpOf(e.Event), &e)
					return
				}
			}
		}
		w.pending[smp.Tid] = pendingCall{kept(smp), si}
		return
	}
	w.charge(name, tpArgs(tp, name, smp.Raw), 0, si, smp, smp.Time)
}

// call charges a call the eBPF program recorded: whole calls to their
// stack's site, short ones to their short stack, completed at the end
// (completeShort).
func (w *growthWatch) call(smp *perf.Sample) {
	name := syscallNames[smp.Call.Nr]
	if name == "" || !smp.HaveRegs {
		return
	}
	start, st := w.stackOf(smp)
	if smp.Call.Short {
		si, key := w.stacks.Short(start, st)
		if key != "" {
			w.g.ShortCalls++
			i, ok := w.partialIdx[key]
			if !ok {
				i = len(w.partials)
				w.partialIdx[key] = i
				w.partials = append(w.partials, partialStack{site: si, key: key})
			}
			w.partials[i].calls++
			si = -1 - i
		}
		w.charge(name, smp.Call.Args, smp.Call.Ret, si, smp, smp.Time)
		return
	}
	si, key := w.stacks.Whole(start, st)
	// A call copied whole for what it was (brk, a large size) never
	// goes short: no short stack may come from its.
	if smp.Call.Forced {
		w.charge(name, smp.Call.Args, smp.Call.Ret, si, smp, smp.Time)
		return
	}
	// What the call is charged, by type, for the shares of the short
	// calls under its stack (and what it is charged late, by resolve).
	clear(w.tap)
	w.whole = &wholeCall{key: key, w: math.Ldexp(1, smp.Call.Thin) - 1}
	w.charge(name, smp.Call.Args, smp.Call.Ret, si, smp, smp.Time)
	w.completion.Whole(key, si, w.whole.w, w.tap)
	w.whole = nil
}

// partialStack is a short stack: its key, its own site and its calls.
type partialStack struct {
	key         string
	site, calls int
}

// completeShort shares each short stack's values out among the whole
// stacks that begin as it does (stackprof's Completion); a short stack
// none begins as keeps them, at its own truncated site.
func (w *growthWatch) completeShort() {
	if len(w.partials) == 0 {
		return
	}
	keys := make([]string, len(w.partials))
	for i, p := range w.partials {
		keys[i] = p.key
	}
	shares := w.completion.Shares(keys, len(report.GrowthTypes))
	var short []accSite
	kept := w.sites[:0]
	for _, s := range w.sites {
		if s.key.site < 0 {
			short = append(short, s)
		} else {
			kept = append(kept, s)
		}
	}
	w.sites = kept
	clear(w.acc)
	for i, s := range w.sites {
		w.acc[s.key] = i
	}
	for i, p := range w.partials {
		if shares[i] != nil {
			w.g.Completed += p.calls
		} else {
			w.g.ShortLeft += p.calls
		}
	}
	for _, s := range short {
		i := -1 - s.key.site
		for typ, v := range s.values {
			if v == 0 {
				continue
			}
			to := []stackprof.Share{{Site: w.partials[i].site, Frac: 1}}
			if shares[i] != nil && shares[i][typ] != nil {
				to = shares[i][typ]
			}
			for _, sh := range to {
				w.add(sh.Site, s.key.class, s.key.arena, typ, v*sh.Frac)
			}
		}
	}
}

// charge charges one memory syscall, its arguments and result known, to
// site si; done is when it returned.
func (w *growthWatch) charge(name string, args [6]uint64, ret int64, si int, smp *perf.Sample, done uint64) {
	w.g.Calls++
	failed := ret < 0 && ret > -4096
	switch name {
	case "munmap":
		addr, n := args[0], pageUp(args[1])
		w.chargeRange(si, addr, n, report.GrowthUnmapped, true, w.prev, w.recentMaps())
		w.add(si, w.classOf(addr, w.prev, w.recentMaps(), w.cur), "", report.GrowthCalls, 1)
		w.forget(addr, n)
	case "madvise":
		addr, n, adv := args[0], pageUp(args[1]), int64(args[2])
		class, arena := w.classify(addr, w.prev, w.recentMaps(), w.cur)
		if w.ownStack(smp, addr) {
			class = maps.ClassThreadStack.String()
		}
		if adv == madvDontneed || adv == madvFree || adv == madvRemove {
			w.add(si, class, arena, report.GrowthGivenBack, float64(n))
			// An exiting thread's glibc advises away all of its stack
			// below what it uses, almost all of it never touched: that
			// is no RSS given back.
			if class != maps.ClassThreadStack.String() {
				w.add(si, class, arena, report.GrowthNet, -w.takeRange(addr, n, w.prev, w.recentMaps(), w.cur))
			}
		}
		w.add(si, class, arena, report.GrowthCalls, 1)
	case "mprotect":
		addr, n, prot := args[0], pageUp(args[1]), args[2]
		if prot != 0 {
			// Only what was inaccessible before (a heap's reservation);
			// a mapping made since the last read was, all of it.
			w.chargeRange(si, addr, n, report.GrowthMapped, false, w.prev, w.recentMaps())
		} else {
			w.chargeRange(si, addr, n, report.GrowthUnmapped, true, w.prev, w.recentMaps())
		}
		class, arena := w.classify(addr, w.cur, w.prev)
		w.add(si, class, arena, report.GrowthCalls, 1)
	case "mmap":
		n, prot, flags := pageUp(args[1]), args[2], args[3]
		addr := uint64(ret)
		class, arena := w.classify(addr, w.cur, w.prev)
		if class == "gone" {
			// Unmapped before the next read: its flags tell.
			switch {
			case flags&mapStack != 0:
				class = maps.ClassThreadStack.String()
			case flags&mapAnonymous != 0:
				class = maps.ClassAnon.String()
			default:
				class = maps.ClassFile.String()
			}
		}
		w.add(si, class, arena, report.GrowthCalls, 1)
		switch {
		case failed:
		case prot != 0:
			w.add(si, class, arena, report.GrowthMapped, float64(n))
		case flags&mapFixed != 0:
			// PROT_NONE over memory in use: glibc shrinking a heap.
			w.chargeRange(si, addr, n, report.GrowthUnmapped, true, w.prev, w.recentMaps())
		}
		if !failed {
			// glibc maps a thread's stack with MAP_STACK.
			mclass := maps.ClassAnon
			if flags&mapStack != 0 {
				mclass = maps.ClassThreadStack
			}
			if flags&mapAnonymous == 0 {
				mclass = maps.ClassFile
			}
			perms := "---p"
			if prot != 0 {
				perms = "rw-p"
			}
			if flags&mapShared != 0 {
				perms = perms[:3] + "s"
			}
			w.remember(done, maps.Mapping{Start: addr, End: addr + n, Perms: perms, Class: mclass})
		}
	case "mremap":
		oldN, newN := pageUp(args[1]), pageUp(args[2])
		addr := uint64(ret)
		if failed {
			addr = args[0]
		}
		class, arena := w.classify(addr, w.cur, w.prev)
		w.add(si, class, arena, report.GrowthCalls, 1)
		switch {
		case failed:
		case newN > oldN:
			w.add(si, class, arena, report.GrowthMapped, float64(newN-oldN))
		case oldN > newN:
			w.add(si, class, arena, report.GrowthUnmapped, float64(oldN-newN))
			w.add(si, class, arena, report.GrowthNet, -float64(oldN-newN))
		}
	case "brk":
		nb := uint64(ret)
		class := maps.ClassMainHeap.String()
		w.add(si, class, mainArena, report.GrowthCalls, 1)
		if w.brk != 0 && nb > w.brk {
			w.add(si, class, mainArena, report.GrowthMapped, float64(nb-w.brk))
		} else if w.brk != 0 && nb < w.brk {
			w.add(si, class, mainArena, report.GrowthUnmapped, float64(w.brk-nb))
			w.add(si, class, mainArena, report.GrowthNet, -w.takeRange(nb, w.brk-nb, w.prev, w.recentMaps(), w.cur))
		}
		w.brk = nb
	}
}

// ownStack says whether addr is in the anonymous mapping that holds the
// sampled thread's own stack pointer: its stack, which the mappings show
// as a thread's only while one blocks in it (a short-lived thread is
// never seen so).
func (w *growthWatch) ownStack(smp *perf.Sample, addr uint64) bool {
	for _, ms := range [][]maps.Mapping{w.cur, w.prev, w.recentMaps()} {
		m, ok := maps.Find(ms, smp.Regs.SPOf(arch.Host()))
		if !ok {
			continue
		}
		if m.Class != maps.ClassAnon && m.Class != maps.ClassThreadStack {
			return false
		}
		if m.Contains(addr) {
			return true
		}
		// Or its guard page, right below it (where glibc's advice on
		// an exiting thread's stack begins).
		g, ok := maps.Find(ms, addr)
		return ok && g.End == m.Start && !g.Readable() && !g.Writable()
	}
	return false
}

// remember logs a mapping mmap made at t, for calls on it before the
// next read.
func (w *growthWatch) remember(t uint64, m maps.Mapping) {
	w.recent = append(w.recent, recentMapping{at: t, m: m})
	w.recentDirty = true
	w.mmapLog = append(w.mmapLog, recentMapping{at: t, m: m})
	if len(w.mmapLog) > maxLog {
		// Moved down in place: resliced, each append past the array's
		// end made a new one (of 0.3 KiB mappings), hundreds of MB in
		// a window on a process that maps in a loop.
		w.mmapLog = w.mmapLog[:copy(w.mmapLog, w.mmapLog[len(w.mmapLog)-maxLog/2:])]
	}
}

// maxLog bounds the mmaps remembered for calls resolved late.
const maxLog = 4096

// kept is a sample to keep past its drain: its raw fields copied out of
// the stream's memory, which is reused, its stack (unwound already)
// dropped.
func kept(smp *perf.Sample) perf.Sample {
	k := *smp
	k.Raw = append([]byte(nil), smp.Raw...)
	k.Stack = nil
	return k
}

func (w *growthWatch) tpOf(event int) *perf.Tracepoint { return w.tps[event-1] }

func (w *growthWatch) exit(tp *perf.Tracepoint, smp *perf.Sample) {
	name := tp.Name[len("sys_exit_"):]
	p, ok := w.pending[smp.Tid]
	if !ok || p.smp.Time > smp.Time {
		w.exits[smp.Tid] = append(w.exits[smp.Tid], kept(smp))
		return
	}
	delete(w.pending, smp.Tid)
	w.complete(name, p, tp, smp)
}

// complete charges a syscall whose entry and exit are both known.
func (w *growthWatch) complete(name string, p pendingCall, exitTP *perf.Tracepoint, exit *perf.Sample) {
	var enterTP *perf.Tracepoint
	for _, tp := range w.tps {
		if tp.Name == "sys_enter_"+name {
			enterTP = tp
		}
	}
	if enterTP == nil {
		return
	}
	w.charge(name, tpArgs(enterTP, name, p.smp.Raw), exitTP.Int(exit.Raw, "ret"), p.site, &p.smp, exit.Time)
}

// chargeRange charges the bytes of [addr, addr+n) that were accessible
// (accessible true) or not, by the mappings of the first table that holds
// any of them, each to its own class. With none, the call waits for the
// next drain's end: the mmap that made its memory may be in a ring read
// later (its entry on another CPU's ring).
func (w *growthWatch) chargeRange(site int, addr, n uint64, typ int, accessible bool, tables ...[]maps.Mapping) {
	if !w.chargeIn(site, addr, n, typ, accessible, tables...) {
		w.unresolved = append(w.unresolved, unresolvedCall{site: site, addr: addr, n: n, typ: typ, accessible: accessible, at: w.now,
			whole: w.whole})
	}
}

func (w *growthWatch) chargeIn(site int, addr, n uint64, typ int, accessible bool, tables ...[]maps.Mapping) bool {
	end := addr + n
	for _, ms := range tables {
		found := false
		i := sort.Search(len(ms), func(i int) bool { return ms[i].End > addr })
		for ; i < len(ms) && ms[i].Start < end; i++ {
			m := ms[i]
			found = true
			if (m.Readable() || m.Writable()) != accessible {
				continue
			}
			lo, hi := max(m.Start, addr), min(m.End, end)
			// The class as last read, which names what the memory became
			// (a thread's stack); the table's own where it is gone.
			class, arena := w.classify(lo, w.cur)
			if class == "gone" || m.Class == maps.ClassThreadStack {
				class, arena = w.classifyIn(m, lo)
			}
			w.add(site, class, arena, typ, float64(hi-lo))
			if typ == report.GrowthUnmapped {
				w.add(site, class, arena, report.GrowthNet, -w.take(m, hi-lo))
			}
		}
		if found {
			return true
		}
	}
	return false
}

// take is how many of a mapping's bytes resident (by its smaps count
// when the window opened and the bytes sampled faults touched since) an
// unmapping or advice of ov of its bytes gave back, in proportion, and
// takes them from the mapping's count: unmapping 64 KiB of which a page
// was touched gives back a page, not 64 KiB.
func (w *growthWatch) take(m maps.Mapping, ov uint64) float64 {
	have := w.resident[m.Start]
	if have <= 0 || m.Size() == 0 {
		return 0
	}
	est := min(float64(ov), have*float64(ov)/float64(m.Size()))
	if left := have - est; left > 0 && ov < m.Size() {
		w.resident[m.Start] = left
	} else {
		delete(w.resident, m.Start)
	}
	return est
}

// takeRange is take over the accessible mappings of [addr, addr+n) in the
// table whose accessible mappings cover most of it, the first of those
// that cover as much. The read before the call may be older than the
// memory it gives back: malloc_trim's advice over a main heap grown 16
// MiB since was taken from the heap as it was (132 KiB), and the 16 MiB
// stayed in the net about one run in four.
func (w *growthWatch) takeRange(addr, n uint64, tables ...[]maps.Mapping) float64 {
	end := addr + n
	best, most := -1, uint64(0)
	for ti, ms := range tables {
		var covered uint64
		i := sort.Search(len(ms), func(i int) bool { return ms[i].End > addr })
		for ; i < len(ms) && ms[i].Start < end; i++ {
			if m := ms[i]; m.Readable() || m.Writable() {
				covered += min(m.End, end) - max(m.Start, addr)
			}
		}
		if covered > most {
			best, most = ti, covered
		}
	}
	if best < 0 {
		return 0
	}
	ms := tables[best]
	var got float64
	i := sort.Search(len(ms), func(i int) bool { return ms[i].End > addr })
	for ; i < len(ms) && ms[i].Start < end; i++ {
		if m := ms[i]; m.Readable() || m.Writable() {
			got += w.take(m, min(m.End, end)-max(m.Start, addr))
		}
	}
	return got
}

type unresolvedCall struct {
	// whole: the call's stack was copied whole and completes short ones:
	// what it is charged late counts in its share too.
	whole      *wholeCall
	site, typ  int
	addr, n    uint64
	accessible bool
	at         uint64
	tries      int
}

// resolve charges the calls no mapping was known for, by the mmaps made
// before them that have been read since; after a second drain (or at the
// end), what is still unknown is charged whole to the class its address
// has now.
func (w *growthWatch) resolve(final bool) {
	kept := w.unresolved[:0]
	for _, u := range w.unresolved {
		clear(w.tap)
		w.whole = u.whole
		charged := w.resolveOne(&u, final)
		if u.whole != nil {
			w.completion.Also(u.whole.key, u.whole.w, w.tap)
		}
		w.whole = nil
		if !charged {
			kept = append(kept, u)
		}
	}
	w.unresolved = kept
}

// resolveOne charges an unresolved call if it can, or at the end.
func (w *growthWatch) resolveOne(u *unresolvedCall, final bool) bool {
	made := w.madeBefore(u.at, u.addr, u.addr+u.n)
	if w.chargeIn(u.site, u.addr, u.n, u.typ, u.accessible, made) {
		return true
	}
	if u.tries++; u.tries < 2 && !final {
		return false
	}
	// Memory no read showed: nothing known of it was resident.
	class, arena := w.classify(u.addr, w.cur, w.prev)
	w.add(u.site, class, arena, u.typ, float64(u.n))
	return true
}

// wholeCall is a call copied whole that completes short ones: its
// completion key and the short calls it stands for.
type wholeCall struct {
	key string
	w   float64
}

// madeBefore are the mappings the last mmaps made before t left over
// [lo, hi), sorted: a process that maps and unmaps in a loop gets the same
// address again and again, and only the latest mapping there counts (each
// counted once: charging every one charged a munmap many times over).
// Where a later one covers part of an earlier one, the parts of the
// earlier one around it stay.
func (w *growthWatch) madeBefore(t, lo, hi uint64) []maps.Mapping {
	var rs []recentMapping
	for i := len(w.mmapLog) - 1; i >= 0; i-- {
		r := w.mmapLog[i]
		if r.at > t || r.m.Start >= hi || r.m.End <= lo {
			continue
		}
		rs = append(rs, r)
		if r.m.Start <= lo && r.m.End >= hi {
			break // it covers the range: nothing made before it shows there
		}
	}
	if len(rs) == 1 {
		return []maps.Mapping{rs[0].m} // a loop's mapping, made again where it was: most calls
	}
	slices.Reverse(rs) // back in the order made, as latestMappings takes them
	return slices.DeleteFunc(latestMappings(rs), func(m maps.Mapping) bool { return m.Start >= hi || m.End <= lo })
}

func (w *growthWatch) classOf(addr uint64, tables ...[]maps.Mapping) string {
	c, _ := w.classify(addr, tables...)
	return c
}

// classify names the memory class at addr by the first table that maps
// it: maps' classes, with an arena's heap numbered by its arena and
// anonymous memory holding mmapped chunks told apart.
func (w *growthWatch) classify(addr uint64, tables ...[]maps.Mapping) (class, arena string) {
	for _, ms := range tables {
		if m, ok := maps.Find(ms, addr); ok {
			return w.classifyIn(m, addr)
		}
	}
	return "gone", ""
}

func (w *growthWatch) classifyIn(m maps.Mapping, addr uint64) (class, arena string) {
	switch m.Class {
	case maps.ClassMainHeap:
		return m.Class.String(), mainArena
	case maps.ClassArenaHeap:
		if ar, ok := w.arenaAt(addr); ok {
			return m.Class.String(), arenaKey(ar)
		}
		return m.Class.String(), ""
	case maps.ClassAnon:
		for _, c := range w.mmappedChunks(m) {
			if addr >= c[0] && addr < c[1] {
				return "mmapped-chunk", ""
			}
		}
	}
	return m.Class.String(), ""
}

// arenaAt is the arena of the thread arena's heap holding addr: its
// heap_info's ar_ptr (glibc.HeapArena), at addr rounded down to the
// heaps' size (glibc.HeapMax, which the hugetlb tunable changes). Arenas are numbered at the end (arenaNumbers), as
// malloc_info numbers them then: a new arena goes in right after
// main_arena, so the ring's order changes as arenas are made.
func (w *growthWatch) arenaAt(addr uint64) (uint64, bool) {
	if w.h == nil || w.heapMax == 0 {
		return 0, false
	}
	hb := addr &^ (w.heapMax - 1)
	if ar, ok := w.arenaOf[hb]; ok {
		return ar, ar != 0
	}
	ar, _ := glibc.HeapArena(w.mem(), hb)
	w.arenaOf[hb] = ar
	return ar, ar != 0
}

// arenaNumbers numbers the arenas as the ring has them now: main_arena 0,
// then the ring's order.
func (w *growthWatch) arenaNumbers() map[uint64]int {
	nums := map[uint64]int{}
	if w.h == nil {
		return nums
	}
	for i, a := range w.h.ArenaRing() {
		nums[a] = i
	}
	return nums
}

// mmappedChunks lists the chunks malloc mapped of their own that an
// anonymous mapping holds, by glibc's one page-granular scan (every page
// that holds data: the kernel merges a chunk's mapping with its
// neighbours, so it may sit anywhere in one). At most maxHeaderTries pages
// are read per mapping and drain, and a mapping found to hold no chunk is
// not read again while its extent stays (a database's buffer pool is read
// once, not every drain); the list found is kept until the next drain,
// which reads the mappings again.
func (w *growthWatch) mmappedChunks(m maps.Mapping) [][2]uint64 {
	key := [2]uint64{m.Start, m.End}
	if cs, ok := w.chunkCache[key]; ok {
		return cs
	}
	if w.noChunks[key] {
		return nil
	}
	var cs [][2]uint64
	if w.h != nil && glibc.MayHoldMmapped(m) {
		glibc.ScanMmapped(w.mem(), w.h.Layout, m, maxHeaderTries, func(c glibc.MmappedChunk) bool {
			r := c.Region()
			cs = append(cs, [2]uint64{r.Start, r.End})
			return true
		})
	}
	w.chunkCache[key] = cs
	if len(cs) == 0 {
		w.noChunks[key] = true
	}
	return cs
}

// maxHeaderTries bounds the chunk headers read in one mapping per drain.
const maxHeaderTries = 4096

// mem is the process's memory as glibc's readers take it, its pages
// told by the page map the window keeps open (else by the target, which
// opens it for each look).
func (w *growthWatch) mem() glibc.Memory {
	if w.pm == nil {
		return w.t
	}
	return pagedMem{w.t, w.pm}
}

type pagedMem struct {
	live.Observed
	pm *procfs.Pagemap
}

func (m pagedMem) DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error {
	return m.pm.Runs(start, end, fn)
}

// profile turns the values per site and class into the valued profile,
// largest bytes touched first.
func (w *growthWatch) profile() *stackprof.Valued {
	v := &stackprof.Valued{Types: report.GrowthTypes, Default: report.GrowthTypes[report.GrowthTouched].Type,
		Window: stackprof.Window{Start: w.g.Start, Duration: w.g.Duration},
		Comments: []string{fmt.Sprintf("arenactl growth: one fault sample per %d page faults; %d fault samples, %d memory syscalls, %d records lost",
			w.g.Period, w.g.FaultSamples, w.g.Calls, w.g.Lost)}}
	sort.SliceStable(w.sites, func(i, j int) bool {
		a, b := w.sites[i].values, w.sites[j].values
		if a[report.GrowthTouched] != b[report.GrowthTouched] {
			return a[report.GrowthTouched] > b[report.GrowthTouched]
		}
		if a[report.GrowthMapped] != b[report.GrowthMapped] {
			return a[report.GrowthMapped] > b[report.GrowthMapped]
		}
		return a[report.GrowthUnmapped]+a[report.GrowthGivenBack] > b[report.GrowthUnmapped]+b[report.GrowthGivenBack]
	})
	var sites []stackprof.ValuedSite
	var index []int
	nums := w.arenaNumbers()
	for _, s := range w.sites {
		labels := map[string]string{report.LabelClass: s.key.class}
		switch a := s.key.arena; {
		case a == mainArena:
			labels[report.LabelArena] = "0"
		case a != "":
			ar, _ := strconv.ParseUint(a, 16, 64)
			if n, ok := nums[ar]; ok {
				labels[report.LabelArena] = strconv.Itoa(n)
			}
		}
		sites = append(sites, stackprof.ValuedSite{Labels: labels, Values: s.values})
		index = append(index, s.key.site)
	}
	w.stacks.Finish(v, sites, index)
	return v
}

// ringPages shares 64 MiB of rings among the CPUs, from 512 KiB to 32
// MiB each (a power of two of pages): a sample with its stack copy takes
// about 8.4 KiB, and a thread growing an arena's heap makes an mprotect
// a page (glibc pads no thread arena's growth), 600 MB/s of records from
// two such threads here.
func ringPages() int {
	ps := os.Getpagesize()
	n := runtime.NumCPU()
	pages := 1
	for pages*2*ps*n <= 64<<20 && pages*2*ps <= 32<<20 {
		pages *= 2
	}
	return max(pages, (512<<10)/ps)
}

// mainArena is the arena key of the main heap; any other arena's is its
// address in hex until the arenas are numbered.
const mainArena = "main"

func arenaKey(ar uint64) string { return strconv.FormatUint(ar, 16) }

func pageUp(n uint64) uint64 {
	ps := uint64(os.Getpagesize())
	return (n + ps - 1) &^ (ps - 1)
}

// heapEnd is the main heap's end (the program break) as the mappings
// show it, 0 when there is no [heap] yet.
func heapEnd(ms []maps.Mapping) uint64 {
	for _, m := range ms {
		if m.Class == maps.ClassMainHeap && m.Path == "[heap]" {
			return m.End
		}
	}
	return 0
}
