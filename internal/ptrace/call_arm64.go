package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/errkind"
)

// The call on aarch64 follows call_amd64.go's design: the thread's own
// state is taken (its syscall restarted and entered again if it was
// blocked in one), a signal frame goes on its stack, the call site is made
// by syscalls that return into the vDSO's signal trampoline, and every
// call returns into the site's routine (its link register is the entry),
// which restores the thread by itself if arenactl is gone. What differs is
// said where it does: the syscall number is NT_ARM_SYSTEM_CALL's, x7 is
// lent by syscall stops, and the routine restores through rt_sigreturn.

// pageSize is the call site's granule: its header, code and frame parts are
// each a multiple of it, 64 KiB, the largest page aarch64 kernels use, so
// that the one layout (internal/arch/site) works under 4, 16 and 64 KiB
// pages alike; only touched pages take memory.
const pageSize = site.Arm64Page

// stackGap is left free below the thread's sp before the signal frame
// (Linux's aarch64 ABI has no red zone; the gap is cheap insurance).
const stackGap = 256

// ErrPageSize: the kernel's pages do not divide the call site's granule.
var ErrPageSize = fmt.Errorf("calls into processes are made only under 4, 16 or 64 KiB pages on aarch64: %w", errkind.ErrArch)

// ErrLiveSVE: the thread has SVE state the call would lose.
var ErrLiveSVE = errors.New("the thread has live SVE state, which a call through a signal frame without an SVE record would lose")

// arm takes the thread's own state, puts a signal frame on its stack and
// makes the call site. Runs on the tracer.
func (th *Thread) arm() error {
	if ps := os.Getpagesize(); ps <= 0 || pageSize%ps != 0 {
		return fmt.Errorf("thread %d: %w", th.Tid, ErrPageSize)
	}
	if th.tramp == 0 {
		a, err := FindTrampoline(th.p)
		if err != nil {
			return fmt.Errorf("%w, so a call could not restore itself", err)
		}
		th.tramp = a
	}
	if err := th.p.SiteHolding(th.Tid, th.saved); err != nil {
		return err
	}
	code := make([]byte, len(sigreturnCode))
	if _, err := th.p.ReadAt(code, th.tramp); err != nil || !bytes.Equal(code, sigreturnCode) {
		return fmt.Errorf("thread %d: no signal trampoline at %#x", th.Tid, th.tramp)
	}
	if liveSVE(th.Tid) {
		return fmt.Errorf("thread %d: %w", th.Tid, ErrLiveSVE)
	}
	if err := unix.PtraceSetOptions(th.Tid, traceOptions); err != nil {
		return th.gone(err)
	}
	th.written = true
	in := &injector{exact: *th.saved, at: atOther}
	in.fallback = in.exact
	if th.atSVC(th.saved) {
		// Blocked in a syscall (pc already rewound to the svc, x0
		// orig_x0 again: see InSyscall), or about to issue one. Let it
		// issue it and stop it at the entry: there its signal mask is
		// the real one (ppoll, pselect6, epoll_pwait and rt_sigsuspend
		// run with a temporary mask, put back on their way out), and
		// the syscall it runs is what the kernel says, restart_syscall
		// for one interrupted with -ERESTART_RESTARTBLOCK (do_signal's
		// setup_restart_syscall sets x8 as it resumes).
		if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
			return th.gone(err)
		}
		e, err := th.waitSyscall(syscallInfoEntry)
		if err != nil {
			return err
		}
		nr, err := getSyscallNo(th.Tid)
		if err != nil {
			return th.gone(err)
		}
		if e.Pc != th.saved.Pc+4 || nr < 0 {
			return fmt.Errorf("thread %d: the syscall at %#x was not issued by the svc at %#x", th.Tid, e.Pc, th.saved.Pc)
		}
		in.at = atEntry
		in.exact = e
		in.exact.Pc = th.saved.Pc
		in.exact.Regs[7] = th.saved.Regs[7] // lent by the stop (setResume)
		in.exact.Regs[8] = uint64(nr)
		in.fallback = in.exact
		if nr == sysRestartSyscall {
			// rt_sigreturn cancels the restart block: the frame
			// issues the original syscall again.
			in.fallback.Regs[8] = th.saved.Regs[8]
			in.fallback.Regs[0] = th.saved.Regs[0]
		}
	}
	mask, err := getSigmask(th.Tid)
	if err != nil {
		return th.gone(err)
	}
	fp, err := getXState(th.Tid)
	if err != nil {
		return fmt.Errorf("thread %d: reading the FP/SIMD registers: %w", th.Tid, err)
	}
	in.xs, th.xstate = fp, fp
	th.inj = in
	frame, err := sigFrame(&in.fallback, mask, fp)
	if err != nil {
		return err
	}
	sp := (in.exact.Sp - stackGap - uint64(len(frame))) &^ 15
	if _, err := th.p.WriteAt(frame, sp); err != nil {
		return fmt.Errorf("writing a signal frame on thread %d's stack: %w", th.Tid, err)
	}
	in.sp = sp
	if in.at != atEntry {
		if err := th.enterTrampoline(); err != nil {
			return err
		}
	}
	size := uint64(frameOff) + (uint64(len(frame))+pageSize-1)&^(pageSize-1)
	base, err := th.trampSyscall(unix.SYS_MMAP, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err != nil {
		return err
	}
	if base >= ^uint64(pageSize-1) { // -errno
		return fmt.Errorf("thread %d: mmap of the call site failed: %w", th.Tid, unix.Errno(-base))
	}
	in.base, in.size = base, size
	pg := site.ARM64
	text := pg.Text
	in.entry, in.restore = base+codeOff, base+codeOff+pg.Restore
	in.image, in.raw = base+codeOff+pg.Image, base+codeOff+pg.Raw
	in.lock, in.lockEnd, in.lockWait = base+codeOff+pg.Lock, base+codeOff+pg.LockEnd, base+codeOff+pg.LockWait
	if len(text) > pageSize {
		return errors.New("ptrace: the call site's code does not fit its page")
	}
	page0 := sitePage0(size, th.Tid, &in.exact, sp)
	for _, w := range []struct {
		b   []byte
		off uint64
	}{{page0, 0}, {text, codeOff}, {frame, frameOff}} {
		if _, err := th.p.WriteAt(w.b, base+w.off); err != nil {
			return fmt.Errorf("writing the call site: %w", err)
		}
	}
	if err := th.enterTrampoline(); err != nil {
		return err
	}
	rv, err := th.trampSyscall(unix.SYS_MPROTECT, base+codeOff, pageSize, unix.PROT_READ|unix.PROT_EXEC)
	if err != nil {
		return err
	}
	if rv != 0 {
		return fmt.Errorf("thread %d: mprotect of the call site failed: %w", th.Tid, unix.Errno(-rv))
	}
	return th.park()
}

