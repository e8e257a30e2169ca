package profile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/schema"
	"github.com/arenactl/arenactl/internal/testutil"
)

// info --mysql on a real mariadbd under mariadb-slap: the server's
// performance_schema totals beside malloc's, the waterfall adding up to
// RSS within 1%, and the unaccounted bytes what the lines and the total
// say. A socket served by another process, a DSN that is not one, and
// --mysql with a core are refused.
func TestInfoMySQL(t *testing.T) {
	m := startMariaDB(t, "--performance-schema=ON", "--performance-schema-instrument=memory/%=ON")
	defer m.stop()
	stopLoad := m.load(4, 200)
	pid := fmt.Sprint(m.cmd.Process.Pid)
	for _, args := range [][]string{{"info", "--json", "--mysql", m.sock, pid}, {"info", "--read-only", "--json", "--mysql", m.sock, pid}} {
		r := mustRun(t, args...)
		testutil.ValidateJSON(t, "info", []byte(r.Stdout))
		var doc schema.Info
		if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
			t.Fatal(err)
		}
		wf := doc.Waterfall
		if wf == nil || wf.Server == nil {
			t.Fatalf("%q: no waterfall or no server figures (%+v)", args, wf)
		}
		sv := wf.Server
		if sv.TotalBytes == 0 || len(sv.Events) == 0 || sv.Instruments < len(sv.Events) {
			t.Errorf("%q: server total %d, %d events of %d instruments", args, sv.TotalBytes, len(sv.Events), sv.Instruments)
		}
		var sum, anon uint64
		for _, l := range wf.Lines {
			sum += l.Bytes
			switch l.ID {
			case "held", "tcache", "mmapped", "other-anon":
				anon += l.Bytes
			}
		}
		if int64(wf.RssBytes)-int64(sum) != wf.UnexplainedBytes {
			t.Errorf("%q: lines %d + unexplained %d != RSS %d", args, sum, wf.UnexplainedBytes, wf.RssBytes)
		}
		// Under load the reads of the live server are moments apart;
		// --read-only's image holds it still for the walk.
		if u := wf.UnexplainedBytes; u > int64(wf.RssBytes/100) || -u > int64(wf.RssBytes/100) {
			t.Errorf("%q: %d unexplained of RSS %d, more than 1%%", args, u, wf.RssBytes)
		}
		if sv.UnaccountedBytes != int64(anon)-int64(sv.TotalBytes) {
			t.Errorf("%q: unaccounted %d, the lines say %d", args, sv.UnaccountedBytes, int64(anon)-int64(sv.TotalBytes))
		}
		t.Logf("%q: RSS %d, server counts %d, unaccounted %d, unexplained %d", args, wf.RssBytes, sv.TotalBytes, sv.UnaccountedBytes, wf.UnexplainedBytes)
	}
	if runs, err := stopLoad(); err != nil {
		t.Fatalf("the load failed after %d runs: %v", runs, err)
	}
	out := mustRun(t, "info", "--mysql", m.sock, pid).Stdout
	if !strings.Contains(out, "the server's performance_schema counts") || !strings.Contains(out, "memory/") {
		t.Errorf("info --mysql printed no server figures:\n%s", out)
	}

	other := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "1")
	out = mustRun(t, "info", "--mysql", m.sock, fmt.Sprint(other.Pid)).Stdout
	if !strings.Contains(out, fmt.Sprintf("served by process %s, not %d", pid, other.Pid)) {
		t.Errorf("a socket of another process: %s", out)
	}
	mustQuit(t, other)
	for _, args := range [][]string{{"info", "--mysql", "not a dsn", pid}, {"info", "--mysql", m.sock, testutil.CoreFixtures(t)[0].Core}} {
		if r := run(t, args...); r.Code != exitUsage || strings.Count(r.Stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, %q", args, r.Code, r.Stderr)
		}
	}
}
