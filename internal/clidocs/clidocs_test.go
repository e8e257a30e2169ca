package clidocs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "arenactl", Short: "root"}
	info := &cobra.Command{Use: "info PID", Short: "per-arena statistics", Run: func(*cobra.Command, []string) {}}
	info.Flags().Bool("json", false, "print JSON")
	hidden := &cobra.Command{Use: "gen-docs DIR", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(info, hidden)
	return root
}

// Write lays out what a package installs: man/man1 pages for the visible
// commands only, and the three completion scripts, each valid for its shell.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1779500000") // May 2026
	if err := Write(tree(), dir, "arenactl v9.9.9"); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "man", "man1", "arenactl-info.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`.TH "ARENACTL-INFO" "1" "May 2026" "arenactl v9.9.9" "arenactl manual"`, `\fB--json\fP`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("arenactl-info.1 lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(string(page), "Auto generated") {
		t.Errorf("arenactl-info.1 carries cobra's footer:\n%s", page)
	}
	if _, err := os.Stat(filepath.Join(dir, "man", "man1", "arenactl.1")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "man", "man1", "arenactl-gen-docs.1")); err == nil {
		t.Error("a hidden command got a man page")
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		// -z: parse only; -ww: every warning; the page must render cleanly.
		out, err := exec.Command(groff, "-man", "-z", "-ww", filepath.Join(dir, "man", "man1", "arenactl-info.1")).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff on arenactl-info.1: %v\n%s", err, out)
		}
	}
	for _, s := range []struct{ file, shell string }{{"arenactl.bash", "bash"}, {"_arenactl", "zsh"}, {"arenactl.fish", "fish"}} {
		path := filepath.Join(dir, "completions", s.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(b), "__complete") {
			t.Errorf("%s does not ask the binary for completions", s.file)
		}
		sh, err := exec.LookPath(s.shell)
		if err != nil {
			t.Logf("%s not installed: %s's syntax not checked", s.shell, s.file)
			continue
		}
		if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", s.shell, s.file, err, out)
		}
	}
}
