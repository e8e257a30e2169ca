package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A borrowed thread can hold a lock of the target's while arenactl reads
// what the lock guards: the consistency a function of the target's own
// would have under that lock, without stopping any other thread. The lock
// is a 32-bit word under the low-level lock protocol of glibc's nptl
// (sysdeps/nptl/lowlevellock.h and nptl/lowlevellock.c, the same from 2.17
// to 2.43): 0 free, 1 held, 2 held with waiters; taken by a
// compare-and-swap 0→1, else by exchanging 2 in and sleeping in a private
// futex wait on 2 until the exchange returns 0; let go by exchanging 0 in
// and waking one waiter if the old value was 2. An arena's mutex
// (malloc/arena.c, __libc_lock_lock) is such a word.
//
// The lock routine, in the call site's code page, does that in the thread:
//
//  1. takes the lock (the futex wait has no timeout: a wait with one would
//     overwrite the thread's restart_block, see gateTimeout). Until it
//     holds the lock the call may be abandoned like any other: a thread
//     parked on the restore code holds nothing, and a 2 it left in the
//     word only costs its holder a futex wake;
//  2. blocks every signal (no handler of the program's may run while it
//     holds the lock: a handler that allocates would wait on it forever),
//     writes 1 to its state word, and polls the release word every
//     lockTick, a bounded number of times, in ppoll (interrupted, ppoll
//     restarts with the time left, and touches no restart_block);
//  3. when released, or when its polls are spent, writes 2 to its state
//     word, then lets the lock go, puts the mask back and returns into the
//     routine like any call.
//
// Nothing in 2 and 3 waits for arenactl: killed or stopped, arenactl leaves
// the lock held at most for the polls, and the thread comes back through
// the gate as after any call. While it holds the lock the call is never
// abandoned. The state word tells whether what arenactl read was read
// under the lock: 1 read after the reads means the routine had not yet
// written 2, so had not let the lock go.
const (
	hdrLockState   = 0x1a0 // 0 taking the lock, 1 holding it, 2 letting it go (written by the routine)
	hdrLockRelease = 0x1a8 // 1: let it go now (written by arenactl)
	hdrLockTs      = 0x1b0 // struct timespec: one poll
	lockTick       = 100 * time.Microsecond

	sysFutex           = 202
	futexWaitPrivate   = 128
	futexWakePrivate   = 129
	sysRtSigprocmask   = 14
	sigSetmask         = 2
	lockStateTaking    = 0
	lockStateHolding   = 1
	lockStateLettingGo = 2
)

// The lock block must end before the journal (a compile-time check).
const _ = uint(journalOff - (hdrLockTs + 16))

