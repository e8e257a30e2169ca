// Package record owns a recording of a process over time (arenactl
// record): the bounded store of its intervals, which merges them into
// coarser ones as they age, and the file it is kept in, appended to frame
// by frame so that a recording cut at any moment stays readable, and
// rewritten whole (compacted) when it has grown. What goes into an
// interval is the use case's (internal/inspect); the model is
// report.Recording.
package record

import (
	"fmt"
	"sort"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// Defaults of the merging: the finest intervals are kept for
// fineIntervals of them, the next tier (midFactor times coarser) for
// midSpan finest intervals, the last (coarseFactor times) for ever, at
// most coarseMax of them (its step doubles beyond). At the default 1 s:
// 1 s for 10 minutes, 10 s for 2 hours, 1 minute for 24 hours, then
// 2, 4, ... minutes: at most about 2,800 intervals over any duration.
const (
	fineIntervals = 600
	midFactor     = 10
	midSpan       = 7200
	coarseFactor  = 60
	coarseMax     = 1440
)

// DefaultTiers are the tiers for a finest interval of every.
func DefaultTiers(every time.Duration) []report.RecordingTier {
	return []report.RecordingTier{
		{Step: every, Span: fineIntervals * every},
		{Step: midFactor * every, Span: midSpan * every},
		{Step: coarseFactor * every, MaxIntervals: coarseMax},
	}
}

// maxEvents bounds the events kept: the first ones (the triggers that
// fired first matter most) and the latest.
const maxEvents = 1000

// MaxIntervals is the most intervals tiers keep, whatever the duration:
// the bound of a Store's memory with the stacks per interval.
func MaxIntervals(tiers []report.RecordingTier) int {
	n := 0
	var prev time.Duration
	for _, t := range tiers {
		if t.Span == 0 {
			n += t.MaxIntervals + 1
			break
		}
		n += int((t.Span-prev)/t.Step) + 2
		prev = t.Span
	}
	return n
}

// Store is a recording being made or read: bounded, whatever the number
// of intervals added. Not safe for concurrent use.
type Store struct {
	rec    report.Recording
	stacks map[int]report.RecordedStack
	// stackBytes is what the stacks take, roughly (their frames' JSON):
	// a reader's bound on a hostile file.
	stackBytes int
	// replaying: the stacks are all defined before the intervals naming
	// them (a compacted file), and are not dropped until it is read.
	replaying bool
	// events beyond maxEvents: the first half kept, the rest the latest.
	droppedEvents int
	// Where the last merge left the last tier: its step, and the index
	// of its newest interval.
	lastStep time.Duration
	lastFrom int
}

// NewStore starts an empty recording described by meta; meta.Tiers
// default to DefaultTiers(meta.Interval).
func NewStore(meta report.RecordingMeta) *Store {
	if len(meta.Tiers) == 0 {
		meta.Tiers = DefaultTiers(meta.Interval)
	}
	meta.Format = report.RecordingFormat
	return &Store{rec: report.Recording{Meta: meta}, stacks: map[int]report.RecordedStack{}}
}

// Meta is the recording's description.
func (s *Store) Meta() report.RecordingMeta { return s.rec.Meta }

// Len is the number of intervals kept.
func (s *Store) Len() int { return len(s.rec.Intervals) }

// AddStack defines a stack that intervals added later name.
func (s *Store) AddStack(st report.RecordedStack) { s.stacks[st.ID] = st }

// AddEvent keeps an event.
func (s *Store) AddEvent(e report.RecordingEvent) {
	if len(s.rec.Events) >= maxEvents {
		half := maxEvents / 2
		copy(s.rec.Events[half:], s.rec.Events[half+1:])
		s.rec.Events = s.rec.Events[:len(s.rec.Events)-1]
		s.droppedEvents++
	}
	s.rec.Events = append(s.rec.Events, e)
}

// SetEnd says how the recording ended.
func (s *Store) SetEnd(e report.RecordingEnd) { s.rec.End = &e }

// Add appends an interval (which may be a merged one, from a compacted
// file) and merges the older ones as the tiers say. Replaying the same
// intervals gives the same recording: merging depends on the intervals'
// times only.
func (s *Store) Add(iv report.RecordedInterval) {
	if iv.Merged == 0 {
		iv.Merged = 1
	}
	if iv.RssPeak < iv.Rss {
		iv.RssPeak = iv.Rss
	}
	s.rec.Intervals = append(s.rec.Intervals, iv)
	s.merge()
	if !s.replaying && len(s.stacks) > 4*s.rec.Meta.MaxStacks+len(s.rec.Intervals) {
		s.dropStacks()
	}
}

// merge merges the runs of intervals that fall in one step of their tier
// (steps counted from the recording's start). Only the intervals from
// the last tier's newest on can change, unless the last tier's step
// doubled: the pass starts there (an Add costs the count of the finer
// tiers' intervals, not of all).
func (s *Store) merge() {
	ivs := s.rec.Intervals
	if len(ivs) < 2 {
		return
	}
	newest := ivs[len(ivs)-1].End()
	start := s.rec.Meta.Start
	tiers := s.rec.Meta.Tiers
	// cut[i]: an interval ending before it is beyond tier i.
	var cut [17]time.Time
	steps := make([]time.Duration, len(tiers))
	for i, t := range tiers {
		steps[i] = max(t.Step, 1)
		if t.Span == 0 {
			if t.MaxIntervals > 0 {
				for span := newest.Sub(start); span/steps[i] > time.Duration(t.MaxIntervals); {
					steps[i] *= 2
				}
			}
			break
		}
		cut[i] = newest.Add(-t.Span)
	}
	last := len(tiers) - 1
	from := 0
	if steps[last] == s.lastStep {
		from = max(s.lastFrom-1, 0)
	}
	s.lastStep = steps[last]
	out := ivs[:from]
	lastTier, lastBucket := -1, int64(-1)
	if from > 0 {
		lastTier, lastBucket = last, int64(ivs[from-1].Start.Sub(start)/steps[last])
	}
	settled := from
	for _, iv := range ivs[from:] {
		t := last
		end := iv.End()
		for i := range last {
			if end.After(cut[i]) {
				t = i
				break
			}
		}
		if t == 0 {
			out = append(out, iv)
			lastTier = 0
			continue
		}
		bucket := int64(iv.Start.Sub(start) / steps[t])
		if len(out) > 0 && t == lastTier && bucket == lastBucket {
			mergeInto(&out[len(out)-1], iv)
			continue
		}
		if t == last {
			settled = len(out)
		}
		out = append(out, iv)
		lastTier, lastBucket = t, bucket
	}
	s.lastFrom = settled
	// Clear what the merge left past the end, for the collector.
	for i := len(out); i < len(ivs); i++ {
		ivs[i] = report.RecordedInterval{}
	}
	s.rec.Intervals = out
}

// mergeInto makes dst stand for itself and src, which follows it: the
// levels are src's (the later), the peak the higher, malloc's split the
// latest walk's of either (walks are rarer than intervals).
func mergeInto(dst *report.RecordedInterval, src report.RecordedInterval) {
	start, merged, peak := dst.Start, dst.Merged+src.Merged, max(dst.RssPeak, src.RssPeak)
	walk := dst.Malloc
	*dst = src
	if dst.Malloc == nil {
		dst.Malloc = walk // the latest walk of those merged
	}
	dst.Start, dst.Duration, dst.Merged, dst.RssPeak = start, src.End().Sub(start), merged, peak
}

// dropStacks forgets the stacks no kept interval names.
func (s *Store) dropStacks() {
	used := map[int]bool{}
	for i := range s.rec.Intervals {
		for _, h := range s.rec.Intervals[i].Held {
			used[h.Stack] = true
		}
	}
	for id := range s.stacks {
		if !used[id] {
			delete(s.stacks, id)
		}
	}
}

// Stack is the stack of id, if kept.
func (s *Store) Stack(id int) (report.RecordedStack, bool) {
	st, ok := s.stacks[id]
	return st, ok
}

// Recording is the recording as kept now, its stacks those its intervals
// name, by ID. It shares the intervals' slices with the Store: read it
// before the next Add.
func (s *Store) Recording() *report.Recording {
	s.dropStacks()
	rec := s.rec
	rec.Stacks = make([]report.RecordedStack, 0, len(s.stacks))
	for _, st := range s.stacks {
		rec.Stacks = append(rec.Stacks, st)
	}
	sortStacks(rec.Stacks)
	if s.droppedEvents > 0 {
		rec.Events = append([]report.RecordingEvent(nil), rec.Events...)
		half := maxEvents / 2
		rec.Events = append(rec.Events[:half:half], append([]report.RecordingEvent{{At: rec.Events[half].At, Kind: report.EventNote,
			Text: plural(s.droppedEvents, "event") + " left out here (a recording keeps its first and latest events)"}}, rec.Events[half:]...)...)
	}
	return &rec
}

// MaxStacksLimit is the most stacks an interval may name (--max-stacks).
const MaxStacksLimit = 10000

func sortStacks(st []report.RecordedStack) {
	sort.Slice(st, func(i, j int) bool { return st[i].ID < st[j].ID })
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
