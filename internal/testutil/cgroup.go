package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MemoryCgroup makes a memory cgroup for the test (cgroup v2 where the
// memory controller is there, else v1's memory hierarchy), removed when the
// test ends with every process in it moved back to its parent. It skips the
// test where neither can be made (not root, no memory controller).
func MemoryCgroup(t testing.TB) *Cgroup { return controllerCgroup(t, "memory") }

// PidsCgroup is MemoryCgroup for the pids controller.
func PidsCgroup(t testing.TB) *Cgroup { return controllerCgroup(t, "pids") }

func controllerCgroup(t testing.TB, ctrl string) *Cgroup {
	t.Helper()
	name := fmt.Sprintf("arenactl-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		ctrls, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil || !strings.Contains(string(ctrls), ctrl) {
			continue
		}
		os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+"+ctrl), 0)
		cg := &Cgroup{Dir: filepath.Join(root, name), Parent: root, v2: true}
		if err := os.Mkdir(cg.Dir, 0o755); err == nil {
			t.Cleanup(func() { cg.remove() })
			return cg
		}
	}
	root := "/sys/fs/cgroup/" + ctrl
	cg := &Cgroup{Dir: filepath.Join(root, name), Parent: root}
	if err := os.Mkdir(cg.Dir, 0o755); err != nil {
		t.Skipf("no %s cgroup can be made here: %v", ctrl, err)
	}
	t.Cleanup(func() { cg.remove() })
	return cg
}

// Set writes a control file of the cgroup.
func (cg *Cgroup) Set(t testing.TB, file, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg.Dir, file), []byte(value), 0); err != nil {
		t.Fatalf("%s/%s = %s: %v", cg.Dir, file, value, err)
	}
}

// Cgroup is a test's cgroup.
type Cgroup struct {
	Dir, Parent string
	v2          bool
}

// Add moves pid into the cgroup.
func (cg *Cgroup) Add(t testing.TB, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg.Dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
		t.Fatalf("moving %d into %s: %v", pid, cg.Dir, err)
	}
}

// Usage is the memory charged to the cgroup now.
func (cg *Cgroup) Usage(t testing.TB) uint64 {
	t.Helper()
	name := "memory.usage_in_bytes"
	if cg.v2 {
		name = "memory.current"
	}
	b, err := os.ReadFile(filepath.Join(cg.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	fmt.Sscan(strings.TrimSpace(string(b)), &n)
	return n
}

// Limit sets the cgroup's memory limit.
func (cg *Cgroup) Limit(t testing.TB, bytes uint64) {
	t.Helper()
	name := "memory.limit_in_bytes"
	if cg.v2 {
		name = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(cg.Dir, name), []byte(fmt.Sprint(bytes)), 0); err != nil {
		t.Fatalf("limiting %s: %v", cg.Dir, err)
	}
}

func (cg *Cgroup) remove() {
	b, _ := os.ReadFile(filepath.Join(cg.Dir, "cgroup.procs"))
	for _, p := range strings.Fields(string(b)) {
		os.WriteFile(filepath.Join(cg.Parent, "cgroup.procs"), []byte(p), 0)
	}
	for i := 0; i < 50; i++ {
		if err := os.Remove(cg.Dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
