package glibc_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

const pg = 4096

// pages is memory made of a few pages written by the test; the others
// read as zeros. With noData set, it also says which pages hold no data.
type pages struct {
	base     uint64
	b        []byte
	badReads int // reads of pages said to hold no data
	noData   map[uint64]bool
}

func (p *pages) ReadAt(b []byte, addr uint64) (int, error) {
	if p.noData[addr&^(pg-1)] {
		p.badReads++
	}
	if addr < p.base || addr+uint64(len(b)) > p.base+uint64(len(p.b)) {
		return 0, errors.New("unmapped")
	}
	return copy(b, p.b[addr-p.base:]), nil
}

func (p *pages) header(off, prev, size uint64) {
	binary.LittleEndian.PutUint64(p.b[off:], prev)
	binary.LittleEndian.PutUint64(p.b[off+8:], size)
}

type pagesRuns struct{ *pages }

func (p pagesRuns) DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error {
	for a := start; a < end; a += pg {
		fn(a, a+pg, !p.noData[a])
	}
	return nil
}

func scanAll(mem glibc.Memory, m maps.Mapping, maxPages int) ([]glibc.MmappedChunk, bool) {
	var got []glibc.MmappedChunk
	ok := glibc.ScanMmapped(mem, layouts.Layout{}, m, maxPages, func(c glibc.MmappedChunk) bool { got = append(got, c); return true })
	return got, ok
}

// Every page of a mapping is looked at for a chunk's region, not only its
// start; a chunk found is stepped over whole; memalign's second header
// moves the chunk into its region, and says the region's size after a
// realloc; and headers that glibc never writes (other flag bits, a size
// that is no page multiple or runs past the mapping, a prev_size) are not
// taken for chunks.
func TestScanMmappedEveryPage(t *testing.T) {
	const base = 0x7f0000000000
	mem := &pages{base: base, b: make([]byte, 64*pg)}
	m := maps.Mapping{Start: base, End: base + 64*pg, Perms: "rw-p"}
	mem.header(3*pg, 0, 4*pg|2)                // a chunk, pages 3-6
	mem.header(5*pg, 0, 2*pg|2)                // inside it: the program's bytes
	mem.header(10*pg, 0, 2*pg|3)               // PREV_INUSE too: not malloc's
	mem.header(11*pg, 0, 2*pg|6)               // NON_MAIN_ARENA too
	mem.header(12*pg, 0, pg+16|2)              // no page multiple
	mem.header(14*pg, 0, 64*pg|2)              // past the mapping
	mem.header(15*pg, 8, 2*pg|2)               // a prev_size at a region's start
	mem.header(20*pg, 0, 8*pg|2)               // memalign's region, pages 20-27 ...
	mem.header(20*pg+pg-16, pg-16, 7*pg+16|2)  // ... its chunk aligned to a page
	mem.header(40*pg, 0, 8*pg|2)               // memalign's, then realloc'd: the first header stale ...
	mem.header(40*pg+pg-16, pg-16, 11*pg+16|2) // ... the second says 12 pages
	mem.header(60*pg, 0, 4*pg|2)               // the mapping's last pages
	want := []glibc.MmappedChunk{
		{Chunk: glibc.Chunk{Addr: base + 3*pg, Size: 4 * pg, Arena: -1, State: glibc.ChunkMmapped}},
		{Chunk: glibc.Chunk{Addr: base + 21*pg - 16, Size: 7*pg + 16, Arena: -1, State: glibc.ChunkMmapped}, Pad: pg - 16},
		{Chunk: glibc.Chunk{Addr: base + 41*pg - 16, Size: 11*pg + 16, Arena: -1, State: glibc.ChunkMmapped}, Pad: pg - 16},
		{Chunk: glibc.Chunk{Addr: base + 60*pg, Size: 4 * pg, Arena: -1, State: glibc.ChunkMmapped}},
	}
	got, complete := scanAll(mem, m, 0)
	if !reflect.DeepEqual(got, want) || !complete {
		t.Fatalf("found %+v (complete %v), want %+v", got, complete, want)
	}
	if r := got[1].Region(); r.Start != base+20*pg || r.End != base+28*pg {
		t.Errorf("memalign's chunk's region %#x-%#x", r.Start, r.End)
	}

	// A page said to hold no data is not read (it would map the zero page
	// into a live process): a header there is not seen.
	runs := pagesRuns{mem}
	mem.noData = map[uint64]bool{base + 3*pg: true}
	for a := uint64(base + 30*pg); a < base+60*pg; a += pg {
		mem.noData[a] = true
	}
	got, _ = scanAll(runs, m, 0)
	if len(got) != 3 || got[0].Addr != base+5*pg || got[0].Size != 2*pg {
		t.Errorf("with page 3 holding no data, found %+v", got)
	}
	if mem.badReads != 0 {
		t.Errorf("%d reads of pages said to hold no data", mem.badReads)
	}

	// maxPages bounds the pages read.
	mem.noData = nil
	if got, complete := scanAll(mem, m, 2); complete || len(got) != 0 {
		t.Errorf("with 2 pages allowed: %+v, complete %v", got, complete)
	}
}

// From 2.43 a region holds 16 bytes past its chunk's size, and prev_size's
// bit 0 says huge pages: such headers are found there, and not before.
func TestScanMmapped243(t *testing.T) {
	const base = 0x7f0000000000
	mem := &pages{base: base, b: make([]byte, 32*pg)}
	m := maps.Mapping{Start: base, End: base + 32*pg, Perms: "rw-p"}
	mem.header(2*pg, 1, 4*pg-16|2)         // huge pages, pages 2-5
	mem.header(10*pg, 0, 8*pg-16|2)        // memalign's region, pages 10-17 ...
	mem.header(10*pg+pg-16, pg-16, 7*pg|2) // ... its chunk aligned to a page
	lay, err := layouts.LayoutFor(layouts.Version{Major: 2, Minor: 43})
	if err != nil {
		t.Fatal(err)
	}
	var got []glibc.MmappedChunk
	glibc.ScanMmapped(mem, lay, m, 0, func(c glibc.MmappedChunk) bool { got = append(got, c); return true })
	want := []glibc.MmappedChunk{
		{Chunk: glibc.Chunk{Addr: base + 2*pg, Size: 4*pg - 16, Arena: -1, State: glibc.ChunkMmapped}, Tail: 16},
		{Chunk: glibc.Chunk{Addr: base + 11*pg - 16, Size: 7 * pg, Arena: -1, State: glibc.ChunkMmapped}, Pad: pg - 16, Tail: 16},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("found %+v, want %+v", got, want)
	}
	if r := got[1].Region(); r.Start != base+10*pg || r.End != base+18*pg {
		t.Errorf("memalign's chunk's region %#x-%#x", r.Start, r.End)
	}
	old, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: 42})
	got = nil
	glibc.ScanMmapped(mem, old, m, 0, func(c glibc.MmappedChunk) bool { got = append(got, c); return true })
	if len(got) != 0 {
		t.Errorf("with 2.42's layout, found %+v", got)
	}
}
