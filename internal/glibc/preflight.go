package glibc

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/arenactl/arenactl/internal/errkind"
)

// The checks made before anything is injected (what malloc/malloc.c's
// __malloc_info and __malloc_trim lock, walk and abort on). They
// decide from a read-only walk; the process state they need (which threads
// are stopped) is read by the caller.

// HeapDamageError: the allocator's lists are damaged where glibc's own
// malloc_info or malloc_trim would kill the target (Abort) or spin forever
// holding an arena lock (Hang). Running either in the target is refused.
type HeapDamageError struct {
	Damage Damage // the first such damage
	More   int    // how many more were found
}

func (e *HeapDamageError) Error() string {
	more := ""
	if e.More > 0 {
		more = fmt.Sprintf(" (and %d more)", e.More)
	}
	if e.Damage.Hang && !e.Damage.Abort {
		return fmt.Sprintf("the heap is damaged in a way that makes glibc loop forever: %s%s; injecting malloc_info/malloc_trim would hang the target with an arena lock held", e.Damage, more)
	}
	return fmt.Sprintf("the heap is damaged in a way that makes glibc abort: %s%s; injecting malloc_info/malloc_trim would kill the target", e.Damage, more)
}

// ProcessMayBeGone says that the damage may be a process on its way out of
// its program (execve) or of life: the memory it drops meanwhile makes its
// arena ring and lists point at nothing (ptrace.Explain then waits to see).
func (e *HeapDamageError) ProcessMayBeGone() bool { return true }

func (e *HeapDamageError) Is(target error) bool { return target == errkind.ErrDamaged }

// Fatal reports whether an injected malloc_info or malloc_trim would kill or
// wedge the target on this damage. Both calls are refused on it: they walk
// the same lists (malloc_trim skips the small bins, but its fastbin
// consolidation unlinks chunks from them and aborts on a broken link).
func (d Damage) Fatal() bool { return d.Abort || d.Hang }

// FatalDamage is the damage of w that is Fatal.
func (w *Walk) FatalDamage() []Damage {
	var out []Damage
	for _, d := range w.Damage {
		if d.Fatal() {
			out = append(out, d)
		}
	}
	return out
}

// PreflightDamage refuses injection on fatal damage found by a walk made
// with every thread stopped. A walk of a running process cannot decide:
// other threads change the lists under it, and it reads chunks that were
// allocated and overwritten meanwhile (under a steady malloc/free load
// nearly every such walk looks damaged). A stopped process can still show
// a list in the middle of an update, but only in an arena whose lock its
// updater holds: damage there is not held against it (the injected call
// would wait for that lock, within its timeout, anyway).
func PreflightDamage(w *Walk) error {
	locked := map[uint64]bool{}
	for _, a := range w.Arenas {
		locked[a.Addr] = a.Mutex != 0
	}
	var fatal []Damage
	for _, d := range w.FatalDamage() {
		if !locked[d.Arena] {
			fatal = append(fatal, d)
		}
	}
	if len(fatal) == 0 {
		return nil
	}
	return &HeapDamageError{Damage: fatal[0], More: len(fatal) - 1}
}

// LockedArenaError: an arena's lock is held while threads of the target
// are stopped (SIGSTOP, a debugger). The holder may be one of them and never
// release it: an injected call would wait on it forever.
type LockedArenaError struct {
	Index   int
	Arena   uint64
	Mutex   uint32
	Stopped []int // the stopped threads, the borrowed one excluded
}

func (e *LockedArenaError) Is(target error) bool { return target == errkind.ErrLockedStop }

func (e *LockedArenaError) Error() string {
	ids := make([]string, 0, len(e.Stopped))
	for i, tid := range e.Stopped {
		if i == 4 {
			ids = append(ids, fmt.Sprintf("and %d more", len(e.Stopped)-i))
			break
		}
		ids = append(ids, fmt.Sprint(tid))
	}
	return fmt.Sprintf("arena %d (%#x) is locked (mutex %d) while threads of the process are stopped (%s): the holder may never release the lock, and malloc_info/malloc_trim would wait for it",
		e.Index, e.Arena, e.Mutex, strings.Join(ids, ", "))
}

// PreflightLocks refuses injection when some arena's mutex is held and
// some thread other than the borrowed one is stopped (__malloc_info and
// __malloc_trim in malloc/malloc.c take each arena's mutex in turn): no lock
// word names its owner (__libc_lock_t is a bare futex int), so a stopped
// thread may hold it.
// A lock held while every other thread runs is let be: its holder releases
// it, and the injected call's timeout bounds the wait.
func PreflightLocks(w *Walk, stopped []int) error {
	if len(stopped) == 0 {
		return nil
	}
	for i, a := range w.Arenas {
		if a.Mutex != 0 {
			s := append([]int(nil), stopped...)
			sort.Ints(s)
			return &LockedArenaError{Index: i, Arena: a.Addr, Mutex: a.Mutex, Stopped: s}
		}
	}
	return nil
}

// RefreshLocks re-reads every arena's mutex word of a walk, for a decision
// taken later than the walk.
func RefreshLocks(mem Memory, w *Walk) error {
	for i := range w.Arenas {
		var b [4]byte
		if _, err := mem.ReadAt(b[:], w.Arenas[i].Addr); err != nil {
			return fmt.Errorf("reading the lock of arena %d at %#x: %w", i, w.Arenas[i].Addr, err)
		}
		w.Arenas[i].Mutex = binary.LittleEndian.Uint32(b[:])
	}
	return nil
}
