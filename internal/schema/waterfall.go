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
	// Server is a database server's own memory accounting (info
	// --mysql), server_error why it could not be read.
	Server      *ServerMemory `json:"server,omitempty"`
	ServerError string        `json:"server_error,omitempty"`
}

// ServerMemory is what the server's performance_schema counts:
// total_bytes over every memory instrument, the largest events, and
// unaccounted_bytes, the program's anonymous memory (held, tcache,
// mmapped, other-anon lines) less total_bytes.
type ServerMemory struct {
	Source           string              `json:"source"`
	TotalBytes       uint64              `json:"total_bytes"`
	Instruments      int                 `json:"instruments"`
	Events           []ServerMemoryEvent `json:"events"`
	UnaccountedBytes int64               `json:"unaccounted_bytes"`
}

// ServerMemoryEvent is one memory instrument.
type ServerMemoryEvent struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
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
	out.ServerError = w.ServerErr
	if sm := w.Server; sm != nil {
		out.Server = &ServerMemory{Source: sm.Source, TotalBytes: sm.Total, Instruments: sm.Instruments, Events: []ServerMemoryEvent{}, UnaccountedBytes: w.Unaccounted}
		for _, e := range sm.Events {
			out.Server.Events = append(out.Server.Events, ServerMemoryEvent{Name: e.Name, Bytes: e.Bytes})
		}
	}
	for _, l := range w.Lines {
		out.Lines = append(out.Lines, WaterfallLine{ID: l.ID, Title: l.Title, Bytes: l.Bytes, Heap: l.Heap, Detail: append([]string{}, l.Detail...), Action: l.Action})
	}
	return out
}
