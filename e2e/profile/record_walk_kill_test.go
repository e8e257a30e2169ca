package profile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/record"
	"github.com/arenactl/arenactl/internal/testutil"
)

// imagesOf are the live processes running pid's executable besides pid:
// the copy-on-write images a walk makes of it.
func imagesOf(t *testing.T, pid int) []int {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if x, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err != nil || x != exe {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil {
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X' {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestRecordKilledWhileWalking: arenactl record walking the heaps as
// often as it can (--walk-every 10ms, the budget lifted), killed with
// SIGKILL at three moments, leaves each time a recording that reads, and
// in the end no image of the process and a process that runs on and
// exits as it would (the walks' images end by themselves within their
// lease, as info --read-only's do).
func TestRecordKilledWhileWalking(t *testing.T) {
	bin := testutil.BuildC(t, "record_phases.c", "-O2", "-g")
	dir := t.TempDir()
	cmd := exec.Command(bin, filepath.Join(dir, "truth"), "hold")
	cmd.Env = append(os.Environ(), "PLATEAU_MS=100")
	tg := testutil.StartCmd(t, cmd)
	if a := tg.Send("go"); a != "phases done" {
		t.Fatalf("go: %q", a)
	}
	walks := 0
	for k := range 3 {
		out := filepath.Join(dir, fmt.Sprint("rec", k))
		rc, wait := startRecord(t, fmt.Sprint(tg.Pid), "-o", out, "--interval", "100ms", "--walk-every", "10ms", "--walk-budget", "1,1")
		time.Sleep(time.Duration(700+230*k) * time.Millisecond)
		rc.Process.Kill()
		if code, said := wait(); code != -int(syscall.SIGKILL) {
			t.Fatalf("arenactl record: exit %d, want killed\n%s", code, said)
		}
		rec, _, err := record.Read(out)
		if err != nil {
			t.Fatalf("the recording killed at %d: %v", k, err)
		}
		for _, iv := range rec.Intervals {
			if iv.Malloc != nil {
				walks++
			}
		}
	}
	if walks == 0 {
		t.Errorf("no walk in the three recordings: the kills did not land among walks")
	}
	testutil.WaitUntil(t, fmt.Sprintf("no image of process %d to run", tg.Pid), func() bool { return len(imagesOf(t, tg.Pid)) == 0 })
	if last, code := tg.Quit(); last != "bye" || code != 0 {
		t.Errorf("the target after three killed recordings: %q, exit %d", last, code)
	}
}
