package core

import (
	"context"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"path/filepath"
	"slices"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/maps"
)

// Target is a core file opened as a debuggee.Target: its memory (with the
// pages the kernel left out read from the files it maps), its mappings
// classified as a live process's are, and its files found under a sysroot
// (for a core from another machine; "" for this one).
type Target struct {
	*Core
	sysroot string
	// instead maps a recorded path to the file that stands for it: the
	// heap layer chooses libc's after checking its build-id, and names
	// none ("") when no file may be trusted for it.
	instead map[string]string
	mem     *WithFiles
}

// OpenTarget opens the core at path as a target whose files are looked for
// under sysroot.
func OpenTarget(path, sysroot string) (*Target, error) {
	return OpenTargetContext(context.Background(), path, sysroot, Options{})
}

// OpenTargetContext is OpenTarget with a compressed core unpacked as opt
// says, stopped when ctx is cancelled.
func OpenTargetContext(ctx context.Context, path, sysroot string, opt Options) (*Target, error) {
	c, err := OpenContext(ctx, path, opt)
	if err != nil {
		return nil, err
	}
	t := &Target{Core: c, sysroot: sysroot, instead: map[string]string{}}
	if len(c.Files) == 0 && !c.Measured() {
		if files := c.linkMapFiles(t.openPath); len(files) > 0 {
			c.Files, c.FilesFromLinkMap = files, true
			c.Mappings = c.mappings()
		}
	}
	maps.Classify(c.Mappings, maps.Hints{ExePath: c.Exe(), StackPointers: c.StackPointers()})
	t.mem = c.WithFiles(t.openPath)
	return t, nil
}

// UseFile makes file stand for the file the core recorded at recorded, for
// reading memory and for OpenFile; "" means no file may be read for it.
// Files already opened for the old choice are closed.
func (t *Target) UseFile(recorded, file string) {
	t.instead[recorded] = file
	t.mem.Close()
	t.mem = t.Core.WithFiles(t.openPath)
}

// Path is where a file the core recorded is looked for: the file chosen
// with UseFile, else the recorded path under the sysroot.
func (t *Target) Path(recorded string) (string, bool) {
	if f, ok := t.instead[recorded]; ok {
		return f, f != ""
	}
	return t.SysrootPath(recorded), true
}

// SysrootPath is where a file the core recorded is under the sysroot.
func (t *Target) SysrootPath(recorded string) string { return filepath.Join(t.sysroot, recorded) }

func (t *Target) openPath(recorded string) (*os.File, error) {
	p, ok := t.Path(recorded)
	if !ok {
		return nil, &os.PathError{Op: "open", Path: recorded, Err: os.ErrNotExist}
	}
	// A regular file only: a FIFO at a path the core names would block
	// the open for ever.
	return hostfs.OpenRegular(p)
}

// ReadAt reads the core's memory, and the mapped files' where the core
// has none.
func (t *Target) ReadAt(p []byte, addr uint64) (int, error) { return t.mem.ReadAt(p, addr) }

// ReadsShared is WithFiles.ReadsShared: a walk may spread a core's arenas
// over several workers.
func (t *Target) ReadsShared() {}

// Process is the dumped process: NT_PRPSINFO's pid and name, the executable
// from the auxiliary vector.
func (t *Target) Process() debuggee.Process {
	return debuggee.Process{Pid: t.Core.Pid, Exe: t.Core.Exe(), Command: t.Core.Command}
}

// Arch is the core's machine, from its ELF header (only x86_64 cores are
// read yet).
func (t *Target) Arch() *arch.Arch { return t.Core.Arch }

// PageSize is the dumped process's page size, from its auxiliary vector
// (AT_PAGESZ), or its machine's usual one when the core has none.
func (t *Target) PageSize() uint64 {
	for _, s := range t.Core.Arch.PageSizes {
		if s == t.Core.Auxv[atPagesz] {
			return s
		}
	}
	return t.Core.Arch.PageSize
}

// Mappings are the core's mappings, classified.
func (t *Target) Mappings() []maps.Mapping { return t.Core.Mappings }

// Threads are every thread the core holds, the one that got the signal
// first.
func (t *Target) Threads() []debuggee.Thread {
	return slices.Clone(t.Core.Threads)
}

// OpenFile opens the file behind a mapping where the core's files are.
func (t *Target) OpenFile(m maps.Mapping) (*os.File, error) { return t.openPath(m.Path) }

// Close closes the files read and the core.
func (t *Target) Close() error {
	t.mem.Close()
	return t.Core.Close()
}

var _ debuggee.Target = (*Target)(nil)
