package schema

import (
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/report"
)

// WatchSample is one line of watch --json: the info document of the
// sample, with when it was taken and its index. diff reads documents into
// it, so that it knows a watch line from a plain info document (no time).
type WatchSample struct {
	Time   string `json:"time"`
	Sample int    `json:"sample"`
	Info
}

// NewWatchSample is the line of watch --json for sample n, taken at at.
func NewWatchSample(n int, at time.Time, r *report.Report, findings []diagnose.Finding) WatchSample {
	return WatchSample{Time: at.Format(time.RFC3339Nano), Sample: n, Info: NewInfo(r, findings)}
}
