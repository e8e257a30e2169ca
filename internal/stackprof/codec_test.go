package stackprof_test

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

func round(v float64) int64 { return int64(math.Round(v)) }

func siteBy(t *testing.T, p *stackprof.Profile, leaf string) *stackprof.Site {
	t.Helper()
	for i := range p.Sites {
		if p.Sites[i].Leaf().Function == leaf {
			return &p.Sites[i]
		}
	}
	t.Fatalf("no site allocating in %s", leaf)
	return nil
}

// TestWritePprof writes the profile, parses it back with pprof's own
// parser, checks what a Go heap profile has (sample types, default,
// period), the mappings with build-ids, a location per address with the
// inlined call as an extra line, the values; then go tool pprof -top
// lists the functions.
func TestWritePprof(t *testing.T) {
	p := realProfile(t)
	var buf bytes.Buffer
	if err := stackprof.WritePprof(&buf, p); err != nil {
		t.Fatal(err)
	}
	if b := buf.Bytes(); len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatal("not gzipped")
	}
	pp, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, st := range pp.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes" {
		t.Errorf("sample types %s", got)
	}
	if pp.DefaultSampleType != "inuse_space" || pp.PeriodType.Type != "space" || pp.PeriodType.Unit != "bytes" ||
		pp.Period != fixtureRate || pp.DurationNanos != fixtureWindow.Duration.Nanoseconds() || pp.TimeNanos != fixtureWindow.Start.UnixNano() {
		t.Errorf("default %q, period %v %d, time %d + %d", pp.DefaultSampleType, pp.PeriodType, pp.Period, pp.TimeNanos, pp.DurationNanos)
	}
	if m := pp.Mapping[0]; m.File != fixtureExe || m.BuildID != testutil.FileBuildID(t, fixtureExe) || !m.HasFunctions || !m.HasLineNumbers || m.Offset != 0 {
		t.Errorf("first mapping %+v, want the executable with its build-id", m)
	}
	for _, m := range pp.Mapping {
		if m.BuildID == "" || m.Start >= m.Limit {
			t.Errorf("mapping %s: build-id %q, [%#x, %#x)", m.File, m.BuildID, m.Start, m.Limit)
		}
	}
	if len(pp.Sample) != len(p.Sites) {
		t.Fatalf("%d samples for %d sites", len(pp.Sample), len(p.Sites))
	}
	for i, s := range pp.Sample {
		site := &p.Sites[i]
		want := []int64{round(site.Est.AllocObjects), round(site.Est.AllocBytes), round(site.Est.InUseObjects), round(site.Est.InUseBytes)}
		for k := range want {
			if s.Value[k] != want[k] {
				t.Errorf("sample %d values %v, want %v", i, s.Value, want)
				break
			}
		}
		// Leaf first: the allocator, then its caller.
		var fns []string
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				fns = append(fns, l.Function.Name)
			}
		}
		names := siteNames(site)
		for k := range names {
			if k >= len(fns) || fns[k] != names[len(names)-1-k] {
				t.Errorf("sample %d's functions leaf first %v, want the site's %v reversed", i, fns, names)
				break
			}
		}
	}
	// reserve, inlined into grow_buffer: one location, two lines,
	// innermost first.
	buffer := siteBy(t, p, "reserve")
	n := len(buffer.Frames)
	for _, loc := range pp.Location {
		if loc.Address != buffer.Frames[n-2].Addr {
			continue
		}
		if len(loc.Line) != 2 || loc.Line[0].Function.Name != "reserve" || loc.Line[1].Function.Name != "grow_buffer" ||
			loc.Line[1].Function.SystemName != "grow_buffer" || int(loc.Line[0].Line) != buffer.Frames[n-2].Line ||
			filepath.Base(loc.Line[0].Function.Filename) != "sites.cpp" || loc.Mapping != pp.Mapping[0] {
			t.Errorf("grow_buffer's location: %+v", loc)
			for _, l := range loc.Line {
				t.Logf("  %+v %+v", l, *l.Function)
			}
		}
	}

	file := filepath.Join(t.TempDir(), "leaks.pb.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command for go tool pprof")
	}
	cmd := exec.Command(goTool, "tool", "pprof", "-top", file)
	// HOME stays: go tool builds pprof into its cache the first time.
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, out)
	}
	t.Logf("go tool pprof -top:\n%s", out)
	for _, fn := range []string{"operator new", "realloc", "make_widget", "cache<int>::fill", "server::handle", "reserve", "grow_buffer", "parser::parse", "inuse_space"} {
		if !strings.Contains(string(out), fn) {
			t.Errorf("go tool pprof -top does not list %s", fn)
		}
	}
}

// TestWriteFolded: a line per stack holding bytes, root first, the held
// bytes estimated; a site holding nothing left out; names that would
// break the syntax mended.
func TestWriteFolded(t *testing.T) {
	p := realProfile(t)
	var buf bytes.Buffer
	if err := stackprof.WriteFolded(&buf, p); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := map[string]int64{}
	for i := range p.Sites {
		want[strings.Join(siteNames(&p.Sites[i]), ";")] = round(p.Sites[i].Est.InUseBytes)
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	for _, l := range lines {
		i := strings.LastIndexByte(l, ' ')
		n, err := strconv.ParseInt(l[i+1:], 10, 64)
		if i < 0 || err != nil || want[l[:i]] != n {
			t.Errorf("line %q; want one of %v", l, want)
		}
		if !strings.HasPrefix(l, "clone3;start_thread;") {
			t.Errorf("line %q does not start at the root", l)
		}
	}
	if !strings.Contains(buf.String(), ";widget_main;server::handle;cache<int>::fill;make_widget;operator new ") {
		t.Errorf("the widget chain is not in order")
	}

	// A copy where the widgets were all freed and a name holds ';'.
	q := *p
	q.Sites = append([]stackprof.Site(nil), p.Sites...)
	for i := range q.Sites {
		s := &q.Sites[i]
		s.Frames = append([]stackprof.Frame(nil), s.Frames...)
		switch s.Leaf().Function {
		case "make_widget":
			s.Est.InUseBytes, s.Est.InUseObjects = 0, 0
		case "reserve":
			s.Frames[len(s.Frames)-1].Function = "odd;name\nhere"
		}
	}
	buf.Reset()
	if err := stackprof.WriteFolded(&buf, &q); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(buf.String(), "\n"); got != 1 || strings.Contains(buf.String(), "make_widget") ||
		!strings.Contains(buf.String(), ";reserve;odd:name here ") {
		t.Errorf("with the widgets freed and an odd name:\n%s", buf.String())
	}
}

// TestEmptyProfile: a window with no sample still makes a valid pprof
// file and an empty folded output.
func TestEmptyProfile(t *testing.T) {
	p := &stackprof.Profile{Window: stackprof.Window{Duration: time.Second, Rate: 1 << 20}}
	var buf bytes.Buffer
	if err := stackprof.WritePprof(&buf, p); err != nil {
		t.Fatal(err)
	}
	pp, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.CheckValid(); err != nil || len(pp.Sample) != 0 || pp.Period != 1<<20 {
		t.Errorf("empty profile: %v, %d samples, period %d", err, len(pp.Sample), pp.Period)
	}
	buf.Reset()
	if err := stackprof.WriteFolded(&buf, p); err != nil || buf.Len() != 0 {
		t.Errorf("folded of nothing: %q %v", buf.String(), err)
	}
}
