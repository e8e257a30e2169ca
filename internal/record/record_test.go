package record_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func interval(i int, every time.Duration, stacks int) report.RecordedInterval {
	iv := report.RecordedInterval{Start: t0.Add(time.Duration(i) * every), Duration: every, Rss: uint64(1000 + i), Samples: i}
	for s := 1; s <= stacks; s++ {
		iv.Held = append(iv.Held, report.StackHeld{Stack: (i+s)%50 + 1, Bytes: float64(i * s)})
	}
	return iv
}

// TestStoreBounded: over ever more intervals the store keeps at most
// MaxIntervals, contiguous, the newest finest ones unmerged, the oldest
// coarser, each level the one read last, the peak the highest; and the
// file, compacted as it grows, stays within its bound and reads back as
// the same recording.
func TestStoreBounded(t *testing.T) {
	every := time.Second
	// The default tiers' shape, smaller: the last tier doubles its step
	// after 6,000 intervals instead of a day's.
	meta := report.RecordingMeta{Pid: 1, Start: t0, Interval: every, MaxStacks: 5, Tiers: []report.RecordingTier{
		{Step: every, Span: 60 * every}, {Step: 10 * every, Span: 720 * every}, {Step: 60 * every, MaxIntervals: 100}}}
	s := record.NewStore(meta)
	path := filepath.Join(t.TempDir(), "rec")
	const maxDisk = 256 << 10
	w, err := record.Create(path, s, maxDisk)
	if err != nil {
		t.Fatal(err)
	}
	bound := record.MaxIntervals(s.Meta().Tiers)
	n := 25000 // two doublings of the last tier's step
	biggest := int64(0)
	for i := 0; i < n; i++ {
		for id := 1; id <= 50; id++ {
			if _, ok := s.Stack(id); !ok {
				st := report.RecordedStack{ID: id, Frames: []stackprof.Frame{{Function: "f", Addr: uint64(id)}}}
				s.AddStack(st)
				if err := w.Stack(st); err != nil {
					t.Fatal(err)
				}
			}
		}
		iv := interval(i, every, 5)
		if i == n/2 {
			iv.Rss = 1 << 40 // a peak, in the middle
		}
		s.Add(iv)
		if err := w.Interval(iv, s); err != nil {
			t.Fatal(err)
		}
		if s.Len() > bound {
			t.Fatalf("after %d intervals the store keeps %d, over its bound %d", i+1, s.Len(), bound)
		}
		biggest = max(biggest, w.Size())
	}
	end := report.RecordingEnd{At: t0.Add(time.Duration(n) * every), Why: report.EndDuration}
	s.SetEnd(end)
	if err := w.End(end); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec := s.Recording()
	t.Logf("%d intervals kept of %d; the file at most %d bytes, %d compactions", len(rec.Intervals), n, biggest, w.Compactions)
	if biggest > maxDisk+1<<16 {
		t.Errorf("the file grew to %d bytes, over --max-disk %d", biggest, maxDisk)
	}
	ivs := rec.Intervals
	for i := 1; i < len(ivs); i++ {
		if !ivs[i].Start.Equal(ivs[i-1].End()) {
			t.Fatalf("interval %d starts at %v, the one before ends at %v", i, ivs[i].Start, ivs[i-1].End())
		}
	}
	if !ivs[0].Start.Equal(t0) || ivs[len(ivs)-1].Rss != uint64(1000+n-1) {
		t.Errorf("first starts at %v, last holds RSS %d", ivs[0].Start, ivs[len(ivs)-1].Rss)
	}
	merged, peak := 0, uint64(0)
	for _, iv := range ivs {
		merged += iv.Merged
		peak = max(peak, iv.RssPeak)
	}
	if merged != n || peak != 1<<40 {
		t.Errorf("the intervals stand for %d finest ones (want %d), the highest peak is %d (want the one in the middle)", merged, n, peak)
	}
	for _, iv := range ivs[len(ivs)-60:] {
		if iv.Merged != 1 {
			t.Fatalf("one of the last 60 intervals is merged: %+v", iv)
		}
	}
	if b := record.MaxIntervals(record.DefaultTiers(time.Second)); b > 3000 {
		t.Errorf("the default tiers keep up to %d intervals, more than the 3,000 docs/commands/record.md says", b)
	}
	got, info, err := record.Read(path)
	if err != nil || info.Cut {
		t.Fatalf("reading back: %v (%+v)", err, info)
	}
	if len(got.Intervals) != len(ivs) || got.End == nil || len(got.Stacks) != len(rec.Stacks) {
		t.Fatalf("read back %d intervals, %d stacks, end %v; wrote %d, %d", len(got.Intervals), len(got.Stacks), got.End, len(ivs), len(rec.Stacks))
	}
	for i := range ivs {
		a, b := ivs[i], got.Intervals[i]
		if !a.Start.Equal(b.Start) || a.Duration != b.Duration || a.Merged != b.Merged || a.Rss != b.Rss || a.RssPeak != b.RssPeak || len(a.Held) != len(b.Held) {
			t.Fatalf("interval %d: wrote %+v, read %+v", i, a, b)
		}
	}
}

