package live

import (
	"context"
	"errors"
	"fmt"
	"github.com/arenactl/arenactl/internal/arch"
	"os"
	"path/filepath"
	"time"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Target is a live process opened for inspection. Opening it stops nothing.
type Target struct {
	Pid       int
	Exe       string
	mappings  []maps.Mapping
	sps       map[int]uint64 // the stack pointers the mappings were classified with
	Libc      *libc.Libc
	Allocator libc.Allocator
	proc      *ptrace.Process
	frozen    *Frozen // the freeze in force, if any
	arch      *arch.Arch
	pageSize  uint64 // AT_PAGESZ, read once at load: it never changes
	// ImageXState makes Image keep every stopped thread's extended state
	// (FPU, SSE, AVX) in FrozenThreads, as a core's notes want it. It is
	// read from each thread while all of them wait: a walk or a scan,
	// which reads only the general registers, goes without.
	ImageXState bool
}

// NotGlibcError: the process does not allocate with glibc's malloc.
type NotGlibcError struct {
	Pid       int
	Allocator libc.Allocator
}

// Is: not glibc malloc (errkind.ErrNotGlibc), and, when the heap is glibc
// malloc's after all but nothing may be called in it (static, or wrapped by
// libc_malloc_debug.so), errkind.ErrNoCalls: it can still be read.
func (e *NotGlibcError) Is(target error) bool {
	switch target {
	case errkind.ErrNotGlibc:
		return true
	case errkind.ErrNoCalls:
		return e.Allocator.Kind == libc.AllocStatic || e.Allocator.MallocDebug
	}
	return false
}

func (e *NotGlibcError) Error() string {
	switch e.Allocator.Kind {
	case libc.AllocInterposed:
		if e.Allocator.MallocDebug {
			// Under MALLOC_CHECK_ its own copy of malloc holds the heap,
			// with a lock and arenas the injected calls' checks do not see.
			return fmt.Sprintf("process %d preloads glibc's %s: arenactl calls nothing in a process whose malloc it wraps", e.Pid, filepath.Base(e.Allocator.Path))
		}
		return fmt.Sprintf("process %d allocates with %s, not glibc malloc", e.Pid, e.Allocator.Name)
	case libc.AllocMusl:
		return fmt.Sprintf("process %d uses musl libc, not glibc", e.Pid)
	case libc.AllocStatic:
		return fmt.Sprintf("process %d is statically linked: there is no libc to call into", e.Pid)
	case libc.AllocStaticOther:
		return fmt.Sprintf("process %d is statically linked without glibc's malloc (a Go program, static musl, another allocator): not glibc malloc, nothing for arenactl to read", e.Pid)
	}
	return fmt.Sprintf("process %d: no glibc found in its mappings", e.Pid)
}

// Open reads the process's mappings, checks it runs glibc's allocator, and
// finds its libc. It refuses zombies, kernel threads and traced processes,
// and static executables: there is no libc.so.6 to call into.
func Open(pid int) (*Target, error) { return open(pid, allowGlibc) }

// OpenReadOnly is Open for reading the allocator from memory only: it also
// accepts a static executable, whose own copy of glibc's malloc stands in
// for libc (libc.FindStaticImage). Nothing may be injected into such a
// target.
func OpenReadOnly(pid int) (*Target, error) { return open(pid, allowStatic) }

// OpenObserved is for watching a process from outside only (perf events,
// its memory read): any allocator is accepted, Libc is nil where it is not
// glibc's, and another tracer holding it does not matter. Nothing may be
// stopped in, injected into or imaged from such a target.
func OpenObserved(pid int) (*Target, error) { return open(pid, allowAny) }

// What open accepts: glibc's malloc in libc.so.6; also a static copy or
// libc_malloc_debug.so's (read only); any allocator and a traced process
// (observed only).
const (
	allowGlibc = iota
	allowStatic
	allowAny
)

func open(pid int, allow int) (*Target, error) {
	openProc := ptrace.Open
	if allow == allowAny {
		openProc = ptrace.Observe
	}
	proc, err := openProc(pid)
	if err != nil {
		return nil, err
	}
	t := &Target{Pid: proc.Pid, proc: proc}
	if err := t.load(allow); err != nil {
		err = proc.Explain(err)
		proc.Close()
		return nil, err
	}
	return t, nil
}

func (t *Target) load(allow int) error {
	readOnly := allow >= allowStatic
	exe, err := os.Readlink(t.proc.Dir() + "/exe")
	if err != nil {
		return fmt.Errorf("process %d: reading its executable: %w", t.Pid, err)
	}
	t.Exe = exe
	if t.arch, err = t.readArch(); err != nil {
		return err
	}
	t.pageSize = t.readPageSize()
	// Finding libc and choosing a thread need the ranges and classes, not
	// the smaps counters: every report reads those again when it needs
	// them (after the thread is released, or just before the call), and
	// smaps makes the kernel walk page tables.
	if err := t.readMappings(false, nil); err != nil {
		return err
	}
	t.Allocator, err = libc.DetectAllocator(t.mappings, t.Exe, t.OpenFile)
	if err != nil {
		return fmt.Errorf("process %d: %w", t.Pid, err)
	}
	if err := t.awaitLibc(); err != nil {
		return err
	}
	if t.Allocator.Kind == libc.AllocStatic && readOnly {
		if t.Libc, err = libc.FindStaticImage(t.mappings, t.Exe, t.OpenFile); err != nil {
			return fmt.Errorf("process %d: %w", t.Pid, err)
		}
		return nil
	}
	if t.Allocator.MallocDebug && readOnly {
		if t.Libc, err = libc.FindMallocDebugImage(t.mappings, t.OpenFile); err != nil {
			return fmt.Errorf("process %d: %w", t.Pid, err)
		}
		return nil
	}
	if t.Allocator.Kind != libc.AllocGlibc {
		if allow == allowAny {
			return nil
		}
		return &NotGlibcError{Pid: t.Pid, Allocator: t.Allocator}
	}
	t.Libc, err = libc.FindLibc(t.mappings, t.OpenFile)
	if err != nil {
		return fmt.Errorf("process %d: %w", t.Pid, err)
	}
	return nil
}

// readArch reads the machine of the process's executable from its ELF
// header: a 32-bit program, or one of another machine than arenactl's (run
// under binfmt emulation), is refused before anything is read or stopped.
// An executable that cannot be read (the process is in another mount
// namespace whose file went away) is taken to be the host's, as every
// process was before arenactl knew of machines; so is one whose
// /proc/PID/exe is not ELF, which the kernel does not run.
func (t *Target) readArch() (*arch.Arch, error) {
	f, err := os.Open(t.proc.Dir() + "/exe")
	if err != nil {
		return arch.Host(), nil
	}
	defer f.Close()
	hdr := make([]byte, 64)
	n, _ := f.ReadAt(hdr, 0)
	a, ok, err := arch.ForProcess(hdr[:n])
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	if !ok {
		return arch.Host(), nil
	}
	return a, nil
}

// startPatience bounds the wait for a program that has just started (or
// exec'd) to have its libc mapped by the dynamic loader.
const startPatience = time.Second

// awaitLibc re-reads the mappings while they show the dynamic loader but
// no libc yet: a program caught within a few milliseconds of its start,
// whose loader is still mapping its libraries. What it reads then is true
// only for that moment.
func (t *Target) awaitLibc() error {
	deadline := time.Now().Add(startPatience)
	for t.Allocator.Kind == libc.AllocUnknown && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
		if err := t.readMappings(false, nil); err != nil {
			return err
		}
		a, err := libc.DetectAllocator(t.mappings, t.Exe, t.OpenFile)
		if err != nil {
			return fmt.Errorf("process %d: %w", t.Pid, err)
		}
		t.Allocator = a
	}
	return nil
}

