package glibc

import (
	"encoding/binary"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"testing"
)

// A free list that closes on itself (as lists of a running process's heap
// copied while its threads free and allocate often do) stops the prewalk
// within a few rounds of the loop, instead of spending the arena's whole
// budget on it; a list without a loop is recorded whole.
func TestPrewalkStopsAtLoops(t *testing.T) {
	lay, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: 17})
	const ar, start = 0x10000, 0x100000
	w := memio.Window{Start: start, End: start + 1<<20, B: make([]byte, 1<<20)}
	le := binary.LittleEndian
	chunk := func(i int) uint64 { return start + 0x1000 + uint64(i)*0x40 }
	// Bin 1: 100 chunks, the last leading back to chunk 60. Bin 2: 50
	// chunks, ending at its header.
	for i := 0; i < 100; i++ {
		next := chunk(i + 1)
		if i == 99 {
			next = chunk(60)
		}
		le.PutUint64(w.B[chunk(i)-start+8:], 0x41)
		le.PutUint64(w.B[chunk(i)-start+16:], next)
	}
	bin2 := uint64(ar) + uint64(lay.StateBins) // its header, as a chunk (bins[2] - 16)
	for i := 200; i < 250; i++ {
		next := chunk(i + 1)
		if i == 249 {
			next = bin2
		}
		le.PutUint64(w.B[chunk(i)-start+8:], 0x41)
		le.PutUint64(w.B[chunk(i)-start+16:], next)
	}
	st := make([]byte, lay.StateSize)
	le.PutUint64(st[lay.StateBins:], chunk(0))
	le.PutUint64(st[lay.StateBins+16:], chunk(200))
	var pw prewalk
	pw.fill(lay, ar, st, []memio.Window{w})
	loop, plain := pw.lists[lay.NFastbins], pw.lists[lay.NFastbins+1]
	if len(loop) < 100 || len(loop) > 400 {
		t.Errorf("the looping list: %d links recorded, want between its length (100) and a few rounds of its loop", len(loop))
	}
	if len(plain) != 50 {
		t.Errorf("the plain list: %d links recorded, want 50", len(plain))
	}
}
