package inject

import (
	"github.com/arenactl/arenactl/internal/testutil"

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
	freed := trimmableFreed(t, tg)
	before := vmRSS(t, tg.Pid)
	rep := trimJSONOf(t, mustRun(t, "trim", "--json", fmt.Sprint(tg.Pid)))
	after := vmRSS(t, tg.Pid)
	drop := before - after
	if drop < freed*8/10 {
		t.Errorf("RSS dropped by %d bytes, want at least 80%% of the %d freed", drop, freed)
	}
	if rep.ReleasedBytes == nil || rep.Result == nil || rep.Injection == nil || rep.DryRun {
		t.Fatalf("trim --json: released %v, result %v, injection %v, dry run %v", rep.ReleasedBytes, rep.Result, rep.Injection, rep.DryRun)
	}
	if diff := *rep.ReleasedBytes - drop; diff > drop/20 || -diff > drop/20 {
		t.Errorf("arenactl reports %d bytes released, RSS dropped by %d: more than 5%% apart", *rep.ReleasedBytes, drop)
	}
	if *rep.Result != 1 {
		t.Errorf("malloc_trim returned %d, want 1", *rep.Result)
	}
	// The free lists walked just before the call predicted the drop.
	if rep.PredictedBytes == nil || !within(int64(*rep.PredictedBytes), drop, 10) {
		t.Errorf("predicted %v bytes, RSS dropped by %d: more than 10%% apart", rep.PredictedBytes, drop)
	}
	if rep.Injection.PreflightWalks != 1 {
		t.Errorf("%d pre-flight walks, want 1", rep.Injection.PreflightWalks)
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
	// A second trim finds nothing more to give, and knew it.
	r := mustRun(t, "trim", fmt.Sprint(tg.Pid))
	for _, want := range []string{"malloc_trim(0) returned", "released: ", "predicted: "} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("trim table lacks %q:\n%s", want, r.Stdout)
		}
	}
	rep = trimJSONOf(t, mustRun(t, "trim", "--json", fmt.Sprint(tg.Pid)))
	if *rep.PredictedBytes > 64<<10 {
		t.Errorf("after a trim, a second one was predicted to release %d bytes", *rep.PredictedBytes)
	}
	mustQuit(t, tg)
}

// trim --dry-run predicts what the real trim then releases, and changes
// nothing itself; it reads a copy-on-write image by default, and predicts
// the same with every thread stopped for the walk (--freeze walk).
func TestTrimDryRunPredicts(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "trimmable.c"))
	freed := trimmableFreed(t, tg)
	pid := fmt.Sprint(tg.Pid)
	before := vmRSS(t, tg.Pid)
	dry := trimJSONOf(t, mustRun(t, "trim", "--dry-run", "--json", pid))
	if rss := vmRSS(t, tg.Pid); rss != before {
		t.Errorf("the dry run changed the target's RSS: %d -> %d", before, rss)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after the dry run: %s", a)
	}
	if !dry.DryRun || dry.Result != nil || dry.Injection != nil || dry.ReleasedBytes != nil || dry.PredictedBytes == nil || dry.Prediction == nil {
		t.Fatalf("dry run JSON: %+v", dry)
	}
	p := dry.Prediction
	if p.Torn || p.FrozenUs <= 0 || p.Hold != "image" || len(p.Arenas) != 2 || len(p.Damage) != 0 || p.PredictedBytes != *dry.PredictedBytes {
		t.Fatalf("prediction %+v", p)
	}
	walked := trimJSONOf(t, mustRun(t, "trim", "--dry-run", "--freeze", "walk", "--json", pid)).Prediction
	if walked.Hold != "walk" || walked.FrozenUs <= 0 || fmt.Sprint(walked.Arenas) != fmt.Sprint(p.Arenas) {
		t.Errorf("--freeze walk: %+v\nthe image's: %+v", walked, p)
	}
	var sum uint64
	for _, a := range p.Arenas {
		// main and the worker each freed their runs of 96 KiB blocks.
		if a.Chunks < 600 || a.PredictedBytes == 0 || a.PredictedBytes > a.TrimmableBytes || a.TopBytes != 0 && !a.Main {
			t.Errorf("arena %+v", a)
		}
		sum += a.PredictedBytes
	}
	if sum != p.PredictedBytes || !within(int64(sum), freed, 10) {
		t.Errorf("arenas predict %d bytes in all, prediction says %d, the target freed %d", sum, p.PredictedBytes, freed)
	}
	// A larger pad keeps more of the main heap's top.
	padded := trimJSONOf(t, mustRun(t, "trim", "--dry-run", "--json", "--pad", "100000", pid))
	if m := padded.Prediction.Arenas[0]; !m.Main || m.TopBytes > p.Arenas[0].TopBytes || padded.Pad != 100000 {
		t.Errorf("with --pad 100000 the main arena gives %d bytes of top, without %d", m.TopBytes, p.Arenas[0].TopBytes)
	}
	table := mustRun(t, "trim", "--dry-run", pid)
	for _, want := range []string{"would release", "dry run: no code of the program's ran; the free lists were read from a copy-on-write image", "0 main", "2 arenas"} {
		if !strings.Contains(table.Stdout, want) {
			t.Errorf("dry run table lacks %q:\n%s", want, table.Stdout)
		}
	}

	expectRefusal(t, run(t, "trim", "--dry-run", "--thread", pid, pid), exitUsage, "--thread does not go with --dry-run")
	expectRefusal(t, run(t, "trim", "--dry-run", "--freeze", "none", pid), exitUsage, "never torn")
	expectRefusal(t, run(t, "trim", "--freeze", "walk", pid), exitUsage, "--freeze goes with --dry-run")

	rep := trimJSONOf(t, mustRun(t, "trim", "--json", pid))
	drop := before - vmRSS(t, tg.Pid)
	if !within(int64(*dry.PredictedBytes), drop, 10) {
		t.Errorf("the dry run predicted %d bytes, the trim released %d of RSS: more than 10%% apart", *dry.PredictedBytes, drop)
	}
	t.Logf("predicted %d, released %d (arenactl measured %d)", *dry.PredictedBytes, drop, *rep.ReleasedBytes)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after trim: %s", a)
	}
	mustQuit(t, tg)
}

func trimmableFreed(t *testing.T, tg *testutil.Target) int64 {
	t.Helper()
	freed, err := strconv.ParseInt(strings.Fields(tg.Ready())[1], 10, 64)
	if err != nil || freed < 150<<20 {
		t.Fatalf("target freed %d bytes (%v), want >= 150 MiB", freed, err)
	}
	return freed
}

func trimJSONOf(t *testing.T, r result) jsonTrim {
	t.Helper()
	var rep jsonTrim
	if err := decodeDoc([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("trim --json: %v\n%s", err, r.Stdout)
	}
	return rep
}
