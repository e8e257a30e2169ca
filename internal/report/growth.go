package report

import (
	"math"
	"time"

	"github.com/arenactl/arenactl/internal/stackprof"
)

// The value types of a growth profile, in the order of Growth.Profile's
// Types (and its pprof sample types).
const (
	GrowthTouched   = iota // bytes first touched: sampled faults × period × page size
	GrowthFaults           // faults, estimated: sampled faults × period
	GrowthMapped           // bytes made accessible: mmap (not PROT_NONE), brk up, mremap up, mprotect of a reservation
	GrowthUnmapped         // accessible bytes unmapped: munmap, brk down, mremap down, mprotect/mmap to PROT_NONE
	GrowthGivenBack        // bytes given back with madvise (DONTNEED, FREE, REMOVE): malloc_trim's path
	GrowthNet              // touched - given back - unmapped: the site's share of the RSS change, at most
	GrowthCalls            // memory syscalls made
	GrowthSamples          // fault samples taken
	growthTypes
)

// GrowthTypes are the value types of Growth.Profile.
var GrowthTypes = []stackprof.ValueType{
	GrowthTouched:   {Type: "touched_space", Unit: "bytes"},
	GrowthFaults:    {Type: "faults", Unit: "count"},
	GrowthMapped:    {Type: "mapped_space", Unit: "bytes"},
	GrowthUnmapped:  {Type: "unmapped_space", Unit: "bytes"},
	GrowthGivenBack: {Type: "given_back_space", Unit: "bytes"},
	GrowthNet:       {Type: "net_space", Unit: "bytes"},
	GrowthCalls:     {Type: "calls", Unit: "count"},
	GrowthSamples:   {Type: "fault_samples", Unit: "count"},
}

// Labels of a growth site.
const (
	LabelClass = "class" // the memory class the bytes are in (maps' class names, and mmapped-chunk)
	LabelArena = "arena" // which arena's heap, for main-heap and arena-heap: "0" is main_arena
)

// Growth is which code made a process's memory grow over a window: its
// page faults (sampled) and memory syscalls (every one) by call stack and
// memory class, and the RSS the kernel counted before and after.
type Growth struct {
	Pid      int
	Exe      string
	Libc     LibcInfo
	Start    time.Time
	Duration time.Duration
	// Period is the faults per fault sample; PageSize the bytes one
	// fault stands for.
	Period, PageSize uint64
	Profile          *stackprof.Valued
	// Threads the events were opened on (threads created in the window
	// inherited them).
	Threads int
	// FaultSamples and Calls taken; Lost records the rings had no room
	// for; Throttled: times the kernel throttled sampling.
	FaultSamples, Calls int
	Lost, Throttled     uint64
	// Incomplete stacks did not reach their outermost frame, Truncated
	// of them because the copy was too short.
	Incomplete, Truncated int
	// RSS before and after the window, from smaps_rollup; Measured is
	// false when the one after could not be read.
	RSSBefore, RSSAfter uint64
	Measured            bool
	Interrupted         bool
	// NoArenas says why faults in heaps are not told apart by arena ("" when they are).
	NoArenas string
	// CallsBy is what recorded the memory syscalls: "eBPF" (a short
	// stack copy for most calls, completed from the whole ones) or
	// "tracepoints" (perf's, a whole copy each); NoBPF why not eBPF.
	CallsBy, NoBPF string
	// ExactSamples are the fault samples in a file's pages (or shared
	// memory's), whose pages were counted by the kernel's rss_stat
	// records of every fault there rather than estimated from the
	// samples; NoRSSStat says why they could not be ("" when they
	// were).
	ExactSamples int
	NoRSSStat    string
	// RSSStatBy is what read those records: "eBPF" (a raw tracepoint
	// program) or "tracepoint" (perf's kmem:rss_stat); "" when neither.
	RSSStatBy string
	// ShortCalls are the calls whose short stack copy ended their
	// unwinding; Completed of them were shared out among whole stacks
	// that begin as theirs do, ShortLeft stay cut short.
	ShortCalls, Completed, ShortLeft int
}

// RSSGrowth is the growth smaps_rollup saw.
func (g *Growth) RSSGrowth() int64 { return int64(g.RSSAfter) - int64(g.RSSBefore) }

// Total sums one value type over every site.
func (g *Growth) Total(typ int) float64 {
	var n float64
	for _, s := range g.Profile.Sites {
		n += s.Values[typ]
	}
	return n
}

// TouchedSigma is the standard error of the bytes touched estimate, when
// the faults counted between two samples are taken as a Poisson process
// (faults of many sites interleaved): sqrt(samples) × period × page, of
// the samples whose bytes were estimated (not ExactSamples).
func (g *Growth) TouchedSigma(samples float64) float64 {
	return math.Sqrt(max(samples-float64(g.ExactSamples), 0)) * float64(g.Period*g.PageSize)
}

// GrowthClass totals one memory class.
type GrowthClass struct {
	Class  string
	Values []float64 // by value type
}

// Classes totals the profile per class, largest net first.
func (g *Growth) Classes() []GrowthClass {
	idx := map[string]int{}
	var out []GrowthClass
	for _, s := range g.Profile.Sites {
		c := s.Labels[LabelClass]
		if a, ok := s.Labels[LabelArena]; ok && c == "arena-heap" {
			c += " " + a
		}
		i, ok := idx[c]
		if !ok {
			i = len(out)
			idx[c] = i
			out = append(out, GrowthClass{Class: c, Values: make([]float64, growthTypes)})
		}
		for k, v := range s.Values {
			out[i].Values[k] += v
		}
	}
	sortGrowth(out)
	return out
}

func sortGrowth(cs []GrowthClass) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && less(cs[j], cs[j-1]); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

func less(a, b GrowthClass) bool {
	if a.Values[GrowthTouched] != b.Values[GrowthTouched] {
		return a.Values[GrowthTouched] > b.Values[GrowthTouched]
	}
	if a.Values[GrowthMapped] != b.Values[GrowthMapped] {
		return a.Values[GrowthMapped] > b.Values[GrowthMapped]
	}
	return a.Class < b.Class
}
