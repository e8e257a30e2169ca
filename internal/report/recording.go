package report

import (
	"time"

	"github.com/arenactl/arenactl/internal/stackprof"
)

// RecordingFormat is the version of the recording model and of the file
// `arenactl record` writes it to (internal/record): a reader refuses a
// file of a later version. The JSON names below are the file's; they
// change only with this number.
const RecordingFormat = 1

// Recording is what `arenactl record` kept of a live process over time:
// at every interval the process's RSS by memory class, its arenas' cheap
// figures and the sampled live set by allocation stack. Older intervals
// are merged into coarser ones (Meta.Tiers), so its size does not grow
// with the duration. Every level in an interval (RSS, arena bytes, held
// bytes) is the value read at the interval's end; merging keeps the last
// one and RssPeak the highest.
type Recording struct {
	// Meta says what was recorded and how; always present.
	Meta RecordingMeta `json:"meta"`
	// Stacks are the allocation stacks the intervals name, by ID; only
	// those some kept interval names are kept.
	Stacks []RecordedStack `json:"stacks"`
	// Intervals are contiguous, oldest first.
	Intervals []RecordedInterval `json:"intervals"`
	// Events are what happened besides the levels (a trigger crossed, a
	// snapshot written, a sampler note), oldest first; bounded
	// (internal/record keeps the last ones).
	Events []RecordingEvent `json:"events"`
	// End says how the recording ended; nil when it did not end cleanly
	// (arenactl was killed, the machine stopped): the file then holds
	// every interval up to its last whole frame.
	End *RecordingEnd `json:"end,omitempty"`
}

// RecordingMeta is what a recording is of and how it was taken.
type RecordingMeta struct {
	// Format is RecordingFormat as the writer had it.
	Format int `json:"format"`
	// Pid and Exe are the process recorded; Libc its C library.
	Pid  int      `json:"pid"`
	Exe  string   `json:"exe"`
	Libc LibcInfo `json:"libc"`
	// Start is when the recording began: the sampler's window opened
	// then, and held bytes count what was allocated since.
	Start time.Time `json:"start"`
	// Interval is the finest interval (--interval).
	Interval time.Duration `json:"interval_ns"`
	// Rate is the sampler's mean bytes between two samples (0: no
	// sampler; the intervals then have no Held).
	Rate uint64 `json:"rate"`
	// MaxStacks is how many stacks an interval names at most; the rest
	// are summed in its OtherHeld.
	MaxStacks int `json:"max_stacks"`
	// Tiers say how intervals merge as they age, finest first.
	Tiers []RecordingTier `json:"tiers"`
	// Triggers are the thresholds armed (--trigger-*), as text; empty
	// when none.
	Triggers []string `json:"triggers,omitempty"`
}

// RecordingTier is one step of the merging: intervals whose end is
// within Span of the newest interval's end are Step long (or shorter,
// before they merge). The last tier has Span 0 (all older ones) and
// MaxIntervals: when more than that many would be kept, its Step doubles
// as often as needed, so the count stays bounded over any duration.
type RecordingTier struct {
	Step         time.Duration `json:"step_ns"`
	Span         time.Duration `json:"span_ns"`
	MaxIntervals int           `json:"max_intervals,omitempty"`
}

// RecordedStack is one allocation stack of the sampler.
type RecordedStack struct {
	// ID is what StackHeld.Stack names; unique in a recording, never 0.
	ID int `json:"id"`
	// Frames run from the root (the thread's start) to the leaf (the
	// allocator's entry), as stackprof.Site's.
	Frames []stackprof.Frame `json:"frames"`
}

