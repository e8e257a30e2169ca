package procfs

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A held Proc reads the process it was opened on and no other: once that
// process has exited and its pid is given to a new one, every read
// through it fails as a process gone (ErrNoProcess), while /proc/PID by
// number reads the newcomer. The pid is reused on purpose through
// ns_last_pid (root; other processes forking meanwhile may take it, so a
// few tries).
func TestProcNeverReadsAReusedPid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reusing a pid on purpose writes /proc/sys/kernel/ns_last_pid (root)")
	}
	for try := 0; try < 20; try++ {
		a := exec.Command("sleep", "60")
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		pid := a.Process.Pid
		p, err := OpenProc(pid)
		if err != nil {
			a.Process.Kill()
			a.Wait()
			t.Fatal(err)
		}
		if tids, err := p.Tasks(); err != nil || len(tids) != 1 || tids[0] != pid {
			t.Fatalf("the live process's tasks: %v %v", tids, err)
		}
		a.Process.Kill()
		a.Wait()
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			p.Close()
			t.Skipf("cannot choose the next pid: %v", err)
		}
		b := exec.Command("sleep", "60")
		if err := b.Start(); err != nil {
			p.Close()
			t.Fatal(err)
		}
		reused := b.Process.Pid == pid
		if reused {
			if _, err := ByPid(pid).ReadStat(); err != nil {
				t.Errorf("the newcomer by its pid: %v", err)
			}
			if st, err := p.ReadStat(); !errors.Is(err, ErrNoProcess) {
				t.Errorf("the held directory read the newcomer's stat: %+v, %v", st, err)
			}
			if _, err := p.Tasks(); !errors.Is(err, ErrNoProcess) {
				t.Errorf("the held directory listed the newcomer's tasks: %v", err)
			}
			if _, err := p.ReadSyscall(pid); !errors.Is(err, ErrNoProcess) {
				t.Errorf("the held directory read the newcomer's thread: %v", err)
			}
			if _, err := p.OpenPagemap(); err == nil {
				t.Error("the held directory opened the newcomer's pagemap")
			}
		}
		b.Process.Kill()
		b.Wait()
		p.Close()
		if reused {
			if p.Path("stat") == ByPid(pid).Path("stat") {
				t.Error("a closed Proc names the pid's directory")
			}
			return
		}
	}
	t.Skip("another process took the pid each time")
}

// A file read through a held directory is named to the user as /proc/PID's.
func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"/proc/self/fd/7/task/12/syscall": "/proc/42/task/12/syscall",
		"/proc/self/fd/7":                 "/proc/42",
		"/proc/42/maps":                   "/proc/42/maps",
	} {
		if got := Shown(42, in); got != want {
			t.Errorf("Shown(42, %q) = %q, want %q", in, got, want)
		}
	}
	err := Error(42, &os.PathError{Op: "open", Path: "/proc/self/fd/7/smaps", Err: os.ErrPermission})
	if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "/proc/42/smaps") || strings.Contains(err.Error(), "self") {
		t.Errorf("a refused read through a held directory: %v", err)
	}
}
