package diagnose

import (
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
)

const mib = 1 << 20

func reportOf(arenas ...glibc.Arena) *report.Report {
	mi := &glibc.MallocInfo{Arenas: arenas}
	for i := range arenas {
		mi.Arenas[i].Index = i
		mi.SystemCurrent += arenas[i].SystemCurrent
		mi.RestBytes += arenas[i].RestBytes
		mi.FastBytes += arenas[i].FastBytes
	}
	return &report.Report{Libc: report.LibcInfo{Version: glibc.Version{Major: 2, Minor: 36}}, Threads: 20, Malloc: mi}
}

func ids(fs []Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.ID)
	}
	return strings.Join(s, ",")
}

func TestArenaBloat(t *testing.T) {
	var as []glibc.Arena
	for i := 0; i < 16; i++ {
		as = append(as, glibc.Arena{SystemCurrent: 64 * mib, RestBytes: 40 * mib})
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
	r := reportOf(glibc.Arena{SystemCurrent: 200 * mib, RestBytes: 180 * mib})
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
	r := reportOf(glibc.Arena{SystemCurrent: 10 * mib})
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
