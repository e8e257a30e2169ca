// Package heap owns a target's glibc heap as one opened thing: which libc
// the target runs, the layout of its allocator's structures and where they
// are (main_arena, mp_), found once, from the target's files, debug files or
// memory alone. Everything read through the layout and those anchors is a
// method of Heap (every walk, the arena ring, the memory a walk needs and
// the rest that an image may leave out, a snapshot's record of a walk), so
// no caller strings the lower steps of internal/glibc together itself. What
// is judged from a walk's result once it is made (the trim prediction, the
// pre-flight's lock check) is internal/glibc's, over glibc.Walk.
//
// A Heap reads through a debuggee.Target and never knows whether it is a live
// process or a core; only opening differs: a live process's libc is the
// file its mapping points at, a core's must be found and checked
// (OpenCore).
package heap

import (
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
)

// Heap is a target's allocator, located.
type Heap struct {
	T       debuggee.Target
	Libc    *libc.Libc
	Layout  layouts.Layout
	Anchors glibc.Anchors
	// SameFormat is false when memory alone fitted glibc versions that
	// print malloc_info differently: the XML may not be glibc's to the byte.
	SameFormat bool
	// LibcNotes say what was tried for a core's libc and not used, in order.
	LibcNotes []string
	// TcachesSkipped says why no thread's tcache can be read ("" when they
	// can): the TLS slots are unknown without libc's file.
	TcachesSkipped string
	// Jobs is how many workers the walks may spread the arenas over, as
	// workers.Resolve takes it (0: its default); a walk's result is the
	// same for any count.
	Jobs int
}

// Options are where debug files may be found, and for a core, its libc.
type Options struct {
	// DebugDirs hold debug files by build-id (DIR/.build-id/xx/rest), for
	// main_arena and mp_ by symbol, and a core's libc itself.
	DebugDirs []string
	// LibcFile is a core's libc.so.6 wherever it is now; used only if its
	// build-id is the core's.
	LibcFile string
	// NoLibcFile: for a core, open no libc file at all; a snapshot's own
	// record is still used.
	NoLibcFile bool
}

// walkable refuses a target of a machine whose heap is not walked: x86_64
// and aarch64 are (glibc's malloc is the same C on both: internal/glibc/layouts
// says what was checked). A live process is of arenactl's own machine
// (internal/live refuses others first).
func walkable(t debuggee.Target) error {
	if a := t.Arch(); a != nil && a != arch.AMD64 && a != arch.ARM64 {
		return &ArchError{Arch: a}
	}
	return nil
}

// ArchError: the heap of a target of this machine is not walked yet.
type ArchError struct{ Arch *arch.Arch }

func (e *ArchError) Error() string {
	return fmt.Sprintf("an %s target: its heap is not walked yet", e.Arch)
}

func (e *ArchError) Is(target error) bool { return target == errkind.ErrArch }

// Open locates the allocator of a target whose libc is known (a live
// process: the file behind its mapping is the one it runs).
func Open(t debuggee.Target, l *libc.Libc, o Options) (*Heap, error) {
	if err := walkable(t); err != nil {
		return nil, err
	}
	if l.MallocDebug {
		return openMallocDebug(t, l, o)
	}
	lay, err := libc.LayoutOf(l)
	if err != nil {
		return nil, err
	}
	anchors, err := glibc.FindAnchorsWith(l, lay, t, o.DebugDirs)
	if err != nil {
		return nil, err
	}
	return &Heap{T: t, Libc: l, Layout: lay, Anchors: anchors, SameFormat: true}, nil
}

// tls is the threads the tcache walk reads the thread pointers of: none
// when the TLS slots are unknown, or the target has no thread registers (a
// live process not frozen).
func (h *Heap) tls() []debuggee.Thread {
	if h.TcachesSkipped != "" {
		return nil
	}
	return h.T.Threads()
}

// Walk is the full read-only walk: every arena's lists and chunks, the
// mmapped chunks, and every known thread's tcache.
func (h *Heap) Walk() (*glibc.Walk, []glibc.ThreadCache, error) {
	w, caches, err := glibc.WalkAll(h.T, h.Libc, h.Layout, h.Anchors, h.T.Mappings(), h.tls(), h.Jobs)
	if w != nil {
		w.Exact = w.Exact && h.SameFormat
	}
	return w, caches, err
}

// WalkChunks is Walk that also hands visit every chunk it meets
// (glibc.WalkChunks): what internal/chunks indexes.
func (h *Heap) WalkChunks(visit func(glibc.Chunk)) (*glibc.Walk, []glibc.ThreadCache, error) {
	w, caches, err := glibc.WalkChunks(h.T, h.Libc, h.Layout, h.Anchors, h.T.Mappings(), h.tls(), visit, h.Jobs)
	if w != nil {
		w.Exact = w.Exact && h.SameFormat
	}
	return w, caches, err
}

