package exporter

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A copy-on-write image an arenactl makes of a process has the process's
// comm and executable: a matcher selected it, and the exporter watched it,
// logged errors about it and exported its series (issue 22, item 14).
// Images are recognised and never selected, by a matcher or by PID; the
// process itself still is.
func TestImagesAreNotSelected(t *testing.T) {
	name, pids := startSleeps(t, 1)
	pid := pids[0]
	tgt, err := live.OpenReadOnly(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	im, err := tgt.Image(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	testutil.WaitUntil(t, "the image to wait in its poll", func() bool { return ptrace.IsImage(im.Pid) })
	if ptrace.IsImage(pid) {
		t.Fatalf("process %d taken for an image", pid)
	}
	for _, s := range []Selector{{Comm: []*regexp.Regexp{mustCompile(t, "--comm", name)}}, {Pids: []int{pid, im.Pid}}} {
		ps, err := s.discover(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		defer closeAll(ps)
		if len(ps) != 1 || ps[0].Pid != pid {
			var got []int
			for _, p := range ps {
				got = append(got, p.Pid)
			}
			t.Errorf("selected %v; want only process %d, not its image %d", got, pid, im.Pid)
		}
	}
}

// A PID given that does not exist was served as arenactl_targets 0, with
// nothing in the log or the metrics (issue 22, item 10): it is logged once
// and served as target_up 0 with its reason until it can be watched.
func TestMissingPidIsSaid(t *testing.T) {
	var log []string
	const pid = 999999
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Skipf("process %d exists", pid)
	}
	e := New(Config{Selector: Selector{Pids: []int{pid}}, MinInterval: time.Hour,
		Logf: func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); e.wg.Wait() }()
	e.discover(ctx)
	e.discover(ctx)
	if len(log) != 1 || !strings.Contains(log[0], "process 999999 (--pid) does not exist: not watched") {
		t.Errorf("log %q", log)
	}
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b := rec.Body
	for _, want := range []string{`arenactl_target_up{comm="",pid="999999"} 0`, `arenactl_target_error{comm="",pid="999999",reason="gone"} 1`, "arenactl_targets 0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in\n%s", want, b.String())
		}
	}
}
