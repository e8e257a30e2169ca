package debuggee

import "github.com/arenactl/arenactl/internal/arch"

// Regs is a thread's general-purpose registers, word for word as the
// machine's NT_PRSTATUS holds them in pr_reg (arch.Arch.Prstatus): on
// x86_64 the 27 words of struct user_regs_struct (their indexes, for the
// files built for x86_64 only, are in regs_amd64.go); on aarch64 the 34 of
// struct user_pt_regs, then the thread pointer (NT_ARM_TLS). PCOf, SPOf
// and TPOf find them for either machine (and a Thread's PC, SP and TP for
// its own); the unwinder reads the rest through arch.Arch.FromPrstatus.
// Every consumer
// takes this one type, whether the registers came from a stopped thread, a
// core, a perf sample or the heap sampler's ring; one that knows only some
// of them (a stack sample: pc, sp and the callee-saved ones) leaves the
// rest zero.
type Regs [NumRegs]uint64

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
