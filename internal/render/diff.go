package render

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/arenactl/arenactl/internal/report"
)

// Diff prints what changed between two summaries.
func Diff(w io.Writer, d *report.Diff) error {
	for _, s := range []struct {
		label string
		side  *report.Summary
	}{{"before:", d.Before}, {"after: ", d.After}} {
		fmt.Fprintf(w, "%s %s: process %d (%s), glibc %s", s.label, Text(s.side.Source), s.side.Pid, Text(s.side.Exe), s.side.Glibc)
		if sm := s.side.Sample; sm != nil {
			fmt.Fprintf(w, ", watch sample %d at %s", sm.Index, sm.Time.Format(time.RFC3339Nano))
		}
		fmt.Fprintln(w)
	}
	if !d.Changed {
		_, err := fmt.Fprintln(w, "no change: the same arenas, memory map, RSS and findings in both")
		return err
	}
	fmt.Fprintln(w)
	return DiffBody(w, d)
}

// DiffBody prints what changed: the process's RSS, then the arenas
// and the memory-map classes that changed (largest growth first), then
// the findings that appeared or cleared.
func DiffBody(w io.Writer, d *report.Diff) error {
	p := d.Process
	unmeasured := d.Before.Unmeasured || d.After.Unmeasured
	if unmeasured {
		fmt.Fprintln(w, "process: RSS, Private_Dirty and Swap unknown (a kernel core records none)")
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "process: RSS %s, Private_Dirty %s, Swap %s\n\n", arrow(p.Rss), arrow(p.PrivateDirty), arrow(p.Swap))
	}

	var arenas [][]string
	for _, a := range d.Arenas {
		if a.Status != report.Unchanged {
			arenas = append(arenas, deltaRows(arenaLabel(a), mallocDeltas(a.MallocDiff))...)
		}
	}
	if arenas != nil && len(d.Arenas) > 1 {
		all := fmt.Sprintf("all %d", d.Totals.Arenas.After)
		arenas = append(arenas, deltaRows(all, append(mallocDeltas(d.Totals.MallocDiff), namedDelta{"mmapped", d.Totals.MmapBytes, false}))...)
	}
	err := deltaTable(w, "arena", arenas, d.ArenasChanged(),
		fmt.Sprintf("arenas, largest growth first (%%d of %d changed; matched by %s):", len(d.Arenas), d.MatchedBy()),
		fmt.Sprintf("arenas: no change in any of the %d", len(d.Arenas)))
	if err != nil {
		return err
	}
	fmt.Fprintln(w)

	var classes [][]string
	for _, c := range d.Classes {
		switch {
		case c.Status == report.Unchanged:
		case unmeasured:
			classes = append(classes, deltaRows(c.Class, []namedDelta{{"size", &c.Size, true}})...)
		default:
			classes = append(classes, deltaRows(c.Class, []namedDelta{{"rss", &c.Rss, true}, {"private dirty", &c.PrivateDirty, true},
				{"size", &c.Size, false}, {"swap", &c.Swap, false}})...)
		}
	}
	err = deltaTable(w, "class", classes, d.ClassesChanged(),
		fmt.Sprintf("memory map, largest RSS growth first (%%d of %d classes changed):", len(d.Classes)),
		"memory map: no change in any class")
	if err != nil {
		return err
	}
	if len(d.Appeared)+len(d.Cleared) > 0 {
		fmt.Fprintln(w)
		FindingChanges(w, d, "")
	}
	return nil
}

// deltaTable prints rows of (name, measure, before, after, change)
// under title (a format taking the number changed), or none when nothing
// changed.
func deltaTable(w io.Writer, what string, rows [][]string, changed int, title, none string) error {
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

// FindingChanges lists the findings that appeared and cleared, each
// line after indent.
func FindingChanges(w io.Writer, d *report.Diff, indent string) {
	for _, g := range []struct {
		what string
		fs   []report.Finding
	}{{"appeared", d.Appeared}, {"cleared", d.Cleared}} {
		for _, f := range g.fs {
			fmt.Fprintf(w, "%sfinding %s: [%s] %s (%s)\n", indent, g.what, f.Severity, f.Title, f.ID)
		}
	}
}

type namedDelta struct {
	name   string
	d      *report.Delta
	always bool // shown even when it did not change
}

// deltaRows makes one table row per measure of an arena or class: those
// that changed, and those always shown.
func deltaRows(label string, ds []namedDelta) [][]string {
	var rows [][]string
	for _, n := range ds {
		if n.d != nil && (n.always || n.d.Delta != 0) {
			rows = append(rows, []string{label, n.name, Human(n.d.Before), Human(n.d.After), deltaHuman(n.d.Delta)})
		}
	}
	return rows
}

// mallocDeltas lists an arena's measures for display; fast and rest only
// when fast changed (else rest changed as free did).
func mallocDeltas(m report.MallocDiff) []namedDelta {
	ds := []namedDelta{{"system", &m.SystemCurrent, true}, {"in use", &m.InUse, true}, {"free", &m.Free, true}}
	if m.Fast != nil && m.Fast.Delta != 0 {
		ds = append(ds, namedDelta{"fast", m.Fast, true}, namedDelta{"rest", &m.Rest, true})
	}
	return append(ds, namedDelta{"tcache'd", m.Tcache, false})
}

// arenaLabel names an arena by its index in the second document, saying
// when it moved, appeared or went.
func arenaLabel(a report.ArenaDiff) string {
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
func arrow(d report.Delta) string {
	return fmt.Sprintf("%s → %s (%s)", Human(d.Before), Human(d.After), deltaHuman(d.Delta))
}

// deltaHuman is a signed byte count with its sign: "+32.0 MiB", "-4.0 KiB", "0 B".
func deltaHuman(n int64) string {
	if n > 0 {
		return "+" + Human(uint64(n))
	}
	return signedHuman(n)
}
