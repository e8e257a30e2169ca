package ptrace

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// getRegs reads a stopped thread's general registers through
// PTRACE_GETREGSET with NT_PRSTATUS, which every architecture has (unlike
// PTRACE_GETREGS): Regs is the machine's elf_gregset_t.
func getRegs(tid int, r *Regs) error {
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(r))}
	iov.SetLen(int(unsafe.Sizeof(*r)))
	if err := ptraceRaw(unix.PTRACE_GETREGSET, tid, ntPrstatus, uintptr(unsafe.Pointer(&iov))); err != nil {
		return err
	}
	if iov.Len != uint64(unsafe.Sizeof(*r)) {
		return fmt.Errorf("thread %d: NT_PRSTATUS gave %d bytes of registers, not %d", tid, iov.Len, unsafe.Sizeof(*r))
	}
	return nil
}

// setRegs writes them back the same way.
func setRegs(tid int, r *Regs) error {
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(r))}
	iov.SetLen(int(unsafe.Sizeof(*r)))
	return ptraceRaw(unix.PTRACE_SETREGSET, tid, ntPrstatus, uintptr(unsafe.Pointer(&iov)))
}

const ntPrstatus = 1 // NT_PRSTATUS (include/uapi/linux/elf.h)

// getRegset reads a regset of at most max bytes.
func getRegset(tid int, typ uintptr, max int) ([]byte, error) {
	buf := make([]byte, max)
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	if err := ptraceRaw(unix.PTRACE_GETREGSET, tid, typ, uintptr(unsafe.Pointer(&iov))); err != nil {
		return nil, err
	}
	return buf[:iov.Len], nil
}

// setRegset writes one back.
func setRegset(tid int, typ uintptr, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	return ptraceRaw(unix.PTRACE_SETREGSET, tid, typ, uintptr(unsafe.Pointer(&iov)))
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

const (
	ptraceGetSigmask       = 0x420a
	ptraceGetSyscallInfo   = 0x420e
	syscallInfoEntry       = 1
	syscallInfoExit        = 2
	errRestartRestartBlock = errRestartRestartBlk
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
