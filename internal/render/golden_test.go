package render_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/predict"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// go test ./internal/render -run TestGolden -update rewrites the golden
// files from what the renderers print now; review the diff before
// committing it.
var update = flag.Bool("update", false, "rewrite testdata/golden from the output")

// The reports rendered are built from the committed snapshot cores
// (testdata/cores: real processes of glibc 2.31 to 2.43, read without any
// libc file), so the text is that of real heaps; the reports no core can
// give (trim, snapshot, the findings) are made by hand. Paths are relative
// to this directory, the same on every machine.
const cores = "../../testdata/cores"

func coreReport(t *testing.T, name string) *report.Report {
	t.Helper()
	r, err := inspect.Core(context.Background(), filepath.Join(cores, name), inspect.CoreOptions{Jobs: 1, Options: heap.Options{NoLibcFile: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// golden compares out with testdata/golden/name, or writes it with -update.
func golden(t *testing.T, name string, out []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/render -run TestGolden -update writes it)", err)
	}
	if !bytes.Equal(want, out) {
		t.Errorf("%s differs from what render prints now; %s\n(-update rewrites it after review)\n%s", path, firstDiff(string(want), string(out)), out)
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl
		}
	}
	return "(same lines, different bytes)"
}

// info's table of each glibc's snapshot, and of a kernel core read from
// memory alone (no tcaches, the notes of what was tried).
func TestGoldenInfo(t *testing.T) {
	for _, name := range []string{"arenas-2.31-snapshot", "arenas-2.36-snapshot", "arenas-2.41-snapshot", "arenas-2.43-snapshot", "arenas-2.36-kernel"} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render.Info(&b, coreReport(t, name+".core.zst")); err != nil {
				t.Fatal(err)
			}
			golden(t, "info-"+name+".txt", b.Bytes())
		})
	}
}

