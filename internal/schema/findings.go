package schema

import (
	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/report"
)

// Finding is one diagnosis, in info's findings and diff's findings_appeared
// and findings_cleared.
type Finding struct {
	ID           string   `json:"id"`
	Severity     string   `json:"severity"`
	Title        string   `json:"title"`
	Evidence     []string `json:"evidence"`
	Fix          string   `json:"fix"`
	SavingsBytes uint64   `json:"savings_bytes"`
}

func newFindings(fs []diagnose.Finding) []Finding {
	return findingsOf(diagnose.Summaries(fs))
}

func findingsOf(fs []report.Finding) []Finding {
	out := []Finding{}
	for _, f := range fs {
		out = append(out, Finding{ID: f.ID, Severity: f.Severity, Title: f.Title, Evidence: f.Evidence, Fix: f.Fix, SavingsBytes: f.Savings})
	}
	return out
}

func (f Finding) model() report.Finding {
	return report.Finding{ID: f.ID, Severity: f.Severity, Title: f.Title, Evidence: f.Evidence, Fix: f.Fix, Savings: f.SavingsBytes}
}