// lockRoutine assembles the routine at pc; site is the call site's base.
// It is called like a function: rdi the lock word's address, rsi the
// number of polls it may hold the lock for. It returns where its futex
// wait for the lock ends (just after the syscall instruction), as an
// offset from pc.
func lockRoutine(site, pc uint64) ([]byte, uint64) {
	a := newAsm(pc)
	imm := a.imm32
	a.emit(0x49, 0x89, 0xfc)                   // mov r12, rdi
	a.emit(0x49, 0x89, 0xf5)                   // mov r13, rsi
	a.emit(0x31, 0xc0)                         // xor eax, eax
	a.emit(0xb9, 1, 0, 0, 0)                   // mov ecx, 1
	a.emit(0xf0, 0x41, 0x0f, 0xb1, 0x0c, 0x24) // lock cmpxchg [r12], ecx
	a.jump("got", 0x0f, 0x84)                  // jz got
	a.label("slow")
	a.emit(0xb8, 2, 0, 0, 0)       // mov eax, 2
	a.emit(0x41, 0x87, 0x04, 0x24) // xchg [r12], eax
	a.emit(0x85, 0xc0)             // test eax, eax
	a.jump("got", 0x0f, 0x84)      // jz got
	a.emit(0x4c, 0x89, 0xe7)       // mov rdi, r12
	a.emit(0xbe)                   // mov esi, FUTEX_WAIT_PRIVATE
	a.emit(imm(futexWaitPrivate)...)
	a.emit(0xba, 2, 0, 0, 0) // mov edx, 2
	a.emit(0x45, 0x31, 0xd2) // xor r10d, r10d
	a.emit(0xb8)             // mov eax, SYS_futex
	a.emit(imm(sysFutex)...)
	a.emit(0x0f, 0x05) // syscall
	waitEnd := uint64(len(a.b))
	a.jump("slow", 0xe9) // jmp slow

	a.label("got")
	sigprocmask := func(set, old uint64) {
		a.emit(0xb8)
		a.emit(imm(sysRtSigprocmask)...) // mov eax, SYS_rt_sigprocmask
		a.emit(0xbf)
		a.emit(imm(sigSetmask)...)        // mov edi, SIG_SETMASK
		a.rip(set, nil, 0x48, 0x8d, 0x35) // lea rsi, [rip+set]
		if old != 0 {
			a.rip(old, nil, 0x48, 0x8d, 0x15) // lea rdx, [rip+old]
		} else {
			a.emit(0x31, 0xd2) // xor edx, edx
		}
		a.emit(0x41, 0xba, 8, 0, 0, 0) // mov r10d, 8
		a.emit(0x0f, 0x05)             // syscall
	}
	sigprocmask(site+hdrSigAll, site+hdrSigOld)
	a.rip(site+hdrLockState, imm(lockStateHolding), 0x48, 0xc7, 0x05) // mov qword [rip+state], 1
	a.label("wait")
	a.rip(site+hdrLockRelease, []byte{0}, 0x48, 0x83, 0x3d) // cmp qword [rip+release], 0
	a.jump("out", 0x0f, 0x85)                               // jne out
	a.emit(0x4d, 0x85, 0xed)                                // test r13, r13
	a.jump("out", 0x0f, 0x84)                               // jz out
	a.emit(0x49, 0xff, 0xcd)                                // dec r13
	// ppoll(NULL, 0, &ts, NULL, 8); it writes back the time left when
	// interrupted, so ts is set afresh each time.
	a.rip(site+hdrLockTs, imm(0), 0x48, 0xc7, 0x05)                                // mov qword [rip+tv_sec], 0
	a.rip(site+hdrLockTs+8, imm(uint32(lockTick.Nanoseconds())), 0x48, 0xc7, 0x05) // mov qword [rip+tv_nsec], tick
	a.emit(0xb8, 0x0f, 0x01, 0, 0)                                                 // mov eax, 271 (SYS_ppoll)
	a.emit(0x31, 0xff)                                                             // xor edi, edi
	a.emit(0x31, 0xf6)                                                             // xor esi, esi
	a.rip(site+hdrLockTs, nil, 0x48, 0x8d, 0x15)                                   // lea rdx, [rip+ts]
	a.emit(0x45, 0x31, 0xd2)                                                       // xor r10d, r10d
	a.emit(0x41, 0xb8, 8, 0, 0, 0)                                                 // mov r8d, 8
	a.emit(0x0f, 0x05)                                                             // syscall
	a.jump("wait", 0xe9)                                                           // jmp wait

	a.label("out")
	a.rip(site+hdrLockState, imm(lockStateLettingGo), 0x48, 0xc7, 0x05) // mov qword [rip+state], 2
	a.emit(0x31, 0xc0)                                                  // xor eax, eax
	a.emit(0x41, 0x87, 0x04, 0x24)                                      // xchg [r12], eax
	a.emit(0x83, 0xf8, 0x01)                                            // cmp eax, 1
	a.jump("unmask", 0x0f, 0x8e)                                        // jle unmask
	a.emit(0x4c, 0x89, 0xe7)                                            // mov rdi, r12
	a.emit(0xbe)
	a.emit(imm(futexWakePrivate)...) // mov esi, FUTEX_WAKE_PRIVATE
	a.emit(0xba, 1, 0, 0, 0)         // mov edx, 1
	a.emit(0xb8)
	a.emit(imm(sysFutex)...) // mov eax, SYS_futex
	a.emit(0x0f, 0x05)       // syscall
	a.label("unmask")
	sigprocmask(site+hdrSigOld, 0)
	a.emit(0x31, 0xc0) // xor eax, eax
	a.emit(0xc3)       // ret
	return a.done(), waitEnd
}