// TestReadCut: a file cut anywhere (arenactl killed while writing a
// frame) reads up to its last whole frame; a damaged byte ends it there
// too; what is not a recording, a symbolic link, or a description asking
// for unbounded memory is refused as a bad recording.
func TestReadCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec")
	s := record.NewStore(report.RecordingMeta{Pid: 1, Start: t0, Interval: time.Second, MaxStacks: 5})
	w, err := record.Create(path, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	metaEnd := w.Size()
	for i := 0; i < 20; i++ {
		iv := interval(i, time.Second, 0)
		s.Add(iv)
		if err := w.Interval(iv, s); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, w.Size())
	}
	w.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Create(path, s, 0); err == nil {
		t.Error("Create replaced an existing file")
	}
	for cut := int64(len(record.Magic)) + 1; cut < int64(len(whole)); cut += 7 {
		p := filepath.Join(dir, "cut")
		os.Remove(p)
		if err := os.WriteFile(p, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		rec, info, err := record.Read(p)
		want := 0
		for _, sz := range sizes {
			if sz <= cut {
				want++
			}
		}
		if cut < metaEnd {
			if !errors.Is(err, errkind.ErrBadRecording) {
				t.Fatalf("cut at %d, inside the description: %v, want a bad recording", cut, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		atFrame := cut == metaEnd
		for _, sz := range sizes {
			atFrame = atFrame || sz == cut
		}
		if len(rec.Intervals) != want || info.Cut == atFrame {
			t.Fatalf("cut at %d: %d intervals (cut %v), want %d", cut, len(rec.Intervals), info.Cut, want)
		}
	}
	damaged := append([]byte(nil), whole...)
	damaged[sizes[9]+12] ^= 0xff
	p := filepath.Join(dir, "damaged")
	os.WriteFile(p, damaged, 0o600)
	if rec, info, err := record.Read(p); err != nil || len(rec.Intervals) != 10 || !info.Cut {
		t.Errorf("damaged in the 11th interval: %v, %+v", err, info)
	}
	os.WriteFile(filepath.Join(dir, "notrec"), []byte("hello, world\n"), 0o600)
	os.Symlink(path, filepath.Join(dir, "link"))
	for _, name := range []string{"notrec", "link"} {
		if _, _, err := record.Read(filepath.Join(dir, name)); !errors.Is(err, errkind.ErrBadRecording) {
			t.Errorf("%s: %v, want a bad recording", name, err)
		}
	}
	// A description asking for a million intervals per tier.
	hostile := record.NewStore(report.RecordingMeta{Pid: 1, Start: t0, Interval: time.Nanosecond, MaxStacks: 5,
		Tiers: []report.RecordingTier{{Step: time.Nanosecond, MaxIntervals: 1 << 30}}})
	hp := filepath.Join(dir, "hostile")
	hw, err := record.Create(hp, hostile, 0)
	if err != nil {
		t.Fatal(err)
	}
	hw.Close()
	if _, _, err := record.Read(hp); !errors.Is(err, errkind.ErrBadRecording) {
		t.Errorf("a description of 2^30 intervals: %v, want refused", err)
	}
}
