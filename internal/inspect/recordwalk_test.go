package inspect

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
)

// The walks' cadence: a 50 GiB heap is not walked at the default stop
// bound (its image would stop the process about a second), and the
// recording says so once; a measured stop per GiB is the least of the
// walks of 1 GiB or more; a walk's stop and CPU stretch the next by the
// shares; an image that cannot be made ends the walks.
func TestWalkCadence(t *testing.T) {
	st := record.NewStore(report.RecordingMeta{Interval: time.Second})
	f, err := record.Create(filepath.Join(t.TempDir(), "rec"), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc := &recSession{ctx: context.Background(), st: st, w: f}
	w := &rc.walks
	w.every, w.maxStop, w.stopShare, w.cpuShare = DefaultWalkEvery, DefaultWalkMaxStop, DefaultStopShare, DefaultCPUShare
	heapOf := func(bytes uint64) *report.RecordedInterval {
		return &report.RecordedInterval{Classes: []report.ClassRss{{Class: "main-heap", Rss: bytes / 2}, {Class: "arena-heaps", Rss: bytes / 2}, {Class: "files", Rss: 1 << 40}}}
	}
	if got := w.predict(50 << 30); got < 800*time.Millisecond || got > 1200*time.Millisecond {
		t.Errorf("50 GiB before any walk: a stop of %s predicted, want about 1 s", got)
	}
	// Paused at 50 GiB, said once, nothing started.
	for range 3 {
		rc.walk(heapOf(50 << 30))
	}
	evs := rc.st.Recording().Events
	if len(evs) != 1 || !strings.Contains(evs[0].Text, "walks paused") || w.busy.Load() {
		t.Errorf("at 50 GiB: events %+v, a walk started %v", evs, w.busy.Load())
	}
	w.measured(512<<20, 300*time.Millisecond) // a small heap's noise: not learnt
	if w.perGiB != 0 {
		t.Errorf("a 512 MiB walk's stop was learnt: %s per GiB", w.perGiB)
	}
	w.measured(2<<30, 40*time.Millisecond)
	w.measured(2<<30, 400*time.Millisecond) // load: not taken over the least
	if w.perGiB != 20*time.Millisecond {
		t.Errorf("stop per GiB %s, want the least measured, 20ms", w.perGiB)
	}
	before := time.Now()
	rc.walked(&report.MallocLevel{Stop: 50 * time.Millisecond, Cpu: 2 * time.Second}, nil)
	if gap := w.next.Sub(before); gap < 100*time.Second || gap > 101*time.Second {
		t.Errorf("after a walk of 50 ms stop and 2 s of CPU the next is %s later, want 100 s (2 s at 2%% of a CPU)", gap)
	}
	if len(rc.posted) != 1 || !strings.Contains(rc.posted[0].Text, "stretched") || w.take() == nil {
		t.Errorf("the stretch is not said, or the walk not kept: %+v", rc.posted)
	}
	rc.walked(&report.MallocLevel{Stop: 50 * time.Millisecond, Cpu: 2 * time.Second}, nil)
	if len(rc.posted) != 1 {
		t.Errorf("the same stretch said again: %+v", rc.posted)
	}
	rc.walked(nil, &live.ImageUnavailableError{Pid: 1, Reason: "no clone3"})
	if !w.off || !strings.Contains(rc.posted[len(rc.posted)-1].Text, "no more walks") {
		t.Errorf("an image that cannot be made does not end the walks: off %v, %+v", w.off, rc.posted)
	}
}
