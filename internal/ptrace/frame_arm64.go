package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/arch"
)

// On aarch64 every way back to the thread's own state without arenactl is
// rt_sigreturn from a signal frame we write: while the call site is made or
// removed, from a frame on the thread's stack, through the vDSO's signal
// trampoline (__kernel_rt_sigreturn: mov x8, #139; svc #0); once the site
// exists, from the same frame in the site (its restore routine,
// internal/arch/site's site_arm64.S). rt_sigreturn (arch/arm64/kernel/
// signal.c, Linux 6.1) puts back x0..x30, sp, pc, pstate, the signal mask
// and the FP/SIMD registers from the frame, all at once.
//
// Like x86_64's (frame_amd64.go), rt_sigreturn cancels a pending
// restart_syscall, so the frame of a thread parked in a sleep with a
// timeout re-issues the original syscall instead (a later wake-up, never a
// spurious error); while arenactl lives the thread gets its exact
// registers back through ptrace instead.
//
// SVE: the frame has the FP/SIMD record and no SVE record. A call is made
// only in a thread with no live SVE state (liveSVE): a thread stopped in a
// syscall has none, since the syscall discarded it (Documentation/arch/
// arm64/sve.rst, "System call behaviour": the bits of Z0..Z31 above the V
// registers, P0..P15 and FFR become zero at a syscall), and rt_sigreturn
// of a frame without SVE record leaves the thread without live SVE state
// (restore_fpsimd_context clears TIF_SVE) with its vector length kept.

// The layout of struct rt_sigframe (arch/arm64/kernel/signal.c): a
// 128-byte siginfo, then struct ucontext (arch/arm64/include/uapi/asm/
// ucontext.h): uc_flags, uc_link, uc_stack (24 bytes), uc_sigmask (8 bytes
// and 120 unused: glibc's sigset is 1024 bits), then uc_mcontext at 16
// bytes' alignment: struct sigcontext (arch/arm64/include/uapi/asm/
// sigcontext.h) with fault_address, regs[31], sp, pc, pstate and 4096
// bytes of records (struct _aarch64_ctx: magic, size), 16-byte aligned, a
// zero record last.
const (
	sfUC        = 128
	sfStack     = sfUC + 16
	sfSigmask   = sfUC + 40
	sfMcontext  = sfUC + 176
	sfRegs      = sfMcontext + 8
	sfSP        = sfMcontext + 8 + 31*8
	sfPC        = sfSP + 8
	sfPstate    = sfPC + 8
	sfReserved  = sfMcontext + 288
	sfSize      = sfReserved + 4096
	fpsimdMagic = 0x46508001
	fpsimdSize  = 528 // struct fpsimd_context: head, fpsr, fpcr, vregs[32]

	sysRtSigreturn = 139
)

// sigreturnCode is the vDSO's __kernel_rt_sigreturn
// (arch/arm64/kernel/vdso/sigreturn.S): mov x8, #139; svc #0.
var sigreturnCode = []byte{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}

// sigFrame lays out a struct rt_sigframe that restores r, the mask and fp
// (NT_PRFPREG's struct user_fpsimd_state: vregs, fpsr, fpcr) when
// rt_sigreturn runs with sp at it. Nothing in it is an address of the
// frame's own, so the same bytes serve on the stack and in the site.
func sigFrame(r *Regs, mask uint64, fp []byte) ([]byte, error) {
	if len(fp) < 520 {
		return nil, errors.New("FP/SIMD state too short for a signal frame")
	}
	img := make([]byte, sfSize)
	le := binary.LittleEndian
	// uc_stack: an invalid ss_flags makes the kernel's restore_altstack a
	// no-op (EINVAL, ignored), so the thread's sigaltstack stays as it is.
	le.PutUint32(img[sfStack+8:], 0x7)
	le.PutUint64(img[sfSigmask:], mask)
	for i := range 31 {
		le.PutUint64(img[sfRegs+8*i:], r.Regs[i])
	}
	le.PutUint64(img[sfSP:], r.Sp)
	le.PutUint64(img[sfPC:], r.Pc)
	le.PutUint64(img[sfPstate:], r.Pstate)
	f := img[sfReserved:]
	le.PutUint32(f[0:], fpsimdMagic)
	le.PutUint32(f[4:], fpsimdSize)
	copy(f[8:16], fp[512:520]) // fpsr, fpcr
	copy(f[16:16+512], fp[:512])
	// the zero record that ends them is already there, at fpsimdSize
	return img, nil
}

// FindTrampoline looks for the signal trampoline in the process's vDSO,
// where the kernel's own signal delivery returns (setup_return, when the
// handler has no SA_RESTORER, which glibc on aarch64 does not set).
func FindTrampoline(p *Process) (uint64, error) {
	ms, err := p.mappings()
	if err != nil {
		return 0, err
	}
	for _, m := range ms {
		if m.Path != "[vdso]" || m.Size() > 64<<10 {
			continue
		}
		buf := make([]byte, m.Size())
		n, _ := p.ReadAt(buf, m.Start)
		for off := 0; off+len(sigreturnCode) <= n; off += 4 {
			if bytes.Equal(buf[off:off+len(sigreturnCode)], sigreturnCode) {
				return m.Start + uint64(off), nil
			}
		}
	}
	return 0, fmt.Errorf("process %d: no signal trampoline (__kernel_rt_sigreturn) in its vDSO", p.Pid)
}

var sysRestartSyscall = int64(arch.ARM64.MustSys("restart_syscall"))
