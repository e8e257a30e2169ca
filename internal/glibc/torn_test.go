package glibc

import (
	"encoding/binary"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"testing"

	"github.com/arenactl/arenactl/internal/maps"
)

// words is memory made of little-endian words; unset words read as 0.
type words map[uint64]uint64

func (m words) ReadAt(b []byte, addr uint64) (int, error) {
	for i := range b {
		a := addr + uint64(i)
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], m[a&^7])
		b[i] = w[a&7]
	}
	return len(b), nil
}

// A walk of a running process must tell a list that is damaged from one it
// read while another thread changed it: genuine and loops read the list
// again from memory, past the walk's cache.
func TestGenuineAndLoops(t *testing.T) {
	const (
		heap = 0x7f0000000000
		slot = heap + 0x100 // the word holding the list's first element
		end  = heap + 0xf0  // the bin's own header, as a chunk
		a    = heap + 0x1000
		b    = heap + 0x2000
		c    = heap + 0x3000
		wild = 0x4141414141414141
	)
	mem := words{}
	wk := &walker{mem: memio.NewSized(mem, pageSz), ms: []maps.Mapping{{Start: heap, End: heap + 0x10000, Perms: "rw-p"}}}
	list := chain{head: slot, end: end}
	set := func(links ...uint64) { // slot -> links[0] -> links[1] ...
		mem[slot] = links[0]
		for i := 0; i+1 < len(links); i++ {
			mem[links[i]+16] = links[i+1]
		}
	}

	// b links to a wild pointer, and still does: damage.
	set(a, b, wild)
	if !wk.genuine(list, b, wild, 2) {
		t.Error("a wild link still in the list was taken for a torn read")
	}
	// b was allocated meanwhile: the list now runs a -> c, and b's first
	// word is user data.
	set(a, c, end)
	mem[b+16] = wild
	if wk.genuine(list, b, wild, 2) {
		t.Error("a link out of a chunk no longer in the list was taken for damage")
	}
	// The head itself changed.
	if wk.genuine(list, slot, b, 0) {
		t.Error("a stale head was taken for damage")
	}
	set(b, c, end)
	if !wk.genuine(list, slot, b, 0) {
		t.Error("the current head was not recognised")
	}

	// a -> b -> a never returns to the head: a loop.
	set(a, b, a)
	if !wk.loops(list, 3) {
		t.Error("a loop in memory was not confirmed")
	}
	// a moved down the list while it was read: the list ends.
	set(b, c, a, end)
	if wk.loops(list, 4) {
		t.Error("a chunk that moved down the list was taken for a loop")
	}

	// Fastbins: links are mangled from 2.32, and the list ends at 0.
	fast := chain{head: slot, mangled: true}
	mem[slot] = a
	mem[a+16] = ((a + 16) >> 12) ^ b
	mem[b+16] = ((b + 16) >> 12) ^ wild
	if !wk.genuine(fast, b, wild, 2) {
		t.Error("a mangled wild fastbin link was not recognised")
	}
	mem[b+16] = ((b + 16) >> 12) ^ a
	if !wk.loops(fast, 3) {
		t.Error("a mangled fastbin loop was not recognised")
	}
}