// RecordedInterval is one interval of the recording: the levels at its
// end.
type RecordedInterval struct {
	// Start and Duration are the interval's span; End() is where its
	// levels were read.
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration_ns"`
	// Merged is how many finest intervals it stands for (1: none merged).
	Merged int `json:"merged"`
	// Rss is the process's resident bytes at the end (the sum of
	// Classes' Rss); RssPeak the highest Rss read at the end of any
	// finest interval merged into it.
	Rss     uint64 `json:"rss"`
	RssPeak uint64 `json:"rss_peak"`
	// Classes are the RSS by memory class, in the order of
	// RecordingClasses, every one present (zeros included). They are
	// from the last read of the memory map, which may be older than the
	// interval's end when reading it costs much (RssAt).
	Classes []ClassRss `json:"classes"`
	// RssAt is when Classes and Rss were read.
	RssAt time.Time `json:"rss_at"`
	// Arenas are each arena's figures that need no walk, read while the
	// process runs (a word may be a moment older than its neighbour);
	// empty when the allocator's state could not be located.
	Arenas []ArenaLevel `json:"arenas,omitempty"`
	// MmappedBytes is glibc's mp_.mmapped_mem: the bytes of every chunk
	// mmapped on its own, resident or not.
	MmappedBytes uint64 `json:"mmapped_bytes"`
	// Held are the stacks holding the most bytes allocated since the
	// recording began and still held at the interval's end, largest
	// first, at most Meta.MaxStacks; OtherHeld sums the rest (its Stack
	// is 0). Empty with no sampler.
	Held      []StackHeld `json:"held,omitempty"`
	OtherHeld StackHeld   `json:"other_held"`
	// Samples is how many allocations the sampler recorded since the
	// recording began; Dropped how many found no room (those kept in the
	// same read stand for them).
	Samples int    `json:"samples"`
	Dropped uint64 `json:"dropped"`
	// Malloc is malloc's own split of its heaps, from the last walk
	// (record's --walk-every) that ended within the interval; nil when
	// none did. A merged interval keeps the latest walk of those merged.
	Malloc *MallocLevel `json:"malloc,omitempty"`
}

// MallocLevel is what a read-only walk of the heaps (a copy-on-write
// image, as `info --read-only` reads) said about malloc's memory, split
// as the RSS waterfall splits it (Report.Waterfall): what the program
// holds, what malloc keeps free and resident (trimmable now, or pinned),
// what is free and already given back, the threads' tcaches.
type MallocLevel struct {
	// At is when the image was made: the walk's figures are of that
	// moment. ResidentAt is when the pagemap of the live process was read
	// for which free pages are resident, after the walk: the split of
	// free memory into trimmable, pinned and not resident is of then (a
	// malloc_trim between the two shows as free and not resident).
	At         time.Time `json:"at"`
	ResidentAt time.Time `json:"resident_at"`
	// Held is the waterfall's held line: bytes the program holds in the
	// heaps, resident (the tcaches' chunks not included).
	Held uint64 `json:"held"`
	// Tcache is the chunks cached in threads' tcaches.
	Tcache uint64 `json:"tcache"`
	// Trimmable is the free bytes, resident, that malloc_trim(0) would
	// give back now; Pinned the rest of the free resident bytes (pieces
	// of pages beside held chunks, thread arenas' tops).
	Trimmable uint64 `json:"trimmable"`
	Pinned    uint64 `json:"pinned"`
	// PinnedTops is the part of Pinned at the top of thread arenas
	// (malloc_trim leaves them; only free() shrinks them, above
	// trim_threshold); the rest of Pinned is pieces of pages beside held
	// chunks, fastbins and chunk headers.
	PinnedTops uint64 `json:"pinned_tops"`
	// FreeNotResident is whole free pages not in RAM (trimmed, or never
	// touched).
	FreeNotResident uint64 `json:"free_not_resident"`
	// Mmapped is the resident bytes of the chunks mmapped on their own.
	Mmapped uint64 `json:"mmapped"`
	// Arenas are malloc's own counts per arena (malloc_info's in use and
	// free, resident or not), main_arena first.
	Arenas []ArenaMalloc `json:"arenas,omitempty"`
	// Stop is how long every thread was stopped to make the image; Cpu
	// the CPU time arenactl spent on the walk, the image's read and the
	// residency's.
	Stop time.Duration `json:"stop_ns"`
	Cpu  time.Duration `json:"cpu_ns"`
}

// FreeResident is the free bytes malloc keeps in RAM.
func (m *MallocLevel) FreeResident() uint64 { return m.Trimmable + m.Pinned }

// ArenaMalloc is one arena's bytes in use and free, as malloc_info counts
// them.
type ArenaMalloc struct {
	Index int    `json:"index"`
	InUse uint64 `json:"in_use"`
	Free  uint64 `json:"free"`
}

