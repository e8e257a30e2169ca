// Package testutil builds the C programs under testdata/ with gcc and runs
// them as real target processes for the tests of every other package. It
// speaks the line protocol the targets share: a first line starting with
// "ready", then one answer line per command written to stdin.
package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Patience bounds every wait for a target. It is a safety net against a
// hung process, never a timing assertion.
const Patience = 60 * time.Second

var (
	dirOnce sync.Once
	dir     string
	dirErr  error
	buildMu sync.Mutex
	built   = map[string]string{}
)

// Main runs the tests (m is a *testing.M, or a wrapper that prepares
// something first) and then removes the shared build directory. Call it from
// TestMain.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// Dir is a world-readable directory shared by the tests of one package, for
// binaries that must be runnable by another user.
func Dir(t testing.TB) string {
	t.Helper()
	dirOnce.Do(func() {
		if dir, dirErr = os.MkdirTemp("", "arenactl-test-"); dirErr == nil {
			dirErr = os.Chmod(dir, 0o755)
		}
	})
	if dirErr != nil {
		t.Fatal(dirErr)
	}
	return dir
}

// RepoRoot is the directory holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			t.Fatal("no go.mod above the test's directory")
		}
		d = parent
	}
}

// BuildC compiles testdata/<src> (a path relative to the repository root's
// testdata/, or an absolute path) with gcc once per test binary, and
// returns the executable. flags go to gcc after the defaults.
func BuildC(t testing.TB, src string, flags ...string) string {
	t.Helper()
	return BuildCWith(t, "gcc", src, flags...)
}

// BuildCWith is BuildC with another compiler driver (musl-gcc); the test is
// skipped when the driver is not installed.
func BuildCWith(t testing.TB, cc, src string, flags ...string) string {
	t.Helper()
	path, err := exec.LookPath(cc)
	if err != nil {
		t.Skipf("%s is not installed", cc)
	}
	if !filepath.IsAbs(src) {
		src = filepath.Join(RepoRoot(t), "testdata", src)
	}
	key := strings.Join(append([]string{cc, src}, flags...), "\x00")
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[key]; ok {
		return p
	}
	// Each build gets a directory of its own, so that the executable keeps
	// the source's name: tests check names derived from it (an interposer
	// named after its file, a program that is its own allocator).
	sub, err := os.MkdirTemp(Dir(t), "build-")
	if err == nil {
		err = os.Chmod(sub, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(sub, strings.TrimSuffix(filepath.Base(src), ".c"))
	args := []string{"-O1", "-g", "-Wall", "-o", out, src}
	if cc == "gcc" {
		args = append([]string{"-pthread"}, args...)
	}
	args = append(args, flags...)
	if b, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	built[key] = out
	return out
}

// BuildCSource writes code to name.c in the shared directory and builds it.
func BuildCSource(t testing.TB, name, code string, flags ...string) string {
	t.Helper()
	return BuildCSourceWith(t, "gcc", name, code, flags...)
}

// BuildCSourceWith is BuildCSource with another compiler driver. Builds are
// cached by file name, so a second, different program under the same name
// fails the test instead of quietly running the first one.
func BuildCSourceWith(t testing.TB, cc, name, code string, flags ...string) string {
	t.Helper()
	src := filepath.Join(Dir(t), name+".c")
	buildMu.Lock()
	old, err := os.ReadFile(src)
	switch {
	case err == nil && string(old) != code:
		err = fmt.Errorf("two different C programs are named %q", name)
	case errors.Is(err, fs.ErrNotExist):
		err = os.WriteFile(src, []byte(code), 0o644)
	}
	buildMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return BuildCWith(t, cc, src, flags...)
}

// PrivateCopy copies the executable bin into the test's own temporary
// directory, for a test that deletes or rewrites the program it runs: a
// built one is shared by every test of the test binary.
func PrivateCopy(t testing.TB, bin string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(bin))
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

// GlibcTree is a glibc that scripts/fetch-glibc.sh extracted under
// testdata/glibc, to run a target under another glibc than the system's.
type GlibcTree struct {
	Version string // from the directory's name: "2.31"
	Dir     string
	Loader  string // its ld-linux-x86-64.so.2, or "" if the tree has none
	LibDir  string // Loader's directory, which holds the tree's libc.so.6
}

// GlibcTrees lists the extracted trees; none when the script has not run.
func GlibcTrees(t testing.TB) []GlibcTree {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(RepoRoot(t), "testdata", "glibc", "glibc-2.*"))
	var trees []GlibcTree
	for _, d := range dirs {
		g := GlibcTree{Version: strings.TrimPrefix(filepath.Base(d), "glibc-"), Dir: d}
		// The loader is in lib/ up to 2.35 and in usr/lib/ from 2.39.
		for _, sub := range []string{"usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"} {
			if p := filepath.Join(d, sub, "ld-linux-x86-64.so.2"); fileExists(p) {
				g.Loader, g.LibDir = p, filepath.Join(d, sub)
				break
			}
		}
		trees = append(trees, g)
	}
	return trees
}

// Command runs bin under the tree's loader and libraries instead of the
// system's. bin should be built with GlibcSysroot's flags.
func (g GlibcTree) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command(g.Loader, append([]string{"--library-path", g.LibDir, bin}, args...)...)
}

