package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
)

func newDiffCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "diff A.json B.json",
		Short: "What grew between two info --json documents: per arena, per memory-map class, the process, the findings",
		Long: `diff compares two documents written by 'arenactl info --json' (or two
lines of 'arenactl watch --json': a file holding several JSON documents, one
a line, stands for its last one). It shows, largest growth first, what each
arena holds from the system, has in use, has free (fastbins, other bins) and
has cached in threads' tcaches (when both documents come from --read-only),
then each memory-map class, the process's RSS and the findings that appeared
or cleared.

Arenas are matched by address when both documents come from a read-only
walk; otherwise main_arena with main_arena and the thread arenas from the
oldest, since glibc puts each new arena right after main_arena and so shifts
the index of every older one. Documents of two different processes or glibc
versions are compared all the same, after a warning.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return &usageError{msg: "diff takes two files written by 'arenactl info --json' (see 'arenactl diff --help')"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			before, err := readInfoDoc(args[0])
			if err != nil {
				return err
			}
			after, err := readInfoDoc(args[1])
			if err != nil {
				return err
			}
			d := diffInfo(before, after)
			d.Before.File, d.After.File = args[0], args[1]
			d.Warnings = diffWarnings(d.Before, d.After)
			for _, w := range d.Warnings {
				fmt.Fprintf(os.Stderr, "arenactl: warning: %s\n", w)
			}
			if asJSON {
				return writeJSON(os.Stdout, d)
			}
			return renderDiff(os.Stdout, d)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (see README for the schema)")
	return c
}

// jsonWatchSample is one line of watch --json: the info document of the
// sample, with when it was taken and its index. diff reads documents into
// it, so that it knows a watch line from a plain info document (no time).
type jsonWatchSample struct {
	Time   string `json:"time"`
	Sample int    `json:"sample"`
	jsonInfo
}

// readInfoDoc reads an info --json document, or the last of the documents
// (JSON lines of watch --json) a file holds.
func readInfoDoc(path string) (*jsonWatchSample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var last *jsonWatchSample
	for {
		var doc jsonWatchSample
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not JSON written by arenactl info --json or watch --json: %w", path, err)
		}
		last = &doc
	}
	switch {
	case last == nil:
		return nil, fmt.Errorf("%s: empty: no arenactl info --json document in it", path)
	case len(last.Arenas) == 0:
		return nil, fmt.Errorf("%s: not written by arenactl info --json or watch --json: it has no arenas", path)
	}
	return last, nil
}

// The diff's JSON (documented in README.md). As for every other document,
// names are stable: add fields, never rename or remove one.

// jsonDelta is one measure in both documents, in bytes; delta = after - before.
type jsonDelta struct {
	Before uint64 `json:"before"`
	After  uint64 `json:"after"`
	Delta  int64  `json:"delta"`
}

func newDelta(before, after uint64) jsonDelta {
	return jsonDelta{Before: before, After: after, Delta: int64(after) - int64(before)}
}

// optDelta is a measure that a document may lack (null): then so is the delta.
func optDelta(before, after *uint64) *jsonDelta {
	if before == nil || after == nil {
		return nil
	}
	d := newDelta(*before, *after)
	return &d
}

// jsonMallocDiff is what an arena (or all of them) holds, in both documents.
// fast_bytes is null when either glibc prints no fastbin bytes; tcache_bytes
// when either document lacks the read-only walk.
type jsonMallocDiff struct {
	SystemCurrent jsonDelta  `json:"system_current"`
	InUseBytes    jsonDelta  `json:"in_use_bytes"`
	FreeBytes     jsonDelta  `json:"free_bytes"`
	FastBytes     *jsonDelta `json:"fast_bytes"`
	RestBytes     jsonDelta  `json:"rest_bytes"`
	TcacheBytes   *jsonDelta `json:"tcache_bytes"`
}

// jsonArenaDiff is one arena. index is its index in the second document
// (null when it is gone), index_before in the first (null when it is new);
// growth, the sort key, is the larger of the growth of system and in use.
type jsonArenaDiff struct {
	Index       *int   `json:"index"`
	IndexBefore *int   `json:"index_before"`
	Main        bool   `json:"main"`
	Addr        uint64 `json:"addr,omitempty"`
	Status      string `json:"status"` // "changed", "unchanged", "new" or "gone"
	Growth      int64  `json:"growth"`
	jsonMallocDiff
}

type jsonTotalsDiff struct {
	Arenas jsonDelta `json:"arenas"` // a count, not bytes
	jsonMallocDiff
	MmapBytes *jsonDelta `json:"mmap_bytes"`
}

type jsonClassDiff struct {
	Class        string    `json:"class"`
	Status       string    `json:"status"`
	Size         jsonDelta `json:"size"`
	Rss          jsonDelta `json:"rss"`
	PrivateDirty jsonDelta `json:"private_dirty"`
	Swap         jsonDelta `json:"swap"`
}

type jsonProcessDiff struct {
	Rss          jsonDelta `json:"rss"`
	Pss          jsonDelta `json:"pss"`
	PrivateDirty jsonDelta `json:"private_dirty"`
	Anonymous    jsonDelta `json:"anonymous"`
	Swap         jsonDelta `json:"swap"`
}

// jsonDiffSide says what one document is: file, process, and for a line of
// watch --json when it was taken and its index.
type jsonDiffSide struct {
	File   string `json:"file,omitempty"`
	Pid    int    `json:"pid"`
	Exe    string `json:"exe"`
	Glibc  string `json:"glibc"`
	Time   string `json:"time,omitempty"`
	Sample *int   `json:"sample,omitempty"`
}

// jsonDiff is diff's document: arenas and classes largest growth first.
type jsonDiff struct {
	Before           jsonDiffSide    `json:"before"`
	After            jsonDiffSide    `json:"after"`
	Warnings         []string        `json:"warnings"`
	Changed          bool            `json:"changed"`
	MatchedBy        string          `json:"matched_by"` // "address" or "position"
	Arenas           []jsonArenaDiff `json:"arenas"`
	Totals           jsonTotalsDiff  `json:"totals"`
	Process          jsonProcessDiff `json:"process"`
	Classes          []jsonClassDiff `json:"classes"`
	FindingsAppeared []jsonFinding   `json:"findings_appeared"`
	FindingsCleared  []jsonFinding   `json:"findings_cleared"`
}

func diffSide(doc *jsonWatchSample) jsonDiffSide {
	s := jsonDiffSide{Pid: doc.Pid, Exe: doc.Exe, Glibc: doc.Libc.Version, Time: doc.Time}
	if doc.Time != "" {
		n := doc.Sample
		s.Sample = &n
	}
	return s
}

// diffWarnings says when the two documents are not of one process and glibc.
func diffWarnings(a, b jsonDiffSide) []string {
	w := []string{}
	name := func(s jsonDiffSide) string {
		if s.File != "" {
			return s.File
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

// diffInfo compares two info documents.
func diffInfo(a, b *jsonWatchSample) jsonDiff {
	d := jsonDiff{Before: diffSide(a), After: diffSide(b), Warnings: []string{}, Arenas: []jsonArenaDiff{}, Classes: []jsonClassDiff{}}
	pairs, byAddr := matchArenas(a.Arenas, b.Arenas)
	d.MatchedBy = "position"
	if byAddr {
		d.MatchedBy = "address"
	}
	var sumA, sumB []*jsonArena
	for _, p := range pairs {
		ad := arenaDiff(p[0], p[1])
		d.Arenas = append(d.Arenas, ad)
		if p[0] != nil {
			sumA = append(sumA, p[0])
		}
		if p[1] != nil {
			sumB = append(sumB, p[1])
		}
		d.Changed = d.Changed || ad.Status != "unchanged"
	}
	sort.SliceStable(d.Arenas, func(i, j int) bool { return d.Arenas[i].Growth > d.Arenas[j].Growth })
	d.Totals = jsonTotalsDiff{
		Arenas:         newDelta(uint64(len(a.Arenas)), uint64(len(b.Arenas))),
		jsonMallocDiff: mallocDiff(sumArenas(sumA), sumArenas(sumB)),
		MmapBytes:      optDelta(a.Totals.MmapBytes, b.Totals.MmapBytes),
	}
	d.Changed = d.Changed || d.Totals.MmapBytes != nil && d.Totals.MmapBytes.Delta != 0
	pa, pb := a.Maps.Process, b.Maps.Process
	d.Process = jsonProcessDiff{Rss: newDelta(pa.Rss, pb.Rss), Pss: newDelta(pa.Pss, pb.Pss),
		PrivateDirty: newDelta(pa.PrivateDirty, pb.PrivateDirty), Anonymous: newDelta(pa.Anonymous, pb.Anonymous), Swap: newDelta(pa.Swap, pb.Swap)}
	// Not PSS: it moves when other processes map the same files.
	d.Changed = d.Changed || anyDelta(d.Process.Rss, d.Process.PrivateDirty, d.Process.Swap)
	d.Classes = classDiffs(a.Maps.Classes, b.Maps.Classes)
	for _, c := range d.Classes {
		d.Changed = d.Changed || c.Status != "unchanged"
	}
	d.FindingsAppeared, d.FindingsCleared = findingsMissing(b.Findings, a.Findings), findingsMissing(a.Findings, b.Findings)
	d.Changed = d.Changed || len(d.FindingsAppeared)+len(d.FindingsCleared) > 0
	return d
}

// matchArenas pairs the arenas of two documents: by address when every
// arena of both has one (a read-only walk), else main with main and the
// others from the end of the list, the oldest arena being last. An arena
// found in one document only is paired with nil.
func matchArenas(a, b []jsonArena) (pairs [][2]*jsonArena, byAddr bool) {
	byAddr = true
	for _, as := range [][]jsonArena{a, b} {
		for i := range as {
			byAddr = byAddr && as[i].Walk != nil && as[i].Walk.Addr != 0
		}
	}
	matched := make([]bool, len(a))
	for j := range b {
		i := -1
		switch {
		case byAddr:
			for k := range a {
				if a[k].Walk.Addr == b[j].Walk.Addr {
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
			pairs = append(pairs, [2]*jsonArena{&a[i], &b[j]})
		} else {
			pairs = append(pairs, [2]*jsonArena{nil, &b[j]})
		}
	}
	for i := range a {
		if !matched[i] {
			pairs = append(pairs, [2]*jsonArena{&a[i], nil})
		}
	}
	return pairs, byAddr
}

// arenaMeasures is what diff compares of an arena, or a sum of arenas.
type arenaMeasures struct {
	system, inUse, free, rest uint64
	fast, tcache              *uint64
}

func measuresOf(a *jsonArena) arenaMeasures {
	if a == nil {
		return arenaMeasures{}
	}
	m := arenaMeasures{system: a.SystemCurrent, inUse: a.InUseBytes, free: a.FreeBytes, rest: a.RestBytes, fast: a.FastBytes}
	if a.Walk != nil {
		m.tcache = &a.Walk.TcacheBytes
	}
	return m
}

func sumArenas(as []*jsonArena) arenaMeasures {
	var s arenaMeasures
	fast, tcache := uint64(0), uint64(0)
	hasFast, hasTcache := len(as) > 0, len(as) > 0
	for _, a := range as {
		m := measuresOf(a)
		s.system += m.system
		s.inUse += m.inUse
		s.free += m.free
		s.rest += m.rest
		hasFast = hasFast && m.fast != nil
		hasTcache = hasTcache && m.tcache != nil
		if hasFast {
			fast += *m.fast
		}
		if hasTcache {
			tcache += *m.tcache
		}
	}
	s.fast, s.tcache = opt(hasFast, fast), opt(hasTcache, tcache)
	return s
}

func mallocDiff(a, b arenaMeasures) jsonMallocDiff {
	return jsonMallocDiff{SystemCurrent: newDelta(a.system, b.system), InUseBytes: newDelta(a.inUse, b.inUse),
		FreeBytes: newDelta(a.free, b.free), FastBytes: optDelta(a.fast, b.fast), RestBytes: newDelta(a.rest, b.rest),
		TcacheBytes: optDelta(a.tcache, b.tcache)}
}

// arenaDiff compares one arena; a missing side (nil) counts as all zero,
// except for the measures it would lack anyway.
func arenaDiff(a, b *jsonArena) jsonArenaDiff {
	ma, mb := measuresOf(a), measuresOf(b)
	if a == nil {
		ma.fast, ma.tcache = zeroLike(mb.fast), zeroLike(mb.tcache)
	}
	if b == nil {
		mb.fast, mb.tcache = zeroLike(ma.fast), zeroLike(ma.tcache)
	}
	d := jsonArenaDiff{jsonMallocDiff: mallocDiff(ma, mb), Status: "unchanged"}
	for _, x := range []*jsonArena{a, b} {
		if x != nil {
			d.Main = x.Main
			if x.Walk != nil {
				d.Addr = x.Walk.Addr
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
		d.Status = "new"
	case b == nil:
		d.Status = "gone"
	case d.jsonMallocDiff.changed():
		d.Status = "changed"
	}
	d.Growth = max(d.SystemCurrent.Delta, d.InUseBytes.Delta)
	return d
}

func zeroLike(p *uint64) *uint64 {
	if p == nil {
		return nil
	}
	return new(uint64)
}

func (m jsonMallocDiff) changed() bool {
	ds := []jsonDelta{m.SystemCurrent, m.InUseBytes, m.FreeBytes, m.RestBytes}
	for _, p := range []*jsonDelta{m.FastBytes, m.TcacheBytes} {
		if p != nil {
			ds = append(ds, *p)
		}
	}
	return anyDelta(ds...)
}

func anyDelta(ds ...jsonDelta) bool {
	for _, d := range ds {
		if d.Delta != 0 {
			return true
		}
	}
	return false
}

// classDiffs pairs the memory-map classes by name, largest RSS growth first.
func classDiffs(a, b []jsonClass) []jsonClassDiff {
	var names []string
	byName := map[string]*[2]jsonClass{}
	for side, cs := range [][]jsonClass{a, b} {
		for _, c := range cs {
			p, ok := byName[c.Class]
			if !ok {
				p = &[2]jsonClass{}
				byName[c.Class] = p
				names = append(names, c.Class)
			}
			p[side] = c
		}
	}
	out := []jsonClassDiff{}
	for _, n := range names {
		p := byName[n]
		c := jsonClassDiff{Class: n, Status: "unchanged", Size: newDelta(p[0].Size, p[1].Size), Rss: newDelta(p[0].Rss, p[1].Rss),
			PrivateDirty: newDelta(p[0].PrivateDirty, p[1].PrivateDirty), Swap: newDelta(p[0].Swap, p[1].Swap)}
		if anyDelta(c.Size, c.Rss, c.PrivateDirty, c.Swap) || p[0].Count != p[1].Count {
			c.Status = "changed"
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rss.Delta > out[j].Rss.Delta })
	return out
}

// findingsMissing returns the findings of in whose id from lacks.
func findingsMissing(in, from []jsonFinding) []jsonFinding {
	out := []jsonFinding{}
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

func renderDiff(w io.Writer, d jsonDiff) error {
	for _, s := range []struct {
		label string
		side  jsonDiffSide
	}{{"before:", d.Before}, {"after: ", d.After}} {
		fmt.Fprintf(w, "%s %s: process %d (%s), glibc %s", s.label, s.side.File, s.side.Pid, s.side.Exe, s.side.Glibc)
		if s.side.Sample != nil {
			fmt.Fprintf(w, ", watch sample %d at %s", *s.side.Sample, s.side.Time)
		}
		fmt.Fprintln(w)
	}
	if !d.Changed {
		_, err := fmt.Fprintln(w, "no change: the same arenas, memory map, RSS and findings in both")
		return err
	}
	fmt.Fprintln(w)
	return renderDiffBody(w, d)
}

// renderDiffBody prints what changed: the process's RSS, then the arenas
// and the memory-map classes that changed (largest growth first), then
// the findings that appeared or cleared.
func renderDiffBody(w io.Writer, d jsonDiff) error {
	p := d.Process
	fmt.Fprintf(w, "process: RSS %s, Private_Dirty %s, Swap %s\n\n", arrow(p.Rss), arrow(p.PrivateDirty), arrow(p.Swap))

	var arenas [][]string
	for _, a := range d.Arenas {
		if a.Status != "unchanged" {
			arenas = append(arenas, deltaRows(arenaLabel(a), mallocDeltas(a.jsonMallocDiff))...)
		}
	}
	if arenas != nil && len(d.Arenas) > 1 {
		all := fmt.Sprintf("all %d", d.Totals.Arenas.After)
		arenas = append(arenas, deltaRows(all, append(mallocDeltas(d.Totals.jsonMallocDiff), namedDelta{"mmapped", d.Totals.MmapBytes, false}))...)
	}
	err := renderDeltaTable(w, "arena", arenas, countChanged(d.Arenas, func(a jsonArenaDiff) string { return a.Status }),
		fmt.Sprintf("arenas, largest growth first (%%d of %d changed; matched by %s):", len(d.Arenas), d.MatchedBy),
		fmt.Sprintf("arenas: no change in any of the %d", len(d.Arenas)))
	if err != nil {
		return err
	}
	fmt.Fprintln(w)

	var classes [][]string
	for _, c := range d.Classes {
		if c.Status != "unchanged" {
			classes = append(classes, deltaRows(c.Class, []namedDelta{{"rss", &c.Rss, true}, {"private dirty", &c.PrivateDirty, true},
				{"size", &c.Size, false}, {"swap", &c.Swap, false}})...)
		}
	}
	err = renderDeltaTable(w, "class", classes, countChanged(d.Classes, func(c jsonClassDiff) string { return c.Status }),
		fmt.Sprintf("memory map, largest RSS growth first (%%d of %d classes changed):", len(d.Classes)),
		"memory map: no change in any class")
	if err != nil {
		return err
	}
	if len(d.FindingsAppeared)+len(d.FindingsCleared) > 0 {
		fmt.Fprintln(w)
		renderFindingChanges(w, d, "")
	}
	return nil
}

func countChanged[T any](xs []T, status func(T) string) int {
	n := 0
	for _, x := range xs {
		if status(x) != "unchanged" {
			n++
		}
	}
	return n
}

// renderDeltaTable prints rows of (name, measure, before, after, change)
// under title (a format taking the number changed), or none when nothing
// changed.
func renderDeltaTable(w io.Writer, what string, rows [][]string, changed int, title, none string) error {
	if changed == 0 {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	fmt.Fprintf(w, title+"\n", changed)
	t := newTable(w, what, "measure", "before", "after", "change")
	t.Options(tablewriter.WithRowMergeMode(tw.MergeHierarchical))
	for _, r := range rows {
		t.Append(r)
	}
	return t.Render()
}

// renderFindingChanges lists the findings that appeared and cleared, each
// line after indent.
func renderFindingChanges(w io.Writer, d jsonDiff, indent string) {
	for _, g := range []struct {
		what string
		fs   []jsonFinding
	}{{"appeared", d.FindingsAppeared}, {"cleared", d.FindingsCleared}} {
		for _, f := range g.fs {
			fmt.Fprintf(w, "%sfinding %s: [%s] %s (%s)\n", indent, g.what, f.Severity, f.Title, f.ID)
		}
	}
}

type namedDelta struct {
	name   string
	d      *jsonDelta
	always bool // shown even when it did not change
}

// deltaRows makes one table row per measure of an arena or class: those
// that changed, and those always shown.
func deltaRows(label string, ds []namedDelta) [][]string {
	var rows [][]string
	for _, n := range ds {
		if n.d != nil && (n.always || n.d.Delta != 0) {
			rows = append(rows, []string{label, n.name, human(n.d.Before), human(n.d.After), deltaHuman(n.d.Delta)})
		}
	}
	return rows
}

// mallocDeltas lists an arena's measures for display; fast and rest only
// when fast changed (else rest changed as free did).
func mallocDeltas(m jsonMallocDiff) []namedDelta {
	ds := []namedDelta{{"system", &m.SystemCurrent, true}, {"in use", &m.InUseBytes, true}, {"free", &m.FreeBytes, true}}
	if m.FastBytes != nil && m.FastBytes.Delta != 0 {
		ds = append(ds, namedDelta{"fast", m.FastBytes, true}, namedDelta{"rest", &m.RestBytes, true})
	}
	return append(ds, namedDelta{"tcache'd", m.TcacheBytes, false})
}

// arenaLabel names an arena by its index in the second document, saying
// when it moved, appeared or went.
func arenaLabel(a jsonArenaDiff) string {
	switch {
	case a.Index == nil:
		return fmt.Sprintf("was %d (gone)", *a.IndexBefore)
	case a.IndexBefore == nil:
		return fmt.Sprintf("%d (new)", *a.Index)
	}
	s := strconv.Itoa(*a.Index)
	if a.Main {
		s += " main"
	}
	if *a.IndexBefore != *a.Index {
		s += fmt.Sprintf(" (was %d)", *a.IndexBefore)
	}
	return s
}

// arrow prints a measure as "before → after (change)".
func arrow(d jsonDelta) string {
	return fmt.Sprintf("%s → %s (%s)", human(d.Before), human(d.After), deltaHuman(d.Delta))
}

// deltaHuman is a signed byte count with its sign: "+32.0 MiB", "-4.0 KiB", "0 B".
func deltaHuman(n int64) string {
	if n > 0 {
		return "+" + human(uint64(n))
	}
	return signedHuman(n)
}
