package walk

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// tcacheTarget is what testdata/tcache.c says on its ready line: each
// thread's id (main thread first) and chunk size -> count it left in its
// tcache.
func tcacheTarget(t *testing.T, tg *testutil.Target) ([]int, map[int]map[uint64]uint64) {
	t.Helper()
	var tids []int
	want := map[int]map[uint64]uint64{}
	for _, f := range strings.Fields(tg.Ready())[1:] {
		tidS, binsS, ok := strings.Cut(f, ":")
		tid, err := strconv.Atoi(tidS)
		if !ok || err != nil {
			t.Fatalf("ready line %q", tg.Ready())
		}
		bins := map[uint64]uint64{}
		for _, b := range strings.Split(binsS, ",") {
			var size, n uint64
			if _, err := fmt.Sscanf(b, "%dx%d", &size, &n); err != nil {
				t.Fatalf("ready line %q: %v", tg.Ready(), err)
			}
			bins[size] = n
		}
		tids = append(tids, tid)
		want[tid] = bins
	}
	if len(tids) < 2 {
		t.Fatalf("ready line %q", tg.Ready())
	}
	return tids, want
}

// The read-only walk finds every thread's tcache with exactly the chunks the
// thread freed into it, and each thread's own arena, under every glibc: on
// 2.43 too, where tcache_perthread_struct has 76 bins counting free slots
// down from mp_.tcache_count (16).
func TestReadOnlyTcacheCounts(t *testing.T) {
	for _, r := range glibcRuns(t, "tcache.c") {
		t.Run(r.name, func(t *testing.T) {
			tg := r.start(t, "4")
			tids, want := tcacheTarget(t, tg)
			got := readOnlyInfo(t, fmt.Sprint(tg.Pid))
			ro := got.ReadOnly
			if len(ro.Damage) > 0 {
				t.Errorf("damage: %+v", ro.Damage)
			}
			if got.Libc.Version == "2.43" && ro.Params.TcacheCount != 16 {
				t.Errorf("2.43: mp_.tcache_count %d, want 16", ro.Params.TcacheCount)
			}
			threads := map[int]jsonThread{}
			for _, th := range ro.Threads {
				threads[th.Tid] = th
			}
			arenaOf := map[int]int{} // arena index -> tid
			for i, tid := range tids {
				th, ok := threads[tid]
				if !ok {
					t.Errorf("thread %d: not in read_only.threads %+v", tid, ro.Threads)
					continue
				}
				bins := map[uint64]uint64{}
				var chunks, bytes uint64
				for _, b := range th.TcacheBins {
					bins[b.Size] += b.Count
					chunks += b.Count
					bytes += b.Count * b.Size
				}
				// The target allocates nothing else after filling its
				// tcaches, so no other bin may hold anything.
				if !maps.Equal(bins, want[tid]) || th.TcacheChunks != chunks || th.TcacheBytes != bytes {
					t.Errorf("thread %d: tcache %+v (%d chunks, %d bytes), want %v", tid, th.TcacheBins, th.TcacheChunks, th.TcacheBytes, want[tid])
				}
				if th.Tcache == 0 || th.Arena == nil {
					t.Errorf("thread %d: tcache %#x, arena %v", tid, th.Tcache, th.Arena)
					continue
				}
				a := *th.Arena
				if i == 0 && a != 0 {
					t.Errorf("main thread %d: arena %d, want 0 (main_arena)", tid, a)
				}
				if i > 0 && a == 0 {
					t.Errorf("thread %d: on main_arena, want an arena of its own", tid)
				}
				if other, dup := arenaOf[a]; dup {
					t.Errorf("threads %d and %d share arena %d", other, tid, a)
				}
				arenaOf[a] = tid
			}
			if len(got.Arenas) != len(tids) {
				t.Errorf("%d arenas for %d threads", len(got.Arenas), len(tids))
			}
			if line := tg.Send("quit"); line != "bye" {
				t.Errorf("target: %q", line)
			}
		})
	}
}