// GlibcSysroot returns gcc flags that build against the oldest tree,
// glibc-2.31 (fetch-glibc.sh extracts it with headers and crt files), instead
// of the system's glibc, so that the program runs under every tree's loader.
// The test is skipped when that tree is missing.
func GlibcSysroot(t testing.TB) []string {
	t.Helper()
	root := filepath.Join(RepoRoot(t), "testdata", "glibc", "glibc-2.31")
	if !fileExists(filepath.Join(root, "usr", "include", "stdio.h")) {
		t.Skip("no glibc trees: run scripts/fetch-glibc.sh")
	}
	lib := filepath.Join(root, "usr", "lib", "x86_64-linux-gnu")
	return []string{"--sysroot=" + root, "-B" + lib + "/", "-L" + lib,
		"-L" + filepath.Join(root, "lib", "x86_64-linux-gnu"),
		"-isystem", filepath.Join(root, "usr", "include"),
		"-isystem", filepath.Join(root, "usr", "include", "x86_64-linux-gnu")}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Target is a running test program.
type Target struct {
	Pid int

	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	first  string
	mu     sync.Mutex
	stdout bytes.Buffer // everything it printed, for checks that it printed no XML
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// Start runs bin with args and waits for its "ready" line.
func Start(t testing.TB, bin string, args ...string) *Target {
	t.Helper()
	return StartCmd(t, exec.Command(bin, args...))
}

// StartCmd starts a prepared command (with its own Env, or Stderr) and waits
// for its "ready" line. The process is killed when the test ends, if it has
// not exited by then, and when the test process dies (StartOwned).
func StartCmd(t testing.TB, cmd *exec.Cmd) *Target {
	t.Helper()
	tg := &Target{t: t, cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	if cmd.Stderr == nil {
		cmd.Stderr = writerFunc(func(p []byte) (int, error) {
			tg.mu.Lock()
			defer tg.mu.Unlock()
			return tg.stderr.Write(p)
		})
	}
	var err error
	if tg.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := StartOwned(cmd); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	tg.Pid = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			tg.mu.Lock()
			tg.stdout.WriteString(sc.Text() + "\n")
			tg.mu.Unlock()
			tg.lines <- sc.Text()
		}
		close(tg.lines)
		tg.err = cmd.Wait()
		close(tg.done)
	}()
	t.Cleanup(func() {
		select {
		case <-tg.done:
		default:
			cmd.Process.Kill()
			// A killed target that a stopped (or hung) tracer still holds
			// is not reaped until the tracer lets go: a test that failed
			// that way reports it rather than wait for go test's timeout.
			select {
			case <-tg.done:
			case <-time.After(Patience):
				t.Errorf("target %d not reaped %v after SIGKILL (traced: %v): a tracer still holds it", tg.Pid, Patience, Traced(tg.Pid))
			}
		}
	})
	tg.first = tg.Next()
	if !strings.HasPrefix(tg.first, "ready") {
		t.Fatalf("target %s said %q instead of ready; stderr: %s", cmd.Path, tg.first, tg.Stderr())
	}
	return tg
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Ready is the target's first line ("ready ..."), for targets that report
// something there.
func (tg *Target) Ready() string { return tg.first }

// Next returns the next line the target prints.
func (tg *Target) Next() string {
	tg.t.Helper()
	select {
	case l, ok := <-tg.lines:
		if !ok {
			tg.t.Fatalf("target %d exited: %v; stderr: %s", tg.Pid, tg.Wait(), tg.Stderr())
		}
		return l
	case <-time.After(Patience):
		tg.t.Fatalf("target %d printed nothing for %s", tg.Pid, Patience)
	}
	return ""
}

// Send writes one command and returns the target's one-line answer.
func (tg *Target) Send(cmd string) string {
	tg.t.Helper()
	if _, err := fmt.Fprintln(tg.stdin, cmd); err != nil {
		tg.t.Fatalf("sending %q to target %d: %v", cmd, tg.Pid, err)
	}
	return tg.Next()
}

// Quit sends "quit" and returns the target's last line and exit code.
func (tg *Target) Quit() (string, int) {
	tg.t.Helper()
	last := tg.Send("quit")
	return last, tg.ExitCode()
}

// Wait waits for the target to exit and returns what exec's Wait said.
func (tg *Target) Wait() error {
	select {
	case <-tg.done:
	case <-time.After(Patience):
		tg.t.Fatalf("target %d did not exit", tg.Pid)
	}
	return tg.err
}

// ExitCode waits for the target and returns its exit status.
func (tg *Target) ExitCode() int {
	tg.t.Helper()
	err := tg.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		tg.t.Fatalf("target %d: %v", tg.Pid, err)
	}
	return 0
}

func (tg *Target) Stdout() string { tg.mu.Lock(); defer tg.mu.Unlock(); return tg.stdout.String() }
func (tg *Target) Stderr() string { tg.mu.Lock(); defer tg.mu.Unlock(); return tg.stderr.String() }

// Threads lists the target's thread ids, main thread first.
func (tg *Target) Threads() []int {
	tg.t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", tg.Pid))
	if err != nil {
		tg.t.Fatal(err)
	}
	tids := []int{tg.Pid}
	for _, e := range ents {
		var tid int
		if _, err := fmt.Sscan(e.Name(), &tid); err == nil && tid != tg.Pid {
			tids = append(tids, tid)
		}
	}
	return tids
}

// WaitUntil polls cond until it holds, failing the test after Patience.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// InSyscall reports whether some thread of pid is blocked in syscall nr.
func InSyscall(pid int, nr int) bool {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, e.Name()))
		if strings.HasPrefix(string(b), fmt.Sprintf("%d ", nr)) {
			return true
		}
	}
	return false
}

