package profile

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The first walk comes one --walk-every into the recording, not at its
// first interval: the recording's start already holds arenactl's reads of
// the tables and the sampler's placing (docs/commands/record.md, Cost).
// The walks still come at the cadence after it.
func TestRecordFirstWalkAfterOneCadence(t *testing.T) {
	bin := testutil.BuildC(t, "idle.c", "-O2", "-g")
	tg := testutil.Start(t, bin)
	out := filepath.Join(t.TempDir(), "rec")
	const every = 1500 * time.Millisecond
	_, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms", "--duration", "4s",
		"--walk-every", every.String(), "--walk-budget", "1,1")
	if code, said := wait(); code != 0 {
		t.Fatalf("arenactl record: exit %d\n%s", code, said)
	}
	rec, _, err := record.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	walks := 0
	for _, iv := range rec.Intervals {
		if iv.Malloc != nil && !iv.Malloc.At.Equal(first) {
			if first.IsZero() {
				first = iv.Malloc.At
			}
			walks++
		}
	}
	if walks == 0 {
		t.Fatalf("no walk in a recording of 4 s at --walk-every %s", every)
	}
	// The walker's clock starts before the window opens (Meta.Start):
	// the bound allows for the sampler's placing in between.
	if after := first.Sub(rec.Meta.Start); after < every-time.Second {
		t.Errorf("the first walk came %s into the recording, want about %s (one --walk-every)", after, every)
	}
	t.Logf("first walk %s into the recording, %d walks", first.Sub(rec.Meta.Start).Round(time.Millisecond), walks)
	tg.Send("quit")
}
