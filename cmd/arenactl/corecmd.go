package main

import (
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/spf13/cobra"

	"errors"
	"fmt"
	"os"
	"strconv"
)

// coreFlags say where a core's files are when it comes from another machine.
type coreFlags struct {
	sysroot    string
	libc       string
	noLibcFile bool
}

// isCoreArg tells a core file from a process id: a PID is all digits.
func isCoreArg(arg string) bool {
	_, err := strconv.Atoi(arg)
	return err != nil
}

// options are the flags as inspect takes them.
func (f coreFlags) options(debugDirs []string) inspect.CoreOptions {
	return inspect.CoreOptions{Sysroot: f.sysroot, Options: heap.Options{DebugDirs: debugDirs, LibcFile: f.libc, NoLibcFile: f.noLibcFile}}
}

func (f *coreFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.sysroot, "sysroot", "", "for a core from another machine: the directory holding that machine's files (its libc at SYSROOT/usr/lib/...)")
	c.Flags().StringVar(&f.libc, "libc", "", "for a core: the libc.so.6 the process used, wherever it is now (used only if its build-id is the core's)")
	c.Flags().BoolVar(&f.noLibcFile, "no-libc-file", false, "for a core: open no libc file; find the allocator from the core's memory alone (a snapshot's own note is still used)")
}

// pidOrCoreArg accepts one process id or the path of a core file.
func pidOrCoreArg(c *cobra.Command, args []string) error {
	if len(args) == 1 && isCoreArg(args[0]) {
		if _, err := os.Stat(args[0]); errors.Is(err, os.ErrPermission) {
			return err // the same exit code as a core that cannot be read
		} else if err != nil {
			return &usageError{msg: fmt.Sprintf("%q is neither a process id nor a readable core file: %v", args[0], err)}
		}
		return nil
	}
	return pidArg(c, args)
}
