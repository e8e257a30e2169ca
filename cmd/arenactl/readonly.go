package main

import (
	"fmt"

	"arenactl/internal/glibc"
	"arenactl/internal/live"
	"arenactl/internal/ptrace"
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
	ro := &glibc.ReadOnly{Torn: !freeze}
	var frozen *live.Frozen
	if freeze {
		if frozen, err = t.Freeze(f.timeout); err != nil {
			return nil, err
		}
	}
	walk, caches, werr := walkAll(t, lay, frozen, f.debugDirs)
	if frozen != nil {
		held, terr := frozen.Thaw()
		ro.Frozen = held
		if werr == nil {
			werr = terr
		}
	}
	if werr != nil {
		return nil, werr
	}
	ro.Walk, ro.Tcaches = walk, caches
	rep := &glibc.Report{Pid: pid, Exe: t.Exe, Libc: t.Libc.Info(), Malloc: walk.Malloc, ReadOnly: ro}
	if tids, err := ptrace.Tasks(pid); err == nil {
		rep.Threads = len(tids)
	}
	rep.Maps, err = readMaps(t)
	return rep, err
}

// walkAll finds the anchors, the threads' tcaches and walks the heap. It is
// the part that runs while the process is frozen.
func walkAll(t *live.Target, lay glibc.Layout, frozen *live.Frozen, debugDirs []string) (*glibc.Walk, []glibc.ThreadCache, error) {
	anchors, err := glibc.FindAnchorsWith(t.Libc, lay, t, debugDirs)
	if err != nil {
		return nil, nil, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	var caches []glibc.ThreadCache
	var cached map[uint64]bool
	var dmg []glibc.Damage
	if frozen != nil {
		caches, cached, dmg = glibc.Tcaches(t.Libc, lay, t, frozen.TLS, glibc.ArenaRing(t, lay, anchors))
	}
	walk, err := glibc.WalkHeap(t, lay, anchors, t.Mappings, cached)
	if err != nil {
		return nil, nil, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	walk.Damage = append(walk.Damage, dmg...)
	return walk, caches, nil
}