// Traced reports whether pid has a tracer.
func Traced(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return false
}

// Stdin is the target's standard input, for commands that are answered
// later (or not at all, by a target that stops itself).
func (tg *Target) Stdin() io.Writer { return tg.stdin }

// EnableCores lets the test's children dump core into their working
// directory: it lifts RLIMIT_CORE (children inherit it) and skips the test
// when the kernel sends cores somewhere else (a pipe to a crash collector,
// an absolute path).
func EnableCores(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	pattern := strings.TrimSpace(string(b))
	if err != nil || strings.HasPrefix(pattern, "|") || strings.HasPrefix(pattern, "/") {
		t.Skipf("core_pattern is %q: cores do not land in the process's directory", pattern)
	}
	lim := syscall.Rlimit{Cur: ^uint64(0), Max: ^uint64(0)}
	if err := syscall.Setrlimit(syscall.RLIMIT_CORE, &lim); err != nil {
		t.Skipf("cannot lift RLIMIT_CORE: %v", err)
	}
}

// CoreOf returns the core file a process that ran in dir dumped, after it
// has exited (the kernel has finished writing it by then).
func CoreOf(t testing.TB, dir string, pid int) string {
	t.Helper()
	b, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	pattern := strings.TrimSpace(string(b))
	for _, name := range []string{strings.ReplaceAll(pattern, "%p", fmt.Sprint(pid)), "core." + fmt.Sprint(pid), "core"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("process %d left no core in %s (core_pattern %q)", pid, dir, pattern)
	return ""
}
