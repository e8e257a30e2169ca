package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

// TestGrowthJSONAndPprof runs arenactl growth on testdata/grow_sites.c
// while it maps and touches 8 MiB: the JSON names the site and its class
// with its bytes, -o writes a pprof profile with the growth's value types.
func TestGrowthJSONAndPprof(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	out := filepath.Join(t.TempDir(), "growth.pb.gz")
	js := growthMapping8(t, tg, "--duration", "3s", "--json", "-o", out, "--period", "4")
	testutil.ValidateJSON(t, "growth", []byte(js))
	var doc schema.Growth
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	var touched, mapped uint64
	for _, s := range doc.Sites {
		if s.Class == "anon" && slices.ContainsFunc(s.Frames, func(f schema.LeakFrame) bool { return f.Function == "map_pages" }) {
			touched += s.Touched
			mapped += s.Mapped
		}
	}
	if mapped != 8<<20 || touched < 7<<20 || touched > 9<<20 {
		t.Errorf("map_pages: %d bytes mapped, %d touched; want 8 MiB each", mapped, touched)
	}
	if doc.RSSAfter == nil || *doc.RSSAfter < doc.RSSBefore+7<<20 {
		t.Errorf("RSS before %d, after %v: no growth seen", doc.RSSBefore, doc.RSSAfter)
	}
	p := parsePprof(t, out)
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type)
	}
	if !slices.Contains(types, "touched_space") || !slices.Contains(types, "mapped_space") || p.DefaultSampleType != "touched_space" {
		t.Errorf("sample types %v, default %q", types, p.DefaultSampleType)
	}
	if len(p.Sample) == 0 || p.Sample[0].Label["class"] == nil {
		t.Errorf("no samples with a class label in the pprof profile")
	}
}

// TestGrowthNotAllowed: a user without CAP_PERFMON under
// perf_event_paranoid 2 gets one line and exit 16, on its own process.
func TestGrowthNotAllowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as nobody")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid"); err != nil || strings.TrimSpace(string(b)) != "2" {
		t.Skip("perf_event_paranoid is not 2")
	}
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = nobody
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	time.Sleep(50 * time.Millisecond) // exec'd
	cmd := exec.Command(arenactl, "growth", "--duration", "1s", strconv.Itoa(sleep.Process.Pid))
	cmd.SysProcAttr = nobody
	r := runCmd(t, cmd)
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if r.Code != exitNoPerf || len(lines) != 1 || !strings.HasPrefix(lines[0], "arenactl: ") || !strings.Contains(lines[0], "perf_event_paranoid") {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
}

// growthBuffer is a buffer a command writes while the test reads it.
type growthBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (g *growthBuffer) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.Write(p)
}

func (g *growthBuffer) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.b.String()
}

