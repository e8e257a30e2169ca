// Package page renders a recording (report.Recording) as one self-contained
// HTML page: RSS stacked by memory class over time (the heap bands split by
// malloc's held, pinned and trimmable bytes where the recording walked the
// heaps, else by the arenas' tops), the top stacks' held
// bytes over time, a flame graph of a selected range and a differential one
// between two times, and the findings on the time axis. Everything the page
// needs is inside it (uPlot, vendored under assets/ with its licence, the
// page's own script, and the data as JSON), so it works offline and can be
// attached to a ticket.
//
// The data is bounded whatever the recording's length: the recording's
// own store bounds its intervals; the page keeps at most MaxStacks stacks
// (the largest by their peak held bytes, the rest summed into "other"),
// each of at most MaxFrames frames, each name at most MaxName bytes.
package page

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/report"
)

// Bounds of what the page embeds.
const (
	MaxStacks = 200
	MaxFrames = 64
	MaxName   = 200
)

// Format is the version of Data.
const Format = 1

// Data is what the page embeds, as JSON: every series indexed like T.
type Data struct {
	Format int    `json:"format"`
	Pid    int    `json:"pid"`
	Exe    string `json:"exe"`
	Glibc  string `json:"glibc"`
	// Start is when the recording began, in Unix seconds; T the
	// intervals' ends, in Unix seconds.
	Start    float64   `json:"start"`
	Interval float64   `json:"interval_s"`
	Rate     uint64    `json:"rate"`
	T        []float64 `json:"t"`
	Rss      []uint64  `json:"rss"`
	RssPeak  []uint64  `json:"rss_peak"`
	// Classes are the memory classes (report.RecordingClasses), and
	// ClassRss[c][i] class c's RSS at interval i.
	Classes  []string   `json:"classes"`
	ClassRss [][]uint64 `json:"class_rss"`
	// Tops[i] is the arenas' top chunks at interval i, up to the heaps'
	// RSS: the part of the heap bands that free() or malloc_trim can
	// give back at the end (main_arena's by malloc_trim, the thread
	// arenas' by free() above trim_threshold).
	MainTop    []uint64 `json:"main_top"`
	ThreadTops []uint64 `json:"thread_tops"`
	// Walks are the recording's walks of the heaps (record
	// --walk-every), oldest first, each with the index of the interval
	// that carries it: malloc's split of the heap bands, which the chart
	// holds until the next walk.
	Walks []Walk `json:"walks"`
	// Stacks are the stacks kept, each frames root to leaf; Held[i] the
	// bytes each held at interval i ([stack index, bytes] pairs), Other[i]
	// the rest's.
	Stacks   []Stack        `json:"stacks"`
	Held     [][][2]float64 `json:"held"`
	Other    []float64      `json:"other"`
	Findings []Finding      `json:"findings"`
	Events   []Event        `json:"events"`
	// Truncated says what the bounds left out.
	Truncated []string `json:"truncated"`
}

// Walk is malloc's split of its heaps at one walk (report.MallocLevel).
type Walk struct {
	I               int     `json:"i"`
	At              float64 `json:"at"`
	Held            uint64  `json:"held"`
	Tcache          uint64  `json:"tcache"`
	Trimmable       uint64  `json:"trimmable"`
	Pinned          uint64  `json:"pinned"`
	PinnedTops      uint64  `json:"pinned_tops"`
	FreeNotResident uint64  `json:"free_not_resident"`
	Mmapped         uint64  `json:"mmapped"`
	// Stop and Cpu are what the walk cost, in seconds.
	Stop float64 `json:"stop_s"`
	Cpu  float64 `json:"cpu_s"`
}

// Stack is one allocation stack, frames from the root to the leaf.
type Stack struct {
	ID     int      `json:"id"`
	Frames []string `json:"frames"`
}

// Finding is a finding with where it first and last held (Unix seconds).
type Finding struct {
	ID       string   `json:"id"`
	Severity string   `json:"severity"`
	Title    string   `json:"title"`
	Evidence []string `json:"evidence"`
	Fix      string   `json:"fix"`
	First    float64  `json:"first"`
	Last     float64  `json:"last"`
}

