package inspect

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/procfs"
)

// While a thread of the target is stopped, each ptrace round trip (and the
// hijack's search, and a freeze's walk) waits until arenactl's tracer thread
// gets a CPU. Someone who runs arenactl under nice 19 or SCHED_IDLE to spare
// a busy target gets the opposite: on CPUs the target keeps busy a thread
// that weak runs about once a second, and the bench's borrowed thread was
// held 4-5 s instead of 0.1 s (bench/README.md). So for as long as anything
// of the target is stopped, every thread of arenactl runs at the normal
// level (SCHED_OTHER, nice 0, or its own nice when that is lower), and goes
// back to the level it was started with once the target runs again.
//
// Lowering arenactl below normal for its other phases was measured and not
// done: on CPUs that the target keeps busy those phases then take seconds
// to minutes, and the target's worst stall over that window grows.

// boost is arenactl's threads raised to normal for one stopped window; nil
// when they all were there already, or when raising them is not allowed
// (an unprivileged process may not lower its nice value: RLIMIT_NICE).
type boost struct {
	orig map[int]unix.SchedAttr // every thread's level before the raise
	base unix.SchedAttr         // the level of a thread created meanwhile
}

// raisePriority raises every thread of arenactl that runs below normal.
// Threads the Go runtime creates meanwhile inherit their creator's level,
// so the threads are listed again until a pass finds none left below.
func raisePriority() *boost {
	b := &boost{orig: map[int]unix.SchedAttr{}}
	self := os.Getpid()
	m, err := unix.SchedGetAttr(self, 0)
	if err != nil {
		return nil
	}
	b.base = *m
	// Levels are taken before anything is raised: a thread created by a
	// raised one during the raise starts at normal, not at its own level.
	tids, err := procfs.Tasks(self)
	if err != nil {
		return nil
	}
	for _, tid := range tids {
		if a, err := unix.SchedGetAttr(tid, 0); err == nil {
			b.orig[tid] = *a
		}
	}
	raised := false
	ok := b.apply(func(tid int, cur *unix.SchedAttr) (unix.SchedAttr, bool) {
		want, low := normalOf(b.levelOf(tid))
		raised = raised || low
		return want, low
	})
	if !ok {
		b.restore()
		return nil
	}
	if !raised {
		return nil
	}
	return b
}

// restore gives every thread back the level it had before the raise.
// Lowering one's own priority is always allowed.
func (b *boost) restore() {
	if b == nil {
		return
	}
	b.apply(func(tid int, cur *unix.SchedAttr) (unix.SchedAttr, bool) {
		return b.levelOf(tid), true
	})
}

// levelOf is the level tid had before the raise, or would have had.
func (b *boost) levelOf(tid int) unix.SchedAttr {
	if o, seen := b.orig[tid]; seen {
		return o
	}
	return b.base
}

// normalOf is the level a thread at a runs at while raised, and whether that
// differs from a.
func normalOf(a unix.SchedAttr) (unix.SchedAttr, bool) {
	switch a.Policy {
	case unix.SCHED_IDLE, unix.SCHED_BATCH:
	case unix.SCHED_NORMAL:
		if a.Nice <= 0 {
			return a, false
		}
	default:
		return a, false // real-time: above normal already
	}
	n := a
	n.Policy = unix.SCHED_NORMAL
	n.Nice = min(a.Nice, 0)
	return n, true
}

// apply sets every thread's level to what want says, until a pass changes
// nothing. It reports false when a change was refused (EPERM).
func (b *boost) apply(want func(tid int, cur *unix.SchedAttr) (unix.SchedAttr, bool)) bool {
	self := os.Getpid()
	for pass := 0; pass < 20; pass++ {
		tids, err := procfs.Tasks(self)
		if err != nil {
			return false
		}
		changed := false
		for _, tid := range tids {
			cur, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				continue // exited
			}
			w, set := want(tid, cur)
			if !set || sameLevel(*cur, w) {
				continue
			}
			w.Size = unix.SizeofSchedAttr
			w.Flags &= unix.SCHED_FLAG_RESET_ON_FORK
			if err := unix.SchedSetAttr(tid, &w, 0); err != nil {
				if err == unix.ESRCH {
					continue
				}
				return false
			}
			changed = true
		}
		if !changed {
			return true
		}
	}
	return true
}

func sameLevel(a, b unix.SchedAttr) bool {
	if a.Policy != b.Policy {
		return false
	}
	switch a.Policy {
	case unix.SCHED_NORMAL, unix.SCHED_BATCH, unix.SCHED_IDLE:
		return a.Nice == b.Nice
	}
	return a.Priority == b.Priority
}
