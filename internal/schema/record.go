package schema

import (
	"math"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// Recording is the document of record --json and record show --json: a
// recording's intervals, oldest first, with the stacks they name.
type Recording struct {
	SchemaVersion int `json:"schema_version"`
	// Format is the recording file's format (report.RecordingFormat).
	Format     int    `json:"format"`
	Pid        int    `json:"pid"`
	Exe        string `json:"exe"`
	Start      string `json:"start"` // RFC 3339
	IntervalUs int64  `json:"interval_us"`
	// Rate is the sampler's mean bytes between samples.
	Rate      uint64          `json:"rate"`
	MaxStacks int             `json:"max_stacks"`
	Tiers     []RecordingTier `json:"tiers"`
	Triggers  []string        `json:"triggers"`
	Stacks    []RecordedStack `json:"stacks"`
	Intervals []RecordedInt   `json:"intervals"`
	Events    []RecordedEvent `json:"events"`
	// End is absent when the recording was cut (arenactl killed).
	End *RecordedEnd `json:"end,omitempty"`
}

// RecordingTier: intervals ending within SpanUs of the newest are
// StepUs long; SpanUs 0 is every older one, at most MaxIntervals.
type RecordingTier struct {
	StepUs       int64 `json:"step_us"`
	SpanUs       int64 `json:"span_us"`
	MaxIntervals int   `json:"max_intervals"`
}

// RecordedStack is an allocation stack, root first.
type RecordedStack struct {
	ID     int         `json:"id"`
	Frames []LeakFrame `json:"frames"`
}

// RecordedInt is one interval: the levels at its end.
type RecordedInt struct {
	Start      string `json:"start"`
	DurationUs int64  `json:"duration_us"`
	Merged     int    `json:"merged"`
	Rss        uint64 `json:"rss"`
	RssPeak    uint64 `json:"rss_peak"`
	// Classes: RSS by memory class, every class of record's (docs/commands/record.md).
	Classes      []RecordedClass `json:"classes"`
	Arenas       []RecordedArena `json:"arenas"`
	MmappedBytes uint64          `json:"mmapped_bytes"`
	// Held: the stacks holding the most bytes allocated since the
	// recording began; OtherHeld the rest.
	Held      []RecordedHeld `json:"held"`
	OtherHeld RecordedHeld   `json:"other_held"`
	Samples   int            `json:"samples"`
	Dropped   uint64         `json:"dropped"`
	// Malloc: malloc's split of its heaps at the latest walk that ended
	// in the interval (record --walk-every); absent when none did.
	Malloc *RecordedMalloc `json:"malloc,omitempty"`
}

// RecordedMalloc is what a read-only walk said of malloc's memory, split
// as info's waterfall splits it (docs/commands/record.md).
type RecordedMalloc struct {
	// Time is when the image the walk read was made; ResidentTime when
	// the live process's pagemap was read, after the walk, for which free
	// pages are resident.
	Time         string `json:"time"`
	ResidentTime string `json:"resident_time"`
	// HeldBytes: held by the program, resident, tcaches not included.
	HeldBytes   uint64 `json:"held_bytes"`
	TcacheBytes uint64 `json:"tcache_bytes"`
	// TrimmableBytes: free, resident, given back by malloc_trim(0) now;
	// PinnedBytes: the rest of the free resident bytes.
	TrimmableBytes uint64 `json:"trimmable_bytes"`
	PinnedBytes    uint64 `json:"pinned_bytes"`
	// PinnedTopsBytes: of PinnedBytes, at the top of thread arenas (only
	// free() shrinks them); the rest is pieces of pages beside held chunks.
	PinnedTopsBytes uint64 `json:"pinned_tops_bytes"`
	// FreeNotResidentBytes: whole free pages not in RAM.
	FreeNotResidentBytes uint64 `json:"free_not_resident_bytes"`
	// MmappedBytes: the resident bytes of chunks mmapped on their own.
	MmappedBytes uint64                `json:"mmapped_bytes"`
	Arenas       []RecordedArenaMalloc `json:"arenas"`
	// StopUs: how long every thread was stopped for the image; CpuUs:
	// arenactl's CPU time for the walk (an upper bound).
	StopUs int64 `json:"stop_us"`
	CpuUs  int64 `json:"cpu_us"`
}

// RecordedArenaMalloc is one arena's bytes in use and free, as
// malloc_info counts them.
type RecordedArenaMalloc struct {
	Index      int    `json:"index"`
	InUseBytes uint64 `json:"in_use_bytes"`
	FreeBytes  uint64 `json:"free_bytes"`
}

// RecordedClass is one memory class's resident and mapped bytes.
type RecordedClass struct {
	Class    string `json:"class"`
	Rss      uint64 `json:"rss"`
	Size     uint64 `json:"size"`
	Mappings int    `json:"mappings"`
}

// RecordedArena is an arena's system_mem and top chunk.
type RecordedArena struct {
	Index       int    `json:"index"`
	Address     uint64 `json:"address"`
	SystemBytes uint64 `json:"system_bytes"`
	TopBytes    uint64 `json:"top_bytes"`
}

// RecordedHeld is what a stack held (estimates, rounded), with the
// estimate's standard error.
type RecordedHeld struct {
	Stack      int    `json:"stack"`
	Bytes      uint64 `json:"bytes"`
	BytesSigma uint64 `json:"bytes_sigma"`
	Objects    uint64 `json:"objects"`
	Sampled    int    `json:"sampled"`
}

// RecordedEvent is a trigger, a snapshot, or a note.
type RecordedEvent struct {
	Time  string `json:"time"`
	Kind  string `json:"kind"`
	Text  string `json:"text"`
	Path  string `json:"path,omitempty"`
	Value uint64 `json:"value,omitempty"`
	Limit uint64 `json:"limit,omitempty"`
}

// RecordedEnd is how the recording ended.
type RecordedEnd struct {
	Time string `json:"time"`
	Why  string `json:"why"`
	Err  string `json:"error,omitempty"`
	// SamplerKeptBytes: the sampler's memory left in the process, inert
	// (0: removed).
	SamplerKeptBytes uint64 `json:"sampler_kept_bytes"`
}

func us(d time.Duration) int64 { return d.Microseconds() }

func rfc(t time.Time) string { return t.Format(time.RFC3339Nano) }

func held(h report.StackHeld) RecordedHeld {
	return RecordedHeld{Stack: h.Stack, Bytes: uint64(math.Round(max(h.Bytes, 0))), BytesSigma: uint64(math.Round(math.Sqrt(max(h.Var, 0)))),
		Objects: uint64(math.Round(max(h.Objects, 0))), Sampled: h.Sampled}
}

// NewRecording is the document of a recording.
func NewRecording(r *report.Recording) Recording {
	m := r.Meta
	d := Recording{SchemaVersion: Version, Format: m.Format, Pid: m.Pid, Exe: m.Exe, Start: rfc(m.Start), IntervalUs: us(m.Interval),
		Rate: m.Rate, MaxStacks: m.MaxStacks, Triggers: append([]string{}, m.Triggers...),
		Tiers: []RecordingTier{}, Stacks: []RecordedStack{}, Intervals: []RecordedInt{}, Events: []RecordedEvent{}}
	for _, t := range m.Tiers {
		d.Tiers = append(d.Tiers, RecordingTier{StepUs: us(t.Step), SpanUs: us(t.Span), MaxIntervals: t.MaxIntervals})
	}
	for _, s := range r.Stacks {
		st := RecordedStack{ID: s.ID, Frames: []LeakFrame{}}
		for _, f := range s.Frames {
			st.Frames = append(st.Frames, leakFrame(f))
		}
		d.Stacks = append(d.Stacks, st)
	}
	for _, iv := range r.Intervals {
		o := RecordedInt{Start: rfc(iv.Start), DurationUs: us(iv.Duration), Merged: iv.Merged, Rss: iv.Rss, RssPeak: iv.RssPeak,
			MmappedBytes: iv.MmappedBytes, OtherHeld: held(iv.OtherHeld), Samples: iv.Samples, Dropped: iv.Dropped,
			Classes: []RecordedClass{}, Arenas: []RecordedArena{}, Held: []RecordedHeld{}}
		for _, c := range iv.Classes {
			o.Classes = append(o.Classes, RecordedClass(c))
		}
		for _, a := range iv.Arenas {
			o.Arenas = append(o.Arenas, RecordedArena{Index: a.Index, Address: a.Addr, SystemBytes: a.SystemBytes, TopBytes: a.TopBytes})
		}
		for _, h := range iv.Held {
			o.Held = append(o.Held, held(h))
		}
		if m := iv.Malloc; m != nil {
			o.Malloc = &RecordedMalloc{Time: rfc(m.At), ResidentTime: rfc(m.ResidentAt), HeldBytes: m.Held, TcacheBytes: m.Tcache, TrimmableBytes: m.Trimmable,
				PinnedBytes: m.Pinned, PinnedTopsBytes: m.PinnedTops, FreeNotResidentBytes: m.FreeNotResident, MmappedBytes: m.Mmapped,
				Arenas: []RecordedArenaMalloc{}, StopUs: us(m.Stop), CpuUs: us(m.Cpu)}
			for _, a := range m.Arenas {
				o.Malloc.Arenas = append(o.Malloc.Arenas, RecordedArenaMalloc{Index: a.Index, InUseBytes: a.InUse, FreeBytes: a.Free})
			}
		}
		d.Intervals = append(d.Intervals, o)
	}
	for _, e := range r.Events {
		d.Events = append(d.Events, RecordedEvent{Time: rfc(e.At), Kind: e.Kind, Text: e.Text, Path: e.Path, Value: e.Value, Limit: e.Limit})
	}
	if e := r.End; e != nil {
		d.End = &RecordedEnd{Time: rfc(e.At), Why: e.Why, Err: e.Err, SamplerKeptBytes: e.Left.Size}
	}
	return d
}
