package report

import (
	"fmt"
	"sort"
)

// Diff is what changed between two summaries: per arena, per memory-map
// class, the process's counters and the findings.
type Diff struct {
	Before, After *Summary
	// Warnings say when the two are not of one process and glibc.
	Warnings []string
	// Changed is false when nothing below changed (PSS aside: it moves
	// when other processes map the same files).
	Changed bool
	// ByAddress: arenas were matched by address (both summaries come from
	// a walk), else by position.
	ByAddress bool
	Arenas    []ArenaDiff // largest growth first
	Totals    TotalsDiff
	Process   ProcessDiff
	Classes   []ClassDiff // largest RSS growth first
	// Appeared and Cleared are the findings (by ID) only in After, and
	// only in Before.
	Appeared, Cleared []Finding
}

// Delta is one measure in both summaries; Delta = After - Before.
type Delta struct {
	Before, After uint64
	Delta         int64
}

func newDelta(before, after uint64) Delta {
	return Delta{Before: before, After: after, Delta: int64(after) - int64(before)}
}

// optDelta is a measure that a summary may lack (nil): then so is the delta.
func optDelta(before, after *uint64) *Delta {
	if before == nil || after == nil {
		return nil
	}
	d := newDelta(*before, *after)
	return &d
}

// Status says how an arena or a class differs between the two summaries.
type Status string

const (
	Unchanged Status = "unchanged"
	Changed   Status = "changed"
	New       Status = "new"
	Gone      Status = "gone"
)

// MallocDiff is what an arena (or all of them) holds, in both summaries.
// Fast is nil when either lacks fastbin bytes, Tcache when either lacks
// the walk.
type MallocDiff struct {
	SystemCurrent, InUse, Free Delta
	Fast                       *Delta
	Rest                       Delta
	Tcache                     *Delta
}

// ArenaDiff is one arena. Index is its index in After (nil when it is
// gone), IndexBefore in Before (nil when it is new); Growth, the sort key,
// is the larger of the growth of system and in use.
type ArenaDiff struct {
	Index, IndexBefore *int
	Main               bool
	Addr               uint64
	Status             Status
	Growth             int64
	MallocDiff
}

// TotalsDiff is every arena together. Arenas is a count, not bytes.
type TotalsDiff struct {
	Arenas Delta
	MallocDiff
	MmapBytes *Delta
}

// ClassDiff is one memory-map class.
type ClassDiff struct {
	Class                         string
	Status                        Status
	Size, Rss, PrivateDirty, Swap Delta
}

// ProcessDiff is the process's own counters (smaps_rollup).
type ProcessDiff struct {
	Rss, Pss, PrivateDirty, Anonymous, Swap Delta
}

