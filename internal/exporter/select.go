package exporter

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
)

// Selector says which processes to watch: every PID in Pids, and every
// process that matches all the kinds of matcher given (a process matches a
// kind when one of its expressions matches: repeating --comm means "this
// name or that one", --comm with --unit means "this name in that unit").
// Expressions are anchored: "mariadbd" matches that name only.
type Selector struct {
	Pids   []int
	Comm   []*regexp.Regexp // /proc/PID/comm (the kernel's 15-character name)
	Exe    []*regexp.Regexp // the executable's path, /proc/PID/exe
	Cgroup []*regexp.Regexp // the cgroup path (procfs.Cgroup)
	Unit   []*regexp.Regexp // the systemd unit, from the cgroup path
}

// Compile anchors expr and compiles it; what is wrong with it says which
// flag it came from.
func Compile(flag, expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, expr, err)
	}
	return regexp.Compile("^(?:" + expr + ")$")
}

// HasMatchers reports whether any matcher is set (the selector then needs
// a scan of /proc each cycle).
func (s *Selector) HasMatchers() bool {
	return len(s.Comm)+len(s.Exe)+len(s.Cgroup)+len(s.Unit) > 0
}

// Empty reports whether the selector can select nothing.
func (s *Selector) Empty() bool { return len(s.Pids) == 0 && !s.HasMatchers() }

// process is one process as discovery saw it. Start tells it from a later
// process that reuses its PID.
type process struct {
	Given  bool // by --pid, not by a matcher
	Pid    int
	Start  uint64
	Comm   string
	Exe    string
	Cgroup string
	Unit   string
	// proc holds the process's /proc directory from discovery on: what
	// was read to select it, and whether it is still alive, are that
	// process's, never a later one's given its pid. Its owner closes it:
	// discovery when the process is not watched, else the target's loop.
	proc *procfs.Proc
}

// close lets the process's /proc directory go.
func (p *process) close() { p.proc.Close() }

type key struct {
	pid   int
	start uint64
}

func (p *process) key() key { return key{p.Pid, p.Start} }

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// look reads what the selector needs of pid, cheapest first, and says
// whether it is selected. Zombies and kernel threads are never selected;
// neither is self (the exporter cannot trace itself), nor an arenactl's
// copy-on-write image of a process.
func (s *Selector) look(pid, self int, given bool) (*process, bool) {
	if pid == self {
		return nil, false
	}
	// Held first, then read: its stat's start time is the identity of the
	// process held, and every later read is of that process.
	proc, err := procfs.OpenProc(pid)
	if err != nil {
		return nil, false
	}
	p, ok := s.lookAt(proc, given)
	if !ok {
		proc.Close()
		return nil, false
	}
	return p, true
}

func (s *Selector) lookAt(proc *procfs.Proc, given bool) (*process, bool) {
	st, err := proc.ReadStat()
	if err != nil || st.Exited() {
		return nil, false
	}
	p := &process{Given: given, Pid: proc.Pid, Start: st.StartTime, Comm: st.Comm, proc: proc}
	if len(s.Comm) > 0 && !given && !anyMatch(s.Comm, p.Comm) {
		return nil, false
	}
	exe, err := proc.Exe()
	switch {
	case errors.Is(err, procfs.ErrNoProcess):
		return nil, false
	case err != nil && !given:
		// A kernel thread has no executable; a process we may not read
		// is not reachable by a matcher (a given PID is kept, to say why).
		return nil, false
	}
	p.Exe = strings.TrimSuffix(exe, " (deleted)")
	if len(s.Exe) > 0 && !given && !anyMatch(s.Exe, p.Exe) {
		return nil, false
	}
	if cg, err := proc.Cgroup(); err == nil {
		p.Cgroup, p.Unit = cg, procfs.SystemdUnit(cg)
	}
	if !given && (len(s.Cgroup) > 0 && !anyMatch(s.Cgroup, p.Cgroup) || len(s.Unit) > 0 && !anyMatch(s.Unit, p.Unit)) {
		return nil, false
	}
	// A copy-on-write image an arenactl made of a process (this exporter's
	// collections make one each) has its comm, executable and cgroup: it
	// is arenactl's, not the program's, and lives a walk's time.
	if ptrace.IsImageOf(proc) {
		return nil, false
	}
	return p, true
}

// discover lists the processes selected now, given PIDs first, each once,
// each with its /proc directory held (the caller closes those it keeps
// no target for).
func (s *Selector) discover(self int) ([]*process, error) {
	var out []*process
	seen := map[int]bool{}
	for _, pid := range s.Pids {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if p, ok := s.look(pid, self, true); ok {
			out = append(out, p)
		}
	}
	if !s.HasMatchers() {
		return out, nil
	}
	pids, err := procfs.Pids()
	if err != nil {
		return out, err
	}
	for _, pid := range pids {
		if seen[pid] {
			continue
		}
		if p, ok := s.look(pid, self, false); ok {
			out = append(out, p)
		}
	}
	return out, nil
}
