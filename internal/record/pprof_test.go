package record

import (
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// A recording of three 1 s intervals: IntervalAt names the last interval
// ending at or before a time and refuses times outside; HeldProfile is
// each stack's held bytes at an interval, or their difference over a
// range, stacks summed as other included, and a stack that held the
// same at both ends is left out.
func TestHeldProfile(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	iv := func(i int, a, b, other float64) report.RecordedInterval {
		return report.RecordedInterval{Start: t0.Add(time.Duration(i) * time.Second), Duration: time.Second, Merged: 1,
			Held:      []report.StackHeld{{Stack: 1, Bytes: a, Objects: a / 64}, {Stack: 2, Bytes: b, Objects: b / 32}},
			OtherHeld: report.StackHeld{Bytes: other, Objects: 1}}
	}
	rec := &report.Recording{Meta: report.RecordingMeta{Start: t0, Rate: 512 << 10},
		Stacks: []report.RecordedStack{
			{ID: 1, Frames: []stackprof.Frame{{Function: "main", MappingID: 3}, {Function: "site_a", MappingID: 3}}},
			{ID: 2, Frames: []stackprof.Frame{{Function: "main"}, {Function: "site_b"}}}},
		Intervals: []report.RecordedInterval{iv(0, 100, 0, 10), iv(1, 100, 50, 10), iv(2, 100, 30, 40)}}
	for _, c := range []struct {
		at   time.Duration
		want int
		ok   bool
	}{{500 * time.Millisecond, 0, false}, {time.Second, 0, true}, {1999 * time.Millisecond, 0, true},
		{2 * time.Second, 1, true}, {3 * time.Second, 2, true}, {3001 * time.Millisecond, 0, false}} {
		i, err := IntervalAt(rec, t0.Add(c.at))
		if (err == nil) != c.ok || c.ok && i != c.want {
			t.Errorf("IntervalAt(+%v) = %d, %v; want %d (ok %v)", c.at, i, err, c.want, c.ok)
		}
	}
	held := func(p *stackprof.Profile) map[string]float64 {
		out := map[string]float64{}
		for _, s := range p.Sites {
			out[s.Frames[len(s.Frames)-1].Function] = s.Est.InUseBytes
			for _, f := range s.Frames {
				if f.MappingID != 0 {
					t.Errorf("a frame keeps a mapping the profile does not have: %+v", f)
				}
			}
		}
		return out
	}
	at := held(HeldProfile(rec, -1, 1))
	if at["site_a"] != 100 || at["site_b"] != 50 || at["[other stacks]"] != 10 {
		t.Errorf("held at interval 1: %v", at)
	}
	p := HeldProfile(rec, 1, 2)
	rng := held(p)
	if _, ok := rng["site_a"]; ok || rng["site_b"] != -20 || rng["[other stacks]"] != 30 || len(rng) != 2 {
		t.Errorf("the range 1..2: %v", rng)
	}
	if !p.Window.Start.Equal(t0.Add(2*time.Second)) || p.Window.Duration != time.Second {
		t.Errorf("the range's window: %+v", p.Window)
	}
}