// park points the thread at the routine's restore code: resumed without us,
// it puts itself back (rt_sigreturn from the site's frame).
func (th *Thread) park() error {
	in := th.inj
	r := in.exact
	r.Pc, r.Sp = in.restore, in.sp
	if err := th.setResume(&r); err != nil {
		return th.gone(err)
	}
	in.at = atOther
	return nil
}

// enterTrampoline runs the thread into the vDSO's rt_sigreturn and stops
// it as it enters the syscall, which trampSyscall then replaces. If we die
// meanwhile, rt_sigreturn restores the thread from the frame at sp.
func (th *Thread) enterTrampoline() error {
	in := th.inj
	r := in.exact
	r.Pc, r.Sp = th.tramp, in.sp
	if err := th.setResume(&r); err != nil {
		return th.gone(err)
	}
	if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
		return th.gone(err)
	}
	e, err := th.waitSyscall(syscallInfoEntry)
	if err != nil {
		return err
	}
	nr, err := getSyscallNo(th.Tid)
	if err != nil {
		return th.gone(err)
	}
	if nr != sysRtSigreturn || e.Pc != th.tramp+uint64(len(sigreturnCode)) {
		return fmt.Errorf("thread %d: expected rt_sigreturn at %#x, stopped in syscall %d at %#x", th.Tid, th.tramp, nr, e.Pc)
	}
	return nil
}

// trampSyscall turns the syscall the thread is entering into nr(args),
// returning into the trampoline, and waits for its exit. The number is
// changed through NT_ARM_SYSTEM_CALL: the kernel runs syscallno, not x8.
func (th *Thread) trampSyscall(nr uint64, args ...uint64) (uint64, error) {
	in := th.inj
	if in.at != atEntry {
		return 0, errors.New("ptrace: trampSyscall not at a syscall entry")
	}
	var r Regs
	if err := getRegs(th.Tid, &r); err != nil {
		return 0, th.gone(err)
	}
	r.Regs[7] = in.exact.Regs[7]
	for i := range min(len(args), 6) {
		r.Regs[i] = args[i]
	}
	r.Pc, r.Sp = th.tramp, in.sp
	if err := setRegs(th.Tid, &r); err != nil {
		return 0, th.gone(err)
	}
	if err := setSyscallNo(th.Tid, int64(nr)); err != nil {
		return 0, th.gone(err)
	}
	if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
		return 0, th.gone(err)
	}
	x, err := th.waitSyscall(syscallInfoExit)
	if err != nil {
		return 0, err
	}
	return x.Regs[0], nil
}

// call starts fn returning into the routine and runs it to the marker.
func (th *Thread) call(lim CallLimits, fn uint64, args []uint64) (uint64, error) {
	in := th.inj
	in.seq++
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], in.seq)
	if _, err := th.p.WriteAt(w[:], in.base+hdrPending); err != nil {
		return 0, err
	}
	r := in.exact
	r.Sp = in.sp // 16-byte aligned, as AAPCS64 wants; the frame is above it
	r.Pc = fn
	r.Regs[30] = in.entry // the link register: the call returns into the routine
	// PSTATE.BTYPE (bits 10-11) 0: whatever branch the thread stopped
	// after, the callee's first instruction is entered as from no branch.
	r.Pstate &^= 3 << 10
	for i, a := range args {
		r.Regs[i] = a
	}
	if err := th.setResume(&r); err != nil {
		return 0, th.gone(err)
	}
	in.at = atOther
	return th.run(lim)
}
