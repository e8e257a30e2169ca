package schema

import (
	"encoding/hex"

	"github.com/arenactl/arenactl/internal/report"
)

// HeapContents is arenactl heap --json: what the heap holds.
type HeapContents struct {
	SchemaVersion int    `json:"schema_version"`
	Pid           int    `json:"pid"`
	Exe           string `json:"exe"`
	Threads       int    `json:"threads"`
	Libc          Libc   `json:"glibc"`
	Core          *Core  `json:"core,omitempty"`
	// Hold is how a live process was held ("image", "walk"), FrozenUs how
	// long it was stopped; absent for a core.
	Hold     string `json:"hold,omitempty"`
	FrozenUs int64  `json:"frozen_us,omitempty"`

	Chunks     uint64 `json:"chunks"` // allocated chunks: the objects
	Bytes      uint64 `json:"bytes"`
	FreeChunks uint64 `json:"free_chunks"` // in bins, fastbins, tcaches, and the tops
	FreeBytes  uint64 `json:"free_bytes"`
	// InteriorPointers: a word pointing into a chunk's middle counts as a
	// reference to it (always true).
	InteriorPointers bool `json:"interior_pointers"`

	Classes []HeapClass    `json:"classes"`
	Types   []HeapType     `json:"types"`
	Leaks   []HeapLeak     `json:"leaks"`
	Arenas  []HeapArena    `json:"arenas"`
	Roots   []HeapRoot     `json:"roots"`
	Lookups []HeapLookup   `json:"lookups"`
	Scan    HeapScanFigure `json:"scan"`
}

// HeapClass is one reachability class: "static", "stack", "leaked",
// "leaked (only from leaked)".
type HeapClass struct {
	Class string `json:"class"`
	Count uint64 `json:"count"`
	Bytes uint64 `json:"bytes"`
}

// HeapType is one type: a C++ class by its vtable, or "size N".
type HeapType struct {
	Type        string `json:"type"`
	Vtable      bool   `json:"vtable"`
	Count       uint64 `json:"count"`
	Bytes       uint64 `json:"bytes"`
	LeakedCount uint64 `json:"leaked_count"`
	LeakedBytes uint64 `json:"leaked_bytes"`
}

// HeapLeak is the leaked chunks of one type, with examples.
type HeapLeak struct {
	Type     string        `json:"type"`
	Count    uint64        `json:"count"`
	Bytes    uint64        `json:"bytes"`
	Roots    uint64        `json:"unreferenced"` // of count, referenced by nothing at all
	Examples []HeapExample `json:"examples"`
}

// HeapExample is one leaked chunk: its user pointer, its chunk size, and
// its first bytes in hex.
type HeapExample struct {
	Addr    uint64 `json:"addr"`
	Size    uint64 `json:"size"`
	Preview string `json:"preview_hex"`
}

// HeapArena says what keeps an arena's free memory in place.
type HeapArena struct {
	Index     int    `json:"index"`
	Addr      uint64 `json:"addr"`
	Main      bool   `json:"main"`
	FreeBytes uint64 `json:"free_bytes"`
	TopSize   uint64 `json:"top_size"`
	Trimmable uint64 `json:"trimmable_bytes"`
	// The allocated chunk highest in the top's heap (absent when none),
	// and the free memory below it that stays in the heap while it lives.
	Highest     *HeapChunk `json:"highest_chunk,omitempty"`
	PinnedBytes uint64     `json:"pinned_free_bytes"`
}

// HeapChunk is one chunk: its user pointer, its size, its type.
type HeapChunk struct {
	Addr uint64 `json:"addr"`
	Size uint64 `json:"size"`
	Type string `json:"type"`
}

// HeapRoot is one kind of root scanned: "data", "tls", "anon", "stack",
// "registers".
type HeapRoot struct {
	Kind  string `json:"kind"`
	Count uint64 `json:"count"`
	Bytes uint64 `json:"bytes"`
}

// HeapLookup answers one --addr.
type HeapLookup struct {
	Addr  uint64 `json:"addr"`
	Found bool   `json:"found"`
	Chunk uint64 `json:"chunk,omitempty"` // its user pointer
	Size  uint64 `json:"size,omitempty"`
	Class string `json:"class,omitempty"`
	Type  string `json:"type,omitempty"`
}

// HeapScanFigure is what the scan read and kept: root bytes read and those
// that could not be (not in the file), chunk bytes read, the bits the
// index and marks kept, and the passes the scan made over the heap.
type HeapScanFigure struct {
	RootBytes   uint64 `json:"root_bytes"`
	UnreadBytes uint64 `json:"unread_root_bytes"`
	ChunkBytes  uint64 `json:"chunk_bytes"`
	IndexBits   uint64 `json:"index_bits"`
	Sweeps      int    `json:"sweeps"`
	Vtables     int    `json:"vtables"`
}

// NewHeap converts the report.
func NewHeap(r *report.Contents) HeapContents {
	j := HeapContents{SchemaVersion: Version, Pid: r.Pid, Exe: r.Exe, Threads: r.Threads, Libc: newLibc(r.Libc),
		Hold: r.Hold, FrozenUs: r.Frozen.Microseconds(),
		Chunks: r.Chunks, Bytes: r.Bytes, FreeChunks: r.FreeChunks, FreeBytes: r.FreeBytes, InteriorPointers: r.InteriorPointers,
		Classes: []HeapClass{}, Types: []HeapType{}, Leaks: []HeapLeak{}, Arenas: []HeapArena{}, Roots: []HeapRoot{}, Lookups: []HeapLookup{},
		Scan: HeapScanFigure{RootBytes: r.RootBytes, UnreadBytes: r.Unread, ChunkBytes: r.ChunkBytes, IndexBits: r.IndexBits, Sweeps: r.Sweeps, Vtables: r.Vtables},
	}
	if c := r.Core; c != nil {
		j.Core = &Core{Path: c.Path, Command: c.Command, CrashTid: c.CrashTid, LibcNotes: c.LibcNotes}
		j.Hold, j.FrozenUs = "", 0
	}
	for _, c := range r.Classes {
		j.Classes = append(j.Classes, HeapClass{c.Class, c.Count, c.Bytes})
	}
	for _, t := range r.Types {
		j.Types = append(j.Types, HeapType{t.Type, t.Vtable, t.Count, t.Bytes, t.LeakedCount, t.LeakedBytes})
	}
	for _, l := range r.Leaks {
		hl := HeapLeak{Type: l.Type, Count: l.Count, Bytes: l.Bytes, Roots: l.Roots, Examples: []HeapExample{}}
		for _, e := range l.Examples {
			hl.Examples = append(hl.Examples, HeapExample{e.Addr, e.Size, hex.EncodeToString(e.Preview)})
		}
		j.Leaks = append(j.Leaks, hl)
	}
	for _, a := range r.Arenas {
		ha := HeapArena{Index: a.Index, Addr: a.Addr, Main: a.Main, FreeBytes: a.FreeBytes, TopSize: a.TopSize, Trimmable: a.Trimmable, PinnedBytes: a.FreeBelow}
		if a.Highest != 0 {
			ha.Highest = &HeapChunk{a.Highest, a.HighestLen, a.HighestTyp}
		}
		j.Arenas = append(j.Arenas, ha)
	}
	for _, rc := range r.Roots {
		j.Roots = append(j.Roots, HeapRoot{rc.Kind, rc.Count, rc.Bytes})
	}
	for _, l := range r.Lookups {
		j.Lookups = append(j.Lookups, HeapLookup{l.Addr, l.Found, l.Chunk, l.Size, l.Class, l.Type})
	}
	return j
}
