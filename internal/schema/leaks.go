package schema

import (
	"math"
	"time"

	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// Leaks is the document of leaks --json: the sampled heap profile of the
// window, every site (those that hold nothing too: what they allocated is
// in the alloc_ fields), largest holder first.
type Leaks struct {
	// SchemaVersion is Version: which schema (schema/v1/...) the document follows.
	SchemaVersion int    `json:"schema_version"`
	Pid           int    `json:"pid"`
	Start         string `json:"start"` // RFC 3339, when the window opened
	DurationUs    int64  `json:"duration_us"`
	// Rate is the mean number of bytes allocated between two samples; 0
	// when every allocation was recorded.
	Rate    uint64 `json:"rate"`
	Samples int    `json:"samples"`
	// Dropped samples found no room in the sampler: the ones kept in
	// the same drains stand for them.
	Dropped uint64 `json:"dropped"`
	// Thinned is always 0: samples are no longer let go when the ring
	// fills (ShortStacks); the field stays for readers of version 1.
	Thinned uint64 `json:"thinned"`
	// Samples whose stack did not reach the outermost frame, and of them
	// those whose stack copy was too short.
	IncompleteStacks int `json:"incomplete_stacks"`
	TruncatedStacks  int `json:"truncated_stacks"`
	// ShortStacks samples were taken with only the top of their stack
	// (the ring of whole ones had no room); CompletedStacks of them were
	// shared out among the whole stacks that begin with the same frames.
	ShortStacks     uint64 `json:"short_stacks"`
	CompletedStacks int    `json:"completed_stacks"`
	LeakEstimate
	// GrowthPerSecond is inuse_space spread over the window, in bytes per
	// second.
	GrowthPerSecond uint64 `json:"growth_per_second"`
	// Explains sets inuse_space against the in-use growth the read-only
	// walk measured over the same window, when it was measured.
	Explains *LeakExplanation `json:"explains,omitempty"`
	Sites    []LeakSite       `json:"sites"`
	// What the profiling did to the process (absent when the document
	// was made from a profile alone).
	Sampler *LeakSampler `json:"sampler,omitempty"`
}

// LeakSampler is what arenactl leaks did in the process.
type LeakSampler struct {
	Exe string `json:"exe"`
	// PatchedGOTEntries were pointed at the sampler and put back;
	// SkippedGOTEntries left alone (another object's definition, an
	// interposer), with why.
	PatchedGOTEntries int      `json:"patched_got_entries"`
	SkippedGOTEntries []string `json:"skipped_got_entries"`
	// StoppedUs is how long every thread was stopped, at attach, at each
	// look for dlopen'd objects that found some, and at detach.
	StoppedUs int64 `json:"stopped_us"`
	// Untracked sampled blocks could not be watched for their free (the
	// address set was full): they count as held.
	Untracked uint64 `json:"untracked"`
	// Kept: the sampler stayed in the process, inert, because a thread
	// could still run in it; absent when it was removed.
	Kept *LeakKept `json:"kept,omitempty"`
	// Interrupted: the window ended by a signal before its duration.
	Interrupted bool `json:"interrupted"`
	// InUseBefore and InUseAfter: bytes in use by the read-only walks
	// before and after the window.
	InUseBefore uint64 `json:"inuse_before"`
	InUseAfter  uint64 `json:"inuse_after"`
}

// LeakKept is a sampler left in the process.
type LeakKept struct {
	Addr uint64 `json:"addr"`
	Size uint64 `json:"size"`
	Why  string `json:"why"`
}

// NewLeaksReport is the document of a whole leaks run.
func NewLeaksReport(r *report.Leaks) Leaks {
	var x *stackprof.Explanation
	if r.Measured {
		e := r.Profile.Explains(r.Growth())
		x = &e
	}
	out := NewLeaks(r.Pid, r.Profile, x)
	sm := &LeakSampler{Exe: r.Exe, PatchedGOTEntries: r.Patched, SkippedGOTEntries: append([]string{}, r.Skipped...),
		StoppedUs: r.Stopped.Microseconds(), Untracked: r.Untracked, Interrupted: r.Interrupted,
		InUseBefore: r.InUseBefore, InUseAfter: r.InUseAfter}
	if r.Left.Addr != 0 {
		sm.Kept = &LeakKept{Addr: r.Left.Addr, Size: r.Left.Size, Why: r.Left.Why}
	}
	out.Sampler = sm
	return out
}

// LeakEstimate is what the samples stand for, unbiased and rounded: named
// as pprof's sample types are.
type LeakEstimate struct {
	AllocObjects uint64 `json:"alloc_objects"`
	AllocSpace   uint64 `json:"alloc_space"`
	InuseObjects uint64 `json:"inuse_objects"`
	InuseSpace   uint64 `json:"inuse_space"`
	// LeakedObjects and LeakedSpace are the part of inuse that nothing
	// the program can reach points to at the window's end (a scan of the
	// heap then); absent when no scan was made.
	LeakedObjects *uint64 `json:"leaked_objects,omitempty"`
	LeakedSpace   *uint64 `json:"leaked_space,omitempty"`
}

// LeakSampled is the samples themselves: how many, and the bytes they
// asked for.
type LeakSampled struct {
	Alloc      int    `json:"alloc"`
	Inuse      int    `json:"inuse"`
	AllocBytes uint64 `json:"alloc_bytes"`
	InuseBytes uint64 `json:"inuse_bytes"`
}

// LeakExplanation: explained (the profile's inuse_space) of measured
// (which may be 0 or negative: the heap did not grow).
type LeakExplanation struct {
	ExplainedBytes uint64 `json:"explained_bytes"`
	// SigmaBytes is explained_bytes' standard error from the sampling;
	// HeldSamples the samples behind it.
	SigmaBytes    uint64 `json:"sigma_bytes"`
	HeldSamples   int    `json:"held_samples"`
	MeasuredBytes int64  `json:"measured_bytes"`
}

// LeakSite is one call stack that allocated.
type LeakSite struct {
	LeakEstimate
	Sampled         LeakSampled `json:"sampled"`
	GrowthPerSecond uint64      `json:"growth_per_second"`
	// Kinds are the allocator entry points sampled here ("malloc", "new", ...).
	Kinds []string `json:"kinds"`
	// AllocatedAt is the frame that called the allocator.
	AllocatedAt LeakFrame `json:"allocated_at"`
	// StackEnd says why the stack ends where it does: "end" (it reached
	// the thread's first frame), "truncated", "no module", "no CFI", "bad
	// frame", "max frames".
	StackEnd string `json:"stack_end"`
	// Frames from the root to the allocator, inlined calls as frames of
	// their own.
	Frames []LeakFrame `json:"frames"`
}

// LeakFrame is one function of a stack.
type LeakFrame struct {
	// Function is the demangled name, or module+0xoffset (or the address)
	// when no symbol covers it.
	Function string `json:"function"`
	Symbol   string `json:"symbol,omitempty"` // as in the file, when it differs
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	// Inlined: inlined into the next frame towards the root, at the same
	// address.
	Inlined bool   `json:"inlined,omitempty"`
	Address uint64 `json:"address"`
	Module  string `json:"module,omitempty"`
	BuildID string `json:"build_id,omitempty"`
	Offset  uint64 `json:"offset,omitempty"` // address in the module's file
}

func estimate(e stackprof.Estimate, classified bool) LeakEstimate {
	r := func(v float64) uint64 { return uint64(math.Max(0, math.Round(v))) }
	out := LeakEstimate{AllocObjects: r(e.AllocObjects), AllocSpace: r(e.AllocBytes), InuseObjects: r(e.InUseObjects), InuseSpace: r(e.InUseBytes)}
	if classified {
		lo, ls := r(e.LeakedObjects), r(e.LeakedBytes)
		out.LeakedObjects, out.LeakedSpace = &lo, &ls
	}
	return out
}

func leakFrame(f stackprof.Frame) LeakFrame {
	out := LeakFrame{Function: f.Name(), File: f.File, Line: f.Line, Inlined: f.Inlined, Address: f.Addr,
		Module: f.Module, BuildID: f.BuildID, Offset: f.Offset}
	if f.Mangled != f.Function {
		out.Symbol = f.Mangled
	}
	return out
}

// NewLeaks is the document of the profile p of process pid; explains is
// nil when no growth was measured.
func NewLeaks(pid int, p *stackprof.Profile, explains *stackprof.Explanation) Leaks {
	_, tot := p.Total()
	out := Leaks{SchemaVersion: Version, Pid: pid, DurationUs: p.Window.Duration.Microseconds(), Rate: p.Window.Rate,
		Samples: p.Samples, Dropped: p.Window.Dropped, ShortStacks: p.Window.Shortened, CompletedStacks: p.Completed, IncompleteStacks: p.Incomplete, TruncatedStacks: p.Truncated,
		LeakEstimate: estimate(tot, p.Classified), GrowthPerSecond: uint64(math.Round(p.TotalGrowth())), Sites: []LeakSite{}}
	if !p.Window.Start.IsZero() {
		out.Start = p.Window.Start.Format(time.RFC3339Nano)
	}
	if explains != nil {
		out.Explains = &LeakExplanation{ExplainedBytes: uint64(math.Round(explains.Explained)), SigmaBytes: uint64(math.Round(explains.Sigma)),
			HeldSamples: explains.Held, MeasuredBytes: explains.Measured}
	}
	for i := range p.Sites {
		s := &p.Sites[i]
		site := LeakSite{LeakEstimate: estimate(s.Est, p.Classified),
			Sampled:         LeakSampled{Alloc: s.Sampled.Alloc, Inuse: s.Sampled.InUse, AllocBytes: s.Sampled.AllocBytes, InuseBytes: s.Sampled.InUseBytes},
			GrowthPerSecond: uint64(math.Round(p.Growth(s))), Kinds: append([]string{}, s.Kinds...),
			AllocatedAt: leakFrame(s.Leaf()), StackEnd: s.Stop.String(), Frames: []LeakFrame{}}
		for _, f := range s.Frames {
			site.Frames = append(site.Frames, leakFrame(f))
		}
		out.Sites = append(out.Sites, site)
	}
	return out
}
