package walk

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// info --thread naming no thread of the process said "process PID: no such
// process" of a process that exists (issue 22, item 4). It names the thread
// now, exit 3 still, before anything is stopped.
func TestNoSuchThread(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "1")
	other := fmt.Sprint(os.Getpid()) // a thread, but of this test, not of the target
	for _, args := range [][]string{{"info", "--thread", other}, {"trim", "--thread", other}, {"info", "--thread", "99999999"}} {
		r := run(t, append(args, fmt.Sprint(tg.Pid))...)
		want := fmt.Sprintf("process %d has no thread %s", tg.Pid, args[2])
		if r.Code != exitNoProcess || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, "no such process") {
			t.Errorf("arenactl %s: exit %d, %q; want %q", strings.Join(args, " "), r.Code, r.Stderr, want)
		}
	}
	mustQuit(t, tg)
}
