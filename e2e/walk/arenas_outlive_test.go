package walk

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// Threads that ran at once and ended leave their arenas behind, all memory
// in use: an informational finding, from the injected info, the read-only
// walk and their JSON alike, with nothing to save; one arena per live
// thread raises nothing.
func TestArenasOutliveThreads(t *testing.T) {
	type glibcUnder struct {
		name  string
		start func(t *testing.T, args ...string) *testutil.Target
	}
	runs := []glibcUnder{{"system", func(t *testing.T, args ...string) *testutil.Target {
		return testutil.Start(t, testutil.BuildC(t, "spentarenas.c"), args...)
	}}}
	for _, g := range testutil.GlibcTrees(t) {
		if g.Loader == "" {
			continue
		}
		runs = append(runs, glibcUnder{g.Version, func(t *testing.T, args ...string) *testutil.Target {
			return testutil.StartCmd(t, g.Command(testutil.BuildC(t, "spentarenas.c", testutil.GlibcSysroot(t)...), args...))
		}})
	}
	for _, g := range runs {
		t.Run(g.name, func(t *testing.T) { arenasOutliveThreads(t, g.start) })
	}
}

func arenasOutliveThreads(t *testing.T, start func(t *testing.T, args ...string) *testutil.Target) {
	spent := start(t, "exit")
	pid := fmt.Sprint(spent.Pid)
	for _, mode := range [][]string{nil, {"--read-only"}} {
		r := mustRun(t, append(append([]string{"info", "--json"}, mode...), pid)...)
		var rep jsonInfo
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("%v: %v\n%s", mode, err, r.Stdout)
		}
		var found *jsonFinding
		for i, f := range rep.Findings {
			if f.ID == "arenas-outlive-threads" {
				found = &rep.Findings[i]
			} else {
				t.Errorf("%v: unexpected finding %s: %+v", mode, f.ID, f)
			}
		}
		if found == nil {
			t.Fatalf("%v: no arenas-outlive-threads finding in %+v", mode, rep.Findings)
		}
		ev := strings.Join(found.Evidence, "\n")
		if found.Severity != "info" || found.SavingsBytes != 0 || !strings.Contains(found.Fix, "MALLOC_ARENA_MAX=2") ||
			!strings.Contains(ev, "for 1 live thread(s)") || !strings.Contains(ev, "of address space") ||
			!strings.Contains(ev, "glibc "+rep.Libc.Version+" allows up to") {
			t.Errorf("%v: %+v", mode, *found)
		}

		text := mustRun(t, append(append([]string{"info"}, mode...), pid)...).Stdout
		if !strings.Contains(text, "findings (1):") || !strings.Contains(text, "[info] more malloc arenas than live threads") ||
			strings.Contains(text, "could save") {
			t.Errorf("%v: text output:\n%s", mode, text)
		}
	}
	if last, code := spent.Quit(); last != "bye" || code != 0 {
		t.Errorf("target said %q, exit %d", last, code)
	}

	busy := start(t, "stay")
	for _, mode := range [][]string{nil, {"--read-only"}} {
		if ids := findingIDs(t, busy.Pid, mode...); len(ids) != 0 {
			t.Errorf("%v: one arena per live thread raised %v", mode, ids)
		}
	}
	if last, code := busy.Quit(); last != "bye" || code != 0 {
		t.Errorf("target said %q, exit %d", last, code)
	}
}
