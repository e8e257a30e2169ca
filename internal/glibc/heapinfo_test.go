package glibc_test

import (
	"encoding/binary"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
)

// A thread arena's heap size is 64 MiB unless the hugetlb tunable set
// mp_.hp_pagesize (four such pages then); a glibc whose mp_ has no such
// field (before 2.35) always has 64 MiB.
func TestHeapMax(t *testing.T) {
	p := &pages{base: 0x10000, b: make([]byte, pg)}
	lay := layouts.Layout{MpHpPagesize: 0x40}
	a := glibc.Anchors{Mp: 0x10000}
	if got, ok := glibc.HeapMax(p, lay, a); !ok || got != 64<<20 {
		t.Errorf("no huge pages: %#x %v", got, ok)
	}
	binary.LittleEndian.PutUint64(p.b[0x40:], 2<<20)
	if got, ok := glibc.HeapMax(p, lay, a); !ok || got != 8<<20 {
		t.Errorf("2 MiB huge pages: %#x %v, want 8 MiB", got, ok)
	}
	if got, ok := glibc.HeapMax(p, layouts.Layout{MpHpPagesize: -1}, a); !ok || got != 64<<20 {
		t.Errorf("a glibc without hp_pagesize: %#x %v", got, ok)
	}
	if _, ok := glibc.HeapMax(p, lay, glibc.Anchors{Mp: 0x90000}); ok {
		t.Error("an unreadable mp_ gave a size")
	}
}

// A heap's arena is its heap_info's ar_ptr, when that is a pointer malloc
// aligns; a page the page map says holds no data is not read.
func TestHeapArena(t *testing.T) {
	p := &pages{base: 0x4000000, b: make([]byte, 2*pg), noData: map[uint64]bool{}}
	binary.LittleEndian.PutUint64(p.b, 0x7f0000000890)
	if ar, ok := glibc.HeapArena(p, 0x4000000); !ok || ar != 0x7f0000000890 {
		t.Errorf("got %#x %v", ar, ok)
	}
	binary.LittleEndian.PutUint64(p.b, 0x7f0000000891)
	if ar, ok := glibc.HeapArena(p, 0x4000000); ok {
		t.Errorf("a misaligned ar_ptr was taken: %#x", ar)
	}
	binary.LittleEndian.PutUint64(p.b, 0x7f0000000890)
	p.noData[0x4000000] = true
	if ar, ok := glibc.HeapArena(pagesRuns{p}, 0x4000000); ok || p.badReads != 0 {
		t.Errorf("a page without data: %#x %v, %d reads of it", ar, ok, p.badReads)
	}
}
