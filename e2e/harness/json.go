package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// The tests read arenactl's JSON into these types of their own, not into
// package schema's: a field renamed in the program is then missing from the
// document, and decodeDoc says so. They state the names the README
// promises; the golden files pin the bytes.

type jsonLibc struct {
	Path        string `json:"path"`
	Version     string `json:"version"`
	Banner      string `json:"banner,omitempty"`
	BuildID     string `json:"build_id,omitempty"`
	Static      bool   `json:"static,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	Source      string `json:"source,omitempty"`
	VersionMin  string `json:"version_min,omitempty"`
}

type jsonInjection struct {
	Tid               int    `json:"tid"`
	Blocked           string `json:"blocked_in"`
	StoppedUs         int64  `json:"stopped_us"`
	CallUs            int64  `json:"call_us"`
	Refusals          int    `json:"refusals"`
	PreflightUs       int64  `json:"preflight_us"`
	PreflightWalks    int    `json:"preflight_walks"`
	PreflightFrozenUs int64  `json:"preflight_frozen_us"`
	PreflightLocked   int    `json:"preflight_locked_arenas"`
	PreflightLockUs   int64  `json:"preflight_lock_held_us"`
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
	Index          int            `json:"index"`
	Main           bool           `json:"main"`
	SystemCurrent  uint64         `json:"system_current"`
	SystemMax      uint64         `json:"system_max"`
	InUseBytes     uint64         `json:"in_use_bytes"`
	FreeBytes      uint64         `json:"free_bytes"`
	FreePercent    float64        `json:"free_percent"`
	FastCount      *uint64        `json:"fast_count"`
	FastBytes      *uint64        `json:"fast_bytes"`
	RestCount      uint64         `json:"rest_count"`
	RestBytes      uint64         `json:"rest_bytes"`
	LargestFree    uint64         `json:"largest_free_class"`
	AspaceTotal    uint64         `json:"aspace_total"`
	AspaceMprotect uint64         `json:"aspace_mprotect"`
	Subheaps       *uint64        `json:"subheaps"`
	Sizes          []jsonSize     `json:"sizes"`
	Unsorted       *jsonSize      `json:"unsorted"`
	Walk           *jsonArenaWalk `json:"walk,omitempty"`
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
	FrozenUs       int64        `json:"frozen_us"`
	Torn           bool         `json:"torn"`
	Layout         string       `json:"layout"`
	MainArena      uint64       `json:"main_arena"`
	Mp             uint64       `json:"mp"`
	FoundBy        string       `json:"found_by"`
	Exact          bool         `json:"exact"`
	Params         jsonParams   `json:"params"`
	Threads        []jsonThread `json:"threads"`
	Mmapped        jsonMmapped  `json:"mmapped"`
	Damage         []jsonDamage `json:"damage"`
	TcachesSkipped string       `json:"tcaches_skipped,omitempty"`
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

type jsonCore struct {
	Path      string   `json:"path"`
	Command   string   `json:"command"`
	CrashTid  int      `json:"crash_tid"`
	Signal    int      `json:"signal"`
	FaultAddr uint64   `json:"fault_addr"`
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

type jsonMapsReport struct {
	Pid int `json:"pid"`
	jsonMaps
}

type jsonTrimClass struct {
	Class              string `json:"class"`
	RssBefore          uint64 `json:"rss_before"`
	RssAfter           uint64 `json:"rss_after"`
	PrivateDirtyBefore uint64 `json:"private_dirty_before"`
	PrivateDirtyAfter  uint64 `json:"private_dirty_after"`
}

type jsonTrim struct {
	Pid            int                 `json:"pid"`
	Libc           jsonLibc            `json:"glibc"`
	Pad            uint64              `json:"pad"`
	Result         *int                `json:"result"`
	Injection      *jsonInjection      `json:"injection"`
	Classes        []jsonTrimClass     `json:"classes"`
	ReleasedBytes  *int64              `json:"released_bytes"`
	DryRun         bool                `json:"dry_run"`
	PredictedBytes *uint64             `json:"predicted_bytes"`
	Prediction     *jsonTrimPrediction `json:"prediction"`
}

type jsonTrimPrediction struct {
	Torn           bool            `json:"torn"`
	FrozenUs       int64           `json:"frozen_us"`
	Hold           string          `json:"hold"`
	TrimmableBytes uint64          `json:"trimmable_bytes"`
	PredictedBytes uint64          `json:"predicted_bytes"`
	Arenas         []jsonArenaTrim `json:"arenas"`
	Damage         []jsonDamage    `json:"damage"`
}

type jsonArenaTrim struct {
	Index          int    `json:"index"`
	Main           bool   `json:"main"`
	Addr           uint64 `json:"addr"`
	Chunks         int    `json:"chunks"`
	TrimmableBytes uint64 `json:"trimmable_bytes"`
	TopBytes       uint64 `json:"top_bytes"`
	PredictedBytes uint64 `json:"predicted_bytes"`
}

type jsonFinding struct {
	ID           string   `json:"id"`
	Severity     string   `json:"severity"`
	Title        string   `json:"title"`
	Evidence     []string `json:"evidence"`
	Fix          string   `json:"fix"`
	SavingsBytes uint64   `json:"savings_bytes"`
}

type jsonSnapshot struct {
	Pid            int    `json:"pid"`
	Exe            string `json:"exe"`
	Path           string `json:"path"`
	FileBytes      int64  `json:"file_bytes"`
	CoreBytes      int64  `json:"core_bytes"`
	Compressed     bool   `json:"zstd"`
	Full           bool   `json:"full"`
	FrozenUs       int64  `json:"frozen_us"`
	Threads        int    `json:"threads"`
	DumpedBytes    uint64 `json:"dumped_bytes"`
	ZeroBytes      uint64 `json:"zero_bytes"`
	RecordedBytes  uint64 `json:"walk_pages_bytes"`
	Unreadable     uint64 `json:"unreadable_bytes"`
	Mappings       int    `json:"mappings"`
	DumpedMappings int    `json:"dumped_mappings"`
	Segments       int    `json:"segments"`
	AnonRSS        uint64 `json:"anonymous_rss"`
	WalkError      string `json:"walk_error,omitempty"`
}

type jsonWatchSample struct {
	Time   string `json:"time"`
	Sample int    `json:"sample"`
	jsonInfo
}

type jsonDelta struct {
	Before uint64 `json:"before"`
	After  uint64 `json:"after"`
	Delta  int64  `json:"delta"`
}

type jsonMallocDiff struct {
	SystemCurrent jsonDelta  `json:"system_current"`
	InUseBytes    jsonDelta  `json:"in_use_bytes"`
	FreeBytes     jsonDelta  `json:"free_bytes"`
	FastBytes     *jsonDelta `json:"fast_bytes"`
	RestBytes     jsonDelta  `json:"rest_bytes"`
	TcacheBytes   *jsonDelta `json:"tcache_bytes"`
}

type jsonArenaDiff struct {
	Index       *int   `json:"index"`
	IndexBefore *int   `json:"index_before"`
	Main        bool   `json:"main"`
	Addr        uint64 `json:"addr,omitempty"`
	Status      string `json:"status"`
	Growth      int64  `json:"growth"`
	jsonMallocDiff
}

type jsonTotalsDiff struct {
	Arenas jsonDelta `json:"arenas"`
	jsonMallocDiff
	MmapBytes *jsonDelta `json:"mmap_bytes"`
}

type jsonClassDiff struct {
	Class        string    `json:"class"`
	Status       string    `json:"status"`
	Size         jsonDelta `json:"size"`
	Rss          jsonDelta `json:"rss"`
	PrivateDirty jsonDelta `json:"private_dirty"`
	Swap         jsonDelta `json:"swap"`
}

type jsonProcessDiff struct {
	Rss          jsonDelta `json:"rss"`
	Pss          jsonDelta `json:"pss"`
	PrivateDirty jsonDelta `json:"private_dirty"`
	Anonymous    jsonDelta `json:"anonymous"`
	Swap         jsonDelta `json:"swap"`
}

type jsonDiffSide struct {
	File   string `json:"file,omitempty"`
	Pid    int    `json:"pid"`
	Exe    string `json:"exe"`
	Glibc  string `json:"glibc"`
	Time   string `json:"time,omitempty"`
	Sample *int   `json:"sample,omitempty"`
}

type jsonDiff struct {
	Before           jsonDiffSide    `json:"before"`
	After            jsonDiffSide    `json:"after"`
	Warnings         []string        `json:"warnings"`
	Changed          bool            `json:"changed"`
	MatchedBy        string          `json:"matched_by"`
	Arenas           []jsonArenaDiff `json:"arenas"`
	Totals           jsonTotalsDiff  `json:"totals"`
	Process          jsonProcessDiff `json:"process"`
	Classes          []jsonClassDiff `json:"classes"`
	FindingsAppeared []jsonFinding   `json:"findings_appeared"`
	FindingsCleared  []jsonFinding   `json:"findings_cleared"`
}

// decodeDoc unmarshals a document into v, and fails when the document lacks
// a field of v (one not tagged omitempty): a field the program renamed.
func decodeDoc(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	return missingFields("", reflect.TypeOf(v), raw)
}

// missingFields checks that raw, a decoded JSON value, has every field t
// names, down through structs, pointers and slices.
func missingFields(path string, t reflect.Type, raw any) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return nil // null, for a pointer
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous {
				if err := missingFields(path, f.Type, raw); err != nil {
					return err
				}
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			v, ok := obj[name]
			if !ok {
				if strings.Contains(opts, "omitempty") {
					continue
				}
				return fmt.Errorf("the document has no field %s%s", path, name)
			}
			if err := missingFields(path+name+".", f.Type, v); err != nil {
				return err
			}
		}
	case reflect.Slice:
		items, _ := raw.([]any)
		for i, it := range items {
			if err := missingFields(fmt.Sprintf("%s%d.", path, i), t.Elem(), it); err != nil {
				return err
			}
		}
	}
	return nil
}
