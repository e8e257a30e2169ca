package live

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Target is a live process opened for inspection. Opening it stops nothing.
type Target struct {
	Pid       int
	Exe       string
	mappings  []maps.Mapping
	Libc      *glibc.Libc
	Allocator glibc.Allocator
	proc      *ptrace.Process
	frozen    *Frozen // the freeze in force, if any
}

// NotGlibcError: the process does not allocate with glibc's malloc.
type NotGlibcError struct {
	Pid       int
	Allocator glibc.Allocator
}

func (e *NotGlibcError) Error() string {
	switch e.Allocator.Kind {
	case glibc.AllocInterposed:
		if e.Allocator.MallocDebug {
			// Under MALLOC_CHECK_ its own copy of malloc holds the heap,
			// with a lock and arenas the injected calls' checks do not see.
			return fmt.Sprintf("process %d preloads glibc's %s: arenactl calls nothing in a process whose malloc it wraps", e.Pid, filepath.Base(e.Allocator.Path))
		}
		return fmt.Sprintf("process %d allocates with %s, not glibc malloc", e.Pid, e.Allocator.Name)
	case glibc.AllocMusl:
		return fmt.Sprintf("process %d uses musl libc, not glibc", e.Pid)
	case glibc.AllocStatic:
		return fmt.Sprintf("process %d is statically linked: there is no libc to call into", e.Pid)
	}
	return fmt.Sprintf("process %d: no glibc found in its mappings", e.Pid)
}

// Open reads the process's mappings, checks it runs glibc's allocator, and
// finds its libc. It refuses zombies, kernel threads and traced processes,
// and static executables: there is no libc.so.6 to call into.
func Open(pid int) (*Target, error) { return open(pid, false) }

// OpenReadOnly is Open for reading the allocator from memory only: it also
// accepts a static executable, whose own copy of glibc's malloc stands in
// for libc (glibc.FindStaticImage). Nothing may be injected into such a
// target.
func OpenReadOnly(pid int) (*Target, error) { return open(pid, true) }

func open(pid int, allowStatic bool) (*Target, error) {
	proc, err := ptrace.Open(pid)
	if err != nil {
		return nil, err
	}
	t := &Target{Pid: pid, proc: proc}
	if err := t.load(allowStatic); err != nil {
		proc.Close()
		return nil, err
	}
	return t, nil
}

func (t *Target) load(allowStatic bool) error {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", t.Pid))
	if err != nil {
		return fmt.Errorf("process %d: reading its executable: %w", t.Pid, err)
	}
	t.Exe = exe
	// Finding libc and choosing a thread need the ranges and classes, not
	// the smaps counters: every report reads those again when it needs
	// them (after the thread is released, or just before the call), and
	// smaps makes the kernel walk page tables.
	if err := t.readMappings(false, nil); err != nil {
		return err
	}
	t.Allocator, err = glibc.DetectAllocator(t.mappings, t.Exe, t.OpenFile)
	if err != nil {
		return fmt.Errorf("process %d: %w", t.Pid, err)
	}
	if t.Allocator.Kind == glibc.AllocStatic && allowStatic {
		if t.Libc, err = glibc.FindStaticImage(t.mappings, t.Exe, t.OpenFile); err != nil {
			return fmt.Errorf("process %d: %w", t.Pid, err)
		}
		return nil
	}
	if t.Allocator.MallocDebug && allowStatic {
		if t.Libc, err = glibc.FindMallocDebugImage(t.mappings, t.OpenFile); err != nil {
			return fmt.Errorf("process %d: %w", t.Pid, err)
		}
		return nil
	}
	if t.Allocator.Kind != glibc.AllocGlibc {
		return &NotGlibcError{Pid: t.Pid, Allocator: t.Allocator}
	}
	t.Libc, err = glibc.FindLibc(t.mappings, t.OpenFile)
	if err != nil {
		return fmt.Errorf("process %d: %w", t.Pid, err)
	}
	return nil
}

// Refresh re-reads the mappings with their smaps counters and classifies them.
func (t *Target) Refresh() error { return t.readMappings(true, nil) }

// readMappings reads /proc/PID/maps, or smaps with its counters, and
// classifies it. Thread stacks are found from sps when the caller knows the
// stack pointers (frozen threads), else from what /proc shows of blocked
// threads.
func (t *Target) readMappings(smaps bool, sps map[int]uint64) error {
	ms, err := maps.Read(t.Pid, smaps)
	if err != nil {
		return err
	}
	if sps == nil {
		sps, _ = maps.StackPointers(t.Pid)
	}
	maps.Classify(ms, maps.Hints{ExePath: t.Exe, StackPointers: sps})
	t.mappings = ms
	return nil
}

// OpenFile opens the file behind a mapping through /proc/PID/map_files, which
// reaches it even when the target lives in another mount namespace.
func (t *Target) OpenFile(m maps.Mapping) (*os.File, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", t.Pid, m.Start, m.End))
	if err == nil {
		return f, nil
	}
	if f2, err2 := os.Open(fmt.Sprintf("/proc/%d/root%s", t.Pid, m.Path)); err2 == nil {
		return f2, nil
	}
	return nil, err
}

// ReadAt reads the target's memory without stopping it.
func (t *Target) ReadAt(b []byte, addr uint64) (int, error) { return t.proc.ReadAt(b, addr) }

// Close gives back every thread still held and releases the tracer.
func (t *Target) Close() error { return t.proc.Close() }

// IsGone reports whether err means the target went away under us.
func IsGone(err error) bool {
	return errors.Is(err, ptrace.ErrGone) || errors.Is(err, ptrace.ErrNoProcess)
}
