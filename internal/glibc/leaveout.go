package glibc

import (
	"encoding/binary"
	"sort"
	"strings"

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
// that do not start with an mmapped chunk. Anything it cannot read or
// decide is kept. Adjacent anonymous mappings of one kind merge, so a
// mapping that only ends in a heap or in mmapped chunks is kept too (the
// heap by the aligned check, the chunks after the start because the walk
// only looks for chunks from a mapping's start). Biggest first.
//
// What changes between this look and the stop is handled below it: the
// image routine leaves a mapping in unless it is, when every thread is
// stopped, exactly the mapping named here.
func LeaveOut(mem Memory, lay Layout, a Anchors, ms []maps.Mapping) []Range {
	word := func(addr uint64) (uint64, bool) {
		var b [8]byte
		if _, err := mem.ReadAt(b[:], addr); err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	dr, _ := mem.(dataRuns)
	// holdsData: a page never touched (or given back) holds no heap_info
	// and no chunk header, and reading it would map the zero page into a
	// live process.
	holdsData := func(addr uint64) bool {
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

	heapMax := uint64(defaultHeap)
	if lay.MpHpPagesize >= 0 {
		hp, ok := word(a.Mp + uint64(lay.MpHpPagesize))
		if !ok {
			return nil
		}
		if hp != 0 {
			heapMax = 4 * hp
		}
	}
	// The arena ring, and where every arena's top is.
	arenas := map[uint64]bool{}
	keep := []uint64{a.MainArena, a.Mp}
	for ar, n := a.MainArena, 0; n < 1024 && !arenas[ar]; n++ {
		arenas[ar] = true
		keep = append(keep, ar)
		top, ok := word(ar + uint64(lay.StateTop))
		next, ok2 := word(ar + uint64(lay.StateNext))
		if !ok || !ok2 {
			return nil // a ring we cannot follow: leave nothing out
		}
		keep = append(keep, top)
		ar = next
	}

	var out []Range
	for _, m := range ms {
		if m.Perms != "rw-p" || m.Size() < LeaveOutMin || !(m.Path == "" || strings.HasPrefix(m.Path, "[anon:") && !strings.Contains(m.Path, "glibc")) {
			continue
		}
		if m.Class != maps.ClassAnon && m.Class != maps.ClassArenaHeap {
			continue
		}
		if leaveOutKeeps(m, keep, heapMax, arenas, word, holdsData) {
			continue
		}
		out = append(out, Range{m.Start, m.End})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].End-out[i].Start > out[j].End-out[j].Start })
	return out
}

// leaveOutKeeps says whether m must stay in the image.
func leaveOutKeeps(m maps.Mapping, keep []uint64, heapMax uint64, arenas map[uint64]bool, word func(uint64) (uint64, bool), holdsData func(uint64) bool) bool {
	for _, p := range keep {
		if p >= m.Start && p < m.End {
			return true
		}
	}
	if holdsData(m.Start) {
		raw, ok := word(m.Start + 8)
		if !ok {
			return true
		}
		if sz := raw &^ sizeBits; raw&isMmapped != 0 && sz >= pageSz && sz%pageSz == 0 && m.Start+sz <= m.End {
			return true
		}
	}
	for h := (m.Start + heapMax - 1) &^ (heapMax - 1); h < m.End; h += heapMax {
		if !holdsData(h) {
			continue
		}
		ar, ok := word(h)
		if !ok || arenas[ar] {
			return true
		}
	}
	return false
}
