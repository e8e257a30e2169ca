package target

// Regs is a thread's general-purpose registers (x86_64), word for word in
// the order of the kernel's struct user_regs_struct: what PTRACE_GETREGS
// fills, and what a core's NT_PRSTATUS holds as pr_reg. Every consumer
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
	NumRegs
)

// PC is the instruction pointer.
func (r Regs) PC() uint64 { return r[RegRIP] }

// SP is the stack pointer.
func (r Regs) SP() uint64 { return r[RegRSP] }

// FsBase is the thread pointer: glibc's TLS (tcache, thread_arena) hangs
// off it.
func (r Regs) FsBase() uint64 { return r[RegFSBase] }
