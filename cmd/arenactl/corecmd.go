package main

import (
	"github.com/spf13/cobra"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
)

// coreFlags say where a core's files are when it comes from another machine.
type coreFlags struct {
	sysroot    string
	libc       string
	noLibcFile bool
	debugDirs  []string // info's --debug-dir: debug symbols, and libc itself by build-id
}

// isCoreArg tells a core file from a process id: a PID is all digits.
func isCoreArg(arg string) bool {
	_, err := strconv.Atoi(arg)
	return err != nil
}

// opener finds a file the core recorded, under --sysroot (or as is). libc
// is the one file checked first: it opens as libcFile, or not at all when
// that is "" (no file matched the core's build-id).
func (f coreFlags) opener(libcFile string) func(path string) (*os.File, error) {
	return func(path string) (*os.File, error) {
		if glibc.IsLibcPath(path) {
			if libcFile == "" {
				return nil, errors.New("no libc file matches the core")
			}
			return os.Open(libcFile)
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
	cl, err := cf.resolveLibc(c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer cl.mem.Close()
	var tls []glibc.ThreadTLS
	if cl.tcachesSkipped == "" {
		for _, th := range c.Threads {
			tls = append(tls, glibc.ThreadTLS{Tid: th.Tid, FsBase: th.FsBase()})
		}
	}
	walk, caches, err := glibc.WalkAll(cl.mem, cl.libc, cl.lay, cl.anchors, c.Mappings, tls)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	walk.Exact = walk.Exact && cl.sameFormat
	rep := &glibc.Report{
		Pid: c.Pid, Exe: c.Exe(), Libc: cl.libc.Info(), Threads: len(c.Threads), Malloc: walk.Malloc,
		ReadOnly: &glibc.ReadOnly{Walk: walk, Tcaches: caches, TcachesSkipped: cl.tcachesSkipped},
		Maps:     glibc.MapsSummary{Classes: maps.Summarize(c.Mappings)},
		Core:     &glibc.CoreInfo{Path: path, CrashTid: c.Threads[0].Tid, Command: c.Command, LibcNotes: cl.notes},
	}
	if c.Signal != nil {
		rep.Core.Signal, rep.Core.FaultAddr = int(c.Signal.Signo), c.Signal.Addr
	}
	return rep, nil
}

// coreLibc is a core's libc as found, and the memory to walk: the core,
// with the pages it lacks read from the files it maps (libc's only when
// its file is the one the process ran).
type coreLibc struct {
	libc           *glibc.Libc // Source says which way it was found
	lay            glibc.Layout
	anchors        glibc.Anchors
	mem            *core.WithFiles
	sameFormat     bool     // false: memory alone fits versions that print malloc_info differently
	notes          []string // what was tried and not used
	tcachesSkipped string
}

// resolveLibc finds the core's libc, in this order: a snapshot's allocator
// note (no file needed); a libc file whose build-id is the one in the
// core's memory (--libc, the recorded path under --sysroot, then
// DIR/.build-id/xx/rest in each debug directory); memory alone. A file of
// another build is never used, even given with --libc: its offsets would
// be another libc's.
func (f coreFlags) resolveLibc(c *core.Core) (*coreLibc, error) {
	cl := &coreLibc{sameFormat: true}
	if b := c.Note(core.NoteAllocator); b != nil {
		mem := c.WithFiles(f.opener(""))
		rec, err := glibc.ParseRecord(b)
		if err == nil {
			cl.libc, cl.lay, cl.anchors, err = rec.Libc(c.Mappings, mem)
		}
		if err == nil {
			cl.mem = mem
			return cl, nil
		}
		mem.Close()
		cl.notes = append(cl.notes, fmt.Sprintf("the snapshot's allocator note: %v", err))
	}
	first, ok := glibc.LibcMapping(c.Mappings)
	if !ok {
		return nil, errors.New("no glibc libc.so.6 among the core's mappings")
	}
	// From the core alone: a file must not vouch for itself.
	memID, idErr := glibc.BuildIDInMemory(c, first.Start)
	if f.noLibcFile {
		cl.notes = append(cl.notes, "libc files: none looked for (--no-libc-file)")
	} else {
		for _, cand := range f.libcCandidates(first.Path, memID) {
			l, why, missing := tryLibc(c, cand.path, memID)
			if l == nil {
				if cand.always || !missing {
					cl.notes = append(cl.notes, why)
				}
				continue
			}
			mem := c.WithFiles(f.opener(cand.path))
			lay, err := glibc.LayoutFor(l.Version)
			if err != nil {
				mem.Close()
				return nil, err
			}
			anchors, err := glibc.FindAnchorsWith(l, lay, mem, f.debugDirs)
			if err != nil {
				mem.Close()
				cl.notes = append(cl.notes, fmt.Sprintf("libc file %s: %v", cand.path, err))
				continue
			}
			if memID == "" {
				cl.notes = append(cl.notes, fmt.Sprintf("libc's build-id is not in the core (%v): %s could not be checked", idErr, cand.path))
			}
			cl.libc, cl.lay, cl.anchors, cl.mem = l, lay, anchors, mem
			return cl, nil
		}
	}
	mem := c.WithFiles(f.opener(""))
	mo, err := glibc.FromMemory(c.Mappings, mem)
	if err != nil {
		mem.Close()
		return nil, fmt.Errorf("%s (no libc file to read it with: give the matching one with --libc, or the machine's files with --sysroot)", err)
	}
	mo.Libc.BuildID = memID
	cl.libc, cl.lay, cl.anchors, cl.mem, cl.sameFormat = mo.Libc, mo.Layout, mo.Anchors, mem, mo.SameFormat
	cl.tcachesSkipped = "without libc's file the TLS slots of tcache and thread_arena are unknown: no thread's tcache was read, and chunks cached there count as in use"
	return cl, nil
}

// libcCandidate is a path where the core's libc may be; always says a
// missing file is worth a note (the recorded path, --libc).
type libcCandidate struct {
	path   string
	always bool
}

func (f coreFlags) libcCandidates(recorded, buildID string) []libcCandidate {
	var out []libcCandidate
	if f.libc != "" {
		out = append(out, libcCandidate{f.libc, true})
	}
	out = append(out, libcCandidate{filepath.Join(f.sysroot, strings.TrimSuffix(recorded, " (deleted)")), true})
	if len(buildID) > 2 {
		// Where gdb looks for an object by build-id (Fedora installs
		// libc itself there, next to its .debug file).
		for _, d := range f.debugDirs {
			out = append(out, libcCandidate{filepath.Join(d, ".build-id", buildID[:2], buildID[2:]), false})
		}
	}
	return out
}

// tryLibc reads the libc file at path as the core's libc; nil and the
// reason when it cannot be used: missing, unreadable, not glibc's libc, or
// of another build than the core's (memID, "" when the core lacks it).
func tryLibc(c *core.Core, path, memID string) (l *glibc.Libc, why string, missing bool) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Sprintf("libc file %s: not found", path), true
	}
	l, err := glibc.FindLibc(c.Mappings, func(maps.Mapping) (*os.File, error) { return os.Open(path) })
	switch {
	case err != nil:
		return nil, fmt.Sprintf("libc file %s: %v", path, err), false
	case memID != "" && l.BuildID != memID:
		id := l.BuildID
		if id == "" {
			id = "none"
		}
		return nil, fmt.Sprintf("libc file %s has build-id %s, the core's libc %s: another build, whose offsets would be wrong", path, id, memID), false
	}
	l.Source = glibc.SourceFile
	if memID == "" {
		l.Source = glibc.SourceFileUnchecked
	}
	return l, "", false
}

func (f *coreFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.sysroot, "sysroot", "", "for a core from another machine: the directory holding that machine's files (its libc at SYSROOT/usr/lib/...)")
	c.Flags().StringVar(&f.libc, "libc", "", "for a core: the libc.so.6 the process used, wherever it is now (used only if its build-id is the core's)")
	c.Flags().BoolVar(&f.noLibcFile, "no-libc-file", false, "for a core: open no libc file; find the allocator from the core's memory alone (a snapshot's own note is still used)")
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
