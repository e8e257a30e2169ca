package budget_test

import (
	"errors"
	"os"
	"testing"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{{"4096", 4096}, {"512M", 512 << 20}, {"2G", 2 << 30}, {"3GiB", 3 << 30}, {"1T", 1 << 40}, {"64K", 64 << 10}} {
		if got, err := budget.ParseSize(c.in); err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "M", "-1G", "1.5G", "12X", "0x10", " 1G", "99999999999T", "1 G"} {
		if v, err := budget.ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, v)
		}
	}
}

// The estimate is the bound docs/scale.md promises: 64 MiB and a bit per
// 16 bytes of heap for a scan, half that per byte for a walk.
func TestNeed(t *testing.T) {
	const heap = 52 << 30
	if got, want := budget.Need(budget.Scan, heap), uint64(64<<20+heap/128); got != want {
		t.Errorf("Need(scan, 52 GiB) = %d, want %d", got, want)
	}
	if got, want := budget.Need(budget.Walk, heap), uint64(64<<20+heap/256); got != want {
		t.Errorf("Need(walk, 52 GiB) = %d, want %d", got, want)
	}
}

// The heap is read from the maps of a live process, with nothing done to
// it: at least what the program allocated, and not its other memory many
// times over.
func TestHeapOfPid(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "bigcheck.c"), "96", "2", "still")
	heap, err := budget.HeapOfPid(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if heap < 96<<20 || heap > 512<<20 {
		t.Errorf("heap of a process that allocated 96 MiB: %d bytes", heap)
	}
	if testutil.Traced(tg.Pid) {
		t.Error("reading the maps traced the process")
	}
	if _, err := budget.HeapOfPid(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// A limit below the estimate refuses with an error of kind ErrNoMemory
// that says what set the limit; one above it lets the work go ahead.
func TestCheck(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "bigcheck.c"), "32", "1", "still")
	err := budget.Check(tg.Pid, budget.Scan, 1<<20, 1)
	var be *budget.Error
	if !errors.Is(err, errkind.ErrNoMemory) || !errors.As(err, &be) || be.By != "--max-memory" || be.Need < budget.Base {
		t.Fatalf("Check with 1 MiB: %v", err)
	}
	if err := budget.Check(tg.Pid, budget.Scan, 1<<40, 1); err != nil {
		t.Fatalf("Check with 1 TiB: %v", err)
	}
	// A process that is gone is left to the command to report.
	if err := budget.Check(1<<30, budget.Scan, 1<<20, 1); err != nil {
		t.Errorf("Check of no process: %v", err)
	}
}
