package libc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// waitC allocates a little, says "ready ADDR" and waits for stdin to close.
const waitC = `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
	void *p = malloc(100);
	printf("ready %p\n", p);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	free(p);
	return 0;
}
`

// fakeMallocC is an interposer in the style of a real one: it defines the
// allocator entry points and forwards to glibc's internal ones.
const fakeMallocC = `
#include <stddef.h>
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t s) { return __libc_calloc(n, s); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
`

// preloaded starts prog with lib in LD_PRELOAD.
func preloaded(t *testing.T, lib, prog string) *testutil.Target {
	t.Helper()
	cmd := exec.Command(prog)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	return testutil.StartCmd(t, cmd)
}

func detect(t *testing.T, tg *testutil.Target) Allocator {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	a, err := DetectAllocator(readMaps(t, tg.Pid), exe, mapFiles(tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %s (%s)", a.Kind, a.Name, a.Path)
	return a
}

func TestDetectAllocatorGlibc(t *testing.T) {
	a := detect(t, testutil.Start(t, testutil.BuildCSource(t, "wait", waitC)))
	if a.Kind != AllocGlibc || a.Name != "glibc" || !isLibc(maps.Mapping{Path: a.Path}) {
		t.Errorf("got %+v, want glibc", a)
	}
}

func TestDetectAllocatorStatic(t *testing.T) {
	if !fileExists("/usr/lib/x86_64-linux-gnu/libc.a") {
		t.Skip("no libc.a (libc6-dev) for gcc -static")
	}
	prog := testutil.BuildCSource(t, "wait", waitC, "-static")
	a := detect(t, testutil.Start(t, prog))
	if a.Kind != AllocStatic || a.Path != prog {
		t.Errorf("got %+v, want static %s", a, prog)
	}
}

func TestDetectAllocatorStaticPIE(t *testing.T) {
	if !fileExists("/usr/lib/x86_64-linux-gnu/rcrt1.o") {
		t.Skip("no rcrt1.o for gcc -static-pie")
	}
	prog := testutil.BuildCSource(t, "wait", waitC, "-static-pie")
	if a := detect(t, testutil.Start(t, prog)); a.Kind != AllocStatic {
		t.Errorf("got %+v, want static", a)
	}
}

// TestDetectAllocatorGo: this test binary is a Go program without cgo.
func TestDetectAllocatorGo(t *testing.T) {
	ms := readMaps(t, os.Getpid())
	for _, m := range ms {
		if isLibc(m) {
			t.Skip("this test binary links libc")
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := DetectAllocator(ms, exe, mapFiles(os.Getpid()))
	if err != nil || a.Kind != AllocStatic {
		t.Errorf("got %+v, %v; want static", a, err)
	}
}

func TestDetectAllocatorJemalloc(t *testing.T) {
	const lib = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
	if !fileExists(lib) {
		t.Skip("libjemalloc2 not installed")
	}
	a := detect(t, preloaded(t, lib, testutil.BuildCSource(t, "wait", waitC)))
	if a.Kind != AllocInterposed || a.Name != "jemalloc (libjemalloc.so.2)" || a.Path != lib {
		t.Errorf("got %+v, want jemalloc", a)
	}
}

func TestDetectAllocatorFakeInterposer(t *testing.T) {
	so := testutil.BuildCSource(t, "libfakemalloc.so", fakeMallocC, "-shared", "-fPIC")
	a := detect(t, preloaded(t, so, testutil.BuildCSource(t, "wait", waitC)))
	if a.Kind != AllocInterposed || a.Name != "libfakemalloc.so" || a.Path != so {
		t.Errorf("got %+v, want interposed by %s", a, so)
	}
}

// TestDetectAllocatorInExecutable: a program that defines malloc itself
// exports it, and the dynamic linker binds libc's own calls to it.
func TestDetectAllocatorInExecutable(t *testing.T) {
	src := strings.Replace(waitC, "int main", fakeMallocC+"\nint main", 1)
	prog := testutil.BuildCSource(t, "ownmalloc", src)
	a := detect(t, testutil.Start(t, prog))
	if a.Kind != AllocInterposed || a.Name != "ownmalloc" || a.Path != prog {
		t.Errorf("got %+v, want interposed by the executable", a)
	}
}

func TestDetectAllocatorMallocDebug(t *testing.T) {
	const lib = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"
	if !fileExists(lib) {
		t.Skip("no libc_malloc_debug.so.0 (glibc < 2.34)")
	}
	a := detect(t, preloaded(t, lib, testutil.BuildCSource(t, "wait", waitC)))
	if a.Kind != AllocInterposed || !strings.HasPrefix(a.Name, "glibc malloc-debug") {
		t.Errorf("got %+v, want glibc malloc-debug", a)
	}
}

func TestDetectAllocatorMusl(t *testing.T) {
	prog := testutil.BuildCSourceWith(t, "musl-gcc", "wait", waitC) // skips without musl-tools
	a := detect(t, testutil.Start(t, prog))
	if a.Kind != AllocMusl {
		t.Errorf("got %+v, want musl", a)
	}
}

func TestDetectAllocatorMuslNames(t *testing.T) {
	for _, path := range []string{"/lib/ld-musl-x86_64.so.1", "/lib/libc.musl-x86_64.so.1", "/usr/lib/x86_64-linux-musl/libc.so"} {
		ms := []maps.Mapping{{Start: 0x1000, End: 0x2000, Perms: "r-xp", Inode: 1, Path: path}}
		a, err := DetectAllocator(ms, "/bin/prog", nil)
		if err != nil || a.Kind != AllocMusl {
			t.Errorf("%s: %+v %v", path, a, err)
		}
	}
}

func TestDetectAllocatorNoExecutable(t *testing.T) {
	// No libc, no ld.so, and no executable to look at: an error, not a guess.
	open := func(maps.Mapping) (*os.File, error) { return nil, os.ErrNotExist }
	a, err := DetectAllocator(nil, filepath.Join(t.TempDir(), "gone"), open)
	if err == nil || a.Kind != AllocUnknown {
		t.Errorf("got %+v, %v; want an error", a, err)
	}
}

func TestAllocatorKindString(t *testing.T) {
	for k, want := range map[AllocatorKind]string{AllocGlibc: "glibc", AllocInterposed: "interposed", AllocMusl: "musl",
		AllocStatic: "static", AllocUnknown: "unknown", AllocatorKind(42): "unknown", AllocatorKind(-1): "unknown"} {
		if k.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(k), k.String(), want)
		}
	}
}