// TestGrowthFoldedAndSIGKILL: --folded names the site with its class as
// the last frame; a SIGKILL of arenactl in the window leaves the process
// as it was (the kernel closes the events with arenactl) and no
// directory of its private tracefs mount behind.
func TestGrowthFoldedAndSIGKILL(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	start := func(args ...string) (*exec.Cmd, *growthBuffer, *growthBuffer) {
		cmd := exec.Command(arenactl, append([]string{"growth"}, append(args, strconv.Itoa(tg.Pid))...)...)
		var stdout, stderr growthBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitUntil(t, "the window to open", func() bool { return strings.Contains(stderr.String(), "window is open") })
		return cmd, &stdout, &stderr
	}
	cmd, stdout, stderr := start("--duration", "2s", "--folded", "--period", "1")
	tg.Send("map 2")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	found := false
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.Contains(line, ";map_pages;[anon] ") || strings.Contains(line, ";map_pages;[anon]") {
			found = true
		}
	}
	if !found {
		t.Errorf("no folded stack through map_pages ending in [anon]:\n%s", stdout.String())
	}

	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "arenactl-tracefs-*"))
	cmd, _, _ = start("--duration", "60s")
	progs := bpfProgramsOf(t, cmd.Process.Pid)
	if len(progs) == 0 {
		t.Error("arenactl holds no eBPF program in the window")
	}
	killed := make(chan struct{})
	go func() {
		// While the target grows its heaps (under way when arenactl
		// dies, or just done: either way it must go on as it was).
		time.Sleep(50 * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		close(killed)
	}()
	if ans := strings.Fields(tg.Send("small 8")); len(ans) != 4 || ans[0] != "ok" {
		t.Fatalf("target while arenactl was killed: %q", ans)
	}
	<-killed
	if ans := tg.Send("map 4"); ans != "ok 4194304" {
		t.Fatalf("target after arenactl was killed: %q", ans)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "arenactl-tracefs-*"))
	if len(after) > len(before) {
		t.Errorf("tracefs mount points left: %v", after)
	}
	// The programs go with arenactl's descriptors (once the kernel's
	// grace period has passed).
	testutil.WaitUntil(t, "the eBPF programs to be freed", func() bool {
		for _, id := range progs {
			if p, err := ebpf.NewProgramFromID(id); err == nil {
				p.Close()
				return false
			}
		}
		return true
	})
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Errorf("target at exit: %q, status %d", line, code)
	}
}

