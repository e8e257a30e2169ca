package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/inspect"
)

// diagnoseEnv gathers what the diagnosis needs beyond the report: for a live
// process its malloc environment and CPU counts; a core has neither.
func diagnoseEnv(arg string) diagnose.Env {
	if isCoreArg(arg) {
		return diagnose.Env{}
	}
	return inspect.DiagnoseEnv(parsePid([]string{arg}))
}

func renderFindings(w io.Writer, fs []diagnose.Finding) error {
	fmt.Fprintln(w)
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "findings: none (no arena bloat, fragmentation, raised threshold or memory outside malloc worth acting on)")
		return err
	}
	fmt.Fprintf(w, "findings (%d):\n", len(fs))
	for i, f := range fs {
		fmt.Fprintf(w, "\n%d. [%s] %s", i+1, f.Severity, f.Title)
		if f.Savings > 0 {
			fmt.Fprintf(w, " (could save about %s)", human(f.Savings))
		}
		fmt.Fprintln(w)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "   - %s\n", e)
		}
		fmt.Fprintf(w, "   fix: %s\n", strings.TrimSpace(f.Fix))
	}
	return nil
}

type jsonFinding struct {
	ID           string   `json:"id"`
	Severity     string   `json:"severity"`
	Title        string   `json:"title"`
	Evidence     []string `json:"evidence"`
	Fix          string   `json:"fix"`
	SavingsBytes uint64   `json:"savings_bytes"`
}

func findingsJSON(fs []diagnose.Finding) []jsonFinding {
	out := []jsonFinding{}
	for _, f := range fs {
		out = append(out, jsonFinding{ID: f.ID, Severity: f.Severity.String(), Title: f.Title, Evidence: f.Evidence, Fix: f.Fix, SavingsBytes: f.Savings})
	}
	return out
}
