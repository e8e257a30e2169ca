package ptrace

import (
	"encoding/binary"
	"os"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
)

// IsImage reports whether pid is a copy-on-write image an arenactl made of
// some process (CloneImage): a copy of that process, with its comm and
// executable, that a watcher selecting processes by name must not take for
// one of the program's. It is recognised without stopping it: one thread,
// blocked where the image routine waits (in a call site: an anonymous
// one-page r-xp mapping right after a page that starts with siteMagic),
// whose site names another thread (hdrTid, the target's thread that made
// it) than itself. A single-threaded program borrowed by an injection,
// waiting at the site's gate, names itself there (in its own pid
// namespace).
func IsImage(pid int) bool { return IsImageOf(procfs.ByPid(pid)) }

// IsImageOf is IsImage of the process p holds: every file it reads is that
// process's, never a later one's given its pid.
func IsImageOf(p *procfs.Proc) bool {
	pid := p.Pid
	tids, err := p.Tasks()
	if err != nil || len(tids) != 1 {
		return false
	}
	sc, err := p.ReadSyscall(pid)
	if err != nil || sc.Running || sc.PC < codeOff {
		return false
	}
	f, err := os.Open(p.Path("maps"))
	if err != nil {
		return false
	}
	ms, err := maps.ParseMaps(f)
	f.Close()
	if err != nil {
		return false
	}
	m, ok := maps.Find(ms, sc.PC)
	if !ok || m.Perms != "r-xp" || m.Path != "" || m.Inode != 0 || m.Size() != pageSize || m.Start < codeOff {
		return false
	}
	mem, err := os.Open(p.Path("mem"))
	if err != nil {
		return false
	}
	defer mem.Close()
	var hdr [hdrTid + 8]byte
	if _, err := mem.ReadAt(hdr[:], int64(m.Start-codeOff)); err != nil || string(hdr[:8]) != siteMagic {
		return false
	}
	// The site names the thread in the target's pid namespace, which is
	// the image's too: compared with the process's innermost id.
	self := pid
	if st, err := p.ReadTaskStatus(pid); err == nil && len(st.NSpid) > 0 {
		self = st.NSpid[len(st.NSpid)-1]
	}
	return int(binary.LittleEndian.Uint64(hdr[hdrTid:])) != self
}
