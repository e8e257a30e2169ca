package schema

import "github.com/arenactl/arenactl/internal/report"

// Waterfall is the process's RSS split into lines that add up: rss_bytes is
// the sum of every line's bytes plus unexplained_bytes (signed: what no
// line accounts for, never folded into one).
type Waterfall struct {
	RssBytes         uint64          `json:"rss_bytes"`
	HeapRssBytes     uint64          `json:"heap_rss_bytes"`
	Lines            []WaterfallLine `json:"lines"`
	UnexplainedBytes int64           `json:"unexplained_bytes"`
	// Notes say which lines are estimates and why.
	Notes []string `json:"notes"`
}

// WaterfallLine is one line: id is stable (held, free-trimmable,
// free-pinned, tcache, mmapped, other-anon, stacks, files); heap says it
// lies inside the heaps' mappings.
type WaterfallLine struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Bytes  uint64   `json:"bytes"`
	Heap   bool     `json:"heap"`
	Detail []string `json:"detail"`
	Action string   `json:"action"`
}

// NewWaterfall is the JSON form of w; nil for nil.
func NewWaterfall(w *report.Waterfall) *Waterfall {
	if w == nil {
		return nil
	}
	out := &Waterfall{RssBytes: w.Rss, HeapRssBytes: w.HeapRss, UnexplainedBytes: w.Unexplained, Lines: []WaterfallLine{}, Notes: []string{}}
	out.Notes = append(out.Notes, w.Notes...)
	for _, l := range w.Lines {
		out.Lines = append(out.Lines, WaterfallLine{ID: l.ID, Title: l.Title, Bytes: l.Bytes, Heap: l.Heap, Detail: append([]string{}, l.Detail...), Action: l.Action})
	}
	return out
}
