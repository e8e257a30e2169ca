package walk

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A default snapshot (from a copy-on-write image) records the process's
// smaps counters, not the image's: the image shares the process's
// anonymous pages (its Private_Dirty is near 0 and Pss half of RSS) and
// has not faulted in its file pages. info FILE then shows what the process
// had, as a --freeze walk snapshot always did (issue 22, item 1).
func TestSnapshotRecordsTheProcessCounters(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "4")
	before, err := maps.ReadRollup(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.core")
	snapshot(t, tg.Pid, path)
	after, err := maps.ReadRollup(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	snap := infoJSONOf(t, path)
	got := snap.Maps.Process
	near := func(what string, got, lo, hi uint64) {
		t.Helper()
		if got < lo*9/10 || got > hi*11/10 {
			t.Errorf("the snapshot records %s %d; the process had %d before and %d after", what, got, lo, hi)
		}
	}
	near("Private_Dirty", got.PrivateDirty, min(before.PrivateDirty, after.PrivateDirty), max(before.PrivateDirty, after.PrivateDirty))
	near("RSS", got.Rss, min(before.Rss, after.Rss), max(before.Rss, after.Rss))
	near("Anonymous", got.Anonymous, min(before.Anonymous, after.Anonymous), max(before.Anonymous, after.Anonymous))
	if got.Pss < got.Rss*3/4 {
		t.Errorf("PSS %d of RSS %d: the image's share was recorded", got.Pss, got.Rss)
	}
	if out := mustRun(t, "info", path).Stdout; !strings.Contains(out, fmt.Sprintf("memory map: RSS %s,", humanOf(got.Rss))) {
		t.Errorf("info %s does not print the recorded RSS:\n%s", path, out)
	}
	mustQuit(t, tg)
}

func humanOf(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// A kernel core records no RSS: its counters are unknown, said so in the
// table and null in the JSON, never 0 B; a snapshot records them, and
// maps FILE shows them without saying they are missing (issue 22, item 2).
func TestCoreCountersUnknownNotZero(t *testing.T) {
	for _, fx := range testutil.CoreFixtures(t) {
		if fx.Version != "2.36" {
			continue
		}
		t.Run(fx.Kind, func(t *testing.T) {
			info := mustRun(t, "info", "--no-libc-file", fx.Core).Stdout
			mapsOut := mustRun(t, "maps", "--all", fx.Core).Stdout
			var doc struct {
				Maps struct {
					Process map[string]*uint64 `json:"process"`
					Classes []map[string]any   `json:"classes"`
				} `json:"maps"`
			}
			if err := json.Unmarshal([]byte(mustRun(t, "info", "--json", "--no-libc-file", fx.Core).Stdout), &doc); err != nil {
				t.Fatal(err)
			}
			for _, out := range []string{info, mapsOut} {
				if strings.Contains(out, "RSS 0 B") || strings.Contains(out, "records no RSS") && fx.Kind == "snapshot" {
					t.Errorf("%s says what it does not know:\n%s", fx.Kind, out)
				}
			}
			switch fx.Kind {
			case "kernel":
				for _, out := range []string{info, mapsOut} {
					if !strings.Contains(out, "RSS, Private_Dirty and Swap unknown") || strings.Contains(out, "private dirty") {
						t.Errorf("a kernel core's counters are not said to be unknown:\n%s", out)
					}
				}
				if p := doc.Maps.Process; p["rss"] != nil || p["private_dirty"] != nil || doc.Maps.Classes[0]["rss"] != nil {
					t.Errorf("a kernel core's JSON gives counters: %v, %v", p, doc.Maps.Classes[0])
				}
			case "snapshot":
				if p := doc.Maps.Process; p["rss"] == nil || *p["rss"] == 0 {
					t.Errorf("a snapshot's JSON gives no RSS: %v", p)
				}
			}
		})
	}
}

// diff of kernel cores' documents says their counters are unknown, not
// "RSS 0 B → 0 B" (issue 22, item 2).
func TestDiffOfKernelCoresSaysUnknown(t *testing.T) {
	a := filepath.Join("testdata", "golden", "arenas-2.36-kernel.json")
	b := filepath.Join("testdata", "golden", "arenas-2.41-kernel.json")
	out := mustRun(t, "diff", a, b).Stdout
	if !strings.Contains(out, "process: RSS, Private_Dirty and Swap unknown") || strings.Contains(out, "0 B → 0 B") || strings.Contains(out, "private dirty") {
		t.Errorf("diff of kernel cores:\n%s", out)
	}
}
