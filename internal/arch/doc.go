// Package arch owns what arenactl knows about a machine, as a value: one
// *Arch per architecture it reads (x86_64, aarch64), chosen from a core's
// ELF header (e_machine, EI_CLASS) or, for a live process, from the host
// after the process's own executable was checked to be of the same kind.
// The value says the ELF machine, the pointer and page sizes, the register
// file in DWARF numbering (which register is the PC, the stack pointer, the
// frame pointer, the return address, the thread pointer), the syscall
// numbers and calling conventions, the perf user-register mask and the
// order the kernel dumps those registers in, the layout of a core's
// NT_PRSTATUS, and how to clear the bits of a pointer that are not its
// address (aarch64's top-byte tag and pointer authentication code).
//
// The model is delve's pkg/proc Arch (one value per architecture that the
// debugger's layers ask instead of switching on GOARCH) and
// golang.org/x/debug's internal/core, which reads the machine from the
// core's ELF header rather than assuming the host's.
//
// Every x86_64 fact lives in the files named amd64*, every aarch64 fact in
// arm64*; the rest of arenactl asks the value. Register numbering follows
// the System V x86-64 psABI (section 3.6.2, "DWARF Register Number
// Mapping") and Arm's DWARF for the Arm 64-bit Architecture (AADWARF64,
// section 4.1); syscall numbers are the kernel's
// (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h,
// which arm64 uses); perf's register indexes are
// arch/x86/include/uapi/asm/perf_regs.h and
// arch/arm64/include/uapi/asm/perf_regs.h; NT_PRSTATUS is
// include/uapi/linux/elfcore.h's struct elf_prstatus with each
// architecture's elf_gregset_t (arch/x86/include/asm/user_64.h struct
// user_regs_struct; arch/arm64/include/uapi/asm/ptrace.h struct
// user_pt_regs).
package arch
