package walk

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// frozenTarget asks an arenas.c target to write its own malloc_info and stop
// itself before anything else allocates; it returns glibc's XML. The caller
// continues the target with SIGCONT and then reads its "ok".
func frozenTarget(t *testing.T, tg *testutil.Target) []byte {
	t.Helper()
	own := filepath.Join(t.TempDir(), "own.xml")
	if _, err := fmt.Fprintf(tg.Stdin(), "freeze %s\n", own); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the target to stop itself", func() bool { return processState(tg.Pid) == 'T' })
	want, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// glibcRun is one glibc to run a C target under: the system's, or a tree of
// scripts/fetch-glibc.sh.
type glibcRun struct {
	name     string
	debugDir string // where that glibc's libc6-dbg puts its debug files
	start    func(t *testing.T, args ...string) *testutil.Target
}

// glibcRuns lists the glibcs at hand for testdata/<src>: the system's, then
// one per tree (the program built against the oldest tree, so that it runs
// under every tree's loader).
func glibcRuns(t *testing.T, src string) []glibcRun {
	runs := []glibcRun{{"system", "/usr/lib/debug", func(t *testing.T, args ...string) *testutil.Target {
		return testutil.Start(t, testutil.BuildC(t, src), args...)
	}}}
	for _, g := range testutil.GlibcTrees(t) {
		runs = append(runs, glibcRun{g.Version, filepath.Join(g.Dir, "usr", "lib", "debug"), func(t *testing.T, args ...string) *testutil.Target {
			bin := testutil.BuildC(t, src, testutil.GlibcSysroot(t)...)
			return testutil.StartCmd(t, g.Command(bin, args...))
		}})
	}
	return runs
}

// The read-only walk reproduces glibc's malloc_info byte for byte on the
// same frozen process, under every glibc available, with libc's debug
// symbols and without them, and runs nothing in it.
func TestReadOnlyMatchesMallocInfo(t *testing.T) {
	for _, r := range glibcRuns(t, "arenas.c") {
		t.Run(r.name, func(t *testing.T) {
			tg := r.start(t, "park", "5")
			want := frozenTarget(t, tg)
			pid := fmt.Sprint(tg.Pid)
			noSymbols := t.TempDir()
			modes := [][]string{
				{"--read-only", "--debug-dir", r.debugDir},
				{"--read-only", "--debug-dir", noSymbols},
				{"--read-only", "--no-freeze"},
			}
			for _, mode := range modes {
				got := mustRun(t, append(append([]string{"info", "--xml"}, mode...), pid)...)
				if got.Stdout != string(want) {
					t.Fatalf("%v: the walk differs from glibc's malloc_info\n--- glibc\n%s\n--- walk\n%s", mode, want, got.Stdout)
				}
			}
			checkSymbolAnchors(t, pid, r.debugDir, noSymbols)
			if processState(tg.Pid) != 'T' {
				t.Fatal("the target is no longer stopped after the read-only walk")
			}
			thaw(t, tg)
			mustQuit(t, tg)
		})
	}
}

// readOnlyInfo runs info --read-only --json with extra flags.
func readOnlyInfo(t *testing.T, pid string, flags ...string) jsonInfo {
	t.Helper()
	r := mustRun(t, append(append([]string{"info", "--read-only", "--json"}, flags...), pid)...)
	var got jsonInfo
	if err := decodeDoc([]byte(r.Stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	if got.ReadOnly == nil {
		t.Fatalf("no read_only in\n%s", r.Stdout)
	}
	return got
}

// checkSymbolAnchors: libc's debug file, when debugDir has the one of its
// build-id, locates main_arena and mp_ where the symbol-free search does.
func checkSymbolAnchors(t *testing.T, pid, debugDir, noSymbols string) {
	t.Helper()
	sym := readOnlyInfo(t, pid, "--debug-dir", debugDir)
	plain := readOnlyInfo(t, pid, "--debug-dir", noSymbols)
	id := sym.Libc.BuildID
	debugFile := filepath.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")
	t.Logf("with %s: %s; without: %s", debugDir, sym.ReadOnly.FoundBy, plain.ReadOnly.FoundBy)
	if _, err := os.Stat(debugFile); err != nil {
		t.Logf("no %s (libc6-dbg missing): the symbol path is not exercised", debugFile)
	} else if !strings.HasPrefix(sym.ReadOnly.FoundBy, "debug symbols (build-id "+id) {
		t.Errorf("with %s: found by %q", debugFile, sym.ReadOnly.FoundBy)
	}
	if !strings.HasPrefix(plain.ReadOnly.FoundBy, "static initialiser") {
		t.Errorf("without symbols: found by %q", plain.ReadOnly.FoundBy)
	}
	if sym.ReadOnly.MainArena != plain.ReadOnly.MainArena || sym.ReadOnly.Mp != plain.ReadOnly.Mp {
		t.Errorf("symbols: main_arena %#x, mp_ %#x; without: main_arena %#x, mp_ %#x",
			sym.ReadOnly.MainArena, sym.ReadOnly.Mp, plain.ReadOnly.MainArena, plain.ReadOnly.Mp)
	}
}

// The JSON of a read-only walk carries what malloc_info lacks.
func TestReadOnlyExtras(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	got := readOnlyInfo(t, fmt.Sprint(tg.Pid))
	if got.Injection != nil || got.ReadOnly == nil || got.ReadOnly.Torn || got.ReadOnly.FrozenUs <= 0 {
		t.Fatalf("read_only %+v, injection %+v", got.ReadOnly, got.Injection)
	}
	if len(got.Arenas) != 4 || len(got.ReadOnly.Threads) != 4 {
		t.Fatalf("%d arenas, %d threads", len(got.Arenas), len(got.ReadOnly.Threads))
	}
	for _, a := range got.Arenas {
		w := a.Walk
		if w == nil || !w.Walked || w.InUseBytes == 0 || w.TopSize == 0 {
			t.Errorf("arena %d: walk %+v", a.Index, w)
			continue
		}
		// The chunk walk and glibc's counters agree: every byte of the
		// arena is in use, free in a bin or fastbin, the top chunk, or
		// the arena's own header.
		free := w.FreeBytes + w.FastBytes
		if sum := w.InUseBytes + free + w.TopSize; sum > a.SystemCurrent || a.SystemCurrent-sum > 0x1000 {
			t.Errorf("arena %d: in use %d + free %d + top %d = %d, system %d", a.Index, w.InUseBytes, free, w.TopSize, sum, a.SystemCurrent)
		}
	}
	tg.Quit()
}
