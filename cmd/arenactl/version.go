package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/buildinfo"
)

// releaseCommands are added to the tree only in builds with a build tag
// (gendocs.go): what the release script needs but the shipped binary does
// not carry.
var releaseCommands []func() *cobra.Command

// addVersion adds `arenactl version`, --version, and any release-time
// commands to root.
func addVersion(root *cobra.Command) {
	root.AddCommand(newVersionCmd())
	for _, f := range releaseCommands {
		root.AddCommand(f())
	}
	// --version is handled here rather than through cobra's root.Version:
	// cobra prints that with text/template, and a custom template would
	// link text/template in and, through its reflection, keep about 2 MB
	// of otherwise dead methods in the binary.
	showVersion := root.Flags().BoolP("version", "v", false, "print the version, commit and Go version")
	root.RunE = func(c *cobra.Command, args []string) error {
		if *showVersion {
			_, err := fmt.Fprint(c.OutOrStdout(), buildinfo.Read().String())
			return err
		}
		return c.Help()
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print arenactl's version, commit and Go version",
		Args:  noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			_, err := fmt.Fprint(c.OutOrStdout(), buildinfo.Read().String())
			return err
		},
	}
}

// noArgs refuses arguments as a usage error (exit 2) rather than cobra's
// "unknown command" wording, which would name the argument as a command.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &usageError{msg: fmt.Sprintf("%s takes no arguments (see '%s --help')", c.Name(), c.CommandPath())}
	}
	return nil
}
