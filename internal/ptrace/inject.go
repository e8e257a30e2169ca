package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The injection's control flow, the same on every machine: the thread's own
// state is taken (its syscall restarted and entered again if it was blocked
// in one), a signal frame goes on its stack, the call site is made by
// syscalls that return into the signal trampoline, and every call returns
// into the site's routine, which restores the thread by itself if arenactl
// is gone. The machine's part (which registers, where the frame goes, how a
// syscall's number is changed) is in call_$GOARCH.go's hooks.

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
	code := make([]byte, len(trampCode))
	if _, err := th.p.ReadAt(code, th.tramp); err != nil || !bytes.Equal(code, trampCode) {
		return fmt.Errorf("thread %d: no signal trampoline at %#x", th.Tid, th.tramp)
	}
	if err := th.callable(); err != nil {
		return err
	}
	if err := unix.PtraceSetOptions(th.Tid, traceOptions); err != nil {
		return th.gone(err)
	}
	// From here the thread is moved (into its syscall again, at least):
	// Detach puts back what it had.
	th.written = true
	in := newInjector(th.saved)
	if th.inSyscall() {
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
		if err := th.entered(in, e); err != nil {
			return err
		}
		in.at = atEntry
	}
	mask, err := getSigmask(th.Tid)
	if err != nil {
		return th.gone(err)
	}
	xs, err := getXState(th.Tid)
	if err != nil {
		return fmt.Errorf("thread %d: reading %s: %w", th.Tid, xstateName, err)
	}
	in.xs, th.xstate = xs, xs
	th.inj = in
	sp, frame, err := placeFrame(in, mask)
	if err != nil {
		return err
	}
	if _, err := th.p.WriteAt(frame, sp); err != nil {
		return fmt.Errorf("writing a signal frame on thread %d's stack: %w", th.Tid, err)
	}
	in.sp = sp
	if in.at != atEntry {
		if err := th.enterTrampoline(); err != nil {
			return err
		}
	}
	tail, tailOff := siteTail(in, frame)
	size := tailOff + (uint64(len(tail))+pageSize-1)&^(pageSize-1)
	base, err := th.trampSyscall(unix.SYS_MMAP, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uint64(0), 0)
	if err != nil {
		return err
	}
	if base >= ^uint64(pageSize-1) { // -errno
		return fmt.Errorf("thread %d: mmap of the call site failed: %w", th.Tid, unix.Errno(-base))
	}
	in.base, in.size = base, size
	pg := siteCode
	text := pg.Text
	in.entry, in.restore = base+codeOff, base+codeOff+pg.Restore
	in.image, in.raw = base+codeOff+pg.Image, base+codeOff+pg.Raw
	in.lock, in.lockEnd, in.lockWait = base+codeOff+pg.Lock, base+codeOff+pg.LockEnd, base+codeOff+pg.LockWait
	if len(text) > pageSize {
		return errors.New("ptrace: the call site's code does not fit its page")
	}
	page0 := th.page0(in, size, sp)
	for _, w := range []struct {
		b   []byte
		off uint64
	}{{page0, 0}, {text, codeOff}, {tail, tailOff}} {
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
	onFrame(&r, in.restore, in.sp)
	if err := th.setResume(&r); err != nil {
		return th.gone(err)
	}
	in.at = atOther
	return nil
}

// enterTrampoline runs the thread into the signal trampoline's
// rt_sigreturn and stops it as it enters the syscall, which trampSyscall
// then replaces. If we die meanwhile, rt_sigreturn restores the thread
// from the frame.
func (th *Thread) enterTrampoline() error {
	in := th.inj
	r := in.exact
	onFrame(&r, th.tramp, in.sp)
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
	nr, err := th.enteredNo(&e)
	if err != nil {
		return th.gone(err)
	}
	if nr != sysRtSigreturn || PC(&e) != th.tramp+uint64(len(trampCode)) {
		return fmt.Errorf("thread %d: expected rt_sigreturn at %#x, stopped in syscall %d at %#x", th.Tid, th.tramp, nr, PC(&e))
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
	if err := th.setSyscall(&r, nr, args); err != nil {
		return 0, th.gone(err)
	}
	if err := unix.PtraceSyscall(th.Tid, 0); err != nil {
		return 0, th.gone(err)
	}
	x, err := th.waitSyscall(syscallInfoExit)
	if err != nil {
		return 0, err
	}
	return sysResult(&x), nil
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
	r, err := th.callRegs(fn, args)
	if err != nil {
		return 0, err
	}
	if err := th.setResume(&r); err != nil {
		return 0, th.gone(err)
	}
	in.at = atOther
	return th.run(lim)
}
