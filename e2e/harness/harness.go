// Package harness is what the end-to-end tests under e2e/ share: the
// arenactl binary built once per test package, running it and reading its
// exit code and output, the documented exit codes, and the mirror types its
// JSON documents are decoded into. The tests run the real binary against
// real C programs built from testdata/ (internal/testutil); nothing of the
// kernel is mocked.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

// Arenactl is the binary under test, in a world-readable directory (some
// tests run it as nobody). Main sets it.
var Arenactl string

// Main builds arenactl, points *bin at it, runs the tests and removes what
// they built (testutil.Main). Call it from each package's TestMain.
func Main(m *testing.M, bin *string) int {
	return testutil.Main(&binaryM{m, bin})
}

type binaryM struct {
	m   *testing.M
	bin *string
}

func (b *binaryM) Run() int {
	dir, err := os.MkdirTemp("", "arenactl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	Arenactl = filepath.Join(dir, "arenactl")
	if out, err := exec.Command("go", "build", "-o", Arenactl, "github.com/arenactl/arenactl/cmd/arenactl").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building arenactl: %v\n%s", err, out)
		return 1
	}
	*b.bin = Arenactl
	return b.m.Run()
}

// Exit codes, as docs/exit-codes.md documents them (TestExitCodesAsDocumented
// holds the two together): the tests check the contract, not the
// implementation's constants.
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2
	ExitNoProcess   = 3
	ExitPermission  = 4
	ExitTraced      = 5
	ExitState       = 6
	ExitNotGlibc    = 7
	ExitNoSafe      = 8
	ExitCallFailed  = 9
	ExitGone        = 10
	ExitDamaged     = 11
	ExitBadCore     = 12
	ExitLockedStop  = 13
	ExitNoImage     = 14
	ExitNoSampler   = 15
	ExitNoPerf      = 16
	ExitNoMemory    = 17
	ExitArch        = 18
	ExitInterrupted = 130
	ExitBrokenPipe  = 128 + int(syscall.SIGPIPE)
)

// Result is one run of the arenactl binary.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs arenactl with args; a JSON document it prints with exit 0 is
// checked against its published schema.
func Run(t testing.TB, args ...string) Result {
	t.Helper()
	r := RunCmd(t, exec.Command(Arenactl, args...))
	if r.Code == 0 && len(args) > 0 && slices.Contains(args, "--json") {
		// Every document any test makes arenactl print follows its
		// published schema.
		if _, ok := schema.Documents[args[0]]; ok {
			testutil.ValidateJSON(t, args[0], []byte(r.Stdout))
		}
	}
	return r
}

// RunCmd runs cmd (arenactl, or a wrapper of it) as a child the tests own
// (testutil.StartOwned), and fails the test if it panicked.
func RunCmd(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	return RunCmdStarted(t, cmd, nil)
}

// RunCmdStarted is RunCmd, calling started (when not nil) once the
// command runs.
func RunCmdStarted(t testing.TB, cmd *exec.Cmd, started func()) Result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := testutil.StartOwned(cmd)
	if err == nil {
		if started != nil {
			started()
		}
		err = cmd.Wait()
	}
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running arenactl: %v", err)
	}
	if strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "panic:") {
		t.Fatalf("arenactl panicked:\n%s", r.Stderr)
	}
	return r
}

// MustRun runs arenactl and fails the test unless it exits 0.
func MustRun(t testing.TB, args ...string) Result {
	t.Helper()
	r := Run(t, args...)
	if r.Code != 0 {
		t.Fatalf("arenactl %s: exit %d\nstderr: %s", strings.Join(args, " "), r.Code, r.Stderr)
	}
	return r
}

// MustQuit ends a target of the arenas.c protocol and checks it found its
// heap intact.
func MustQuit(t testing.TB, tg *testutil.Target) {
	t.Helper()
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target %d at exit: %q, status %d; stderr %q", tg.Pid, line, code, tg.Stderr())
	}
}

// RunWithin is Run with a deadline: a walk that follows a damaged list
// forever fails the test instead of hanging it.
func RunWithin(t *testing.T, d time.Duration, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, Arenactl, args...)
	// Before a run past d is killed, what its threads were doing: state,
	// wait channel and system call of each (a hang is told from a crawl).
	var where string
	cmd.Cancel = func() error {
		where = threadsOf(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	r := RunCmd(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("arenactl %s did not finish within %s; its threads then:\n%s", strings.Join(args, " "), d, where)
	}
	return r
}

// threadsOf lists each thread of pid with its state, wait channel and
// /proc syscall line, and the process's CPU time so far.
func threadsOf(pid int) string {
	var b strings.Builder
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(st)); len(f) > 14 {
			fmt.Fprintf(&b, "utime %s stime %s (ticks)\n", f[13], f[14])
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		st, _ := os.ReadFile(task + "/stat")
		wchan, _ := os.ReadFile(task + "/wchan")
		sc, _ := os.ReadFile(task + "/syscall")
		state := "?"
		if i := strings.LastIndexByte(string(st), ')'); i >= 0 && i+2 < len(st) {
			state = string(st[i+2])
		}
		fmt.Fprintf(&b, "%s %s %s %s\n", filepath.Base(task), state, wchan, strings.Fields(string(sc) + " ?")[0])
	}
	return b.String()
}

