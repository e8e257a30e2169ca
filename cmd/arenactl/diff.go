package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
)

func newDiffCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "diff A.json B.json",
		Short: "What grew between two info --json documents: per arena, per memory-map class, the process, the findings",
		Long: `diff compares two documents written by 'arenactl info --json' (or two
lines of 'arenactl watch --json': a file holding several JSON documents, one
a line, stands for its last one). It shows, largest growth first, what each
arena holds from the system, has in use, has free (fastbins, other bins) and
has cached in threads' tcaches (when both documents come from --read-only),
then each memory-map class, the process's RSS and the findings that appeared
or cleared.

Arenas are matched by address when both documents come from a read-only
walk; otherwise main_arena with main_arena and the thread arenas from the
oldest, since glibc puts each new arena right after main_arena and so shifts
the index of every older one. Documents of two different processes or glibc
versions are compared all the same, after a warning.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return &usageError{msg: "diff takes two files written by 'arenactl info --json' (see 'arenactl diff --help')"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			before, err := schema.ReadSummary(args[0])
			if err != nil {
				return err
			}
			after, err := schema.ReadSummary(args[1])
			if err != nil {
				return err
			}
			d := report.Compare(before, after)
			for _, w := range d.Warnings {
				fmt.Fprintf(os.Stderr, "arenactl: warning: %s\n", render.Line(w)) // names the documents' executables
			}
			if asJSON {
				return writeJSON(os.Stdout, schema.NewDiff(d))
			}
			return render.Diff(os.Stdout, d)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (the schema: docs/json.md)")
	return c
}
