package procfs

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Proc is where one process's /proc files are read. Opened (OpenProc), it
// holds the process's /proc/PID directory open: every file read through it
// is that process's, and once the process has exited and been reaped
// every read through it fails (ESRCH: ErrNoProcess), even when a later
// process has been given its pid. A pid read anew each time can name that
// later process instead. ByPid is the other kind: /proc/PID by its number,
// for a process looked at once.
type Proc struct {
	Pid  int
	base string // the directory files are named under
	fd   int    // the held directory; -1 for ByPid
}

// OpenProc holds the directory of the process with this pid now. Close it
// when done.
func OpenProc(pid int) (*Proc, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, Error(pid, err)
	}
	// The held directory is reached by name through this process's own
	// descriptor table: a path under it resolves from the directory held,
	// not from the pid. Where /proc/self does not name arenactl (a /proc
	// mounted for a pid namespace it is not in), the pid's directory is
	// all there is, as before.
	p := &Proc{Pid: pid, base: fmt.Sprintf("/proc/self/fd/%d", fd), fd: fd}
	if _, err := os.Stat(p.base); err != nil {
		unix.Close(fd)
		return ByPid(pid), nil
	}
	return p, nil
}

// ByPid is /proc/PID of whatever process has the pid when each file is
// opened.
func ByPid(pid int) *Proc { return &Proc{Pid: pid, base: fmt.Sprintf("/proc/%d", pid), fd: -1} }

// Path names a file of the process (name relative to /proc/PID).
func (p *Proc) Path(name string) string { return p.base + "/" + name }

// Shown names a file of process pid as its user knows it (/proc/PID/...),
// also when it was read through a held directory (/proc/self/fd/N/...).
func Shown(pid int, path string) string {
	rest, ok := strings.CutPrefix(path, "/proc/self/fd/")
	if !ok {
		return path
	}
	if _, name, ok := strings.Cut(rest, "/"); ok {
		return fmt.Sprintf("/proc/%d/%s", pid, name)
	}
	return fmt.Sprintf("/proc/%d", pid)
}

// Close lets the directory go; a ByPid Proc holds nothing.
func (p *Proc) Close() error {
	if p == nil || p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	// The descriptor's number may be given to another file now: no
	// path may name it again.
	p.fd, p.base = -1, "/proc/self/fd/closed"
	return err
}
