package schema

import (
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// Delta is one measure in both documents, in bytes; delta = after - before.
type Delta struct {
	Before uint64 `json:"before"`
	After  uint64 `json:"after"`
	Delta  int64  `json:"delta"`
}

// MallocDiff is what an arena (or all of them) holds, in both documents.
// fast_bytes is null when either glibc prints no fastbin bytes;
// tcache_bytes when either document lacks the read-only walk.
type MallocDiff struct {
	SystemCurrent Delta  `json:"system_current"`
	InUseBytes    Delta  `json:"in_use_bytes"`
	FreeBytes     Delta  `json:"free_bytes"`
	FastBytes     *Delta `json:"fast_bytes"`
	RestBytes     Delta  `json:"rest_bytes"`
	TcacheBytes   *Delta `json:"tcache_bytes"`
}

// ArenaDiff is one arena. index is its index in the second document
// (null when it is gone), index_before in the first (null when it is new);
// growth, the sort key, is the larger of the growth of system and in use.
type ArenaDiff struct {
	Index       *int   `json:"index"`
	IndexBefore *int   `json:"index_before"`
	Main        bool   `json:"main"`
	Addr        uint64 `json:"addr,omitempty"`
	Status      string `json:"status"` // "changed", "unchanged", "new" or "gone"
	Growth      int64  `json:"growth"`
	MallocDiff
}

// TotalsDiff is every arena together.
type TotalsDiff struct {
	Arenas Delta `json:"arenas"` // a count, not bytes
	MallocDiff
	MmapBytes *Delta `json:"mmap_bytes"`
}

// ClassDiff is one memory-map class.
type ClassDiff struct {
	Class        string `json:"class"`
	Status       string `json:"status"`
	Size         Delta  `json:"size"`
	Rss          Delta  `json:"rss"`
	PrivateDirty Delta  `json:"private_dirty"`
	Swap         Delta  `json:"swap"`
}

// ProcessDiff is the process's counters.
type ProcessDiff struct {
	Rss          Delta `json:"rss"`
	Pss          Delta `json:"pss"`
	PrivateDirty Delta `json:"private_dirty"`
	Anonymous    Delta `json:"anonymous"`
	Swap         Delta `json:"swap"`
}

// DiffSide says what one document is: file, process, and for a line of
// watch --json when it was taken and its index.
type DiffSide struct {
	File   string `json:"file,omitempty"`
	Pid    int    `json:"pid"`
	Exe    string `json:"exe"`
	Glibc  string `json:"glibc"`
	Time   string `json:"time,omitempty"`
	Sample *int   `json:"sample,omitempty"`
}

// Diff is the document of diff --json: arenas and classes largest growth
// first.
type Diff struct {
	// SchemaVersion is Version: which schema (schema/v1/...) the document follows.
	SchemaVersion    int         `json:"schema_version"`
	Before           DiffSide    `json:"before"`
	After            DiffSide    `json:"after"`
	Warnings         []string    `json:"warnings"`
	Changed          bool        `json:"changed"`
	MatchedBy        string      `json:"matched_by"` // "address" or "position"
	Arenas           []ArenaDiff `json:"arenas"`
	Totals           TotalsDiff  `json:"totals"`
	Process          ProcessDiff `json:"process"`
	Classes          []ClassDiff `json:"classes"`
	FindingsAppeared []Finding   `json:"findings_appeared"`
	FindingsCleared  []Finding   `json:"findings_cleared"`
}

// NewDiff is the document of d.
func NewDiff(d *report.Diff) Diff {
	out := Diff{SchemaVersion: Version, Before: diffSide(d.Before), After: diffSide(d.After), Warnings: d.Warnings, Changed: d.Changed, MatchedBy: d.MatchedBy(),
		Arenas: []ArenaDiff{}, Classes: []ClassDiff{}, FindingsAppeared: findingsOf(d.Appeared), FindingsCleared: findingsOf(d.Cleared)}
	for _, a := range d.Arenas {
		out.Arenas = append(out.Arenas, ArenaDiff{Index: a.Index, IndexBefore: a.IndexBefore, Main: a.Main, Addr: a.Addr,
			Status: string(a.Status), Growth: a.Growth, MallocDiff: mallocDiff(a.MallocDiff)})
	}
	t := d.Totals
	out.Totals = TotalsDiff{Arenas: delta(t.Arenas), MallocDiff: mallocDiff(t.MallocDiff), MmapBytes: optDelta(t.MmapBytes)}
	p := d.Process
	out.Process = ProcessDiff{Rss: delta(p.Rss), Pss: delta(p.Pss), PrivateDirty: delta(p.PrivateDirty), Anonymous: delta(p.Anonymous),
		Swap: delta(p.Swap)}
	for _, c := range d.Classes {
		out.Classes = append(out.Classes, ClassDiff{Class: c.Class, Status: string(c.Status), Size: delta(c.Size), Rss: delta(c.Rss),
			PrivateDirty: delta(c.PrivateDirty), Swap: delta(c.Swap)})
	}
	return out
}

func diffSide(s *report.Summary) DiffSide {
	out := DiffSide{File: s.Source, Pid: s.Pid, Exe: s.Exe, Glibc: s.Glibc}
	if s.Sample != nil {
		n := s.Sample.Index
		out.Time, out.Sample = s.Sample.Time.Format(time.RFC3339Nano), &n
	}
	return out
}

func delta(d report.Delta) Delta { return Delta{Before: d.Before, After: d.After, Delta: d.Delta} }

func optDelta(d *report.Delta) *Delta {
	if d == nil {
		return nil
	}
	j := delta(*d)
	return &j
}

func mallocDiff(m report.MallocDiff) MallocDiff {
	return MallocDiff{SystemCurrent: delta(m.SystemCurrent), InUseBytes: delta(m.InUse), FreeBytes: delta(m.Free), FastBytes: optDelta(m.Fast),
		RestBytes: delta(m.Rest), TcacheBytes: optDelta(m.Tcache)}
}
