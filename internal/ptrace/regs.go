package ptrace

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Regs are the general-purpose registers of a stopped thread (x86_64).
type Regs = unix.PtraceRegs

// xstateMax bounds the NT_X86_XSTATE buffer; the kernel trims the iovec to
// the real size (about 2.7 KiB with AVX-512, 11 KiB with AMX).
const xstateMax = 16 << 10

func getXState(tid int) ([]byte, error) {
	buf := make([]byte, xstateMax)
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	if err := ptraceRaw(unix.PTRACE_GETREGSET, tid, unix.NT_X86_XSTATE, uintptr(unsafe.Pointer(&iov))); err != nil {
		return nil, err
	}
	return buf[:iov.Len], nil
}

func setXState(tid int, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	return ptraceRaw(unix.PTRACE_SETREGSET, tid, unix.NT_X86_XSTATE, uintptr(unsafe.Pointer(&iov)))
}

// siginfo is the kernel's 128-byte siginfo_t, kept whole so that a signal we
// had to hold back can be queued again with its payload.
type siginfo [128]byte

func (s *siginfo) signo() int32 { return *(*int32)(unsafe.Pointer(&s[0])) }
func (s *siginfo) code() int32  { return *(*int32)(unsafe.Pointer(&s[8])) }

// pid is si_pid for signals sent by kill/tgkill/sigqueue.
func (s *siginfo) pid() int32 { return *(*int32)(unsafe.Pointer(&s[16])) }

// addr is si_addr for faults.
func (s *siginfo) addr() uint64 { return *(*uint64)(unsafe.Pointer(&s[16])) }

func getSiginfo(tid int) (siginfo, error) {
	var si siginfo
	err := ptraceRaw(unix.PTRACE_GETSIGINFO, tid, 0, uintptr(unsafe.Pointer(&si[0])))
	return si, err
}

func ptraceRaw(req, tid int, addr, data uintptr) error {
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, uintptr(req), uintptr(tid), addr, data, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// Kernel return values of a syscall interrupted by a stop; the syscall will
// be restarted when the thread resumes with these registers.
const (
	errRestartSys        = 512
	errRestartNoIntr     = 513
	errRestartNoHand     = 514
	errRestartRestartBlk = 516
)

// InSyscall reports whether the registers belong to a thread that was
// blocked in a syscall when it stopped, and which one.
func InSyscall(r *Regs) (nr int64, ok bool) {
	nr = int64(r.Orig_rax)
	if nr < 0 {
		return -1, false
	}
	switch -int64(r.Rax) {
	case errRestartSys, errRestartNoIntr, errRestartNoHand, errRestartRestartBlk:
		return nr, true
	}
	return nr, false
}

const (
	ptraceGetSigmask       = 0x420a
	ptraceGetSyscallInfo   = 0x420e
	syscallInfoEntry       = 1
	syscallInfoExit        = 2
	errRestartRestartBlock = errRestartRestartBlk
	sysRestartSyscall      = 219
)

// getSigmask reads the thread's blocked-signal mask (kernel sigset, 64 bits).
func getSigmask(tid int) (uint64, error) {
	var m uint64
	err := ptraceRaw(ptraceGetSigmask, tid, 8, uintptr(unsafe.Pointer(&m)))
	return m, err
}

// syscallOp tells a syscall-entry-stop from a syscall-exit-stop.
func syscallOp(tid int) (byte, error) {
	var info [88]byte
	if err := ptraceRaw(ptraceGetSyscallInfo, tid, uintptr(len(info)), uintptr(unsafe.Pointer(&info[0]))); err != nil {
		return 0, err
	}
	return info[0], nil
}
