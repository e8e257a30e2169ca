package heapprof

import (
	"fmt"
	"io"
	"math"

	"github.com/google/pprof/profile"
)

// The sample types of a Go heap profile, in its order, so that go tool
// pprof's -inuse_space/-alloc_objects... flags and its heap defaults
// apply.
var sampleTypes = []*profile.ValueType{
	{Type: "alloc_objects", Unit: "count"},
	{Type: "alloc_space", Unit: "bytes"},
	{Type: "inuse_objects", Unit: "count"},
	{Type: "inuse_space", Unit: "bytes"},
}

// Proto is the profile as pprof's model: a sample per site valued with
// its rounded estimates, a location per distinct address with its
// inlined calls as extra lines (innermost first, as pprof has them), a
// mapping per module with its build-id and file offset, symbolized
// already (HasFunctions), so pprof never looks for the binaries.
func (p *Profile) Proto() *profile.Profile {
	pp := &profile.Profile{
		SampleType:        sampleTypes,
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            int64(p.Window.Rate),
		TimeNanos:         p.Window.Start.UnixNano(),
		DurationNanos:     p.Window.Duration.Nanoseconds(),
		Comments: []string{fmt.Sprintf("arenactl leaks: %d samples, one per %d bytes allocated on average; %d dropped; %d thinned (the samples kept stand for them)",
			p.Samples, p.Window.Rate, p.Window.Dropped, p.Window.Thinned)},
	}
	if p.Window.Start.IsZero() {
		pp.TimeNanos = 0
	}
	maps := make([]*profile.Mapping, len(p.Mappings))
	for i, m := range p.Mappings {
		maps[i] = &profile.Mapping{ID: uint64(m.ID), Start: m.Start, Limit: m.Limit, Offset: m.Offset,
			File: m.File, BuildID: m.BuildID, HasFunctions: true,
			HasFilenames: m.HasLines, HasLineNumbers: m.HasLines, HasInlineFrames: true}
	}
	pp.Mapping = maps
	type locKey struct {
		addr    uint64
		mapping int
	}
	type funcKey struct{ name, system, file string }
	locs := map[locKey]*profile.Location{}
	funcs := map[funcKey]*profile.Function{}
	function := func(f Frame) *profile.Function {
		name := f.Name()
		system := f.Mangled
		if system == "" {
			system = name
		}
		k := funcKey{name, system, f.File}
		fn := funcs[k]
		if fn == nil {
			fn = &profile.Function{ID: uint64(len(pp.Function) + 1), Name: name, SystemName: system, Filename: f.File}
			funcs[k] = fn
			pp.Function = append(pp.Function, fn)
		}
		return fn
	}
	for i := range p.Sites {
		s := &p.Sites[i]
		smp := &profile.Sample{Value: []int64{round(s.Est.AllocObjects), round(s.Est.AllocBytes),
			round(s.Est.InUseObjects), round(s.Est.InUseBytes)}}
		// Leaf to root; a location's frames are the run of inlined ones
		// ending at the function they were inlined into.
		for end := len(s.Frames) - 1; end >= 0; {
			start := end
			for start > 0 && s.Frames[start].Inlined {
				start--
			}
			f := s.Frames[start]
			k := locKey{f.Addr, f.MappingID}
			loc := locs[k]
			if loc == nil {
				loc = &profile.Location{ID: uint64(len(pp.Location) + 1), Address: f.Addr}
				if f.MappingID != 0 {
					loc.Mapping = maps[f.MappingID-1]
				}
				for j := end; j >= start; j-- {
					loc.Line = append(loc.Line, profile.Line{Function: function(s.Frames[j]), Line: int64(s.Frames[j].Line)})
				}
				locs[k] = loc
				pp.Location = append(pp.Location, loc)
			}
			smp.Location = append(smp.Location, loc)
			end = start - 1
		}
		pp.Sample = append(pp.Sample, smp)
	}
	return pp
}

func round(v float64) int64 { return int64(math.Round(v)) }

// WritePprof writes the profile as pprof's gzipped profile.proto, which
// go tool pprof and every pprof viewer open.
func WritePprof(w io.Writer, p *Profile) error {
	return p.Proto().Write(w)
}
