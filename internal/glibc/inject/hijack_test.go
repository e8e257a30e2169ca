package inject

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// procMem reads a live process's memory through /proc/PID/mem; the threads
// examined here are blocked, so their stacks hold still.
type procMem struct{ f *os.File }

func (m procMem) ReadAt(b []byte, addr uint64) (int, error) { return m.f.ReadAt(b, int64(addr)) }

// blockedState builds a ThreadState from /proc/PID/task/TID/syscall, as the
// live code builds it from registers.
func blockedState(t *testing.T, pid, tid int) ThreadState {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 9 {
		t.Fatalf("thread %d is not blocked in a syscall: %q", tid, b)
	}
	hex := func(s string) uint64 { v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64); return v }
	ts := ThreadState{Tid: tid}
	ts.Regs.SetSPOf(arch.Host(), hex(f[7]))
	ts.Regs.SetPCOf(arch.Host(), hex(f[8]))
	ts.Syscall, _ = strconv.ParseInt(f[0], 10, 64)
	for i := range ts.Args {
		ts.Args[i] = hex(f[1+i])
	}
	return ts
}

func TestHijackPolicyOnRealThreads(t *testing.T) {
	cmd := exec.Command(testutil.BuildC(t, "policy_target.c"))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stderr = pw // never read: malloc_stats blocks in write holding main_arena's lock
	tg := testutil.StartCmd(t, cmd)
	pw.Close()
	tid := map[string]int{}
	f := strings.Fields(tg.Ready())
	for i := 1; i+1 < len(f); i += 2 {
		tid[f[i]], _ = strconv.Atoi(f[i+1])
	}
	pid := tg.Pid
	testutil.WaitUntil(t, "main to wait for main_arena's lock", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, pid))
		return strings.HasPrefix(string(b), "202 ")
	})

	ms, err := maps.Read(pid, false)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	maps.Classify(ms, maps.Hints{ExePath: exe})
	open := func(m maps.Mapping) (*os.File, error) {
		return os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	}
	libc, err := libc.FindLibc(ms, open)
	if err != nil {
		t.Fatal(err)
	}
	memf, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer memf.Close()
	mem := procMem{memf}
	proc, err := ptrace.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	tramp, err := ptrace.FindTrampoline(proc)
	if err != nil {
		t.Fatal(err)
	}
	policy := NewHijackPolicy(libc, ms, tramp)

	for _, c := range []struct {
		name string
		want string // "" for safe, else part of the refusal
	}{
		{"sleeper", ""},
		{"condvar", ""},
		{"handler", "running a signal handler"},
		{"stats", "blocked in syscall 1,"},
		{"main", "a lock in libc"},
	} {
		err := policy.Check(blockedState(t, pid, tid[c.name]), mem)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want a refusal containing %q", c.name, err, c.want)
		}
	}

	// Without the futex check, the stack alone still gives main away: it
	// is inside malloc.
	ts := blockedState(t, pid, pid)
	ts.Args[0] = 0x1000
	if err := policy.Check(ts, mem); err == nil || !strings.Contains(err.Error(), "inside the allocator (return address into") {
		t.Errorf("main with an innocent futex address: %v", err)
	}
	// And running code inside libc is never borrowed.
	ts = ThreadState{Tid: pid, Regs: ts.Regs, Syscall: -1}
	ts.Regs.SetPCOf(arch.Host(), libc.Text[0].Start+0x100)
	if err := policy.Check(ts, mem); err == nil || !strings.Contains(err.Error(), "running code inside libc") {
		t.Errorf("pc in libc: %v", err)
	}
}
