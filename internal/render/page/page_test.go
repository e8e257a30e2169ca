package page_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/render/page"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// evil is a function name a hostile program may well have: it must stay
// text on the page.
const evil = `</script><img src=x onerror="document.title='pwned'">`

const mib = 1 << 20

// phased is a recording of the phases the target goes through:
// site A grows, then B, then A's memory is freed but stays resident at the
// main heap's top, then trimmed.
func phased() *report.Recording {
	start := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	frames := func(names ...string) []stackprof.Frame {
		var fs []stackprof.Frame
		for _, n := range names {
			fs = append(fs, stackprof.Frame{Function: n})
		}
		return fs
	}
	rec := &report.Recording{
		Meta: report.RecordingMeta{Format: report.RecordingFormat, Pid: 4242, Exe: "/usr/bin/phases", Start: start,
			Interval: time.Second, Rate: 512 << 10, MaxStacks: 20},
		Stacks: []report.RecordedStack{
			{ID: 1, Frames: frames("main", "phase", "grow_a", "malloc")},
			{ID: 2, Frames: frames("main", "phase", "grow_b", "malloc")},
			{ID: 3, Frames: frames("main", evil, "malloc")},
		},
	}
	for i := 0; i < 20; i++ {
		var a, b float64
		switch {
		case i < 5:
			a = float64(i+1) * 20 * mib
		case i < 10:
			a, b = 100*mib, float64(i-4)*10*mib
		default:
			b = 50 * mib
		}
		top := uint64(0)
		if i >= 10 && i < 15 {
			top = 100 * mib // A freed: resident at the top until trimmed
		}
		heap := uint64(a+b) + top + 2*mib
		classes := []report.ClassRss{{Class: "main-heap", Rss: heap}, {Class: "arena-heaps", Rss: 4 * mib},
			{Class: "mmapped-chunks", Rss: mib}, {Class: "other-anon", Rss: 3 * mib}, {Class: "stacks", Rss: mib / 2},
			{Class: "files", Rss: 6 * mib}, {Class: "special", Rss: 8 << 10}}
		var rss uint64
		for _, c := range classes {
			rss += c.Rss
		}
		iv := report.RecordedInterval{Start: start.Add(time.Duration(i) * time.Second), Duration: time.Second, Merged: 1,
			Rss: rss, RssPeak: rss, Classes: classes, RssAt: start.Add(time.Duration(i+1) * time.Second),
			Arenas:    []report.ArenaLevel{{Index: 0, SystemBytes: heap, TopBytes: top}, {Index: 1, SystemBytes: 4 * mib, TopBytes: mib}},
			OtherHeld: report.StackHeld{Bytes: 512 << 10}}
		if i%3 == 2 { // a walk every third interval
			iv.Malloc = &report.MallocLevel{At: iv.End().Add(-300 * time.Millisecond), Held: uint64(a+b) + 3*mib, Tcache: 256 << 10,
				Trimmable: top, Pinned: mib, PinnedTops: 256 << 10, FreeNotResident: uint64(i) << 12, Stop: 2 * time.Millisecond, Cpu: 30 * time.Millisecond,
				Arenas: []report.ArenaMalloc{{Index: 0, InUse: uint64(a+b) + 3*mib, Free: top + mib}, {Index: 1, InUse: 3 * mib, Free: mib}}}
		}
		for id, v := range map[int]float64{1: a, 2: b, 3: 3 * mib} {
			if v > 0 {
				iv.Held = append(iv.Held, report.StackHeld{Stack: id, Bytes: v, Objects: v / 4096, Sampled: int(v / (512 << 10))})
			}
		}
		rec.Intervals = append(rec.Intervals, iv)
	}
	rec.Events = []report.RecordingEvent{{At: start.Add(12 * time.Second), Kind: report.EventTrigger, Text: "RSS above 200 MiB " + evil}}
	return rec
}

