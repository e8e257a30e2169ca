// Package report owns the model of what one run of arenactl learned about a
// target: the malloc statistics (glibc's own or the walk's), the memory map
// by class, how the numbers were obtained (an injected call, a read-only
// walk, a core) and what a trim did. Every renderer (table, JSON, XML) and
// the diagnosis read this one model, so they cannot disagree; numbers
// derived from it (in use, free %, totals) are computed here, once.
package report

import (
	"time"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/glibc/predict"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// Report is what `arenactl info` learned about a target. Every renderer
// (table, JSON, XML) reads this one value, so they cannot disagree.
type Report struct {
	Pid     int
	Exe     string
	Libc    LibcInfo
	Threads int
	Malloc  *mallocinfo.Info
	Maps    MapsSummary
	// Injection says which thread ran malloc_info and for how long it was
	// held; nil when nothing ran in the target.
	Injection *Injection
	// ReadOnly is set when the report comes from reading memory instead.
	ReadOnly *ReadOnly
	// Core is set when the report comes from a core file.
	Core *CoreInfo
	// Residency is what the pagemap said of the walk's free pages and
	// mmapped chunks, for the RSS waterfall; nil when no walk was made.
	Residency *Residency
	// Server is a database server's own memory accounting (--mysql);
	// ServerErr why it could not be read.
	Server    *ServerMemory
	ServerErr string
}

// CoreInfo says which core a report comes from and why it was written.
type CoreInfo struct {
	Path      string
	Command   string
	Snapshot  bool   // written by arenactl snapshot, not by a kernel or gcore
	CrashTid  int    // the thread that received the signal
	Signal    int    // 0 when the core records none (gcore, snapshots)
	FaultAddr uint64 // si_addr
	// LibcNotes say what was tried for libc and not used (a file of
	// another build, a snapshot note that did not fit), in order.
	LibcNotes []string
}

// ReadOnly is what the read-only walk adds to a report.
type ReadOnly struct {
	Walk    *glibc.Walk
	Tcaches []glibc.ThreadCache
	Frozen  time.Duration // how long every thread was stopped; 0 with Torn
	Walked  time.Duration // how long the walk itself took (within Frozen unless Hold is "image")
	Torn    bool          // read without stopping the process: numbers may be inconsistent
	// Hold is how the process was kept still: "image" (stopped while a
	// copy-on-write image was made, which was then read), "walk" (stopped
	// for the whole walk) or "none"; "" for a core.
	Hold string
	// Cloned is how long making the image took, within Frozen.
	Cloned time.Duration
	// LeftOut and LeftOutBytes are the mappings the image was made
	// without (memory the allocator does not own), so that the clone did
	// not copy their page tables.
	LeftOut      int
	LeftOutBytes uint64
	// ImageSkipped says why no image was made when one was wanted.
	ImageSkipped string
	// TcachesSkipped says why no thread's tcache was read ("" when they
	// were looked for).
	TcachesSkipped string
}

// LibcInfo identifies the target's libc.
type LibcInfo struct {
	Path    string
	Version layouts.Version
	Banner  string
	BuildID string
	// Static: Path is a static executable holding its own glibc malloc.
	Static bool
	// VersionFrom says how Version was found when there was no banner.
	VersionFrom string
	// MinVersion is set when memory alone narrowed the version to the
	// range MinVersion to Version.
	MinVersion layouts.Version
	// Source says where a core's libc came from; "" for a live process.
	Source string
}

// LibcOf extracts the identifying part of a Libc.
func LibcOf(l *libc.Libc) LibcInfo {
	return LibcInfo{Path: l.Path, Version: l.Version, Banner: l.Banner, BuildID: l.BuildID, Static: l.Static, VersionFrom: l.VersionFrom,
		MinVersion: l.MinVersion, Source: l.Source}
}

// MapsSummary is the memory-map side of a report: per-class totals and the
// process-wide counters of smaps_rollup.
type MapsSummary struct {
	Classes []maps.ClassSummary
	Rollup  maps.Rollup
	// Unmeasured: the source records sizes only (a kernel core has no
	// smaps), so every counter above is unknown, not zero.
	Unmeasured bool
}

// Injection records one borrowed thread.
type Injection struct {
	Tid      int
	Blocked  string        // the syscall it was parked in, or "running"
	Refusals int           // threads examined and found unsafe before this one
	Stopped  time.Duration // from the interrupt to the release
	Call     time.Duration // time spent inside the injected calls
	// Preflight is the time spent checking the allocator's lists,
	// PreflightWalks how many walks of every arena it took: 1, or 2 when
	// the first (nothing stopped) found the ring of arenas damaged.
	// PreflightLocked arenas that the first walk saw damaged (most often
	// lists in flux) were walked again while the borrowed thread held
	// their lock, for PreflightLockHeld in all. PreflightSkipped says why
	// there was no walk (it could not be done; the injection went ahead).
	Preflight         time.Duration
	PreflightWalks    int
	PreflightLocked   int
	PreflightLockHeld time.Duration
	PreflightSkipped  string
}

// TrimReport is what `arenactl trim` did and measured.
type TrimReport struct {
	Pid       int
	Libc      LibcInfo
	Pad       uint64
	Result    int // malloc_trim's return: 1 if memory was given back
	Injection Injection
	Before    MapsSummary
	After     MapsSummary
	// Prediction is what the free lists said malloc_trim would release,
	// from the walk made just before the call (nil if it could not be
	// made). With DryRun nothing ran: Result, Injection and After are
	// unset, Frozen is how long every thread was stopped (for the image,
	// or for the walk), and Damage what the walk found.
	Prediction *predict.Trim
	DryRun     bool
	Frozen     time.Duration
	// Hold is how the dry run held the process ("image" or "walk", as
	// ReadOnly.Hold); ImageSkipped why no image was made, if none was.
	Hold, ImageSkipped string
	Damage             []glibc.Damage
}

// Released is the drop in resident memory across the trim, process-wide.
func (t *TrimReport) Released() int64 {
	return int64(t.Before.Rollup.Rss) - int64(t.After.Rollup.Rss)
}

// Snapshot is what `arenactl snapshot` did.
type Snapshot struct {
	Pid        int
	Exe        string
	Path       string
	Size       int64 // bytes of the file written
	CoreSize   int64 // bytes of the core before compression
	Compressed bool
	Full       bool
	Frozen     time.Duration
	// Hold is "image" when the core was written from a copy-on-write
	// image (Frozen is then how long making it took, Cloned of that), or
	// "walk" when every thread was stopped while it was written;
	// ImageSkipped says why no image was made.
	Hold         string
	Cloned       time.Duration
	ImageSkipped string
	// LeftOut, LeftOutBytes: mappings the image was made without, listed
	// in the core with nothing dumped (as ReadOnly's).
	LeftOut        int
	LeftOutBytes   uint64
	Threads        int
	Dumped         uint64 // bytes of process memory in the core
	Zeros          uint64 // bytes of memory chosen that read as zeros: listed, not written
	Unreadable     uint64 // bytes of memory chosen that the process would not give: left out
	Mappings       int
	DumpedMappings int
	Segments       int
	AnonRSS        uint64 // the process's anonymous resident memory at the time
	Recorded       uint64 // bytes added because the allocator walk read them
	WalkErr        string // the recording walk failed; the core may lack some mmapped chunks' headers
	// RemovedPartials are partial files of the same path that a killed
	// snapshot had left, removed before this one was written.
	RemovedPartials []string
}

// Maps is what `arenactl maps` read: every mapping classified, and the
// totals per class.
type Maps struct {
	Pid      int
	Mappings []maps.Mapping
	Summary  MapsSummary
	FromCore bool // read from a core; Summary.Unmeasured says whether it recorded counters
}

// Leaks is a heap profile of a live process over a window, with what the
// sampler did to it and the in-use bytes read before and after.
type Leaks struct {
	Pid     int
	Exe     string
	Libc    LibcInfo
	Window  stackprof.Window
	Profile *stackprof.Profile
	Samples int
	// Dropped: samples the sampler had no room for; Untracked: sampled
	// blocks whose free could not be watched (counted as held);
	// Shortened: samples taken with only the top of their stack
	// (stackprof.Raw.Short).
	Dropped, Untracked uint64
	Shortened          uint64
	// MaxShift: the sampler doubled its mean interval up to this many
	// times, arenactl reading its samples slower than they came.
	MaxShift int
	Patched  int      // GOT entries pointed at the sampler
	Skipped  []string // GOT entries left alone, and why
	Left     SamplerLeft
	Stopped  time.Duration // every thread stopped, at attach, rescans and detach
	// InUseBefore and InUseAfter are the bytes in use (chunks held by the
	// program, tcaches excluded) from read-only walks before and after
	// the window; Measured is false when the walk after failed.
	InUseBefore, InUseAfter uint64
	Measured                bool
	Interrupted             bool // the window ended by a signal, not by its duration
}

// Growth is the in-use growth the walks saw over the window.
func (l *Leaks) Growth() int64 { return int64(l.InUseAfter) - int64(l.InUseBefore) }

// SamplerLeft says what taking the sampler out left in the process; its
// fields are internal/sampler's Left, which the use case converts.
type SamplerLeft struct {
	Addr, Size uint64 // the sampler's memory, if kept (0: removed)
	Why        string
	Restored   int      // GOT entries put back
	Changed    []string // GOT entries something else rewrote meanwhile: left as they are
	Unloaded   []string // GOT entries of objects unloaded meanwhile (dlclose): gone with them
}
