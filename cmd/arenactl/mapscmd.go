package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/schema"
)

func newMapsCmd() *cobra.Command {
	var all, asJSON bool
	var maxUnpacked sizeValue
	c := &cobra.Command{
		Use:   "maps PID|CORE",
		Short: "Summarize the process's memory map by class (heaps, stacks, libraries, ...) with RSS",
		Long: `maps reads /proc/PID/smaps and classifies every mapping: the main heap,
non-main arena heaps, the main and thread stacks, the executable, shared
libraries, other files, anonymous memory, and kernel mappings. It stops
nothing and runs nothing in the target.`,
		Args: pidOrCoreArg,
		RunE: func(c *cobra.Command, args []string) error {
			var m *report.Maps
			var err error
			if isCoreArg(args[0]) {
				m, err = inspect.CoreMaps(c.Context(), args[0], maxUnpacked.unpackOptions())
			} else {
				m, err = inspect.Maps(parsePid(args))
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(os.Stdout, schema.NewMaps(m, all))
			}
			return render.Maps(os.Stdout, m, all)
		},
	}
	c.Flags().BoolVar(&all, "all", false, "list every mapping with its class")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	maxUnpacked.register(c)
	return c
}
