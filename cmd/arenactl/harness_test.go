package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The tests run the real arenactl binary against real C programs built from
// testdata/ with gcc (internal/testutil). Nothing of the kernel is mocked.

var arenactl string // the binary under test, in a world-readable directory

func TestMain(m *testing.M) {
	os.Exit(testutil.Main(&binaryM{m}))
}

// binaryM builds arenactl before the tests run.
type binaryM struct{ m *testing.M }

func (b *binaryM) Run() int {
	dir, err := os.MkdirTemp("", "arenactl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // some tests run it as nobody
	arenactl = filepath.Join(dir, "arenactl")
	if out, err := exec.Command("go", "build", "-o", arenactl, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building arenactl: %v\n%s", err, out)
		return 1
	}
	return b.m.Run()
}

// result is one run of the arenactl binary.
type result struct {
	stdout, stderr string
	code           int
}

func run(t testing.TB, args ...string) result {
	t.Helper()
	r := runCmd(t, exec.Command(arenactl, args...))
	if r.code == 0 && len(args) > 0 && slices.Contains(args, "--json") {
		// Every document any test makes arenactl print follows its
		// published schema.
		if _, ok := schema.Documents[args[0]]; ok {
			testutil.ValidateJSON(t, args[0], []byte(r.stdout))
		}
	}
	return r
}

func runCmd(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	return runCmdStarted(t, cmd, nil)
}

// runCmdStarted is runCmd, calling started (when not nil) once the
// command runs.
func runCmdStarted(t testing.TB, cmd *exec.Cmd, started func()) result {
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
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running arenactl: %v", err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("arenactl panicked:\n%s", r.stderr)
	}
	return r
}

// mustRun runs arenactl and fails the test unless it exits 0.
func mustRun(t testing.TB, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != 0 {
		t.Fatalf("arenactl %s: exit %d\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// mustQuit ends a target of the arenas.c protocol and checks it found its
// heap intact.
func mustQuit(t testing.TB, tg *testutil.Target) {
	t.Helper()
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target %d at exit: %q, status %d; stderr %q", tg.Pid, line, code, tg.Stderr())
	}
}
