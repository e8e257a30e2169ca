package main

import (
	"arenactl/internal/testutil"

	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vmRSS reads the kernel's own resident-set counter, independently of the
// smaps_rollup arenactl uses.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func TestTrimReleasesFreedRuns(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "trimmable.c"))
	freed, err := strconv.ParseInt(strings.Fields(tg.Ready())[1], 10, 64)
	if err != nil || freed < 150<<20 {
		t.Fatalf("target freed %d bytes (%v), want >= 150 MiB", freed, err)
	}
	before := vmRSS(t, tg.Pid)
	r := mustRun(t, "trim", "--json", fmt.Sprint(tg.Pid))
	after := vmRSS(t, tg.Pid)
	var rep jsonTrim
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("trim --json: %v\n%s", err, r.stdout)
	}
	drop := before - after
	if drop < freed*8/10 {
		t.Errorf("RSS dropped by %d bytes, want at least 80%% of the %d freed", drop, freed)
	}
	if diff := rep.ReleasedBytes - drop; diff > drop/20 || -diff > drop/20 {
		t.Errorf("arenactl reports %d bytes released, RSS dropped by %d: more than 5%% apart", rep.ReleasedBytes, drop)
	}
	if rep.Result != 1 {
		t.Errorf("malloc_trim returned %d, want 1", rep.Result)
	}
	var heapsReleased int64
	for _, c := range rep.Classes {
		if c.Class == "main-heap" || c.Class == "arena-heap" {
			heapsReleased += int64(c.RssBefore) - int64(c.RssAfter)
		}
	}
	if heapsReleased < freed*8/10 {
		t.Errorf("heap classes released %d bytes, want most of %d: %+v", heapsReleased, freed, rep.Classes)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after trim: %s", a)
	}
	// A second trim finds nothing more to give.
	r = mustRun(t, "trim", fmt.Sprint(tg.Pid))
	if !strings.Contains(r.stdout, "malloc_trim(0) returned") {
		t.Errorf("trim table lacks the call line:\n%s", r.stdout)
	}
	mustQuit(t, tg)
}