// Compare says what changed from a to b. Arenas are matched by address
// when every arena of both has one (a read-only walk); otherwise main with
// main and the others from the oldest, since glibc puts each new arena
// right after main_arena and so shifts the index of every older one.
func Compare(a, b *Summary) *Diff {
	d := &Diff{Before: a, After: b, Warnings: warnings(a, b), Arenas: []ArenaDiff{}, Classes: []ClassDiff{}}
	pairs, byAddr := matchArenas(a.Arenas, b.Arenas)
	d.ByAddress = byAddr
	var sumA, sumB []ArenaMeasures
	for _, p := range pairs {
		ad := arenaDiff(p[0], p[1])
		d.Arenas = append(d.Arenas, ad)
		if p[0] != nil {
			sumA = append(sumA, *p[0])
		}
		if p[1] != nil {
			sumB = append(sumB, *p[1])
		}
		d.Changed = d.Changed || ad.Status != Unchanged
	}
	sort.SliceStable(d.Arenas, func(i, j int) bool { return d.Arenas[i].Growth > d.Arenas[j].Growth })
	d.Totals = TotalsDiff{
		Arenas:     newDelta(uint64(len(a.Arenas)), uint64(len(b.Arenas))),
		MallocDiff: mallocDiff(sumArenas(sumA), sumArenas(sumB)),
		MmapBytes:  optDelta(a.MmapBytes, b.MmapBytes),
	}
	d.Changed = d.Changed || d.Totals.MmapBytes != nil && d.Totals.MmapBytes.Delta != 0
	pa, pb := a.Rollup, b.Rollup
	d.Process = ProcessDiff{Rss: newDelta(pa.Rss, pb.Rss), Pss: newDelta(pa.Pss, pb.Pss),
		PrivateDirty: newDelta(pa.PrivateDirty, pb.PrivateDirty), Anonymous: newDelta(pa.Anonymous, pb.Anonymous), Swap: newDelta(pa.Swap, pb.Swap)}
	d.Changed = d.Changed || anyDelta(d.Process.Rss, d.Process.PrivateDirty, d.Process.Swap)
	d.Classes = classDiffs(a.Classes, b.Classes)
	for _, c := range d.Classes {
		d.Changed = d.Changed || c.Status != Unchanged
	}
	d.Appeared, d.Cleared = findingsMissing(b.Findings, a.Findings), findingsMissing(a.Findings, b.Findings)
	d.Changed = d.Changed || len(d.Appeared)+len(d.Cleared) > 0
	return d
}

// warnings says when the two summaries are not of one process and glibc.
func warnings(a, b *Summary) []string {
	w := []string{}
	name := func(s *Summary) string {
		if s.Source != "" {
			return s.Source
		}
		return "the first document"
	}
	if a.Pid != b.Pid || a.Exe != b.Exe {
		w = append(w, fmt.Sprintf("%s is process %d (%s), %s process %d (%s): comparing them all the same",
			name(a), a.Pid, a.Exe, name(b), b.Pid, b.Exe))
	}
	if a.Glibc != b.Glibc {
		w = append(w, fmt.Sprintf("%s has glibc %s, %s glibc %s: comparing them all the same", name(a), a.Glibc, name(b), b.Glibc))
	}
	return w
}

// matchArenas pairs the arenas of two summaries: by address when every
// arena of both has one, else main with main and the others from the end
// of the list, the oldest arena being last. An arena found in one summary
// only is paired with nil.
func matchArenas(a, b []ArenaMeasures) (pairs [][2]*ArenaMeasures, byAddr bool) {
	byAddr = true
	for _, as := range [][]ArenaMeasures{a, b} {
		for i := range as {
			byAddr = byAddr && as[i].Addr != 0
		}
	}
	matched := make([]bool, len(a))
	for j := range b {
		i := -1
		switch {
		case byAddr:
			for k := range a {
				if a[k].Addr == b[j].Addr {
					i = k
				}
			}
		case j == 0 || b[j].Main:
			i = 0
		default:
			i = j - (len(b) - len(a))
		}
		if i >= 0 && i < len(a) && !matched[i] && a[i].Main == b[j].Main {
			matched[i] = true
			pairs = append(pairs, [2]*ArenaMeasures{&a[i], &b[j]})
		} else {
			pairs = append(pairs, [2]*ArenaMeasures{nil, &b[j]})
		}
	}
	for i := range a {
		if !matched[i] {
			pairs = append(pairs, [2]*ArenaMeasures{&a[i], nil})
		}
	}
	return pairs, byAddr
}

func mallocDiff(a, b ArenaMeasures) MallocDiff {
	return MallocDiff{SystemCurrent: newDelta(a.SystemCurrent, b.SystemCurrent), InUse: newDelta(a.InUse, b.InUse),
		Free: newDelta(a.Free, b.Free), Fast: optDelta(a.Fast, b.Fast), Rest: newDelta(a.Rest, b.Rest),
		Tcache: optDelta(a.Tcache, b.Tcache)}
}

