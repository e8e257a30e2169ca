package arch

import "debug/elf"

// DWARF numbers of x86_64's registers (System V x86-64 psABI, "DWARF
// Register Number Mapping"): note that rdx is 1 and rcx 2, and that the
// return address column, 16, is rip.
const (
	AMD64RAX    = 0
	AMD64RDX    = 1
	AMD64RCX    = 2
	AMD64RBX    = 3
	AMD64RSI    = 4
	AMD64RDI    = 5
	AMD64RBP    = 6
	AMD64RSP    = 7
	AMD64R8     = 8
	AMD64R9     = 9
	AMD64R10    = 10
	AMD64R11    = 11
	AMD64R12    = 12
	AMD64R13    = 13
	AMD64R14    = 14
	AMD64R15    = 15
	AMD64RIP    = 16
	AMD64RFLAGS = 49
	AMD64ES     = 50
	AMD64CS     = 51
	AMD64SS     = 52
	AMD64DS     = 53
	AMD64FS     = 54
	AMD64GS     = 55
	AMD64FSBase = 58
	AMD64GSBase = 59
)

// amd64PerfDWARF maps the kernel's x86 perf register indexes
// (arch/x86/include/uapi/asm/perf_regs.h: AX 0, BX 1, CX 2, DX 3, SI 4,
// DI 5, BP 6, SP 7, IP 8, FLAGS 9, R8..R15 16..23) to DWARF numbers.
var amd64PerfDWARF = map[int]int{
	0: AMD64RAX, 1: AMD64RBX, 2: AMD64RCX, 3: AMD64RDX, 4: AMD64RSI, 5: AMD64RDI,
	6: AMD64RBP, 7: AMD64RSP, 8: AMD64RIP, 9: AMD64RFLAGS,
	16: AMD64R8, 17: AMD64R9, 18: AMD64R10, 19: AMD64R11,
	20: AMD64R12, 21: AMD64R13, 22: AMD64R14, 23: AMD64R15,
}

// amd64PerfMask: what the unwinder needs, the pc, the stack and frame
// pointers and the callee-saved registers a CFI rule may name (BX 1, BP 6,
// SP 7, IP 8, R12..R15 20..23).
const amd64PerfMask = 1<<1 | 1<<6 | 1<<7 | 1<<8 | 1<<20 | 1<<21 | 1<<22 | 1<<23

// AMD64 is x86_64.
var AMD64 = &Arch{
	Name:      "amd64",
	ELFName:   "x86_64",
	Machine:   elf.EM_X86_64,
	PtrSize:   8,
	PageSize:  4096,
	PageSizes: []uint64{4096},
	Regs: RegFile{
		PC: AMD64RIP, SP: AMD64RSP, FP: AMD64RBP, RA: AMD64RIP, TP: AMD64FSBase,
		Count: AMD64GSBase + 1,
		Names: amd64Names(),
	},
	// The syscall instruction: number in rax, arguments in rdi, rsi,
	// rdx, r10, r8, r9 (r10 where a call has rcx, which syscall
	// clobbers), result in rax (arch/x86/entry/entry_64.S).
	Syscall: Convention{Nr: AMD64RAX, Args: []int{AMD64RDI, AMD64RSI, AMD64RDX, AMD64R10, AMD64R8, AMD64R9}, Result: AMD64RAX},
	Call:    Convention{Nr: -1, Args: []int{AMD64RDI, AMD64RSI, AMD64RDX, AMD64RCX, AMD64R8, AMD64R9}, Result: AMD64RAX},
	Perf:    PerfRegs{Mask: amd64PerfMask, Order: perfOrder(amd64PerfMask, amd64PerfDWARF)},
	// struct elf_prstatus: 112 bytes of elf_prstatus_common, pr_reg (27
	// words of struct user_regs_struct), pr_fpvalid and padding: 336.
	Prstatus: PrstatusLayout{
		Size: 336, PidOff: 32, RegsOff: 112,
		Words: []int{
			AMD64R15, AMD64R14, AMD64R13, AMD64R12, AMD64RBP, AMD64RBX, AMD64R11, AMD64R10,
			AMD64R9, AMD64R8, AMD64RAX, AMD64RCX, AMD64RDX, AMD64RSI, AMD64RDI,
			-1, // orig_rax
			AMD64RIP, AMD64CS, AMD64RFLAGS, AMD64RSP, AMD64SS, AMD64FSBase, AMD64GSBase,
			AMD64DS, AMD64ES, AMD64FS, AMD64GS,
		},
	},
	// rip, rsp and fs_base in user_regs_struct.
	Words:      WordIndex{PC: 16, SP: 19, TP: 21},
	NumWords:   27,
	StackAlign: 16,
	RedZone:    128,
	syscalls:   amd64Syscalls,
}

func amd64Names() []string {
	n := make([]string, AMD64GSBase+1)
	for i, s := range []string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"} {
		n[i] = s
	}
	n[AMD64RFLAGS], n[AMD64ES], n[AMD64CS], n[AMD64SS], n[AMD64DS], n[AMD64FS], n[AMD64GS] =
		"rflags", "es", "cs", "ss", "ds", "fs", "gs"
	n[AMD64FSBase], n[AMD64GSBase] = "fs_base", "gs_base"
	return n
}

// amd64Syscalls are the syscalls arenactl issues, traces or recognises,
// by arch/x86/entry/syscalls/syscall_64.tbl.
var amd64Syscalls = map[string]int{
	"read": 0, "open": 2, "close": 3, "poll": 7, "mmap": 9, "mprotect": 10, "munmap": 11,
	"brk": 12, "rt_sigprocmask": 14, "rt_sigreturn": 15, "ioctl": 16, "pread64": 17,
	"readv": 19, "select": 23, "mremap": 25, "madvise": 28, "pause": 34,
	"nanosleep": 35, "accept": 43, "recvfrom": 45, "recvmsg": 47, "clone": 56,
	"exit": 60, "wait4": 61, "semget": 64, "semop": 65, "msgsnd": 69, "msgrcv": 70,
	"rt_sigtimedwait": 128, "rt_sigsuspend": 130, "prctl": 157, "futex": 202,
	"io_getevents": 208, "restart_syscall": 219, "semtimedop": 220,
	"clock_nanosleep": 230, "exit_group": 231, "epoll_wait": 232, "waitid": 247,
	"openat": 257, "pselect6": 270, "ppoll": 271, "epoll_pwait": 281, "accept4": 288,
	"recvmmsg": 299, "io_uring_enter": 426, "epoll_pwait2": 441,
}
