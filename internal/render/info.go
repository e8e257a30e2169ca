package render

import (
	"fmt"
	"io"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/report"
)

// Info prints an info report as tables: the arenas, what the walk adds,
// the memory map.
func Info(w io.Writer, r *report.Report) error {
	if c := r.Core; c != nil {
		fmt.Fprintf(w, "core %s of process %d (%s, %s), %d threads, glibc %s (%s)\n", Text(c.Path), r.Pid, Text(c.Command), Text(r.Exe), r.Threads, versionText(r.Libc), Text(r.Libc.Path))
		switch sig := syscall.Signal(c.Signal); sig {
		case 0:
		case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGTRAP:
			fmt.Fprintf(w, "written when thread %d received %s (fault address %#x)\n", c.CrashTid, unix.SignalName(sig), c.FaultAddr)
		default:
			fmt.Fprintf(w, "written when thread %d received %s\n", c.CrashTid, unix.SignalName(sig))
		}
		coreLibc(w, r)
	} else {
		fmt.Fprintf(w, "process %d (%s), %s, glibc %s (%s)\n", r.Pid, Text(r.Exe), Plural(r.Threads, "1 thread", "%d threads"), r.Libc.Version, Text(r.Libc.Path))
	}
	if in := r.Injection; in != nil {
		fmt.Fprintf(w, "malloc_info ran in thread %d (%s); that thread was held %s, no other thread was stopped%s\n\n", in.Tid, in.Blocked, Duration(in.Stopped), lockedForPreflight(in))
	}
	if ro := r.ReadOnly; ro != nil {
		switch {
		case r.Core != nil:
			fmt.Fprintln(w, "read from the core's memory")
		case ro.Torn:
			fmt.Fprintln(w, "read from memory without stopping the process: threads that allocated meanwhile may have torn these numbers")
		default:
			n := len(ro.Tcaches) // a thread's tcache is read while it is stopped
			if ro.TcachesSkipped != "" {
				n = r.Threads
			}
			switch ro.Hold {
			case "image":
				fmt.Fprintf(w, "read from a copy-on-write image of the process, no code of the program's ran; %s stopped for %s while it was made (raw clone syscalls in one thread), then read for %s while the process ran\n", Plural(n, "its thread was", "its %d threads were"), Duration(ro.Frozen), Duration(ro.Walked))
				if ro.LeftOut > 0 {
					fmt.Fprintf(w, "the image left out %s of %s the allocator does not own (not read by the walk; their page tables were not copied)\n", Plural(ro.LeftOut, "one mapping", "%d mappings"), Human(ro.LeftOutBytes))
				}
			default:
				fmt.Fprintf(w, "read from memory, nothing ran in the target; %s stopped for %s\n", Plural(n, "its thread was", "its %d threads were"), Duration(ro.Frozen))
				if ro.ImageSkipped != "" {
					fmt.Fprintf(w, "(no copy-on-write image, which would have stopped it only while one was made: %s)\n", ro.ImageSkipped)
				}
			}
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
			fastN, fastB = strconv.FormatUint(a.FastCount, 10), Human(a.FastBytes)
		}
		t.Append(name, Human(a.SystemCurrent), Human(a.SystemMax), Human(a.InUse()),
			Human(a.FreeBytes()), fmt.Sprintf("%.1f", a.FreePercent()), fastN, fastB,
			strconv.FormatUint(a.RestCount, 10), Human(a.RestBytes), Human(a.LargestFreeClass()), heaps)
	}
	t.Footer(fmt.Sprintf("%d arenas", len(mi.Arenas)), Human(mi.SystemCurrent), Human(mi.SystemMax), Human(mi.InUse()),
		Human(mi.FreeBytes()), fmt.Sprintf("%.1f", mi.FreePercent()), strconv.FormatUint(mi.FastCount, 10), Human(mi.FastBytes),
		strconv.FormatUint(mi.RestCount, 10), Human(mi.RestBytes), "", "")
	if err := t.Render(); err != nil {
		return err
	}
	if mi.HasMmap {
		fmt.Fprintf(w, "mmapped chunks (outside every arena): %d, %s\n", mi.MmapCount, Human(mi.MmapBytes))
	}
	fmt.Fprintln(w, "in use = system - free; it includes chunks cached in threads' tcaches, which malloc_info cannot see.")
	fmt.Fprintln(w)
	if r.ReadOnly != nil {
		if err := walk(w, r.ReadOnly); err != nil {
			return err
		}
	}
	if err := mapSummary(w, r.Maps); err != nil {
		return err
	}
	if wf := r.Waterfall(); wf != nil {
		fmt.Fprintln(w)
		Waterfall(w, wf)
	}
	return nil
}

