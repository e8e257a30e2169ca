package main

import (
	"fmt"
	"syscall"

	"io"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
)

func newTable(w io.Writer, header ...any) *tablewriter.Table {
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignment(tw.AlignRight),
		tablewriter.WithHeaderAlignment(tw.AlignRight),
		tablewriter.WithFooterAlignmentConfig(tw.CellAlignment{Global: tw.AlignRight}),
	)
	t.Header(header...)
	return t
}

func renderInfo(w io.Writer, r *report.Report) error {
	if c := r.Core; c != nil {
		fmt.Fprintf(w, "core %s of process %d (%s, %s), %d threads, glibc %s (%s)\n", c.Path, r.Pid, c.Command, r.Exe, r.Threads, versionText(r.Libc), r.Libc.Path)
		switch sig := syscall.Signal(c.Signal); sig {
		case 0:
		case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGTRAP:
			fmt.Fprintf(w, "written when thread %d received %s (fault address %#x)\n", c.CrashTid, unix.SignalName(sig), c.FaultAddr)
		default:
			fmt.Fprintf(w, "written when thread %d received %s\n", c.CrashTid, unix.SignalName(sig))
		}
		renderCoreLibc(w, r)
	} else {
		fmt.Fprintf(w, "process %d (%s), %s, glibc %s (%s)\n", r.Pid, r.Exe, threads(r.Threads, "1 thread", "%d threads"), r.Libc.Version, r.Libc.Path)
	}
	if in := r.Injection; in != nil {
		others := ", no other thread was stopped"
		if in.PreflightFrozen > 0 {
			others = frozenForPreflight(in)
		}
		fmt.Fprintf(w, "malloc_info ran in thread %d (%s); that thread was held %s%s\n\n", in.Tid, in.Blocked, fmtDur(in.Stopped), others)
	}
	if ro := r.ReadOnly; ro != nil {
		switch {
		case r.Core != nil:
			fmt.Fprintln(w, "read from the core's memory")
		case ro.Torn:
			fmt.Fprintln(w, "read from memory without stopping the process: threads that allocated meanwhile may have torn these numbers")
		default:
			fmt.Fprintf(w, "read from memory, nothing ran in the target; %s stopped for %s\n", threads(len(ro.Tcaches), "its thread was", "its %d threads were"), fmtDur(ro.Frozen))
		}
		fmt.Fprintf(w, "main_arena at %#x, mp_ at %#x (%s), layout %s\n\n", ro.Walk.Anchors.MainArena, ro.Walk.Anchors.Mp, ro.Walk.Anchors.Method, ro.Walk.Layout.Profile)
	}
	mi := r.Malloc
	t := newTable(w, "arena", "system", "max", "in use", "free", "free%", "fast n", "fast bytes", "rest n", "rest bytes", "largest free", "heaps")
	for i := range mi.Arenas {
		a := &mi.Arenas[i]
		name := strconv.Itoa(a.Index)
		heaps := "-"
		if a.Index == 0 {
			name += " main"
		} else if a.HasSubheaps {
			heaps = strconv.FormatUint(a.Subheaps, 10)
		}
		fastN, fastB := "-", "-"
		if a.HasFast {
			fastN, fastB = strconv.FormatUint(a.FastCount, 10), human(a.FastBytes)
		}
		t.Append(name, human(a.SystemCurrent), human(a.SystemMax), human(a.InUse()),
			human(a.FreeBytes()), fmt.Sprintf("%.1f", a.FreePercent()), fastN, fastB,
			strconv.FormatUint(a.RestCount, 10), human(a.RestBytes), human(a.LargestFreeClass()), heaps)
	}
	t.Footer(fmt.Sprintf("%d arenas", len(mi.Arenas)), human(mi.SystemCurrent), human(mi.SystemMax), human(mi.InUse()),
		human(mi.FreeBytes()), fmt.Sprintf("%.1f", mi.FreePercent()), strconv.FormatUint(mi.FastCount, 10), human(mi.FastBytes),
		strconv.FormatUint(mi.RestCount, 10), human(mi.RestBytes), "", "")
	if err := t.Render(); err != nil {
		return err
	}
	if mi.HasMmap {
		fmt.Fprintf(w, "mmapped chunks (outside every arena): %d, %s\n", mi.MmapCount, human(mi.MmapBytes))
	}
	fmt.Fprintln(w, "in use = system - free; it includes chunks cached in threads' tcaches, which malloc_info cannot see.")
	fmt.Fprintln(w)
	if r.ReadOnly != nil {
		if err := renderWalk(w, r.ReadOnly); err != nil {
			return err
		}
	}
	return renderMapSummary(w, r.Maps.Classes, r.Maps.Rollup)
}

