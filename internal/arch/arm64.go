package arch

import "debug/elf"

// DWARF numbers of aarch64's registers (AADWARF64, section 4.1: x0..x30
// 0..30, sp 31, pc 32, RA_SIGN_STATE 34, TPIDR_EL0 36). x29 is the frame
// pointer and x30 the link register, the return address column of its CFI.
const (
	ARM64X0       = 0
	ARM64X8       = 8
	ARM64X19      = 19
	ARM64FP       = 29
	ARM64LR       = 30
	ARM64SP       = 31
	ARM64PC       = 32
	ARM64TPIDREL0 = 36
)

// arm64PerfDWARF maps the kernel's arm64 perf register indexes
// (arch/arm64/include/uapi/asm/perf_regs.h: X0..X28 0..28, X29 29, LR 30,
// SP 31, PC 32) to DWARF numbers: the same numbers.
var arm64PerfDWARF = func() map[int]int {
	m := map[int]int{}
	for i := 0; i <= ARM64PC; i++ {
		m[i] = i
	}
	return m
}()

// arm64PerfMask: what the unwinder needs, the callee-saved x19..x28
// (AAPCS64), the frame pointer, the link register (a leaf function's
// return address is still there), sp and pc.
const arm64PerfMask = (1<<(ARM64PC+1) - 1) &^ (1<<ARM64X19 - 1)

// ARM64 is aarch64.
var ARM64 = &Arch{
	Name:    "arm64",
	ELFName: "aarch64",
	Machine: elf.EM_AARCH64,
	PtrSize: 8,
	// The kernel is built with one of three granules
	// (arch/arm64/Kconfig, ARM64_4K_PAGES, ARM64_16K_PAGES,
	// ARM64_64K_PAGES): Debian's and most distributions' use 4 KiB, some
	// (RHEL's kernel-64k, Apple silicon's Asahi 16 KiB) others.
	PageSize:  4096,
	PageSizes: []uint64{4096, 16384, 65536},
	Regs: RegFile{
		PC: ARM64PC, SP: ARM64SP, FP: ARM64FP, RA: ARM64LR, TP: ARM64TPIDREL0,
		Count: ARM64TPIDREL0 + 1,
		Names: arm64Names(),
	},
	// svc #0: number in x8, arguments in x0..x5, result in x0
	// (arch/arm64/kernel/syscall.c, invoke_syscall). The first argument's
	// register is also the result's, so a syscall stop's x0 is the
	// argument at entry and the result at exit; the kernel keeps the
	// argument in orig_x0, which NT_PRSTATUS does not show.
	Syscall: Convention{Nr: ARM64X8, Args: []int{0, 1, 2, 3, 4, 5}, Result: ARM64X0},
	Call:    Convention{Nr: -1, Args: []int{0, 1, 2, 3, 4, 5, 6, 7}, Result: ARM64X0},
	Perf:    PerfRegs{Mask: arm64PerfMask, Order: perfOrder(arm64PerfMask, arm64PerfDWARF)},
	// struct elf_prstatus: 112 bytes of elf_prstatus_common, pr_reg (34
	// words of struct user_pt_regs: x0..x30, sp, pc, pstate), pr_fpvalid
	// and padding: 392. The thread pointer is not there but in NT_ARM_TLS.
	Prstatus: PrstatusLayout{
		Size: 392, PidOff: 32, RegsOff: 112,
		Words: func() []int {
			w := make([]int, 34)
			for i := range 33 {
				w[i] = i // x0..x30, sp 31, pc 32: DWARF's numbers
			}
			w[33] = -1 // pstate
			return w
		}(),
	},
	TLSNote: 0x401, // NT_ARM_TLS (include/uapi/linux/elf.h)
	// pc and sp in user_pt_regs; tpidr_el0 after its 34 words.
	Words:    WordIndex{PC: 32, SP: 31, TP: 34},
	NumWords: 35,
	// AAPCS64: sp 16-byte aligned at every public interface; Linux's arm64
	// ABI has no red zone.
	StackAlign: 16,
	RedZone:    0,
	// sysdeps/aarch64/nptl/tls.h (glibc 2.36): TLS_DTV_AT_TP, tcbhead_t
	// is { dtv_t *dtv; void *private; }, TLS_PRE_TCB_SIZE is struct
	// pthread's size.
	TLSAbove: true,
	// A user address has 48 bits (arch/arm64/Kconfig ARM64_VA_BITS; a
	// 52-bit kernel gives a process more only when its mmap asks for an
	// address above 2^48). Above them a return address signed with
	// pointer authentication (PAC) carries its code, and the top byte of a
	// data pointer is ignored (TBI), where memory tagging (MTE) keeps the
	// tag (Documentation/arch/arm64/tagged-pointers.rst).
	vaBits:   48,
	tagByte:  true,
	syscalls: arm64Syscalls,
}

func arm64Names() []string {
	n := make([]string, ARM64TPIDREL0+1)
	for i := range 29 {
		n[i] = "x" + itoa(i)
	}
	n[ARM64FP], n[ARM64LR], n[ARM64SP], n[ARM64PC], n[ARM64TPIDREL0] = "x29", "x30", "sp", "pc", "tpidr_el0"
	return n
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// arm64Syscalls are the syscalls arenactl issues, traces or recognises, by
// include/uapi/asm-generic/unistd.h, the table arm64 uses. It has no open
// (openat), no poll or select (ppoll, pselect6), no pause, no epoll_wait
// (epoll_pwait); and clone takes its arguments in the order flags, stack,
// parent_tid, tls, child_tid (CONFIG_CLONE_BACKWARDS), not x86_64's.
var arm64Syscalls = map[string]int{
	"io_getevents": 4, "epoll_pwait": 22, "ioctl": 29, "openat": 56, "close": 57,
	"read": 63, "readv": 65, "pread64": 67, "pselect6": 72, "ppoll": 73,
	"exit": 93, "exit_group": 94, "waitid": 95, "futex": 98, "nanosleep": 101,
	"clock_nanosleep": 115, "restart_syscall": 128, "rt_sigsuspend": 133,
	"rt_sigprocmask": 135, "rt_sigtimedwait": 137, "rt_sigreturn": 139,
	"prctl": 167, "msgrcv": 188, "msgsnd": 189, "semget": 190, "semtimedop": 192,
	"semop": 193, "accept": 202, "recvfrom": 207, "recvmsg": 212, "brk": 214,
	"munmap": 215, "mremap": 216, "clone": 220, "mmap": 222, "mprotect": 226,
	"madvise": 233, "accept4": 242, "recvmmsg": 243, "wait4": 260,
	"io_uring_enter": 426, "epoll_pwait2": 441,
}
