package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/arenactl/arenactl/internal/maps"
	"golang.org/x/sys/unix"
)

// Before the call site exists (while arenactl creates it) and after it is
// gone (while arenactl removes it), a borrowed thread cannot return into our
// routine. For those few syscalls it returns instead into glibc's own signal
// trampoline (__restore_rt: mov $15,%rax; syscall), with a signal frame built
// below the red zone: rt_sigreturn then puts back every register, the flags,
// the extended state and the signal mask, all from that frame, with no help
// from arenactl.
//
// rt_sigreturn also cancels a pending restart_syscall (the kernel sets
// restart_block.fn to return EINTR), so the frame of a thread parked in
// nanosleep, clock_nanosleep, poll or futex with a timeout re-issues the
// original syscall instead: the sleep or wait starts again with its original
// arguments (a later wake-up, never a spurious error). This only matters if
// arenactl dies during those syscalls; while it lives, or once the call site
// exists, the thread is restored exactly.

// Layout of the kernel's struct ucontext (x86_64): uc_flags, uc_link,
// uc_stack (24 bytes), uc_mcontext (struct sigcontext, 256 bytes), then the
// kernel's 8-byte sigset.
const (
	ucMcontext = 40
	ucSigmask  = 296
	ucSize     = 304

	ucFlags = 1 | 2 | 4 // UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS, as the kernel sets them

	fpXstateMagic1 = 0x46505853
	fpXstateMagic2 = 0x46505845

	sysRtSigreturn = 15
)

// restoreRT is the body of glibc's __restore_rt.
var restoreRT = []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}

// sigFrame lays out a signal frame that restores r, the mask and xs when
// rt_sigreturn runs with rsp = sp+8. It returns sp (where the return
// address slot is, sp%16 == 8 as at a function's entry) and the bytes to
// write from sp up.
func sigFrame(top uint64, r *Regs, mask uint64, xs []byte) (sp uint64, img []byte, err error) {
	if len(xs) < 576 {
		return 0, nil, errors.New("extended state too short for a signal frame")
	}
	xs = trimXState(xs)
	fp := (top - uint64(len(xs)) - 4) &^ 63
	uc := fp - ucSize // fp is 64-aligned and ucSize a multiple of 16
	sp = uc - 8
	img = make([]byte, top-sp)
	le := binary.LittleEndian
	u := img[uc-sp:]
	le.PutUint64(u[0:], ucFlags)
	// uc_stack: an invalid ss_flags makes the kernel's restore_altstack a
	// no-op (EINVAL, ignored), so the thread's sigaltstack stays as it is.
	le.PutUint32(u[16+8:], 0x7)
	mc := u[ucMcontext:]
	for i, v := range []uint64{r.R8, r.R9, r.R10, r.R11, r.R12, r.R13, r.R14, r.R15,
		r.Rdi, r.Rsi, r.Rbp, r.Rbx, r.Rdx, r.Rax, r.Rcx, r.Rsp, r.Rip, r.Eflags} {
		le.PutUint64(mc[8*i:], v)
	}
	le.PutUint16(mc[144:], uint16(r.Cs))
	le.PutUint16(mc[150:], uint16(r.Ss))
	le.PutUint64(mc[184:], fp)
	le.PutUint64(u[ucSigmask:], mask)

	f := img[fp-sp:]
	copy(f, xs)
	// sw_reserved: where ptrace put XCR0, a signal frame carries
	// struct _fpx_sw_bytes, which the kernel checks before xrstor.
	xcr0 := le.Uint64(xs[464:])
	for i := 464; i < 512; i++ {
		f[i] = 0
	}
	le.PutUint32(f[464:], fpXstateMagic1)
	le.PutUint32(f[468:], uint32(len(xs)+4))
	le.PutUint64(f[472:], xcr0)
	le.PutUint32(f[480:], uint32(len(xs)))
	le.PutUint32(f[len(xs):], fpXstateMagic2)
	return sp, img, nil
}

// trimXState drops unused AMX tile state: the kernel refuses a frame larger
// than the thread's own buffer, which has no room for tiles it never used.
func trimXState(xs []byte) []byte {
	const tileCfgOff = 2752
	if len(xs) > tileCfgOff {
		xcr0 := binary.LittleEndian.Uint64(xs[464:])
		bv := binary.LittleEndian.Uint64(xs[512:])
		if xcr0&(3<<17) != 0 && bv&(3<<17) == 0 {
			out := append([]byte(nil), xs[:tileCfgOff]...)
			binary.LittleEndian.PutUint64(out[464:], xcr0&^(3<<17))
			return out
		}
	}
	return xs
}

// FindTrampoline looks for glibc's __restore_rt in the executable mappings
// of the process's libc (or, for a static executable, of any file). Callers
// that already know it use SetTrampoline instead.
//
// The code is read from the mapped file where it is still the one mapped:
// read through the process's memory, every page of libc's text not yet
// touched would be mapped into it, and its RSS would grow by the pages
// arenactl read.
func FindTrampoline(p *Process) (uint64, error) {
	ms, err := p.mappings()
	if err != nil {
		return 0, err
	}
	var libc, other []maps.Mapping
	for _, m := range ms {
		if !strings.Contains(m.Perms, "x") || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		if strings.Contains(path.Base(m.Path), "libc") {
			libc = append(libc, m)
		} else {
			other = append(other, m)
		}
	}
	for _, r := range append(libc, other...) {
		buf := make([]byte, r.Size())
		n, ok := readMappedFile(p.Dir(), r.Path, r.Dev, r.Inode, r.Offset, buf)
		if !ok {
			n, _ = p.ReadAt(buf, r.Start)
		}
		if i := bytes.Index(buf[:n], restoreRT); i >= 0 {
			// What a thread will execute is checked in memory (one
			// page): the text may have been patched since it was
			// mapped.
			at := r.Start + uint64(i)
			got := make([]byte, len(restoreRT))
			if m, _ := p.ReadAt(got, at); m == len(got) && bytes.Equal(got, restoreRT) {
				return at, nil
			}
		}
	}
	return 0, fmt.Errorf("process %d: no signal trampoline (__restore_rt) in its code", p.Pid)
}

// readMappedFile reads a mapping's bytes from its file, seen from the
// root of the process whose /proc directory is dir, if that is still the
// file mapped (same device and inode, dev as /proc/PID/maps prints it).
func readMappedFile(dir, name, dev string, inode, off uint64, buf []byte) (int, bool) {
	f, err := os.Open(dir + "/root" + name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != inode ||
		fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev)) != dev {
		return 0, false
	}
	n, err := f.ReadAt(buf, int64(off))
	if err != nil && n == 0 {
		return 0, false
	}
	return n, true
}
