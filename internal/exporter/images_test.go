package exporter

import (
	"context"
	"os"
	"regexp"
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
		if len(ps) != 1 || ps[0].Pid != pid {
			var got []int
			for _, p := range ps {
				got = append(got, p.Pid)
			}
			t.Errorf("selected %v; want only process %d, not its image %d", got, pid, im.Pid)
		}
	}
}
