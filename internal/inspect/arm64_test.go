package inspect_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The committed aarch64 kernel cores (testdata/cores/arm64, made in the
// emulated Debian 12 arm64 of docs/arm64.md) read on any machine, at 4 KiB
// and 16 KiB pages, with their libc from the fixtures' sysroot as --sysroot
// gives it (and, for info, from memory alone): info's malloc_info is byte for byte the XML glibc 2.36 printed
// in the target just before its core was taken, every thread's tcache is
// found (aarch64's TLS is variant I, its tcache has no GOT slot of its
// own), and heap classes every object as heapobjs told it about itself
// and names the object that pins an arena's free memory.
var arm64Fixtures = []string{"2.36-kernel", "2.36-16k-kernel"}

// arm64Page is each fixture's page size (AT_PAGESZ), which malloc_trim
// rounds to.
var arm64Page = map[string]uint64{"2.36-kernel": 4096, "2.36-16k-kernel": 16384}

func arm64Dir(t *testing.T) (dir, sysroot string) {
	dir = filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arm64")
	return dir, filepath.Join(dir, "sysroot")
}

func TestAArch64CoreInfoIsMallocInfo(t *testing.T) {
	dir, sysroot := arm64Dir(t)
	for _, fx := range arm64Fixtures {
		t.Run(fx, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(dir, "arenas-"+fx+".xml"))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := inspect.Core(context.Background(), filepath.Join(dir, "arenas-"+fx+".core.zst"), inspect.CoreOptions{Sysroot: sysroot})
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Malloc.Raw; string(got) != string(want) {
				t.Fatalf("the walk's XML differs from glibc's malloc_info\n--- glibc\n%s\n--- walk\n%s", want, got)
			}
			// testdata/arenas.c: the main thread and 2 workers, each
			// allocating, so each has a tcache and an arena of its own.
			if rep.ReadOnly == nil || len(rep.ReadOnly.Tcaches) != 3 {
				t.Fatalf("the threads' tcaches: %+v, want 3", rep.ReadOnly)
			}
			arenas := map[uint64]bool{}
			for _, th := range rep.ReadOnly.Tcaches {
				if th.Addr == 0 || th.Chunks == 0 || th.Arena == 0 {
					t.Errorf("thread %d: tcache %#x holding %d chunks, arena %#x; want each found", th.Tid, th.Addr, th.Chunks, th.Arena)
				}
				arenas[th.Arena] = true
			}
			if len(arenas) != 3 {
				t.Errorf("the threads are on %d arenas, want 3", len(arenas))
			}
			// What malloc_trim could give back is in the target's pages
			// (GLRO(dl_pagesize)), not 4 KiB ones.
			ps := arm64Page[fx]
			for _, a := range rep.ReadOnly.Walk.Arenas {
				for _, r := range a.TrimRanges {
					if r.Start%ps != 0 || r.End%ps != 0 || r.End <= r.Start {
						t.Errorf("arena %#x: trimmable range %#x-%#x is not in %d-byte pages", a.Addr, r.Start, r.End, ps)
					}
				}
			}
			// From the core's memory alone (no libc file), the same bytes.
			o := inspect.CoreOptions{Sysroot: sysroot}
			o.NoLibcFile = true
			mem, err := inspect.Core(context.Background(), filepath.Join(dir, "arenas-"+fx+".core.zst"), o)
			if err != nil {
				t.Fatal(err)
			}
			if got := mem.Malloc.Raw; string(got) != string(want) {
				t.Fatalf("from memory alone, the walk's XML differs from glibc's malloc_info\n--- glibc\n%s\n--- walk\n%s", want, got)
			}
		})
	}
}

var arm64Classes = map[string]string{"static": "static", "stack": "stack", "leaked": "leaked", "inner": "leaked (only from leaked)"}

func TestAArch64CoreHeapClassesAsTheTargetSays(t *testing.T) {
	dir, sysroot := arm64Dir(t)
	for _, fx := range arm64Fixtures {
		t.Run(fx, func(t *testing.T) {
			f, err := os.Open(filepath.Join(dir, "heapobjs-"+fx+".truth"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			type obj struct{ class, typ string }
			want := map[uint64]obj{}
			var addrs []uint64
			var pin uint64 // the PinObj, which keeps its arena's free memory in the heap
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				w := strings.Fields(sc.Text())
				if len(w) == 3 && w[0] == "pin" {
					if pin, err = strconv.ParseUint(w[1], 0, 64); err != nil {
						t.Fatalf("truth line %q", sc.Text())
					}
					continue
				}
				if len(w) != 3 {
					continue
				}
				a, err := strconv.ParseUint(w[1], 0, 64)
				if err != nil || arm64Classes[w[0]] == "" {
					t.Fatalf("truth line %q", sc.Text())
				}
				want[a] = obj{arm64Classes[w[0]], w[2]}
				addrs = append(addrs, a)
			}
			if len(addrs) < 15 {
				t.Fatalf("%d objects in the truth", len(addrs))
			}
			rep, err := inspect.CoreContents(context.Background(), filepath.Join(dir, "heapobjs-"+fx+".core.zst"), inspect.CoreOptions{Sysroot: sysroot}, addrs)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Lookups) != len(addrs) {
				t.Fatalf("%d lookups for %d addresses", len(rep.Lookups), len(addrs))
			}
			pinned := false
			for _, a := range rep.Arenas {
				pinned = pinned || a.Highest == pin && a.HighestTyp == "PinObj" && a.FreeBelow > 0
			}
			if pin == 0 || !pinned {
				t.Errorf("the PinObj at %#x is not named as the highest chunk below its arena's top: %+v", pin, rep.Arenas)
			}
			for _, l := range rep.Lookups {
				w := want[l.Addr]
				switch {
				case !l.Found || l.Chunk != l.Addr:
					t.Errorf("the %s %s at %#x: found %v, in the chunk at %#x", w.class, w.typ, l.Addr, l.Found, l.Chunk)
				case w.typ != "-" && l.Type != w.typ:
					t.Errorf("%#x is a %s, arenactl says %s", l.Addr, w.typ, l.Type)
				case l.Class != w.class:
					t.Errorf("the %s at %#x is %s, arenactl says %s", w.typ, l.Addr, w.class, l.Class)
				}
			}
		})
	}
}
