package heap

import (
	"fmt"
	"os"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/hostfs"
	"github.com/arenactl/arenactl/internal/maps"
)

// coreMallocDebug decides, for a core that maps libc_malloc_debug.so, whose
// malloc held the heap (heap.openMallocDebug does the same for a live
// process): the library's own copy when MALLOC_CHECK_ took over, else the
// libc h already found. The library's file is used only when its build-id
// is the one in the core's memory. Without it, the core is read through
// libc only if libc's arenas show they were used.
func coreMallocDebug(t *core.Target, h *Heap, o Options) (*Heap, error) {
	m0, ok := libc.MallocDebugMapping(t.Mappings())
	if !ok || h.Libc.MallocDebug {
		return h, nil // none, or a snapshot's record already says
	}
	libcUsed := func() bool {
		used, err := glibc.MainArenaUsed(t, h.Layout, h.Anchors)
		return err == nil && used
	}
	path := t.SysrootPath(trimDeleted(m0.Path))
	memID, _ := glibc.BuildIDInMemory(t, m0.Start)
	open := func(maps.Mapping) (*os.File, error) { return hostfs.OpenRegular(path) }
	dl, err := libc.MallocDebugImage(t.Mappings(), h.Libc, open)
	if err == nil && memID != "" && dl.BuildID != memID {
		err = fmt.Errorf("%s has build-id %s, the core's %s: another build", path, dl.BuildID, memID)
	}
	var lay layouts.Layout
	var anchors glibc.Anchors
	if err == nil {
		if lay, err = libc.LayoutOf(dl); err == nil {
			t.UseFile(m0.Path, path)
			anchors, err = glibc.FindAnchorsWith(dl, lay, t, o.DebugDirs)
		}
	}
	if err != nil {
		t.UseFile(m0.Path, "")
		if libcUsed() {
			h.LibcNotes = append(h.LibcNotes, fmt.Sprintf("libc_malloc_debug.so is mapped but its file could not be used (%v); libc's arenas hold memory, so MALLOC_CHECK_ was off and they are the heap", err))
			return h, nil
		}
		return nil, &MallocDebugError{Path: m0.Path, Err: err}
	}
	active, err := glibc.MainArenaUsed(t, lay, anchors)
	if err != nil {
		return nil, &MallocDebugError{Path: m0.Path, Err: err}
	}
	if !active {
		h.LibcNotes = append(h.LibcNotes, "libc_malloc_debug.so is preloaded without MALLOC_CHECK_: it wraps libc's malloc, whose arenas these are")
		return h, nil
	}
	dl.Source = h.Libc.Source
	h.Libc, h.Layout, h.Anchors, h.SameFormat = dl, lay, anchors, true
	h.LibcNotes = append(h.LibcNotes, "MALLOC_CHECK_ was in effect: the heap is libc_malloc_debug.so's own copy of malloc (one arena, no tcache), not libc's")
	h.TcachesSkipped = noTcacheInMallocDebug
	return h, nil
}

// noTcacheInMallocDebug is why no tcache is read under MALLOC_CHECK_.
const noTcacheInMallocDebug = "libc_malloc_debug.so's malloc has no tcache"

// MallocDebugError: a core maps libc_malloc_debug.so, whose own copy of
// malloc may hold the heap (under MALLOC_CHECK_), but the library's file
// could not be used to find it, and libc's arenas are unused.
type MallocDebugError struct {
	Path string
	Err  error
}

func (e *MallocDebugError) Error() string {
	return fmt.Sprintf("the heap is in %s's own copy of malloc (MALLOC_CHECK_), which could not be read: %v", e.Path, e.Err)
}

func (e *MallocDebugError) Unwrap() error { return e.Err }
