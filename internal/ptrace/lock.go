package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/arch/site"
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
	hdrLockState   = site.HdrLockState   // 0 taking the lock, 1 holding it, 2 letting it go (written by the routine)
	hdrLockRelease = site.HdrLockRelease // 1: let it go now (written by arenactl)
	hdrLockTs      = site.HdrLockTs      // struct timespec: one poll
	lockTick       = site.LockTickNsec * time.Nanosecond

	lockStateTaking    = 0
	lockStateHolding   = site.LockStateHolding
	lockStateLettingGo = site.LockStateLettingGo
)

// The lock block must end before the journal (a compile-time check).
const _ = uint(journalOff - (hdrLockTs + 16))

// The lock routine (internal/arch/site, lock) is called like a function:
// its first argument the lock word's address, its second the number of
// polls it may hold the lock for. LockWait is where its futex wait for the
// lock ends (just after the syscall instruction).

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
	nr, after, blocked := th.blockedIn(r)
	return blocked && nr == int64(arch.Host().MustSys("futex")) && after == h.waitEnd
}
