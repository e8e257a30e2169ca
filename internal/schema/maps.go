package schema

import (
	"github.com/arenactl/arenactl/internal/report"
)

// Class is one memory-map class.
type Class struct {
	Class        string `json:"class"`
	Count        int    `json:"count"`
	Size         uint64 `json:"size"`
	Rss          uint64 `json:"rss"`
	Pss          uint64 `json:"pss"`
	PrivateDirty uint64 `json:"private_dirty"`
	Swap         uint64 `json:"swap"`
}

// Rollup is the process's smaps_rollup.
type Rollup struct {
	Rss          uint64 `json:"rss"`
	Pss          uint64 `json:"pss"`
	PrivateDirty uint64 `json:"private_dirty"`
	PrivateClean uint64 `json:"private_clean"`
	Anonymous    uint64 `json:"anonymous"`
	Swap         uint64 `json:"swap"`
}

// MapsSummary is the memory map by class and the process's counters.
type MapsSummary struct {
	Process  Rollup    `json:"process"`
	Classes  []Class   `json:"classes"`
	Mappings []Mapping `json:"mappings,omitempty"`
}

// Mapping is one mapping, with maps --all.
type Mapping struct {
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

func newMapsSummary(ms report.MapsSummary) MapsSummary {
	roll := ms.Rollup
	out := MapsSummary{
		Process: Rollup{Rss: roll.Rss, Pss: roll.Pss, PrivateDirty: roll.PrivateDirty, PrivateClean: roll.PrivateClean, Anonymous: roll.Anonymous, Swap: roll.Swap},
		Classes: []Class{},
	}
	for _, c := range ms.Classes {
		out.Classes = append(out.Classes, Class{Class: c.Class.String(), Count: c.Count, Size: c.Size, Rss: c.Rss, Pss: c.Pss, PrivateDirty: c.PrivateDirty, Swap: c.Swap})
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
		for _, m := range m.Mappings {
			out.Mappings = append(out.Mappings, Mapping{Start: m.Start, End: m.End, Perms: m.Perms, Offset: m.Offset, Path: m.Path,
				Class: m.Class.String(), Rss: m.Rss, PrivateDirty: m.PrivateDirty, Swap: m.Swap})
		}
	}
	return out
}