// bpfProgramsOf is the eBPF programs process pid holds by a descriptor
// (their fdinfo names them).
func bpfProgramsOf(t *testing.T, pid int) []ebpf.ProgramID {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fdinfo/*", pid))
	var ids []ebpf.ProgramID
	for _, f := range fds {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "prog_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil && !slices.Contains(ids, ebpf.ProgramID(id)) {
					ids = append(ids, ebpf.ProgramID(id))
				}
			}
		}
	}
	return ids
}

// TestGrowthOutsideHostPidNamespace: arenactl itself in a pid namespace
// of its own (a debug container sharing the target's, kubectl debug
// --target), the target in the same: eBPF is asked for the target's ids
// in that namespace and records its calls, with no note, and every call
// the target makes is there.
func TestGrowthOutsideHostPidNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	// The target reads its commands from a fifo that the script writes
	// once the window is open, both in the new namespace ($! is the
	// target).
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in")
	script := "mkfifo " + fifo + "; " + bin + " <" + fifo + " >/dev/null & p=$!; exec 3>" + fifo + "; sleep 0.3; " +
		arenactl + " growth --duration 1500ms --json $p 2>" + filepath.Join(dir, "err") + " & a=$!; " +
		"while ! grep -q 'window is open' " + filepath.Join(dir, "err") + "; do sleep 0.05; done; echo 'map 4' >&3; " +
		"wait $a; c=$?; cat " + filepath.Join(dir, "err") + " >&2; kill $p; exit $c"
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script)
	r := runCmd(t, cmd)
	var doc schema.Growth
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || r.Code != 0 {
		t.Fatalf("exit %d, %v\n%s", r.Code, err, r.Stderr)
	}
	if doc.SyscallsBy != "eBPF" || strings.Contains(r.Stderr, "eBPF refused") {
		t.Errorf("calls by %q:\n%s", doc.SyscallsBy, r.Stderr)
	}
	var mapped uint64
	for _, s := range doc.Sites {
		if slices.ContainsFunc(s.Frames, func(f schema.LeakFrame) bool { return f.Function == "map_pages" }) {
			mapped += s.Mapped
		}
	}
	if mapped != 4<<20 {
		t.Errorf("map_pages mapped %d bytes, want 4 MiB:\n%s", mapped, r.Stderr)
	}
}

// TestGrowthBelowArenactlsPidNamespace: a target in a pid namespace
// below arenactl's (itself not the host's) cannot be named by eBPF there:
// one note says so and the calls are recorded by perf's tracepoints.
func TestGrowthBelowArenactlsPidNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	dir := t.TempDir()
	fifo, errs := filepath.Join(dir, "in"), filepath.Join(dir, "err")
	script := "mkfifo " + fifo + "; unshare --pid --fork --mount-proc " + bin + " <" + fifo + " >/dev/null & u=$!; exec 3>" + fifo +
		"; sleep 0.5; p=$(cat /proc/$u/task/$u/children); " + arenactl + " growth --duration 500ms --json $p 2>" + errs +
		"; c=$?; cat " + errs + " >&2; kill $p; exit $c"
	r := runCmd(t, exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script))
	var doc schema.Growth
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil || r.Code != 0 {
		t.Fatalf("exit %d, %v\n%s", r.Code, err, r.Stderr)
	}
	var notes []string
	for _, l := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		if strings.Contains(l, "eBPF") {
			notes = append(notes, l)
		}
	}
	if doc.SyscallsBy != "tracepoints" || len(notes) != 1 || !strings.HasPrefix(notes[0], "arenactl: eBPF refused") ||
		!strings.Contains(notes[0], "below arenactl's") {
		t.Errorf("calls by %q; notes about eBPF: %q", doc.SyscallsBy, notes)
	}
}

// TestGrowthOtherPidNamespace: a process in a pid namespace of its own is
// watched by its host PID, its faults by perf and its calls by the eBPF
// program, which knows processes by their host PIDs.
func TestGrowthOtherPidNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	tg := testutil.StartCmd(t, exec.Command("unshare", "--pid", "--fork", "--mount-proc", bin))
	if tg.Ready() != "ready 1" {
		t.Fatalf("the target is not its namespace's init: %q", tg.Ready())
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tg.Pid) + "/task/" + strconv.Itoa(tg.Pid) + "/children")
	if err != nil || len(strings.Fields(string(b))) != 1 {
		t.Fatalf("unshare's child: %q, %v", b, err)
	}
	host := strings.Fields(string(b))[0]
	// Killing unshare leaves its child: the child goes first.
	t.Cleanup(func() {
		if pid, err := strconv.Atoi(host); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cmd := exec.Command(arenactl, "growth", "--duration", "2s", "--json", "--period", "4", host)
	var stdout, stderr growthBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the window to open", func() bool { return strings.Contains(stderr.String(), "window is open") })
	tg.Send("map 4")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("arenactl growth %s: %v\n%s", host, err, stderr.String())
	}
	var doc schema.Growth
	if err := json.Unmarshal([]byte(stdout.String()), &doc); err != nil {
		t.Fatal(err)
	}
	var touched, mapped uint64
	for _, s := range doc.Sites {
		if slices.ContainsFunc(s.Frames, func(f schema.LeakFrame) bool { return f.Function == "map_pages" }) {
			touched += s.Touched
			mapped += s.Mapped
		}
	}
	if touched < 3<<20 || touched > 5<<20 {
		t.Errorf("map_pages touched %d bytes, want 4 MiB", touched)
	}
	if mapped != 4<<20 || doc.SyscallsBy != "eBPF" {
		t.Errorf("map_pages mapped %d bytes (calls by %q), want 4 MiB by eBPF", mapped, doc.SyscallsBy)
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Errorf("target at exit: %q, status %d", line, code)
	}
}

// growth only watches from outside (the kernel samples the process), so
// it takes what info and leaks refuse: a process that allocates with
// another malloc (jemalloc, preloaded), whose heaps it then does not tell
// apart by arena and says why, and one a debugger holds. Each one's own
// mapping is charged to its site, as for any process.
func TestGrowthAnyAllocatorAndTraced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	window := func(t *testing.T, tg *testutil.Target) string {
		js := growthMapping8(t, tg, "--duration", "2s", "--json")
		var doc schema.Growth
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatalf("%v\n%s", err, js)
		}
		var mapped uint64
		for _, s := range doc.Sites {
			if slices.ContainsFunc(s.Frames, func(f schema.LeakFrame) bool { return f.Function == "map_pages" }) {
				mapped += s.Mapped
			}
		}
		if mapped != 8<<20 {
			t.Errorf("map_pages mapped %d bytes, want 8 MiB", mapped)
		}
		return js
	}
	t.Run("jemalloc", func(t *testing.T) {
		lib := "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
		if !fileExists(lib) {
			t.Skip("no libjemalloc2")
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
		tg := testutil.StartCmd(t, cmd)
		expectRefusal(t, run(t, "info", strconv.Itoa(tg.Pid)), exitNotGlibc, "allocates with jemalloc")
		window(t, tg)
		tg.Quit()
	})
	t.Run("traced", func(t *testing.T) {
		gdb, err := exec.LookPath("gdb")
		if err != nil {
			t.Skip("gdb is not installed")
		}
		tg := testutil.Start(t, bin)
		g := exec.Command(gdb, "-q", "-nx", "-batch", "-p", strconv.Itoa(tg.Pid), "-ex", "continue")
		g.Stdout, g.Stderr = io.Discard, io.Discard
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { g.Process.Signal(syscall.SIGTERM); g.Wait() }()
		testutil.WaitUntil(t, "gdb to attach", func() bool { return testutil.Traced(tg.Pid) })
		expectRefusal(t, run(t, "info", strconv.Itoa(tg.Pid)), exitTraced, "already traced by process")
		window(t, tg)
	})
}

// growthMapping8 runs arenactl growth with args on grow_sites, which maps
// and touches 8 MiB once the window is open, and returns its stdout.
func growthMapping8(t *testing.T, tg *testutil.Target, args ...string) string {
	t.Helper()
	return growthMapping8Env(t, tg, nil, args...)
}

// growthMapping8Env is growthMapping8 with arenactl's environment (nil:
// ours).
func growthMapping8Env(t *testing.T, tg *testutil.Target, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(arenactl, append(append([]string{"growth"}, args...), strconv.Itoa(tg.Pid))...)
	cmd.Env = env
	var stdout, stderr growthBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the window to open", func() bool { return strings.Contains(stderr.String(), "window is open") })
	if ans := tg.Send("map 8"); ans != "ok 8388608" {
		t.Fatalf("target: %q", ans)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("arenactl growth: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}

// TestWindowEndedBySignal: leaks and growth run for --duration or until
// interrupted, so SIGINT or SIGTERM in the window ends it as its duration
// would: the report is printed, marked interrupted, and the exit is 0
// (README's table of exit codes says so; 130 is for a run stopped before
// it had anything to report).
func TestWindowEndedBySignal(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "churn.c", "-O2"))
	for _, cmdName := range []string{"leaks", "growth"} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			cmd := exec.Command(arenactl, cmdName, "--json", "--duration", "0", strconv.Itoa(tg.Pid))
			var stdout, stderr growthBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.WaitUntil(t, "the window to open", func() bool { return strings.Contains(stderr.String(), "window is open") })
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			var doc struct {
				Interrupted *bool `json:"interrupted"` // growth's
				Sampler     struct {
					Interrupted *bool `json:"interrupted"` // leaks'
				} `json:"sampler"`
			}
			jerr := json.Unmarshal([]byte(stdout.String()), &doc)
			interrupted := doc.Interrupted
			if cmdName == "leaks" {
				interrupted = doc.Sampler.Interrupted
			}
			if err != nil || jerr != nil || interrupted == nil || !*interrupted {
				t.Errorf("%s ended by %v: %v, report interrupted %v (%v); stderr %s", cmdName, sig, err, interrupted, jerr, stderr.String())
			}
		}
	}
	if a := tg.Send("check"); !strings.HasPrefix(a, "ok") {
		t.Fatalf("target: %q", a)
	}
	if line, code := tg.Quit(); code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}
