package schema

import (
	"sort"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/report"
)

// Libc identifies the target's glibc.
type Libc struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Banner  string `json:"banner,omitempty"`
	BuildID string `json:"build_id,omitempty"`
	// Static: path is a static executable (read-only walks only).
	Static      bool   `json:"static,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	// For a core: where libc came from (a file whose build-id matches,
	// the snapshot's note, or memory alone), and, when memory alone could
	// not pin the version down, the oldest that fits (version is the
	// newest, whose format is printed).
	Source     string `json:"source,omitempty"`
	VersionMin string `json:"version_min,omitempty"`
}

// Injection is the thread borrowed to run malloc_info or malloc_trim.
type Injection struct {
	Tid       int    `json:"tid"`
	Blocked   string `json:"blocked_in"`
	StoppedUs int64  `json:"stopped_us"`
	CallUs    int64  `json:"call_us"`
	Refusals  int    `json:"refusals"`
	// The check of the free lists made before the call: how long it
	// took, how many walks of every arena (2 when the first, made with
	// nothing stopped, found the ring of arenas damaged), how many arenas
	// it walked again while the borrowed thread held their lock and for
	// how long in all, and why there was none (the injection went ahead
	// without it). preflight_frozen_us is always 0: no thread but the
	// borrowed one is stopped for the check any more (it was how long
	// every thread was stopped for a second walk).
	PreflightUs         int64  `json:"preflight_us"`
	PreflightWalks      int    `json:"preflight_walks"`
	PreflightFrozenUs   int64  `json:"preflight_frozen_us"`
	PreflightLocked     int    `json:"preflight_locked_arenas"`
	PreflightLockHeldUs int64  `json:"preflight_lock_held_us"`
	PreflightSkipped    string `json:"preflight_skipped,omitempty"`
}

// Size is one <size> or <unsorted> line of malloc_info.
type Size struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Total uint64 `json:"total"`
	Count uint64 `json:"count"`
	Fast  bool   `json:"fast"`
}

// Arena is one arena as malloc_info (or the walk, as glibc would) reports it.
type Arena struct {
	Index          int     `json:"index"`
	Main           bool    `json:"main"`
	SystemCurrent  uint64  `json:"system_current"`
	SystemMax      uint64  `json:"system_max"`
	InUseBytes     uint64  `json:"in_use_bytes"`
	FreeBytes      uint64  `json:"free_bytes"`
	FreePercent    float64 `json:"free_percent"`
	FastCount      *uint64 `json:"fast_count"`
	FastBytes      *uint64 `json:"fast_bytes"`
	RestCount      uint64  `json:"rest_count"`
	RestBytes      uint64  `json:"rest_bytes"`
	LargestFree    uint64  `json:"largest_free_class"`
	AspaceTotal    uint64  `json:"aspace_total"`
	AspaceMprotect uint64  `json:"aspace_mprotect"`
	Subheaps       *uint64 `json:"subheaps"`
	Sizes          []Size  `json:"sizes"`
	Unsorted       *Size   `json:"unsorted"`
	// Walk is present with --read-only.
	Walk *ArenaWalk `json:"walk,omitempty"`
}

// Heap is one heap of a non-main arena.
type Heap struct {
	Addr         uint64 `json:"addr"`
	Size         uint64 `json:"size"`
	MprotectSize uint64 `json:"mprotect_size"`
}

// ArenaWalk is what the read-only walk adds to an arena.
type ArenaWalk struct {
	Addr            uint64 `json:"addr"`
	Mutex           uint32 `json:"mutex"`
	Flags           uint32 `json:"flags"`
	AttachedThreads uint64 `json:"attached_threads"`
	Top             uint64 `json:"top"`
	TopSize         uint64 `json:"top_size"`
	Heaps           []Heap `json:"heaps"`
	Walked          bool   `json:"walked"`
	InUseChunks     uint64 `json:"in_use_chunks"`
	InUseBytes      uint64 `json:"in_use_bytes"`
	FreeChunks      uint64 `json:"free_chunks"`
	FreeBytes       uint64 `json:"free_bytes"`
	FastChunks      uint64 `json:"fast_chunks"`
	FastBytes       uint64 `json:"fast_bytes"`
	TcacheChunks    uint64 `json:"tcache_chunks"`
	TcacheBytes     uint64 `json:"tcache_bytes"`
	LargestFree     uint64 `json:"largest_free_chunk"`
	TrimmableBytes  uint64 `json:"trimmable_bytes"`
}

// TcacheBin is a chunk size and how many chunks of it.
type TcacheBin struct {
	Size  uint64 `json:"size"`
	Count uint64 `json:"count"`
}

// Thread is one thread's tcache.
type Thread struct {
	Tid          int         `json:"tid"`
	Arena        *int        `json:"arena"`
	Tcache       uint64      `json:"tcache"`
	TcacheChunks uint64      `json:"tcache_chunks"`
	TcacheBytes  uint64      `json:"tcache_bytes"`
	TcacheBins   []TcacheBin `json:"tcache_bins"`
}

// Damage is an inconsistency the walk found in the allocator's lists.
type Damage struct {
	Arena uint64 `json:"arena"`
	Addr  uint64 `json:"addr"`
	What  string `json:"what"`
	Abort bool   `json:"glibc_would_abort"`
	Hang  bool   `json:"glibc_would_hang"`
}

// Params are malloc's tunables as mp_ holds them.
type Params struct {
	TrimThreshold  uint64 `json:"trim_threshold"`
	TopPad         uint64 `json:"top_pad"`
	MmapThreshold  uint64 `json:"mmap_threshold"`
	ArenaTest      uint64 `json:"arena_test"`
	ArenaMax       uint64 `json:"arena_max"`
	NoDynThreshold bool   `json:"no_dyn_threshold"`
	MmapMax        int32  `json:"mmap_max"`
	MaxMmaps       int32  `json:"max_mmaps"`
	MaxMmappedMem  uint64 `json:"max_mmapped_mem"`
	TcacheCount    uint64 `json:"tcache_count"`
	TcacheMaxBytes uint64 `json:"tcache_max_bytes"`
	HeapMax        uint64 `json:"heap_max"`
}

// Mmapped is the chunks mmapped outside every arena, found in the map.
type Mmapped struct {
	Count uint64      `json:"count"`
	Bytes uint64      `json:"bytes"`
	Sizes []TcacheBin `json:"sizes"`
}

// ReadOnly is what the read-only walk adds to info.
type ReadOnly struct {
	FrozenUs int64 `json:"frozen_us"`
	Torn     bool  `json:"torn"`
	// Hold: "image" (every thread stopped while a copy-on-write image was
	// made, then the image read), "walk" (stopped for the whole walk),
	// "none" (torn); absent for a core.
	Hold string `json:"hold,omitempty"`
	// WalkUs is how long the walk took (within frozen_us unless hold is
	// "image"); CloneUs how long making the image took, within frozen_us.
	WalkUs  int64 `json:"walk_us,omitempty"`
	CloneUs int64 `json:"clone_us,omitempty"`
	// LeftOutBytes: the image was made without these bytes of big
	// anonymous mappings the allocator does not own (their page tables
	// were not copied: a shorter stop); LeftOut counts the mappings.
	LeftOut      int    `json:"left_out,omitempty"`
	LeftOutBytes uint64 `json:"left_out_bytes,omitempty"`
	// ImageSkipped says why no image was made under --freeze auto.
	ImageSkipped string   `json:"image_skipped,omitempty"`
	Layout       string   `json:"layout"`
	MainArena    uint64   `json:"main_arena"`
	Mp           uint64   `json:"mp"`
	FoundBy      string   `json:"found_by"`
	Exact        bool     `json:"exact"`
	Params       Params   `json:"params"`
	Threads      []Thread `json:"threads"`
	Mmapped      Mmapped  `json:"mmapped"`
	Damage       []Damage `json:"damage"`
	// TcachesSkipped says why threads' tcaches were not read (a core
	// read without libc's file).
	TcachesSkipped string `json:"tcaches_skipped,omitempty"`
}

// Totals is malloc_info's own sums over every arena.
type Totals struct {
	SystemCurrent  uint64  `json:"system_current"`
	SystemMax      uint64  `json:"system_max"`
	FastCount      *uint64 `json:"fast_count"`
	FastBytes      *uint64 `json:"fast_bytes"`
	RestCount      uint64  `json:"rest_count"`
	RestBytes      uint64  `json:"rest_bytes"`
	AspaceTotal    uint64  `json:"aspace_total"`
	AspaceMprotect uint64  `json:"aspace_mprotect"`
	MmapCount      *uint64 `json:"mmap_count"`
	MmapBytes      *uint64 `json:"mmap_bytes"`
}

// Core says which core a document comes from and why it was written.
type Core struct {
	Path      string `json:"path"`
	Command   string `json:"command"`
	CrashTid  int    `json:"crash_tid"`
	Signal    int    `json:"signal"`
	FaultAddr uint64 `json:"fault_addr"`
	// LibcNotes say what was tried for libc and not used.
	LibcNotes []string `json:"libc_notes,omitempty"`
}

// Info is the document of info --json.
type Info struct {
	// SchemaVersion is Version: which schema (schema/v1/...) the document follows.
	SchemaVersion int         `json:"schema_version"`
	Pid           int         `json:"pid"`
	Exe           string      `json:"exe"`
	Threads       int         `json:"threads"`
	Libc          Libc        `json:"glibc"`
	Injection     *Injection  `json:"injection"`
	ReadOnly      *ReadOnly   `json:"read_only"`
	Core          *Core       `json:"core,omitempty"`
	Arenas        []Arena     `json:"arenas"`
	Totals        Totals      `json:"totals"`
	Maps          MapsSummary `json:"maps"`
	// Waterfall splits RSS into lines that add up; absent when the
	// source records no RSS (a kernel core).
	Waterfall *Waterfall `json:"waterfall,omitempty"`
	Findings  []Finding  `json:"findings"`
}

func newLibc(l report.LibcInfo) Libc {
	j := Libc{Path: l.Path, Version: l.Version.String(), Banner: l.Banner, BuildID: l.BuildID, Static: l.Static, VersionFrom: l.VersionFrom, Source: l.Source}
	if !l.MinVersion.IsZero() {
		j.VersionMin = l.MinVersion.String()
	}
	return j
}

func newInjection(in report.Injection) Injection {
	return Injection{Tid: in.Tid, Blocked: in.Blocked, StoppedUs: in.Stopped.Microseconds(), CallUs: in.Call.Microseconds(), Refusals: in.Refusals,
		PreflightUs: in.Preflight.Microseconds(), PreflightWalks: in.PreflightWalks,
		PreflightLocked: in.PreflightLocked, PreflightLockHeldUs: in.PreflightLockHeld.Microseconds(),
		PreflightSkipped: in.PreflightSkipped}
}

func opt(ok bool, v uint64) *uint64 {
	if !ok {
		return nil
	}
	return &v
}

func newSize(s mallocinfo.SizeClass) Size {
	return Size{From: s.From, To: s.To, Total: s.Total, Count: s.Count, Fast: s.Fast}
}

// NewInfo is the document of info --json for r and its diagnosis.
func NewInfo(r *report.Report, findings []diagnose.Finding) Info {
	mi := r.Malloc
	out := Info{SchemaVersion: Version, Pid: r.Pid, Exe: r.Exe, Threads: r.Threads, Libc: newLibc(r.Libc), Arenas: []Arena{}}
	if r.Injection != nil {
		j := newInjection(*r.Injection)
		out.Injection = &j
	}
	for i := range mi.Arenas {
		a := &mi.Arenas[i]
		ja := Arena{
			Index: a.Index, Main: a.Index == 0, SystemCurrent: a.SystemCurrent, SystemMax: a.SystemMax,
			InUseBytes: a.InUse(), FreeBytes: a.FreeBytes(), FreePercent: a.FreePercent(),
			FastCount: opt(a.HasFast, a.FastCount), FastBytes: opt(a.HasFast, a.FastBytes),
			RestCount: a.RestCount, RestBytes: a.RestBytes, LargestFree: a.LargestFreeClass(),
			AspaceTotal: a.AspaceTotal, AspaceMprotect: a.AspaceMprotect, Subheaps: opt(a.HasSubheaps, a.Subheaps),
			Sizes: []Size{},
		}
		for _, s := range a.Sizes {
			ja.Sizes = append(ja.Sizes, newSize(s))
		}
		if a.Unsorted != nil {
			u := newSize(*a.Unsorted)
			ja.Unsorted = &u
		}
		out.Arenas = append(out.Arenas, ja)
	}
	out.Totals = Totals{
		SystemCurrent: mi.SystemCurrent, SystemMax: mi.SystemMax,
		FastCount: opt(mi.HasFast, mi.FastCount), FastBytes: opt(mi.HasFast, mi.FastBytes),
		RestCount: mi.RestCount, RestBytes: mi.RestBytes, AspaceTotal: mi.AspaceTotal, AspaceMprotect: mi.AspaceMprotect,
		MmapCount: opt(mi.HasMmap, mi.MmapCount), MmapBytes: opt(mi.HasMmap, mi.MmapBytes),
	}
	out.Maps = newMapsSummary(r.Maps)
	out.Waterfall = NewWaterfall(r.Waterfall())
	out.Findings = newFindings(findings)
	if c := r.Core; c != nil {
		out.Core = &Core{Path: c.Path, Command: c.Command, CrashTid: c.CrashTid, Signal: c.Signal, FaultAddr: c.FaultAddr, LibcNotes: c.LibcNotes}
	}
	if r.ReadOnly != nil {
		out.ReadOnly = newReadOnly(r.ReadOnly)
		for i := range out.Arenas {
			if i < len(r.ReadOnly.Walk.Arenas) {
				out.Arenas[i].Walk = newArenaWalk(&r.ReadOnly.Walk.Arenas[i])
			}
		}
	}
	return out
}

func newArenaWalk(a *glibc.ArenaWalk) *ArenaWalk {
	j := &ArenaWalk{Addr: a.Addr, Mutex: a.Mutex, Flags: a.Flags, AttachedThreads: a.AttachedThreads, Top: a.Top, TopSize: a.TopSize,
		Heaps: []Heap{}, Walked: a.Walked, InUseChunks: a.InUseChunks, InUseBytes: a.InUseBytes, FreeChunks: a.FreeChunks,
		FreeBytes: a.FreeBytes, FastChunks: a.FastChunks, FastBytes: a.FastBytes, TcacheChunks: a.TcacheChunks,
		TcacheBytes: a.TcacheBytes, LargestFree: a.LargestFree, TrimmableBytes: a.Trimmable()}
	for _, h := range a.Heaps {
		j.Heaps = append(j.Heaps, Heap{Addr: h.Addr, Size: h.Size, MprotectSize: h.MprotectSize})
	}
	return j
}

func newReadOnly(ro *report.ReadOnly) *ReadOnly {
	w := ro.Walk
	p := w.Params
	j := &ReadOnly{FrozenUs: ro.Frozen.Microseconds(), Torn: ro.Torn, Hold: ro.Hold, WalkUs: ro.Walked.Microseconds(), CloneUs: ro.Cloned.Microseconds(), LeftOut: ro.LeftOut, LeftOutBytes: ro.LeftOutBytes, ImageSkipped: ro.ImageSkipped, Layout: w.Layout.Profile,
		MainArena: w.Anchors.MainArena, Mp: w.Anchors.Mp, FoundBy: w.Anchors.Method, Exact: w.Exact,
		Params: Params{TrimThreshold: p.TrimThreshold, TopPad: p.TopPad, MmapThreshold: p.MmapThreshold, ArenaTest: p.ArenaTest,
			ArenaMax: p.ArenaMax, NoDynThreshold: p.NoDynThreshold, MmapMax: p.NMmapsMax, MaxMmaps: p.MaxNMmaps,
			MaxMmappedMem: p.MaxMmappedMem, TcacheCount: p.TcacheCount, TcacheMaxBytes: p.TcacheMaxBytes, HeapMax: p.HeapMax},
		Threads: []Thread{}, Damage: []Damage{}, TcachesSkipped: ro.TcachesSkipped,
		Mmapped: Mmapped{Count: w.Mmapped.Count, Bytes: w.Mmapped.Bytes, Sizes: []TcacheBin{}},
	}
	index := map[uint64]int{}
	for i, a := range w.Arenas {
		index[a.Addr] = i
	}
	for _, tc := range ro.Tcaches {
		jt := Thread{Tid: tc.Tid, Tcache: tc.Addr, TcacheChunks: tc.Chunks, TcacheBytes: tc.Bytes, TcacheBins: []TcacheBin{}}
		if i, ok := index[tc.Arena]; ok && tc.Arena != 0 {
			jt.Arena = &i
		}
		for _, b := range tc.Bins {
			jt.TcacheBins = append(jt.TcacheBins, TcacheBin{Size: b.Size, Count: b.Count})
		}
		j.Threads = append(j.Threads, jt)
	}
	for _, sz := range sortedKeys(w.Mmapped.Sizes) {
		j.Mmapped.Sizes = append(j.Mmapped.Sizes, TcacheBin{Size: sz, Count: w.Mmapped.Sizes[sz]})
	}
	j.Damage = newDamage(w.Damage)
	return j
}

func newDamage(ds []glibc.Damage) []Damage {
	out := []Damage{}
	for _, d := range ds {
		out = append(out, Damage{Arena: d.Arena, Addr: d.Addr, What: d.What, Abort: d.Abort, Hang: d.Hang})
	}
	return out
}

func sortedKeys(m map[uint64]uint64) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
