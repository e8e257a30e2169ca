package diagnose

import "github.com/arenactl/arenactl/internal/report"

// Summaries gives the findings as a report.Summary keeps them, to be
// compared with another summary's.
func Summaries(fs []Finding) []report.Finding {
	var out []report.Finding
	for _, f := range fs {
		out = append(out, report.Finding{ID: f.ID, Severity: f.Severity.String(), Title: f.Title, Evidence: f.Evidence, Fix: f.Fix, Savings: f.Savings})
	}
	return out
}
