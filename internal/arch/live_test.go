package arch_test

import (
	"os/exec"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/arch"
)

// The host kernel's NT_PRSTATUS regset is as long as the layout says, and
// decodes to the stack pointer the thread has (a stopped sleep's sp lies in
// its [stack] mapping; here only that it is non-zero and aligned).
func TestPrstatusRegsetLength(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	if err := unix.PtraceSeize(pid); err != nil {
		t.Skipf("PTRACE_SEIZE: %v", err)
	}
	if err := unix.PtraceInterrupt(pid); err != nil {
		t.Fatal(err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		t.Fatal(err)
	}
	defer unix.PtraceDetach(pid)
	a := arch.Host()
	words := make([]uint64, 64)
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&words[0]))}
	iov.SetLen(len(words) * 8)
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(pid), uintptr(ntPrstatus), uintptr(unsafe.Pointer(&iov)), 0, 0); e != 0 {
		t.Fatalf("PTRACE_GETREGSET: %v", e)
	}
	if int(iov.Len) != 8*len(a.Prstatus.Words) {
		t.Fatalf("the kernel's NT_PRSTATUS regset is %d bytes; the layout says %d words", iov.Len, len(a.Prstatus.Words))
	}
	r := a.FromPrstatus(words[:iov.Len/8])
	sp, _ := r.Get(a.Regs.SP)
	pc, _ := r.Get(a.Regs.PC)
	if sp == 0 || sp%8 != 0 || pc == 0 {
		t.Errorf("sp %#x pc %#x", sp, pc)
	}
}

const ntPrstatus = 1
