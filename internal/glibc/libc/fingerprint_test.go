package libc

import (
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/testutil"
)

// systemLibc is the libc.so.6 the test programs run with by default.
const systemLibc = "/lib/x86_64-linux-gnu/libc.so.6"

// libcFiles lists every libc.so.6 at hand with the root of its detached
// debug files: the system's, and each tree of scripts/fetch-glibc.sh.
func libcFiles(t *testing.T) map[string]struct{ path, debug string } {
	t.Helper()
	out := map[string]struct{ path, debug string }{"system": {systemLibc, "/usr/lib/debug"}}
	for _, g := range testutil.GlibcTrees(t) {
		if g.LibDir != "" {
			out[g.Version] = struct{ path, debug string }{filepath.Join(g.LibDir, "libc.so.6"), filepath.Join(g.Dir, "usr", "lib", "debug")}
		}
	}
	return out
}

// openELF opens an ELF file for the rest of the test.
func openELF(t *testing.T, path string) *elf.File {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ef.Close() })
	return ef
}

// The fingerprint that dates a static executable without a version string
// works on a shared libc just as well (the same malloc.o, the same strings):
// on every libc at hand it must include the banner's version and point to
// no other layout.
func TestFingerprintOfSharedLibcs(t *testing.T) {
	for name, lf := range libcFiles(t) {
		t.Run(name, func(t *testing.T) {
			ef := openELF(t, lf.path)
			_, v, err := Banner(ef)
			if err != nil {
				t.Fatal(err)
			}
			img, err := readImage(ef)
			if err != nil {
				t.Fatal(err)
			}
			fits := fingerprint(img, readOnlyData(ef))
			t.Logf("glibc %s: fingerprint fits 2.%v", v, fits)
			found := false
			for _, m := range fits {
				found = found || m == v.Minor
				if layouts.ProfileName(m) != layouts.ProfileName(v.Minor) {
					t.Errorf("2.%d (profile %s) fits too", m, layouts.ProfileName(m))
				}
			}
			if !found {
				t.Errorf("the fingerprint misses the banner's %s", v)
			}
		})
	}
}
