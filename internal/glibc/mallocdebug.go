package glibc

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
)

// libc_malloc_debug.so's copy of the allocator is found as a libc.Libc
// (internal/glibc/libc's mallocdebug.go says when it holds the heap); what
// is read of it with a layout is here.

// MainArenaUsed reports whether the main_arena at a (of layout lay) has
// taken memory from the system. For libc_malloc_debug.so's copy, that is
// whether the MALLOC_CHECK_ hook took over; for libc's, whether libc's
// malloc ever ran.
func MainArenaUsed(mem Memory, lay layouts.Layout, a Anchors) (bool, error) {
	sys, err := readWord(mem, a.MainArena+uint64(lay.StateSystemMem))
	if err != nil {
		return false, fmt.Errorf("libc_malloc_debug.so's main_arena at %#x: %w", a.MainArena, err)
	}
	return sys != 0, nil
}
