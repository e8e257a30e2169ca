package main

import (
	"strings"
	"testing"
)

// A flag error names the command once: cobra's Name() of the root is
// "arenactl", so "arenactl " + Name() once said "arenactl arenactl --help".
func TestUsageErrorNamesCommandOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"--bogus"}, "unknown flag: --bogus (see 'arenactl --help')"},
		{[]string{"info", "--bogus", "1"}, "unknown flag: --bogus (see 'arenactl info --help')"},
		{[]string{"info"}, "info takes one process id or core file (see 'arenactl info --help')"},
		{[]string{"version", "x"}, "version takes no arguments (see 'arenactl version --help')"},
		{[]string{"info", "--version"}, "unknown flag: --version (see 'arenactl info --help')"},
	} {
		r := run(t, tc.args...)
		expectRefusal(t, r, exitUsage, tc.hint)
		if strings.Contains(r.Stderr, "arenactl arenactl") {
			t.Errorf("arenactl %s: %q names the command twice", strings.Join(tc.args, " "), r.Stderr)
		}
	}
}

// `version` and --version print the same report; the test build is not
// stamped, so its version is "devel" (or the pseudo-version Go records
// from VCS), and it names the module and the toolchain.
func TestVersion(t *testing.T) {
	v := mustRun(t, "version")
	for _, flag := range []string{"--version", "-v"} {
		if r := mustRun(t, flag); r.Stdout != v.Stdout || r.Stderr != "" {
			t.Errorf("arenactl %s printed %q (stderr %q), arenactl version %q", flag, r.Stdout, r.Stderr, v.Stdout)
		}
	}
	lines := strings.Split(strings.TrimSuffix(v.Stdout, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "arenactl ") ||
		lines[1] != "module:  github.com/arenactl/arenactl (devel)" && !strings.HasPrefix(lines[1], "module:  github.com/arenactl/arenactl v") ||
		!strings.HasPrefix(lines[2], "commit:  ") || !strings.HasPrefix(lines[3], "go:      go1.") {
		t.Errorf("arenactl version:\n%s", v.Stdout)
	}
	// The shipped binary carries no documentation generator (gendocs tag).
	expectRefusal(t, run(t, "gen-docs", t.TempDir()), exitUsage, "unknown command")
}
