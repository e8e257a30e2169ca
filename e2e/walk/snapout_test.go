package walk

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// snapshot -o into a directory that does not exist exited 1 naming the
// temporary .x.core.partial-N file, after the process had been opened; the
// README says -o problems are exit 2. The destination is checked first,
// and the error names the path given (issue 22, item 9).
func TestSnapshotOutputCheckedFirst(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "1")
	missing := filepath.Join(t.TempDir(), "missing", "dir", "x.core")
	notDir := filepath.Join(testutil.BuildC(t, "arenas.c"), "x.core")
	for _, c := range []struct {
		out, pid, want string
	}{
		{missing, fmt.Sprint(tg.Pid), "there is no directory"},
		{missing, "999999", "there is no directory"}, // before the process is looked at
		{notDir, fmt.Sprint(tg.Pid), "is not a directory"},
	} {
		r := run(t, "snapshot", c.pid, "-o", c.out)
		if r.Code != exitUsage || !strings.Contains(r.Stderr, "-o "+c.out+": ") || !strings.Contains(r.Stderr, c.want) || strings.Contains(r.Stderr, ".partial") {
			t.Errorf("snapshot %s -o %s: exit %d, %q", c.pid, c.out, r.Code, r.Stderr)
		}
	}
	mustQuit(t, tg)
}
