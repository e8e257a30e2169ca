package inspect

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

// Maps reads a live process's memory map with its smaps counters and
// classifies it. It stops nothing and attaches to nothing. A process between
// two programs (execve) shows a zombie main thread and missing files for a
// moment: that is read again, for a moment, while the process is there.
func Maps(pid int) (*report.Maps, error) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for {
		rep, err := mapsOnce(pid)
		if err == nil || time.Now().After(deadline) || !transient(err) {
			return rep, err
		}
		if _, serr := os.Stat(procfs.Path(pid, "")); serr != nil {
			return rep, err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func transient(err error) bool {
	var se *ptrace.StateError
	return errors.Is(err, ptrace.ErrNoProcess) || errors.Is(err, ptrace.ErrGone) ||
		errors.Is(err, os.ErrNotExist) || (errors.As(err, &se) && se.Zombie())
}

// mapsOnce reads every file through one held /proc directory: the map,
// its executable, its threads' stack pointers and the rollup are all of one
// process, never partly of a later one given its pid.
func mapsOnce(pid int) (*report.Maps, error) {
	p, err := procfs.OpenProc(pid)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if st, err := p.ReadTaskStatus(pid); err != nil {
		return nil, err
	} else if st.Kernel() {
		// Its maps and smaps read empty, its smaps_rollup fails with
		// ESRCH, which would say it exited.
		return nil, ptrace.KernelThreadError(pid)
	}
	ms, err := maps.ReadProc(p, true)
	if err != nil {
		return nil, mapsErr(pid, err)
	}
	exe, _ := maps.ExePathProc(p)
	sps, _ := maps.StackPointersProc(p)
	maps.Classify(ms, maps.Hints{ExePath: exe, StackPointers: sps})
	roll, err := maps.ReadRollupProc(p)
	if err != nil {
		return nil, mapsErr(pid, err)
	}
	return &report.Maps{Pid: pid, Mappings: ms, Summary: report.MapsSummary{Classes: maps.Summarize(ms), Rollup: roll}}, nil
}

// mapsErr types a failure to read the maps; a condition procfs or ptrace
// found already names the process.
func mapsErr(pid int, err error) error {
	var se *ptrace.StateError
	if errors.As(err, &se) || errors.Is(err, ptrace.ErrGone) || errors.Is(err, procfs.ErrNoProcess) || errors.Is(err, procfs.ErrPermission) {
		return err
	}
	return procfs.Error(pid, err)
}

// CoreMaps is the memory map a core recorded, classified: with the
// counters a snapshot recorded, sizes only from a kernel core.
func CoreMaps(ctx context.Context, path string, unpack core.Options) (*report.Maps, error) {
	t, err := core.OpenTargetContext(ctx, path, "", unpack)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	ms := t.Mappings()
	return &report.Maps{Pid: t.Process().Pid, Mappings: ms, Summary: coreMapsSummary(t), FromCore: true}, nil
}
