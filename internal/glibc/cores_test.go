package glibc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The walker's main property, at package level: over every core of
// testdata/cores (scripts/make-core-fixtures.sh), the malloc_info it
// renders is byte for byte the one glibc itself printed when the core was
// taken. It needs neither root nor a compiler: the cores are committed, and
// the libc files are read only where this machine has them. (Checked as
// nobody, with no compiler on PATH: setpriv --reuid=nobody --regid=nogroup
// --clear-groups env -i PATH=/usr/local/go/bin CGO_ENABLED=0 GOPROXY=off
// GOCACHE=... GOMODCACHE=... go test -run TestWalkCoreFixtures.)
//
// cmd/arenactl's TestCoreFixtures checks the same through the binary, with
// the flags that choose a libc; this one checks the walk itself, and the
// numbers a walk finds that malloc_info does not print.

// coreHeap is what walkCore found in a core.
type coreHeap struct {
	libc    *libc.Libc // Source says which way it was found
	memID   string     // libc's build-id as the core's memory holds it
	walk    *glibc.Walk
	caches  []glibc.ThreadCache
	threads int  // threads in the core
	exact   bool // the XML is glibc's (whichever version memory alone fits)
}

// walkCore opens the core at path and walks its heap, with libc found from
// the snapshot's allocator note when the core has one, else from libcFile
// when it is not "", else from memory alone. No other file is opened: the
// sysroot is an empty directory and there are no debug directories. It is
// the one place in this file that knows how a core is opened and walked.
func walkCore(t *testing.T, path, libcFile string) *coreHeap {
	t.Helper()
	c, err := core.OpenTarget(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h, err := heap.OpenCore(c, heap.Options{LibcFile: libcFile, NoLibcFile: libcFile == ""})
	if err != nil {
		t.Fatal(err)
	}
	ch := &coreHeap{libc: h.Libc, threads: len(c.Threads())}
	if first, ok := libc.LibcMapping(c.Mappings()); ok {
		ch.memID, _ = glibc.BuildIDInMemory(c, first.Start)
	}
	if libcFile != "" && ch.libc.Source != glibc.SourceFile {
		t.Fatalf("libc from %v, not the file %s: %q", ch.libc.Source, libcFile, h.LibcNotes)
	}
	h.Jobs = 1
	if ch.walk, ch.caches, err = h.Walk(); err != nil {
		t.Fatal(err)
	}
	ch.exact = ch.walk.Exact
	// Spread over workers, the walk is the same to the byte, and a
	// visitor is handed the same chunks in the same order.
	one := walkJSON(t, ch.walk, ch.caches)
	visits := func() string {
		var got []glibc.Chunk
		if _, _, err := h.WalkChunks(func(c glibc.Chunk) { got = append(got, c) }); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got)
	}
	oneVisits := visits()
	for _, jobs := range []int{2, 7, 16} {
		h.Jobs = jobs
		w, caches, err := h.Walk()
		if err != nil {
			t.Fatal(err)
		}
		if got := walkJSON(t, w, caches); got != one {
			t.Fatalf("%d workers: the walk differs from one walker's\n--- one\n%s\n--- %d\n%s", jobs, one, jobs, got)
		}
		if got := visits(); got != oneVisits {
			t.Fatalf("%d workers: the chunks visited differ from one walker's\n--- one\n%s\n--- %d\n%s", jobs, oneVisits, jobs, got)
		}
	}
	h.Jobs = 1
	return ch
}

