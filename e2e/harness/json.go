package harness

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// The tests read arenactl's JSON into these types of their own, not into
// package schema's: a field renamed in the program is then missing from the
// document, and DecodeDoc says so. They state the names the README
// promises; the golden files pin the bytes.

type JSONLibc struct {
	Path        string `json:"path"`
	Version     string `json:"version"`
	Banner      string `json:"banner,omitempty"`
	BuildID     string `json:"build_id,omitempty"`
	Static      bool   `json:"static,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	Source      string `json:"source,omitempty"`
	VersionMin  string `json:"version_min,omitempty"`
}

type JSONInjection struct {
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

type JSONSize struct {
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
	Total uint64 `json:"total"`
	Count uint64 `json:"count"`
	Fast  bool   `json:"fast"`
}

type JSONArena struct {
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
	Sizes          []JSONSize     `json:"sizes"`
	Unsorted       *JSONSize      `json:"unsorted"`
	Walk           *JSONArenaWalk `json:"walk,omitempty"`
}

type JSONHeap struct {
	Addr         uint64 `json:"addr"`
	Size         uint64 `json:"size"`
	MprotectSize uint64 `json:"mprotect_size"`
}

type JSONArenaWalk struct {
	Addr            uint64     `json:"addr"`
	Mutex           uint32     `json:"mutex"`
	Flags           uint32     `json:"flags"`
	AttachedThreads uint64     `json:"attached_threads"`
	Top             uint64     `json:"top"`
	TopSize         uint64     `json:"top_size"`
	Heaps           []JSONHeap `json:"heaps"`
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

type JSONTcacheBin struct {
	Size  uint64 `json:"size"`
	Count uint64 `json:"count"`
}

type JSONThread struct {
	Tid          int             `json:"tid"`
	Arena        *int            `json:"arena"`
	Tcache       uint64          `json:"tcache"`
	TcacheChunks uint64          `json:"tcache_chunks"`
	TcacheBytes  uint64          `json:"tcache_bytes"`
	TcacheBins   []JSONTcacheBin `json:"tcache_bins"`
}

type JSONDamage struct {
	Arena uint64 `json:"arena"`
	Addr  uint64 `json:"addr"`
	What  string `json:"what"`
	Abort bool   `json:"glibc_would_abort"`
	Hang  bool   `json:"glibc_would_hang"`
}

type JSONParams struct {
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

type JSONMmapped struct {
	Count uint64          `json:"count"`
	Bytes uint64          `json:"bytes"`
	Sizes []JSONTcacheBin `json:"sizes"`
}

type JSONReadOnly struct {
	FrozenUs       int64        `json:"frozen_us"`
	Torn           bool         `json:"torn"`
	Layout         string       `json:"layout"`
	MainArena      uint64       `json:"main_arena"`
	Mp             uint64       `json:"mp"`
	FoundBy        string       `json:"found_by"`
	Exact          bool         `json:"exact"`
	Params         JSONParams   `json:"params"`
	Threads        []JSONThread `json:"threads"`
	Mmapped        JSONMmapped  `json:"mmapped"`
	Damage         []JSONDamage `json:"damage"`
	TcachesSkipped string       `json:"tcaches_skipped,omitempty"`
}

type JSONTotals struct {
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

type JSONCore struct {
	Path      string   `json:"path"`
	Command   string   `json:"command"`
	CrashTid  int      `json:"crash_tid"`
	Signal    int      `json:"signal"`
	FaultAddr uint64   `json:"fault_addr"`
	LibcNotes []string `json:"libc_notes,omitempty"`
}

type JSONInfo struct {
	Pid       int            `json:"pid"`
	Exe       string         `json:"exe"`
	Threads   int            `json:"threads"`
	Libc      JSONLibc       `json:"glibc"`
	Injection *JSONInjection `json:"injection"`
	ReadOnly  *JSONReadOnly  `json:"read_only"`
	Core      *JSONCore      `json:"core,omitempty"`
	Arenas    []JSONArena    `json:"arenas"`
	Totals    JSONTotals     `json:"totals"`
	Maps      JSONMaps       `json:"maps"`
	Findings  []JSONFinding  `json:"findings"`
}

type JSONClass struct {
	Class        string `json:"class"`
	Count        int    `json:"count"`
	Size         uint64 `json:"size"`
	Rss          uint64 `json:"rss"`
	Pss          uint64 `json:"pss"`
	PrivateDirty uint64 `json:"private_dirty"`
	Swap         uint64 `json:"swap"`
}

type JSONRollup struct {
	Rss          uint64 `json:"rss"`
	Pss          uint64 `json:"pss"`
	PrivateDirty uint64 `json:"private_dirty"`
	PrivateClean uint64 `json:"private_clean"`
	Anonymous    uint64 `json:"anonymous"`
	Swap         uint64 `json:"swap"`
}

type JSONMaps struct {
	Process  JSONRollup    `json:"process"`
	Classes  []JSONClass   `json:"classes"`
	Mappings []JSONMapping `json:"mappings,omitempty"`
}

type JSONMapping struct {
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

type JSONMapsReport struct {
	Pid int `json:"pid"`
	JSONMaps
}

type JSONTrimClass struct {
	Class              string `json:"class"`
	RssBefore          uint64 `json:"rss_before"`
	RssAfter           uint64 `json:"rss_after"`
	PrivateDirtyBefore uint64 `json:"private_dirty_before"`
	PrivateDirtyAfter  uint64 `json:"private_dirty_after"`
}

type JSONTrim struct {
	Pid            int                 `json:"pid"`
	Libc           JSONLibc            `json:"glibc"`
	Pad            uint64              `json:"pad"`
	Result         *int                `json:"result"`
	Injection      *JSONInjection      `json:"injection"`
	Classes        []JSONTrimClass     `json:"classes"`
	ReleasedBytes  *int64              `json:"released_bytes"`
	DryRun         bool                `json:"dry_run"`
	PredictedBytes *uint64             `json:"predicted_bytes"`
	Prediction     *JSONTrimPrediction `json:"prediction"`
}

type JSONTrimPrediction struct {
	Torn           bool            `json:"torn"`
	FrozenUs       int64           `json:"frozen_us"`
	Hold           string          `json:"hold"`
	TrimmableBytes uint64          `json:"trimmable_bytes"`
	PredictedBytes uint64          `json:"predicted_bytes"`
	Arenas         []JSONArenaTrim `json:"arenas"`
	Damage         []JSONDamage    `json:"damage"`
}

type JSONArenaTrim struct {
	Index          int    `json:"index"`
	Main           bool   `json:"main"`
	Addr           uint64 `json:"addr"`
	Chunks         int    `json:"chunks"`
	TrimmableBytes uint64 `json:"trimmable_bytes"`
	TopBytes       uint64 `json:"top_bytes"`
	PredictedBytes uint64 `json:"predicted_bytes"`
}

type JSONFinding struct {
	ID           string   `json:"id"`
	Severity     string   `json:"severity"`
	Title        string   `json:"title"`
	Evidence     []string `json:"evidence"`
	Fix          string   `json:"fix"`
	SavingsBytes uint64   `json:"savings_bytes"`
}

type JSONSnapshot struct {
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

type JSONWatchSample struct {
	Time   string `json:"time"`
	Sample int    `json:"sample"`
	JSONInfo
}

type JSONDelta struct {
	Before uint64 `json:"before"`
	After  uint64 `json:"after"`
	Delta  int64  `json:"delta"`
}

type JSONMallocDiff struct {
	SystemCurrent JSONDelta  `json:"system_current"`
	InUseBytes    JSONDelta  `json:"in_use_bytes"`
	FreeBytes     JSONDelta  `json:"free_bytes"`
	FastBytes     *JSONDelta `json:"fast_bytes"`
	RestBytes     JSONDelta  `json:"rest_bytes"`
	TcacheBytes   *JSONDelta `json:"tcache_bytes"`
}

type JSONArenaDiff struct {
	Index       *int   `json:"index"`
	IndexBefore *int   `json:"index_before"`
	Main        bool   `json:"main"`
	Addr        uint64 `json:"addr,omitempty"`
	Status      string `json:"status"`
	Growth      int64  `json:"growth"`
	JSONMallocDiff
}

type JSONTotalsDiff struct {
	Arenas JSONDelta `json:"arenas"`
	JSONMallocDiff
	MmapBytes *JSONDelta `json:"mmap_bytes"`
}

type JSONClassDiff struct {
	Class        string    `json:"class"`
	Status       string    `json:"status"`
	Size         JSONDelta `json:"size"`
	Rss          JSONDelta `json:"rss"`
	PrivateDirty JSONDelta `json:"private_dirty"`
	Swap         JSONDelta `json:"swap"`
}

type JSONProcessDiff struct {
	Rss          JSONDelta `json:"rss"`
	Pss          JSONDelta `json:"pss"`
	PrivateDirty JSONDelta `json:"private_dirty"`
	Anonymous    JSONDelta `json:"anonymous"`
	Swap         JSONDelta `json:"swap"`
}

type JSONDiffSide struct {
	File   string `json:"file,omitempty"`
	Pid    int    `json:"pid"`
	Exe    string `json:"exe"`
	Glibc  string `json:"glibc"`
	Time   string `json:"time,omitempty"`
	Sample *int   `json:"sample,omitempty"`
}

type JSONDiff struct {
	Before           JSONDiffSide    `json:"before"`
	After            JSONDiffSide    `json:"after"`
	Warnings         []string        `json:"warnings"`
	Changed          bool            `json:"changed"`
	MatchedBy        string          `json:"matched_by"`
	Arenas           []JSONArenaDiff `json:"arenas"`
	Totals           JSONTotalsDiff  `json:"totals"`
	Process          JSONProcessDiff `json:"process"`
	Classes          []JSONClassDiff `json:"classes"`
	FindingsAppeared []JSONFinding   `json:"findings_appeared"`
	FindingsCleared  []JSONFinding   `json:"findings_cleared"`
}

// DecodeDoc unmarshals a document into v, and fails when the document lacks
// a field of v (one not tagged omitempty): a field the program renamed.
func DecodeDoc(data []byte, v any) error {
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
