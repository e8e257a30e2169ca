package glibc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"arenactl/internal/maps"
)

// symsC prints where the dynamic linker resolved some libc symbols (dlsym
// binds to the default version, as a program linked today would), then
// "ready", and waits for stdin to close.
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
	printf("version %s\n", gnu_get_libc_version());
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		printf("sym %s %p\n", names[i], dlsym(libc, names[i]));
	printf("ready\n");
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
`

// buildC compiles src with gcc into a temporary directory; extra are more
// gcc arguments (-static, -shared, a sysroot...).
func buildC(t *testing.T, name, src string, extra ...string) string {
	t.Helper()
	cc := "gcc"
	if len(extra) > 0 && extra[0] == "musl-gcc" {
		cc, extra = "musl-gcc", extra[1:]
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("%s not installed", cc)
	}
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-O1", "-o", out, c}, extra...)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return out
}

// target is a started test program that printed "ready".
type target struct {
	pid   int
	lines []string // its stdout up to "ready"
}

// startTarget runs argv with env added to the environment, waits for its
// "ready" line and kills it when the test ends. Its stdin stays open so it
// can block reading it.
func startTarget(t *testing.T, env []string, argv ...string) *target {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				lines <- got
				return
			}
			got = append(got, sc.Text())
		}
		lines <- nil // exited without "ready"
	}()
	// A guard against a hung child, not a timing check.
	select {
	case got := <-lines:
		if got == nil {
			t.Fatalf("%s exited before printing ready", argv[0])
		}
		return &target{pid: cmd.Process.Pid, lines: got}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never printed ready", argv[0])
	}
	return nil
}

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

// symbolsOf parses symsC's output: version and name -> address.
func symbolsOf(t *testing.T, tg *target) (string, map[string]uint64) {
	t.Helper()
	var version string
	syms := map[string]uint64{}
	for _, l := range tg.lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "version":
			version = f[1]
		case len(f) == 3 && f[0] == "sym":
			v, err := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 64)
			if err != nil {
				t.Fatalf("bad line %q: %v", l, err)
			}
			syms[f[1]] = v
		}
	}
	if version == "" || len(syms) == 0 {
		t.Fatalf("unexpected output %q", tg.lines)
	}
	return version, syms
}

// checkLibc compares FindLibc's view of a running symsC with what the
// program's own dynamic linker said.
func checkLibc(t *testing.T, tg *target) *Libc {
	t.Helper()
	version, want := symbolsOf(t, tg)
	ms := readMaps(t, tg.pid)
	l, err := FindLibc(ms, mapFiles(tg.pid))
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
	prog := buildC(t, "syms", symsC, "-ldl")
	tg := startTarget(t, nil, prog)
	l := checkLibc(t, tg)
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
	root := filepath.Join("..", "..", "testdata", "glibc")
	sysroot := filepath.Join(root, "glibc-2.31")
	if _, err := os.Stat(filepath.Join(sysroot, "usr", "include", "stdio.h")); err != nil {
		t.Skip("no glibc trees: run scripts/fetch-glibc.sh")
	}
	sysroot, _ = filepath.Abs(sysroot)
	lib := filepath.Join(sysroot, "usr", "lib", "x86_64-linux-gnu")
	prog := buildC(t, "syms", symsC, "--sysroot="+sysroot, "-B"+lib+"/", "-L"+lib,
		"-L"+filepath.Join(sysroot, "lib", "x86_64-linux-gnu"),
		"-isystem", filepath.Join(sysroot, "usr", "include"),
		"-isystem", filepath.Join(sysroot, "usr", "include", "x86_64-linux-gnu"), "-ldl")
	trees, _ := filepath.Glob(filepath.Join(root, "glibc-2.*"))
	for _, tree := range trees {
		version := strings.TrimPrefix(filepath.Base(tree), "glibc-")
		t.Run(version, func(t *testing.T) {
			var ldso, libdir string
			for _, d := range []string{"usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"} {
				if p := filepath.Join(tree, d, "ld-linux-x86-64.so.2"); fileExists(p) {
					ldso, libdir = p, filepath.Join(tree, d)
					break
				}
			}
			if ldso == "" {
				t.Skipf("no loader in %s", tree)
			}
			tg := startTarget(t, nil, ldso, "--library-path", libdir, prog)
			l := checkLibc(t, tg)
			if l.Version.String() != version {
				t.Errorf("Version %v in %s", l.Version, tree)
			}
			if version == "2.31" && filepath.Base(l.Path) != "libc-2.31.so" {
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
	notELF := func(maps.Mapping) (*os.File, error) { return os.Open("testdata/mallocinfo/2.36.xml") }
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
		_, v, ok := findBanner([]byte(in))
		if !ok || v.String() != want {
			t.Errorf("findBanner(%q) = %v %v, want %s", in, v, ok, want)
		}
	}
	if _, _, ok := findBanner([]byte("GNU C Library release version x.y")); ok {
		t.Error("findBanner accepted a banner without a version")
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
		id := findNote(b, binary.LittleEndian, "GNU", 3)
		if len(b) == 18 && string(id) != "\xab\xcd" {
			t.Errorf("findNote(%x) = %x", b, id)
		}
	}
}
