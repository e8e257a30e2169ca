package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"github.com/arenactl/arenactl/internal/arch"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/exporter"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/perf"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/sampler"
)

// Every typed error keeps the exit code (and hint) it had when exit.go and
// hint.go matched concrete types, and every row of outcomes decides a
// column for one of them: a row that nothing reaches is shadowed by an
// earlier one.
func TestOutcomes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("process 1: %w", err) }
	for _, c := range []struct {
		err  error
		exit int
		hint string // how the hint starts; "" for none
	}{
		{nil, exitOK, ""},
		{inspect.ErrInterrupted, exitInterrupted, ""},
		{&record.FormatError{Path: "r", Msg: "is not an arenactl recording"}, exitBadCore, ""},
		{wrap(context.Canceled), exitInterrupted, ""},
		{&core.StoppedError{Path: "core", Err: context.Canceled}, exitInterrupted, ""},
		{wrap(&ptrace.TimeoutError{Cancelled: true}), exitInterrupted, ""},
		{&ptrace.StuckError{Cancelled: true}, exitInterrupted, ""},
		{&ptrace.StuckError{}, exitError, ""},
		{&usageError{msg: "--top 0"}, exitUsage, ""},
		{errors.New(`unknown command "x" for "arenactl"`), exitUsage, ""},
		{&core.Error{Path: "core", What: "not an ELF file"}, exitBadCore, ""},
		{&core.TooLargeError{Path: "core.zst"}, exitBadCore, " (a larger --max-unpacked"},
		{&core.SpaceError{Path: "core.zst", Dir: "/tmp"}, exitError, " (free space there"},
		{&ptrace.TracedError{Pid: 1, TracerPid: 2}, exitTraced, ""},
		{&sampler.ActiveError{Pid: 1, Creator: 2}, exitTraced, ""},
		{&ptrace.StateError{Pid: 1, What: "is a zombie"}, exitState, ""},
		{wrap(ptrace.ErrGone), exitGone, ""},
		{ptrace.ErrExec, exitGone, ""},
		{&inject.InjectError{Step: "malloc_info", Err: wrap(ptrace.ErrGone)}, exitGone, ""},
		{wrap(ptrace.ErrNoProcess), exitNoProcess, ""},
		{&inspect.NoThreadError{Pid: 1, Tid: 2}, exitNoProcess, ""},
		{&perf.Error{Kind: errkind.ErrNoProcess, Op: "perf_event_open", Err: unix.ESRCH}, exitNoProcess, ""},
		{&perf.Error{Kind: errkind.ErrPerfNotAllowed, Op: "perf_event_open", Err: unix.EACCES}, exitNoPerf, " (perf_event_paranoid is "},
		{&perf.Error{Kind: errkind.ErrNoTracefs, Op: "mount tracefs", Err: unix.ENODEV}, exitNoPerf, " (the syscall tracepoints need tracefs"},
		{&perf.Error{Kind: errkind.ErrNoPerf, Op: "perf_event_open", Err: unix.ENOENT}, exitNoPerf, ""},
		{&perf.Error{Kind: errkind.ErrResources, Op: "mmap", Err: unix.ENOMEM}, exitError, " (raise the open file limit"},
		{&perf.Error{Op: "perf rings", Err: errors.New("3 pages is not a power of two")}, exitError, ""},
		{&perf.BPFError{Op: "attaching the calls' eBPF program", Err: unix.EPERM}, exitNoPerf, ""},
		{&perf.BPFError{Op: "loading the calls' eBPF program", Err: fmt.Errorf("load: %w", ebpf.ErrNotSupported)}, exitNoPerf, ""},
		{&perf.BPFError{Op: "attaching the calls' eBPF program", Err: unix.ENOENT}, exitNoPerf, ""},
		{&perf.BPFError{Op: "loading the calls' eBPF program", Err: unix.ENOMEM}, exitError, ""},
		{wrap(ptrace.ErrPermission), exitPermission, " (run arenactl as the same user"},
		{fmt.Errorf("process 1 belongs to another user: run arenactl as the same user: %w", ptrace.ErrPermission), exitPermission, ""},
		{&fs.PathError{Op: "open", Path: "core", Err: fs.ErrPermission}, exitPermission, ""},
		{wrap(unix.EPERM), exitError, ""},
		{wrap(&live.NotGlibcError{Pid: 1, Allocator: libc.Allocator{Kind: libc.AllocMusl}}), exitNotGlibc, ""},
		{&live.NotGlibcError{Pid: 1, Allocator: libc.Allocator{Kind: libc.AllocStaticOther}}, exitNotGlibc, ""},
		{&live.NotGlibcError{Pid: 1, Allocator: libc.Allocator{Kind: libc.AllocStatic}}, exitNotGlibc, " (info --read-only"},
		{&live.NotGlibcError{Pid: 1, Allocator: libc.Allocator{Kind: libc.AllocInterposed, MallocDebug: true}}, exitNotGlibc, " (info --read-only"},
		{&live.NoSafeThreadError{Pid: 1}, exitNoSafe, ""},
		{fmt.Errorf("process 1: %w", &arch.UnsupportedError{Machine: elf.EM_386, Class: elf.ELFCLASS32}), exitArch, ""},
		{&ptrace.AtCallSiteError{Tid: 1}, exitNoSafe, ""},
		{wrap(&glibc.HeapDamageError{}), exitDamaged, "; use --read-only"},
		{&glibc.LockedArenaError{Stopped: []int{2}}, exitLockedStop, "; continue the process"},
		{&live.ImageUnavailableError{Pid: 1, Reason: "seccomp"}, exitNoImage, " (--freeze walk"},
		{fmt.Errorf("reading 8 bytes at 0x1000: %w", live.ErrImageGone), exitError, " (its lease runs out"},
		{&sampler.NotSampledError{Pid: 1, Reason: "seccomp"}, exitNoSampler, ""},
		{&budget.Error{Pid: 1, Op: budget.Scan, By: "--max-memory"}, exitNoMemory, " (a larger --max-memory"},
		{&ptrace.FaultError{Signal: "SIGSEGV"}, exitCallFailed, ""},
		{&ptrace.TimeoutError{}, exitCallFailed, ""},
		{&inject.InjectError{Step: "fmemopen", Err: errors.New("it returned NULL")}, exitCallFailed, ""},
		{wrap(ptrace.ErrRestoredItself), exitCallFailed, ""},
		{&inspect.ArenaCheckError{Pid: 1}, exitCallFailed, " (--read-only reads the heap"},
		{&heap.MemoryOnlyError{Err: errors.New("no arena found")}, exitBadCore, " (no file to read it with"},
		{&heap.StaticCoreError{Exe: "/bin/x", Err: &glibc.AmbiguousError{Exe: "/bin/x", Addrs: []uint64{0x10, 0x20}}}, exitError, " (no file to read it with"},
		{wrap(os.ErrDeadlineExceeded), exitError, ""},
		{errors.New("something else"), exitError, ""},
	} {
		if got := exitCode(c.err); got != c.exit {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.exit)
		}
		if c.err == nil {
			continue
		}
		if got := hint(c.err); !strings.HasPrefix(got, c.hint) || (c.hint == "") != (got == "") {
			t.Errorf("hint(%v) = %q, want it to start with %q", c.err, got, c.hint)
		}
	}
}

