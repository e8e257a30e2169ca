// Package budget owns how much memory arenactl may take for a walk or a
// scan of a heap: the estimate of what one needs, made from the target's
// mappings alone (read before anything stops or attaches to the target),
// what the machine and arenactl's own cgroup can spare, the refusal when
// the first exceeds the second, and the shares of the estimate the walker
// and the garbage collector are held to.
//
// The estimate is the bound arenactl keeps (docs/scale.md): 64 MiB, plus
// one bit per 16 bytes of heap for a scan (the chunk index, its marks and
// the walk's list of chunk starts), half that for a walk alone. The heap is
// what malloc's arenas span: the main arena's [heap] and every thread
// arena's heap, their writable parts (maps.Classify). Mmapped chunks cost
// nothing per byte: they are read as they are met.
//
// A server short of memory must not have arenactl's growth invite the OOM
// killer, which may well pick the server (rule 1 of the brief): so a walk
// or scan whose estimate exceeds what can be spared, with a margin, is
// refused before it starts.
package budget

import (
	"fmt"
	"os"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
)

// Op is what the memory is needed for.
type Op int

const (
	// Walk reads the allocator's state and every chunk (info --read-only,
	// snapshot's walk, a core's info).
	Walk Op = iota
	// Scan walks, indexes every chunk and scans the heap for references
	// (heap, leaks' reachability).
	Scan
)

func (o Op) String() string {
	if o == Scan {
		return "scan"
	}
	return "walk"
}

// Base is what a walk or scan needs whatever the heap's size: the
// program, its runtime, the tables read from the target's libc and the
// report.
const Base = 64 << 20

// Need is the estimate for op on a heap of heap bytes.
func Need(op Op, heap uint64) uint64 {
	if op == Scan {
		return Base + heap/128
	}
	return Base + heap/256
}

// HeapOf is the heap the mappings ms (classified) show: the writable
// parts of the main heap and the arenas' heaps.
func HeapOf(ms []maps.Mapping) uint64 {
	var n uint64
	for _, m := range ms {
		if m.Writable() && (m.Class == maps.ClassMainHeap || m.Class == maps.ClassArenaHeap) {
			n += m.Size()
		}
	}
	return n
}

// HeapOfPid is HeapOf for a live process, from /proc/PID/maps: no stop,
// no attach. It reads by pid, not through a held /proc directory: Check
// runs before anything is opened on the process, so that a refusal leaves
// it untouched, and a pid reused meanwhile only sizes a budget wrong; the
// process that is then read is opened, held and checked by the use case
// (inspect's Options.Same).
func HeapOfPid(pid int) (uint64, error) {
	f, err := os.Open(procfs.Path(pid, "maps"))
	if err != nil {
		return 0, procfs.Error(pid, err)
	}
	defer f.Close()
	ms, err := maps.ParseMaps(f)
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	exe, _ := os.Readlink(procfs.Path(pid, "exe"))
	maps.Classify(ms, maps.Hints{ExePath: exe})
	return HeapOf(ms), nil
}

// Spare is what can be spared for arenactl now: the least room under its
// own cgroup's memory limits and the machine's MemAvailable
// (procfs.ReadMemoryRoom of arenactl itself), less a margin: a quarter of
// it, at least 64 MiB, is left for the server and everything else.
func Spare() (bytes uint64, limit string, err error) {
	room, err := procfs.ReadMemoryRoom(os.Getpid())
	if err != nil {
		return 0, "", err
	}
	margin := max(room.Bytes/4, 64<<20)
	if room.Bytes <= margin {
		return 0, room.Limit, nil
	}
	return room.Bytes - margin, room.Limit, nil
}

// Error is a walk or scan refused for want of memory, before anything was
// done to the target.
type Error struct {
	Pid        int
	Op         Op
	Heap, Need uint64
	Limit      uint64
	// By says what set the limit: "--max-memory", "the machine's
	// available memory", or the cgroup's path.
	By string
}

func (e *Error) Error() string {
	return fmt.Sprintf("process %d: a %s of its %s heap needs about %s, more than %s allows (%s); nothing was done to it",
		e.Pid, e.Op, Size(e.Heap), Size(e.Need), e.By, Size(e.Limit))
}

func (e *Error) Is(target error) bool { return target == errkind.ErrNoMemory }

// Check decides whether op on process pid may go ahead within maxMemory
// (0: no limit of the user's) and what can be spared, and gives the walker
// and the garbage collector their shares of the estimate (Apply). A
// process whose maps cannot be read is left to the command to report; it
// is given the budget of an empty heap.
func Check(pid int, op Op, maxMemory uint64, jobs int) error {
	heap, err := HeapOfPid(pid)
	if err != nil {
		Apply(Need(op, 0), jobs)
		return nil
	}
	need := Need(op, heap)
	refuse := func(limit uint64, by string) error {
		return &Error{Pid: pid, Op: op, Heap: heap, Need: need, Limit: limit, By: by}
	}
	if maxMemory != 0 && need > maxMemory {
		return refuse(maxMemory, "--max-memory")
	}
	if spare, cg, err := Spare(); err == nil && need > spare {
		by := "the machine's available memory, less a margin"
		if cg != "" {
			by = fmt.Sprintf("cgroup %s's room, less a margin", cg)
		}
		return refuse(spare, by)
	}
	Apply(need, jobs)
	return nil
}

// Apply holds what follows to budget bytes: the walker's copies and cache
// (glibc.SetMemory) and, through the garbage collector's soft limit, the
// Go heap, which gets what they and the program's own pages leave. jobs is
// the walk's workers (--jobs), among whom the walker's share is divided.
func Apply(budget uint64, jobs int) {
	glibc.SetMemory(budget, jobs)
	goShare := budget - budget/4 - 16<<20
	setShare(max(goShare, 32<<20))
}

// Size prints a byte count for a line of text: 72 MiB, 1.5 GiB.
func Size(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// ParseSize reads a size as --max-memory takes it: a number of bytes, or
// one with a suffix K, M, G, T (powers of 1024; KiB, MiB, GiB, TiB too).
func ParseSize(s string) (uint64, error) {
	num, mult := s, uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if len(s) > len(u.suf) && (s[len(s)-len(u.suf):] == u.suf) {
			num, mult = s[:len(s)-len(u.suf)], u.m
			break
		}
	}
	var v uint64
	if _, err := fmt.Sscanf(num, "%d", &v); err != nil || fmt.Sprint(v) != num {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, or with K, M, G or T)", s)
	}
	if v > (1<<63)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v * mult, nil
}
