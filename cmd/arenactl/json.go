package main

import (
	"encoding/json"
	"io"

	"arenactl/internal/glibc"
	"arenactl/internal/maps"
)

// The JSON schema (documented in README.md). Names are stable: add fields,
// never rename or remove one. Every byte count is an integer number of bytes,
// every duration an integer number of microseconds.

type jsonLibc struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Banner  string `json:"banner,omitempty"`
	BuildID string `json:"build_id,omitempty"`
}

type jsonInjection struct {
	Tid       int    `json:"tid"`
	Blocked   string `json:"blocked_in"`
	StoppedUs int64  `json:"stopped_us"`
	CallUs    int64  `json:"call_us"`
	Refusals  int    `json:"refusals"`
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

type jsonInfo struct {
	Pid       int            `json:"pid"`
	Exe       string         `json:"exe"`
	Threads   int            `json:"threads"`
	Libc      jsonLibc       `json:"glibc"`
	Injection *jsonInjection `json:"injection"`
	Arenas    []jsonArena    `json:"arenas"`
	Totals    jsonTotals     `json:"totals"`
	Maps      jsonMaps       `json:"maps"`
}

type jsonTrimClass struct {
	Class              string `json:"class"`
	RssBefore          uint64 `json:"rss_before"`
	RssAfter           uint64 `json:"rss_after"`
	PrivateDirtyBefore uint64 `json:"private_dirty_before"`
	PrivateDirtyAfter  uint64 `json:"private_dirty_after"`
}

type jsonTrim struct {
	Pid           int             `json:"pid"`
	Libc          jsonLibc        `json:"glibc"`
	Pad           uint64          `json:"pad"`
	Result        int             `json:"result"`
	Injection     jsonInjection   `json:"injection"`
	Classes       []jsonTrimClass `json:"classes"`
	ReleasedBytes int64           `json:"released_bytes"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func libcJSON(l glibc.LibcInfo) jsonLibc {
	return jsonLibc{Path: l.Path, Version: l.Version.String(), Banner: l.Banner, BuildID: l.BuildID}
}

func injectionJSON(in glibc.Injection) jsonInjection {
	return jsonInjection{Tid: in.Tid, Blocked: in.Blocked, StoppedUs: in.Stopped.Microseconds(), CallUs: in.Call.Microseconds(), Refusals: in.Refusals}
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

func infoJSON(r *glibc.Report) jsonInfo {
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
			InUseBytes: sat(a.SystemCurrent, a.FreeBytes()), FreeBytes: a.FreeBytes(), FreePercent: a.FreePercent(),
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
	return out
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

func trimJSON(r *glibc.TrimReport) jsonTrim {
	out := jsonTrim{Pid: r.Pid, Libc: libcJSON(r.Libc), Pad: r.Pad, Result: r.Result, Injection: injectionJSON(r.Injection), ReleasedBytes: r.Released()}
	for _, row := range trimRows(r) {
		out.Classes = append(out.Classes, jsonTrimClass{Class: row.name, RssBefore: row.rssBefore, RssAfter: row.rssAfter,
			PrivateDirtyBefore: row.pdBefore, PrivateDirtyAfter: row.pdAfter})
	}
	return out
}
