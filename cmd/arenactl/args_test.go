package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// The command line's small lies (issue 22, item 8): "+5" was process 5;
// --timeout -1s ran and failed as "did not stop" (exit 1); --pad and
// --min-change refused 64K while --rate took it; info and maps said they
// take one process id, and their usage lines said PID, though both read
// cores.
func TestCommandLineIsStrict(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "1")
	pid := fmt.Sprint(tg.Pid)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trim", "+" + pid}, `"+` + pid + `" is not a process id`},
		{[]string{"info", "+" + pid}, "is neither a process id nor a readable core file"},
		{[]string{"snapshot", "-o", "/tmp/x.core", " " + pid}, "is not a process id"},
		{[]string{"info", "--timeout", "-1s", pid}, "--timeout -1s: a duration cannot be negative"},
		{[]string{"snapshot", "--timeout", "0s", "-o", "/tmp/x.core", pid}, "--timeout must be above 0"},
		{[]string{"watch", "--interval", "-5s", pid}, "--interval -5s: a duration cannot be negative"},
		{[]string{"info", pid, pid}, "info takes one process id or core file"},
		{[]string{"maps"}, "maps takes one process id or core file"},
		{[]string{"trim", "--pad", "64Q", pid}, "is not a size such as"},
	} {
		r := run(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("arenactl %s: exit %d, %q; want exit 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	if out := mustRun(t, "trim", "--pad", "64K", pid).stdout; !strings.Contains(out, "malloc_trim(65536)") {
		t.Errorf("--pad 64K:\n%s", out)
	}
	mustRun(t, "watch", "--count", "1", "--interval", "1s", "--min-change", "1M", pid)
	for _, cmd := range []string{"info", "maps"} {
		if out := mustRun(t, cmd, "--help").stdout; !strings.Contains(out, "arenactl "+cmd+" PID|CORE") {
			t.Errorf("%s --help: no PID|CORE in the usage line:\n%s", cmd, out)
		}
	}
	mustQuit(t, tg)
}
