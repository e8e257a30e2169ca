package stackprof

import (
	"context"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/unwind"
)

// This file is the profile model with a value per kind, for profiles that
// are not of allocations (arenactl growth: bytes touched, mapped,
// unmapped... by call stack and memory class). It shares the Builder's
// unwinding, symbolization and site identity, and the Frame and Mapping
// types, with the heap profile; only the values differ.

// Stacks unwinds and symbolizes stacks into sites, as a Builder does, for
// a caller that keeps its own values per site. Not safe for concurrent
// use.
type Stacks struct {
	b *Builder
	// moved is where each site's stacks went when the cut ones were
	// joined again (rejoin.go), once Incomplete or Finish ran; movedN how
	// many counted-truncated stacks they were.
	moved  []int
	movedN int
}

// NewStacks starts an empty table of stacks.
func NewStacks(u *unwind.Unwinder, s *symbolize.Symbolizer) *Stacks {
	return &Stacks{b: NewBuilder(u, s)}
}

// Site unwinds start and stack, symbolizes the chain and returns the
// index of its site (the same for every stack that symbolizes the same),
// and the unwinding's stop.
func (t *Stacks) Site(start unwind.Start, stack unwind.Stack) (int, unwind.Stop) {
	return t.b.site(start, stack)
}

// Whole is Site for a stack copied whole, with its key for a
// Completion: its PCs.
func (t *Stacks) Whole(start unwind.Start, stack unwind.Stack) (site int, key string) {
	b := t.b
	si, tr := b.trace(start, stack)
	b.count(tr)
	return si, string(b.pcKey[:len(b.pcKey)-1])
}

// Short is Site for a stack of which only the top was copied: its site,
// and, when the copy ended the unwinding, the key (its PCs) of the short
// stack to complete, else "" (it is counted as a stack then).
func (t *Stacks) Short(start unwind.Start, stack unwind.Stack) (site int, key string) {
	b := t.b
	si, tr := b.trace(start, stack)
	if !tr.Truncated {
		b.count(tr)
		return si, ""
	}
	return si, string(b.pcKey[:len(b.pcKey)-1])
}

// Incomplete is how many stacks did not reach the outermost frame, and
// Truncated how many of them because the copy was too short.
func (t *Stacks) Incomplete() (incomplete, truncated int) {
	t.settle()
	return t.b.incomplete - t.movedN, t.b.truncated - t.movedN
}

// settle joins the cut stacks again, once: the table's stacks are all in.
func (t *Stacks) settle() {
	if t.moved == nil {
		t.moved, t.movedN = t.b.movedSites()
	}
}

// ValueType names one kind of value, as pprof's sample types do.
type ValueType struct{ Type, Unit string }

// Valued is a profile with a value per kind for every site: a call stack,
// and labels that split it further (a memory class).
type Valued struct {
	Types []ValueType
	// Default is the type pprof shows first.
	Default  string
	Window   Window
	Comments []string
	Sites    []ValuedSite
	Mappings []Mapping
}

// ValuedSite is one call stack (root first) with labels and a value per
// type of the profile.
type ValuedSite struct {
	Frames []Frame
	Labels map[string]string
	Values []float64
	Stop   unwind.Stop
}

// Site is a site's stack in profile terms: its frames, root first, with
// MappingIDs into Mappings.
func (t *Stacks) Frames(site int) []Frame { return t.b.sites[site].frames }

// Finish turns the sites' own values (by the caller's site index) into a
// Valued profile: frames with their mappings numbered as in the heap
// profile (main executable first).
func (t *Stacks) Finish(v *Valued, sites []ValuedSite, index []int) {
	t.settle()
	p := &Profile{}
	ids := t.b.mappings(p)
	v.Mappings = p.Mappings
	// A site moved onto another with the same labels adds its values to
	// it (in the first one's place).
	at := map[string]int{}
	for k, s := range sites {
		si := index[k]
		if si < len(t.moved) {
			si = t.moved[si]
		}
		key := labelKey(si, s.Labels)
		if j, ok := at[key]; ok {
			for i, x := range s.Values {
				v.Sites[j].Values[i] += x
			}
			continue
		}
		at[key] = len(v.Sites)
		st := t.b.sites[si]
		s.Frames, s.Stop = renumbered(st.frames, ids, v.Mappings), st.stop
		s.Values = slices.Clone(s.Values)
		v.Sites = append(v.Sites, s)
	}
}

// labelKey names a site with its labels.
func labelKey(site int, labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	var sb strings.Builder
	sb.WriteString(strconv.Itoa(site))
	for _, k := range keys {
		sb.WriteString("\x00" + k + "\x00" + labels[k])
	}
	return sb.String()
}

// Index is the position of type name in v.Types, -1 if none.
func (v *Valued) Index(name string) int {
	for i, t := range v.Types {
		if t.Type == name {
			return i
		}
	}
	return -1
}

// Proto is the profile as pprof's model: a sample per site valued per
// type, its labels as string labels, locations and mappings as Proto has
// them for a heap profile.
func (v *Valued) Proto() *profile.Profile {
	pp := &profile.Profile{DefaultSampleType: v.Default, Comments: v.Comments,
		TimeNanos: v.Window.Start.UnixNano(), DurationNanos: v.Window.Duration.Nanoseconds()}
	if v.Window.Start.IsZero() {
		pp.TimeNanos = 0
	}
	for _, t := range v.Types {
		pp.SampleType = append(pp.SampleType, &profile.ValueType{Type: t.Type, Unit: t.Unit})
	}
	st := newProtoStacks(pp, v.Mappings)
	for i := range v.Sites {
		s := &v.Sites[i]
		smp := &profile.Sample{}
		for _, x := range s.Values {
			smp.Value = append(smp.Value, round(x))
		}
		if len(s.Labels) > 0 {
			smp.Label = map[string][]string{}
			for k, l := range s.Labels {
				smp.Label[k] = []string{l}
			}
		}
		smp.Location = st.locations(s.Frames)
		pp.Sample = append(pp.Sample, smp)
	}
	return pp
}

// WriteValuedPprof writes v as pprof's gzipped profile.proto.
func WriteValuedPprof(w io.Writer, v *Valued) error { return v.Proto().Write(w) }

// WriteValuedFolded writes one type of v as FlameGraph's folded stacks:
// the frames' names from the root, then the label named leaf (a memory
// class) as the last frame in brackets when the site has it, then the
// value. Sites whose value is not positive are left out.
func WriteValuedFolded(w io.Writer, v *Valued, typ int, leaf string) error {
	sums := map[string]int64{}
	for i := range v.Sites {
		s := &v.Sites[i]
		x := round(s.Values[typ])
		if x <= 0 {
			continue
		}
		names := make([]string, 0, len(s.Frames)+1)
		for _, f := range s.Frames {
			names = append(names, foldedName(f.Name()))
		}
		if l, ok := s.Labels[leaf]; ok && leaf != "" {
			names = append(names, "["+foldedName(l)+"]")
		}
		sums[strings.Join(names, ";")] += x
	}
	return WriteFoldedSums(w, sums)
}

// ServeValued is Serve for a profile with a value per kind: pprof's web
// UI over v until ctx ends, behind the same secret path and with the same
// views.
func (w *Web) ServeValued(ctx context.Context, v *Valued) error {
	return w.serveProto(ctx, v.Proto(), "arenactl-growth")
}
