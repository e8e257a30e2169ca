package glibc

import (
	"encoding/binary"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"sort"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// LeaveOutMin is the smallest mapping worth leaving out of a copy-on-write
// image: what matters is the page tables of big anonymous memory the
// allocator does not own (a database's buffer pool, a JIT's or another
// runtime's heap), whose copy would otherwise make most of the stop.
const LeaveOutMin = 32 << 20

// LeaveOut names the mappings a read-only walk of the image of a live
// process never reads, read from the running process before it is
// stopped: private anonymous read-write mappings of at least LeaveOutMin
// that hold no arena (main_arena and mp_ included: a static executable
// keeps them in its .bss), no arena's top chunk, no heap (a heap_info at
// any HeapMax-aligned address in it pointing at an arena of the ring), and
// no mmapped chunk anywhere (ScanMmapped: the kernel merges a chunk's
// mapping with its anonymous neighbours, a buffer pool's too). Anything it
// cannot read or decide is kept. Biggest first.
//
// Scanning a buffer pool's every page for chunk headers would take seconds
// of arenactl's time, so the others are scanned first: when they hold as
// many chunks of as many bytes as malloc's own counters (mp_.n_mmaps,
// mp_.mmapped_mem), the big ones hold none.
//
// What changes between this look and the stop is handled below it: the
// image routine leaves a mapping in unless it is, when every thread is
// stopped, exactly the mapping named here.
func LeaveOut(mem Memory, lay layouts.Layout, a Anchors, ms []maps.Mapping) []maps.Range {
	rg, ok := readRing(mem, lay, a)
	if !ok {
		return nil // a ring we cannot follow: leave nothing out
	}
	var out []maps.Range
	var big []maps.Mapping
	for _, m := range ms {
		if m.Perms != "rw-p" || m.Size() < LeaveOutMin || !(m.Path == "" || strings.HasPrefix(m.Path, "[anon:") && !strings.Contains(m.Path, "glibc")) {
			continue
		}
		if m.Class != maps.ClassAnon && m.Class != maps.ClassArenaHeap {
			continue
		}
		if rg.keeps(m) {
			continue
		}
		big = append(big, m)
	}
	if len(big) == 0 {
		return nil
	}
	accounted := false
	nm, ok := rg.word(a.Mp + uint64(lay.MpNMmaps))
	nb, ok2 := rg.word(a.Mp + uint64(lay.MpMmappedMem))
	if ok && ok2 {
		n := uint64(uint32(nm))
		var found, bytes uint64
		done := func() bool { return found >= n && (bytes == nb || lay.MmapTail > 0 && bytes <= nb) } // as the walk's (walker.mmapped)
		for _, m := range ms {
			if !done() && MayHoldMmapped(m) && !isIn(big, m) {
				ScanMmapped(mem, lay, m, 0, func(c MmappedChunk) bool {
					r := c.Region()
					found, bytes = found+1, bytes+r.End-r.Start
					return !done()
				})
			}
		}
		accounted = done()
	}
	for _, m := range big {
		if !accounted && !ScanMmapped(mem, lay, m, 0, func(MmappedChunk) bool { return false }) {
			continue // it holds one
		}
		out = append(out, maps.Range{Start: m.Start, End: m.End})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].End-out[i].Start > out[j].End-out[j].Start })
	return out
}

// ring is what LeaveOut and Unclaim know of the allocator: the arenas of
// the ring, the addresses no mapping may be left out over, and how to read.
type ring struct {
	arenas    map[uint64]bool
	keep      []uint64 // main_arena, mp_, every arena and its top chunk
	heapMax   uint64
	word      func(uint64) (uint64, bool)
	holdsData func(uint64) bool
}

// readRing follows the arena ring from main_arena; ok is false when it
// cannot be read.
func readRing(mem Memory, lay layouts.Layout, a Anchors) (*ring, bool) {
	rg := &ring{arenas: map[uint64]bool{}, keep: []uint64{a.MainArena, a.Mp}}
	rg.word = func(addr uint64) (uint64, bool) {
		var b [8]byte
		if _, err := mem.ReadAt(b[:], addr); err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	// holdsData: a page never touched (or given back) holds no heap_info
	// and no chunk header, and reading it would map the zero page into a
	// live process.
	dr, _ := mem.(memio.DataRuns)
	rg.holdsData = func(addr uint64) bool {
		if dr == nil {
			return true
		}
		data := true
		page := addr &^ (pageSz - 1)
		if err := dr.DataRuns(page, page+pageSz, func(_, _ uint64, d bool) { data = d }); err != nil {
			return true
		}
		return data
	}
	var ok bool
	if rg.heapMax, ok = HeapMax(mem, lay, a); !ok {
		return nil, false
	}
	for ar, n := a.MainArena, 0; n < 1024 && !rg.arenas[ar]; n++ {
		rg.arenas[ar] = true
		top, ok := rg.word(ar + uint64(lay.StateTop))
		next, ok2 := rg.word(ar + uint64(lay.StateNext))
		if !ok || !ok2 {
			return nil, false
		}
		rg.keep = append(rg.keep, ar, top)
		ar = next
	}
	return rg, true
}

// holdsHeap says whether a heap_info at a HeapMax boundary in m points at
// an arena of the ring, or one such word cannot be read.
func (rg *ring) holdsHeap(m maps.Mapping) bool {
	for h := (m.Start + rg.heapMax - 1) &^ (rg.heapMax - 1); h < m.End; h += rg.heapMax {
		if !rg.holdsData(h) {
			continue
		}
		ar, ok := rg.word(h)
		if !ok || rg.arenas[ar] {
			return true
		}
	}
	return false
}

// keeps says whether m must stay in the image for what the ring holds
// there; the mmapped chunks are LeaveOut's to look for.
func (rg *ring) keeps(m maps.Mapping) bool {
	return rg.holdsAny(m) || rg.holdsHeap(m)
}

// isIn says whether m is one of ms (by its start).
func isIn(ms []maps.Mapping, m maps.Mapping) bool {
	for _, x := range ms {
		if x.Start == m.Start {
			return true
		}
	}
	return false
}

// Unclaim corrects the mappings the classifier took for a thread arena's
// heap by their place alone (a read-write anonymous mapping at a HeapMax
// boundary, as a database's buffer pool may well be): one that holds no
// heap of the ring, nor any arena or top chunk, is anonymous memory, and
// so is the reservation taken with it. Nothing changes when the ring
// cannot be read.
func Unclaim(mem Memory, lay layouts.Layout, a Anchors, ms []maps.Mapping) {
	var rg *ring
	for i := range ms {
		m := &ms[i]
		if m.Class != maps.ClassArenaHeap || !m.Writable() {
			continue
		}
		if rg == nil {
			var ok bool
			if rg, ok = readRing(mem, lay, a); !ok {
				return
			}
		}
		if rg.holdsHeap(*m) || rg.holdsAny(*m) {
			continue
		}
		m.Class = maps.ClassAnon
		if i+1 < len(ms) && ms[i+1].Start == m.End && ms[i+1].Class == maps.ClassArenaHeap && !ms[i+1].Readable() {
			ms[i+1].Class = maps.ClassAnon
		}
	}
}

// holdsAny says whether m holds an arena, its top, main_arena or mp_.
func (rg *ring) holdsAny(m maps.Mapping) bool {
	for _, p := range rg.keep {
		if p >= m.Start && p < m.End {
			return true
		}
	}
	return false
}