// Every row of outcomes is the one that decides some column for an error.
func TestOutcomesReachable(t *testing.T) {
	errs := []error{
		inspect.ErrInterrupted, &usageError{msg: "x"}, &core.TooLargeError{}, &core.Error{},
		&ptrace.TracedError{}, &ptrace.StateError{}, ptrace.ErrGone, ptrace.ErrNoProcess,
		&perf.Error{Kind: errkind.ErrPerfNotAllowed, Err: unix.EPERM}, &perf.Error{Kind: errkind.ErrNoPerf, Err: unix.ENOENT},
		&perf.Error{Kind: errkind.ErrResources, Err: unix.ENOMEM}, &perf.Error{Kind: errkind.ErrNoTracefs, Err: unix.EPERM},
		ptrace.ErrPermission,
		fmt.Errorf("the same user: %w", ptrace.ErrPermission), &fs.PathError{Err: fs.ErrPermission},
		&live.NotGlibcError{Allocator: libc.Allocator{Kind: libc.AllocStatic}}, &live.NotGlibcError{},
		&live.NoSafeThreadError{}, &glibc.HeapDamageError{}, &glibc.LockedArenaError{}, &arch.UnsupportedError{},
		&live.ImageUnavailableError{}, &sampler.NotSampledError{}, &budget.Error{}, &inspect.ArenaCheckError{},
		&ptrace.FaultError{}, &ptrace.TimeoutError{}, errors.New("wait timed out"), live.ErrImageGone,
		&core.SpaceError{}, &heap.MemoryOnlyError{Err: errors.New("x")}, errors.New("unknown command"), &record.FormatError{},
	}
	columns := []func(*outcome) bool{
		func(o *outcome) bool { return o.exit != 0 },
		func(o *outcome) bool { return o.hint != "" },
		func(o *outcome) bool { return o.reason != "" },
	}
	reached := map[*outcome]bool{}
	for _, err := range errs {
		for _, has := range columns {
			if o := decide(err, has); o != nil {
				reached[o] = true
			}
		}
	}
	for i := range outcomes {
		if o := &outcomes[i]; !reached[o] {
			t.Errorf("row %d (exit %d, hint %q, reason %q) decides nothing", i, o.exit, o.hint, o.reason)
		}
	}
}

// The exporter's reason labels come from the same table (they were
// exporter.Reason's).
func TestReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", &live.NotGlibcError{Pid: 1}), exporter.ReasonNotGlibc},
		{fmt.Errorf("process 1: %w", ptrace.ErrNoProcess), exporter.ReasonGone},
		{ptrace.ErrGone, exporter.ReasonGone},
		{&ptrace.StateError{Pid: 1, What: "is a zombie"}, exporter.ReasonGone},
		{fmt.Errorf("process 1: %w", ptrace.ErrPermission), exporter.ReasonPermission},
		{&ptrace.TracedError{Pid: 1, TracerPid: 2}, exporter.ReasonTraced},
		{&glibc.HeapDamageError{}, exporter.ReasonDamaged},
		{fmt.Errorf("thread 3 did not stop: %w", errors.New("wait timed out")), exporter.ReasonTimeout},
		{errors.New("something else"), exporter.ReasonOther},
	} {
		if got := reason(c.err); got != c.want {
			t.Errorf("Reason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// A static program without glibc malloc is not_glibc, as another
// allocator is (issue 22, item 3).
func TestStaticOtherIsNotGlibc(t *testing.T) {
	err := fmt.Errorf("process 1: %w", &live.NotGlibcError{Pid: 1, Allocator: libc.Allocator{Kind: libc.AllocStaticOther}})
	if r := reason(err); r != exporter.ReasonNotGlibc {
		t.Errorf("%v: reason %s", err, r)
	}
}
