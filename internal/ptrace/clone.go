package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/maps"
)

// A copy-on-write image of the process is a child made by a raw clone
// syscall (no glibc fork: no atfork handlers run, no allocator lock is
// taken), whose memory is the process's at that instant while the process
// runs on. The routine below runs in one borrowed thread, every other
// thread being stopped, and makes it in two steps:
//
//  1. the thread blocks every signal and vforks a helper that shares its
//     memory (CLONE_VM|CLONE_VFORK, exit signal 0: the program is not
//     notified), then reaps it with wait4(__WALL) and puts its mask back;
//  2. the helper clones the image (a plain fork: the page tables are copied
//     then) and exits at once, so the image is reparented to init, which
//     reaps it when it ends: the target is left with no child of ours.
//
// The copy of the page tables is the whole stop, and it grows with every
// resident page of the process, not only the heap's: a database's buffer
// pool (anonymous memory the allocator never sees) can make it ten times
// longer than the heap alone would. So the routine can leave mappings the
// caller names out of the image: with signals blocked, before the clone,
// it marks each MADV_DONTFORK, and after the clone (made or refused) it
// marks it MADV_DOFORK again, in the same run: nothing between the two
// depends on arenactl, so a killed arenactl cannot leave a mark behind.
// It must never clear a mark the program set itself, and /proc shows no
// such mark without walking every page table (smaps). So it marks only the
// middle of a mapping (2 MiB in from each end: no huge page is split) and
// asks the kernel (the PROCMAP_QUERY ioctl on /proc/self/maps, Linux 6.11)
// where the mapping ends: the mapping split in three only if the mark was
// new, and only then is it undone (which merges the three back). A mapping
// already marked stays whole and untouched; one whose bounds moved since
// the caller looked, or a kernel without the ioctl, leaves it in.
//
// Orphans go to the nearest child subreaper (prctl PR_SET_CHILD_SUBREAPER)
// above their parent instead, and the helper's parent is the process: if
// it is a subreaper itself, the image would become its child, a SIGCHLD
// and a zombie for it to reap. The routine asks first (PR_GET_...) and
// makes nothing then (ErrSubreaper). A subreaper further up (a service
// manager, a container's shim) adopts the image and reaps it like any
// orphan.
//
// The image runs no code of the program's. It inherits the blocked mask
// (no handler of the program's can run in it), and loops in a 100 ms ppoll
// on nothing, watching a heartbeat word that arenactl increments in the
// image's own copy of the call site. If the word stays unchanged for
// imageLease, because arenactl died, hung or was stopped, the image
// exits by itself. arenactl ends it with SIGKILL when done.
const (
	hdrImagePid = site.HdrImagePid // the image's pid in the target's pid namespace, or -errno (written by the helper)
	hdrBeat     = site.HdrBeat     // the heartbeat, incremented by arenactl in the image
	hdrSigAll   = site.HdrSigAll   // a sigset_t with every signal
	hdrSigOld   = site.HdrSigOld   // the borrowed thread's own mask, while the routine runs
	hdrBeatTs   = site.HdrBeatTs   // struct timespec: the image's poll interval
	hdrReaper   = site.HdrReaper   // int: the process is a child subreaper (written by prctl)

	// The mappings to leave out (written by arenactl before the call): a
	// count, the ioctl's struct procmap_query, then per mapping its
	// start, end, the middle marked (start, length) and a word the
	// routine sets to 1 when it marked the middle itself.
	leaveCount   = site.LeaveCount
	leaveQuery   = site.LeaveQuery // struct procmap_query (maps.QuerySize bytes)
	leaveEntries = site.LeaveEntries
	leaveEntry   = site.LeaveEntry
	// MaxLeaveOut is how many mappings one image can leave out.
	MaxLeaveOut = (0x1000 - leaveEntries) / leaveEntry

	leaveAlign = 2 << 20
)

// The query struct must fit before the entries (a compile-time check).
const _ = uint(leaveEntries - leaveQuery - maps.QuerySize)

// hdrMapsPath holds the path the routine opens, NUL-terminated.
const hdrMapsPath = site.HdrMapsPath

const mapsPath = "/proc/self/maps\x00"

// ImageBeatOffset is where, from the call site's start, the image's
// heartbeat word is (in the image's own copy of the site).
const ImageBeatOffset = hdrBeat

// ImageTicks is how many 100 ms polls the image waits without a change of
// the heartbeat before it exits: the lease arenactl must renew.
const ImageTicks = site.ImageTicks

// The image routine (internal/arch/site, image) is called like a function
// and returns the image's pid or a negative errno. It marks the mappings
// to leave out (leave: rbx counts them down, r14 points at the entry, r15
// holds the descriptor of /proc/self/maps) and unmarks them (back) where it
// ends, whatever the clones did.

// ErrNoImage: the image routine ran but made no image.
var ErrNoImage = errors.New("no copy-on-write image was made")

// ErrSubreaper: the process is a child subreaper, so an image would become
// its child; the routine made none and changed nothing.
var ErrSubreaper = errors.New("the process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): an image would become its child, for it to reap")

