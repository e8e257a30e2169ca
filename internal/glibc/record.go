package glibc

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
)

// Where a core's libc came from (Libc.Source).
const (
	SourceFile          = "libc file (build-id match)"
	SourceFileUnchecked = "libc file (build-id not in the core: unchecked)"
	SourceRecord        = "snapshot note"
	SourceMemory        = "memory only: runtime signatures"
	// A static executable's core: the allocator linked into it.
	SourceStaticFile          = "executable file (build-id match)"
	SourceStaticFileUnchecked = "executable file (build-id not in the core: unchecked)"
	SourceStaticMemory        = "memory only: runtime signatures in the executable's data"
)

// RecordVersion is the format of Record this arenactl writes. Readers take
// any format from 1 on: fields are only ever added (a reader ignores those
// it does not know), never renamed or given another meaning.
const RecordVersion = 1

// Record is what `arenactl snapshot` knew of the allocator when it walked
// the process: libc's identity, the layout, the anchors and the TLS slots
// of tcache and thread_arena. A snapshot carries it as a JSON note
// (core.NoteAllocator), so that reading the snapshot needs no libc file.
type Record struct {
	NoteVersion int    `json:"note_version"`
	Path        string `json:"path"`
	Glibc       string `json:"glibc"` // "2.36"
	Banner      string `json:"banner,omitempty"`
	BuildID     string `json:"build_id,omitempty"`
	Static      bool   `json:"static,omitempty"`
	// MallocDebug: Path is libc_malloc_debug.so, whose copy of malloc
	// has no tcache.
	MallocDebug bool   `json:"malloc_debug,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	Layout      string `json:"layout"` // the profile of Glibc, as a check
	Base        uint64 `json:"base"`
	MainArena   uint64 `json:"main_arena"`
	Mp          uint64 `json:"mp"`
	Method      string `json:"method"`
	// The thread-pointer offsets (two's complement) of tcache and
	// thread_arena; absent when the walk found none.
	TLSTcache      *uint64 `json:"tls_tcache,omitempty"`
	TLSThreadArena *uint64 `json:"tls_thread_arena,omitempty"`
}

// NewRecord is the Record of a walk of l.
func NewRecord(l *libc.Libc, w *Walk) *Record {
	r := &Record{NoteVersion: RecordVersion, Path: l.Path, Glibc: l.Version.String(), Banner: l.Banner, BuildID: l.BuildID,
		Static: l.Static, MallocDebug: l.MallocDebug, VersionFrom: l.VersionFrom, Layout: w.Layout.Profile, Base: l.Base,
		MainArena: w.Anchors.MainArena, Mp: w.Anchors.Mp, Method: w.Anchors.Method}
	if w.TLS.HasTcache {
		off := w.TLS.Tcache
		r.TLSTcache = &off
	}
	if w.TLS.HasArena {
		off := w.TLS.Arena
		r.TLSThreadArena = &off
	}
	return r
}

// Marshal encodes the record for the note.
func (r *Record) Marshal() []byte {
	b, _ := json.Marshal(r) // a struct of plain fields always encodes
	return b
}

// ParseRecord decodes a snapshot's note.
func ParseRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("arenactl's allocator note: %w", err)
	}
	if r.NoteVersion < 1 {
		return nil, errors.New("arenactl's allocator note has no note_version")
	}
	return &r, nil
}

// Libc rebuilds, from the record and the core's mappings, the Libc, layout
// and anchors the snapshot used, without libc's file, and checks the
// anchors against memory.
func (r *Record) Libc(ms []maps.Mapping, mem Memory) (*libc.Libc, layouts.Layout, Anchors, error) {
	v, ok := libc.ParseVersion(r.Glibc)
	if !ok {
		return nil, layouts.Layout{}, Anchors{}, fmt.Errorf("arenactl's allocator note names glibc %q, which arenactl does not know", r.Glibc)
	}
	lay, err := libc.LayoutOf(&libc.Libc{Version: v, MallocDebug: r.MallocDebug})
	if err != nil {
		return nil, layouts.Layout{}, Anchors{}, err
	}
	if r.Layout != "" && r.Layout != lay.Profile {
		return nil, layouts.Layout{}, Anchors{}, fmt.Errorf("arenactl's allocator note says layout %s, but glibc %s has layout %s", r.Layout, v, lay.Profile)
	}
	l := &libc.Libc{Path: r.Path, Base: r.Base, Version: v, Banner: r.Banner, BuildID: r.BuildID, Static: r.Static, MallocDebug: r.MallocDebug,
		VersionFrom: r.VersionFrom, Source: SourceRecord, RecordedTLS: []uint64{}}
	for _, m := range ms {
		if m.Path == r.Path {
			l.Mappings = append(l.Mappings, m)
			if m.Executable() {
				l.Text = append(l.Text, m)
			}
		}
	}
	for _, off := range []*uint64{r.TLSTcache, r.TLSThreadArena} {
		if off != nil {
			l.RecordedTLS = append(l.RecordedTLS, *off)
		}
	}
	a := Anchors{MainArena: r.MainArena, Mp: r.Mp, Method: "recorded by the snapshot: " + r.Method}
	if err := checkMainArena(mem, lay, a.MainArena); err != nil {
		return nil, layouts.Layout{}, Anchors{}, fmt.Errorf("the main_arena arenactl's allocator note records at %#x: %w", a.MainArena, err)
	}
	return l, lay, a, nil
}
