package schema

import "github.com/arenactl/arenactl/internal/report"

// Snapshot is the document of snapshot --json.
type Snapshot struct {
	// SchemaVersion is Version: which schema (schema/v1/...) the document follows.
	SchemaVersion int    `json:"schema_version"`
	Pid           int    `json:"pid"`
	Exe           string `json:"exe"`
	Path          string `json:"path"`
	FileBytes     int64  `json:"file_bytes"`
	CoreBytes     int64  `json:"core_bytes"`
	Compressed    bool   `json:"zstd"`
	Full          bool   `json:"full"`
	FrozenUs      int64  `json:"frozen_us"`
	// Hold: "image" (written from a copy-on-write image; frozen_us is how
	// long making it stopped the process, clone_us of that) or "walk"
	// (every thread stopped while the core was written).
	Hold         string `json:"hold"`
	CloneUs      int64  `json:"clone_us,omitempty"`
	ImageSkipped string `json:"image_skipped,omitempty"`
	// LeftOutBytes: the image was made without these bytes of big
	// anonymous mappings the allocator does not own (listed in the core,
	// nothing of them dumped); LeftOut counts the mappings.
	LeftOut        int    `json:"left_out,omitempty"`
	LeftOutBytes   uint64 `json:"left_out_bytes,omitempty"`
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

// NewSnapshot is the document of what snapshot did.
func NewSnapshot(r *report.Snapshot) Snapshot {
	return Snapshot{SchemaVersion: Version, Pid: r.Pid, Exe: r.Exe, Path: r.Path, FileBytes: r.Size, CoreBytes: r.CoreSize, Compressed: r.Compressed,
		Full: r.Full, FrozenUs: r.Frozen.Microseconds(), Threads: r.Threads, DumpedBytes: r.Dumped, ZeroBytes: r.Zeros, RecordedBytes: r.Recorded,
		Unreadable: r.Unreadable, Mappings: r.Mappings, DumpedMappings: r.DumpedMappings, Segments: r.Segments, AnonRSS: r.AnonRSS,
		WalkError: r.WalkErr, Hold: r.Hold, CloneUs: r.Cloned.Microseconds(), ImageSkipped: r.ImageSkipped,
		LeftOut: r.LeftOut, LeftOutBytes: r.LeftOutBytes}
}
