package main

import (
	"encoding/json"
	"io"
	"sort"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
)

// The JSON schema (documented in README.md). Names are stable: add fields,
// never rename or remove one. Every byte count is an integer number of bytes,
// every duration an integer number of microseconds.

type jsonLibc struct {
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

type jsonInjection struct {
	Tid       int    `json:"tid"`
	Blocked   string `json:"blocked_in"`
	StoppedUs int64  `json:"stopped_us"`
	CallUs    int64  `json:"call_us"`
	Refusals  int    `json:"refusals"`
	// The read-only walk of the free lists made before borrowing a thread:
	// how long it took, how many walks (2 when the first, made with
	// nothing stopped, looked damaged: the second stops every thread for
	// preflight_frozen_us), and why there was none (the injection went
	// ahead without it).
	PreflightUs       int64  `json:"preflight_us"`
	PreflightWalks    int    `json:"preflight_walks"`
	PreflightFrozenUs int64  `json:"preflight_frozen_us"`
	PreflightSkipped  string `json:"preflight_skipped,omitempty"`
}

type jsonSize struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Total uint64 `json:"total"`
	Count uint64 `json:"count"`
	Fast  bool   `json:"fast"`
}

type jsonArena struct {
	Index          int        `json:"index"`
	Main           bool       `json:"main"`
	SystemCurrent  uint64     `json:"system_current"`
	SystemMax      uint64     `json:"system_max"`
	InUseBytes     uint64     `json:"in_use_bytes"`
	FreeBytes      uint64     `json:"free_bytes"`
	FreePercent    float64    `json:"free_percent"`
	FastCount      *uint64    `json:"fast_count"`
	FastBytes      *uint64    `json:"fast_bytes"`
	RestCount      uint64     `json:"rest_count"`
	RestBytes      uint64     `json:"rest_bytes"`
	LargestFree    uint64     `json:"largest_free_class"`
	AspaceTotal    uint64     `json:"aspace_total"`
	AspaceMprotect uint64     `json:"aspace_mprotect"`
	Subheaps       *uint64    `json:"subheaps"`
	Sizes          []jsonSize `json:"sizes"`
	Unsorted       *jsonSize  `json:"unsorted"`
	// Walk is present with --read-only.
	Walk *jsonArenaWalk `json:"walk,omitempty"`
}

type jsonHeap struct {
	Addr         uint64 `json:"addr"`
	Size         uint64 `json:"size"`
	MprotectSize uint64 `json:"mprotect_size"`
}

type jsonArenaWalk struct {
	Addr            uint64     `json:"addr"`
	Mutex           uint32     `json:"mutex"`
	Flags           uint32     `json:"flags"`
	AttachedThreads uint64     `json:"attached_threads"`
	Top             uint64     `json:"top"`
	TopSize         uint64     `json:"top_size"`
	Heaps           []jsonHeap `json:"heaps"`
	Walked          bool       `json:"walked"`
	InUseChunks     uint64     `json:"in_use_chunks"`
	InUseBytes      uint64     `json:"in_use_bytes"`
	FreeChunks      uint64     `json:"free_chunks"`
	FreeBytes       uint64     `json:"free_bytes"`
	FastChunks      uint64     `json:"fast_chunks"`
	FastBytes       uint64     `json:"fast_bytes"`
	TcacheChunks    uint64     `json:"tcache_chunks"`
	TcacheBytes     uint64     `json:"tcache_bytes"`
	LargestFree     uint64     `json:"largest_free_chunk"`
	TrimmableBytes  uint64     `json:"trimmable_bytes"`
}

type jsonTcacheBin struct {
	Size  uint64 `json:"size"`
	Count uint64 `json:"count"`
}

type jsonThread struct {
	Tid          int             `json:"tid"`
	Arena        *int            `json:"arena"`
	Tcache       uint64          `json:"tcache"`
	TcacheChunks uint64          `json:"tcache_chunks"`
	TcacheBytes  uint64          `json:"tcache_bytes"`
	TcacheBins   []jsonTcacheBin `json:"tcache_bins"`
}

