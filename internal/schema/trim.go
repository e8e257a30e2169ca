package schema

import (
	"github.com/arenactl/arenactl/internal/report"
)

// TrimClass is one heap class (or the process) before and after a trim.
type TrimClass struct {
	Class              string `json:"class"`
	RssBefore          uint64 `json:"rss_before"`
	RssAfter           uint64 `json:"rss_after"`
	PrivateDirtyBefore uint64 `json:"private_dirty_before"`
	PrivateDirtyAfter  uint64 `json:"private_dirty_after"`
}

// Trim is the document of trim --json. With --dry-run nothing ran: result,
// injection and released_bytes are null and classes is empty.
type Trim struct {
	// SchemaVersion is Version: which schema (schema/v1/...) the document follows.
	SchemaVersion int         `json:"schema_version"`
	Pid           int         `json:"pid"`
	Libc          Libc        `json:"glibc"`
	Pad           uint64      `json:"pad"`
	Result        *int        `json:"result"`
	Injection     *Injection  `json:"injection"`
	Classes       []TrimClass `json:"classes"`
	ReleasedBytes *int64      `json:"released_bytes"`
	// HeapTopReturnedBytes is how much the main heap shrank (the top
	// malloc_trim gave back with sbrk, resident or not): what its result 1
	// stands for when released_bytes is 0. Null with --dry-run.
	HeapTopReturnedBytes *uint64 `json:"heap_top_returned_bytes"`
	DryRun               bool    `json:"dry_run"`
	// PredictedBytes is the RSS the free lists said malloc_trim would
	// release (prediction.predicted_bytes); null when no walk was possible.
	PredictedBytes *uint64         `json:"predicted_bytes"`
	Prediction     *TrimPrediction `json:"prediction"`
}

// TrimPrediction is what the free lists said malloc_trim would release.
type TrimPrediction struct {
	// Torn: walked without stopping the process (before a real trim);
	// FrozenUs: with --dry-run, how long every thread was stopped.
	Torn     bool  `json:"torn"`
	FrozenUs int64 `json:"frozen_us"`
	// Hold: with --dry-run "image" (every thread stopped while a
	// copy-on-write image was made, the lists read from it) or "walk"
	// (stopped for the whole walk); before a real trim "none" (torn).
	// ImageSkipped: why no image was made, when none was.
	Hold           string      `json:"hold"`
	ImageSkipped   string      `json:"image_skipped,omitempty"`
	TrimmableBytes uint64      `json:"trimmable_bytes"` // whole free pages, resident or not
	PredictedBytes uint64      `json:"predicted_bytes"` // of which resident now
	Arenas         []ArenaTrim `json:"arenas"`
	Damage         []Damage    `json:"damage"` // --dry-run: what the walk found
}

// ArenaTrim is the prediction for one arena.
type ArenaTrim struct {
	Index          int    `json:"index"`
	Main           bool   `json:"main"`
	Addr           uint64 `json:"addr"`
	Chunks         int    `json:"chunks"`          // free chunks holding whole pages
	TrimmableBytes uint64 `json:"trimmable_bytes"` // madvised, plus the main arena's top given back
	TopBytes       uint64 `json:"top_bytes"`       // the main arena's top given back (systrim)
	PredictedBytes uint64 `json:"predicted_bytes"` // resident now
}

// NewTrim is the document of trim --json.
func NewTrim(r *report.TrimReport) Trim {
	out := Trim{SchemaVersion: Version, Pid: r.Pid, Libc: newLibc(r.Libc), Pad: r.Pad, DryRun: r.DryRun, Classes: []TrimClass{}}
	if !r.DryRun {
		result, released, in, shrunk := r.Result, r.Released(), newInjection(r.Injection), r.HeapShrunk()
		out.Result, out.ReleasedBytes, out.Injection, out.HeapTopReturnedBytes = &result, &released, &in, &shrunk
		for _, row := range r.Rows() {
			out.Classes = append(out.Classes, TrimClass{Class: row.Name, RssBefore: row.RssBefore, RssAfter: row.RssAfter,
				PrivateDirtyBefore: row.PdBefore, PrivateDirtyAfter: row.PdAfter})
		}
	}
	if p := r.Prediction; p != nil {
		out.PredictedBytes = &p.Resident
		out.Prediction = &TrimPrediction{Torn: !r.DryRun, FrozenUs: r.Frozen.Microseconds(), Hold: r.Hold, ImageSkipped: r.ImageSkipped, TrimmableBytes: p.Bytes,
			PredictedBytes: p.Resident, Arenas: []ArenaTrim{}, Damage: newDamage(r.Damage)}
		for _, a := range p.Arenas {
			out.Prediction.Arenas = append(out.Prediction.Arenas, ArenaTrim{Index: a.Index, Main: a.Main, Addr: a.Addr,
				Chunks: a.Chunks, TrimmableBytes: a.Bytes, TopBytes: a.Top, PredictedBytes: a.Resident})
		}
	}
	return out
}
