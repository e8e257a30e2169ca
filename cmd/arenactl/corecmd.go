package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/inspect"
)

// coreFlags say where a core's files are when it comes from another machine.
type coreFlags struct {
	sysroot     string
	libc        string
	noLibcFile  bool
	maxUnpacked sizeValue
}

// isCoreArg tells a core file from a process id: a PID is all digits.
func isCoreArg(arg string) bool {
	_, ok := parsePidText(arg)
	return !ok && strings.TrimLeft(arg, "0123456789") != ""
}

// options are the flags as inspect takes them.
func (f coreFlags) options(debugDirs []string) inspect.CoreOptions {
	return inspect.CoreOptions{Sysroot: f.sysroot, Jobs: jobs(), Options: heap.Options{DebugDirs: debugDirs, LibcFile: f.libc, NoLibcFile: f.noLibcFile}, Unpack: f.maxUnpacked.unpackOptions()}
}

func (f *coreFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.sysroot, "sysroot", "", "for a core from another machine: the directory holding that machine's files (its libc at SYSROOT/usr/lib/...)")
	c.Flags().StringVar(&f.libc, "libc", "", "for a core: the libc.so.6 the process used, wherever it is now (used only if its build-id is the core's)")
	f.maxUnpacked.register(c)
	c.Flags().BoolVar(&f.noLibcFile, "no-libc-file", false, "for a core: open no libc file; find the allocator from the core's memory alone (a snapshot's own note is still used)")
}

// pidOrCoreArg accepts one process id or the path of a core file.
func pidOrCoreArg(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return &usageError{msg: fmt.Sprintf("%s takes one process id or core file (see '%s --help')", c.Name(), c.CommandPath())}
	}
	if isCoreArg(args[0]) {
		if _, err := os.Stat(args[0]); errors.Is(err, os.ErrPermission) {
			return err // the same exit code as a core that cannot be read
		} else if err != nil {
			return &usageError{msg: fmt.Sprintf("%q is neither a process id nor a readable core file: %v", args[0], err)}
		}
		return nil
	}
	return pidArg(c, args)
}

// sizeValue is --max-unpacked: a byte count given as 123, 64M, 32G or 1T
// (powers of 1024).
type sizeValue int64

func (v *sizeValue) String() string {
	if *v == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*v), 10)
}

func (v *sizeValue) Type() string { return "SIZE" }

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s) // the one size parser
	if err == nil && n == 0 {
		err = fmt.Errorf("%q: the size must be above 0", s)
	}
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func (v *sizeValue) register(c *cobra.Command) {
	c.Flags().Var(v, "max-unpacked", fmt.Sprintf("for a compressed core: the most bytes it may unpack to (default %dG); the ELF headers' size is checked first, then the stream, in $TMPDIR", core.DefaultMaxUnpacked>>30))
}

// unpackOptions: the limit, and progress on stderr when it is a terminal.
func (v sizeValue) unpackOptions() core.Options {
	o := core.Options{MaxUnpacked: int64(v)}
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err == nil {
		o.Progress = os.Stderr
	}
	return o
}
