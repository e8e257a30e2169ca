package main

import (
	"github.com/spf13/cobra"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"arenactl/internal/core"
	"arenactl/internal/glibc"
	"arenactl/internal/maps"
)

// coreFlags say where a core's files are when it comes from another machine.
type coreFlags struct {
	sysroot string
	libc    string
}

// isCoreArg tells a core file from a process id: a PID is all digits.
func isCoreArg(arg string) bool {
	_, err := strconv.Atoi(arg)
	return err != nil
}

// opener finds the file a core recorded: --libc for libc itself, else the
// recorded path under --sysroot (or as is).
func (f coreFlags) opener() func(path string) (*os.File, error) {
	return func(path string) (*os.File, error) {
		if f.libc != "" && glibc.IsLibcPath(path) {
			return os.Open(f.libc)
		}
		return os.Open(filepath.Join(f.sysroot, path))
	}
}

// openCore opens a core with its mappings classified.
func openCore(path string) (*core.Core, error) {
	c, err := core.Open(path)
	if err != nil {
		return nil, err
	}
	maps.Classify(c.Mappings, maps.Hints{ExePath: c.Exe(), StackPointers: c.StackPointers()})
	return c, nil
}

// collectCore builds the info report of a core: the same read-only walk as
// for a live process, over the core's memory (and the files it maps, for
// pages the kernel did not dump).
func collectCore(path string, cf coreFlags) (*glibc.Report, error) {
	c, err := openCore(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	mem := c.WithFiles(cf.opener())
	defer mem.Close()
	open := func(m maps.Mapping) (*os.File, error) { return cf.opener()(m.Path) }
	libc, err := glibc.FindLibc(c.Mappings, open)
	if errors.Is(err, glibc.ErrNoLibc) {
		return nil, fmt.Errorf("%s: no glibc libc.so.6 among the core's mappings", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w (give the matching libc with --libc, or the machine's files with --sysroot)", path, err)
	}
	lay, err := glibc.LayoutFor(libc.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	anchors, err := glibc.FindAnchors(libc, lay, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var tls []glibc.ThreadTLS
	for _, th := range c.Threads {
		tls = append(tls, glibc.ThreadTLS{Tid: th.Tid, FsBase: th.FsBase()})
	}
	walk, caches, err := glibc.WalkAll(mem, libc, lay, anchors, c.Mappings, tls)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	rep := &glibc.Report{
		Pid: c.Pid, Exe: c.Exe(), Libc: libc.Info(), Threads: len(c.Threads), Malloc: walk.Malloc,
		ReadOnly: &glibc.ReadOnly{Walk: walk, Tcaches: caches},
		Maps:     glibc.MapsSummary{Classes: maps.Summarize(c.Mappings)},
		Core:     &glibc.CoreInfo{Path: path, CrashTid: c.Threads[0].Tid, Command: c.Command},
	}
	if c.Signal != nil {
		rep.Core.Signal, rep.Core.FaultAddr = int(c.Signal.Signo), c.Signal.Addr
	}
	return rep, nil
}

func (f *coreFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.sysroot, "sysroot", "", "for a core from another machine: the directory holding that machine's files (its libc at SYSROOT/usr/lib/...)")
	c.Flags().StringVar(&f.libc, "libc", "", "for a core: the libc.so.6 the process used, wherever it is now")
}

// pidOrCoreArg accepts one process id or the path of a core file.
func pidOrCoreArg(c *cobra.Command, args []string) error {
	if len(args) == 1 && isCoreArg(args[0]) {
		if _, err := os.Stat(args[0]); err != nil {
			return &usageError{msg: fmt.Sprintf("%q is neither a process id nor a readable core file: %v", args[0], err)}
		}
		return nil
	}
	return pidArg(c, args)
}