// Middle is the part of a mapping sp that the image routine leaves out: from
// the first 2 MiB boundary at least a page in from its start to the last
// one at least a page in from its end. ok is false when there is none.
func Middle(sp maps.Range) (lo, hi uint64, ok bool) {
	if sp.End < sp.Start+2*pageSize {
		return 0, 0, false
	}
	lo = (sp.Start + pageSize + leaveAlign - 1) &^ (leaveAlign - 1)
	hi = (sp.End - pageSize) &^ (leaveAlign - 1)
	return lo, hi, hi > lo
}

// CloneImage makes a copy-on-write image of the process from this thread,
// which must be stopped with every other thread of the process (the image
// is a fork of the whole address space: a thread running meanwhile could
// tear it). It returns the image's pid as the target's pid namespace
// numbers it, and which of the mappings leave names (each exactly one
// mapping, at most MaxLeaveOut) the image left out. The thread is left
// parked in its call site, as after Call.
func (th *Thread) CloneImage(lim CallLimits, leave []maps.Range) (int, []maps.Range, error) {
	if len(leave) > MaxLeaveOut {
		leave = leave[:MaxLeaveOut]
	}
	var written []maps.Range
	ret, err := th.invoke(lim, func(in *injector) uint64 {
		written, _ = writeLeaveOut(th.p, in.base, leave)
		return in.image
	}, nil)
	if err != nil {
		return 0, nil, err
	}
	var left []maps.Range
	if len(written) > 0 {
		base, _, _ := th.Site()
		b := make([]byte, len(written)*leaveEntry)
		if _, err := th.p.ReadAt(b, base+leaveEntries); err == nil {
			for i, sp := range written {
				if binary.LittleEndian.Uint64(b[i*leaveEntry+32:]) != 0 {
					left = append(left, sp)
				}
			}
		}
	}
	switch v := int64(ret); {
	case v < 0:
		return 0, nil, &CloneError{Tid: th.Tid, Err: errnoOf(v)}
	case v == 0:
		base, _, _ := th.Site()
		if reaper, err := th.p.ReadUint64(base + hdrReaper); err == nil && uint32(reaper) != 0 {
			return 0, nil, fmt.Errorf("thread %d: %w", th.Tid, ErrSubreaper)
		}
		return 0, nil, fmt.Errorf("thread %d: %w", th.Tid, ErrNoImage)
	default:
		return int(v), left, nil
	}
}

// writeLeaveOut fills the site's table of mappings to leave out, the
// count last, so that a table the write did not finish is one of none, and
// returns the mappings written. Each mapping's middle starts and ends on a
// 2 MiB boundary at least a page in from its ends; a mapping too small for
// one is left in.
func writeLeaveOut(p *Process, base uint64, leave []maps.Range) ([]maps.Range, error) {
	le := binary.LittleEndian
	var word [8]byte
	if _, err := p.WriteAt(word[:], base+leaveCount); err != nil {
		return nil, err
	}
	table := make([]byte, leaveEntries-leaveQuery, 0x1000-leaveQuery)
	le.PutUint64(table, maps.QuerySize)
	var written []maps.Range
	for _, sp := range leave {
		lo, hi, ok := Middle(sp)
		if !ok {
			continue
		}
		var e [leaveEntry]byte
		le.PutUint64(e[:], sp.Start)
		le.PutUint64(e[8:], sp.End)
		le.PutUint64(e[16:], lo)
		le.PutUint64(e[24:], hi-lo)
		table = append(table, e[:]...)
		written = append(written, sp)
	}
	if len(written) == 0 {
		return nil, nil
	}
	if _, err := p.WriteAt([]byte(mapsPath), base+hdrMapsPath); err != nil {
		return nil, err
	}
	if _, err := p.WriteAt(table, base+leaveQuery); err != nil {
		return nil, err
	}
	le.PutUint64(word[:], uint64(len(written)))
	if _, err := p.WriteAt(word[:], base+leaveCount); err != nil {
		return nil, err
	}
	return written, nil
}

// CloneError: the kernel refused one of the image routine's clones (no
// memory under strict overcommit, a process limit, a security module); the
// routine undid what it did, and no image exists.
type CloneError struct {
	Tid int
	Err error
}

func (e *CloneError) Error() string { return fmt.Sprintf("thread %d: clone: %v", e.Tid, e.Err) }

func (e *CloneError) Unwrap() error { return e.Err }

// The raw syscall routine (internal/arch/site, raw) issues the syscall its
// first argument names with the next five as its arguments and 0 as the
// sixth (mmap's offset: a call passes six integer arguments in registers,
// the syscall number takes one), and returns its result.

// RawSyscall issues syscall nr with up to five arguments (the sixth is 0)
// from the thread,
// through its call site (made by the first call), and returns the raw
// result (-errno on failure). Only for syscalls that need no lock a
// stopped thread could hold.
func (th *Thread) RawSyscall(lim CallLimits, nr uint64, args ...uint64) (uint64, error) {
	if len(args) > 5 {
		return 0, errors.New("ptrace: at most 5 syscall arguments")
	}
	return th.invoke(lim, func(in *injector) uint64 { return in.raw }, append([]uint64{nr}, args...))
}
