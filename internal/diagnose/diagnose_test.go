package diagnose

import (
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
)

const mib = 1 << 20

func reportOf(arenas ...mallocinfo.Arena) *report.Report {
	mi := &mallocinfo.Info{Arenas: arenas}
	for i := range arenas {
		mi.Arenas[i].Index = i
		mi.SystemCurrent += arenas[i].SystemCurrent
		mi.RestBytes += arenas[i].RestBytes
		mi.FastBytes += arenas[i].FastBytes
	}
	return &report.Report{Libc: report.LibcInfo{Version: layouts.Version{Major: 2, Minor: 36}}, Threads: 20, Malloc: mi}
}

func ids(fs []Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.ID)
	}
	return strings.Join(s, ",")
}

func TestArenaBloat(t *testing.T) {
	var as []mallocinfo.Arena
	for i := 0; i < 16; i++ {
		as = append(as, mallocinfo.Arena{SystemCurrent: 64 * mib, RestBytes: 40 * mib})
	}
	r := reportOf(as...)
	fs := Diagnose(r, Env{OnlineCPUs: 2, AffinityCPUs: 2, Vars: map[string]string{}})
	// Without RSS (as from a core) the free memory also counts as
	// fragmentation; the arena finding, larger and critical, comes first.
	if !strings.HasPrefix(ids(fs), "arena-bloat") {
		t.Fatalf("findings %s", ids(fs))
	}
	f := fs[0]
	if f.Severity != Critical || f.Savings != 15*40*mib || !strings.Contains(f.Fix, "MALLOC_ARENA_MAX=2") {
		t.Errorf("%+v", f)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "up to 16 arenas here (8 × 2 CPUs in the process's affinity mask)") {
		t.Errorf("evidence %q", f.Evidence)
	}
	// With the limit set, by variable or tunable, nothing to say.
	for _, vars := range []map[string]string{{"MALLOC_ARENA_MAX": "2"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}} {
		if fs := Diagnose(r, Env{Vars: vars}); strings.Contains(ids(fs), "arena-bloat") {
			t.Errorf("%v: %s", vars, ids(fs))
		}
	}
}

func TestFragmentationNeedsResidentFreeMemory(t *testing.T) {
	r := reportOf(mallocinfo.Arena{SystemCurrent: 200 * mib, RestBytes: 180 * mib})
	heap := func(rss uint64) {
		r.Maps = report.MapsSummary{Classes: []maps.ClassSummary{{Class: maps.ClassMainHeap, Rss: rss}}, Rollup: maps.Rollup{Rss: rss + 10*mib}}
	}
	heap(200 * mib)
	fs := Diagnose(r, Env{})
	if ids(fs) != "fragmentation" || fs[0].Savings != 180*mib {
		t.Fatalf("%s %+v", ids(fs), fs)
	}
	heap(25 * mib) // after a trim: the free pages are no longer resident
	if fs := Diagnose(r, Env{}); len(fs) != 0 {
		t.Fatalf("after trim: %s", ids(fs))
	}
}

func TestThresholdsAndStacks(t *testing.T) {
	r := reportOf(mallocinfo.Arena{SystemCurrent: 10 * mib})
	r.ReadOnly = &report.ReadOnly{Walk: &glibc.Walk{Params: glibc.Params{MmapThreshold: 8 * mib, TrimThreshold: 16 * mib}}}
	r.Maps = report.MapsSummary{
		Classes: []maps.ClassSummary{{Class: maps.ClassThreadStack, Count: 48, Rss: 96 * mib}, {Class: maps.ClassMainHeap, Rss: 10 * mib}},
		Rollup:  maps.Rollup{Rss: 120 * mib},
	}
	fs := Diagnose(r, Env{})
	if got := ids(fs); got != "mmap-threshold-raised,thread-stacks" && got != "thread-stacks,mmap-threshold-raised" {
		t.Fatalf("findings %s", got)
	}
	r.ReadOnly.Walk.Params.NoDynThreshold = true // MALLOC_MMAP_THRESHOLD_ set: fixed
	if got := ids(Diagnose(r, Env{})); got != "thread-stacks" {
		t.Fatalf("with a fixed threshold: %s", got)
	}
}

// spentArenasReport is 16 arenas whose memory is all in use, their thread
// arenas' heaps reserving 64 MiB each, as after 15 threads ran at once and
// ended (testdata/spentarenas.c).
func spentArenasReport(threads int) *report.Report {
	var as []mallocinfo.Arena
	for i := 0; i < 16; i++ {
		as = append(as, mallocinfo.Arena{SystemCurrent: 132 << 10, RestBytes: 1 << 10})
	}
	r := reportOf(as...)
	r.Threads = threads
	r.Maps = report.MapsSummary{
		Classes: []maps.ClassSummary{{Class: maps.ClassMainHeap, Size: 132 << 10, Rss: 20 << 10},
			{Class: maps.ClassArenaHeap, Count: 30, Size: 15 * 64 * mib, Rss: 2 * mib}},
		Rollup: maps.Rollup{Rss: 4 * mib},
	}
	return r
}

