package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/ptrace"
)

func newMapsCmd() *cobra.Command {
	var all, asJSON bool
	c := &cobra.Command{
		Use:   "maps PID",
		Short: "Summarize the process's memory map by class (heaps, stacks, libraries, ...) with RSS",
		Long: `maps reads /proc/PID/smaps and classifies every mapping: the main heap,
non-main arena heaps, the main and thread stacks, the executable, shared
libraries, other files, anonymous memory, and kernel mappings. It stops
nothing and runs nothing in the target.`,
		Args: pidOrCoreArg,
		RunE: func(c *cobra.Command, args []string) error {
			if isCoreArg(args[0]) {
				core, err := openCore(args[0])
				if err != nil {
					return err
				}
				defer core.Close()
				sum := maps.Summarize(core.Mappings)
				if asJSON {
					return writeJSON(os.Stdout, mapsJSON(core.Pid, sum, maps.Rollup{}, core.Mappings, all))
				}
				fmt.Println("from a core: sizes only (a core records no RSS)")
				return renderMaps(os.Stdout, sum, maps.Rollup{}, core.Mappings, all)
			}
			pid := parsePid(args)
			if _, err := ptrace.ReadStatus(pid, pid); err != nil {
				return err
			}
			ms, err := maps.Read(pid, true)
			if err != nil {
				return mapsErr(pid, err)
			}
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			sps, _ := maps.StackPointers(pid)
			maps.Classify(ms, maps.Hints{ExePath: exe, StackPointers: sps})
			roll, err := maps.ReadRollup(pid)
			if err != nil {
				return mapsErr(pid, err)
			}
			sum := maps.Summarize(ms)
			if asJSON {
				return writeJSON(os.Stdout, mapsJSON(pid, sum, roll, ms, all))
			}
			return renderMaps(os.Stdout, sum, roll, ms, all)
		},
	}
	c.Flags().BoolVar(&all, "all", false, "list every mapping with its class")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// mapsErr turns a failure to read /proc into the same errors (and exit
// codes) that attaching would give.
func mapsErr(pid int, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("process %d: %w", pid, ptrace.ErrNoProcess)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("process %d: %w (run arenactl as the same user as the process, or as root)", pid, ptrace.ErrPermission)
	}
	return err
}