// walkJSON is all a walk found, as text to compare.
func walkJSON(t *testing.T, w *glibc.Walk, caches []glibc.ThreadCache) string {
	t.Helper()
	b, err := json.Marshal(struct {
		W *glibc.Walk
		C []glibc.ThreadCache
	}{w, caches})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWalkCoreFixtures(t *testing.T) {
	for _, fx := range testutil.CoreFixtures(t) {
		t.Run(fx.Name, func(t *testing.T) {
			if fx.Kind == "snapshot" {
				h := walkCore(t, fx.Core, "")
				if h.libc.Source != glibc.SourceRecord || h.libc.Version.String() != fx.Version || !h.exact {
					t.Errorf("libc %s from %v, exact %v; want %s from the note, exact", h.libc.Version, h.libc.Source, h.exact, fx.Version)
				}
				sameXML(t, "the snapshot", fx.XML, h.walk)
				checkWalk(t, h, true)
				return
			}
			mem := walkCore(t, fx.Core, "")
			if mem.libc.Source != glibc.SourceMemory || mem.memID == "" || len(mem.caches) != 0 {
				t.Errorf("memory alone: libc from %v, build-id %q, %d tcaches", mem.libc.Source, mem.memID, len(mem.caches))
			}
			if !versionIn(fx.Version, mem.libc) {
				t.Errorf("memory alone: glibc %s to %s, the core's is %s", mem.libc.MinVersion, mem.libc.Version, fx.Version)
			}
			if mem.exact || mem.libc.Version.String() == fx.Version {
				sameXML(t, "memory alone", fx.XML, mem.walk)
			} else {
				sameTotals(t, fx.XML, mem.walk.Malloc.Raw)
			}
			// Memory alone cannot tell 2.30 from 2.31, which print
			// differently: libc's file name, libc-2.31.so, does.
			if fx.Version == "2.31" && (!mem.exact || !mem.libc.MinVersion.IsZero()) {
				t.Errorf("the 2.31 core from memory: glibc %s to %s, exact %v; its file name says 2.31", mem.libc.MinVersion, mem.libc.Version, mem.exact)
			}
			checkWalk(t, mem, false)

			libc := testutil.LibcFileFor(t, fx.Version)
			switch {
			case libc == "":
				t.Logf("no glibc %s here (scripts/fetch-glibc.sh): the core is read from memory alone", fx.Version)
				return
			case testutil.FileBuildID(t, libc) != mem.memID:
				// The system's libc, updated since the fixture was made.
				t.Logf("%s is of build %s, the core's libc of %s: read from memory alone", libc, testutil.FileBuildID(t, libc), mem.memID)
				return
			}
			h := walkCore(t, fx.Core, libc)
			if h.libc.Version.String() != fx.Version || !h.exact {
				t.Errorf("with %s: glibc %s, exact %v", libc, h.libc.Version, h.exact)
			}
			sameXML(t, "with "+libc, fx.XML, h.walk)
			checkWalk(t, h, true)
			// Both ways find the same allocator.
			if h.walk.Anchors.MainArena != mem.walk.Anchors.MainArena || h.walk.Anchors.Mp != mem.walk.Anchors.Mp {
				t.Errorf("main_arena, mp_: %#x, %#x with the file, %#x, %#x from memory", h.walk.Anchors.MainArena, h.walk.Anchors.Mp,
					mem.walk.Anchors.MainArena, mem.walk.Anchors.Mp)
			}
		})
	}
}

func sameXML(t *testing.T, how string, want []byte, w *glibc.Walk) {
	t.Helper()
	if got := w.Malloc.Raw; string(got) != string(want) {
		t.Fatalf("%s: the walk's XML differs from glibc's malloc_info\n--- glibc\n%s\n--- walk\n%s", how, want, got)
	}
}

// checkWalk checks what the walk found beyond malloc_info, against what
// testdata/arenas.c did before the core was taken: the main thread and 2
// workers, each on an arena of its own, laid out 200 blocks (every second
// one freed), a chunk above the mmap threshold and 72 small blocks kept
// between small frees; then it stopped (or crashed) with no lock held, right
// after malloc_info. tcaches says the threads' tcaches could be found (the
// TLS slots come from libc's file or the snapshot's note).
func checkWalk(t *testing.T, h *coreHeap, tcaches bool) {
	t.Helper()
	w := h.walk
	if len(w.Damage) != 0 {
		t.Errorf("damage in an undamaged heap: %v", w.Damage)
	}
	if h.threads != 3 || len(w.Arenas) != 3 || len(w.Malloc.Arenas) != 3 {
		t.Fatalf("%d threads, %d arenas walked, %d in malloc_info; the target had 3 threads on 3 arenas", h.threads, len(w.Arenas), len(w.Malloc.Arenas))
	}
	// The scan for mmapped chunks finds no more than mp_ counts. It finds
	// fewer today where the kernel merged a chunk's mapping into the
	// anonymous mapping before it (the scan reads only from a mapping's
	// start), and in 2.43, whose mmapped chunks' sizes are not multiples of
	// the page size: logged, not failed, until the scan learns both.
	if mi := w.Malloc; w.Mmapped.Count > mi.MmapCount || w.Mmapped.Bytes > mi.MmapBytes {
		t.Errorf("%d mmapped chunks of %d bytes found, mp_ counts %d of %d", w.Mmapped.Count, w.Mmapped.Bytes, mi.MmapCount, mi.MmapBytes)
	} else if w.Mmapped.Count < mi.MmapCount {
		t.Logf("the scan finds %d of the %d mmapped chunks mp_ counts (%v)", w.Mmapped.Count, mi.MmapCount, w.Mmapped.Sizes)
	}
	var tcacheChunks uint64
	for i, a := range w.Arenas {
		if a.Main != (i == 0) || a.Mutex != 0 || !a.Walked || a.AttachedThreads != 1 {
			t.Errorf("arena %d at %#x: main %v, mutex %d, walked %v, %d threads attached; want each unlocked, walked, one thread's",
				i, a.Addr, a.Main, a.Mutex, a.Walked, a.AttachedThreads)
		}
		if !a.Main && len(a.Heaps) == 0 {
			t.Errorf("thread arena %#x: no heaps", a.Addr)
		}
		// At least the 100 kept blocks of the lay-out and the 72 small
		// ones; chunks cached in a tcache count as in use when the tcaches
		// are unknown.
		if inUse := a.InUseChunks - a.TcacheChunks; inUse < 172 {
			t.Errorf("arena %d: %d chunks in use (%d of them in tcaches), want at least 172", i, a.InUseChunks, a.TcacheChunks)
		}
		if a.FreeChunks == 0 {
			t.Errorf("arena %d: no free chunk, though every second block was freed", i)
		}
		tcacheChunks += a.TcacheChunks
	}
	if !tcaches {
		if tcacheChunks != 0 {
			t.Errorf("%d chunks counted as cached, with no tcache read", tcacheChunks)
		}
		return
	}
	if !w.TLS.HasTcache || !w.TLS.HasArena {
		t.Errorf("TLS slots %+v: tcache and thread_arena not both found", w.TLS)
	}
	if len(h.caches) != 3 {
		t.Fatalf("%d tcaches, want one for each of the 3 threads: %+v", len(h.caches), h.caches)
	}
	arenas := map[uint64]int{}
	var cached uint64
	for _, tc := range h.caches {
		if tc.Addr == 0 || tc.Chunks == 0 || tc.Arena == 0 {
			t.Errorf("thread %d: tcache %#x with %d chunks, arena %#x", tc.Tid, tc.Addr, tc.Chunks, tc.Arena)
		}
		arenas[tc.Arena]++
		cached += tc.Chunks
	}
	for _, a := range w.Arenas {
		if arenas[a.Addr] != 1 {
			t.Errorf("arena %#x is the thread_arena of %d threads, want 1: %+v", a.Addr, arenas[a.Addr], h.caches)
		}
	}
	if cached != tcacheChunks {
		t.Errorf("the tcaches hold %d chunks, the arenas count %d cached", cached, tcacheChunks)
	}
}

// versionIn reports whether glibc v is within the range memory alone
// found (Version alone when MinVersion is zero).
func versionIn(v string, l *libc.Libc) bool {
	var want layouts.Version
	if n, _ := fmt.Sscanf(v, "%d.%d", &want.Major, &want.Minor); n != 2 {
		return false
	}
	lo := l.MinVersion
	if lo == (layouts.Version{}) {
		lo = l.Version
	}
	return !want.Less(lo.Major, lo.Minor) && !l.Version.Less(want.Major, want.Minor)
}

// sameTotals checks two malloc_info reports agree on every arena's system,
// fast and rest totals and on the trailer's: what memory alone can promise
// when it fits versions that print differently.
func sameTotals(t *testing.T, want, got []byte) {
	t.Helper()
	w, err1 := mallocinfo.Parse(want)
	g, err2 := mallocinfo.Parse(got)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if len(w.Arenas) != len(g.Arenas) {
		t.Fatalf("%d arenas, glibc printed %d", len(g.Arenas), len(w.Arenas))
	}
	for i := range w.Arenas {
		a, b := w.Arenas[i], g.Arenas[i]
		if a.SystemCurrent != b.SystemCurrent || a.SystemMax != b.SystemMax || a.FastCount != b.FastCount || a.FastBytes != b.FastBytes ||
			a.RestCount != b.RestCount || a.RestBytes != b.RestBytes {
			t.Errorf("arena %d: %+v, glibc printed %+v", i, b, a)
		}
	}
	if w.SystemCurrent != g.SystemCurrent || w.RestBytes != g.RestBytes || w.FastBytes != g.FastBytes || w.MmapBytes != g.MmapBytes {
		t.Errorf("totals differ:\n%s\n%s", got, want)
	}
}
