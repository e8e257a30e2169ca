package live

import (
	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/target"
)

// Process is the live process: its pid and executable. Its short name is
// not read: no report of a live process shows it.
func (t *Target) Process() target.Process { return target.Process{Pid: t.Pid, Exe: t.Exe} }

// Arch is the host's machine, which Open checked the process's executable
// is of.
func (t *Target) Arch() *arch.Arch { return t.arch }

// Mappings are the mappings as last read, classified: at Open, by Refresh,
// and again once a Freeze has stopped every thread.
func (t *Target) Mappings() []maps.Mapping { return t.mappings }

// Threads are the threads of the current freeze with their registers; none
// while nothing is frozen, since a running thread's registers mean nothing
// a moment later.
func (t *Target) Threads() []target.Thread {
	if t.frozen == nil {
		return nil
	}
	return t.frozen.Threads()
}

// regsOf puts ptrace's registers in user_regs_struct's word order (r15 r14
// r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags
// rsp ss fs_base gs_base ds es fs gs), the order target.Regs keeps.
func regsOf(r *ptrace.Regs) target.Regs {
	return target.Regs{r.R15, r.R14, r.R13, r.R12, r.Rbp, r.Rbx, r.R11, r.R10, r.R9, r.R8,
		r.Rax, r.Rcx, r.Rdx, r.Rsi, r.Rdi, r.Orig_rax, r.Rip, r.Cs, r.Eflags, r.Rsp, r.Ss,
		r.Fs_base, r.Gs_base, r.Ds, r.Es, r.Fs, r.Gs}
}

var _ target.Target = (*Target)(nil)
