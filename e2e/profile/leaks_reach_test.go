package profile

import (
	"encoding/json"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// At the window's end the heap is scanned: of what each site still holds,
// what nothing reachable points to is leaked. testdata/leakreach.c
// allocates 4 MiB at a site that keeps every pointer in a global and 4 MiB
// at one that drops every pointer; at one sample per 4 KiB every 64 KiB
// block is sampled (but for odds of e^-16 each).
func TestLeaksSplitsLeakedFromHeld(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "leakreach.c"))
	for _, scan := range []bool{true, false} {
		args := []string{"--rate", "4K", "--json"}
		if !scan {
			args = append(args, "--no-scan")
		}
		out := profileWindow(t, tg.Pid, func() {
			if a := tg.Send("go"); a != "ok" {
				t.Fatalf("go: %q", a)
			}
		}, args...)
		testutil.ValidateJSON(t, "leaks", []byte(out))
		var doc struct {
			LeakedSpace *uint64 `json:"leaked_space"`
			Sites       []struct {
				InuseSpace  uint64  `json:"inuse_space"`
				LeakedSpace *uint64 `json:"leaked_space"`
				AllocatedAt struct {
					Function string `json:"function"`
				} `json:"allocated_at"`
			} `json:"sites"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !scan {
			if doc.LeakedSpace != nil {
				t.Errorf("--no-scan: leaked_space %d, want it absent", *doc.LeakedSpace)
			}
			continue
		}
		if doc.LeakedSpace == nil {
			t.Fatalf("no leaked_space after a scan:\n%s", out)
		}
		seen := map[string]bool{}
		for _, s := range doc.Sites {
			fn := s.AllocatedAt.Function
			if fn != "keep_site" && fn != "lose_site" {
				continue
			}
			seen[fn] = true
			if s.InuseSpace < 3<<20 || s.LeakedSpace == nil {
				t.Errorf("%s: %d bytes held, leaked %v; want about 4 MiB held", fn, s.InuseSpace, s.LeakedSpace)
				continue
			}
			leaked := *s.LeakedSpace
			switch {
			case fn == "keep_site" && leaked > s.InuseSpace/20:
				t.Errorf("keep_site: %d of %d bytes held called leaked; every block is in a global array", leaked, s.InuseSpace)
			case fn == "lose_site" && leaked < s.InuseSpace*9/10:
				t.Errorf("lose_site: only %d of %d bytes held called leaked; nothing points to any block", leaked, s.InuseSpace)
			}
		}
		if !seen["keep_site"] || !seen["lose_site"] {
			t.Errorf("sites found: %v\n%s", seen, out)
		}
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}
