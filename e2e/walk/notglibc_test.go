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

// buildGoStatic builds a static Go program (no cgo: no glibc at all) that
// prints "ready" and waits on stdin.
func buildGoStatic(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tfmt.Println(\"ready\")\n\tbufio.NewReader(os.Stdin).ReadString('\\n')\n\tfmt.Println(\"clean\")\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gostatic\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(testutil.Dir(t), "gostatic")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A static program with no glibc malloc (Go's runtime here) was a dead end:
// info said to use --read-only, which then failed with "no glibc version
// string ..." (exit 1). Every command now says in one line that it is not
// glibc malloc, exit 7 (issue 22, item 3).
func TestStaticWithoutGlibcMalloc(t *testing.T) {
	tg := testutil.Start(t, buildGoStatic(t))
	pid := fmt.Sprint(tg.Pid)
	for _, args := range [][]string{{"info", pid}, {"info", "--read-only", pid}, {"trim", pid}, {"snapshot", pid, "-o", filepath.Join(t.TempDir(), "x.core")}} {
		r := run(t, args...)
		if r.Code != exitNotGlibc || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "not glibc malloc") || strings.Contains(r.Stderr, "--read-only") {
			t.Errorf("arenactl %s: exit %d, %q", strings.Join(args, " "), r.Code, r.Stderr)
		}
	}
	tg.Quit()
}
