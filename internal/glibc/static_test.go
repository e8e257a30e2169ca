package glibc

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/module"
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

// Where a debug file matches libc's build-id, main_arena and mp_ from its
// symbols are exactly where the symbol-free search finds them.
func TestAnchorsFromDebugSymbols(t *testing.T) {
	for name, lf := range libcFiles(t) {
		t.Run(name, func(t *testing.T) {
			id := module.BuildIDOf(openELF(t, lf.path))
			if _, ok := libc.DebugFile(id, []string{lf.debug}); !ok {
				t.Skipf("no debug file for build-id %s under %s (libc6-dbg not installed or fetched)", id, lf.debug)
			}
			var tg *testutil.Target
			if name == "system" {
				tg = testutil.Start(t, testutil.BuildCSource(t, "wait", waitC))
			} else {
				g := treeOf(t, name)
				tg = testutil.StartCmd(t, g.Command(testutil.BuildCSource(t, "wait", waitC, testutil.GlibcSysroot(t)...)))
			}
			l, err := libc.FindLibc(readMaps(t, tg.Pid), mapFiles(tg.Pid))
			if err != nil {
				t.Fatal(err)
			}
			lay, err := layouts.LayoutFor(l.Version)
			if err != nil {
				t.Fatal(err)
			}
			mem := openMem(t, tg.Pid)
			sym, err := FindAnchorsWith(l, lay, mem, []string{t.TempDir(), lf.debug})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := FindAnchorsWith(l, lay, mem, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s / %s", sym.Method, plain.Method)
			if !strings.HasPrefix(sym.Method, "debug symbols (build-id "+id) || strings.Contains(sym.Method, "rejected") {
				t.Errorf("with the debug file: found by %q", sym.Method)
			}
			if !strings.HasPrefix(plain.Method, "static initialiser") {
				t.Errorf("without symbols: found by %q", plain.Method)
			}
			if sym.MainArena != plain.MainArena || sym.Mp != plain.Mp {
				t.Errorf("symbols: main_arena %#x mp_ %#x; signatures: main_arena %#x mp_ %#x",
					sym.MainArena, sym.Mp, plain.MainArena, plain.Mp)
			}
			tg.Stdin().(interface{ Close() error }).Close()
		})
	}
}

// A debug file that does not fit memory is reported, and the symbol-free
// search still answers.
func TestAnchorsRejectWrongSymbols(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildCSource(t, "wait", waitC))
	l, err := libc.FindLibc(readMaps(t, tg.Pid), mapFiles(tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	lay, _ := layouts.LayoutFor(l.Version)
	// A "debug file" for this build-id that is some other object: this
	// test binary's own symbols have no main_arena at all.
	dir := t.TempDir()
	p := filepath.Join(dir, ".build-id", l.BuildID[:2], l.BuildID[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	if err := os.Symlink(self, p); err != nil {
		t.Fatal(err)
	}
	a, err := FindAnchorsWith(l, lay, openMem(t, tg.Pid), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Method, "static initialiser") || !strings.Contains(a.Method, "symbols rejected") {
		t.Errorf("found by %q", a.Method)
	}
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

func treeOf(t *testing.T, version string) testutil.GlibcTree {
	t.Helper()
	for _, g := range testutil.GlibcTrees(t) {
		if g.Version == version {
			if g.Loader == "" {
				t.Skipf("no loader in %s", g.Dir)
			}
			return g
		}
	}
	t.Fatalf("no glibc tree %s", version)
	return testutil.GlibcTree{}
}

// openMem opens a process's memory for reading.
func openMem(t *testing.T, pid int) Memory {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return procMem{f}
}

// procMem reads a live process's memory through /proc/PID/mem.
type procMem struct{ f *os.File }

func (m procMem) ReadAt(b []byte, addr uint64) (int, error) { return m.f.ReadAt(b, int64(addr)) }

// A static executable is its own libc: FindStaticImage dates it and finds
// its allocator, with symbols (unstripped) and without (stripped), PIE or
// not, single-threaded so that no nptl version string helps.
func TestFindStaticImage(t *testing.T) {
	if !fileExists("/usr/lib/x86_64-linux-gnu/libc.a") {
		t.Skip("no libc.a (libc6-dev) for gcc -static")
	}
	_, sysVersion, err := libc.Banner(openELF(t, systemLibc))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"static", []string{"-static"}},
		{"static-stripped", []string{"-static", "-s"}},
		{"static-pie-stripped", []string{"-static-pie", "-s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog := testutil.BuildCSource(t, "wait", waitC, c.flags...)
			tg := testutil.Start(t, prog)
			l, err := libc.FindStaticImage(readMaps(t, tg.Pid), prog, mapFiles(tg.Pid))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: glibc %s from %s, base %#x", l.Path, l.Version, l.VersionFrom, l.Base)
			if !l.Static || l.Path != prog || l.VersionFrom == "" {
				t.Errorf("%+v", l)
			}
			// Without a version string the fingerprint gives a range of
			// versions that share a layout: the system's must be in it.
			if layouts.ProfileName(l.Version.Minor) != layouts.ProfileName(sysVersion.Minor) {
				t.Errorf("version %s, layout %s; the system's glibc is %s, layout %s",
					l.Version, layouts.ProfileName(l.Version.Minor), sysVersion, layouts.ProfileName(sysVersion.Minor))
			}
			lay, err := layouts.LayoutFor(l.Version)
			if err != nil {
				t.Fatal(err)
			}
			a, err := FindAnchorsWith(l, lay, openMem(t, tg.Pid), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := "static initialiser in the executable's .data"
			if c.name == "static" {
				want = "symbols in " + prog
			}
			if a.Method != want {
				t.Errorf("found by %q, want %q", a.Method, want)
			}
			tg.Stdin().(interface{ Close() error }).Close()
		})
	}
}