// lockHold is a HoldLock call under way, as run sees it.
type lockHold struct {
	fn      func() error
	lo, hi  uint64 // the lock routine's code
	waitEnd uint64 // where its futex wait for the lock returns
	ran     bool   // fn was run
	kept    bool   // the lock was still held when fn ended
	err     error  // fn's
}

func (h *lockHold) holds(pc uint64) bool { return pc >= h.lo && pc < h.hi }

// ErrLockLapsed: the borrowed thread let the lock go by itself (its polls
// were spent) before what was read under it had been read.
var ErrLockLapsed = errors.New("the borrowed thread let the lock go before the reads under it were done")

// HoldLock has the thread take the lock word at addr, runs fn (in arenactl,
// while the thread holds the lock and nothing else of the target is
// stopped), then has the thread let it go. The thread lets it go by itself
// after about most, whatever arenactl does; if that happened before fn
// ended, fn's reads were not all made under the lock, and HoldLock returns
// ErrLockLapsed (wrapped). Until the thread holds the lock the call is
// bounded by lim like any other; once it holds it, never abandoned. The
// caller must know the thread does not hold the lock itself (it would
// wait on itself until lim gives up).
func (th *Thread) HoldLock(lim CallLimits, addr uint64, most time.Duration, fn func() error) error {
	if !th.stopped || th.saved == nil {
		return errors.New("ptrace: HoldLock on a thread that was not stopped")
	}
	if th.tainted {
		return errors.New("ptrace: thread has an abandoned call; no further calls")
	}
	// A poll takes its tick, the timer's slack (50 µs by default) and a
	// wake-up: counted at twice the tick, the polls end near most on a
	// loaded machine rather than well past it.
	polls := uint64(most / (2 * lockTick))
	if polls == 0 {
		polls = 1
	}
	h := &lockHold{fn: fn}
	var werr error
	_, err := th.invoke(lim, func(in *injector) uint64 {
		var zero [16]byte
		_, werr = th.p.WriteAt(zero[:], in.base+hdrLockState)
		if werr != nil {
			return in.entry // a call of nothing: it returns at once
		}
		h.lo, h.hi, h.waitEnd = in.lock, in.lockEnd, in.lockWait
		in.hold = h
		return in.lock
	}, []uint64{addr, polls})
	if th.inj != nil {
		th.inj.hold = nil
	}
	switch {
	case werr != nil:
		return fmt.Errorf("thread %d: resetting the lock routine's words: %w", th.Tid, werr)
	case err != nil:
		return err
	case !h.ran || !h.kept:
		return fmt.Errorf("thread %d, lock at %#x: %w", th.Tid, addr, ErrLockLapsed)
	}
	return h.err
}

// holdStep runs the caller's reads once the thread holds the lock, then
// releases it. Runs on the tracer, between two polls of the thread.
func (th *Thread) holdStep(h *lockHold) {
	in := th.inj
	st, err := th.p.ReadUint64(in.base + hdrLockState)
	if err != nil || st == lockStateTaking {
		return
	}
	h.ran = true
	if st == lockStateHolding {
		h.err = h.fn()
		st, err = th.p.ReadUint64(in.base + hdrLockState)
		h.kept = err == nil && st == lockStateHolding
	}
	th.releaseLock()
}

// releaseLock tells the lock routine to let go at its next poll.
func (th *Thread) releaseLock() {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	th.p.WriteAt(one[:], th.inj.base+hdrLockRelease)
}

// holdAbandonable reports whether a call to the lock routine, stopped with
// registers r, may be abandoned: only while it waits for the lock. Once it
// holds it (or between taking it and saying so), parked on the restore
// code it would keep the lock forever.
func (th *Thread) holdAbandonable(h *lockHold, r *Regs) bool {
	st, err := th.p.ReadUint64(th.inj.base + hdrLockState)
	if err != nil || st != lockStateTaking {
		return false
	}
	nr, blocked := InSyscall(r)
	return blocked && nr == sysFutex && r.Rip == h.waitEnd
}
