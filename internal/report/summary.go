package report

import (
	"time"

	"github.com/arenactl/arenactl/internal/maps"
)

// Summary is the part of a report that two reports are compared by: what
// each arena holds, the memory map, the process's counters and the
// findings. watch builds it from each sample's Report; diff decodes it from
// documents that info --json or watch --json wrote, so the comparison is
// the same whichever way the numbers came.
type Summary struct {
	// Source is the file the summary was read from; "" when it was built
	// from a report.
	Source string
	Pid    int
	Exe    string
	Glibc  string // the version as printed
	// Sample is set for a sample of watch.
	Sample *Sample
	Arenas []ArenaMeasures
	// SystemCurrent is glibc's own total of what every arena holds.
	SystemCurrent uint64
	// MmapBytes is nil when glibc prints no mmap total (up to 2.19).
	MmapBytes *uint64
	// Rollup holds the process's counters a document carries: RSS, PSS,
	// Private_Dirty and _Clean, Anonymous, Swap.
	Rollup   maps.Rollup
	Classes  []ClassMeasures
	Findings []Finding
	// Unmeasured: the document has no smaps counters (a kernel core's):
	// Rollup and the classes' counters are unknown, not 0.
	Unmeasured bool
}

// Sample says which sample of a watch a summary is.
type Sample struct {
	Index int
	Time  time.Time
}

// ArenaMeasures is what a summary keeps of one arena, or of a sum of them.
type ArenaMeasures struct {
	Index int
	Main  bool
	// Addr is the arena's address when a walk read it, else 0.
	Addr                             uint64
	SystemCurrent, InUse, Free, Rest uint64
	// Fast is nil when glibc prints no fastbin bytes (2.43), Tcache when
	// no walk read the arena.
	Fast, Tcache *uint64
}

// ClassMeasures is one memory-map class of a summary.
type ClassMeasures struct {
	Class                              string
	Count                              int
	Size, Rss, Pss, PrivateDirty, Swap uint64
}

// Finding is a diagnosis as a summary keeps it: enough to tell which
// appeared or cleared between two summaries, and to print it.
type Finding struct {
	ID       string
	Severity string
	Title    string
	Evidence []string
	Fix      string
	Savings  uint64
}

// Summarize takes from r (and its diagnosis, fs) what two reports are
// compared by.
func Summarize(r *Report, fs []Finding) *Summary {
	mi := r.Malloc
	roll := r.Maps.Rollup
	s := &Summary{Pid: r.Pid, Exe: r.Exe, Glibc: r.Libc.Version.String(), SystemCurrent: mi.SystemCurrent, Findings: fs, Unmeasured: r.Maps.Unmeasured,
		Rollup: maps.Rollup{Rss: roll.Rss, Pss: roll.Pss, PrivateDirty: roll.PrivateDirty, PrivateClean: roll.PrivateClean,
			Anonymous: roll.Anonymous, Swap: roll.Swap}}
	if mi.HasMmap {
		s.MmapBytes = ptr(mi.MmapBytes)
	}
	for i := range mi.Arenas {
		a := &mi.Arenas[i]
		m := ArenaMeasures{Index: a.Index, Main: a.Index == 0, SystemCurrent: a.SystemCurrent, InUse: a.InUse(),
			Free: a.FreeBytes(), Rest: a.RestBytes}
		if a.HasFast {
			m.Fast = ptr(a.FastBytes)
		}
		if ro := r.ReadOnly; ro != nil && i < len(ro.Walk.Arenas) {
			w := &ro.Walk.Arenas[i]
			m.Addr, m.Tcache = w.Addr, ptr(w.TcacheBytes)
		}
		s.Arenas = append(s.Arenas, m)
	}
	for _, c := range r.Maps.Classes {
		s.Classes = append(s.Classes, ClassMeasures{Class: c.Class.String(), Count: c.Count, Size: c.Size, Rss: c.Rss, Pss: c.Pss,
			PrivateDirty: c.PrivateDirty, Swap: c.Swap})
	}
	return s
}

func ptr(v uint64) *uint64 { return &v }

// Total sums the arenas' measures. Fast and Tcache are nil unless every
// arena has them (and there is at least one).
func (s *Summary) Total() ArenaMeasures {
	return sumArenas(s.Arenas)
}

// FreePercent is the arenas' free bytes as a percentage of glibc's total of
// what they hold, and false when they hold nothing.
func (s *Summary) FreePercent() (float64, bool) {
	if s.SystemCurrent == 0 {
		return 0, false
	}
	return 100 * float64(s.Total().Free) / float64(s.SystemCurrent), true
}

func sumArenas(as []ArenaMeasures) ArenaMeasures {
	var s ArenaMeasures
	fast, tcache := uint64(0), uint64(0)
	hasFast, hasTcache := len(as) > 0, len(as) > 0
	for _, a := range as {
		s.SystemCurrent += a.SystemCurrent
		s.InUse += a.InUse
		s.Free += a.Free
		s.Rest += a.Rest
		hasFast = hasFast && a.Fast != nil
		hasTcache = hasTcache && a.Tcache != nil
		if hasFast {
			fast += *a.Fast
		}
		if hasTcache {
			tcache += *a.Tcache
		}
	}
	if hasFast {
		s.Fast = &fast
	}
	if hasTcache {
		s.Tcache = &tcache
	}
	return s
}

// HeapRss is the resident memory of the heaps: the main heap and the
// other arenas' heaps.
func (m MapsSummary) HeapRss() uint64 {
	var n uint64
	for _, c := range m.Classes {
		if c.Class == maps.ClassMainHeap || c.Class == maps.ClassArenaHeap {
			n += c.Rss
		}
	}
	return n
}

// Tcached totals the chunks cached in every thread's tcache.
func (ro *ReadOnly) Tcached() (chunks, bytes uint64) {
	for _, tc := range ro.Tcaches {
		chunks += tc.Chunks
		bytes += tc.Bytes
	}
	return chunks, bytes
}

// Stopped is how long the target was stopped to make the report: the
// borrowed thread's hold for an injection, every thread's freeze for a
// read-only walk; false when nothing was stopped (a torn walk, a core).
func (r *Report) Stopped() (time.Duration, bool) {
	switch {
	case r.Injection != nil:
		return r.Injection.Stopped, true
	case r.ReadOnly != nil && !r.ReadOnly.Torn && r.Core == nil:
		return r.ReadOnly.Frozen, true
	}
	return 0, false
}
