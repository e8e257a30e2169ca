// Package target owns the one view every analysis has of what it inspects:
// a live process, a core file or an arenactl snapshot. A Target gives its
// memory, its mappings (already classified), its threads, the files it
// mapped and who it is; nothing here knows glibc's heap (internal/heap is the
// layer above, as golang.org/x/debug's gocore is above internal/core).
//
// internal/live and internal/core implement Target. What only a live process
// can do (stop every thread, borrow one, run code in it) is not part of
// Target: those are methods of *live.Target, which the use cases that need
// them (internal/inspect) take instead.
package target

import (
	"os"

	"github.com/arenactl/arenactl/internal/maps"
)

// Target is a process to read, alive or dumped.
type Target interface {
	// ReadAt reads the target's memory at addr.
	ReadAt(p []byte, addr uint64) (int, error)
	// Process says which process this is.
	Process() Process
	// Mappings are the target's memory mappings, classified (main heap,
	// arena heaps, stacks, libraries, ...).
	Mappings() []maps.Mapping
	// Threads are the threads whose registers are known: a core's every
	// thread; a live process's while it is frozen, none otherwise.
	Threads() []Thread
	// OpenFile opens the file behind a mapping: for a live process through
	// /proc/PID/map_files (so targets in containers work), for a core under
	// the sysroot it was opened with. The caller closes the file.
	OpenFile(m maps.Mapping) (*os.File, error)
	Close() error
}

// Process identifies a target's process.
type Process struct {
	Pid     int
	Exe     string // the executable's path as the process saw it
	Command string // its short name (comm); "" when unknown
}

// Thread is one thread's identity and registers.
type Thread struct {
	Tid    int
	PC, SP uint64
	FsBase uint64 // the thread pointer: glibc's TLS (tcache, thread_arena) hangs off it
	// Regs is every general-purpose register, user_regs_struct in the
	// kernel's order (x86_64, as NT_PRSTATUS holds it): a conservative scan
	// of the heap's roots reads each as a possible pointer.
	Regs [27]uint64
}
