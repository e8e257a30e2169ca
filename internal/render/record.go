package render

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// RecordingInfo is what reading the file said besides the recording.
type RecordingInfo struct {
	Cut   bool  // the file ended inside a frame, or at a damaged one
	Bytes int64 // the file's size
	Top   int   // how many stacks to show (0: all)
}

// timelineRows is how many intervals the timeline shows, evenly spread.
const timelineRows = 12

// Recording prints a recording for people: what and how it recorded, how
// it ended, the RSS by class over time (a few intervals, evenly spread),
// the stacks holding the most at the end, and the events.
func Recording(w io.Writer, rec *report.Recording, info RecordingInfo) error {
	m := rec.Meta
	fmt.Fprintf(w, "recording of process %d (%s), glibc %s: %s from %s, %s kept (finest %s), one sample per %s allocated on average\n",
		m.Pid, Text(m.Exe), m.Libc.Version, Duration(rec.Span()), m.Start.Format("2006-01-02 15:04:05"),
		Plural(len(rec.Intervals), "1 interval", "%d intervals"), Duration(m.Interval), Human(m.Rate))
	switch {
	case rec.End != nil && rec.End.Err != "":
		fmt.Fprintf(w, "ended by an error: %s\n", Line(rec.End.Err))
	case rec.End != nil:
		fmt.Fprintf(w, "ended: %s\n", rec.End.Why)
	default:
		fmt.Fprintln(w, "not ended cleanly (arenactl was killed, or is still recording): every interval written whole is here")
	}
	if info.Cut {
		fmt.Fprintln(w, "note: the file ends inside a frame or at a damaged one; what came before it is shown")
	}
	if len(rec.Intervals) == 0 {
		_, err := fmt.Fprintln(w, "no interval was recorded")
		return err
	}
	var peak uint64
	var peakAt report.RecordedInterval
	for _, iv := range rec.Intervals {
		if iv.RssPeak > peak {
			peak, peakAt = iv.RssPeak, iv
		}
	}
	first, last := rec.Intervals[0], rec.Intervals[len(rec.Intervals)-1]
	fmt.Fprintf(w, "RSS %s at the start, %s at the end, %s at the highest (in the interval ending %s)\n\n",
		Human(first.Rss), Human(last.Rss), Human(peak), peakAt.End().Format("15:04:05"))
	header := []any{"end"}
	for _, c := range report.RecordingClasses {
		header = append(header, c)
	}
	header = append(header, "rss", "held")
	t := newTable(w, header...)
	n := len(rec.Intervals)
	rows := min(n, timelineRows)
	for r := range rows {
		i := r * (n - 1) / max(rows-1, 1)
		iv := rec.Intervals[i]
		row := []any{iv.End().Format("15:04:05")}
		for _, c := range iv.Classes {
			row = append(row, Human(c.Rss))
		}
		for len(row) < 1+len(report.RecordingClasses) {
			row = append(row, "-")
		}
		row = append(row, Human(iv.Rss), Human(whole(iv.HeldBytes())))
		if err := t.Append(row...); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(last.Arenas) > 0 {
		var sys, top uint64
		for _, a := range last.Arenas {
			sys, top = sys+a.SystemBytes, top+a.TopBytes
		}
		fmt.Fprintf(w, "\nat the end: %s, %s from the system, %s of it in top chunks; %s in mmapped chunks\n",
			Plural(len(last.Arenas), "1 arena", "%d arenas"), Human(sys), Human(top), Human(last.MmappedBytes))
	}
	if err := recordingWalks(w, rec); err != nil {
		return err
	}
	stacks := map[int]report.RecordedStack{}
	for _, s := range rec.Stacks {
		stacks[s.ID] = s
	}
	held := last.Held
	if info.Top > 0 && len(held) > info.Top {
		held = held[:info.Top]
	}
	if len(held) > 0 {
		fmt.Fprintf(w, "\nallocated since the recording began and still held at its end, %s in all:\n", Human(whole(last.HeldBytes())))
		fmt.Fprintf(w, "%10s %10s %9s  %s\n", "held", "± σ", "samples", "allocated at")
		for _, h := range held {
			where := "?"
			if s, ok := stacks[h.Stack]; ok && len(s.Frames) > 0 {
				site := stackprof.Site{Frames: s.Frames}
				leaf := site.Leaf()
				where = leaf.Name()
				if pos := shortPosition(leaf); pos != "" {
					where += "  " + pos
				}
				if c := callersOf(&site, leaf); c != "" {
					where += "  " + c
				}
			}
			fmt.Fprintf(w, "%10s %10s %9d  %s\n", Human(whole(h.Bytes)), Human(whole(math.Sqrt(h.Var))), h.Sampled, Line(where))
		}
		if o := last.OtherHeld; o.Bytes > 0 {
			fmt.Fprintf(w, "%10s %10s %9d  (other stacks)\n", Human(whole(o.Bytes)), Human(whole(math.Sqrt(o.Var))), o.Sampled)
		}
	}
	if len(rec.Events) > 0 {
		fmt.Fprintln(w, "\nevents:")
		for _, e := range rec.Events {
			text := e.Text
			if e.Path != "" && e.Kind == report.EventSnapshot {
				text += ": " + e.Path
			}
			fmt.Fprintf(w, "  %s  %-15s %s\n", e.At.Format("15:04:05.000"), e.Kind, Line(text))
		}
	}
	return nil
}

// recordingWalks prints malloc's split of its heaps at the walks kept (a
// few, evenly spread), and what the walks cost the process.
func recordingWalks(w io.Writer, rec *report.Recording) error {
	var walked []*report.MallocLevel
	for i := range rec.Intervals {
		if m := rec.Intervals[i].Malloc; m != nil {
			walked = append(walked, m)
		}
	}
	if len(walked) == 0 {
		_, err := fmt.Fprintln(w, "\nno walk of the heaps kept (record --walk-every; the events say why, if one was due)")
		return err
	}
	fmt.Fprintf(w, "\nmalloc's heaps at the walks (a read-only walk over a copy-on-write image; %s kept):\n", Plural(len(walked), "1 walk", "%d walks"))
	t := newTable(w, "walked", "held", "tcache", "free resident", "of it trimmable", "free, not resident", "mmapped", "stopped", "cpu")
	n := len(walked)
	rows := min(n, timelineRows)
	var maxStop, maxCPU time.Duration
	for _, m := range walked {
		maxStop, maxCPU = max(maxStop, m.Stop), max(maxCPU, m.Cpu)
	}
	for r := range rows {
		m := walked[r*(n-1)/max(rows-1, 1)]
		if err := t.Append(m.At.Format("15:04:05.000"), Human(m.Held), Human(m.Tcache), Human(m.FreeResident()), Human(m.Trimmable),
			Human(m.FreeNotResident), Human(m.Mmapped), m.Stop.Round(time.Microsecond).String(), m.Cpu.Round(time.Millisecond).String()); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "the walks stopped the process at most %s each and took at most %s of CPU each\n",
		maxStop.Round(time.Microsecond), maxCPU.Round(time.Millisecond))
	return err
}
