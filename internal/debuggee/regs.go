package debuggee

import "github.com/arenactl/arenactl/internal/arch"

// Regs is a thread's general-purpose registers, word for word as the
// machine's NT_PRSTATUS holds them in pr_reg (arch.Arch.Prstatus): on
// x86_64 the 27 words of struct user_regs_struct, whose indexes are below;
// on aarch64 the 34 of struct user_pt_regs, then the thread pointer
// (NT_ARM_TLS). PCOf, SPOf and TPOf find them for either machine (and a
// Thread's PC, SP and TP for its own); Regs' PC and SP, and the indexes,
// are x86_64's, left for the unwinder and tests (issue 31 moves them onto
// arch). Every consumer
// takes this one type, whether the registers came from a stopped thread, a
// core, a perf sample or the heap sampler's ring; one that knows only some
// of them (a stack sample: pc, sp and the callee-saved ones) leaves the
// rest zero.
type Regs [NumRegs]uint64

// Indexes into Regs, in user_regs_struct's order.
const (
	RegR15 = iota
	RegR14
	RegR13
	RegR12
	RegRBP
	RegRBX
	RegR11
	RegR10
	RegR9
	RegR8
	RegRAX
	RegRCX
	RegRDX
	RegRSI
	RegRDI
	RegOrigRAX
	RegRIP
	RegCS
	RegEFLAGS
	RegRSP
	RegSS
	RegFSBase
	RegGSBase
	RegDS
	RegES
	RegFS
	RegGS
)

// NumRegs is the most words a machine's Regs holds (arch.Arch.NumWords).
const NumRegs = 35

// PCOf, SPOf and TPOf are the pc, the stack pointer and the thread
// pointer of a thread of machine a.
func (r Regs) PCOf(a *arch.Arch) uint64 { return r[a.Words.PC] }
func (r Regs) SPOf(a *arch.Arch) uint64 { return r[a.Words.SP] }
func (r Regs) TPOf(a *arch.Arch) uint64 { return r[a.Words.TP] }

// SetPCOf and SetSPOf store the pc and the stack pointer of a thread of
// machine a.
func (r *Regs) SetPCOf(a *arch.Arch, v uint64) { r[a.Words.PC] = v }
func (r *Regs) SetSPOf(a *arch.Arch, v uint64) { r[a.Words.SP] = v }

// PC is the instruction pointer.
func (r Regs) PC() uint64 { return r[RegRIP] }

// SP is the stack pointer.
func (r Regs) SP() uint64 { return r[RegRSP] }