func TestArenasOutliveThreads(t *testing.T) {
	env := Env{OnlineCPUs: 2, AffinityCPUs: 2, Vars: map[string]string{}}
	fs := Diagnose(spentArenasReport(1), env)
	if ids(fs) != "arenas-outlive-threads" {
		t.Fatalf("findings %s", ids(fs))
	}
	f := fs[0]
	ev := strings.Join(f.Evidence, "\n")
	for _, want := range []string{
		"16 arenas (main + 15 thread arenas) for 1 live thread(s)",
		"reserve 960.0 MiB of address space",
		"2.0 MiB of it is resident",
		"nothing to give back now",
		"up to 16 arenas here",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
	if f.Severity != Info || f.Savings != 0 || !strings.Contains(f.Fix, "MALLOC_ARENA_MAX=2 (or GLIBC_TUNABLES=glibc.malloc.arena_max=2)") {
		t.Errorf("%+v", f)
	}

	// One arena per live thread is glibc as designed; a few spare arenas
	// are not worth a line; a chosen limit silences it, as arena-bloat.
	if fs := Diagnose(spentArenasReport(16), env); len(fs) != 0 {
		t.Errorf("16 arenas for 16 threads: %s", ids(fs))
	}
	if fs := Diagnose(spentArenasReport(0), env); len(fs) != 0 {
		t.Errorf("thread count unknown: %s", ids(fs))
	}
	few := spentArenasReport(1)
	few.Malloc.Arenas = few.Malloc.Arenas[:4]
	if fs := Diagnose(few, env); len(fs) != 0 {
		t.Errorf("4 arenas for 1 thread: %s", ids(fs))
	}
	for _, vars := range []map[string]string{{"MALLOC_ARENA_MAX": "16"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=16"}} {
		if fs := Diagnose(spentArenasReport(1), Env{Vars: vars}); len(fs) != 0 {
			t.Errorf("%v: %s", vars, ids(fs))
		}
	}

	// From a core: no RSS, sizes only.
	core := spentArenasReport(1)
	core.Maps.Rollup = maps.Rollup{}
	if fs := Diagnose(core, Env{}); ids(fs) != "arenas-outlive-threads" || strings.Contains(strings.Join(fs[0].Evidence, "\n"), "resident") {
		t.Errorf("core: %s %+v", ids(fs), fs)
	}

	// glibc before 2.26 has no tunables by default (2.25 only when built
	// --enable-tunables): only the variable is offered.
	for _, minor := range []int{24, 25} {
		old := spentArenasReport(1)
		old.Libc.Version = layouts.Version{Major: 2, Minor: minor}
		if fs := Diagnose(old, env); len(fs) != 1 || strings.Contains(fs[0].Fix, "GLIBC_TUNABLES=") {
			t.Errorf("2.%d: %+v", minor, fs)
		}
	}

	// Once freed memory piles up in them, it is arena bloat, not this.
	bloat := spentArenasReport(1)
	for i := range bloat.Malloc.Arenas {
		bloat.Malloc.Arenas[i].RestBytes = 2 * mib
		bloat.Malloc.Arenas[i].SystemCurrent = 3 * mib
	}
	if got := ids(Diagnose(bloat, env)); strings.Contains(got, "arenas-outlive-threads") || !strings.Contains(got, "arena-bloat") {
		t.Errorf("with 30 MiB free: %s", got)
	}
}

// A program's own 50 MiB malloc'd block is an mmapped chunk: a mapping of
// its own, anonymous and not a heap, but malloc's. It is not "memory
// outside the malloc heaps" (issue 22, item 7); memory beyond what the
// mmapped chunks can hold still is.
func TestMmappedChunksAreMallocs(t *testing.T) {
	r := reportOf(mallocinfo.Arena{SystemCurrent: 1 * mib})
	r.Malloc.HasMmap, r.Malloc.MmapCount, r.Malloc.MmapBytes = true, 1, 50*mib+4096
	anon := func(rss uint64) {
		r.Maps = report.MapsSummary{Classes: []maps.ClassSummary{{Class: maps.ClassAnon, Count: 2, Rss: rss}, {Class: maps.ClassMainHeap, Rss: mib}},
			Rollup: maps.Rollup{Rss: rss + 3*mib}}
	}
	anon(50*mib + 4096)
	if fs := Diagnose(r, Env{}); strings.Contains(ids(fs), "anonymous-outside-malloc") {
		t.Fatalf("the mmapped chunk is reported as outside malloc: %+v", fs)
	}
	anon(150 * mib) // 100 MiB more that no chunk explains
	fs := Diagnose(r, Env{})
	if ids(fs) != "anonymous-outside-malloc" || !strings.Contains(fs[0].Evidence[0], "100.0 MiB resident") {
		t.Fatalf("%+v", fs)
	}
	// The read-only walk's count of the chunks serves as well.
	r.Malloc.MmapBytes = 0
	r.ReadOnly = &report.ReadOnly{Walk: &glibc.Walk{Mmapped: glibc.MmappedChunks{Count: 1, Bytes: 150 * mib}}}
	if fs := Diagnose(r, Env{}); len(fs) != 0 {
		t.Fatalf("%+v", fs)
	}
}
