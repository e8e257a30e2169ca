package main

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// collectReadOnly builds the info report from memory alone. With freeze,
// every thread is stopped from just before the walk to just after it; the
// libc file and the maps are read before, the smaps summary after. A static
// executable is accepted: its own copy of glibc's malloc is read.
func collectReadOnly(pid int, f injectFlags, freeze bool) (*glibc.Report, error) {
	t, err := live.OpenReadOnly(pid)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	lay, err := glibc.LayoutFor(t.Libc.Version)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	// Symbols and static signatures come from files: found before anything
	// is stopped, so the freeze lasts only as long as the walk itself.
	anchors, err := glibc.FindAnchorsWith(t.Libc, lay, t, f.debugDirs)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	ro := &glibc.ReadOnly{Torn: !freeze}
	var tls []glibc.ThreadTLS
	var frozen *live.Frozen
	if freeze {
		if frozen, err = t.Freeze(f.timeout); err != nil {
			return nil, err
		}
		tls = frozen.TLS
	}
	walk, caches, werr := glibc.WalkAll(t, t.Libc, lay, anchors, t.Mappings, tls)
	if frozen != nil {
		held, terr := frozen.Thaw()
		ro.Frozen = held
		if werr == nil {
			werr = terr
		}
	}
	if werr != nil {
		return nil, fmt.Errorf("process %d: %w", pid, werr)
	}
	ro.Walk, ro.Tcaches = walk, caches
	rep := &glibc.Report{Pid: pid, Exe: t.Exe, Libc: t.Libc.Info(), Malloc: walk.Malloc, ReadOnly: ro}
	if tids, err := ptrace.Tasks(pid); err == nil {
		rep.Threads = len(tids)
	}
	rep.Maps, err = readMaps(t)
	return rep, err
}