// versionText is the glibc version, or the range memory alone narrowed
// it to.
func versionText(l report.LibcInfo) string {
	if l.MinVersion.IsZero() {
		return l.Version.String()
	}
	return fmt.Sprintf("%s to %s", l.MinVersion, l.Version)
}

// renderCoreLibc says where a core's libc came from, and what was tried
// and not used.
func renderCoreLibc(w io.Writer, r *report.Report) {
	l := r.Libc
	line := "libc: " + l.Source
	if !l.MinVersion.IsZero() {
		line += fmt.Sprintf(" (which cannot tell these versions apart: read as %s)", l.Version)
	}
	fmt.Fprintln(w, line)
	for _, n := range r.Core.LibcNotes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// renderWalk prints what the read-only walk adds to malloc_info.
func renderWalk(w io.Writer, ro *report.ReadOnly) error {
	wk := ro.Walk
	threads := map[uint64]int{}
	for _, tc := range ro.Tcaches {
		if tc.Arena != 0 {
			threads[tc.Arena]++
		}
	}
	fmt.Fprintln(w, "from the chunk walk (not in malloc_info):")
	t := newTable(w, "arena", "address", "in use", "chunks", "in tcaches", "top", "largest free chunk", "trimmable", "threads", "lock")
	for i := range wk.Arenas {
		a := &wk.Arenas[i]
		inUse, chunks := "-", "-"
		if a.Walked {
			inUse, chunks = human(a.InUseBytes), strconv.FormatUint(a.InUseChunks, 10)
		}
		lock := "free"
		if a.Mutex != 0 {
			lock = "held"
		}
		t.Append(strconv.Itoa(i), fmt.Sprintf("%#x", a.Addr), inUse, chunks, human(a.TcacheBytes), human(a.TopSize),
			human(a.LargestFree), human(a.Trimmable()), strconv.Itoa(threads[a.Addr]), lock)
	}
	if err := t.Render(); err != nil {
		return err
	}
	var tcChunks, tcBytes uint64
	for _, tc := range ro.Tcaches {
		tcChunks += tc.Chunks
		tcBytes += tc.Bytes
	}
	if len(ro.Tcaches) > 0 {
		fmt.Fprintf(w, "tcaches: %d chunks, %s across %d threads (per thread in --json)\n", tcChunks, human(tcBytes), len(ro.Tcaches))
	}
	if wk.Mmapped.Count > 0 {
		fmt.Fprintf(w, "mmapped chunks found in the map: %d, %s\n", wk.Mmapped.Count, human(wk.Mmapped.Bytes))
	}
	switch {
	case !wk.Exact && wk.Layout.GarbageUnsorted:
		fmt.Fprintln(w, "note: this glibc prints uninitialised memory as <unsorted>; the numbers above are the true ones")
	case !wk.Exact:
		fmt.Fprintln(w, "note: the glibc versions the memory fits print malloc_info differently: the XML and the free totals are the newest one's")
	}
	if ro.TcachesSkipped != "" {
		fmt.Fprintf(w, "tcaches: not read: %s\n", ro.TcachesSkipped)
	}
	for _, d := range wk.Damage {
		fmt.Fprintf(w, "DAMAGE: %s\n", d)
	}
	fmt.Fprintln(w)
	return nil
}

func renderMapSummary(w io.Writer, sum []maps.ClassSummary, roll maps.Rollup) error {
	fmt.Fprintf(w, "memory map: RSS %s, Private_Dirty %s, Swap %s\n", human(roll.Rss), human(roll.PrivateDirty), human(roll.Swap))
	t := newTable(w, "class", "mappings", "size", "rss", "private dirty", "swap")
	for _, c := range sum {
		t.Append(c.Class.String(), strconv.Itoa(c.Count), human(c.Size), human(c.Rss), human(c.PrivateDirty), human(c.Swap))
	}
	return t.Render()
}

func renderMaps(w io.Writer, sum []maps.ClassSummary, roll maps.Rollup, ms []maps.Mapping, all bool) error {
	if err := renderMapSummary(w, sum, roll); err != nil {
		return err
	}
	if !all {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "start", "end", "perms", "size", "rss", "private dirty", "class", "path")
	for _, m := range ms {
		t.Append(fmt.Sprintf("%x", m.Start), fmt.Sprintf("%x", m.End), m.Perms, human(m.Size()), human(m.Rss), human(m.PrivateDirty), m.Class.String(), m.Path)
	}
	return t.Render()
}

func renderTrim(w io.Writer, r *report.TrimReport) error {
	if r.DryRun {
		return renderTrimPrediction(w, r)
	}
	fmt.Fprintf(w, "process %d, glibc %s: malloc_trim(%d) returned %d (%s) in %s; thread %d (%s) was held %s%s\n\n",
		r.Pid, r.Libc.Version, r.Pad, r.Result, trimMeaning(r.Result), fmtDur(r.Injection.Call), r.Injection.Tid, r.Injection.Blocked, fmtDur(r.Injection.Stopped),
		frozenForPreflight(&r.Injection))
	t := newTable(w, "class", "rss before", "rss after", "released", "private dirty before", "private dirty after")
	for _, row := range trimRows(r) {
		t.Append(row.name, human(row.rssBefore), human(row.rssAfter), signedHuman(int64(row.rssBefore)-int64(row.rssAfter)),
			human(row.pdBefore), human(row.pdAfter))
	}
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintf(w, "released: %s of RSS (%s -> %s)\n", signedHuman(r.Released()), human(r.Before.Rollup.Rss), human(r.After.Rollup.Rss))
	if p := r.Prediction; p != nil {
		fmt.Fprintf(w, "predicted: %s, from the free lists walked just before the call (--dry-run shows it per arena)\n", human(p.Resident))
	}
	return nil
}

// renderTrimPrediction prints a dry run: per arena, what malloc_trim would
// madvise or give back, and how much of it is resident now.
func renderTrimPrediction(w io.Writer, r *report.TrimReport) error {
	p := r.Prediction
	fmt.Fprintf(w, "process %d, glibc %s: malloc_trim(%d) would release %s of RSS now (dry run: nothing ran in the target; every thread was stopped %s for the walk)\n\n",
		r.Pid, r.Libc.Version, r.Pad, human(p.Resident), fmtDur(r.Frozen))
	t := newTable(w, "arena", "address", "free chunks", "trimmable", "of which top", "resident now")
	var chunks int
	for _, a := range p.Arenas {
		name, top := strconv.Itoa(a.Index), "-"
		if a.Main {
			name += " main"
			top = human(a.Top)
		}
		chunks += a.Chunks
		t.Append(name, fmt.Sprintf("%#x", a.Addr), strconv.Itoa(a.Chunks), human(a.Bytes), top, human(a.Resident))
	}
	t.Footer(fmt.Sprintf("%d arenas", len(p.Arenas)), "", strconv.Itoa(chunks), human(p.Bytes), "", human(p.Resident))
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintln(w, "free chunks: those holding whole pages malloc_trim would madvise; top: the main heap's top it would give back with sbrk (above --pad);")
	fmt.Fprintln(w, "trimmable counts those pages resident or not, resident now what RSS would drop by.")
	for _, d := range r.Damage {
		fmt.Fprintf(w, "DAMAGE: %s\n", d)
	}
	if err := glibc.PreflightDamage(&glibc.Walk{Damage: r.Damage}); err != nil {
		fmt.Fprintf(w, "a real trim would be refused: %v\n", err)
	}
	return nil
}

// frozenForPreflight says when every thread was stopped, briefly, before
// the call: for the pre-flight's second walk, when the first looked damaged.
func frozenForPreflight(in *report.Injection) string {
	if in.PreflightFrozen == 0 {
		return ""
	}
	return fmt.Sprintf("; every thread was stopped %s before, for a second pre-flight walk (the first, made running, read lists in flux)", fmtDur(in.PreflightFrozen))
}

func trimMeaning(rc int) string {
	if rc == 1 {
		return "memory was given back"
	}
	return "nothing could be given back"
}

type trimRow struct {
	name                string
	rssBefore, rssAfter uint64
	pdBefore, pdAfter   uint64
}

// trimRows pairs the per-class summaries before and after, then the process.
func trimRows(r *report.TrimReport) []trimRow {
	idx := map[maps.Class]*trimRow{}
	var rows []*trimRow
	get := func(c maps.Class) *trimRow {
		if row, ok := idx[c]; ok {
			return row
		}
		row := &trimRow{name: c.String()}
		idx[c] = row
		rows = append(rows, row)
		return row
	}
	for _, c := range r.Before.Classes {
		row := get(c.Class)
		row.rssBefore, row.pdBefore = c.Rss, c.PrivateDirty
	}
	for _, c := range r.After.Classes {
		row := get(c.Class)
		row.rssAfter, row.pdAfter = c.Rss, c.PrivateDirty
	}
	out := make([]trimRow, 0, len(rows)+1)
	for _, c := range []maps.Class{maps.ClassMainHeap, maps.ClassArenaHeap} {
		if row, ok := idx[c]; ok {
			out = append(out, *row)
		}
	}
	out = append(out, trimRow{name: "process", rssBefore: r.Before.Rollup.Rss, rssAfter: r.After.Rollup.Rss,
		pdBefore: r.Before.Rollup.PrivateDirty, pdAfter: r.After.Rollup.PrivateDirty})
	return out
}

// human prints a byte count the way people read RSS: 1024-based units.
func human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func signedHuman(n int64) string {
	if n < 0 {
		return "-" + human(uint64(-n))
	}
	return human(uint64(n))
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
	return d.Round(time.Millisecond).String()
}

// threads picks the singular or plural wording for n threads.
func threads(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}