// WalkChunksOf is WalkChunks with a visitor per arena (glibc.WalkChunksOf).
func (h *Heap) WalkChunksOf(visitOf func(arena int) func(glibc.Chunk)) (*glibc.Walk, []glibc.ThreadCache, error) {
	w, caches, err := glibc.WalkChunksOf(h.T, h.Libc, h.Layout, h.Anchors, h.T.Mappings(), h.tls(), visitOf, h.Jobs)
	if w != nil {
		w.Exact = w.Exact && h.SameFormat
	}
	return w, caches, err
}

// WalkLists walks what malloc_info and malloc_trim walk (the arena ring,
// fastbins, bins, heaps), without the chunks: the pre-flight check and the
// trim prediction.
func (h *Heap) WalkLists() (*glibc.Walk, error) {
	return glibc.WalkLists(h.T, h.Layout, h.Anchors, h.T.Mappings(), h.Jobs)
}

// WalkArenaLists walks the top, heaps and the lists named (all when nil)
// of the one arena at addr, the index-th of the ring, as WalkLists does
// every arena's: the pre-flight's check of an arena whose lock a borrowed
// thread holds.
func (h *Heap) WalkArenaLists(addr uint64, index int, lists []int) (*glibc.Walk, error) {
	return glibc.WalkArenaLists(h.T, h.Layout, h.Anchors, h.T.Mappings(), addr, index, lists)
}

// WalkThrough is the walk without the chunks, reading through mem (a
// recorder of what it reads, for a snapshot).
func (h *Heap) WalkThrough(mem glibc.Memory) (*glibc.Walk, error) {
	w, _, err := glibc.WalkWithoutChunks(mem, h.Libc, h.Layout, h.Anchors, h.T.Mappings(), h.tls(), h.Jobs)
	return w, err
}

// LeaveOut names the big anonymous mappings of the running target that a
// walk never reads (glibc.LeaveOut), for a copy-on-write image to be made
// without them.
func (h *Heap) LeaveOut() []maps.Range {
	return glibc.LeaveOut(h.T, h.Layout, h.Anchors, h.T.Mappings())
}

// ArenaRing lists the arenas in ring order from main_arena
// (glibc.ArenaRing).
func (h *Heap) ArenaRing() []uint64 { return glibc.ArenaRing(h.T, h.Layout, h.Anchors) }

// HeapMax is the size and alignment of a thread arena's heaps
// (glibc.HeapMax); ok is false when mp_ cannot be read.
func (h *Heap) HeapMax() (uint64, bool) { return glibc.HeapMax(h.T, h.Layout, h.Anchors) }

// Unclaim corrects the class of mappings the classifier took for a thread
// arena's heap by their place alone but that hold none (glibc.Unclaim).
func (h *Heap) Unclaim(ms []maps.Mapping) { glibc.Unclaim(h.T, h.Layout, h.Anchors, ms) }

// Record is what a snapshot keeps of the walk, so that reading it needs no
// libc file.
func (h *Heap) Record(w *glibc.Walk) []byte { return glibc.NewRecord(h.Libc, w).Marshal() }

// openMallocDebug opens the allocator of a process running
// libc_malloc_debug.so (l): the library's own copy of malloc when the
// MALLOC_CHECK_ hook took over, else libc's, which the library then only
// wraps (glibc.MainArenaUsed).
func openMallocDebug(t debuggee.Target, l *libc.Libc, o Options) (*Heap, error) {
	lay, err := libc.LayoutOf(l)
	if err != nil {
		return nil, err
	}
	anchors, err := glibc.FindAnchorsWith(l, lay, t, o.DebugDirs)
	if err != nil {
		return nil, err
	}
	active, err := glibc.MainArenaUsed(t, lay, anchors)
	if err != nil {
		return nil, err
	}
	if !active {
		h, err := Open(t, l.Wrapped, o)
		if h != nil {
			h.LibcNotes = append(h.LibcNotes, "libc_malloc_debug.so is preloaded without MALLOC_CHECK_: it wraps libc's malloc, whose arenas these are")
		}
		return h, err
	}
	return &Heap{T: t, Libc: l, Layout: lay, Anchors: anchors, SameFormat: true, LibcNotes: []string{
		"MALLOC_CHECK_ is in effect: the heap is libc_malloc_debug.so's own copy of malloc (one arena, no tcache), not libc's"},
		TcachesSkipped: noTcacheInMallocDebug}, nil
}

// errorf wraps err with the target's identity.
func errorf(t debuggee.Target, err error) error {
	return fmt.Errorf("process %d: %w", t.Process().Pid, err)
}

func trimDeleted(p string) string { return strings.TrimSuffix(p, " (deleted)") }
