package walk

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// findingIDs runs info on pid (read-only unless told otherwise) and returns
// the ids of its findings.
func findingIDs(t *testing.T, pid int, args ...string) []string {
	t.Helper()
	r := mustRun(t, append(append([]string{"info", "--json"}, args...), fmt.Sprint(pid))...)
	var rep jsonInfo
	if err := decodeDoc([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	var ids []string
	for _, f := range rep.Findings {
		if f.Fix == "" || len(f.Evidence) == 0 {
			t.Errorf("finding %s has no fix or no evidence", f.ID)
		}
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

func has(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Each scenario reproduces a real cause of high RSS. It must raise its
// finding, none outside the ones it may also cause, and not the finding
// once the fix is applied.
func TestScenarios(t *testing.T) {
	bin := testutil.BuildC(t, "scenario.c")
	start := func(t *testing.T, env []string, args ...string) *testutil.Target {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		return testutil.StartCmd(t, cmd)
	}
	cases := []struct {
		name    string
		args    []string
		want    string
		allowed []string // other findings the scenario may honestly raise
		fixEnv  []string // the fix, when it is a setting
		fixArgs []string // or the scenario's healthy variant
		fixTrim bool     // or running arenactl trim
	}{
		{name: "arena bloat", args: []string{"arenas"}, want: "arena-bloat", allowed: []string{"fragmentation", "untrimmable-thread-heaps"},
			fixEnv: []string{"MALLOC_ARENA_MAX=2"}},
		{name: "fragmentation", args: []string{"fragment"}, want: "fragmentation", fixTrim: true},
		{name: "raised mmap threshold", args: []string{"threshold"}, want: "mmap-threshold-raised", allowed: []string{"fragmentation"},
			fixEnv: []string{"MALLOC_MMAP_THRESHOLD_=131072"}},
		{name: "thread stacks", args: []string{"stacks", "48"}, want: "thread-stacks", fixArgs: []string{"stacks", "2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := start(t, nil, c.args...)
			ids := findingIDs(t, tg.Pid, "--read-only")
			if !has(ids, c.want) {
				t.Fatalf("findings %v lack %s", ids, c.want)
			}
			for _, id := range ids {
				if id != c.want && !has(c.allowed, id) {
					t.Errorf("unexpected finding %s (all: %v)", id, ids)
				}
			}
			// The injected info sees what malloc_info shows; it may know
			// less, but must not contradict the read-only diagnosis.
			for _, id := range findingIDs(t, tg.Pid) {
				if !has(ids, id) {
					t.Errorf("injected info raised %s, which the read-only walk did not", id)
				}
			}
			switch {
			case c.fixTrim:
				mustRun(t, "trim", fmt.Sprint(tg.Pid))
				if ids := findingIDs(t, tg.Pid, "--read-only"); has(ids, c.want) {
					t.Errorf("after trim: %v", ids)
				}
			case c.fixEnv != nil || c.fixArgs != nil:
				args := c.args
				if c.fixArgs != nil {
					args = c.fixArgs
				}
				fixed := start(t, c.fixEnv, args...)
				if ids := findingIDs(t, fixed.Pid, "--read-only"); has(ids, c.want) {
					t.Errorf("with the fix (%s %s): %v", strings.Join(c.fixEnv, " "), strings.Join(args, " "), ids)
				}
				fixed.Quit()
			}
			tg.Quit()
		})
	}
}