// Eventually reports whether cond holds within a few seconds: for states
// the kernel settles into just after a detach. The bound is a hang guard,
// not a measurement.
func Eventually(cond func() bool) bool {
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func FileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// FirstDiff shows the first line where two outputs part.
func FirstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want %s\n  got  %s", i+1, wl, gl)
		}
	}
	return "(same lines, different bytes)"
}

// OwnReport has an arenas.c target write malloc_info from its main thread,
// through the same kind of stream arenactl injects, and returns the XML.
func OwnReport(t *testing.T, tg *testutil.Target) []byte {
	t.Helper()
	own := filepath.Join(t.TempDir(), "own.xml")
	if a := tg.Send("report " + own); a != "ok" {
		t.Fatalf("target report: %s", a)
	}
	want, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func ProcessState(pid int) byte {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

func Thaw(t *testing.T, tg *testutil.Target) {
	t.Helper()
	if err := syscall.Kill(tg.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if a := tg.Next(); a != "ok" {
		t.Fatalf("target after SIGCONT: %q", a)
	}
}

// Every refusal is one line on stderr and a documented exit code, and the
// target is left as it was.
func ExpectRefusal(t *testing.T, r Result, code int, words ...string) {
	t.Helper()
	if r.Code != code {
		t.Errorf("exit code %d, want %d; stderr: %s", r.Code, code, r.Stderr)
	}
	if n := strings.Count(strings.TrimSpace(r.Stderr), "\n"); n != 0 || !strings.HasPrefix(r.Stderr, "arenactl: ") {
		t.Errorf("want one line starting with 'arenactl: ', got %q", r.Stderr)
	}
	for _, w := range words {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("message %q lacks %q", r.Stderr, w)
		}
	}
	if r.Stdout != "" {
		t.Errorf("a refusal printed on stdout: %q", r.Stdout)
	}
}

// Within reports whether got is within pct percent of want.
func Within(got, want int64, pct int64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d*100 <= want*pct
}

// StartGrow runs testdata/grow.c: a worker thread with an arena of its own,
// grown on command ("grow N" MiB; "main N" for main_arena).
func StartGrow(t *testing.T) *testutil.Target {
	t.Helper()
	return testutil.Start(t, testutil.BuildC(t, "grow.c"))
}

func MustGrow(t *testing.T, tg *testutil.Target, cmd string) {
	t.Helper()
	if a := tg.Send(cmd); a != "ok" {
		t.Fatalf("target after %q: %q", cmd, a)
	}
}

// StoppedThreads lists threads in a stopped state (T, t).
func StoppedThreads(pid int) string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
			if st := s[i+2]; st == 'T' || st == 't' {
				out = append(out, e.Name()+":"+string(st))
			}
		}
	}
	return strings.Join(out, " ")
}

// MarkedMappings lists Arenactl's call sites in pid: a one-page anonymous
// r-x mapping (the routine) after a page that starts with the mark.
func MarkedMappings(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 || f[1] != "r-xp" {
			continue
		}
		var lo, hi uint64
		fmt.Sscanf(f[0], "%x-%x", &lo, &hi)
		var hdr [8]byte
		if _, err := mem.ReadAt(hdr[:], int64(lo)-4096); err == nil && hi-lo == 4096 && string(hdr[:]) == "ARENACTL" {
			out = append(out, f[0])
		}
	}
	return out
}

// UnexplainedSites is MarkedMappings less the call sites a run's stderr
// names as kept. A site may rightly stay: when a run was killed while it
// closed an earlier run's FILE, whether that fclose happened cannot be
// known, and a second fclose could corrupt the heap, so the site and buffer
// are kept and the run says so. Any other site left is a leak.
func UnexplainedSites(t *testing.T, pid int, stderr string) []string {
	t.Helper()
	var out []string
	for _, m := range MarkedMappings(t, pid) {
		lo, _, _ := strings.Cut(m, "-")
		code, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			t.Fatalf("mapping %q", m)
		}
		// The code page follows the site's header page.
		base := fmt.Sprintf("call site at %#x", code-4096)
		kept := false
		for _, line := range strings.Split(stderr, "\n") {
			kept = kept || strings.Contains(line, "kept") && strings.Contains(line, base)
		}
		if !kept {
			out = append(out, m)
		}
	}
	return out
}
