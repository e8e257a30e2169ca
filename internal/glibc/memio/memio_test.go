package memio_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/memio"
	"github.com/arenactl/arenactl/internal/maps"
)

// sparse is memory of which one page cannot be read.
type sparse struct {
	base uint64
	b    []byte
	bad  uint64 // the unreadable page
}

func (m sparse) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < m.base || addr+uint64(len(p)) > m.base+uint64(len(m.b)) {
		return 0, errors.New("unmapped")
	}
	if addr < m.bad+4096 && addr+uint64(len(p)) > m.bad {
		return 0, errors.New("unreadable page")
	}
	return copy(p, m.b[addr-m.base:]), nil
}

func (sparse) ReadsInParallel() {}

// TestCacheReadsAsMemory checks that what the cache gives, from its blocks
// and from a copy with a hole, is what the memory holds, and that the
// unreadable page stays unreadable through both.
func TestCacheReadsAsMemory(t *testing.T) {
	const base = 0x7f0000000000
	m := sparse{base: base, b: make([]byte, 3<<20), bad: base + 0x103000}
	for i := range m.b {
		m.b[i] = byte(i * 7)
	}
	check := func(c *memio.Cache, how string) {
		for _, a := range []uint64{base, base + 0x10, base + 0x102ff8, base + 0x104000, base + 0x2ffff8} {
			v, ok := c.Word(a)
			want := uint64(0)
			for i := 7; i >= 0; i-- {
				want = want<<8 | uint64(m.b[a-base+uint64(i)])
			}
			if !ok || v != want {
				t.Errorf("%s: word at %#x = %#x, %v; want %#x", how, a, v, ok, want)
			}
		}
		if _, ok := c.Word(base + 0x103008); ok {
			t.Errorf("%s: the unreadable page was read", how)
		}
		p := make([]byte, 64)
		if _, err := c.ReadAt(p, base+0x5000); err != nil || !bytes.Equal(p, m.b[0x5000:0x5040]) {
			t.Errorf("%s: ReadAt = %v, %x", how, err, p[:8])
		}
	}
	c := memio.NewSized(m, 4096)
	check(c, "blocks")
	rs := []maps.Range{{Start: base, End: base + 3<<20}}
	if !memio.Fits(rs) {
		t.Fatal("a 3 MiB heap does not fit a copy")
	}
	c.Load(base, rs)
	if !c.Copied() {
		t.Fatal("Load copied nothing")
	}
	// A range that fails to read whole is read a MiB at a time: the hole
	// is the MiB that holds the unreadable page.
	w := c.Span(base+0x103000, 8)
	if w == nil || w.Complete() || !w.Hole(0x103000) || !w.Hole(0x100000) || w.Hole(0xff000) || w.Hole(0x200000) {
		t.Errorf("the copy's hole is not the MiB of the unreadable page")
	}
	check(c, "copy")
	c.Drop()
	c.Close()
}

// TestParts checks that an arena too large to copy whole is cut into
// parts of the copy's size, in address order.
func TestParts(t *testing.T) {
	_, cache := memio.Caps()
	defer memio.SetCaps(0x2000, cache)()
	parts, ok := memio.Parts([]maps.Range{{Start: 0x20000, End: 0x25000}, {Start: 0x10000, End: 0x11000}})
	want := []maps.Range{{Start: 0x10000, End: 0x11000}, {Start: 0x20000, End: 0x22000}, {Start: 0x22000, End: 0x24000}, {Start: 0x24000, End: 0x25000}}
	if !ok || len(parts) != len(want) {
		t.Fatalf("parts = %v, %v; want %v", parts, ok, want)
	}
	for i := range want {
		if parts[i] != want[i] {
			t.Errorf("part %d = %v, want %v", i, parts[i], want[i])
		}
	}
	if _, ok := memio.Parts([]maps.Range{{Start: 0x10001, End: 0x11000}}); ok {
		t.Error("a range not page-aligned was cut into parts")
	}
}

// TestAddrSet checks membership across regions, for odd addresses too,
// and through a reader.
func TestAddrSet(t *testing.T) {
	s := memio.NewAddrSet()
	in := []uint64{0x10, 0x7f0000000010, 0x7f0004000000, 0x1238} // 0x1238: not 16-aligned
	for _, a := range in {
		s.Add(a)
	}
	r := s.Reader()
	for _, a := range in {
		if !s.Has(a) || !r.Has(a) {
			t.Errorf("%#x: not in the set", a)
		}
	}
	for _, a := range []uint64{0x20, 0x7f0000000020, 0x1230, 0x7f0008000000} {
		if s.Has(a) || r.Has(a) {
			t.Errorf("%#x: in the set", a)
		}
	}
	s.Clear()
	if s.Has(0x10) || s.Has(0x1238) {
		t.Error("Clear left members")
	}
	var none *memio.AddrSet
	if none.Has(0x10) || none.Region(0x10) != nil {
		t.Error("a nil set is not empty")
	}
}
