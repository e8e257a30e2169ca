package glibc

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// sparse is the memory of a few mappings, zeros but for the words put.
type sparse struct {
	ms    []maps.Mapping
	pages map[uint64][]byte
}

func (s *sparse) ReadAt(p []byte, addr uint64) (int, error) {
	m, ok := maps.Find(s.ms, addr)
	if !ok || addr+uint64(len(p)) > m.End {
		return 0, errors.New("unmapped")
	}
	for i := range p {
		a := addr + uint64(i)
		if pg := s.pages[a&^(pageSz-1)]; pg != nil {
			p[i] = pg[a%pageSz]
		} else {
			p[i] = 0
		}
	}
	return len(p), nil
}

func (s *sparse) put(addr, v uint64) {
	pg := s.pages[addr&^(pageSz-1)]
	if pg == nil {
		pg = make([]byte, pageSz)
		s.pages[addr&^(pageSz-1)] = pg
	}
	binary.LittleEndian.PutUint64(pg[addr%pageSz:], v)
}

// A big anonymous mapping is left out of an image only when it holds no
// mmapped chunk anywhere, not only at its start (the kernel merges a
// chunk's mapping with a buffer pool mapped right below it); the big ones
// are searched only while the others hold fewer chunks than malloc counts.
func TestLeaveOutKeepsChunksInsideBigMappings(t *testing.T) {
	lay, err := layouts.LayoutFor(layouts.Version{Major: 2, Minor: 36})
	if err != nil {
		t.Fatal(err)
	}
	const (
		libc  = 0x7f0000000000
		small = 0x7f1000000000
		big1  = 0x7f2000000000
		big2  = 0x7f3000000000
	)
	mem := &sparse{pages: map[uint64][]byte{}, ms: []maps.Mapping{
		{Start: libc, End: libc + 64<<10, Perms: "rw-p", Path: "/usr/lib/libc.so.6", Class: maps.ClassSharedLib},
		{Start: small, End: small + 1<<20, Perms: "rw-p"},
		{Start: big1, End: big1 + 64<<20, Perms: "rw-p"},
		{Start: big2, End: big2 + 64<<20, Perms: "rw-p"},
	}}
	a := Anchors{MainArena: libc + 0x1000, Mp: libc + 0x8000}
	mem.put(a.MainArena+uint64(lay.StateNext), a.MainArena) // a ring of one
	mem.put(a.MainArena+uint64(lay.StateTop), libc+0x2000)
	mem.put(small+8*pageSz, 0)
	mem.put(small+8*pageSz+8, 4*pageSz|isMmapped)
	mem.put(big1+32<<20+8, 64*pageSz|isMmapped) // in the middle of big1
	for _, c := range []struct {
		nmmaps int
		bytes  uint64
		want   []maps.Range
	}{
		{2, 68 * pageSz, []maps.Range{{Start: big2, End: big2 + 64<<20}}},
		// malloc counts one, the small mapping holds it: the big ones
		// are not searched.
		{1, 4 * pageSz, []maps.Range{{Start: big1, End: big1 + 64<<20}, {Start: big2, End: big2 + 64<<20}}},
		// One, but not of the bytes malloc counts (a header the program
		// forged): the big ones are searched.
		{1, 64 * pageSz, []maps.Range{{Start: big2, End: big2 + 64<<20}}},
	} {
		mem.put(a.Mp+uint64(lay.MpNMmaps), uint64(c.nmmaps))
		mem.put(a.Mp+uint64(lay.MpMmappedMem), c.bytes)
		got := LeaveOut(mem, lay, a, mem.ms)
		if len(got) != len(c.want) {
			t.Errorf("n_mmaps %d: left out %v, want %v", c.nmmaps, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("n_mmaps %d: left out %v, want %v", c.nmmaps, got, c.want)
			}
		}
	}
}
