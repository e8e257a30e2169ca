package glibc

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
)

// pageMemory holds one page of memory at base; everything else is not
// there, as in a core whose segment claims more than its file holds.
type pageMemory struct {
	base uint64
	page []byte
}

// ReadAt reads what there is, as the core's does, up to the first byte
// not there.
func (m pageMemory) ReadAt(p []byte, addr uint64) (int, error) {
	n := 0
	if addr >= m.base && addr < m.base+uint64(len(m.page)) {
		n = copy(p, m.page[addr-m.base:])
	}
	if n < len(p) {
		return n, fmt.Errorf("reading %#x: not in memory", addr+uint64(n))
	}
	return n, nil
}

// A crafted core can give libc's writable mapping a size of 2^45 bytes:
// the scan for main_arena must read a bounded part of it, not allocate the
// whole (it did: fatal error: runtime: out of memory).
func TestScanMainArenaHugeMapping(t *testing.T) {
	lay, err := layouts.LayoutFor(layouts.Version{Major: 2, Minor: 36})
	if err != nil {
		t.Fatal(err)
	}
	const base = 0x7f0000000000
	mem := pageMemory{base: base, page: make([]byte, 4096)}
	arena := uint64(base + 0x100)
	st := mem.page[0x100:]
	for i := 1; i < 128; i++ {
		off := lay.StateBins + int64(i-1)*16
		self := arena + uint64(off) - 16
		binary.LittleEndian.PutUint64(st[off:], self)
		binary.LittleEndian.PutUint64(st[off+8:], self)
	}
	binary.LittleEndian.PutUint64(st[lay.StateNext:], arena) // a ring of one
	l := &libc.Libc{Mappings: []maps.Mapping{{Start: base, End: base + 1<<45, Perms: "rw-p", Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}}}
	got, err := scanMainArena(l, lay, mem)
	if err != nil || got != arena {
		t.Fatalf("found %#x, %v; want %#x", got, err, arena)
	}
	// main_arena.next zeroed, as in the crafted core: an error, no more.
	binary.LittleEndian.PutUint64(st[lay.StateNext:], 0)
	if _, err := scanMainArena(l, lay, mem); err == nil {
		t.Log("a zeroed ring accepted") // checkMainArena's call, not this test's
	}
	if _, err := readBytes(mem, base, 1<<45); err == nil {
		t.Fatal("readBytes of 2^45 bytes did not refuse")
	}
}
