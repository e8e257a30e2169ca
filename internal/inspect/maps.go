package inspect

import (
	"context"
	"fmt"
	"os"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

// Maps reads a live process's memory map with its smaps counters and
// classifies it. It stops nothing and attaches to nothing.
func Maps(pid int) (*report.Maps, error) {
	if _, err := ptrace.ReadStatus(pid, pid); err != nil {
		return nil, err
	}
	ms, err := maps.Read(pid, true)
	if err != nil {
		return nil, procfs.Error(pid, err)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	sps, _ := maps.StackPointers(pid)
	maps.Classify(ms, maps.Hints{ExePath: exe, StackPointers: sps})
	roll, err := maps.ReadRollup(pid)
	if err != nil {
		return nil, procfs.Error(pid, err)
	}
	return &report.Maps{Pid: pid, Mappings: ms, Summary: report.MapsSummary{Classes: maps.Summarize(ms), Rollup: roll}}, nil
}

// CoreMaps is the memory map a core recorded, classified: sizes only, a
// core has no RSS.
func CoreMaps(ctx context.Context, path string, unpack core.Options) (*report.Maps, error) {
	t, err := core.OpenTargetContext(ctx, path, "", unpack)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	ms := t.Mappings()
	return &report.Maps{Pid: t.Process().Pid, Mappings: ms, Summary: report.MapsSummary{Classes: maps.Summarize(ms)}, FromCore: true}, nil
}
