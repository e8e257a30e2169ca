package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A live process's walks give the same result, to the byte, whatever the
// number of workers they are spread over: the read-only walk from an image
// and with every thread stopped (XML and all it found), the busy
// pre-flight's walk of the lists, the dry run of trim, heap's contents
// (its chunk index is handed the chunks in ring order) and a snapshot's
// walk (read back as a core). The target is bench/walk/bigheap.c at a small
// size: 8 arenas of a few thousand chunks, half of them free, parked
// (nothing changes while it is read). That the XML is glibc's own is the
// cores' test (internal/glibc's TestWalkCoreFixtures, at every worker
// count too): the process's own malloc_info call leaves a chunk freed
// after it printed, which a later walk rightly counts.
func TestWalksSameAtEveryJobCount(t *testing.T) {
	bin := testutil.BuildC(t, filepath.Join(testutil.RepoRoot(t), "bench", "walk", "bigheap.c"))
	tg := testutil.Start(t, bin, "8", "3000", "400")
	ctx := context.Background()
	text := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := map[string]string{}
	same := func(what string, jobs int, got string) {
		t.Helper()
		if f, ok := first[what]; !ok {
			first[what] = got
		} else if got != f {
			t.Errorf("%s, %d workers: differs from one worker's\n--- 1\n%s\n--- %d\n%s", what, jobs, f, jobs, got)
		}
	}
	for _, jobs := range []int{1, 2, 7, 16} {
		o := Options{Timeout: 10 * time.Second, Jobs: jobs}
		for _, mode := range []Hold{HoldImage, HoldWalk} {
			rep, err := ReadOnly(ctx, tg.Pid, o, mode)
			if err != nil {
				t.Fatalf("%d workers, %s: %v", jobs, mode, err)
			}
			same("the read-only walk ("+mode.String()+")", jobs, text(struct{ W, C any }{rep.ReadOnly.Walk, rep.ReadOnly.Tcaches}))
		}

		tgt, err := live.Open(tg.Pid)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := runPreflight(ctx, tgt, o)
		tgt.Close()
		if err != nil || pf.walk == nil {
			t.Fatalf("%d workers: pre-flight %v (skipped: %q)", jobs, err, pf.skipped)
		}
		same("the pre-flight's walk", jobs, text(pf.walk))

		dry, err := DryRunTrim(ctx, tg.Pid, 0, o, HoldImage)
		if err != nil {
			t.Fatalf("%d workers: trim --dry-run: %v", jobs, err)
		}
		same("trim's prediction", jobs, text(struct{ P, D any }{dry.Prediction, dry.Damage}))

		hc, err := Contents(ctx, tg.Pid, o, HoldImage, nil)
		if err != nil {
			t.Fatalf("%d workers: heap: %v", jobs, err)
		}
		hc.Frozen, hc.Scan = 0, 0
		same("heap's contents", jobs, text(hc))

		out := filepath.Join(t.TempDir(), "snap.core")
		if _, err := Snapshot(ctx, tg.Pid, SnapshotOptions{Out: out, Timeout: 10 * time.Second, Hold: HoldImage, Jobs: jobs}); err != nil {
			t.Fatalf("%d workers: snapshot: %v", jobs, err)
		}
		crep, err := Core(ctx, out, CoreOptions{Jobs: jobs})
		if err != nil {
			t.Fatalf("%d workers: the snapshot read back: %v", jobs, err)
		}
		same("the snapshot's walk", jobs, text(struct{ W, C any }{crep.ReadOnly.Walk, crep.ReadOnly.Tcaches}))
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Errorf("target: %q %d", line, code)
	}
}

// An image that ends while it is read (killed here; its lease can also run
// out when arenactl's threads do not run for 2 s) makes the read fail with
// ErrImageGone when it is let go, not yield a walk or a scan short of
// what it could not read.
func TestImageGoneUnderTheReadFails(t *testing.T) {
	bin := testutil.BuildC(t, filepath.Join(testutil.RepoRoot(t), "bench", "walk", "bigheap.c"))
	tg := testutil.Start(t, bin, "2", "1000", "400")
	tgt, err := live.Open(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	hd, err := hold(context.Background(), tgt, HoldImage, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(hd.image.Pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the image gone", func() bool { return hd.image.Gone() != nil })
	var ro report.ReadOnly
	if err := hd.release(&ro); !errors.Is(err, errkind.ErrImageGone) {
		t.Fatalf("release after the image was killed: %v, want ErrImageGone", err)
	}
	if err := hd.release(&ro); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Errorf("target: %q %d", line, code)
	}
}
