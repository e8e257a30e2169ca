package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// watch and the exporter read from a copy-on-write image by default; their
// help and the README's collection_walk_seconds described the older walk
// with every thread stopped as what they do (issue 22, item 5).
func TestHelpDescribesTheImage(t *testing.T) {
	for _, cmd := range []string{"watch", "exporter"} {
		out := mustRun(t, cmd, "--help").Stdout
		long := out[:strings.Index(out, "Usage:")]
		if !strings.Contains(long, "copy-on-write image") || strings.Contains(long, "every\nthread is stopped while the allocator's lists are walked") ||
			strings.Contains(long, "every thread is stopped for the walk of its allocator") {
			t.Errorf("%s --help does not say it reads an image by default:\n%s", cmd, long)
		}
	}
	readme, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "docs", "commands", "exporter.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `arenactl_collection_walk_seconds` \\|.*$").FindString(string(readme))
	if !strings.Contains(row, "image") {
		t.Errorf("docs/commands/exporter.md: %s", row)
	}
}
