package ptrace

import (
	"encoding/binary"
	"time"

	"github.com/arenactl/arenactl/internal/arch/site"
	"github.com/arenactl/arenactl/internal/procfs"
)

// A call site is the small mapping arenactl creates in the target for the
// duration of a session. It holds the thread's own registers and extended
// state, and the routine every injected call returns into. The routine puts
// all of that back and jumps to where the thread was, so a borrowed thread
// comes back whole even if arenactl dies (SIGKILL) mid-call: nothing of the
// restore depends on the tracer.
//
// Layout (offsets from the mapping's start):
//
//	page 0 (rw)  header: what a later run needs to find and judge a leftover
//	             0x100 the thread's general registers, as the routine loads them
//	             0x200 a journal the caller keeps (what else it created)
//	page 1 (r-x) the routine
//	page 2… (rw) the thread's XSAVE area, for xrstor
const (
	siteMagic   = "ARENACTL"
	siteVersion = 1

	hdrVersion  = site.HdrVersion  // u32 version, u32 total size
	hdrCreator  = site.HdrCreator  // pid of the arenactl that made it
	hdrStart    = site.HdrStart    // its start time (clock ticks after boot, /proc/PID/stat field 22)
	hdrTid      = site.HdrTid      // the borrowed thread
	hdrPending  = site.HdrPending  // sequence number of the call started last (written by arenactl)
	hdrDone     = site.HdrDone     // sequence number of the call that returned last (written by the routine)
	hdrResult   = site.HdrResult   // its rax (written by the routine)
	hdrRestored = site.HdrRestored // 1 once the routine put the thread back itself, or arenactl did
	hdrFrameSP  = site.HdrFrameSp  // where the return address into the routine sits on the thread's stack
	hdrRFBM     = site.HdrRfbm     // xrstor's requested-feature bitmap
	hdrTimeout  = site.HdrTimeout  // struct timespec: gateTimeout
	regsOff     = site.RegsOff
	journalOff  = site.JournalOff
	journalSize = site.JournalSize
	xsaveOff    = site.XsaveOff
)

// gateTimeout bounds how long the routine waits, after the call returned,
// for arenactl to take the thread back (a ppoll on nothing). arenactl sees
// the call's end in the site's done word and interrupts the thread in that
// wait; if arenactl is gone (or stopped for longer than this), the wait
// times out and the routine restores the thread by itself. Nothing here
// traps or signals: untraced, it is a short sleep. ppoll, because an
// interrupted ppoll restarts through ERESTARTNOHAND, while a futex or
// nanosleep with a timeout would overwrite the thread's restart_block,
// which the thread still needs if it was parked in such a sleep itself.
// (Resuming calls with PTRACE_SYSCALL and stopping at a marker syscall
// would need no wait, but stops the thread at every syscall of the call:
// malloc_trim makes thousands, which made it a hundred times slower.)
//
// A second: long enough that a loaded machine (the tests' own, at load 10
// on 2 CPUs) does not keep arenactl from its 500 µs polls that long, which at
// 250 ms it did, once; short enough that a thread whose arenactl was killed
// mid-call waits no more than that before it goes on.
const (
	gateSec  = site.GateSec  // timespec.tv_sec
	gateNsec = site.GateNsec // timespec.tv_nsec
)

// GateWait is how long, at most, a thread left at an earlier run's gate
// (its arenactl killed) takes to restore itself and leave the site, once it
// runs.
const GateWait = gateSec*time.Second + gateNsec*time.Nanosecond

// The code page is internal/arch/site's image for the machine: the entry
// (where calls return to: it stores the result and the done word, then
// waits at the gate), restore (just after the gate's wait: it puts back
// the extended state, the registers, the flags, rsp and rip, and marks the
// site restored), and the routines of clone.go and lock.go.

// SiteInfo is a call site found in a process: one made by another arenactl
// run that did not remove it (it was killed, or left it on purpose because
// its journal records objects it could not remove).
type SiteInfo struct {
	Addr, Size   uint64
	Creator      int    // pid of the arenactl that made it
	CreatorStart uint64 // and its start time
	Tid          int    // the thread it was made for
	Pending      uint64 // sequence number of the last call started
	Done         uint64 // sequence number of the last call that returned into the routine
	Result       uint64 // that call's return value
	Restored     bool   // the thread was put back (by the routine, or by arenactl)
	FrameSP      uint64
	Journal      []byte // the creator's own record of what else it made
	// Resume is where the routine puts the thread back. It lies inside
	// another call site when the thread was borrowed while still in that
	// one: the older site must then outlive this one.
	Resume uint64
}

// CreatorAlive reports whether the arenactl that made the site still runs.
func (s *SiteInfo) CreatorAlive() bool {
	return procfs.Identity{Pid: s.Creator, Start: s.CreatorStart}.Alive()
}

// JournalAddr is where the site's journal is in the target: a later run
// that removes what the journal records updates it there, step by step.
func (s *SiteInfo) JournalAddr() uint64 { return s.Addr + journalOff }