// maps of a snapshot, by class and with every mapping.
func TestGoldenMaps(t *testing.T) {
	m, err := inspect.CoreMaps(context.Background(), filepath.Join(cores, "arenas-2.36-snapshot.core.zst"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, all := range []bool{false, true} {
		var b bytes.Buffer
		if err := render.Maps(&b, m, all); err != nil {
			t.Fatal(err)
		}
		name := "maps-arenas-2.36-snapshot.txt"
		if all {
			name = "maps-all-arenas-2.36-snapshot.txt"
		}
		golden(t, name, b.Bytes())
	}
}

// heap's contents of a snapshot, and its folded form.
func TestGoldenContents(t *testing.T) {
	c, err := inspect.CoreContents(context.Background(), filepath.Join(cores, "arenas-2.36-snapshot.core.zst"),
		inspect.CoreOptions{Jobs: 1, Options: heap.Options{NoLibcFile: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Scan = 25 * time.Millisecond // the one measured time: fixed
	var b bytes.Buffer
	if err := render.Contents(&b, c, 10); err != nil {
		t.Fatal(err)
	}
	golden(t, "contents-arenas-2.36-snapshot.txt", b.Bytes())
	b.Reset()
	if err := render.ContentsFolded(&b, c); err != nil {
		t.Fatal(err)
	}
	golden(t, "contents-folded-arenas-2.36-snapshot.txt", b.Bytes())
}

// diff of two processes' snapshots (arenas matched by address, all new or
// gone), and of one with itself.
func TestGoldenDiff(t *testing.T) {
	a := report.Summarize(coreReport(t, "arenas-2.36-snapshot.core.zst"), nil)
	b := report.Summarize(coreReport(t, "arenas-2.41-snapshot.core.zst"), nil)
	a.Source, b.Source = "before.json", "after.json"
	for _, c := range []struct {
		name   string
		before *report.Summary
		after  *report.Summary
	}{{"diff-2.36-2.41.txt", a, b}, {"diff-2.36-same.txt", a, a}} {
		var out bytes.Buffer
		if err := render.Diff(&out, report.Compare(c.before, c.after)); err != nil {
			t.Fatal(err)
		}
		golden(t, c.name, out.Bytes())
	}
}

// watch's header, two sample lines, the arena that changed and the closing
// summary, at fixed times: the second sample is the first with arena 1
// grown by 1 MiB in use (and the process's RSS with it).
func TestGoldenWatch(t *testing.T) {
	r := coreReport(t, "arenas-2.36-snapshot.core.zst")
	s1, s2 := report.Summarize(r, nil), report.Summarize(r, nil)
	s2.Arenas[1].SystemCurrent += 1 << 20
	s2.Arenas[1].InUse += 1 << 20
	s2.SystemCurrent += 1 << 20
	s2.Rollup.Rss += 1 << 20
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s1.Sample, s2.Sample = &report.Sample{Index: 1, Time: at}, &report.Sample{Index: 2, Time: at.Add(time.Second)}
	clock := render.WatchClock(time.Second)
	var b bytes.Buffer
	render.WatchHeader(&b, s1, "every 1s", clock)
	render.WatchSample(&b, at, clock, r, s1)
	render.WatchSample(&b, at.Add(time.Second), clock, r, s2)
	render.ArenaChanges(&b, report.Compare(s1, s2), 64<<10)
	render.WatchSummary(&b, 2, s1, s2, []uint64{s1.Rollup.Rss, s2.Rollup.Rss}, clock)
	golden(t, "watch.txt", b.Bytes())
}

// The findings under info's tables: none, and two of each severity's
// wording with their evidence, fix and savings.
func TestGoldenFindings(t *testing.T) {
	var b bytes.Buffer
	if err := render.Findings(&b, nil); err != nil {
		t.Fatal(err)
	}
	fs := []diagnose.Finding{
		{ID: "arena-bloat", Severity: diagnose.Warning, Title: "16 arenas for 4 CPUs hold 120.0 MiB free",
			Evidence: []string{"arena 3: 40.0 MiB free of 48.0 MiB", "arena 7: 30.0 MiB free of 33.0 MiB"},
			Fix:      "set MALLOC_ARENA_MAX=4 (glibc.malloc.arena_max)", Savings: 100 << 20},
		{ID: "fragmentation", Severity: diagnose.Info, Title: "main_arena is 60% free in small holes",
			Evidence: []string{"12000 free chunks under 1 KiB"}, Fix: "arenactl trim PID gives back whole free pages"},
	}
	if err := render.Findings(&b, fs); err != nil {
		t.Fatal(err)
	}
	golden(t, "findings.txt", b.Bytes())
}

// snapshot's lines, for an image and for a walk that stopped every thread.
func TestGoldenSnapshot(t *testing.T) {
	var b bytes.Buffer
	render.Snapshot(&b, &report.Snapshot{Pid: 4242, Exe: "/usr/sbin/server", Path: "/var/tmp/s.core.zst", Size: 3 << 20, CoreSize: 40 << 20,
		Compressed: true, Frozen: 1500 * time.Microsecond, Hold: "image", Cloned: time.Millisecond, LeftOut: 2, LeftOutBytes: 1 << 30,
		Threads: 8, Dumped: 38 << 20, Zeros: 200 << 20, Mappings: 120, DumpedMappings: 40})
	render.Snapshot(&b, &report.Snapshot{Pid: 4242, Exe: "/tmp/a\x1b[2J\n", Path: "s.core", Size: 40 << 20, Full: true, Frozen: 80 * time.Millisecond,
		Hold: "walk", ImageSkipped: "a seccomp filter", Threads: 3, Dumped: 40 << 20, Unreadable: 8 << 10, Mappings: 30, DumpedMappings: 12,
		WalkErr: "arena 2: heap_info at 0x7f0000000000 unreadable"})
	golden(t, "snapshot.txt", b.Bytes())
}

// trim's before and after (the main heap's top given back, RSS fallen by
// less), and a dry run's prediction per arena with damage that a real trim
// would be refused for.
func TestGoldenTrim(t *testing.T) {
	libc := report.LibcInfo{Path: "/lib/x86_64-linux-gnu/libc.so.6", Version: layouts.Version{Major: 2, Minor: 36}}
	class := func(c maps.Class, size, rss, pd uint64) maps.ClassSummary {
		return maps.ClassSummary{Class: c, Count: 1, Size: size, Rss: rss, PrivateDirty: pd}
	}
	var b bytes.Buffer
	if err := render.Trim(&b, &report.TrimReport{Pid: 4242, Libc: libc, Result: 1,
		Injection: report.Injection{Tid: 4243, Blocked: "futex", Stopped: 2 * time.Millisecond, Call: 1500 * time.Microsecond,
			PreflightLocked: 1, PreflightLockHeld: 300 * time.Microsecond},
		Before: report.MapsSummary{Rollup: maps.Rollup{Rss: 64 << 20, PrivateDirty: 60 << 20}, Classes: []maps.ClassSummary{
			class(maps.ClassMainHeap, 40<<20, 30<<20, 30<<20), class(maps.ClassArenaHeap, 64<<20, 20<<20, 20<<20)}},
		After: report.MapsSummary{Rollup: maps.Rollup{Rss: 50 << 20, PrivateDirty: 46 << 20}, Classes: []maps.ClassSummary{
			class(maps.ClassMainHeap, 20<<20, 20<<20, 20<<20), class(maps.ClassArenaHeap, 64<<20, 16<<20, 16<<20)}},
		Prediction: &predict.Trim{Resident: 14 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	if err := render.Trim(&b, &report.TrimReport{Pid: 4242, Libc: libc, DryRun: true, Frozen: 4 * time.Millisecond, Hold: "walk",
		ImageSkipped: "its cgroup lacks room for the pages it might write meanwhile",
		Prediction: &predict.Trim{Bytes: 26 << 20, Resident: 12 << 20, Arenas: []predict.ArenaTrim{
			{Index: 0, Main: true, Addr: 0x7f00aa000000, Chunks: 3, Bytes: 22 << 20, Top: 20 << 20, Resident: 10 << 20},
			{Index: 1, Addr: 0x7f00a0000020, Chunks: 2, Bytes: 4 << 20, Resident: 2 << 20}}},
		Damage: []glibc.Damage{{Arena: 0x7f00a0000020, Addr: 0x7f00a0001230, What: "fd 0x4141414141414141 outside any heap", Hang: true, List: 4}},
	}); err != nil {
		t.Fatal(err)
	}
	golden(t, "trim.txt", b.Bytes())
}

// growth's window, the RSS it explains, the classes and the sites, with
// the warnings and notes a run may carry; the sites are made by hand in
// the profile's own value types.
func TestGoldenGrowth(t *testing.T) {
	site := func(class string, frames []string, v map[int]float64) stackprof.ValuedSite {
		s := stackprof.ValuedSite{Labels: map[string]string{report.LabelClass: class}, Values: make([]float64, len(report.GrowthTypes))}
		for _, f := range frames {
			s.Frames = append(s.Frames, stackprof.Frame{Function: f})
		}
		for i, x := range v {
			s.Values[i] = x
		}
		return s
	}
	g := &report.Growth{Pid: 4242, Exe: "/usr/sbin/server", Duration: 10 * time.Second, Period: 4, PageSize: 4096, Threads: 9,
		FaultSamples: 600, Calls: 40, Lost: 3, Incomplete: 5, Truncated: 2, RSSBefore: 100 << 20, RSSAfter: 112 << 20, Measured: true,
		NoArenas: "libc's debug file is missing", CallsBy: "eBPF",
		Profile: &stackprof.Valued{Types: report.GrowthTypes, Sites: []stackprof.ValuedSite{
			site("main-heap", []string{"main", "load", "malloc"}, map[int]float64{report.GrowthTouched: 8 << 20, report.GrowthFaults: 2048,
				report.GrowthNet: 8 << 20, report.GrowthSamples: 512}),
			site("anon", []string{"main", "cache_grow", "mmap"}, map[int]float64{report.GrowthTouched: 6 << 20, report.GrowthFaults: 1536,
				report.GrowthMapped: 16 << 20, report.GrowthGivenBack: 2 << 20, report.GrowthNet: 4 << 20, report.GrowthCalls: 40, report.GrowthSamples: 88}),
		}}}
	var b bytes.Buffer
	if err := render.Growth(&b, g, render.DefaultGrowthTop); err != nil {
		t.Fatal(err)
	}
	golden(t, "growth.txt", b.Bytes())
}
