package inspect

import (
	"encoding/binary"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
)

// memReader reads, every interval, what a recording keeps of the
// process's memory without stopping it: the memory map by class from
// smaps (maps' parser), and the arenas' figures from their malloc_state.
type memReader struct {
	t     *live.Target
	hints maps.Hints
	n     int // intervals read
	// The allocator's layout and anchors, when found: without them the
	// intervals have no arenas (and mmapped chunks count as other
	// anonymous memory).
	lay     layouts.Layout
	anchors glibc.Anchors
	found   bool
	// mmapped is the bytes of mmapped chunks found in each anonymous
	// mapping, by its bounds: a mapping is scanned once while it stays.
	mmapped map[maps.Range]uint64
	notes   []string
	// The last read of the memory map, what it cost and when it was
	// made: it is read again only once readBudget of the time since
	// covers its cost.
	last     []report.ClassRss
	lastRss  uint64
	lastAt   time.Time
	lastCost time.Duration
}

// readBudget is the share of one CPU the reads of the memory map may
// take: smaps makes the kernel walk the page tables of every mapping,
// 21 ms a read at 5,000 mappings on a loaded 2-CPU machine.
const readBudget = 0.05

// classesDue says whether the memory map should be read again now.
func (m *memReader) classesDue(now time.Time) bool {
	return m.last == nil || now.Sub(m.lastAt) >= time.Duration(float64(m.lastCost)/readBudget)
}

// Every hintsEvery intervals the threads' stack pointers are read again
// (new threads' stacks), and the scans of mappings forgotten (a mapping
// unmapped and mapped again at the same bounds).
const hintsEvery = 60

// mmapScanPages bounds the pages read of one mapping looking for chunks.
const mmapScanPages = 64

func newMemReader(t *live.Target, debugDirs []string) *memReader {
	m := &memReader{t: t, mmapped: map[maps.Range]uint64{}}
	lay, err := libc.LayoutOf(t.Libc)
	if err == nil {
		m.anchors, err = glibc.FindAnchorsWith(t.Libc, lay, t, append(debugDirs, libc.DefaultDebugDirs...))
	}
	if err != nil {
		m.notes = append(m.notes, "the arenas will not be recorded: "+err.Error())
	} else {
		m.lay, m.found = lay, true
	}
	return m
}

// classOf is a mapping class's place in report.RecordingClasses.
var classOf = map[maps.Class]int{
	maps.ClassMainHeap: 0, maps.ClassArenaHeap: 1, maps.ClassAnon: 3,
	maps.ClassMainStack: 4, maps.ClassThreadStack: 4,
	maps.ClassExecutable: 5, maps.ClassSharedLib: 5, maps.ClassFile: 5, maps.ClassSpecial: 6,
}

const classMmapped, classAnon = 2, 3

// classes totals the mappings by class, from smaps read now or, while
// reading it again would take more than readBudget, the last read (at).
func (m *memReader) classes() (_ []report.ClassRss, rss uint64, at time.Time, _ error) {
	now := time.Now()
	if !m.classesDue(now) {
		return m.last, m.lastRss, m.lastAt, nil
	}
	// On one OS thread for the measure: a goroutine moved to another
	// between the two clock reads would read two threads' clocks.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	out, rss, err := m.readClasses()
	if err != nil {
		return nil, 0, now, err
	}
	m.last, m.lastRss, m.lastAt, m.lastCost = out, rss, now, threadCPU()-cpu0
	return out, rss, now, nil
}

// threadCPU is the CPU time the calling thread has used (its reads of
// /proc are its system time).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// readClasses reads smaps and totals its mappings by class.
func (m *memReader) readClasses() ([]report.ClassRss, uint64, error) {
	p := m.t.Proc() // held: every interval reads the one process
	if m.n%hintsEvery == 0 {
		if h, err := maps.ReadHintsProc(p); err == nil {
			m.hints = h
		}
		clear(m.mmapped)
	}
	m.n++
	ms, err := maps.ReadProc(p, true)
	if err != nil {
		return nil, 0, m.t.Explain(err)
	}
	maps.Classify(ms, m.hints)
	out := make([]report.ClassRss, len(report.RecordingClasses))
	for i, c := range report.RecordingClasses {
		out[i].Class = c
	}
	var rss uint64
	seen := make(map[maps.Range]bool)
	for _, mp := range ms {
		rss += mp.Rss
		c := classOf[mp.Class]
		if m.found && mp.Class == maps.ClassAnon && glibc.MayHoldMmapped(mp) {
			r := maps.Range{Start: mp.Start, End: mp.End}
			seen[r] = true
			chunks, ok := m.mmapped[r]
			if !ok {
				glibc.ScanMmapped(m.t, m.lay, mp, mmapScanPages, func(c glibc.MmappedChunk) bool {
					reg := c.Region()
					chunks += min(reg.End, mp.End) - max(reg.Start, mp.Start)
					return true
				})
				m.mmapped[r] = chunks
			}
			if chunks > 0 {
				// The chunks' share of the mapping's resident bytes.
				part := uint64(float64(mp.Rss) * float64(min(chunks, mp.Size())) / float64(mp.Size()))
				o := &out[classMmapped]
				o.Rss += part
				o.Size += min(chunks, mp.Size())
				o.Mappings++
				out[classAnon].Rss += mp.Rss - part
				out[classAnon].Size += mp.Size() - min(chunks, mp.Size())
				continue
			}
		}
		out[c].Rss += mp.Rss
		out[c].Size += mp.Size()
		out[c].Mappings++
	}
	for r := range m.mmapped {
		if !seen[r] {
			delete(m.mmapped, r)
		}
	}
	return out, rss, nil
}

// arenas reads each arena's system_mem and top chunk, and mp_'s
// mmapped_mem, while the process runs: the words are read one by one
// (malloc_state, malloc/malloc.c), each whole, and may be a moment apart.
func (m *memReader) arenas() ([]report.ArenaLevel, uint64) {
	if !m.found {
		return nil, 0
	}
	var out []report.ArenaLevel
	for i, a := range glibc.ArenaRing(m.t, m.lay, m.anchors) {
		sys, ok1 := m.word(a + uint64(m.lay.StateSystemMem))
		top, ok2 := m.word(a + uint64(m.lay.StateTop))
		if !ok1 || !ok2 {
			break
		}
		var topSize uint64
		if top != 0 {
			if sz, ok := m.word(top + 8); ok {
				topSize = sz &^ 7
			}
		}
		out = append(out, report.ArenaLevel{Index: i, Addr: a, SystemBytes: sys, TopBytes: min(topSize, sys)})
	}
	mm, _ := m.word(m.anchors.Mp + uint64(m.lay.MpMmappedMem))
	return out, mm
}

func (m *memReader) word(addr uint64) (uint64, bool) {
	var b [8]byte
	if n, err := m.t.ReadAt(b[:], addr); err != nil || n != 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}