// End is when the interval's levels were read.
func (iv *RecordedInterval) End() time.Time { return iv.Start.Add(iv.Duration) }

// HeldBytes is the estimated bytes held of all stacks together.
func (iv *RecordedInterval) HeldBytes() float64 {
	n := iv.OtherHeld.Bytes
	for _, h := range iv.Held {
		n += h.Bytes
	}
	return n
}

// RecordingClasses are the memory classes of ClassRss, in order:
// glibc's main (sbrk) heap, the other arenas' heaps, chunks mmapped on
// their own, other anonymous memory, thread and main stacks, mapped
// files (the program, its libraries, others) and the kernel's special
// mappings ([vdso], ...).
var RecordingClasses = []string{"main-heap", "arena-heaps", "mmapped-chunks", "other-anon", "stacks", "files", "special"}

// ClassRss is one memory class's resident bytes.
type ClassRss struct {
	Class string `json:"class"`
	// Rss is resident bytes; Size the bytes mapped; Mappings how many
	// mappings (for mmapped-chunks, chunks).
	Rss      uint64 `json:"rss"`
	Size     uint64 `json:"size"`
	Mappings int    `json:"mappings"`
}

// ArenaLevel is one arena's state that needs no walk.
type ArenaLevel struct {
	// Index is the arena's place in the ring from main_arena (0).
	Index int    `json:"index"`
	Addr  uint64 `json:"addr"`
	// SystemBytes is its malloc_state's system_mem: what it holds from
	// the system; TopBytes the size of its top chunk, the part of that
	// malloc_trim could give back at the end.
	SystemBytes uint64 `json:"system_bytes"`
	TopBytes    uint64 `json:"top_bytes"`
}

// StackHeld is what one stack held at an interval's end, of what was
// allocated since the recording began: unbiased estimates from the
// samples (stackprof.Estimate).
type StackHeld struct {
	// Stack is a RecordedStack's ID; 0 in OtherHeld.
	Stack int `json:"stack"`
	// Bytes and Objects are the estimated bytes and blocks held; Var
	// the estimate's variance (its standard error is √Var).
	Bytes   float64 `json:"bytes"`
	Var     float64 `json:"var"`
	Objects float64 `json:"objects"`
	// Sampled is how many sampled blocks stand behind it.
	Sampled int `json:"sampled"`
}

// Kinds of RecordingEvent.
const (
	EventTrigger        = "trigger"         // a threshold was crossed
	EventSnapshot       = "snapshot"        // a snapshot was written (Path)
	EventSnapshotFailed = "snapshot-failed" // one was due and could not be written (Text)
	EventNote           = "note"            // something the user should know (the sampler's notes)
	EventWalk           = "walk"            // the walks' cadence changed: paused, stretched or resumed (Text says why)
)

// RecordingEvent is something that happened during a recording besides
// the levels.
type RecordingEvent struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
	// Path is the file an EventSnapshot wrote.
	Path string `json:"path,omitempty"`
	// Value is what crossed a threshold (bytes or a count) and Limit the
	// threshold, for EventTrigger.
	Value uint64 `json:"value,omitempty"`
	Limit uint64 `json:"limit,omitempty"`
}

// Why a recording ended (RecordingEnd.Why).
const (
	EndDuration    = "duration"    // --duration passed
	EndInterrupted = "interrupted" // a signal (Ctrl-C, SIGTERM)
	EndExited      = "exited"      // the process exited (or exec'd)
	EndError       = "error"       // an error (Err)
)

// RecordingEnd is how a recording ended cleanly.
type RecordingEnd struct {
	At  time.Time `json:"at"`
	Why string    `json:"why"`
	Err string    `json:"err,omitempty"`
	// Left is what taking the sampler out left in the process.
	Left SamplerLeft `json:"left"`
}

// Span is the time the intervals cover.
func (r *Recording) Span() time.Duration {
	if len(r.Intervals) == 0 {
		return 0
	}
	return r.Intervals[len(r.Intervals)-1].End().Sub(r.Intervals[0].Start)
}
