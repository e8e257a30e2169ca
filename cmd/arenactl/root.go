package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/workers"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "arenactl",
		Short: "Inspect and trim the glibc malloc state of a running process",
		Long: `arenactl shows where a C/C++ process's heap memory goes, per glibc arena,
and gives free memory back to the system, without gdb and without stopping
more than one thread for a few milliseconds.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().IntVar(&jobsFlag, "jobs", 0, fmt.Sprintf("how many workers a walk or scan may use, each at nice +%d (0: half the CPUs arenactl may use, here %d)", workers.Nice, workers.Default()))
	root.PersistentFlags().StringVar(&maxMemoryFlag, "max-memory", "", "the most memory a walk or scan may take (e.g. 512M, 2G); one estimated to need more is refused before the process is touched (default: what the machine and arenactl's cgroup can spare, less a margin)")
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if jobsFlag < 0 || jobsFlag > workers.Max {
			return &usageError{msg: fmt.Sprintf("--jobs %d: give a number of workers from 1 to %d, or 0 for the default", jobsFlag, workers.Max)}
		}
		maxMemory = 0
		if maxMemoryFlag != "" {
			v, err := budget.ParseSize(maxMemoryFlag)
			if err != nil || v == 0 {
				return &usageError{msg: fmt.Sprintf("--max-memory %q: give a size, e.g. 512M or 2G", maxMemoryFlag)}
			}
			maxMemory = v
		}
		if err := checkDurations(c); err != nil {
			return err
		}
		return checkLimits(c)
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{msg: fmt.Sprintf("%v (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(newInfoCmd(), newTrimCmd(), newMapsCmd(), newSnapshotCmd(), newWatchCmd(), newDiffCmd(), newLeaksCmd(), newRecordCmd(), newGrowthCmd(), newHeapCmd(), newExporterCmd())
	addVersion(root)
	setLimits(root)
	return root
}

// maxMemoryFlag is --max-memory as given; maxMemory its bytes (0: none
// given), what the use cases take.
var (
	maxMemoryFlag string
	maxMemory     uint64
)

// jobsFlag is --jobs as given; jobs() is what the use cases take.
var jobsFlag int

// jobs is the number of workers a walk or scan may use (--jobs, or the
// default of internal/workers).
func jobs() int { return workers.Resolve(jobsFlag) }

// pidArg accepts exactly one positive process id.
func pidArg(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return &usageError{msg: fmt.Sprintf("%s takes one process id (see '%s --help')", c.Name(), c.CommandPath())}
	}
	if _, ok := parsePidText(args[0]); !ok {
		return &usageError{msg: fmt.Sprintf("%q is not a process id", args[0])}
	}
	return nil
}

func parsePid(args []string) int {
	pid, _ := parsePidText(args[0])
	return pid
}

// injectFlags are shared by the commands that run code in the target.
type injectFlags struct {
	timeout time.Duration
	tid     int
	json    bool
	// debugDirs are searched for libc's detached debug file by build-id
	// when memory is read rather than code run (--read-only).
	debugDirs   []string
	noHeapCheck bool // inspect.Options.NoHeapCheck
}

// options are the flags as inspect takes them.
func (f *injectFlags) options() inspect.Options {
	return inspect.Options{Timeout: f.timeout, Tid: f.tid, DebugDirs: f.debugDirs, NoHeapCheck: f.noHeapCheck, MaxMemory: maxMemory, Jobs: jobs(),
		Note: func(s string) { fmt.Fprintln(os.Stderr, "arenactl: "+s) }}
}

func (f *injectFlags) register(c *cobra.Command) {
	c.Flags().DurationVar(&f.timeout, "timeout", 3*time.Second, "how long to look for a safe thread, and how long an injected call may run before it is abandoned")
	c.Flags().IntVar(&f.tid, "thread", 0, "borrow this thread (a TID of the process) instead of choosing one; it must still pass the safety checks")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON (the schema: docs/json.md)")
	c.Flags().BoolVar(&f.noHeapCheck, "no-heap-check", false, "before injecting, do not walk the free lists for damage that would make glibc abort (and the target die); saves that walk's CPU on a large, busy heap")
	c.Flags().StringArrayVar(&f.debugDirs, "debug-dir", libc.DefaultDebugDirs, "when memory is read rather than code run (info --read-only): a directory of detached debug files (DIR/.build-id/xx/rest.debug) whose symbols locate main_arena and mp_; repeat for several; an empty directory means no symbols")
}
