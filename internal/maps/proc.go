package maps

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"github.com/arenactl/arenactl/internal/procfs"
)

// procDir is where the memory files of process pid live: /proc/PID/, or
// when the main thread has exited while others run on (pthread_exit), the
// directory of one of those, /proc/PID/task/TID/: the main thread's own
// files then show no memory at all (an empty maps, no exe). A process with
// no thread left is a zombie (procfs.StateError).
func procDir(pid int) (string, error) { return procDirOf(procfs.ByPid(pid)) }

// procDirOf is procDir under the directory p holds.
func procDirOf(p *procfs.Proc) (string, error) {
	tid, _, err := p.LiveThread()
	if err != nil {
		return "", err
	}
	if tid == p.Pid {
		return p.Path("."), nil
	}
	return p.Path(fmt.Sprintf("task/%d", tid)), nil
}

// procErr types what reading a live process's file can say about the
// process: ESRCH while reading means it went away under us (its memory was
// torn down: exit or exec), ENOENT that it is not there, EACCES that we may
// not read it (procfs.Error).
func procErr(pid int, err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process %d: %w (%v)", pid, procfs.ErrGone, err)
	}
	return procfs.Error(pid, err)
}

// Read reads the mappings of a live process from /proc/PID/maps, or from
// /proc/PID/smaps when smaps is set (slower: the kernel walks the page
// tables, but the Rss/Pss/... counters get filled in).
//
// Errors are conditions: errors.Is(err, procfs.ErrNoProcess) tells a gone
// process, procfs.ErrGone one that went while it was read, and
// procfs.ErrPermission a missing ptrace right.
func Read(pid int, smaps bool) ([]Mapping, error) { return ReadProc(procfs.ByPid(pid), smaps) }

// ReadProc is Read of the process p holds: never of a later process given
// its pid.
func ReadProc(p *procfs.Proc, smaps bool) ([]Mapping, error) {
	name, parse := "maps", ParseMaps
	if smaps {
		name, parse = "smaps", ParseSmaps
	}
	var ms []Mapping
	err := readProc(p, name, func(r io.Reader) (err error) {
		ms, err = parse(r)
		return err
	})
	return ms, err
}

// ReadRollup reads /proc/PID/smaps_rollup of a live process (Linux ≥ 4.14).
func ReadRollup(pid int) (Rollup, error) { return ReadRollupProc(procfs.ByPid(pid)) }

// ReadRollupProc is ReadRollup of the process p holds.
func ReadRollupProc(p *procfs.Proc) (Rollup, error) {
	var ru Rollup
	err := readProc(p, "smaps_rollup", func(r io.Reader) (err error) {
		ru, err = ParseRollup(r)
		return err
	})
	return ru, err
}

// readProc opens /proc/PID/name and hands it to parse. The file is parsed
// as it streams in rather than read whole first: smaps of a big process
// runs to megabytes.
func readProc(p *procfs.Proc, name string, parse func(io.Reader) error) error {
	pid := p.Pid
	dir, err := procDirOf(p)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if err != nil {
		return procErr(pid, err)
	}
	defer f.Close()
	if err := parse(f); err != nil {
		return fmt.Errorf("%s: %w", procfs.Shown(pid, path), procErr(pid, err))
	}
	return nil
}

// ExePath returns the path of the process's executable as maps names it,
// for Hints.ExePath.
func ExePath(pid int) (string, error) { return ExePathProc(procfs.ByPid(pid)) }

// ExePathProc is ExePath of the process p holds.
func ExePathProc(pr *procfs.Proc) (string, error) {
	dir, err := procDirOf(pr)
	if err != nil {
		return "", err
	}
	p, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil {
		return "", procErr(pr.Pid, err)
	}
	// For a deleted executable both this and Mapping.Path end in
	// " (deleted)", so they still compare equal.
	return p, nil
}

// ReadHints collects the Hints Classify uses for a live process.
func ReadHints(pid int) (Hints, error) { return ReadHintsProc(procfs.ByPid(pid)) }

// ReadHintsProc is ReadHints of the process p holds.
func ReadHintsProc(p *procfs.Proc) (Hints, error) {
	exe, err := ExePathProc(p)
	if err != nil {
		return Hints{}, err
	}
	sps, err := StackPointersProc(p)
	if err != nil {
		return Hints{}, err
	}
	return Hints{ExePath: exe, StackPointers: sps}, nil
}

// StackPointers returns the user stack pointer of every thread of pid that
// is blocked (in a syscall or stopped), keyed by thread id, as the kernel
// reports it in /proc/PID/task/TID/syscall. Running threads have no entry:
// their registers are not saved anywhere the kernel can show. Reading the
// syscall file needs ptrace rights over the process.
func StackPointers(pid int) (map[int]uint64, error) { return StackPointersProc(procfs.ByPid(pid)) }

// StackPointersProc is StackPointers of the process p holds.
func StackPointersProc(p *procfs.Proc) (map[int]uint64, error) {
	tids, err := p.Tasks()
	if err != nil {
		return nil, err
	}
	sps := make(map[int]uint64, len(tids))
	for _, tid := range tids {
		sc, err := p.ReadSyscall(tid)
		if errors.Is(err, procfs.ErrNoProcess) {
			continue // the thread exited after the directory was listed
		}
		if err != nil {
			return nil, err
		}
		if !sc.Running {
			sps[tid] = sc.SP
		}
	}
	return sps, nil
}

// QueryIoctl is the PROCMAP_QUERY ioctl on /proc/PID/maps (Linux 6.11):
// _IOWR('f', 17, struct procmap_query). QuerySize is the struct's size and
// the Query... offsets are where its fields are: what Query and the image
// routine (ptrace), which issues it from inside the target, both need.
const (
	QueryIoctl    = 0xc0686611
	QuerySize     = 104
	QueryAddrOff  = 16 // query_addr, in
	QueryStartOff = 24 // vma_start, out
	QueryEndOff   = 32 // vma_end, out
)

// Query asks the kernel for the bounds of the mapping of process pid that
// holds addr, without reading the whole list. A kernel before 6.11 answers
// ENOTTY; an address in no mapping, ENOENT.
func Query(pid int, addr uint64) (start, end uint64, err error) {
	return QueryProc(procfs.ByPid(pid), addr)
}

// QueryProc is Query of the process p holds.
func QueryProc(p *procfs.Proc, addr uint64) (start, end uint64, err error) {
	pid := p.Pid
	dir, err := procDirOf(p)
	if err != nil {
		return 0, 0, err
	}
	f, err := os.Open(filepath.Join(dir, "maps"))
	if err != nil {
		return 0, 0, procErr(pid, err)
	}
	defer f.Close()
	var q [QuerySize / 8]uint64
	q[0], q[QueryAddrOff/8] = QuerySize, addr
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), QueryIoctl, uintptr(unsafe.Pointer(&q[0]))); e != 0 {
		return 0, 0, fmt.Errorf("process %d: querying the mapping at %#x: %w", pid, addr, e)
	}
	return q[QueryStartOff/8], q[QueryEndOff/8], nil
}
