package mallocinfo_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
)

// Every fixture, parsed and rendered with its version's layout, comes back
// byte for byte.
func TestRenderRoundTripsEveryFixture(t *testing.T) {
	files, _ := filepath.Glob("testdata/mallocinfo/2.*.xml")
	if len(files) < 8 {
		t.Fatalf("found %d fixtures", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v layouts.Version
		if _, err := fmt.Sscanf(strings.TrimSuffix(filepath.Base(f), ".xml"), "%d.%d", &v.Major, &v.Minor); err != nil {
			t.Fatal(err)
		}
		l, err := layouts.LayoutFor(v)
		if err != nil {
			t.Fatal(err)
		}
		mi, err := mallocinfo.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := mallocinfo.Render(mi, l.Format); !bytes.Equal(got, raw) {
			t.Errorf("%s: rendered XML differs\n--- want\n%s\n--- got\n%s", f, raw, got)
		}
	}
}
