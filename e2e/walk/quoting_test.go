package walk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// A target's and a core's paths are chosen by whoever made them: an
// executable named with an escape sequence and a newline must not reach
// the terminal raw, nor split a line of arenactl's output (issue 22, item
// 16). Every such string is printed quoted, from a live process, from its
// snapshot, and in an error naming a core's path.
func TestTargetStringsAreQuoted(t *testing.T) {
	bin := testutil.BuildC(t, "arenas.c")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(t.TempDir(), "ev\x1b[2Jil\nforged line")
	if err := os.WriteFile(evil, b, 0o755); err != nil {
		t.Fatal(err)
	}
	tg := testutil.Start(t, evil, "park", "2")
	raw := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "\x1b") || strings.Contains(out, "\nforged line") {
			t.Errorf("%s prints the target's path raw:\n%q", what, out)
		}
		// (A snapshot's mapping list is smaps text, where the kernel
		// wrote the newline as \012.)
		if !strings.Contains(out, `ev\x1b[2Jil\nforged line`) && !strings.Contains(out, `ev\x1b[2Jil\\012forged line`) {
			t.Errorf("%s does not name the path quoted:\n%s", what, out)
		}
	}
	raw("info --read-only", mustRun(t, "info", "--read-only", fmt.Sprint(tg.Pid)).Stdout)
	raw("heap", mustRun(t, "heap", fmt.Sprint(tg.Pid)).Stdout)
	raw("leaks", mustRun(t, "leaks", "--duration", "500ms", fmt.Sprint(tg.Pid)).Stdout)
	if os.Geteuid() == 0 {
		raw("growth", mustRun(t, "growth", "--duration", "500ms", fmt.Sprint(tg.Pid)).Stdout)
	}
	core := filepath.Join(t.TempDir(), "x\x1b]0;title\x07.core")
	raw("snapshot", mustRun(t, "snapshot", fmt.Sprint(tg.Pid), "-o", core).Stdout)
	raw("info CORE", mustRun(t, "info", core).Stdout)
	if out := mustRun(t, "info", core).Stdout; strings.Contains(out, "\x07") {
		t.Errorf("the core's own path is printed raw:\n%q", out)
	}
	r := run(t, "info", filepath.Join(t.TempDir(), "no\nsuch\x1b[31m"))
	if r.Code == 0 || strings.Count(r.Stderr, "\n") != 1 || strings.Contains(r.Stderr, "\x1b") {
		t.Errorf("exit %d, an error of more than one line or with an escape: %q", r.Code, r.Stderr)
	}
	mustQuit(t, tg)
}
