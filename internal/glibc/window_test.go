package glibc_test

import (
	"encoding/json"
	"testing"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// copied is a core's memory as a live process's looks to the walker: read
// only through ReadAt (so the walker copies heaps instead of using the
// core's mapped file in place), read from two goroutines at once (so a
// loader runs ahead), and, when holes is set, with every third page of
// each heap said to hold no data (so the walker reads those one by one,
// past its copy). Only the heaps': the search for mmapped chunks trusts
// what the page map says, as a page that holds no data reads as zeros in a
// real process.
type copied struct {
	mem   glibc.Memory
	holes bool
	ms    []maps.Mapping
}

func (c copied) ReadAt(p []byte, addr uint64) (int, error) { return c.mem.ReadAt(p, addr) }

func (c copied) ReadsInParallel() {}

// alone is memory read through ReadAt by one walker only, as the walk of a
// core read in place was before its arenas could be spread over workers:
// the reference the others are compared with.
type alone struct{ mem glibc.Memory }

func (a alone) ReadAt(p []byte, addr uint64) (int, error) { return a.mem.ReadAt(p, addr) }

type copiedRuns struct{ copied }

func (c copiedRuns) DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error {
	const page = 4096
	for p := start; p < end; p += page {
		m, _ := maps.Find(c.ms, p)
		heap := m.Class == maps.ClassMainHeap || m.Class == maps.ClassArenaHeap
		fn(p, min(p+page, end), !c.holes || !heap || p/page%3 != 0)
	}
	return nil
}

// The walk of a copy of the heaps (whole, or with pages left out, with a
// loader running ahead, or by several workers) gives what one walker's walk
// of the memory in place gives, free lists and every chunk (also every
// chunk a visitor is handed, in the same order), on every core of
// testdata/cores.
func TestWalkOfCopiesIsTheSame(t *testing.T) {
	for _, fx := range testutil.CoreFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			c, err := core.OpenTarget(fx.Core, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h, err := heap.OpenCore(c, heap.Options{NoLibcFile: true})
			if err != nil {
				t.Fatal(err)
			}
			tls := c.Threads()
			walk := func(mem glibc.Memory, jobs int) (string, string) {
				w, caches, err := glibc.WalkAll(mem, h.Libc, h.Layout, h.Anchors, c.Mappings(), tls, jobs)
				if err != nil {
					t.Fatal(err)
				}
				// The chunks handed to a visitor, in the order given.
				var visited []glibc.Chunk
				vw, _, err := glibc.WalkChunks(mem, h.Libc, h.Layout, h.Anchors, c.Mappings(), tls, func(ch glibc.Chunk) {
					visited = append(visited, ch)
				}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				full, err := json.Marshal(struct {
					W, VW   *glibc.Walk
					C       []glibc.ThreadCache
					Visited []glibc.Chunk
				}{w, vw, caches, visited})
				if err != nil {
					t.Fatal(err)
				}
				l, err := glibc.WalkLists(mem, h.Layout, h.Anchors, c.Mappings(), jobs)
				if err != nil {
					t.Fatal(err)
				}
				lists, err := json.Marshal(l)
				if err != nil {
					t.Fatal(err)
				}
				return string(full), string(lists)
			}
			wantFull, wantLists := walk(alone{c}, 1)
			for _, m := range []struct {
				how   string
				mem   glibc.Memory
				small bool // no arena fits a copy whole: copied a page at a time (prewalkParts, loadPart)
				// tiny: besides, no room for a block of cache and few links
				// recorded, so that the walk reads most of the lists
				// itself, recycling its cache and reading words alone
				// (the bounds a small memory budget sets).
				tiny bool
				segs bool // every heap of more than two pages walked in segments by spare workers
				// table: the lists of an arena copied in parts go through
				// the table of free-looking places from the start.
				table bool
			}{
				{"the core target (read by workers, not copied ahead)", c, false, false, false, false},
				{"copied whole, no page map", copied{mem: c}, false, false, false, false},
				{"copied whole", copiedRuns{copied{mem: c}}, false, false, false, false},
				{"copied with holes", copiedRuns{copied{mem: c, holes: true, ms: c.Mappings()}}, false, false, false, false},
				{"copied a page at a time", copiedRuns{copied{mem: c}}, true, false, false, false},
				{"copied a page at a time, with holes", copiedRuns{copied{mem: c, holes: true, ms: c.Mappings()}}, true, false, false, false},
				{"copied a page at a time, cache and links bounded", copiedRuns{copied{mem: c}}, true, true, false, false},
				{"in place, cache and links bounded", c, false, true, false, false},
				{"the core target, in segments", c, false, false, true, false},
				{"copied with holes, in segments", copiedRuns{copied{mem: c, holes: true, ms: c.Mappings()}}, false, false, true, false},
				{"copied a page at a time, with holes, lists through the table", copiedRuns{copied{mem: c, holes: true, ms: c.Mappings()}}, true, false, false, true},
				{"copied a page at a time, lists through the table, cache and links bounded", copiedRuns{copied{mem: c}}, true, true, false, true},
			} {
				restore := func() {}
				if m.small {
					restore = glibc.SetWindowCap(4 << 10)
				}
				if m.tiny {
					r := restore
					undo := glibc.SetCacheLimits(1, 4)
					restore = func() { undo(); r() }
				}
				if m.table {
					r := restore
					undo := glibc.SetTableFirst()
					restore = func() { undo(); r() }
				}
				if m.segs {
					r := restore
					undo := glibc.SetSegMin(4 << 10)
					restore = func() { undo(); r() }
				}
				for _, jobs := range []int{1, 2, 7, 16} {
					full, lists := walk(m.mem, jobs)
					if full != wantFull {
						t.Errorf("%s, %d workers: the full walk differs\n--- in place, one walker\n%s\n--- %s\n%s", m.how, jobs, wantFull, m.how, full)
					}
					if lists != wantLists {
						t.Errorf("%s, %d workers: the walk of the lists differs\n--- in place, one walker\n%s\n--- %s\n%s", m.how, jobs, wantLists, m.how, lists)
					}
				}
				restore()
			}
		})
	}
}