// HoldsObjects reports whether the journal records objects the creator's
// calls made that are still in the target (JournalHolds non-zero): only
// the caller that keeps the journal can remove them, and the site with them.
func (s *SiteInfo) HoldsObjects() bool {
	return len(s.Journal) >= JournalHolds+8 && le64(s.Journal[JournalHolds:]) != 0
}

// Contains reports whether addr is inside the site.
func (s *SiteInfo) Contains(addr uint64) bool { return addr >= s.Addr && addr < s.Addr+s.Size }

// Holds says how thread tid, stopped with registers r, is tied to the site,
// or "" if it is not: it is executing in the routine (waiting at its gate,
// or restoring itself), or it is the site's thread and a call started there
// has not returned yet, so it will return into the routine later.
func (s *SiteInfo) Holds(tid int, r *Regs) string {
	if s.Contains(PC(r)) {
		return "is executing in"
	}
	if tid == s.Tid && !s.Restored && s.Pending != s.Done {
		return "runs a call that will return into"
	}
	return ""
}

// SiteHolding returns the first call site, of an earlier run, that thread
// tid (stopped, with registers r) is tied to (see Holds), as an
// *AtCallSiteError, or nil.
func (p *Process) SiteHolding(tid int, r *Regs) error {
	sites, err := p.FindSites()
	if err != nil {
		return err
	}
	return Holding(sites, tid, r)
}

// Holding returns the first of sites (FindSites') that thread tid, stopped
// with registers r, is tied to (see Holds), as an *AtCallSiteError, or nil:
// one listing of the sites serves every thread of a freeze.
func Holding(sites []SiteInfo, tid int, r *Regs) error {
	for _, s := range sites {
		if why := s.Holds(tid, r); why != "" {
			return &AtCallSiteError{Tid: tid, Site: s.Addr, Creator: s.Creator, Why: why}
		}
	}
	return nil
}

// FindSites lists the call sites in the process other than those of threads
// this Process is using now. A site's first page may have merged with
// the anonymous mapping below it, but its code page cannot merge with
// anything (its neighbours are the site's own writable pages): each
// anonymous one-page r-x mapping whose page below holds the mark is a site.
// (One killed between its mmap and its mprotect, a window of two syscalls,
// is not found.)
func (p *Process) FindSites() ([]SiteInfo, error) {
	ms, err := p.mappings()
	if err != nil {
		return nil, err
	}
	own := map[uint64]bool{}
	p.mu.Lock()
	for _, th := range p.threads {
		if th.inj != nil && th.inj.base != 0 {
			own[th.inj.base] = true
		}
	}
	p.mu.Unlock()
	var out []SiteInfo
	for _, m := range ms {
		if m.Perms != "r-xp" || m.Path != "" || m.Inode != 0 || m.Size() != pageSize || m.Start < codeOff {
			continue
		}
		lo := m.Start - codeOff
		if own[lo] {
			continue
		}
		var mark [8]byte
		if _, err := p.ReadAt(mark[:], lo); err != nil || string(mark[:]) != siteMagic {
			continue
		}
		page := make([]byte, codeOff)
		if _, err := p.ReadAt(page, lo); err != nil {
			continue
		}
		le := binary.LittleEndian
		if le.Uint32(page[hdrVersion:]) != siteVersion {
			continue
		}
		out = append(out, SiteInfo{
			Addr: lo, Size: uint64(le.Uint32(page[hdrVersion+4:])),
			Creator: int(le.Uint64(page[hdrCreator:])), CreatorStart: le.Uint64(page[hdrStart:]),
			Tid: int(le.Uint64(page[hdrTid:])), Pending: le.Uint64(page[hdrPending:]),
			Done: le.Uint64(page[hdrDone:]), Result: le.Uint64(page[hdrResult:]),
			Restored: le.Uint64(page[hdrRestored:]) == 1, FrameSP: le.Uint64(page[hdrFrameSP:]),
			Journal: append([]byte(nil), page[journalOff:journalOff+journalSize]...),
			Resume:  le.Uint64(page[slotPC:]),
		})
	}
	return out, nil
}

// CallSeq is the sequence number of the last call started on the thread
// (the next one gets CallSeq()+1).
func (th *Thread) CallSeq() uint64 {
	if th.inj == nil {
		return 0
	}
	return th.inj.seq
}

// JournalHolds is the journal's first word: while the caller keeps it
// non-zero, the site records objects still in the target, and Detach leaves
// the site in place (marked as restored) rather than lose that record.
const JournalHolds = 0

// SiteHeaderSize is how much of a site's first page MadeBySelf reads.
const SiteHeaderSize = hdrStart + 8

// MadeBySelf reports whether hdr, the first SiteHeaderSize bytes of a
// mapping, is the header of a call site this arenactl made: how a copy of
// the process (a CloneImage) is told from another process.
func MadeBySelf(hdr []byte) bool {
	self := procfs.Self()
	return len(hdr) >= SiteHeaderSize && string(hdr[:len(siteMagic)]) == siteMagic &&
		le64(hdr[hdrCreator:]) == uint64(self.Pid) && le64(hdr[hdrStart:]) == self.Start
}
