package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/arch/site"
)

// redZone is the x86_64 SysV area below rsp that leaf code may use without
// moving rsp; everything we put on the thread's stack goes below it.
const redZone = 128

const pageSize = 4096

// arm takes the thread's own state, puts a signal frame on its stack and
// makes the call site. Runs on the tracer.
func (th *Thread) arm() error {
	if th.tramp == 0 {
		a, err := FindTrampoline(th.p)
		if err != nil {
			return fmt.Errorf("%w, so a call could not restore itself", err)
		}
		th.tramp = a
	}
	// A thread still in an earlier run's call site (at its gate, or with a
	// call of that run yet to return) is not in its own state: its state
	// here would make the new site restore it into the old one. The caller
	// chooses threads so that this does not happen; this is the last guard.
	if err := th.p.SiteHolding(th.Tid, th.saved); err != nil {
		return err
	}
	var code [9]byte
	if _, err := th.p.ReadAt(code[:], th.tramp); err != nil || !bytes.Equal(code[:], restoreRT) {
		return fmt.Errorf("thread %d: no signal trampoline at %#x", th.Tid, th.tramp)
	}
	if err := unix.PtraceSetOptions(th.Tid, traceOptions); err != nil {
		return th.gone(err)
	}
	// From here the thread is moved (into its syscall again, at least):
	// Detach puts back what it had.
	th.written = true
	in := &injector{exact: *th.saved, at: atOther}
	in.exact.Orig_rax = ^uint64(0)
	in.fallback = in.exact
	if nr, ok := InSyscall(th.saved); ok {
		// Let the kernel restart the syscall and stop the thread as it
		// enters it again. There its registers are the syscall's own,
		// ready to issue it, and its signal mask is the real one (ppoll,
		// pselect6, epoll_pwait and rt_sigsuspend run with a temporary
		// mask, put back on their way out).
		if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
			return th.gone(err)
		}
		e, err := th.waitSyscall(syscallInfoEntry)
		if err != nil {
			return err
		}
		var insn [2]byte
		if _, err := th.p.ReadAt(insn[:], e.Rip-2); err != nil || insn != [2]byte{0x0f, 0x05} {
			th.saved = &e // untouched: resuming issues the syscall
			return fmt.Errorf("thread %d: the syscall at %#x was not issued by a syscall instruction", th.Tid, e.Rip)
		}
		in.exact = e
		in.exact.Rip -= 2
		in.exact.Rax = e.Orig_rax // restart_syscall (219) for ERESTART_RESTARTBLOCK
		in.exact.Orig_rax = ^uint64(0)
		in.fallback = in.exact
		if e.Orig_rax == sysRestartSyscall {
			in.fallback.Rax = uint64(nr)
		}
		in.at = atEntry
	}
	mask, err := getSigmask(th.Tid)
	if err != nil {
		return th.gone(err)
	}
	xs, err := getXState(th.Tid)
	if err != nil {
		return fmt.Errorf("thread %d: reading extended registers: %w", th.Tid, err)
	}
	in.xs, th.xstate = xs, xs
	th.inj = in
	sp, img, err := sigFrame(in.exact.Rsp-redZone, &in.fallback, mask, xs)
	if err != nil {
		return err
	}
	if _, err := th.p.WriteAt(img, sp); err != nil {
		return fmt.Errorf("writing a signal frame on thread %d's stack: %w", th.Tid, err)
	}
	in.sp = sp
	if in.at != atEntry {
		if err := th.enterTrampoline(); err != nil {
			return err
		}
	}
	size := uint64(xsaveOff) + (uint64(len(xs))+pageSize-1)&^(pageSize-1)
	base, err := th.trampSyscall(unix.SYS_MMAP, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err != nil {
		return err
	}
	if base >= ^uint64(pageSize-1) { // -errno
		return fmt.Errorf("thread %d: mmap of the call site failed: %w", th.Tid, unix.Errno(-base))
	}
	in.base, in.size = base, size
	pg := site.AMD64
	text := pg.Text
	in.entry, in.restore = base+codeOff, base+codeOff+pg.Restore
	in.image, in.raw = base+codeOff+pg.Image, base+codeOff+pg.Raw
	in.lock, in.lockEnd, in.lockWait = base+codeOff+pg.Lock, base+codeOff+pg.LockEnd, base+codeOff+pg.LockWait
	if len(text) > pageSize {
		return errors.New("ptrace: the call site's code does not fit its page")
	}
	page0 := sitePage0(size, th.Tid, &in.exact, sp, rfbmFor(xs))
	for _, w := range []struct {
		b   []byte
		off uint64
	}{{page0, 0}, {text, codeOff}, {xs, xsaveOff}} {
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
// it puts itself back.
func (th *Thread) park() error {
	in := th.inj
	r := in.exact
	r.Rip, r.Rsp = in.restore, in.sp+8
	if err := setRegs(th.Tid, &r); err != nil {
		return th.gone(err)
	}
	return nil
}

// enterTrampoline runs the thread into the signal trampoline's
// rt_sigreturn and stops it as it enters the syscall, which trampSyscall
// then replaces. If we die meanwhile, rt_sigreturn restores the thread.
func (th *Thread) enterTrampoline() error {
	in := th.inj
	r := in.exact
	r.Rip, r.Rsp = th.tramp, in.sp+8
	if err := setRegs(th.Tid, &r); err != nil {
		return th.gone(err)
	}
	if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
		return th.gone(err)
	}
	e, err := th.waitSyscall(syscallInfoEntry)
	if err != nil {
		return err
	}
	if e.Orig_rax != sysRtSigreturn || e.Rip != th.tramp+uint64(len(restoreRT)) {
		return fmt.Errorf("thread %d: expected rt_sigreturn at %#x, stopped in syscall %d at %#x", th.Tid, th.tramp, int64(e.Orig_rax), e.Rip)
	}
	return nil
}

// trampSyscall turns the syscall the thread is entering into nr(args),
// returning into the trampoline, and waits for its exit.
func (th *Thread) trampSyscall(nr uint64, args ...uint64) (uint64, error) {
	in := th.inj
	if in.at != atEntry {
		return 0, errors.New("ptrace: trampSyscall not at a syscall entry")
	}
	var r Regs
	if err := getRegs(th.Tid, &r); err != nil {
		return 0, th.gone(err)
	}
	r.Orig_rax = nr
	for i, p := range []*uint64{&r.Rdi, &r.Rsi, &r.Rdx, &r.R10, &r.R8, &r.R9} {
		if i < len(args) {
			*p = args[i]
		}
	}
	r.Rip, r.Rsp = th.tramp, in.sp+8
	if err := setRegs(th.Tid, &r); err != nil {
		return 0, th.gone(err)
	}
	if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
		return 0, th.gone(err)
	}
	x, err := th.waitSyscall(syscallInfoExit)
	if err != nil {
		return 0, err
	}
	return x.Rax, nil
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
	binary.LittleEndian.PutUint64(w[:], in.entry)
	if _, err := th.p.WriteAt(w[:], in.sp); err != nil {
		return 0, fmt.Errorf("writing the return address on thread %d's stack: %w", th.Tid, err)
	}
	r := in.exact
	r.Rsp = in.sp // at entry (rsp+8) % 16 == 0, as the ABI wants
	r.Rip = fn
	r.Rax = 0 // variadic callees read al as the number of vector registers used
	r.Orig_rax = ^uint64(0)
	r.Eflags &^= 1 << 10 // the ABI wants DF clear at a call
	for i, p := range []*uint64{&r.Rdi, &r.Rsi, &r.Rdx, &r.Rcx, &r.R8, &r.R9} {
		if i < len(args) {
			*p = args[i]
		}
	}
	if err := setRegs(th.Tid, &r); err != nil {
		return 0, th.gone(err)
	}
	return th.run(lim)
}
