package live

import (
	"os"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Process is the live process: its pid and executable. Its short name is
// not read: no report of a live process shows it.
func (t *Target) Process() debuggee.Process { return debuggee.Process{Pid: t.Pid, Exe: t.Exe} }

// Arch is the host's machine, which Open checked the process's executable
// is of.
func (t *Target) Arch() *arch.Arch { return t.arch }

// PageSize is the process's page size, as the kernel told it (AT_PAGESZ in
// /proc/PID/auxv), or its machine's usual one when that cannot be read. It
// is read once when the process is opened, before anything is stopped: a
// walk under a freeze or an arena's lock asks for it.
func (t *Target) PageSize() uint64 { return t.pageSize }

func (t *Target) readPageSize() uint64 {
	if b, err := os.ReadFile(t.proc.Dir() + "/auxv"); err == nil {
		if ps, ok := t.arch.PageSizeFromAuxv(b); ok {
			return ps
		}
	}
	return t.arch.PageSize
}

// Mappings are the mappings as last read, classified: at Open, by Refresh,
// and again once a Freeze has stopped every thread.
func (t *Target) Mappings() []maps.Mapping { return t.mappings }

// Threads are the threads of the current freeze with their registers; none
// while nothing is frozen, since a running thread's registers mean nothing
// a moment later.
func (t *Target) Threads() []debuggee.Thread {
	if t.frozen == nil {
		return nil
	}
	return t.frozen.Threads()
}

// regsOf puts ptrace's registers in NT_PRSTATUS's word order, the order
// debuggee.Regs keeps for the host's machine (the only one whose live
// processes are read: readArch).
func regsOf(r *ptrace.Regs) debuggee.Regs {
	var out debuggee.Regs
	copy(out[:], ptrace.Words(r))
	return out
}

// threadRegs are a stopped thread's words with its thread pointer
// (aarch64's is not among NT_PRSTATUS's, ptrace.Thread.AllWords).
func threadRegs(th *ptrace.Thread) debuggee.Regs {
	var out debuggee.Regs
	copy(out[:], th.AllWords())
	return out
}

var _ debuggee.Target = (*Target)(nil)
