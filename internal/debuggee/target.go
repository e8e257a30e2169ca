// Package debuggee owns the one view every analysis has of what it
// inspects, the debuggee: a live process, a core file or an arenactl
// snapshot. (It was internal/target, a folder name that build tools and
// code browsers skip as build output.) A Target gives its
// memory, its mappings (already classified), its threads with their
// registers, the files it mapped and who it is. Regs, a thread's registers
// as its machine's pr_reg holds them, is the one every layer above passes
// registers in (the unwinder,
// perf samples, the heap sampler's records, glibc's hijack policy).
// Nothing here knows glibc's heap (internal/heap is the layer above, as
// golang.org/x/debug's gocore is above internal/core). An implementation
// may know more than the interface says: *live.Target finds the process's
// libc and allocator as it opens (internal/glibc's detection), so that a
// process that is not glibc's is refused before anything is stopped.
//
// internal/live and internal/core implement Target. What only a live process
// can do (be read again while it runs, stop every thread, be imaged, lend a
// thread to run code in) is not part of Target: those powers are
// interfaces of internal/live (Observed, Freezer, Imager, Borrower), and a
// use case takes the one it needs.
package debuggee

import (
	"os"

	"github.com/arenactl/arenactl/internal/arch"
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
	// Arch is the target's machine: a core's from its ELF header's
	// e_machine, a live process's the host's, once its executable was
	// found to be of that machine (internal/arch).
	Arch() *arch.Arch
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

// Thread is one thread's identity and registers, the same whether a core's
// NT_PRSTATUS or a stopped live thread gave them (as golang.org/x/debug's
// internal/core keeps one Thread with every register): a conservative scan
// of the heap's roots reads each register as a possible pointer, the tcache
// locator the thread pointer, a core writer all of them.
type Thread struct {
	Tid int
	Regs
	// Arch is the thread's machine: where its pc, stack pointer and thread
	// pointer are among Regs' words. nil is x86_64, the machine of every
	// thread made before a target said its own.
	Arch *arch.Arch
	// XState is the thread's NT_X86_XSTATE (an XSAVE area, as
	// PTRACE_GETREGSET gives it), kept for writing it into a core; empty
	// when not read (a core's threads).
	XState []byte
}

func (t Thread) machine() *arch.Arch {
	if t.Arch != nil {
		return t.Arch
	}
	return arch.AMD64
}

// PC, SP and TP are the thread's pc, stack pointer and thread pointer
// (x86_64's fs.base, aarch64's TPIDR_EL0) on its own machine: they hide
// Regs' x86_64 PC, SP and FsBase.
func (t Thread) PC() uint64 { return t.Regs.PCOf(t.machine()) }
func (t Thread) SP() uint64 { return t.Regs.SPOf(t.machine()) }
func (t Thread) TP() uint64 { return t.Regs.TPOf(t.machine()) }
