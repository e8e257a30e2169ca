package walk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// build386 assembles testdata/i386.S into a 32-bit static program; binutils
// assemble i386 code without an i386 libc.
func build386(t *testing.T) string {
	t.Helper()
	dir := testutil.Dir(t)
	obj, bin := filepath.Join(dir, "i386.o"), filepath.Join(dir, "i386")
	for _, args := range [][]string{
		{"as", "--32", "-o", obj, filepath.Join(testutil.RepoRoot(t), "testdata", "i386.S")},
		{"ld", "-m", "elf_i386", "-o", bin, obj},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Skipf("%s cannot build an i386 program here: %v\n%s", args[0], err, out)
		}
	}
	return bin
}

// A 32-bit program is refused by every command that reads a heap, in one
// line that says what it is, with the architecture's exit code, and is
// never stopped: it answers its line and exits 0 afterwards (issue 31).
// `maps` reads only /proc and works on any program.
func TestRefuses32BitProgram(t *testing.T) {
	tg := testutil.Start(t, build386(t))
	pid := fmt.Sprint(tg.Pid)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"info", pid}, {"info", "--read-only", pid}, {"trim", pid}, {"heap", pid},
		{"snapshot", pid, "-o", filepath.Join(dir, "x.core")},
		{"leaks", "--duration", "1s", pid}, {"growth", "--duration", "1s", pid},
		{"watch", "--count", "1", pid},
	} {
		r := run(t, args...)
		if r.Code != exitArch || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "32-bit i386 program") {
			t.Errorf("arenactl %s: exit %d, %q; want exit %d and one line naming a 32-bit i386 program",
				strings.Join(args, " "), r.Code, r.Stderr, exitArch)
		}
		if st := processState(tg.Pid); st == 't' || st == 'T' {
			t.Fatalf("after arenactl %s the program is left stopped (%c)", strings.Join(args, " "), st)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "x.core")); err == nil {
		t.Error("a refused snapshot left a file")
	}
	mustRun(t, "maps", pid)
	if last, code := tg.Quit(); last != "bye" || code != 0 {
		t.Errorf("the program said %q and exited %d after arenactl; want bye, 0", last, code)
	}
}
