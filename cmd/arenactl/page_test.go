package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// arenactl record page reads a recording file and writes its page, once: the
// page carries every interval; a file that is not a recording, or an -o
// that cannot be written, is one line and its exit code, never a page.
func TestPageCommand(t *testing.T) {
	dir := t.TempDir()
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	s := record.NewStore(report.RecordingMeta{Pid: 7, Exe: "/bin/x", Start: start, Interval: time.Second, Rate: 512 << 10, MaxStacks: 10})
	s.AddStack(report.RecordedStack{ID: 1, Frames: []stackprof.Frame{{Function: "main"}, {Function: "grow"}, {Function: "malloc"}}})
	for i := 0; i < 5; i++ {
		s.Add(report.RecordedInterval{Start: start.Add(time.Duration(i) * time.Second), Duration: time.Second, Rss: uint64(i+1) << 20,
			Classes: []report.ClassRss{{Class: "main-heap", Rss: uint64(i+1) << 20}},
			Held:    []report.StackHeld{{Stack: 1, Bytes: float64(i) * 1e5, Sampled: i}}})
	}
	path := filepath.Join(dir, "rec.arenactl")
	w, err := record.Create(path, s, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "page.html")
	r := mustRun(t, "record", "page", path, "-o", out)
	if !strings.HasPrefix(r.Stdout, "wrote "+out) || !strings.Contains(r.Stdout, "5 intervals") {
		t.Errorf("page said %q", r.Stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"t":\[([^\]]*)\]`).FindSubmatch(b)
	if m == nil || strings.Count(string(m[1]), ",") != 4 {
		t.Errorf("the page's times: %q", m)
	}
	if r := run(t, "record", "page", path, "-o", out); r.Code != 0 {
		t.Errorf("a page replaces a page: exit %d, %s", r.Code, r.Stderr)
	}

	notRec := filepath.Join(dir, "not")
	os.WriteFile(notRec, []byte("hello\n"), 0o600)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"record", "page", notRec, "-o", filepath.Join(dir, "x.html")}, exitBadCore},
		{[]string{"record", "page", path, "-o", filepath.Join(dir, "no", "x.html")}, exitUsage},
		{[]string{"record", "page", path}, exitUsage},
		{[]string{"record", "page", "-o", out}, exitUsage},
		{[]string{"record", "page", path, path, "-o", out}, exitUsage},
		{[]string{"record", "page", "--no-such-flag", path, "-o", out}, exitUsage},
	} {
		r := run(t, c.args...)
		if r.Code != c.want || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || strings.Contains(r.Stderr, "goroutine") {
			t.Errorf("%q: exit %d (want %d), %q", c.args, r.Code, c.want, r.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.html")); err == nil {
		t.Errorf("a page was written from a file that is not a recording")
	}
}
