package testutil

import (
	"debug/elf"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CoreFixture is one core of testdata/cores (scripts/make-core-fixtures.sh):
// arenas-<version>-<kind>.core.zst and the malloc_info glibc printed when it
// was taken, arenas-<version>-<kind>.xml.
type CoreFixture struct {
	Name, Version, Kind string // Kind: "kernel" or "snapshot"
	Core                string // the core's path
	XML                 []byte
}

// CoreFixtures lists the committed core fixtures: a kernel core and a
// snapshot for each of glibc 2.31, 2.36, 2.41 and 2.43.
func CoreFixtures(t testing.TB) []CoreFixture {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "testdata", "cores")
	xmls, _ := filepath.Glob(filepath.Join(dir, "arenas-*.xml"))
	var fs []CoreFixture
	for _, x := range xmls {
		name := strings.TrimSuffix(filepath.Base(x), ".xml")
		parts := strings.Split(name, "-")
		b, err := os.ReadFile(x)
		if err != nil || len(parts) != 3 {
			t.Fatalf("%s: %v", x, err)
		}
		fs = append(fs, CoreFixture{Name: name, Version: parts[1], Kind: parts[2], Core: filepath.Join(dir, name+".core.zst"), XML: b})
	}
	if len(fs) != 8 {
		t.Fatalf("%d core fixtures in %s, want a kernel core and a snapshot for each of 2.31, 2.36, 2.41, 2.43", len(fs), dir)
	}
	return fs
}

// LibcFileFor is the libc file of a glibc the fixtures ran under, "" when
// this machine has none: the trees of scripts/fetch-glibc.sh (under
// testdata/glibc), and the system's for 2.36. Its build may differ from the
// fixture's (Debian rebuilds): compare FileBuildID with the core's.
func LibcFileFor(t testing.TB, version string) string {
	for _, g := range GlibcTrees(t) {
		if g.Version == version && g.LibDir != "" {
			return filepath.Join(g.LibDir, "libc.so.6")
		}
	}
	if sys := "/usr/lib/x86_64-linux-gnu/libc.so.6"; version == "2.36" {
		if _, err := os.Stat(sys); err == nil {
			return sys
		}
	}
	return ""
}

// FileBuildID is the GNU build-id of an ELF file, in hex, read with
// debug/elf rather than arenactl's own reader, so that a comparison with
// what arenactl found does not take arenactl's word for both sides.
func FileBuildID(t testing.TB, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		t.Fatalf("%s: build-id note: %v", path, err)
	}
	return hex.EncodeToString(b[16:])
}
