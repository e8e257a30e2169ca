// Package procfs owns arenactl's reading of /proc/PID/*: each file is
// parsed here, once, with one rule for what its fields mean, and its errors
// say which process and file they concern and match errkind's kinds (a
// process gone, not readable, a zombie). The one check of whether a pid
// still names the same process (Identity) is here too, for the same reason.
// Nothing here attaches to or stops anything (internal/ptrace does).
package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/arenactl/arenactl/internal/errkind"
)

// The conditions a /proc file may be the first to see are the kinds of
// package errkind, under the names its callers know them by here.
var (
	// ErrNoProcess: the process or thread does not exist (any more).
	ErrNoProcess = errkind.ErrNoProcess
	// ErrPermission: the kernel refused to let us read or trace the process.
	ErrPermission = errkind.ErrPermission
	// ErrGone: the process exited or was killed while we worked on it.
	ErrGone = errkind.ErrGone
)

// Path is /proc/PID/name.
func Path(pid int, name string) string { return fmt.Sprintf("/proc/%d/%s", pid, name) }

// Error wraps a failure to read /proc/PID/... as the condition it means:
// ErrNoProcess for a process that is gone, ErrPermission for one we may not
// read; other errors as they are, with the process.
func Error(pid int, err error) error {
	if pe, ok := err.(*os.PathError); ok && pe.Path != Shown(pid, pe.Path) {
		shown := *pe
		shown.Path = Shown(pid, pe.Path)
		err = &shown
	}
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	case errors.Is(err, os.ErrPermission):
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("process %d: %s: %w", pid, pe.Path, ErrPermission)
		}
		return fmt.Errorf("process %d: %w", pid, ErrPermission)
	}
	return fmt.Errorf("process %d: %w", pid, err)
}

// Stat is what arenactl uses of /proc/PID/stat.
type Stat struct {
	Comm                string // may hold spaces and ')'
	State               byte   // R, S, D, T, t, Z, X, ...
	PPid, Pgrp, Session int
	StartTime           uint64 // clock ticks after boot: tells a process from a later one with its pid
}

// ReadStat reads /proc/PID/stat.
func ReadStat(pid int) (Stat, error) { return ByPid(pid).ReadStat() }

// ReadStat reads the stat file of the process p holds.
func (p *Proc) ReadStat() (Stat, error) {
	pid := p.Pid
	b, err := os.ReadFile(p.Path("stat"))
	if err != nil {
		return Stat{}, Error(pid, err)
	}
	return parseStat(pid, string(b))
}

func parseStat(pid int, s string) (Stat, error) {
	var st Stat
	// pid (comm) state ppid pgrp session ...: comm may hold spaces and ')'.
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp < lp {
		return st, fmt.Errorf("process %d: unexpected %s %q", pid, Path(pid, "stat"), s)
	}
	st.Comm = s[lp+1 : rp]
	f := strings.Fields(s[rp+1:])
	if len(f) == 0 || f[0] == "" {
		return st, fmt.Errorf("process %d: unexpected %s %q", pid, Path(pid, "stat"), s)
	}
	st.State = f[0][0]
	if len(f) >= 4 {
		st.PPid, _ = strconv.Atoi(f[1])
		st.Pgrp, _ = strconv.Atoi(f[2])
		st.Session, _ = strconv.Atoi(f[3])
	}
	if len(f) >= 20 {
		st.StartTime, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return st, nil
}

// Exited reports whether the state is a zombie's or a dead process's.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// Owner is the uid and gid that own /proc/PID: the process's effective ids.
func Owner(pid int) (uid, gid uint32, err error) { return ByPid(pid).Owner() }

// Owner is the uid and gid of the process p holds (see Owner).
func (p *Proc) Owner() (uid, gid uint32, err error) {
	fi, err := os.Stat(p.Path(""))
	if err != nil {
		return 0, 0, Error(p.Pid, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("process %d: no owner for %s", p.Pid, Shown(p.Pid, p.Path("")))
	}
	return st.Uid, st.Gid, nil
}

// Cmdline is the process's arguments joined by spaces.
func Cmdline(pid int) (string, error) {
	b, err := os.ReadFile(Path(pid, "cmdline"))
	if err != nil {
		return "", Error(pid, err)
	}
	return strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " "), nil
}

// Auxv is the process's auxiliary vector, raw.
func Auxv(pid int) ([]byte, error) {
	b, err := os.ReadFile(Path(pid, "auxv"))
	if err != nil {
		return nil, Error(pid, err)
	}
	return b, nil
}

// Exe is the path of the process's executable as the kernel names it.
func Exe(pid int) (string, error) { return ByPid(pid).Exe() }

// Exe is the executable of the process p holds (see Exe).
func (p *Proc) Exe() (string, error) {
	exe, err := os.Readlink(p.Path("exe"))
	if err != nil {
		return "", Error(p.Pid, err)
	}
	return exe, nil
}

// Identity names one process unambiguously: a pid, and the start time
// that tells it from a later process reusing that pid. It is the one check
// of "is this still the same process": for a watched target (watch, the
// exporter) and for the arenactl that placed something in a target.
type Identity struct {
	Pid   int
	Start uint64 // clock ticks after boot (Stat.StartTime)
}

// IdentityOf says which process pid is now: ErrNoProcess when there is
// none, or it has exited (a zombie).
func IdentityOf(pid int) (Identity, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return Identity{}, err
	}
	if st.Exited() {
		return Identity{}, fmt.Errorf("process %d has exited: %w", pid, ErrNoProcess)
	}
	return Identity{Pid: pid, Start: st.StartTime}, nil
}

// Alive reports whether the process still runs: its pid names the same
// process (not a later one) and it has not exited.
func (id Identity) Alive() bool {
	now, err := IdentityOf(id.Pid)
	return err == nil && now == id
}

var self = sync.OnceValue(func() Identity {
	id, _ := IdentityOf(os.Getpid())
	return id
})

// Self is this arenactl's identity, as recorded in what it places in a
// target so that a later run can tell whether its maker still runs.
func Self() Identity { return self() }
