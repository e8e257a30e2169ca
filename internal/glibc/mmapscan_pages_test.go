package glibc_test

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// planted is a core's memory with chunk headers written over it, and the
// core's page size (AT_PAGESZ), but no page map: every page is read.
type planted struct {
	tg    *core.Target
	heads map[uint64]uint64 // address -> the size word of a header (prev_size 0)
}

func (p *planted) PageSize() uint64 { return p.tg.PageSize() }

func (p *planted) ReadAt(b []byte, addr uint64) (int, error) {
	n, err := p.tg.ReadAt(b, addr)
	for a, size := range p.heads {
		var h [16]byte
		binary.LittleEndian.PutUint64(h[8:], size)
		for i := range h {
			if at := a + uint64(i); at >= addr && at < addr+uint64(len(b)) {
				b[at-addr] = h[i]
			}
		}
	}
	return n, err
}

// TestScanMmappedInTargetPages: glibc maps a chunk's region in the
// target's pages (sysmalloc rounds to GLRO(dl_pagesize)), so the scan for
// mmapped chunks looks only at the target's page boundaries and takes only
// regions of whole pages. On the committed aarch64 cores of 4 and 16 KiB
// pages, headers are planted in an anonymous mapping that holds no chunk:
// at 4 KiB, 12 KiB and 20 KiB regions at 4 KiB boundaries are chunks; at
// 16 KiB, neither (a boundary that is no page's, a region of no whole
// number of pages), and only the 32 KiB one at a 64 KiB boundary is found
// in both. The scan stepping by 4 KiB everywhere took all three at 16 KiB.
// The real chunks are found in both, of the bytes malloc_info counted.
func TestScanMmappedInTargetPages(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arm64")
	for _, c := range []struct {
		fx        string
		page      uint64
		mmapBytes uint64 // arenas-*.xml: <total type="mmap" count="3" size=...>
		want      [][2]uint64
	}{
		{"2.36-kernel", 4096, 909312, [][2]uint64{{0x1000, 0x4000}, {0x4000, 0x9000}, {0x10000, 0x18000}}},
		{"2.36-16k-kernel", 16384, 933888, [][2]uint64{{0x10000, 0x18000}}},
	} {
		t.Run(c.fx, func(t *testing.T) {
			tg, err := core.OpenTarget(filepath.Join(dir, "arenas-"+c.fx+".core.zst"), filepath.Join(dir, "sysroot"))
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			if tg.PageSize() != c.page {
				t.Fatalf("page size %d, want %d", tg.PageSize(), c.page)
			}
			// The real chunks (glibc 2.36: no MMAP_HP tail).
			var count, bytes uint64
			var empty *maps.Mapping
			for _, m := range tg.Mappings() {
				if !glibc.MayHoldMmapped(m) {
					continue
				}
				found := 0
				glibc.ScanMmapped(tg, layouts.Layout{}, m, 0, func(ch glibc.MmappedChunk) bool {
					r := ch.Region()
					if r.Start%c.page != 0 || r.End%c.page != 0 {
						t.Errorf("chunk region %#x-%#x is not in %d-byte pages", r.Start, r.End, c.page)
					}
					count++
					bytes += r.End - r.Start
					found++
					return true
				})
				if found == 0 && empty == nil && m.Size() >= 0x20000 && m.Class != maps.ClassThreadStack {
					empty = &m
				}
			}
			if count != 3 || bytes != c.mmapBytes {
				t.Errorf("found %d mmapped chunks of %d bytes, glibc's malloc_info says 3 of %d", count, bytes, c.mmapBytes)
			}
			if empty == nil {
				t.Fatal("no anonymous mapping without chunks to plant headers in")
			}
			const isMmapped = 2
			mem := &planted{tg: tg, heads: map[uint64]uint64{
				empty.Start + 0x1000:  0x3000 | isMmapped,
				empty.Start + 0x4000:  0x5000 | isMmapped,
				empty.Start + 0x10000: 0x8000 | isMmapped,
			}}
			var got [][2]uint64
			glibc.ScanMmapped(mem, layouts.Layout{}, *empty, 0, func(ch glibc.MmappedChunk) bool {
				r := ch.Region()
				got = append(got, [2]uint64{r.Start - empty.Start, r.End - empty.Start})
				return true
			})
			if !slices.Equal(got, c.want) {
				t.Errorf("planted headers at %d-byte pages: found %#x, want %#x", c.page, got, c.want)
			}
		})
	}
}
