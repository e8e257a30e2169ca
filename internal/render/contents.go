package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// Contents prints what the heap holds: the reachability classes, the top
// types by bytes, the leaked chunks by type with examples, and what keeps
// each arena's free memory in place.
func Contents(w io.Writer, r *report.Contents, top int) error {
	if c := r.Core; c != nil {
		fmt.Fprintf(w, "core %s of process %d (%s, %s), %s, glibc %s\n", Text(c.Path), r.Pid, Text(c.Command), Text(r.Exe), Plural(r.Threads, "1 thread", "%d threads"), r.Libc.Version)
	} else {
		fmt.Fprintf(w, "process %d (%s), %s, glibc %s; read from %s (the process was stopped %s)\n", r.Pid, Text(r.Exe), Plural(r.Threads, "1 thread", "%d threads"), r.Libc.Version, holdName(r.Hold), Duration(r.Frozen))
	}
	fmt.Fprintf(w, "heap: %d allocated chunks, %s; %d free chunks, %s (bins, fastbins, tcaches, tops)\n",
		r.Chunks, Human(r.Bytes), r.FreeChunks, Human(r.FreeBytes))
	var roots []string
	for _, rc := range r.Roots {
		if rc.Bytes == 0 {
			roots = append(roots, fmt.Sprintf("%d %s", rc.Count, rc.Kind))
		} else {
			roots = append(roots, fmt.Sprintf("%d %s (%s)", rc.Count, rc.Kind, Human(rc.Bytes)))
		}
	}
	fmt.Fprintf(w, "roots: %s; scanned %s of roots and %s of chunks in %s\n", strings.Join(roots, ", "), Human(r.RootBytes), Human(r.ChunkBytes), Duration(r.Scan))
	if r.Unread > 0 {
		fmt.Fprintf(w, "WARNING: %s of roots could not be read%s (%s); chunks referenced only from there show as leaked\n", Human(r.Unread), unreadPlaces(r.UnreadIn), unreadWhy(r))
	}
	fmt.Fprintln(w)

	t := newTable(w, "reachability", "chunks", "bytes")
	for _, c := range r.Classes {
		t.Append(c.Class, strconv.FormatUint(c.Count, 10), Human(c.Bytes))
	}
	if err := t.Render(); err != nil {
		return err
	}
	fmt.Fprintln(w, "static: reachable from data, bss, TLS or memory malloc does not own; stack: only from stacks or registers;")
	fmt.Fprintln(w, "leaked: nothing points to it; leaked (only from leaked): the rest of a lost list or cycle. A pointer into a chunk's middle counts.")
	fmt.Fprintln(w)

	t = newTable(w, "type", "chunks", "bytes", "leaked", "leaked bytes")
	for i, tc := range r.Types {
		if i == top {
			break
		}
		t.Append(Text(tc.Type), strconv.FormatUint(tc.Count, 10), Human(tc.Bytes), strconv.FormatUint(tc.LeakedCount, 10), Human(tc.LeakedBytes))
	}
	if err := t.Render(); err != nil {
		return err
	}
	more := ""
	if len(r.Types) > top {
		more = fmt.Sprintf("; %d more types (--top)", len(r.Types)-top)
	}
	fmt.Fprintf(w, "types by vtable (%d vtables known) or, without one, by chunk size%s\n\n", r.Vtables, more)

	if len(r.Leaks) == 0 {
		fmt.Fprintln(w, "leaked: none")
	} else {
		fmt.Fprintln(w, "leaked chunks by type:")
		for _, lg := range r.Leaks {
			fmt.Fprintf(w, "  %s: %d chunks, %s (%d referenced by nothing)\n", Text(lg.Type), lg.Count, Human(lg.Bytes), lg.Roots)
			for _, ex := range lg.Examples {
				fmt.Fprintf(w, "    %#x (%d): %s\n", ex.Addr, ex.Size, preview(ex.Preview))
			}
		}
	}
	fmt.Fprintln(w)

	if len(r.Lookups) > 0 {
		for _, l := range r.Lookups {
			if !l.Found {
				fmt.Fprintf(w, "%#x: no allocated chunk holds it\n", l.Addr)
				continue
			}
			fmt.Fprintf(w, "%#x: in the %d-byte chunk at %#x, %s, %s\n", l.Addr, l.Size, l.Chunk, Text(l.Type), l.Class)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "what keeps free memory in each arena:")
	for _, a := range r.Arenas {
		name := fmt.Sprintf("arena %d", a.Index)
		if a.Main {
			name += " (main)"
		}
		fmt.Fprintf(w, "  %s: %s free in bins, top %s, malloc_trim could give back %s", name, Human(a.FreeBytes), Human(a.TopSize), Human(a.Trimmable))
		if a.Highest != 0 {
			fmt.Fprintf(w, "; the live %d-byte %s at %#x is the highest chunk below top: %s of free chunks below it stay in the heap while it lives", a.HighestLen, Text(a.HighestTyp), a.Highest, Human(a.FreeBelow))
		}
		fmt.Fprintln(w)
	}
	return nil
}

func holdName(h string) string {
	switch h {
	case "image":
		return "a copy-on-write image"
	case "walk":
		return "the process stopped for the read"
	}
	return h
}

// preview is bytes as hex and, beside, as ASCII with dots for the rest.
func preview(b []byte) string {
	var hex, asc strings.Builder
	for i, c := range b {
		if i > 0 && i%8 == 0 {
			hex.WriteByte(' ')
		}
		fmt.Fprintf(&hex, "%02x", c)
		if c >= 0x20 && c < 0x7f {
			asc.WriteByte(c)
		} else {
			asc.WriteByte('.')
		}
	}
	return hex.String() + "  |" + asc.String() + "|"
}

// ContentsFolded prints what the heap holds in FlameGraph's folded format,
// for a flame graph of the heap by type: a line per type and whether it is
// reachable or leaked ("reachable;Session 4096", "leaked;size 48 512"),
// with its bytes (chunk sizes). Every type, not only the top ones.
func ContentsFolded(w io.Writer, r *report.Contents) error {
	sums := map[string]int64{}
	for _, t := range r.Types {
		name := stackprof.FoldedName(t.Type)
		if held := t.Bytes - t.LeakedBytes; held > 0 {
			sums["reachable;"+name] += int64(held)
		}
		if t.LeakedBytes > 0 {
			sums["leaked;"+name] += int64(t.LeakedBytes)
		}
	}
	return stackprof.WriteFoldedSums(w, sums)
}

// unreadPlaces is " in" the first few places roots could not be read.
func unreadPlaces(ps []report.UnreadPlace) string {
	const shown = 3
	var parts []string
	for i, p := range ps {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(ps)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", Text(p.Where), Human(p.Bytes)))
	}
	if len(parts) == 0 {
		return ""
	}
	if len(ps) == 1 {
		return " in " + Text(ps[0].Where)
	}
	return " in " + strings.Join(parts, ", ")
}

// unreadWhy is why roots of r's target can be missing, in words that fit
// how it was read.
func unreadWhy(r *report.Contents) string {
	switch {
	case r.Core != nil && r.Core.Snapshot:
		return "not in the file: a default snapshot keeps the heaps and what a walk needs, not every stack and object's data; take it with --full"
	case r.Core != nil:
		return "not in the core: whoever wrote it left that memory out (the process's coredump_filter, or a dumper that keeps less)"
	case r.Hold == "image":
		return "not in the copy-on-write image: the kernel copies no memory marked MADV_DONTFORK, such as io_uring's rings, into it; --freeze walk reads the process itself"
	}
	return "the process's memory there could not be read"
}
