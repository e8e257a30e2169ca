package record_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/report"
)

// TestStoreKeepsLatestWalk: walks are rarer than intervals, so an
// interval merged from several keeps the latest walk among them, not
// none when its last finest interval had none; the file reads back the
// same walks.
func TestStoreKeepsLatestWalk(t *testing.T) {
	every := time.Second
	meta := report.RecordingMeta{Pid: 1, Start: t0, Interval: every, MaxStacks: 5, Tiers: []report.RecordingTier{
		{Step: every, Span: 10 * every}, {Step: 5 * every, MaxIntervals: 1000}}}
	s := record.NewStore(meta)
	path := filepath.Join(t.TempDir(), "rec")
	w, err := record.Create(path, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 60
	for i := range n {
		iv := interval(i, every, 0)
		if i%7 == 3 { // a walk every 7 intervals
			iv.Malloc = &report.MallocLevel{At: iv.End().Add(-time.Millisecond), Held: uint64(i), Trimmable: uint64(2 * i),
				Arenas: []report.ArenaMalloc{{Index: 0, InUse: uint64(i)}}}
		}
		s.Add(iv)
		if err := w.Interval(iv, s); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, rec *report.Recording) {
		t.Helper()
		walked := 0
		for _, iv := range rec.Intervals {
			// The latest walk that ended in the interval's span.
			want := -1
			for i := range n {
				if i%7 == 3 && !t0.Add(time.Duration(i+1)*every).Before(iv.Start.Add(time.Nanosecond)) && !t0.Add(time.Duration(i+1)*every).After(iv.End()) {
					want = i
				}
			}
			switch {
			case want < 0 && iv.Malloc != nil:
				t.Errorf("%s: interval %s+%s has a walk (held %d) though none was made in it", what, iv.Start, iv.Duration, iv.Malloc.Held)
			case want >= 0 && (iv.Malloc == nil || iv.Malloc.Held != uint64(want) || iv.Malloc.Trimmable != uint64(2*want)):
				t.Errorf("%s: interval %s+%s (%d merged): walk %+v, want the one of interval %d", what, iv.Start, iv.Duration, iv.Merged, iv.Malloc, want)
			}
			if iv.Malloc != nil {
				walked++
			}
		}
		if walked == 0 {
			t.Errorf("%s: no walk kept", what)
		}
	}
	check("store", s.Recording())
	rec, _, err := record.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	check("file", rec)
}
