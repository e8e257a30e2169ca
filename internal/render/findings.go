package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/arenactl/arenactl/internal/diagnose"
)

// Findings prints the diagnosis under info's tables.
func Findings(w io.Writer, fs []diagnose.Finding) error {
	fmt.Fprintln(w)
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "findings: none (no arena bloat, fragmentation, raised threshold or memory outside malloc worth acting on)")
		return err
	}
	fmt.Fprintf(w, "findings (%d):\n", len(fs))
	for i, f := range fs {
		fmt.Fprintf(w, "\n%d. [%s] %s", i+1, f.Severity, f.Title)
		if f.Savings > 0 {
			fmt.Fprintf(w, " (could save about %s)", Human(f.Savings))
		}
		fmt.Fprintln(w)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "   - %s\n", Line(e)) // may quote the target's environment
		}
		fmt.Fprintf(w, "   fix: %s\n", Line(strings.TrimSpace(f.Fix)))
	}
	return nil
}