// Event is something the recording noted at a time (Unix seconds).
type Event struct {
	T    float64 `json:"t"`
	Kind string  `json:"kind"`
	Text string  `json:"text"`
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// NewData is the page's data for rec.
func NewData(rec *report.Recording) *Data {
	m := rec.Meta
	d := &Data{Format: Format, Pid: m.Pid, Exe: m.Exe, Glibc: "unknown", Start: unix(m.Start),
		Interval: m.Interval.Seconds(), Rate: m.Rate, Classes: append([]string{}, report.RecordingClasses...),
		Stacks: []Stack{}, Walks: []Walk{}, Findings: []Finding{}, Events: []Event{}, Truncated: []string{}}
	if !m.Libc.Version.IsZero() {
		d.Glibc = m.Libc.Version.String()
	}
	d.ClassRss = make([][]uint64, len(d.Classes))
	for c := range d.ClassRss {
		d.ClassRss[c] = []uint64{}
	}
	keep := keptStacks(rec)
	index := map[int]int{}
	for _, st := range rec.Stacks {
		if !keep[st.ID] {
			continue
		}
		index[st.ID] = len(d.Stacks)
		d.Stacks = append(d.Stacks, Stack{ID: st.ID, Frames: frameNames(st)})
	}
	if n := len(rec.Stacks) - len(d.Stacks); n > 0 {
		d.Truncated = append(d.Truncated, fmt.Sprintf("%d stacks beyond the %d largest are summed in other", n, MaxStacks))
	}
	d.T, d.Rss, d.RssPeak, d.MainTop, d.ThreadTops = []float64{}, []uint64{}, []uint64{}, []uint64{}, []uint64{}
	d.Held, d.Other = [][][2]float64{}, []float64{}
	for i := range rec.Intervals {
		iv := &rec.Intervals[i]
		d.T = append(d.T, unix(iv.End()))
		d.Rss = append(d.Rss, iv.Rss)
		d.RssPeak = append(d.RssPeak, iv.RssPeak)
		var heap uint64
		for c, name := range d.Classes {
			var rss uint64
			for _, cr := range iv.Classes {
				if cr.Class == name {
					rss = cr.Rss
				}
			}
			d.ClassRss[c] = append(d.ClassRss[c], rss)
			if name == "main-heap" || name == "arena-heaps" {
				heap += rss
			}
		}
		var mainTop, threadTops uint64
		for _, a := range iv.Arenas {
			if a.Index == 0 {
				mainTop += a.TopBytes
			} else {
				threadTops += a.TopBytes
			}
		}
		mainTop = min(mainTop, heap)
		d.MainTop = append(d.MainTop, mainTop)
		d.ThreadTops = append(d.ThreadTops, min(threadTops, heap-mainTop))
		if m := iv.Malloc; m != nil {
			d.Walks = append(d.Walks, Walk{I: i, At: unix(m.At), Held: m.Held, Tcache: m.Tcache, Trimmable: m.Trimmable, Pinned: m.Pinned,
				PinnedTops: m.PinnedTops, FreeNotResident: m.FreeNotResident, Mmapped: m.Mmapped, Stop: m.Stop.Seconds(), Cpu: m.Cpu.Seconds()})
		}
		held := [][2]float64{}
		other := iv.OtherHeld.Bytes
		for _, h := range iv.Held {
			if j, ok := index[h.Stack]; ok {
				held = append(held, [2]float64{float64(j), h.Bytes})
			} else {
				other += h.Bytes
			}
		}
		d.Held = append(d.Held, held)
		d.Other = append(d.Other, other)
	}
	for _, f := range diagnose.OverTime(rec) {
		d.Findings = append(d.Findings, Finding{ID: f.ID, Severity: f.Severity.String(), Title: f.Title, Evidence: append([]string{}, f.Evidence...),
			Fix: f.Fix, First: unix(f.First), Last: unix(f.Last)})
	}
	for _, e := range rec.Events {
		d.Events = append(d.Events, Event{T: unix(e.At), Kind: e.Kind, Text: clip(e.Text, 4*MaxName)})
	}
	if e := rec.End; e != nil {
		text := "the recording ended: " + e.Why
		if e.Err != "" {
			text += ": " + clip(e.Err, 4*MaxName)
		}
		d.Events = append(d.Events, Event{T: unix(e.At), Kind: "end", Text: text})
	}
	return d
}

// keptStacks are the MaxStacks stacks that hold the most at their peak.
func keptStacks(rec *report.Recording) map[int]bool {
	peak := map[int]float64{}
	for i := range rec.Intervals {
		for _, h := range rec.Intervals[i].Held {
			peak[h.Stack] = max(peak[h.Stack], h.Bytes)
		}
	}
	ids := make([]int, 0, len(peak))
	for id := range peak {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if peak[ids[i]] != peak[ids[j]] {
			return peak[ids[i]] > peak[ids[j]]
		}
		return ids[i] < ids[j]
	})
	keep := map[int]bool{}
	for _, id := range ids[:min(len(ids), MaxStacks)] {
		keep[id] = true
	}
	return keep
}

// frameNames are a stack's functions, root to leaf, the leaf's side kept
// when there are more than MaxFrames.
func frameNames(st report.RecordedStack) []string {
	fs := st.Frames
	if len(fs) > MaxFrames {
		fs = fs[len(fs)-MaxFrames:]
	}
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		name := f.Function
		if name == "" {
			name = fmt.Sprintf("%#x", f.Addr)
			if f.Module != "" {
				name = fmt.Sprintf("%s+%#x", f.Module[strings.LastIndexByte(f.Module, '/')+1:], f.Offset)
			}
		}
		out = append(out, clip(name, MaxName))
	}
	return out
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

var (
	//go:embed assets/page.html
	pageHTML string
	//go:embed assets/page.js
	pageJS string
	//go:embed assets/page.css
	pageCSS string
	//go:embed assets/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/uPlot.min.css
	uplotCSS string
)

var tmpl = template.Must(template.New("page").Parse(pageHTML))

// csp lets the page run its two scripts, by their hashes, and nothing
// else: no inline handler, no script or request from elsewhere, so that
// even markup that got into the document could neither run nor call out.
var csp = "default-src 'none'; style-src 'unsafe-inline'; script-src " + scriptHash(uplotJS) + " " + scriptHash(pageJS)

func scriptHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}

// Write writes the page of rec to w.
func Write(w io.Writer, rec *report.Recording) error {
	return WriteData(w, NewData(rec))
}

// WriteData writes the page of d to w. The data goes in as JSON in a
// <script type="application/json"> element: encoding/json escapes <, > and
// & (and U+2028, U+2029), so no name in it can end the element or open
// another, and the page's script reads it with JSON.parse and puts names
// into the document as text only.
func WriteData(w io.Writer, d *Data) error {
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(d); err != nil {
		return err
	}
	title := fmt.Sprintf("arenactl: process %d (%s)", d.Pid, d.Exe)
	return tmpl.Execute(w, map[string]any{
		"Title": title,
		"CSP":   csp,
		// The assets are this package's own files, embedded at build
		// time; the data is JSON escaped as above.
		"Data":     template.JS(js.String()),
		"UplotJS":  template.JS(uplotJS),
		"UplotCSS": template.CSS(uplotCSS),
		"PageJS":   template.JS(pageJS),
		"PageCSS":  template.CSS(pageCSS),
	})
}
