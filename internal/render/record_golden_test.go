package render_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// goldenRecording is a recording made by hand in the model's types: the
// phases of testdata/record_phases.c, with a walk every other interval
// (the last two intervals merged, keeping the latest walk).
func goldenRecording() *report.Recording {
	t0 := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	rec := &report.Recording{Meta: report.RecordingMeta{Pid: 4242, Exe: "/usr/sbin/server", Start: t0, Interval: time.Second, Rate: 512 << 10, MaxStacks: 100,
		Libc:  report.LibcInfo{Version: layouts.Version{Major: 2, Minor: 36}},
		Tiers: []report.RecordingTier{{Step: time.Second, Span: 10 * time.Second}, {Step: 10 * time.Second, MaxIntervals: 100}}},
		Stacks: []report.RecordedStack{{ID: 1, Frames: []stackprof.Frame{{Function: "main"}, {Function: "site_a"}, {Function: "malloc"}}},
			{ID: 2, Frames: []stackprof.Frame{{Function: "main"}, {Function: "site_b"}, {Function: "malloc"}}}}}
	const mib = 1 << 20
	type phase struct{ a, b, heap, held, tr, pin, nres uint64 }
	phases := []phase{{0, 0, 1 * mib, 0, 0, 0, 0}, {48, 0, 49 * mib, 48 * mib, 0, mib / 2, 0}, {48, 32, 81 * mib, 80 * mib, 0, mib / 2, 0},
		{0, 32, 81 * mib, 32 * mib, 48 * mib, mib / 2, 0}, {0, 32, 33 * mib, 32 * mib, 0, mib / 2, 48 * mib}, {0, 32, 33 * mib, 32 * mib, 0, mib / 2, 48 * mib}}
	for i, p := range phases {
		start := t0.Add(time.Duration(i) * time.Second)
		iv := report.RecordedInterval{Start: start, Duration: time.Second, Merged: 1, Rss: p.heap + 3*mib, RssPeak: p.heap + 3*mib, RssAt: start.Add(time.Second),
			Classes: []report.ClassRss{{Class: "main-heap", Rss: p.heap, Size: p.heap, Mappings: 1}, {Class: "arena-heaps"}, {Class: "mmapped-chunks"},
				{Class: "other-anon", Rss: mib}, {Class: "stacks", Rss: mib / 2}, {Class: "files", Rss: 3 * mib / 2}, {Class: "special"}},
			Arenas: []report.ArenaLevel{{Index: 0, Addr: 0x7f0000000000, SystemBytes: p.heap, TopBytes: 128 << 10}}, Samples: 100 * i}
		if p.a > 0 {
			iv.Held = append(iv.Held, report.StackHeld{Stack: 1, Bytes: float64(p.a * mib), Var: 1e12, Objects: float64(p.a * 16), Sampled: int(p.a * 2)})
		}
		if p.b > 0 {
			iv.Held = append(iv.Held, report.StackHeld{Stack: 2, Bytes: float64(p.b * mib), Var: 1e12, Objects: float64(p.b * 21), Sampled: int(p.b * 2)})
		}
		if i%2 == 1 || i == 4 {
			iv.Malloc = &report.MallocLevel{At: start.Add(500 * time.Millisecond), ResidentAt: start.Add(520 * time.Millisecond), Held: p.held, Tcache: 64 << 10, Trimmable: p.tr, Pinned: p.pin, PinnedTops: p.pin / 4,
				FreeNotResident: p.nres, Arenas: []report.ArenaMalloc{{Index: 0, InUse: p.held + 64<<10, Free: p.tr + p.pin + p.nres}},
				Stop: 1200 * time.Microsecond, Cpu: 40 * time.Millisecond}
		}
		rec.Intervals = append(rec.Intervals, iv)
	}
	rec.Events = []report.RecordingEvent{{At: t0.Add(2500 * time.Millisecond), Kind: report.EventWalk,
		Text: "walks stretched to every 2s: the last stopped the process 1.2ms and took 40ms of CPU (at most 0.1% of the time stopped, 2% of a CPU)"}}
	rec.End = &report.RecordingEnd{At: t0.Add(6 * time.Second), Why: report.EndDuration}
	return rec
}

// record show's text of a recording with walks, and its JSON document,
// which follows the published schema.
func TestGoldenRecording(t *testing.T) {
	rec := goldenRecording()
	var b bytes.Buffer
	if err := render.Recording(&b, rec, render.RecordingInfo{Top: 10}); err != nil {
		t.Fatal(err)
	}
	golden(t, "record.txt", b.Bytes())
	js, err := json.MarshalIndent(schema.NewRecording(rec), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')
	testutil.ValidateJSON(t, "record", js)
	golden(t, "record.json", js)
}