func render(t *testing.T, rec *report.Recording) string {
	t.Helper()
	var b bytes.Buffer
	if err := page.Write(&b, rec); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var dataRE = regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`)

// embedded is the data the page carries, as its script reads it.
func embedded(t *testing.T, doc string) *page.Data {
	t.Helper()
	m := dataRE.FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no data element on the page")
	}
	var d page.Data
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("the page's data: %v", err)
	}
	return &d
}

// The page carries the recording's figures unchanged: every interval's
// end, RSS, classes and held bytes by stack, and every stack's frames.
func TestPageDataEqualsRecording(t *testing.T) {
	rec := phased()
	d := embedded(t, render(t, rec))
	if len(d.T) != len(rec.Intervals) {
		t.Fatalf("%d times for %d intervals", len(d.T), len(rec.Intervals))
	}
	byID := map[int]int{}
	for i, st := range d.Stacks {
		byID[st.ID] = i
	}
	for _, st := range rec.Stacks {
		i, ok := byID[st.ID]
		if !ok {
			t.Fatalf("stack %d is not on the page", st.ID)
		}
		var want []string
		for _, f := range st.Frames {
			want = append(want, f.Function)
		}
		if got := d.Stacks[i].Frames; strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("stack %d: frames %q, want %q", st.ID, got, want)
		}
	}
	for i, iv := range rec.Intervals {
		if got, want := d.T[i], float64(iv.End().UnixNano())/1e9; got != want {
			t.Errorf("interval %d ends at %v on the page, %v recorded", i, got, want)
		}
		if d.Rss[i] != iv.Rss || d.RssPeak[i] != iv.RssPeak {
			t.Errorf("interval %d: RSS %d (peak %d), recorded %d (%d)", i, d.Rss[i], d.RssPeak[i], iv.Rss, iv.RssPeak)
		}
		for _, c := range iv.Classes {
			k := indexOf(d.Classes, c.Class)
			if k < 0 || d.ClassRss[k][i] != c.Rss {
				t.Errorf("interval %d: class %s not as recorded (%d)", i, c.Class, c.Rss)
			}
		}
		got := map[int]float64{}
		for _, h := range d.Held[i] {
			got[d.Stacks[int(h[0])].ID] = h[1]
		}
		if len(got) != len(iv.Held) {
			t.Errorf("interval %d: %d stacks held, %d recorded", i, len(got), len(iv.Held))
		}
		for _, h := range iv.Held {
			if got[h.Stack] != h.Bytes {
				t.Errorf("interval %d: stack %d holds %v on the page, %v recorded", i, h.Stack, got[h.Stack], h.Bytes)
			}
		}
		if d.Other[i] != iv.OtherHeld.Bytes {
			t.Errorf("interval %d: other %v, recorded %v", i, d.Other[i], iv.OtherHeld.Bytes)
		}
	}
	// Every walk, with its interval, as recorded.
	var walks []page.Walk
	for i, iv := range rec.Intervals {
		if m := iv.Malloc; m != nil {
			walks = append(walks, page.Walk{I: i, At: float64(m.At.UnixNano()) / 1e9, Held: m.Held, Tcache: m.Tcache, Trimmable: m.Trimmable,
				Pinned: m.Pinned, PinnedTops: m.PinnedTops, FreeNotResident: m.FreeNotResident, Mmapped: m.Mmapped, Stop: m.Stop.Seconds(), Cpu: m.Cpu.Seconds()})
		}
	}
	if fmt.Sprint(walks) != fmt.Sprint(d.Walks) || len(walks) == 0 {
		t.Errorf("the page's walks:\n%v\nrecorded:\n%v", d.Walks, walks)
	}
	ids := map[string]float64{}
	for _, f := range d.Findings {
		ids[f.ID] = f.First
	}
	// A's 100 MiB at the main heap's top from the 11th interval on.
	if got, want := ids["trimmable-top"], float64(rec.Intervals[10].End().Unix()); got != want {
		t.Errorf("trimmable-top first held at %v, want %v (findings %v)", got, want, ids)
	}
	// The walk after A's free (interval 11) is the first to find its
	// 100 MiB trimmable.
	if got, want := ids["trimmable-free"], float64(rec.Intervals[11].End().Unix()); got != want {
		t.Errorf("trimmable-free first held at %v, want %v (findings %v)", got, want, ids)
	}
	if _, ok := ids["rss-growth"]; !ok {
		t.Errorf("no rss-growth finding: %v", ids)
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// The page's bound: no more than MaxStacks stacks, whatever the recording
// holds; the rest summed into other, and the page says so.
func TestPageBoundsStacks(t *testing.T) {
	rec := phased()
	iv := &rec.Intervals[len(rec.Intervals)-1]
	for id := 10; id < 10+2*page.MaxStacks; id++ {
		rec.Stacks = append(rec.Stacks, report.RecordedStack{ID: id, Frames: []stackprof.Frame{{Function: strings.Repeat("f", 3*page.MaxName)}}})
		iv.Held = append(iv.Held, report.StackHeld{Stack: id, Bytes: float64(id)})
	}
	d := embedded(t, render(t, rec))
	if len(d.Stacks) != page.MaxStacks || len(d.Truncated) == 0 {
		t.Errorf("%d stacks on the page (bound %d), truncated %q", len(d.Stacks), page.MaxStacks, d.Truncated)
	}
	for _, st := range d.Stacks {
		for _, f := range st.Frames {
			if len(f) > page.MaxName+len("…") {
				t.Fatalf("a frame name of %d bytes", len(f))
			}
		}
	}
}

// The page's size at the recording's bounds (the default tiers' most
// intervals, 100 stacks named in each, 200 stacks of 64 frames of 200-byte
// names, 1000 events of the longest text) stays under the bound
// docs/commands/page.md states.
func TestPageSizeBound(t *testing.T) {
	const maxIntervals, perInterval, bound = 2705, 100, 12 << 20
	start := time.Now()
	rec := &report.Recording{Meta: report.RecordingMeta{Start: start, Interval: time.Second, MaxStacks: perInterval}}
	name := strings.Repeat("n", page.MaxName)
	for id := 1; id <= page.MaxStacks; id++ {
		st := report.RecordedStack{ID: id}
		for f := 0; f < page.MaxFrames; f++ {
			st.Frames = append(st.Frames, stackprof.Frame{Function: fmt.Sprint(id, f, name)})
		}
		rec.Stacks = append(rec.Stacks, st)
	}
	for i := 0; i < maxIntervals; i++ {
		iv := report.RecordedInterval{Start: start.Add(time.Duration(i) * time.Minute), Duration: time.Minute, Rss: 1 << 40, RssPeak: 1 << 40,
			Arenas: []report.ArenaLevel{{Index: 0, TopBytes: 1 << 30}, {Index: 1, TopBytes: 1 << 30}}}
		for _, c := range report.RecordingClasses {
			iv.Classes = append(iv.Classes, report.ClassRss{Class: c, Rss: 1<<40 + uint64(i)})
		}
		for k := 0; k < perInterval; k++ {
			iv.Held = append(iv.Held, report.StackHeld{Stack: 1 + (i+k)%page.MaxStacks, Bytes: 1.2345678901234e12})
		}
		rec.Intervals = append(rec.Intervals, iv)
	}
	for i := 0; i < 1000; i++ {
		rec.Events = append(rec.Events, report.RecordingEvent{At: start, Kind: report.EventNote, Text: strings.Repeat("e", 4*page.MaxName)})
	}
	if n := len(render(t, rec)); n > bound {
		t.Errorf("the page at the bounds is %d bytes, more than %d", n, bound)
	} else {
		t.Logf("the page at the bounds: %.1f MiB", float64(n)/(1<<20))
	}
}

// A name that closes the script element in the HTML cannot: the markup
// carries it escaped.
func TestPageEscapesNames(t *testing.T) {
	doc := render(t, phased())
	if strings.Contains(doc, "<img") || strings.Count(doc, "</script>") != 3 {
		t.Errorf("the page's markup carries a name unescaped (%d </script>)", strings.Count(doc, "</script>"))
	}
}

// textEscape is how Chromium serializes text: only <, > and & escaped.
func textEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed")
	return ""
}

func headless(t *testing.T, browser string, args ...string) string {
	t.Helper()
	cmd := exec.Command(browser, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,2400", "--virtual-time-budget=5000", "--hide-scrollbars"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// The page rendered by headless Chromium, offline from a file: both
// charts drawn by uPlot with their legends, the flame graphs drawn by the
// page's script (so the DOM holds them only if it ran) with the sites the
// range holds, the findings listed, and the hostile name shown as text
// with nothing of it run. ARENACTL_PAGE_SHOT=FILE keeps a screenshot to
// look at.
func TestPageInChromium(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "page.html")
	if err := os.WriteFile(file, []byte(render(t, phased())), 0o600); err != nil {
		t.Fatal(err)
	}
	// The range of B's growth (intervals 5 to 9); A at 0 and at 19.
	dom := headless(t, browser, "--dump-dom", "file://"+file+"#range=5-9&a=0&b=19")
	if !strings.Contains(dom, `data-ready="1"`) {
		t.Fatalf("the page's script did not finish: %s", dom[:min(len(dom), 3000)])
	}
	if n := strings.Count(dom, `class="uplot`); n != 2 {
		t.Errorf("%d uPlot charts, want 2", n)
	}
	for _, label := range []string{"main_arena's top", "heap (held or free in bins)", "malloc: held (walked)", "malloc: free, resident, pinned",
		"malloc: free, resident, trimmable", "mmapped-chunks", "stacks", "grow_a", "grow_b", "other stacks"} {
		if !strings.Contains(dom, `>`+textEscape(label)+`<`) {
			t.Errorf("no legend entry %q", label)
		}
	}
	section := func(id string) string {
		i := strings.Index(dom, `id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no #%s", id)
		}
		j := strings.Index(dom[i:], "</section>")
		return dom[i : i+j]
	}
	rangeFlame, diffFlame := section("range-flame"), section("diff-flame")
	if !strings.Contains(rangeFlame, `data-name="grow_b"`) || strings.Contains(rangeFlame, `data-name="grow_a"`) {
		t.Errorf("the range of B's growth: want grow_b and not grow_a on its flame graph")
	}
	for _, fn := range []string{"grow_a", "grow_b", "phase", "main"} {
		if !strings.Contains(diffFlame, `data-name="`+fn+`"`) {
			t.Errorf("no %s on the differential flame graph", fn)
		}
	}
	// The waterfall at B (the last interval): every layer, adding up.
	wf := section("waterfall")
	for _, line := range []string{"main_arena's top", "malloc: held (walked)", "malloc: free, resident, trimmable", "files", "unexplained", "rss", "walk"} {
		if !strings.Contains(wf, `data-line="`+line+`"`) {
			t.Errorf("no %s line in the waterfall at B", line)
		}
	}
	if !regexp.MustCompile(`data-line="unexplained"><td>[^<]*</td><td class="n">0 B</td>`).MatchString(wf) {
		t.Errorf("the waterfall at B does not add up to its RSS")
	}
	for _, id := range []string{"trimmable-top", "trimmable-free"} {
		if !strings.Contains(section("findings"), `data-id="`+id+`"`) {
			t.Errorf("the findings list has no %s", id)
		}
	}
	// The waterfall at a walk's interval (B = 14, A's free memory
	// trimmable) splits the heap by it, and adds up.
	dom14 := headless(t, browser, "--dump-dom", "file://"+file+"#range=5-9&a=0&b=14")
	i := strings.Index(dom14, `id="waterfall"`)
	wf14 := dom14[i : i+strings.Index(dom14[i:], "</table>")]
	if !regexp.MustCompile(`data-line="malloc: free, resident, trimmable"><td>[^<]*</td><td class="n">100.0 MiB</td>`).MatchString(wf14) ||
		!regexp.MustCompile(`data-line="unexplained"><td>[^<]*</td><td class="n">0 B</td>`).MatchString(wf14) ||
		!strings.Contains(wf14, "walked ") {
		t.Errorf("the waterfall at interval 14 is not split by its walk, or does not add up: %s", wf14)
	}
	if strings.Contains(dom, "<img") {
		t.Errorf("the hostile name became markup")
	}
	if !strings.Contains(dom, "<title>arenactl: process 4242") {
		t.Errorf("the document's title changed")
	}
	if !strings.Contains(dom, textEscape(evil)) {
		t.Errorf("the hostile name is not shown as text")
	}
	if shot := os.Getenv("ARENACTL_PAGE_SHOT"); shot != "" {
		headless(t, browser, "--screenshot="+shot, "file://"+file+"#range=5-9&a=0&b=19")
	}
	// A recording killed before its first interval is a page too.
	empty := filepath.Join(dir, "empty.html")
	if err := os.WriteFile(empty, []byte(render(t, &report.Recording{Meta: phased().Meta})), 0o600); err != nil {
		t.Fatal(err)
	}
	if dom := headless(t, browser, "--dump-dom", "file://"+empty); !strings.Contains(dom, `data-ready="1"`) {
		t.Errorf("the page of an empty recording did not finish its script")
	}
}