// Refresh re-reads the mappings with their smaps counters and classifies them.
func (t *Target) Refresh() error { return t.readMappings(true, nil) }

// RefreshRanges re-reads the mappings without the smaps counters: cheap
// for the process, whose page tables smaps walks under its mmap lock.
func (t *Target) RefreshRanges() error { return t.readMappings(false, nil) }

// RefreshObjects re-reads the mappings for which objects are loaded where,
// for a caller that looks every second (leaks' rescan for dlopen): thread
// stacks are told by the stack pointers the last full read found, with no
// thread's syscall file read again. Reading every thread's file took a
// 2,000-thread process's rescan as long as a drain of its samples
// (issue 28).
func (t *Target) RefreshObjects() error {
	if t.sps == nil {
		t.sps = map[int]uint64{}
	}
	return t.readMappings(false, t.sps)
}

// readMappings reads /proc/PID/maps, or smaps with its counters, and
// classifies it. Thread stacks are found from sps when the caller knows the
// stack pointers (frozen threads), else from what /proc shows of blocked
// threads.
func (t *Target) readMappings(smaps bool, sps map[int]uint64) error {
	ms, err := maps.ReadProc(t.proc.Proc(), smaps)
	if err != nil {
		return t.proc.Explain(err)
	}
	if len(ms) == 0 {
		// Only a process without memory shows none: one exiting, or
		// between two programs.
		return t.proc.Explain(fmt.Errorf("process %d shows no memory: %w", t.Pid, ptrace.ErrGone))
	}
	if sps == nil {
		sps, _ = maps.StackPointersProc(t.proc.Proc())
	}
	maps.Classify(ms, maps.Hints{ExePath: t.Exe, StackPointers: sps})
	t.mappings, t.sps = ms, sps
	return nil
}