type jsonDamage struct {
	Arena uint64 `json:"arena"`
	Addr  uint64 `json:"addr"`
	What  string `json:"what"`
	Abort bool   `json:"glibc_would_abort"`
	Hang  bool   `json:"glibc_would_hang"`
}

type jsonParams struct {
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

type jsonMmapped struct {
	Count uint64          `json:"count"`
	Bytes uint64          `json:"bytes"`
	Sizes []jsonTcacheBin `json:"sizes"`
}

type jsonReadOnly struct {
	FrozenUs  int64        `json:"frozen_us"`
	Torn      bool         `json:"torn"`
	Layout    string       `json:"layout"`
	MainArena uint64       `json:"main_arena"`
	Mp        uint64       `json:"mp"`
	FoundBy   string       `json:"found_by"`
	Exact     bool         `json:"exact"`
	Params    jsonParams   `json:"params"`
	Threads   []jsonThread `json:"threads"`
	Mmapped   jsonMmapped  `json:"mmapped"`
	Damage    []jsonDamage `json:"damage"`
	// TcachesSkipped says why threads' tcaches were not read (a core
	// read without libc's file).
	TcachesSkipped string `json:"tcaches_skipped,omitempty"`
}

type jsonTotals struct {
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

type jsonClass struct {
	Class        string `json:"class"`
	Count        int    `json:"count"`
	Size         uint64 `json:"size"`
	Rss          uint64 `json:"rss"`
	Pss          uint64 `json:"pss"`
	PrivateDirty uint64 `json:"private_dirty"`
	Swap         uint64 `json:"swap"`
}

type jsonRollup struct {
	Rss          uint64 `json:"rss"`
	Pss          uint64 `json:"pss"`
	PrivateDirty uint64 `json:"private_dirty"`
	PrivateClean uint64 `json:"private_clean"`
	Anonymous    uint64 `json:"anonymous"`
	Swap         uint64 `json:"swap"`
}

type jsonMaps struct {
	Process  jsonRollup    `json:"process"`
	Classes  []jsonClass   `json:"classes"`
	Mappings []jsonMapping `json:"mappings,omitempty"`
}

type jsonMapping struct {
	Start        uint64 `json:"start"`
	End          uint64 `json:"end"`
	Perms        string `json:"perms"`
	Offset       uint64 `json:"offset"`
	Path         string `json:"path"`
	Class        string `json:"class"`
	Rss          uint64 `json:"rss"`
	PrivateDirty uint64 `json:"private_dirty"`
	Swap         uint64 `json:"swap"`
}

type jsonCore struct {
	Path      string `json:"path"`
	Command   string `json:"command"`
	CrashTid  int    `json:"crash_tid"`
	Signal    int    `json:"signal"`
	FaultAddr uint64 `json:"fault_addr"`
	// LibcNotes say what was tried for libc and not used.
	LibcNotes []string `json:"libc_notes,omitempty"`
}

type jsonInfo struct {
	Pid       int            `json:"pid"`
	Exe       string         `json:"exe"`
	Threads   int            `json:"threads"`
	Libc      jsonLibc       `json:"glibc"`
	Injection *jsonInjection `json:"injection"`
	ReadOnly  *jsonReadOnly  `json:"read_only"`
	Core      *jsonCore      `json:"core,omitempty"`
	Arenas    []jsonArena    `json:"arenas"`
	Totals    jsonTotals     `json:"totals"`
	Maps      jsonMaps       `json:"maps"`
	Findings  []jsonFinding  `json:"findings"`
}

type jsonTrimClass struct {
	Class              string `json:"class"`
	RssBefore          uint64 `json:"rss_before"`
	RssAfter           uint64 `json:"rss_after"`
	PrivateDirtyBefore uint64 `json:"private_dirty_before"`
	PrivateDirtyAfter  uint64 `json:"private_dirty_after"`
}

// jsonTrim is the trim report. With --dry-run nothing ran: result,
// injection and released_bytes are null and classes is empty.
type jsonTrim struct {
	Pid           int             `json:"pid"`
	Libc          jsonLibc        `json:"glibc"`
	Pad           uint64          `json:"pad"`
	Result        *int            `json:"result"`
	Injection     *jsonInjection  `json:"injection"`
	Classes       []jsonTrimClass `json:"classes"`
	ReleasedBytes *int64          `json:"released_bytes"`
	DryRun        bool            `json:"dry_run"`
	// PredictedBytes is the RSS the free lists said malloc_trim would
	// release (prediction.predicted_bytes); null when no walk was possible.
	PredictedBytes *uint64             `json:"predicted_bytes"`
	Prediction     *jsonTrimPrediction `json:"prediction"`
}

type jsonTrimPrediction struct {
	// Torn: walked without stopping the process (before a real trim);
	// FrozenUs: with --dry-run, how long every thread was stopped.
	Torn           bool            `json:"torn"`
	FrozenUs       int64           `json:"frozen_us"`
	TrimmableBytes uint64          `json:"trimmable_bytes"` // whole free pages, resident or not
	PredictedBytes uint64          `json:"predicted_bytes"` // of which resident now
	Arenas         []jsonArenaTrim `json:"arenas"`
	Damage         []jsonDamage    `json:"damage"` // --dry-run: what the walk found
}

type jsonArenaTrim struct {
	Index          int    `json:"index"`
	Main           bool   `json:"main"`
	Addr           uint64 `json:"addr"`
	Chunks         int    `json:"chunks"`          // free chunks holding whole pages
	TrimmableBytes uint64 `json:"trimmable_bytes"` // madvised, plus the main arena's top given back
	TopBytes       uint64 `json:"top_bytes"`       // the main arena's top given back (systrim)
	PredictedBytes uint64 `json:"predicted_bytes"` // resident now
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func libcJSON(l report.LibcInfo) jsonLibc {
	j := jsonLibc{Path: l.Path, Version: l.Version.String(), Banner: l.Banner, BuildID: l.BuildID, Static: l.Static, VersionFrom: l.VersionFrom, Source: l.Source}
	if !l.MinVersion.IsZero() {
		j.VersionMin = l.MinVersion.String()
	}
	return j
}

func injectionJSON(in report.Injection) jsonInjection {
	return jsonInjection{Tid: in.Tid, Blocked: in.Blocked, StoppedUs: in.Stopped.Microseconds(), CallUs: in.Call.Microseconds(), Refusals: in.Refusals,
		PreflightUs: in.Preflight.Microseconds(), PreflightWalks: in.PreflightWalks, PreflightFrozenUs: in.PreflightFrozen.Microseconds(),
		PreflightSkipped: in.PreflightSkipped}
}

func opt(ok bool, v uint64) *uint64 {
	if !ok {
		return nil
	}
	return &v
}

func sizeJSON(s glibc.SizeClass) jsonSize {
	return jsonSize{From: s.From, To: s.To, Total: s.Total, Count: s.Count, Fast: s.Fast}
}

func infoJSON(r *report.Report, findings []diagnose.Finding) jsonInfo {
	mi := r.Malloc
	out := jsonInfo{Pid: r.Pid, Exe: r.Exe, Threads: r.Threads, Libc: libcJSON(r.Libc), Arenas: []jsonArena{}}
	if r.Injection != nil {
		j := injectionJSON(*r.Injection)
		out.Injection = &j
	}
	for i := range mi.Arenas {
		a := &mi.Arenas[i]
		ja := jsonArena{
			Index: a.Index, Main: a.Index == 0, SystemCurrent: a.SystemCurrent, SystemMax: a.SystemMax,
			InUseBytes: a.InUse(), FreeBytes: a.FreeBytes(), FreePercent: a.FreePercent(),
			FastCount: opt(a.HasFast, a.FastCount), FastBytes: opt(a.HasFast, a.FastBytes),
			RestCount: a.RestCount, RestBytes: a.RestBytes, LargestFree: a.LargestFreeClass(),
			AspaceTotal: a.AspaceTotal, AspaceMprotect: a.AspaceMprotect, Subheaps: opt(a.HasSubheaps, a.Subheaps),
			Sizes: []jsonSize{},
		}
		for _, s := range a.Sizes {
			ja.Sizes = append(ja.Sizes, sizeJSON(s))
		}
		if a.Unsorted != nil {
			u := sizeJSON(*a.Unsorted)
			ja.Unsorted = &u
		}
		out.Arenas = append(out.Arenas, ja)
	}
	out.Totals = jsonTotals{
		SystemCurrent: mi.SystemCurrent, SystemMax: mi.SystemMax,
		FastCount: opt(mi.HasFast, mi.FastCount), FastBytes: opt(mi.HasFast, mi.FastBytes),
		RestCount: mi.RestCount, RestBytes: mi.RestBytes, AspaceTotal: mi.AspaceTotal, AspaceMprotect: mi.AspaceMprotect,
		MmapCount: opt(mi.HasMmap, mi.MmapCount), MmapBytes: opt(mi.HasMmap, mi.MmapBytes),
	}
	out.Maps = mapsSummaryJSON(r.Maps.Classes, r.Maps.Rollup)
	out.Findings = findingsJSON(findings)
	if c := r.Core; c != nil {
		out.Core = &jsonCore{Path: c.Path, Command: c.Command, CrashTid: c.CrashTid, Signal: c.Signal, FaultAddr: c.FaultAddr, LibcNotes: c.LibcNotes}
	}
	if r.ReadOnly != nil {
		out.ReadOnly = readOnlyJSON(r.ReadOnly)
		for i := range out.Arenas {
			if i < len(r.ReadOnly.Walk.Arenas) {
				out.Arenas[i].Walk = arenaWalkJSON(&r.ReadOnly.Walk.Arenas[i])
			}
		}
	}
	return out
}

func arenaWalkJSON(a *glibc.ArenaWalk) *jsonArenaWalk {
	j := &jsonArenaWalk{Addr: a.Addr, Mutex: a.Mutex, Flags: a.Flags, AttachedThreads: a.AttachedThreads, Top: a.Top, TopSize: a.TopSize,
		Heaps: []jsonHeap{}, Walked: a.Walked, InUseChunks: a.InUseChunks, InUseBytes: a.InUseBytes, FreeChunks: a.FreeChunks,
		FreeBytes: a.FreeBytes, FastChunks: a.FastChunks, FastBytes: a.FastBytes, TcacheChunks: a.TcacheChunks,
		TcacheBytes: a.TcacheBytes, LargestFree: a.LargestFree, TrimmableBytes: a.Trimmable()}
	for _, h := range a.Heaps {
		j.Heaps = append(j.Heaps, jsonHeap{Addr: h.Addr, Size: h.Size, MprotectSize: h.MprotectSize})
	}
	return j
}

func readOnlyJSON(ro *report.ReadOnly) *jsonReadOnly {
	w := ro.Walk
	p := w.Params
	j := &jsonReadOnly{FrozenUs: ro.Frozen.Microseconds(), Torn: ro.Torn, Layout: w.Layout.Profile,
		MainArena: w.Anchors.MainArena, Mp: w.Anchors.Mp, FoundBy: w.Anchors.Method, Exact: w.Exact,
		Params: jsonParams{TrimThreshold: p.TrimThreshold, TopPad: p.TopPad, MmapThreshold: p.MmapThreshold, ArenaTest: p.ArenaTest,
			ArenaMax: p.ArenaMax, NoDynThreshold: p.NoDynThreshold, MmapMax: p.NMmapsMax, MaxMmaps: p.MaxNMmaps,
			MaxMmappedMem: p.MaxMmappedMem, TcacheCount: p.TcacheCount, TcacheMaxBytes: p.TcacheMaxBytes, HeapMax: p.HeapMax},
		Threads: []jsonThread{}, Damage: []jsonDamage{}, TcachesSkipped: ro.TcachesSkipped,
		Mmapped: jsonMmapped{Count: w.Mmapped.Count, Bytes: w.Mmapped.Bytes, Sizes: []jsonTcacheBin{}},
	}
	index := map[uint64]int{}
	for i, a := range w.Arenas {
		index[a.Addr] = i
	}
	for _, tc := range ro.Tcaches {
		jt := jsonThread{Tid: tc.Tid, Tcache: tc.Addr, TcacheChunks: tc.Chunks, TcacheBytes: tc.Bytes, TcacheBins: []jsonTcacheBin{}}
		if i, ok := index[tc.Arena]; ok && tc.Arena != 0 {
			jt.Arena = &i
		}
		for _, b := range tc.Bins {
			jt.TcacheBins = append(jt.TcacheBins, jsonTcacheBin{Size: b.Size, Count: b.Count})
		}
		j.Threads = append(j.Threads, jt)
	}
	for _, sz := range sortedKeys(w.Mmapped.Sizes) {
		j.Mmapped.Sizes = append(j.Mmapped.Sizes, jsonTcacheBin{Size: sz, Count: w.Mmapped.Sizes[sz]})
	}
	j.Damage = damageJSON(w.Damage)
	return j
}

func damageJSON(ds []glibc.Damage) []jsonDamage {
	out := []jsonDamage{}
	for _, d := range ds {
		out = append(out, jsonDamage{Arena: d.Arena, Addr: d.Addr, What: d.What, Abort: d.Abort, Hang: d.Hang})
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

func mapsSummaryJSON(sum []maps.ClassSummary, roll maps.Rollup) jsonMaps {
	out := jsonMaps{
		Process: jsonRollup{Rss: roll.Rss, Pss: roll.Pss, PrivateDirty: roll.PrivateDirty, PrivateClean: roll.PrivateClean, Anonymous: roll.Anonymous, Swap: roll.Swap},
		Classes: []jsonClass{},
	}
	for _, c := range sum {
		out.Classes = append(out.Classes, jsonClass{Class: c.Class.String(), Count: c.Count, Size: c.Size, Rss: c.Rss, Pss: c.Pss, PrivateDirty: c.PrivateDirty, Swap: c.Swap})
	}
	return out
}

type jsonMapsReport struct {
	Pid int `json:"pid"`
	jsonMaps
}

func mapsJSON(pid int, sum []maps.ClassSummary, roll maps.Rollup, ms []maps.Mapping, all bool) jsonMapsReport {
	out := jsonMapsReport{Pid: pid, jsonMaps: mapsSummaryJSON(sum, roll)}
	if all {
		for _, m := range ms {
			out.Mappings = append(out.Mappings, jsonMapping{Start: m.Start, End: m.End, Perms: m.Perms, Offset: m.Offset, Path: m.Path,
				Class: m.Class.String(), Rss: m.Rss, PrivateDirty: m.PrivateDirty, Swap: m.Swap})
		}
	}
	return out
}

func trimJSON(r *report.TrimReport) jsonTrim {
	out := jsonTrim{Pid: r.Pid, Libc: libcJSON(r.Libc), Pad: r.Pad, DryRun: r.DryRun, Classes: []jsonTrimClass{}}
	if !r.DryRun {
		result, released, in := r.Result, r.Released(), injectionJSON(r.Injection)
		out.Result, out.ReleasedBytes, out.Injection = &result, &released, &in
		for _, row := range trimRows(r) {
			out.Classes = append(out.Classes, jsonTrimClass{Class: row.name, RssBefore: row.rssBefore, RssAfter: row.rssAfter,
				PrivateDirtyBefore: row.pdBefore, PrivateDirtyAfter: row.pdAfter})
		}
	}
	if p := r.Prediction; p != nil {
		out.PredictedBytes = &p.Resident
		out.Prediction = &jsonTrimPrediction{Torn: !r.DryRun, FrozenUs: r.Frozen.Microseconds(), TrimmableBytes: p.Bytes,
			PredictedBytes: p.Resident, Arenas: []jsonArenaTrim{}, Damage: damageJSON(r.Damage)}
		for _, a := range p.Arenas {
			out.Prediction.Arenas = append(out.Prediction.Arenas, jsonArenaTrim{Index: a.Index, Main: a.Main, Addr: a.Addr,
				Chunks: a.Chunks, TrimmableBytes: a.Bytes, TopBytes: a.Top, PredictedBytes: a.Resident})
		}
	}
	return out
}
