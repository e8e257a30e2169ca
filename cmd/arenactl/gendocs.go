//go:build gendocs

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/buildinfo"
	"github.com/arenactl/arenactl/internal/clidocs"
)

// Behind a build tag because cobra's doc package brings a Markdown and a
// YAML library, about 3 MB the shipped binary has no use for:
// scripts/release.sh runs `go run -tags gendocs ./cmd/arenactl gen-docs DIR`.
func init() { releaseCommands = append(releaseCommands, newGenDocsCmd) }

func newGenDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write man pages and shell completions under DIR",
		Hidden: true,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &usageError{msg: fmt.Sprintf("%s takes one directory", c.Name())}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return clidocs.Write(c.Root(), args[0], "arenactl "+buildinfo.Read().Version)
		},
	}
}
