package exporter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

func mustCompile(t *testing.T, flag, expr string) *regexp.Regexp {
	t.Helper()
	re, err := Compile(flag, expr)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// Matchers select real processes by name, path, cgroup and unit: anchored,
// every kind given must match, any expression of a kind may. The exporter
// never selects itself.
func TestSelector(t *testing.T) {
	name, pids := startSleeps(t, 1)
	pid := pids[0]
	bin, err := procfs.Exe(pid)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := procfs.Cgroup(pid)
	if err != nil {
		t.Fatal(err)
	}

	selected := func(s Selector) bool {
		t.Helper()
		ps, err := s.discover(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		defer closeAll(ps)
		for _, p := range ps {
			if p.Pid == os.Getpid() {
				t.Error("the exporter selected itself")
			}
			if p.Pid == pid {
				if p.Comm != name || p.Exe != bin || p.Cgroup != cg || p.Unit != procfs.SystemdUnit(cg) {
					t.Errorf("process %+v", p)
				}
				return true
			}
		}
		return false
	}
	re := func(flag, expr string) []*regexp.Regexp { return []*regexp.Regexp{mustCompile(t, flag, expr)} }
	for _, c := range []struct {
		what string
		s    Selector
		want bool
	}{
		{"its pid", Selector{Pids: []int{pid}}, true},
		{"its name", Selector{Comm: re("comm", name)}, true},
		{"a prefix of its name (anchored)", Selector{Comm: re("comm", name[:len(name)-1])}, false},
		{"one of two names", Selector{Comm: []*regexp.Regexp{mustCompile(t, "comm", "nothing-like-it"), mustCompile(t, "comm", "mx[0-9]+")}}, true},
		{"its path", Selector{Exe: re("exe", regexp.QuoteMeta(bin))}, true},
		{"its name and cgroup", Selector{Comm: re("comm", name), Cgroup: re("cgroup", regexp.QuoteMeta(cg))}, true},
		{"its name, another unit", Selector{Comm: re("comm", name), Unit: re("unit", "no-such-unit\\.service")}, false},
		{"its name, another path", Selector{Comm: re("comm", name), Exe: re("exe", "/nowhere/.*")}, false},
		{"a pid that cannot exist", Selector{Pids: []int{1 << 30}}, false},
	} {
		if got := selected(c.s); got != c.want {
			t.Errorf("selected by %s: %v, want %v", c.what, got, c.want)
		}
	}
	if ps, _ := (&Selector{Pids: []int{os.Getpid()}}).discover(os.Getpid()); len(ps) != 0 {
		t.Errorf("the exporter's own pid given: %+v", ps)
	}
	if _, err := Compile("comm", "("); err == nil {
		t.Error("a bad expression compiled")
	}
}

// startSleeps runs n copies of sleep(1) under one new name.
func startSleeps(t *testing.T, n int) (name string, pids []int) {
	t.Helper()
	name = fmt.Sprintf("mx%d", time.Now().UnixNano()%1e8)
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		cmd := exec.Command(bin, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pid := cmd.Process.Pid
		testutil.WaitUntil(t, "the child to exec", func() bool { e, _ := procfs.Exe(pid); return e == bin })
		pids = append(pids, pid)
	}
	return name, pids
}

// No more than MaxTargets processes are watched; a PID given is watched
// before processes a matcher found, and the rest are counted.
func TestMaxTargets(t *testing.T) {
	name, pids := startSleeps(t, 3)
	e := New(Config{Selector: Selector{Pids: []int{pids[2]}, Comm: []*regexp.Regexp{mustCompile(t, "comm", name)}},
		MaxTargets: 2, MinInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	e.discover(ctx)
	e.mu.Lock()
	n, dropped, given := len(e.targets), e.dropped, false
	for k := range e.targets {
		given = given || k.pid == pids[2]
	}
	e.mu.Unlock()
	cancel()
	e.wg.Wait()
	if n != 2 || dropped != 1 || !given {
		t.Errorf("%d watched (given pid among them: %v), %d dropped; want 2 with it, 1 dropped", n, given, dropped)
	}
}

// The schedule: never under MinInterval, long enough that freezes stay in
// the budget, and backing off from a target that keeps failing.
func TestNextWait(t *testing.T) {
	c := Config{MinInterval: 30 * time.Second, FreezeBudget: 0.01}
	for _, x := range []struct {
		frozen   time.Duration
		failures int
		want     time.Duration
	}{
		{0, 0, 30 * time.Second},
		{100 * time.Millisecond, 0, 30 * time.Second},
		{time.Second, 0, 100 * time.Second},
		{0, 1, 30 * time.Second},
		{0, 2, 60 * time.Second},
		{0, 3, 120 * time.Second},
		{0, 50, 16 * 30 * time.Second},
		{time.Minute, 1, 100 * time.Minute},
	} {
		if got := c.nextWait(x.frozen, x.failures); got != x.want {
			t.Errorf("frozen %s, %d failures: wait %s, want %s", x.frozen, x.failures, got, x.want)
		}
	}
}

// Every metric has a name with the one prefix and a unit suffix where it
// counts something with a unit.
func TestMetricNames(t *testing.T) {
	names := MetricNames()
	if len(names) != len(allDescs) {
		t.Fatalf("%d names for %d metrics", len(names), len(allDescs))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] || !regexp.MustCompile(`^arenactl_[a-z_]+$`).MatchString(n) {
			t.Errorf("metric name %q (duplicate: %v)", n, seen[n])
		}
		seen[n] = true
	}
}

// A process that runs exec keeps its PID and start time but is another
// program: its series start again under its new name and executable.
func TestTargetExec(t *testing.T) {
	_, pids := startSleeps(t, 1)
	bin, err := procfs.Exe(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `read x; exec "$0" 60`, bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	e := New(Config{Selector: Selector{Pids: []int{pid}}, MinInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); e.wg.Wait() }()
	watched := func() *process {
		e.mu.Lock()
		defer e.mu.Unlock()
		for k, tg := range e.targets {
			if k.pid == pid {
				return tg.proc
			}
		}
		return nil
	}
	testutil.WaitUntil(t, "sh to run", func() bool { e, _ := procfs.Exe(pid); return strings.HasSuffix(e, "sh") })
	e.discover(ctx)
	if p := watched(); p == nil || p.Exe == bin {
		t.Fatalf("before exec: %+v", p)
	}
	stdin.Write([]byte("go\n"))
	testutil.WaitUntil(t, "the exec", func() bool { e, _ := procfs.Exe(pid); return e == bin })
	e.discover(ctx)
	if p := watched(); p == nil || p.Exe != bin || p.Comm != filepath.Base(bin) {
		t.Fatalf("after exec: %+v", p)
	}
}
