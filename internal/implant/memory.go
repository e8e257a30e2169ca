package implant

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Syscaller issues a raw syscall in a stopped thread of the target and
// returns its raw result (-errno on failure): ptrace.Thread.RawSyscall
// with its call limits bound (live.FrozenCaller). Only syscalls that take
// no lock a stopped thread could hold go through it, which mmap, mprotect
// and munmap are.
type Syscaller interface {
	RawSyscall(nr uint64, args ...uint64) (uint64, error)
}

// errno is the failure a raw result (-errno) carries.
func errno(op string, rv uint64) error { return fmt.Errorf("%s: %w", op, unix.Errno(-rv)) }

// Map places size bytes of private anonymous memory in the target, with
// protection prot (unix.PROT_*), and returns its address.
func Map(sc Syscaller, size uint64, prot uint64) (uint64, error) {
	addr, err := sc.RawSyscall(unix.SYS_MMAP, 0, size, prot, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0))
	if err != nil {
		return 0, err
	}
	if addr >= ^uint64(4095) { // -4095..-1
		return 0, errno("mmap", addr)
	}
	return addr, nil
}

// Protect changes the protection of [addr, addr+size) in the target.
func Protect(sc Syscaller, addr, size, prot uint64) error {
	rv, err := sc.RawSyscall(unix.SYS_MPROTECT, addr, size, prot)
	if err != nil {
		return err
	}
	if rv != 0 {
		return errno("mprotect", rv)
	}
	return nil
}

// Unmap removes [addr, addr+size) from the target.
func Unmap(sc Syscaller, addr, size uint64) error {
	rv, err := sc.RawSyscall(unix.SYS_MUNMAP, addr, size)
	if err != nil {
		return err
	}
	if rv != 0 {
		return errno("munmap", rv)
	}
	return nil
}
