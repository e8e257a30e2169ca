// The calls these tests make are injected on x86_64 only (call_arm64.go).

//go:build amd64

package ptrace

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The routine's own checks, below live.Image's: a mapping whose bounds are
// not the span given (as when the program moved them after arenactl
// looked) is left in, and so is one the program marked MADV_DONTFORK
// itself, which stays marked; an exact, unmarked one is left out. The
// mappings are the same after each clone.
func TestCloneImageLeavesOutOnlyWhatItMarked(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "pool.c", "-O2"), "128")
	mapsText := func() string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
		if err != nil {
			t.Fatal(err)
		}
		// The main thread's stack may grow under the frame a call
		// pushes; that is any call's, not the routine's.
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasSuffix(l, "[stack]") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	var pool, own maps.Range
	for _, l := range strings.Split(mapsText(), "\n") {
		var lo, hi uint64
		var perms string
		if n, _ := fmt.Sscanf(l, "%x-%x %s", &lo, &hi, &perms); n == 3 && perms == "rw-p" {
			switch hi - lo {
			case 128 << 20:
				pool = maps.Range{Start: lo, End: hi}
			case 64 << 20:
				own = maps.Range{Start: lo, End: hi}
			}
		}
	}
	if pool.End == 0 || own.End == 0 {
		t.Fatalf("no pool or own region in:\n%s", mapsText())
	}
	p, err := Open(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tids, err := Tasks(tg.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		give []maps.Range
		want []maps.Range
	}{
		{"bounds moved", []maps.Range{{Start: pool.Start, End: pool.End - 4096}, {Start: pool.Start + 4096, End: pool.End}}, nil},
		{"marked by the program", []maps.Range{own}, nil},
		{"exact", []maps.Range{own, pool}, []maps.Range{pool}},
	} {
		before := mapsText()
		var ths []*Thread
		for _, tid := range tids {
			th, err := p.Seize(tid)
			if err != nil {
				t.Fatal(err)
			}
			if err := th.Stop(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			ths = append(ths, th)
		}
		pid, left, err := ths[0].CloneImage(generous, c.give)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		for _, th := range ths {
			if err := th.Detach(); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(left) != fmt.Sprint(c.want) {
			t.Errorf("%s: left out %v, want %v", c.name, left, c.want)
		}
		if after := mapsText(); after != before {
			t.Errorf("%s: the mappings changed:\n%s\n---\n%s", c.name, before, after)
		}
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("%s: the target says %q", c.name, a)
		}
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}
