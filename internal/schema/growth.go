package schema

import (
	"math"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// Growth is the document of growth --json: which code made the process's
// memory grow over the window, by call stack and memory class, largest
// bytes touched first.
type Growth struct {
	SchemaVersion int    `json:"schema_version"`
	Pid           int    `json:"pid"`
	Exe           string `json:"exe"`
	Start         string `json:"start"` // RFC 3339, when the window opened
	DurationUs    int64  `json:"duration_us"`
	// Period is the page faults per fault sample; PageSize the bytes a
	// fault stands for.
	Period       uint64 `json:"period"`
	PageSize     uint64 `json:"page_size"`
	Threads      int    `json:"threads"`
	FaultSamples int    `json:"fault_samples"`
	Calls        int    `json:"calls"`
	Lost         uint64 `json:"lost"`
	Throttled    uint64 `json:"throttled"`
	// IncompleteStacks did not reach the outermost frame; TruncatedStacks
	// of them because the stack copy was too short.
	IncompleteStacks int  `json:"incomplete_stacks"`
	TruncatedStacks  int  `json:"truncated_stacks"`
	Interrupted      bool `json:"interrupted"`
	// SyscallsBy: "eBPF" or "tracepoints". ShortStacks are the calls
	// whose short stack copy ended their unwinding, CompletedStacks of
	// them shared out among whole stacks that begin as theirs do.
	SyscallsBy string `json:"syscalls_by"`
	// FilePagesBy: what counted the pages a fault in a file's (or shared
	// memory's) pages mapped: "eBPF" or "tracepoint" (rss_stat); "" when
	// such a fault counts as one page.
	FilePagesBy     string `json:"file_pages_by"`
	ShortStacks     int    `json:"short_stacks"`
	CompletedStacks int    `json:"completed_stacks"`
	// RSS from smaps_rollup before and after (after absent when it could
	// not be read).
	RSSBefore uint64  `json:"rss_before"`
	RSSAfter  *uint64 `json:"rss_after,omitempty"`
	// Explained is net_space summed: touched − given back − unmapped;
	// ExplainedSigma its standard error from fault sampling.
	Explained      int64         `json:"explained"`
	ExplainedSigma uint64        `json:"explained_sigma"`
	Classes        []GrowthClass `json:"classes"`
	Sites          []GrowthSite  `json:"sites"`
}

// GrowthValues are one site's or class's figures (bytes unless named).
type GrowthValues struct {
	Touched   uint64 `json:"touched_space"`
	Faults    uint64 `json:"faults"`
	Mapped    uint64 `json:"mapped_space"`
	Unmapped  uint64 `json:"unmapped_space"`
	GivenBack uint64 `json:"given_back_space"`
	Net       int64  `json:"net_space"`
	Calls     uint64 `json:"calls"`
	Samples   uint64 `json:"fault_samples"`
}

// GrowthClass totals one memory class ("arena-heap 2" for an arena's heaps).
type GrowthClass struct {
	Class string `json:"class"`
	GrowthValues
}

// GrowthSite is one call stack in one memory class.
type GrowthSite struct {
	Class string `json:"class"`
	// Arena is the arena's number (0 main_arena) for heap memory, absent
	// when not known or not a heap.
	Arena *int `json:"arena,omitempty"`
	GrowthValues
	Stop   string      `json:"stack_stop"`
	Frames []LeakFrame `json:"frames"` // leaf first
}

func growthValues(v []float64) GrowthValues {
	u := func(x float64) uint64 { return uint64(math.Max(0, math.Round(x))) }
	return GrowthValues{Touched: u(v[report.GrowthTouched]), Faults: u(v[report.GrowthFaults]), Mapped: u(v[report.GrowthMapped]),
		Unmapped: u(v[report.GrowthUnmapped]), GivenBack: u(v[report.GrowthGivenBack]), Net: int64(math.Round(v[report.GrowthNet])),
		Calls: u(v[report.GrowthCalls]), Samples: u(v[report.GrowthSamples])}
}

// NewGrowth is the document of a growth run.
func NewGrowth(g *report.Growth) Growth {
	d := Growth{SchemaVersion: Version, Pid: g.Pid, Exe: g.Exe, Start: g.Start.UTC().Format(time.RFC3339Nano),
		DurationUs: g.Duration.Microseconds(), Period: g.Period, PageSize: g.PageSize, Threads: g.Threads,
		FaultSamples: g.FaultSamples, Calls: g.Calls, Lost: g.Lost, Throttled: g.Throttled,
		IncompleteStacks: g.Incomplete, TruncatedStacks: g.Truncated, Interrupted: g.Interrupted,
		SyscallsBy: g.CallsBy, FilePagesBy: g.RSSStatBy, ShortStacks: g.ShortCalls, CompletedStacks: g.Completed,
		RSSBefore: g.RSSBefore, Explained: int64(math.Round(g.Total(report.GrowthNet))),
		ExplainedSigma: uint64(math.Round(g.TouchedSigma(g.Total(report.GrowthSamples)))),
		Classes:        []GrowthClass{}, Sites: []GrowthSite{}}
	if g.Measured {
		after := g.RSSAfter
		d.RSSAfter = &after
	}
	for _, c := range g.Classes() {
		d.Classes = append(d.Classes, GrowthClass{Class: c.Class, GrowthValues: growthValues(c.Values)})
	}
	for _, s := range g.Profile.Sites {
		gs := GrowthSite{Class: s.Labels[report.LabelClass], GrowthValues: growthValues(s.Values), Stop: s.Stop.String(), Frames: []LeakFrame{}}
		if a, ok := s.Labels[report.LabelArena]; ok {
			n := 0
			for _, ch := range a {
				n = n*10 + int(ch-'0')
			}
			gs.Arena = &n
		}
		for i := len(s.Frames) - 1; i >= 0; i-- {
			gs.Frames = append(gs.Frames, leakFrame(s.Frames[i]))
		}
		d.Sites = append(d.Sites, gs)
	}
	return d
}
