package schema

import (
	"github.com/arenactl/arenactl/internal/report"
)

// Class is one memory-map class.
//
// The smaps counters (here, in Rollup and in Mapping) are null where the
// source recorded none: a kernel core records sizes only, and 0 would say
// the memory was not resident.
type Class struct {
	Class        string  `json:"class"`
	Count        int     `json:"count"`
	Size         uint64  `json:"size"`
	Rss          *uint64 `json:"rss"`
	Pss          *uint64 `json:"pss"`
	PrivateDirty *uint64 `json:"private_dirty"`
	Swap         *uint64 `json:"swap"`
}

// Rollup is the process's smaps_rollup.
type Rollup struct {
	Rss          *uint64 `json:"rss"`
	Pss          *uint64 `json:"pss"`
	PrivateDirty *uint64 `json:"private_dirty"`
	PrivateClean *uint64 `json:"private_clean"`
	Anonymous    *uint64 `json:"anonymous"`
	Swap         *uint64 `json:"swap"`
}

// counter is v, or null when the source recorded no counters.
func counter(v uint64, measured bool) *uint64 {
	if !measured {
		return nil
	}
	return &v
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// MapsSummary is the memory map by class and the process's counters.
type MapsSummary struct {
	Process  Rollup    `json:"process"`
	Classes  []Class   `json:"classes"`
	Mappings []Mapping `json:"mappings,omitempty"`
}

// Mapping is one mapping, with maps --all.
type Mapping struct {
	Start        uint64  `json:"start"`
	End          uint64  `json:"end"`
	Perms        string  `json:"perms"`
	Offset       uint64  `json:"offset"`
	Path         string  `json:"path"`
	Class        string  `json:"class"`
	Rss          *uint64 `json:"rss"`
	PrivateDirty *uint64 `json:"private_dirty"`
	Swap         *uint64 `json:"swap"`
}

func newMapsSummary(ms report.MapsSummary) MapsSummary {
	roll, ok := ms.Rollup, !ms.Unmeasured
	out := MapsSummary{
		Process: Rollup{Rss: counter(roll.Rss, ok), Pss: counter(roll.Pss, ok), PrivateDirty: counter(roll.PrivateDirty, ok),
			PrivateClean: counter(roll.PrivateClean, ok), Anonymous: counter(roll.Anonymous, ok), Swap: counter(roll.Swap, ok)},
		Classes: []Class{},
	}
	for _, c := range ms.Classes {
		out.Classes = append(out.Classes, Class{Class: c.Class.String(), Count: c.Count, Size: c.Size, Rss: counter(c.Rss, ok),
			Pss: counter(c.Pss, ok), PrivateDirty: counter(c.PrivateDirty, ok), Swap: counter(c.Swap, ok)})
	}
	return out
}

// Maps is the document of maps --json: the summary, and with --all every
// mapping.
type Maps struct {
	// SchemaVersion is Version: which schema (schema/v1/...) the document follows.
	SchemaVersion int `json:"schema_version"`
	Pid           int `json:"pid"`
	MapsSummary
}

// NewMaps is the document of m; with all, it lists every mapping.
func NewMaps(m *report.Maps, all bool) Maps {
	out := Maps{SchemaVersion: Version, Pid: m.Pid, MapsSummary: newMapsSummary(m.Summary)}
	if all {
		ok := !m.Summary.Unmeasured
		for _, m := range m.Mappings {
			out.Mappings = append(out.Mappings, Mapping{Start: m.Start, End: m.End, Perms: m.Perms, Offset: m.Offset, Path: m.Path,
				Class: m.Class.String(), Rss: counter(m.Rss, ok), PrivateDirty: counter(m.PrivateDirty, ok), Swap: counter(m.Swap, ok)})
		}
	}
	return out
}
