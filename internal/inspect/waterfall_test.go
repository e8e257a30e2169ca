package inspect

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The RSS waterfall against a target that counts each line itself
// (testdata/waterfall.c) and then sits blocked in read while it is
// measured, in every form info has: the injected malloc_info, the
// read-only walk (from an image, and with every thread stopped), and the
// core of a snapshot. Each line must be within its tolerance of the
// target's count, and the lines with the unexplained rest must add up to
// the RSS that smaps_rollup says when the test reads it itself, within 1%.
func TestWaterfallAddsUp(t *testing.T) {
	bin := testutil.BuildC(t, "waterfall.c", "-pthread")
	dir := t.TempDir()
	tg := testutil.Start(t, bin, filepath.Join(dir, "mapped"))
	truth := parseTruth(t, tg.Next())
	ctx := context.Background()
	o := Options{Timeout: 10 * time.Second}

	check := func(name string, r *report.Report, tcacheRead, measured bool) {
		t.Helper()
		wf := r.Waterfall()
		if wf == nil {
			t.Fatalf("%s: no waterfall", name)
		}
		roll, err := maps.ReadRollup(tg.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if !within(wf.Rss, roll.Rss, roll.Rss/100) {
			t.Errorf("%s: RSS %d, smaps_rollup now %d", name, wf.Rss, roll.Rss)
		}
		if u := wf.Unexplained; u > int64(roll.Rss/100) || -u > int64(roll.Rss/100) {
			t.Errorf("%s: the lines sum to %d of RSS %d: %d unexplained, more than 1%%", name, wf.Sum(), wf.Rss, u)
		}
		line := func(id string) uint64 {
			l, ok := wf.Line(id)
			if !ok {
				t.Fatalf("%s: no %s line", name, id)
			}
			return l.Bytes
		}
		held, tcache := truth["held"], truth["tcache"]
		if tcacheRead {
			if !within(line(report.LineTcache), tcache, 64<<10) {
				t.Errorf("%s: tcache %d, the target freed %d into it", name, line(report.LineTcache), tcache)
			}
		} else {
			held += tcache // counted in use, as malloc_info counts it
		}
		// Beyond the target's own chunks, malloc holds the threads'
		// tcache structs and the arenas' headers.
		if !within(line(report.LineHeld), held, held/100+512<<10) {
			t.Errorf("%s: held %d, the target holds %d", name, line(report.LineHeld), held)
		}
		// The main arena's top is trimmable too: up to 128 KiB of top_pad.
		if !within(line(report.LineTrimmable), truth["trimmable"]+64<<10, 256<<10) {
			t.Errorf("%s: trimmable %d, the target freed %d in whole pages", name, line(report.LineTrimmable), truth["trimmable"])
		}
		pinned := truth["pieces"] + truth["top"]
		if !within(line(report.LinePinned), pinned, 512<<10) {
			t.Errorf("%s: pinned %d, the target freed %d in pieces and left %d at a thread arena's top", name, line(report.LinePinned), truth["pieces"], truth["top"])
		}
		// ld.so, libc and the TLS blocks add their own anonymous memory
		// and file pages; the target's own are the floor.
		type want struct {
			id          string
			want, slack uint64
		}
		wants := []want{{report.LineStacks, truth["stacks"], 512 << 10}, {report.LineFiles, truth["file"], 16 << 20}}
		if measured {
			if !within(line(report.LineMmapped), truth["mmapped"], 64<<10) {
				t.Errorf("%s: mmapped %d resident, the target touched %d", name, line(report.LineMmapped), truth["mmapped"])
			}
			wants = append(wants, want{report.LineAnon, truth["anon"], 3 << 20})
		} else if got, w := line(report.LineMmapped)+line(report.LineAnon), truth["mmapped"]+truth["anon"]; got < w || got > w+3<<20 {
			// A core cannot tell which of the chunks' pages were
			// resident: only the anonymous memory in all is checked.
			t.Errorf("%s: mmapped and other anonymous %d, the target's own %d", name, got, w)
		}
		for _, c := range wants {
			if got := line(c.id); got < c.want || got > c.want+c.slack {
				t.Errorf("%s: %s %d, the target's own %d (up to %d more allowed)", name, c.id, got, c.want, c.slack)
			}
		}
		if t.Failed() {
			var b strings.Builder
			for _, l := range wf.Lines {
				fmt.Fprintf(&b, "%s %d\n", l.ID, l.Bytes)
			}
			t.Logf("%s:\n%sunexplained %d of %d; notes %q", name, b.String(), wf.Unexplained, wf.Rss, wf.Notes)
		}
	}

	r, err := Info(ctx, tg.Pid, o)
	if err != nil {
		t.Fatal(err)
	}
	check("info", r, false, true)
	for _, mode := range []Hold{HoldImage, HoldWalk} {
		r, err := ReadOnly(ctx, tg.Pid, o, mode)
		if err != nil {
			t.Fatal(err)
		}
		check("read-only, "+mode.String(), r, true, true)
	}
	core := filepath.Join(dir, "snap.core")
	if _, err := Snapshot(ctx, tg.Pid, SnapshotOptions{Out: core, Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r, err = Core(ctx, core, CoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("snapshot's core", r, true, false)
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

func within(got, want, tol uint64) bool { return got+tol >= want && got <= want+tol }

// parseTruth reads the target's "truth KEY BYTES ..." line.
func parseTruth(t *testing.T, line string) map[string]uint64 {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "truth" || len(f)%2 != 1 {
		t.Fatalf("target said %q, not its truth", line)
	}
	m := map[string]uint64{}
	for i := 1; i < len(f); i += 2 {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			t.Fatalf("target's truth %q: %v", line, err)
		}
		m[f[i]] = n
	}
	return m
}
