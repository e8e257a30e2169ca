package record

import (
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// IntervalAt is the index of the kept interval whose levels stand for the
// time at: the last one that ends at or before it. A time before the first
// interval's end, or after the recording's last, names none.
func IntervalAt(rec *report.Recording, at time.Time) (int, error) {
	ivs := rec.Intervals
	if len(ivs) == 0 {
		return 0, fmt.Errorf("the recording holds no interval")
	}
	first, last := ivs[0].End(), ivs[len(ivs)-1].End()
	if at.Before(first) || at.After(last) {
		return 0, fmt.Errorf("%s is outside the recording's intervals, which end from %s to %s",
			at.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	}
	i := len(ivs) - 1
	for i > 0 && ivs[i].End().After(at) {
		i--
	}
	return i, nil
}

// otherFrame names the stacks an interval summed as other (beyond the
// recording's --max-stacks): they have no frames of their own.
var otherFrame = stackprof.Frame{Function: "[other stacks]"}

// HeldProfile is the profile of what interval to held, by stack: the bytes
// allocated since the recording began and still held at its end, as
// record --pprof-dir writes it then. With from >= 0 it is what each stack
// held at to's end beyond what it held at from's, the recording's view of
// what was allocated in the range and is still held at its end (it keeps
// levels, not when each block was allocated: a block allocated before the
// range and freed in it offsets one allocated in it, so a stack's value
// is negative when it freed more of its older blocks than it added):
// exactly what go tool pprof -diff_base of the two intervals' profiles
// shows. The alloc_ sample types carry the same values: freed samples are
// forgotten, so what was allocated and freed is not known.
func HeldProfile(rec *report.Recording, from, to int) *stackprof.Profile {
	type held struct{ bytes, objects, v float64 }
	sums := map[int]*held{} // stack ID (0: other) -> its value
	var order []int
	add := func(iv *report.RecordedInterval, sign float64) {
		hs := append([]report.StackHeld{iv.OtherHeld}, iv.Held...)
		for _, h := range hs {
			s := sums[h.Stack]
			if s == nil {
				s = &held{}
				sums[h.Stack] = s
				order = append(order, h.Stack)
			}
			s.bytes += sign * h.Bytes
			s.objects += sign * h.Objects
			s.v += h.Var
		}
	}
	end := &rec.Intervals[to]
	add(end, 1)
	start := rec.Meta.Start
	if from >= 0 {
		add(&rec.Intervals[from], -1)
		start = rec.Intervals[from].End()
	}
	stacks := map[int][]stackprof.Frame{}
	for _, st := range rec.Stacks {
		stacks[st.ID] = st.Frames
	}
	p := &stackprof.Profile{Window: stackprof.Window{Start: start, Duration: end.End().Sub(start), Rate: rec.Meta.Rate}, Samples: end.Samples}
	for _, id := range order {
		s := sums[id]
		if s.bytes == 0 && s.objects == 0 {
			continue
		}
		frames := []stackprof.Frame{otherFrame}
		if id != 0 {
			fs, ok := stacks[id]
			if !ok {
				continue // not kept: the recording names it nowhere else
			}
			// The recording keeps no mappings: each frame says its
			// module and build-id by name, and pprof needs no more
			// of a symbolized location.
			frames = make([]stackprof.Frame, len(fs))
			copy(frames, fs)
			for i := range frames {
				frames[i].MappingID = 0
			}
		}
		p.Sites = append(p.Sites, stackprof.Site{Frames: frames, Est: stackprof.Estimate{
			InUseBytes: s.bytes, InUseObjects: s.objects, InUseBytesVar: s.v,
			AllocBytes: s.bytes, AllocObjects: s.objects, AllocBytesVar: s.v}})
	}
	return p
}