// Waterfall prints the RSS waterfall: each line, its share of RSS, its
// breakdown and what would lower it, then what no line accounts for.
func Waterfall(w io.Writer, wf *report.Waterfall) {
	fmt.Fprintf(w, "RSS %s, line by line (the heaps' mappings are %s of it):\n", Human(wf.Rss), Human(wf.HeapRss))
	share := func(n int64) string {
		if wf.Rss == 0 {
			return ""
		}
		return fmt.Sprintf("%5.1f%%", 100*float64(n)/float64(wf.Rss))
	}
	for _, l := range wf.Lines {
		mark := " "
		if l.Heap {
			mark = "h"
		}
		fmt.Fprintf(w, "  %s %-54s %10s %s\n", mark, l.Title, Human(l.Bytes), share(int64(l.Bytes)))
		for _, d := range l.Detail {
			fmt.Fprintf(w, "        %s\n", Line(d))
		}
		if l.Bytes > 0 {
			fmt.Fprintf(w, "        → %s\n", Line(l.Action))
		}
	}
	fmt.Fprintf(w, "    %-54s %10s %s\n", "unexplained (RSS less every line above)", signedHuman(wf.Unexplained), share(wf.Unexplained))
	fmt.Fprintln(w, "  h: inside the heaps' mappings")
	for _, n := range wf.Notes {
		fmt.Fprintf(w, "  note: %s\n", Line(n))
	}
	if wf.ServerErr != "" {
		fmt.Fprintf(w, "  the server's own accounting could not be read: %s\n", Line(wf.ServerErr))
	}
	if sm := wf.Server; sm != nil {
		fmt.Fprintf(w, "\nthe server's performance_schema counts %s in %d memory instruments; largest:\n", Human(sm.Total), sm.Instruments)
		for _, e := range sm.Events {
			fmt.Fprintf(w, "  %-60s %10s\n", Line(e.Name), Human(e.Bytes))
		}
		if wf.Unaccounted >= 0 {
			fmt.Fprintf(w, "the program's resident anonymous memory (held, tcaches, mmapped chunks, other) the server does not count: %s\n", Human(uint64(wf.Unaccounted)))
		} else {
			fmt.Fprintf(w, "the server counts %s more than its anonymous memory holds resident: memory it allocated and has not touched (an InnoDB buffer pool fills as it is used)\n", Human(uint64(-wf.Unaccounted)))
		}
	}
}

// versionText is the glibc version, or the range memory alone narrowed
// it to.
func versionText(l report.LibcInfo) string {
	if l.MinVersion.IsZero() {
		return l.Version.String()
	}
	return fmt.Sprintf("%s to %s", l.MinVersion, l.Version)
}

// coreLibc says where a core's libc came from, and what was tried
// and not used.
func coreLibc(w io.Writer, r *report.Report) {
	l := r.Libc
	line := "libc: " + Line(l.Source)
	if !l.MinVersion.IsZero() {
		line += fmt.Sprintf(" (which cannot tell these versions apart: read as %s)", l.Version)
	}
	fmt.Fprintln(w, line)
	for _, n := range r.Core.LibcNotes {
		fmt.Fprintf(w, "  note: %s\n", Line(n))
	}
}

