package libc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// symsC says on its ready line ("ready VERSION NAME=ADDR...") where the
// dynamic linker resolved some libc symbols (dlsym binds to the default
// version, as a program linked today would), and waits for stdin to close.
const symsC = `
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	const char *names[] = {"malloc", "free", "malloc_info", "malloc_trim", "fmemopen",
		"fclose", "mmap", "munmap", "setvbuf", "__errno_location", "realpath"};
	if (libc == NULL)
		return 1;
	printf("ready %s", gnu_get_libc_version());
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		printf(" %s=%p", names[i], dlsym(libc, names[i]));
	printf("\n");
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
`

// readMaps parses /proc/PID/maps.
func readMaps(t *testing.T, pid int) []maps.Mapping {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := maps.ParseMaps(f)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// mapFiles opens mappings the way a live process does: through
// /proc/PID/map_files, which works for files in other mount namespaces.
func mapFiles(pid int) FileOpener {
	return func(m maps.Mapping) (*os.File, error) {
		return os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	}
}

// symbolsOf parses symsC's ready line: version and name -> address.
func symbolsOf(t *testing.T, tg *testutil.Target) (string, map[string]uint64) {
	t.Helper()
	var version string
	syms := map[string]uint64{}
	for i, f := range strings.Fields(tg.Ready()) {
		switch name, addr, ok := strings.Cut(f, "="); {
		case i == 1:
			version = f
		case i > 1 && ok:
			v, err := strconv.ParseUint(strings.TrimPrefix(addr, "0x"), 16, 64)
			if err != nil {
				t.Fatalf("bad symbol %q: %v", f, err)
			}
			syms[name] = v
		}
	}
	if version == "" || len(syms) == 0 {
		t.Fatalf("unexpected output %q", tg.Ready())
	}
	return version, syms
}

// checkLibc compares FindLibc's view of a running symsC with what the
// program's own dynamic linker said.
func checkLibc(t *testing.T, tg *testutil.Target) *Libc {
	t.Helper()
	version, want := symbolsOf(t, tg)
	ms := readMaps(t, tg.Pid)
	l, err := FindLibc(ms, mapFiles(tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if l.Version.String() != version {
		t.Errorf("Version %v, gnu_get_libc_version() says %s", l.Version, version)
	}
	if !strings.HasPrefix(l.Banner, "GNU C Library") || !strings.Contains(l.Banner, "release version "+version) {
		t.Errorf("Banner %q", l.Banner)
	}
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(l.BuildID) {
		t.Errorf("BuildID %q is not a 20-byte hex SHA-1", l.BuildID)
	}
	if !libcName.MatchString(filepath.Base(l.Path)) {
		t.Errorf("Path %q", l.Path)
	}
	for name, addr := range want {
		s, ok := l.Lookup(name)
		if !ok {
			t.Errorf("Lookup(%q) found nothing", name)
			continue
		}
		if s.Value != addr {
			t.Errorf("Lookup(%q) = %#x, the dynamic linker says %#x", name, s.Value, addr)
		}
		if s.Size == 0 {
			t.Errorf("Lookup(%q) has size 0", name)
		}
		if !inAny(l.Text, s.Value) {
			t.Errorf("%s at %#x is not in libc's Text %v", name, s.Value, l.Text)
		}
	}
	if _, ok := l.Lookup("no_such_symbol_in_libc"); ok {
		t.Error("Lookup found a symbol that does not exist")
	}
	if len(l.Mappings) < 3 || len(l.Text) == 0 {
		t.Errorf("Mappings %v, Text %v", l.Mappings, l.Text)
	}
	for _, m := range l.Mappings {
		if m.Path != l.Path {
			t.Errorf("mapping %v is not libc's", m)
		}
	}
	loader := FindLoader(ms)
	if len(loader) == 0 {
		t.Error("FindLoader found no ld.so text")
	}
	for _, m := range loader {
		if !m.Executable() || !strings.HasPrefix(filepath.Base(m.Path), "ld-") {
			t.Errorf("FindLoader returned %v", m)
		}
	}
	return l
}

func inAny(ms []maps.Mapping, addr uint64) bool {
	for _, m := range ms {
		if m.Contains(addr) {
			return true
		}
	}
	return false
}

func TestFindLibcSystem(t *testing.T) {
	l := checkLibc(t, testutil.Start(t, testutil.BuildCSource(t, "syms", symsC, "-ldl")))
	t.Logf("%s at %#x: %s, build-id %s", l.Path, l.Base, l.Banner, l.BuildID)

	// realpath and fmemopen have an old version next to the default one:
	// the default must win (checkLibc compared both with dlsym already).
	if l.Version.Less(2, 17) {
		t.Errorf("version %v", l.Version)
	}
}

// TestFindLibcVersions runs symsC under each glibc fetched by
// scripts/fetch-glibc.sh (2.31 as libc-2.31.so, 2.41, 2.43), built against
// the oldest as sysroot so it runs under all of them.
func TestFindLibcVersions(t *testing.T) {
	flags := append(testutil.GlibcSysroot(t), "-ldl") // skips without the trees
	prog := testutil.BuildCSource(t, "syms", symsC, flags...)
	for _, g := range testutil.GlibcTrees(t) {
		t.Run(g.Version, func(t *testing.T) {
			if g.Loader == "" {
				t.Skipf("no loader in %s", g.Dir)
			}
			tg := testutil.StartCmd(t, g.Command(prog))
			l := checkLibc(t, tg)
			if l.Version.String() != g.Version {
				t.Errorf("Version %v in %s", l.Version, g.Dir)
			}
			if g.Version == "2.31" && filepath.Base(l.Path) != "libc-2.31.so" {
				t.Errorf("2.31 libc maps as %s, want libc-2.31.so", l.Path)
			}
		})
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestFindLibcNone: a Go test binary does not link libc (unless cgo pulled
// it in), and FindLibc says so with ErrNoLibc.
func TestFindLibcNone(t *testing.T) {
	ms := readMaps(t, os.Getpid())
	for _, m := range ms {
		if isLibc(m) {
			t.Skip("this test binary links libc")
		}
	}
	if _, err := FindLibc(ms, mapFiles(os.Getpid())); !errors.Is(err, ErrNoLibc) {
		t.Errorf("FindLibc = %v, want ErrNoLibc", err)
	}
	if FindLoader(ms) != nil {
		t.Error("FindLoader found ld.so in a static binary")
	}
}

func TestFindLibcBadFile(t *testing.T) {
	ms := []maps.Mapping{{Start: 0x7f0000000000, End: 0x7f0000001000, Perms: "r--p", Inode: 1, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"}}
	notELF := func(maps.Mapping) (*os.File, error) { return os.Open("libc_test.go") }
	if _, err := FindLibc(ms, notELF); err == nil || !strings.Contains(err.Error(), "libc.so.6") {
		t.Errorf("FindLibc on a non-ELF file: %v", err)
	}
	fail := func(maps.Mapping) (*os.File, error) { return nil, os.ErrPermission }
	if _, err := FindLibc(ms, fail); !errors.Is(err, os.ErrPermission) {
		t.Errorf("FindLibc with a failing opener: %v", err)
	}
}

func TestLibcNames(t *testing.T) {
	for path, want := range map[string]bool{
		"/usr/lib/x86_64-linux-gnu/libc.so.6":              true,
		"/lib/x86_64-linux-gnu/libc-2.31.so":               true,
		"/lib64/libc-2.17.so":                              true,
		"/usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)":    true,
		"/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0": false,
		"/usr/lib/libcrypt.so.1":                           false,
		"/lib/ld-musl-x86_64.so.1":                         false,
		"libc.so.6":                                        false, // not a file path
	} {
		if got := isLibc(maps.Mapping{Path: path}); got != want {
			t.Errorf("isLibc(%q) = %v", path, got)
		}
	}
	for path, want := range map[string]bool{
		"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": true,
		"/lib/ld-linux-aarch64.so.1":                     true,
		"/lib/x86_64-linux-gnu/ld-2.31.so":               true,
		"/lib/ld-musl-x86_64.so.1":                       false,
		"/usr/lib/ld.so.conf":                            false,
	} {
		if got := isLoader(maps.Mapping{Path: path}); got != want {
			t.Errorf("isLoader(%q) = %v", path, got)
		}
	}
}

func TestFindBanner(t *testing.T) {
	for in, want := range map[string]string{
		"\x00GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\nCopyright": "2.36",
		"GNU C Library stable release version 2.17, by Roland McGrath et al.\x00":                  "2.17",
		"GNU C Library: bad\x00GNU C Library (GNU libc) release version 2.43.\n":                   "2.43",
	} {
		_, v, ok := FindBanner([]byte(in))
		if !ok || v.String() != want {
			t.Errorf("FindBanner(%q) = %v %v, want %s", in, v, ok, want)
		}
	}
	if _, _, ok := FindBanner([]byte("GNU C Library release version x.y")); ok {
		t.Error("FindBanner accepted a banner without a version")
	}
}

func TestFindNoteMalformed(t *testing.T) {
	// Truncated and oversized notes must not panic.
	for _, b := range [][]byte{
		nil,
		{4, 0, 0, 0},
		{4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0},
		{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 3, 0, 0, 0},
		{4, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0, 0xab, 0xcd},
	} {
		id := module.FindNote(b, binary.LittleEndian, "GNU", 3)
		if len(b) == 18 && string(id) != "\xab\xcd" {
			t.Errorf("FindNote(%x) = %x", b, id)
		}
	}
}
