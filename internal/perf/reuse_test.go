package perf_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/perf"
	"github.com/arenactl/arenactl/internal/procfs"
)

// Events opened through a held /proc directory are never opened on a
// later process given the pid: once the process held has exited, OpenProc
// finds no thread of it, while Open by the pid would watch the newcomer.
// The pid is reused on purpose through ns_last_pid (root; other processes
// forking meanwhile may take it, so a few tries).
func TestOpenProcNeverWatchesAReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reusing a pid on purpose writes /proc/sys/kernel/ns_last_pid (root)")
	}
	events := []perf.Event{{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS, Period: 1}}
	for try := 0; try < 20; try++ {
		a := exec.Command("sleep", "60")
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		pid := a.Process.Pid
		held, err := procfs.OpenProc(pid)
		if err != nil {
			t.Fatal(err)
		}
		a.Process.Kill()
		a.Wait()
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			held.Close()
			t.Skipf("cannot choose the next pid: %v", err)
		}
		b := exec.Command("sleep", "60")
		if err := b.Start(); err != nil {
			held.Close()
			t.Fatal(err)
		}
		reused := b.Process.Pid == pid
		if reused {
			if s, err := perf.Open(pid, events, perf.Options{RingPages: 1}); err != nil {
				t.Errorf("by its pid, the newcomer: %v", err)
			} else {
				s.Close()
			}
			s, err := perf.OpenProc(held, events, perf.Options{RingPages: 1})
			if err == nil {
				s.Close()
				t.Error("events were opened on the newcomer through the held directory")
			} else if !errors.Is(err, errkind.ErrNoProcess) {
				t.Errorf("got %v, want errkind.ErrNoProcess", err)
			}
		}
		b.Process.Kill()
		b.Wait()
		held.Close()
		if reused {
			return
		}
	}
	t.Skip("another process took the pid each time")
}
