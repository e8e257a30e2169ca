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
// loader running ahead) gives what the walk of the memory in place gives,
// free lists and every chunk, on every core of testdata/cores.
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
			walk := func(mem glibc.Memory) (string, string) {
				w, caches, err := glibc.WalkAll(mem, h.Libc, h.Layout, h.Anchors, c.Mappings(), tls)
				if err != nil {
					t.Fatal(err)
				}
				full, err := json.Marshal(struct {
					W *glibc.Walk
					C []glibc.ThreadCache
				}{w, caches})
				if err != nil {
					t.Fatal(err)
				}
				l, err := glibc.WalkLists(mem, h.Layout, h.Anchors, c.Mappings())
				if err != nil {
					t.Fatal(err)
				}
				lists, err := json.Marshal(l)
				if err != nil {
					t.Fatal(err)
				}
				return string(full), string(lists)
			}
			wantFull, wantLists := walk(c)
			for _, m := range []struct {
				how   string
				mem   glibc.Memory
				small bool // no arena fits a copy whole: copied a page at a time (prewalkParts, loadPart)
				// tiny: besides, no room for a block of cache and few links
				// recorded, so that the walk reads most of the lists
				// itself, recycling its cache and reading words alone
				// (the bounds a small memory budget sets).
				tiny bool
			}{
				{"copied whole, no page map", copied{mem: c}, false, false},
				{"copied whole", copiedRuns{copied{mem: c}}, false, false},
				{"copied with holes", copiedRuns{copied{mem: c, holes: true, ms: c.Mappings()}}, false, false},
				{"copied a page at a time", copiedRuns{copied{mem: c}}, true, false},
				{"copied a page at a time, with holes", copiedRuns{copied{mem: c, holes: true, ms: c.Mappings()}}, true, false},
				{"copied a page at a time, cache and links bounded", copiedRuns{copied{mem: c}}, true, true},
				{"in place, cache and links bounded", c, false, true},
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
				full, lists := walk(m.mem)
				restore()
				if full != wantFull {
					t.Errorf("%s: the full walk differs\n--- in place\n%s\n--- %s\n%s", m.how, wantFull, m.how, full)
				}
				if lists != wantLists {
					t.Errorf("%s: the walk of the lists differs\n--- in place\n%s\n--- %s\n%s", m.how, wantLists, m.how, lists)
				}
			}
		})
	}
}
