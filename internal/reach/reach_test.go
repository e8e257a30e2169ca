package reach

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// openIndexed opens a committed core's heap, with no libc file, and
// indexes its chunks; the core is closed when the test ends.
func openIndexed(t *testing.T, path string) (*heap.Heap, *chunks.Index) {
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
	ix, err := chunks.Build(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, ix
}

// The sweeps in address order against the plainest marking there is: a
// work list from each root kind, every word of every chunk reached looked
// up, then every unreached chunk's words. Over the committed cores (no
// root, no compiler, no libc file), every allocated chunk must get the
// class the plain marking gives it, and the counts must add up to the
// index's.
func TestScanAgreesWithAPlainMarking(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-*.core.zst"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no core fixtures: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h, ix := openIndexed(t, path)
			roots := Roots(h.T, ix, 0)
			visited := map[uint64]bool{}
			res, err := Scan(context.Background(), h.T, ix, roots, func(c chunks.Chunk, leaked bool, head []byte) {
				if visited[c.Addr] {
					t.Errorf("chunk %#x handed to the visitor twice", c.Addr)
				}
				visited[c.Addr] = true
			})
			if err != nil {
				t.Fatal(err)
			}
			want := plainMarking(h.T, ix, roots)
			var n, bytes uint64
			seen := map[Class]int{}
			ix.ForEach(func(ch chunks.Chunk) bool {
				n++
				bytes += ch.Size
				got := res.Class(ch)
				seen[got]++
				if got != want[ch.Addr] {
					t.Errorf("chunk %#x+%#x: %v, the plain marking says %v", ch.Addr, ch.Size, got, want[ch.Addr])
				}
				if !visited[ch.Addr] {
					t.Errorf("chunk %#x never handed to the visitor", ch.Addr)
				}
				return true
			})
			var cn, cb uint64
			for cl := range res.Count {
				cn += res.Count[cl]
				cb += res.Bytes[cl]
			}
			if cn != n || cb != bytes || n != ix.Count || bytes != ix.Bytes {
				t.Errorf("classes count %d chunks, %d bytes; the index holds %d (%d), %d bytes (%d)", cn, cb, n, ix.Count, bytes, ix.Bytes)
			}
			if seen[Static] == 0 {
				t.Errorf("nothing reachable from static data: %v", seen)
			}
			t.Logf("%v", seen)
		})
	}
}

// plainMarking is the classification by its definition, with nothing of
// the scanner's order or caching.
func plainMarking(mem debuggee.Target, ix *chunks.Index, roots []Root) map[uint64]Class {
	class := map[uint64]Class{}
	words := func(lo, hi uint64, fn func(uint64)) {
		var page [4096]byte
		for p := (lo + 7) &^ 7; p+8 <= hi; {
			end := min(hi, (p&^4095)+4096)
			b := page[:end-p]
			if n, err := mem.ReadAt(b, p); err != nil || n != len(b) {
				p = end
				continue
			}
			for off := 0; off+8 <= len(b); off += 8 {
				fn(binary.LittleEndian.Uint64(b[off:]))
			}
			p = end
		}
	}
	find := func(v, self uint64) (chunks.Chunk, bool) {
		c, ok := ix.Find(v)
		return c, ok && c.Addr != self
	}
	for _, pass := range []struct {
		static bool
		cl     Class
	}{{true, Static}, {false, Stack}} {
		var work []chunks.Chunk
		reach := func(v, self uint64) {
			if c, ok := find(v, self); ok && class[c.Addr] == Unreached {
				class[c.Addr] = pass.cl
				work = append(work, c)
			}
		}
		for _, r := range roots {
			if r.Kind.static() != pass.static {
				continue
			}
			if r.Kind == RootRegs {
				for _, v := range r.regs {
					reach(v, 0)
				}
				continue
			}
			words(r.Start, r.End, func(v uint64) { reach(v, 0) })
		}
		for len(work) > 0 {
			c := work[len(work)-1]
			work = work[:len(work)-1]
			words(c.User(), c.UserEnd(), func(v uint64) { reach(v, c.Addr) })
		}
	}
	var lost []chunks.Chunk
	ix.ForEach(func(c chunks.Chunk) bool {
		if class[c.Addr] == Unreached {
			lost = append(lost, c)
		}
		return true
	})
	inner := map[uint64]bool{}
	for _, c := range lost {
		words(c.User(), c.UserEnd(), func(v uint64) {
			if d, ok := find(v, c.Addr); ok && class[d.Addr] == Unreached {
				inner[d.Addr] = true
			}
		})
	}
	for _, c := range lost {
		class[c.Addr] = Leaked
		if inner[c.Addr] {
			class[c.Addr] = LeakedInner
		}
	}
	return class
}

// A scan whose context is done ends with its error, not a result: Ctrl-C
// or SIGTERM ends arenactl heap (cmd maps context.Canceled to exit 130).
func TestScanEndsWithItsContext(t *testing.T) {
	h, ix := openIndexed(t, filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-2.36-kernel.core.zst"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := Scan(ctx, h.T, ix, Roots(h.T, ix, 0), nil); !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("Scan with its context done: %v, %v", res, err)
	}
}
