package arm64vm

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// record: record's sampler (leaks' hooks, kept in place over intervals)
// on leaks.cpp: the recording's live set names leak_malloc, and the
// target runs on unharmed after it. The window is 10 s, as leaks' check.
func (g *guest) record(t *testing.T) {
	tg := g.start(t, "leaks")
	if a := tg.Send("run"); a != "running" {
		t.Fatalf("run: %q", a)
	}
	rec := filepath.Join(t.TempDir(), "leaks.rec")
	g.mustRun(t, "record", strconv.Itoa(tg.Pid), "-o", rec, "--duration", "10s", "--interval", "2s", "--rate", "256K")
	show := g.mustRun(t, "record", "show", rec).stdout
	if !strings.Contains(show, "app::leak_malloc") {
		t.Errorf("the recording's live set does not name leak_malloc:\n%s", firstLines(show, 40))
	}
	if a := tg.Send("counts"); !strings.HasPrefix(a, "counts") {
		t.Fatalf("counts after the recording: %q", a)
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}
