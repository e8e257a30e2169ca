package walk

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// TestGolden pins what arenactl prints for every committed core fixture:
// info as a table, as --json and as --xml, and maps --json. The files are
// read from memory alone (no sysroot, no debug directory, no libc file), so
// the output is the same on every machine. The JSON field names are a
// promise of the README: a change here is a change users see, and must be
// deliberate (go test ./cmd/arenactl -run TestGolden -update).
func TestGolden(t *testing.T) {
	empty := t.TempDir()
	for _, fx := range testutil.CoreFixtures(t) {
		for _, c := range []struct{ suffix, cmd, format string }{
			{".txt", "info", ""},
			{".json", "info", "--json"},
			{".xml", "info", "--xml"},
			{".maps.json", "maps", "--json"},
			{".heap.json", "heap", "--json"},
		} {
			name := fx.Name + c.suffix
			t.Run(name, func(t *testing.T) {
				args := []string{c.cmd}
				if c.format != "" {
					args = append(args, c.format)
				}
				if c.cmd == "info" || c.cmd == "heap" {
					args = append(args, "--sysroot", empty, "--debug-dir", empty, "--no-libc-file")
				}
				// Relative to this package's directory, where go test runs it:
				// the core's path is in the output, and a clone may be anywhere.
				core := filepath.Join("..", "..", "testdata", "cores", filepath.Base(fx.Core))
				compareGolden(t, name, mustRun(t, append(args, core)...).Stdout)
			})
		}
	}
	// diff reads info --json documents: the goldens themselves, of two
	// glibc versions and two processes.
	a := filepath.Join("testdata", "golden", "arenas-2.36-snapshot.json")
	b := filepath.Join("testdata", "golden", "arenas-2.41-snapshot.json")
	for _, c := range []struct{ name, format string }{{"diff.txt", ""}, {"diff.json", "--json"}} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"diff", a, b}
			if c.format != "" {
				args = append(args, c.format)
			}
			compareGolden(t, c.name, mustRun(t, args...).Stdout)
		})
	}
}

// compareGolden checks got against testdata/golden/name, or writes it there
// under -update.
func compareGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n%s", path, firstDiff(string(want), got))
	}
}
