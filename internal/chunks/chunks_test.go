package chunks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// fixtures are the committed snapshots of testdata/cores: no root, no
// compiler, no libc file needed (a snapshot records its allocator).
func fixtures(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-*-snapshot.core.zst"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no core fixtures: %v", err)
	}
	return paths
}

// openHeap opens a fixture's heap.
func openHeap(t *testing.T, path string) *heap.Heap {
	t.Helper()
	c, err := core.OpenTarget(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h, err := heap.OpenCore(c, heap.Options{NoLibcFile: true})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Every chunk the walk meets is counted once, in the state the walker's
// own counters put it in; every allocated chunk is found by its user
// pointer and by any address inside it, and by nothing else; free chunks
// are never found.
func TestIndexAgreesWithTheWalk(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := openHeap(t, path)
			var visited []glibc.Chunk
			ix, err := chunks.Build(h, func(c glibc.Chunk) { visited = append(visited, c) })
			if err != nil {
				t.Fatal(err)
			}
			w := ix.Walk
			per := map[glibc.ChunkState]uint64{}
			for _, c := range visited {
				per[c.State]++
			}
			var inUse, tcached, free, fast, tops uint64
			for _, a := range w.Arenas {
				if !a.Walked {
					t.Fatalf("arena %#x was not walked", a.Addr)
				}
				inUse += a.InUseChunks
				tcached += a.TcacheChunks
				free += a.FreeChunks
				fast += a.FastChunks
				if a.TopSize != 0 {
					tops++
				}
			}
			if per[glibc.ChunkInUse] != inUse-tcached || per[glibc.ChunkTcache] != tcached || per[glibc.ChunkFree] != free ||
				per[glibc.ChunkFast] != fast || per[glibc.ChunkTop] != tops || per[glibc.ChunkMmapped] != w.Mmapped.Count {
				t.Errorf("visited %v; the walk counts in use %d (tcache %d), free %d, fast %d, tops %d, mmapped %d",
					per, inUse, tcached, free, fast, tops, w.Mmapped.Count)
			}
			if ix.Count != per[glibc.ChunkInUse]+per[glibc.ChunkMmapped] {
				t.Errorf("index holds %d allocated chunks, the walk met %d", ix.Count, per[glibc.ChunkInUse]+per[glibc.ChunkMmapped])
			}
			found := 0
			for _, c := range visited {
				mid := c.User() + (c.UserEnd()-c.User())/2
				got, ok := ix.Find(mid)
				switch {
				case c.State.Allocated():
					found++
					if !ok || got.Addr != c.Addr || got.Size != c.Size {
						t.Fatalf("%v chunk %#x+%#x: Find(%#x) = %#x+%#x, %v", c.State, c.Addr, c.Size, mid, got.Addr, got.Size, ok)
					}
					if s, ok := ix.FindStart(c.User()); !ok || s.Addr != c.Addr {
						t.Fatalf("FindStart(%#x) = %#x, %v", c.User(), s.Addr, ok)
					}
					if _, ok := ix.FindStart(c.User() + 16); ok && c.UserEnd()-c.User() > 16 {
						t.Fatalf("FindStart found an interior pointer %#x", c.User()+16)
					}
					if got, ok := ix.Find(c.Addr + 8); ok {
						t.Fatalf("the size field of %#x found chunk %#x", c.Addr, got.Addr)
					}
				case c.State != glibc.ChunkTop && ok && got.Addr >= c.Addr:
					// Only the last 8 bytes of a free chunk may be the
					// chunk before it's; no address in its middle is.
					t.Fatalf("%v chunk %#x+%#x: Find(%#x) = %#x", c.State, c.Addr, c.Size, mid, got.Addr)
				}
			}
			n := uint64(0)
			sizes := map[uint64]uint64{}
			for _, c := range visited {
				sizes[c.Addr] = c.Size
			}
			ix.ForEach(func(c glibc.Chunk) bool {
				n++
				if got, ok := ix.FindStart(c.User()); !ok || got.Addr != c.Addr {
					t.Fatalf("ForEach gave %#x, which Find does not know", c.Addr)
				}
				if c.Size != sizes[c.Addr] {
					t.Fatalf("ForEach gave %#x a size of %#x; its header says %#x", c.Addr, c.Size, sizes[c.Addr])
				}
				return true
			})
			if n != ix.Count || uint64(found) != ix.Count {
				t.Errorf("ForEach gave %d chunks, Find found %d, the index counts %d", n, found, ix.Count)
			}
			for i, a := range ix.Arenas {
				if a.Top.Size == 0 {
					t.Errorf("arena %d: no top chunk", i)
				}
				if h := a.HighestUsed; h.Size != 0 && h.Addr+h.Size > a.Top.Addr {
					t.Errorf("arena %d: highest used chunk %#x+%#x is past top %#x", i, h.Addr, h.Size, a.Top.Addr)
				}
			}
			if bits, heapBytes := ix.Bits(), ix.Bytes+ix.FreeBytes; bits > heapBytes*3/2/16+heapBytes/16/32+4096 {
				t.Errorf("the index keeps %d bits for %d bytes of heap: more than 1.5 bits per 16 bytes", bits, heapBytes)
			}
		})
	}
}

// ForEachIn over pieces of every span, and over every mmapped chunk, meets
// every chunk ForEach does, once, in the same order; Load and CAS see and
// change the marks Get and Set do, and CAS only from the mark it is told.
func TestForEachInAndAtomicMarks(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ix, err := chunks.Build(openHeap(t, path), nil)
			if err != nil {
				t.Fatal(err)
			}
			var all, pieces []glibc.Chunk
			ix.ForEach(func(c glibc.Chunk) bool { all = append(all, c); return true })
			for _, sp := range ix.Spans() {
				for lo := sp[0]; lo < sp[1]; lo += 4096 + 16 { // pieces not aligned to slots
					ix.ForEachIn(lo, min(lo+4096+16, sp[1]), func(c glibc.Chunk) bool {
						if c.State != glibc.ChunkMmapped {
							pieces = append(pieces, c)
						}
						return true
					})
				}
			}
			ix.ForEachMmapped(func(m glibc.Chunk) {
				ix.ForEachIn(m.Addr, m.Addr+1, func(c glibc.Chunk) bool { pieces = append(pieces, c); return true })
			})
			if len(pieces) != len(all) {
				t.Fatalf("ForEachIn met %d chunks, ForEach %d", len(pieces), len(all))
			}
			for i := range all {
				if pieces[i] != all[i] {
					t.Fatalf("chunk %d: ForEachIn %+v, ForEach %+v", i, pieces[i], all[i])
				}
			}
			m := ix.NewMarks()
			for i, c := range all {
				v := uint8(i % 4)
				if !m.CAS(c, 0, v) && v != 0 {
					t.Fatalf("CAS 0->%d of chunk %d failed", v, i)
				}
				if m.CAS(c, v^1, 2) {
					t.Fatalf("CAS from %d succeeded on a chunk marked %d", v^1, v)
				}
			}
			for i, c := range all {
				if got := m.Get(c); got != uint8(i%4) || m.Load(c) != got {
					t.Fatalf("chunk %d: Get %d, Load %d, want %d", i, got, m.Load(c), i%4)
				}
			}
		})
	}
}
