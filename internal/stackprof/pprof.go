package stackprof

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
		Comments: []string{fmt.Sprintf("arenactl leaks: %d samples, one per %d bytes allocated on average; %d dropped; %d with a short stack copy, %d of them completed from whole stacks",
			p.Samples, p.Window.Rate, p.Window.Dropped, p.Window.Shortened, p.Completed)},
	}
	if p.Window.Start.IsZero() {
		pp.TimeNanos = 0
	}
	st := newProtoStacks(pp, p.Mappings)
	for i := range p.Sites {
		s := &p.Sites[i]
		smp := &profile.Sample{Value: []int64{round(s.Est.AllocObjects), round(s.Est.AllocBytes),
			round(s.Est.InUseObjects), round(s.Est.InUseBytes)}, Location: st.locations(s.Frames)}
		pp.Sample = append(pp.Sample, smp)
	}
	return pp
}

func round(v float64) int64 { return int64(math.Round(v)) }

// protoStacks gives a pprof profile its mappings, and each distinct
// function and location once, as the sites' frames name them.
type protoStacks struct {
	pp    *profile.Profile
	maps  []*profile.Mapping
	locs  map[protoLoc]*profile.Location
	funcs map[protoFunc]*profile.Function
}

type protoLoc struct {
	addr    uint64
	mapping int
}

type protoFunc struct{ name, system, file string }

// newProtoStacks sets pp's mappings from ms (symbolized already:
// HasFunctions, so pprof never looks for the binaries).
func newProtoStacks(pp *profile.Profile, ms []Mapping) *protoStacks {
	st := &protoStacks{pp: pp, locs: map[protoLoc]*profile.Location{}, funcs: map[protoFunc]*profile.Function{}}
	for _, m := range ms {
		st.maps = append(st.maps, &profile.Mapping{ID: uint64(m.ID), Start: m.Start, Limit: m.Limit, Offset: m.Offset,
			File: m.File, BuildID: m.BuildID, HasFunctions: true,
			HasFilenames: m.HasLines, HasLineNumbers: m.HasLines, HasInlineFrames: true})
	}
	pp.Mapping = st.maps
	return st
}

func (st *protoStacks) function(f Frame) *profile.Function {
	name := f.Name()
	system := f.Mangled
	if system == "" {
		system = name
	}
	k := protoFunc{name, system, f.File}
	fn := st.funcs[k]
	if fn == nil {
		fn = &profile.Function{ID: uint64(len(st.pp.Function) + 1), Name: name, SystemName: system, Filename: f.File}
		st.funcs[k] = fn
		st.pp.Function = append(st.pp.Function, fn)
	}
	return fn
}

// locations are a sample's locations, leaf to root: a location's lines
// are the run of inlined frames ending at the function they were inlined
// into, innermost first, as pprof has them.
func (st *protoStacks) locations(frames []Frame) []*profile.Location {
	var out []*profile.Location
	for end := len(frames) - 1; end >= 0; {
		start := end
		for start > 0 && frames[start].Inlined {
			start--
		}
		f := frames[start]
		k := protoLoc{f.Addr, f.MappingID}
		loc := st.locs[k]
		if loc == nil {
			loc = &profile.Location{ID: uint64(len(st.pp.Location) + 1), Address: f.Addr}
			if f.MappingID != 0 {
				loc.Mapping = st.maps[f.MappingID-1]
			}
			for j := end; j >= start; j-- {
				loc.Line = append(loc.Line, profile.Line{Function: st.function(frames[j]), Line: int64(frames[j].Line)})
			}
			st.locs[k] = loc
			st.pp.Location = append(st.pp.Location, loc)
		}
		out = append(out, loc)
		end = start - 1
	}
	return out
}

// WritePprof writes the profile as pprof's gzipped profile.proto, which
// go tool pprof and every pprof viewer open.
func WritePprof(w io.Writer, p *Profile) error {
	return p.Proto().Write(w)
}