// arenaDiff compares one arena; a missing side (nil) counts as all zero,
// except for the measures it would lack anyway.
func arenaDiff(a, b *ArenaMeasures) ArenaDiff {
	var ma, mb ArenaMeasures
	if a != nil {
		ma = *a
	}
	if b != nil {
		mb = *b
	}
	if a == nil {
		ma.Fast, ma.Tcache = zeroLike(mb.Fast), zeroLike(mb.Tcache)
	}
	if b == nil {
		mb.Fast, mb.Tcache = zeroLike(ma.Fast), zeroLike(ma.Tcache)
	}
	d := ArenaDiff{MallocDiff: mallocDiff(ma, mb), Status: Unchanged}
	for _, x := range []*ArenaMeasures{a, b} {
		if x != nil {
			d.Main = x.Main
			if x.Addr != 0 {
				d.Addr = x.Addr
			}
		}
	}
	if a != nil {
		d.IndexBefore = &a.Index
	}
	if b != nil {
		d.Index = &b.Index
	}
	switch {
	case a == nil:
		d.Status = New
	case b == nil:
		d.Status = Gone
	case d.MallocDiff.changed():
		d.Status = Changed
	}
	d.Growth = max(d.SystemCurrent.Delta, d.InUse.Delta)
	return d
}

func zeroLike(p *uint64) *uint64 {
	if p == nil {
		return nil
	}
	return new(uint64)
}

func (m MallocDiff) changed() bool {
	ds := []Delta{m.SystemCurrent, m.InUse, m.Free, m.Rest}
	for _, p := range []*Delta{m.Fast, m.Tcache} {
		if p != nil {
			ds = append(ds, *p)
		}
	}
	return anyDelta(ds...)
}

func anyDelta(ds ...Delta) bool {
	for _, d := range ds {
		if d.Delta != 0 {
			return true
		}
	}
	return false
}

// classDiffs pairs the memory-map classes by name, largest RSS growth first.
func classDiffs(a, b []ClassMeasures) []ClassDiff {
	var names []string
	byName := map[string]*[2]ClassMeasures{}
	for side, cs := range [][]ClassMeasures{a, b} {
		for _, c := range cs {
			p, ok := byName[c.Class]
			if !ok {
				p = &[2]ClassMeasures{}
				byName[c.Class] = p
				names = append(names, c.Class)
			}
			p[side] = c
		}
	}
	out := []ClassDiff{}
	for _, n := range names {
		p := byName[n]
		c := ClassDiff{Class: n, Status: Unchanged, Size: newDelta(p[0].Size, p[1].Size), Rss: newDelta(p[0].Rss, p[1].Rss),
			PrivateDirty: newDelta(p[0].PrivateDirty, p[1].PrivateDirty), Swap: newDelta(p[0].Swap, p[1].Swap)}
		if anyDelta(c.Size, c.Rss, c.PrivateDirty, c.Swap) || p[0].Count != p[1].Count {
			c.Status = Changed
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rss.Delta > out[j].Rss.Delta })
	return out
}

// findingsMissing returns the findings of in whose ID from lacks.
func findingsMissing(in, from []Finding) []Finding {
	out := []Finding{}
	for _, f := range in {
		found := false
		for _, g := range from {
			found = found || g.ID == f.ID
		}
		if !found {
			out = append(out, f)
		}
	}
	return out
}

// ArenasChanged is how many arenas differ between the two summaries.
func (d *Diff) ArenasChanged() int {
	n := 0
	for _, a := range d.Arenas {
		if a.Status != Unchanged {
			n++
		}
	}
	return n
}

// ClassesChanged is how many memory-map classes differ.
func (d *Diff) ClassesChanged() int {
	n := 0
	for _, c := range d.Classes {
		if c.Status != Unchanged {
			n++
		}
	}
	return n
}

// MatchedBy says how the arenas were matched: "address" or "position".
func (d *Diff) MatchedBy() string {
	if d.ByAddress {
		return "address"
	}
	return "position"
}
