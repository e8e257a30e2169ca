package libc

import (
	"debug/elf"
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// glibc 2.34 moved MALLOC_CHECK_, mcheck and mtrace out of libc into
// libc_malloc_debug.so, preloaded by whoever wants them (malloc/Makefile,
// malloc/malloc-debug.c, 2.34+). Its malloc, free, ... wrap libc's: with
// the check hook off (mcheck, mtrace, or nothing) they call libc's
// __libc_malloc, and libc's arenas hold the heap as usual; with
// MALLOC_CHECK_ (glibc.malloc.check) they call the library's own copy of
// malloc.c instead, compiled without tcache and used through its main_arena
// alone, and libc's malloc is never initialised ("malloc check does not
// quite co-exist with libc malloc", malloc-debug.c). Which of the two holds
// the heap is a run-time choice that only memory shows: the copy's
// main_arena has system memory exactly when the check hook took over
// (heap.Open decides).

// isMallocDebug matches the library's file: libc_malloc_debug.so(.0).
func isMallocDebug(m maps.Mapping) bool {
	return isFileMapping(m) && strings.HasPrefix(BaseName(m.Path), "libc_malloc_debug.so")
}

// MallocDebugMapping returns libc_malloc_debug.so's lowest mapping, if the
// target maps it.
func MallocDebugMapping(ms []maps.Mapping) (maps.Mapping, bool) {
	var m0 maps.Mapping
	found := false
	for _, m := range ms {
		if isMallocDebug(m) && (!found || m.Start < m0.Start) {
			m0, found = m, true
		}
	}
	return m0, found
}

// FindMallocDebugImage reads libc_malloc_debug.so's copy of the allocator
// as a Libc (MallocDebug set, Wrapped the libc.so.6 it wraps), for the
// read-only walk only: calling into it is not supported (the pre-flight
// checks and the injected calls know libc's arenas and locks, not the
// copy's). Its version is libc's: both come from one glibc build, and the
// library has no version string of its own.
func FindMallocDebugImage(ms []maps.Mapping, open FileOpener) (*Libc, error) {
	libc, err := FindLibc(ms, open)
	if err != nil {
		return nil, err
	}
	return MallocDebugImage(ms, libc, open)
}

// MallocDebugImage is FindMallocDebugImage with the wrapped libc already
// found (a core's, checked by its build-id).
func MallocDebugImage(ms []maps.Mapping, libc *Libc, open FileOpener) (*Libc, error) {
	if libc.Version.Less(2, 34) {
		return nil, fmt.Errorf("libc_malloc_debug.so with glibc %s, which has no such library (it came with 2.34)", libc.Version)
	}
	m0, ok := MallocDebugMapping(ms)
	if !ok {
		return nil, fmt.Errorf("libc_malloc_debug.so is not mapped")
	}
	l, err := loadObject(ms, m0, "malloc debug library", open, func(_ *elf.File, l *Libc) error {
		l.Version, l.Banner = libc.Version, libc.Banner
		l.VersionFrom = "the version of " + libc.Path + ", from the same glibc build"
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.MallocDebug, l.Wrapped = true, libc
	return l, nil
}

// LayoutOf is the layout of l's allocator: its version's, without tcache
// for libc_malloc_debug.so's copy (compiled with USE_TCACHE 0, so mp_ ends
// before the tcache fields and no heap starts with a tcache struct).
func LayoutOf(l *Libc) (layouts.Layout, error) {
	lay, err := layouts.LayoutFor(l.Version)
	if err != nil || !l.MallocDebug {
		return lay, err
	}
	if lay.MpTcacheBins >= 0 {
		lay.MpSize = lay.MpTcacheBins
	}
	lay.MpTcacheBins, lay.MpTcacheMaxBytes, lay.MpTcacheCount, lay.MpTcacheUnsortedLimit = -1, -1, -1, -1
	lay.TcacheBins = 0
	return lay, nil
}