// walk prints what the read-only walk adds to malloc_info.
func walk(w io.Writer, ro *report.ReadOnly) error {
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
			inUse, chunks = Human(a.InUseBytes), strconv.FormatUint(a.InUseChunks, 10)
		}
		lock := "free"
		if a.Mutex != 0 {
			lock = "held"
		}
		t.Append(strconv.Itoa(i), fmt.Sprintf("%#x", a.Addr), inUse, chunks, Human(a.TcacheBytes), Human(a.TopSize),
			Human(a.LargestFree), Human(a.Trimmable()), strconv.Itoa(threads[a.Addr]), lock)
	}
	if err := t.Render(); err != nil {
		return err
	}
	tcChunks, tcBytes := ro.Tcached()
	if len(ro.Tcaches) > 0 {
		fmt.Fprintf(w, "tcaches: %d chunks, %s across %d threads (per thread in --json)\n", tcChunks, Human(tcBytes), len(ro.Tcaches))
	}
	if wk.Mmapped.Count > 0 {
		fmt.Fprintf(w, "mmapped chunks found in the map: %d, %s\n", wk.Mmapped.Count, Human(wk.Mmapped.Bytes))
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

// unmeasuredLine heads a memory map whose counters nobody recorded: they
// are unknown, and printing them as 0 B would say the memory was not there.
const unmeasuredLine = "memory map: sizes only; RSS, Private_Dirty and Swap unknown (a kernel core records none)"

func mapSummary(w io.Writer, sum report.MapsSummary) error {
	if sum.Unmeasured {
		fmt.Fprintln(w, unmeasuredLine)
		t := newTable(w, "class", "mappings", "size")
		for _, c := range sum.Classes {
			t.Append(c.Class.String(), strconv.Itoa(c.Count), Human(c.Size))
		}
		return t.Render()
	}
	roll := sum.Rollup
	fmt.Fprintf(w, "memory map: RSS %s, Private_Dirty %s, Swap %s\n", Human(roll.Rss), Human(roll.PrivateDirty), Human(roll.Swap))
	t := newTable(w, "class", "mappings", "size", "rss", "private dirty", "swap")
	for _, c := range sum.Classes {
		t.Append(c.Class.String(), strconv.Itoa(c.Count), Human(c.Size), Human(c.Rss), Human(c.PrivateDirty), Human(c.Swap))
	}
	return t.Render()
}

// Maps prints the memory map by class; with all, every mapping after it.
func Maps(w io.Writer, m *report.Maps, all bool) error {
	if err := mapSummary(w, m.Summary); err != nil {
		return err
	}
	if !all {
		return nil
	}
	fmt.Fprintln(w)
	if m.Summary.Unmeasured {
		t := newTable(w, "start", "end", "perms", "size", "class", "path")
		for _, m := range m.Mappings {
			t.Append(fmt.Sprintf("%x", m.Start), fmt.Sprintf("%x", m.End), m.Perms, Human(m.Size()), m.Class.String(), Text(m.Path))
		}
		return t.Render()
	}
	t := newTable(w, "start", "end", "perms", "size", "rss", "private dirty", "class", "path")
	for _, m := range m.Mappings {
		t.Append(fmt.Sprintf("%x", m.Start), fmt.Sprintf("%x", m.End), m.Perms, Human(m.Size()), Human(m.Rss), Human(m.PrivateDirty), m.Class.String(), Text(m.Path))
	}
	return t.Render()
}

// Trim prints what a trim did, or with --dry-run what it would do.
func Trim(w io.Writer, r *report.TrimReport) error {
	if r.DryRun {
		return trimPrediction(w, r)
	}
	fmt.Fprintf(w, "process %d, glibc %s: malloc_trim(%d) returned %d (%s) in %s; thread %d (%s) was held %s%s\n\n",
		r.Pid, r.Libc.Version, r.Pad, r.Result, trimMeaning(r.Result), Duration(r.Injection.Call), r.Injection.Tid, r.Injection.Blocked, Duration(r.Injection.Stopped),
		lockedForPreflight(&r.Injection))
	t := newTable(w, "class", "rss before", "rss after", "released", "private dirty before", "private dirty after")
	for _, row := range r.Rows() {
		t.Append(row.Name, Human(row.RssBefore), Human(row.RssAfter), signedHuman(int64(row.RssBefore)-int64(row.RssAfter)),
			Human(row.PdBefore), Human(row.PdAfter))
	}
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintf(w, "released: %s of RSS (%s -> %s)\n", signedHuman(r.Released()), Human(r.Before.Rollup.Rss), Human(r.After.Rollup.Rss))
	// malloc_trim's 1 says it gave something back, not that it was
	// resident: say what it was when RSS did not move.
	switch shrunk, rel := r.HeapShrunk(), r.Released(); {
	case r.Result != 1:
	case shrunk > 0 && rel <= 0:
		fmt.Fprintf(w, "given back: %s of the main heap's top (sbrk), none of it resident: RSS did not change\n", Human(shrunk))
	case shrunk > uint64(rel):
		fmt.Fprintf(w, "given back: %s of the main heap's top (sbrk), most of it not resident: RSS fell by %s\n", Human(shrunk), Human(uint64(rel)))
	case shrunk > 0:
		fmt.Fprintf(w, "of that, %s was the main heap's top (sbrk)\n", Human(shrunk))
	case rel <= 0:
		fmt.Fprintln(w, "given back: free pages inside the heaps (madvise) that were not resident: RSS did not change")
	}
	if p := r.Prediction; p != nil {
		fmt.Fprintf(w, "predicted: %s, from the free lists walked just before the call (--dry-run shows it per arena)\n", Human(p.Resident))
	}
	return nil
}

// trimPrediction prints a dry run: per arena, what malloc_trim would
// madvise or give back, and how much of it is resident now.
func trimPrediction(w io.Writer, r *report.TrimReport) error {
	p := r.Prediction
	how := "every thread was stopped " + Duration(r.Frozen) + " for the walk"
	if r.Hold == "image" {
		how = "the free lists were read from a copy-on-write image; every thread was stopped " + Duration(r.Frozen) + " while it was made"
	}
	fmt.Fprintf(w, "process %d, glibc %s: malloc_trim(%d) would release %s of RSS now (dry run: no code of the program's ran; %s)\n",
		r.Pid, r.Libc.Version, r.Pad, Human(p.Resident), how)
	if r.ImageSkipped != "" {
		fmt.Fprintf(w, "(no copy-on-write image, which would have stopped it only while one was made: %s)\n", r.ImageSkipped)
	}
	fmt.Fprintln(w)
	t := newTable(w, "arena", "address", "free chunks", "trimmable", "of which top", "resident now")
	var chunks int
	for _, a := range p.Arenas {
		name, top := strconv.Itoa(a.Index), "-"
		if a.Main {
			name += " main"
			top = Human(a.Top)
		}
		chunks += a.Chunks
		t.Append(name, fmt.Sprintf("%#x", a.Addr), strconv.Itoa(a.Chunks), Human(a.Bytes), top, Human(a.Resident))
	}
	t.Footer(fmt.Sprintf("%d arenas", len(p.Arenas)), "", strconv.Itoa(chunks), Human(p.Bytes), "", Human(p.Resident))
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

// lockedForPreflight says when the borrowed thread held arenas' locks
// before the call: to walk again lists the pre-flight's first walk, made
// with nothing stopped, saw in flux (or damaged).
func lockedForPreflight(in *report.Injection) string {
	if in.PreflightLocked == 0 {
		return ""
	}
	return fmt.Sprintf("; before the call it held %s for %s in all, to walk again lists that changed under the first walk",
		Plural(in.PreflightLocked, "1 arena's lock", "%d arenas' locks"), Duration(in.PreflightLockHeld))
}

func trimMeaning(rc int) string {
	if rc == 1 {
		return "memory was given back"
	}
	return "nothing could be given back"
}