// Proc is the process's /proc directory, held since it was opened: what
// is read through it is never a later process's that was given its pid.
func (t *Target) Proc() *procfs.Proc { return t.proc.Proc() }

// Dir is the /proc directory that shows the process's memory and files: that
// of a live thread, since the main thread may have exited.
func (t *Target) Dir() string { return t.proc.Dir() }

// OpenFile opens the file behind a mapping through /proc/PID/map_files, which
// reaches it even when the target lives in another mount namespace.
func (t *Target) OpenFile(m maps.Mapping) (*os.File, error) {
	f, err := os.Open(t.proc.Proc().Path(fmt.Sprintf("map_files/%x-%x", m.Start, m.End)))
	if err == nil {
		return f, nil
	}
	// map_files exists only for the whole process, and shows nothing once
	// the main thread has exited; root is there for every live thread.
	if f2, err2 := os.Open(t.proc.Dir() + "/root" + m.Path); err2 == nil {
		return f2, nil
	}
	return nil, err
}

// ReadAt reads the target's memory without stopping it. A read that fails
// because the process has exited or replaced its program says so
// (ptrace.ErrGone, ptrace.ErrExec) rather than EOF.
func (t *Target) ReadAt(b []byte, addr uint64) (int, error) {
	n, err := t.proc.ReadAt(b, addr)
	if err != nil {
		if cerr := t.proc.Check(); cerr != nil {
			return n, fmt.Errorf("reading %d bytes at %#x: %w", len(b), addr, cerr)
		}
	}
	return n, err
}

// Explain replaces err by ptrace.ErrGone or ptrace.ErrExec when the process
// has exited or replaced its program meanwhile: whatever failed then failed
// because of that.
func (t *Target) Explain(err error) error { return t.proc.Explain(err) }

// explain is Explain, and context.Canceled when ctx is done: whatever a wait
// that was cut short reports, the cause is that arenactl was asked to stop.
func (t *Target) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("process %d: %w", t.Pid, ctx.Err())
	}
	return t.proc.Explain(err)
}

// Close gives back every thread still held and releases the tracer.
func (t *Target) Close() error { return t.proc.Close() }

// IsGone reports whether err means the target went away under us.
func IsGone(err error) bool {
	return errors.Is(err, ptrace.ErrGone) || errors.Is(err, ptrace.ErrNoProcess)
}

// WriteAt writes the target's memory through /proc/PID/mem while it runs:
// only for words the target reads as hints (a ring's read index), since a
// running thread may see the write half done.
func (t *Target) WriteAt(b []byte, addr uint64) (int, error) { return t.proc.WriteAt(b, addr) }
