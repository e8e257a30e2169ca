package walk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/arenactl/arenactl/internal/testutil"
)

// crashCore has an arenas.c target write its own malloc_info and dump core
// before anything else allocates; it returns the core and glibc's XML.
func crashCore(t *testing.T, cmd *exec.Cmd) (string, []byte) {
	t.Helper()
	testutil.EnableCores(t)
	dir := t.TempDir()
	cmd.Dir = dir
	tg := testutil.StartCmd(t, cmd)
	own := filepath.Join(dir, "own.xml")
	if _, err := fmt.Fprintf(tg.Stdin(), "crash %s\n", own); err != nil {
		t.Fatal(err)
	}
	if l := tg.Next(); !strings.HasPrefix(l, "crashing") {
		t.Fatalf("target said %q", l)
	}
	tg.Wait()
	xml, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.CoreOf(t, dir, tg.Pid), xml
}

// A kernel core gives the same malloc_info glibc printed just before the
// crash, byte for byte, under every glibc available, plain and compressed.
func TestInfoFromCore(t *testing.T) {
	type run struct {
		name string
		cmd  func(t *testing.T) *exec.Cmd
	}
	runs := []run{{"system", func(t *testing.T) *exec.Cmd {
		return exec.Command(testutil.BuildC(t, "arenas.c"), "park", "4")
	}}}
	for _, g := range testutil.GlibcTrees(t) {
		runs = append(runs, run{g.Version, func(t *testing.T) *exec.Cmd {
			return g.Command(testutil.BuildC(t, "arenas.c", testutil.GlibcSysroot(t)...), "park", "4")
		}})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			core, want := crashCore(t, r.cmd(t))
			got := mustRun(t, "info", "--xml", core)
			if got.Stdout != string(want) {
				t.Fatalf("the core's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", want, got.Stdout)
			}
			var rep jsonInfo
			if err := decodeDoc([]byte(mustRun(t, "info", "--json", core).Stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Core == nil || rep.Core.Signal != int(syscall.SIGABRT) || rep.Threads != 5 || len(rep.ReadOnly.Threads) != 5 {
				t.Fatalf("core %+v, %d threads, read_only threads %d", rep.Core, rep.Threads, len(rep.ReadOnly.Threads))
			}
			table := mustRun(t, "info", core).Stdout
			for _, w := range []string{"core " + core, "SIGABRT", "from the chunk walk"} {
				if !strings.Contains(table, w) {
					t.Errorf("table lacks %q:\n%s", w, table)
				}
			}
			if r.name == "system" {
				zst := core + ".zst"
				compress(t, core, zst)
				if got := mustRun(t, "info", "--xml", zst); got.Stdout != string(want) {
					t.Fatal("the zstd-compressed core gives different XML")
				}
				m := mustRun(t, "maps", core).Stdout
				for _, w := range []string{"main-heap", "arena-heap", "thread-stack", "shared-lib"} {
					if !strings.Contains(m, w) {
						t.Errorf("maps of the core lacks %q:\n%s", w, m)
					}
				}
			}
		})
	}
}

func compress(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	z, _ := zstd.NewWriter(f)
	z.Write(raw)
	z.Close()
	f.Close()
}

func TestBadCoreArguments(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	expectRefusal(t, run(t, "info", empty), exitBadCore, empty, "empty file")
	expectRefusal(t, run(t, "info", "/proc/self/exe"), exitBadCore, "not a core file")
	expectRefusal(t, run(t, "maps", filepath.Join(dir, "missing")), exitUsage, "neither a process id nor a readable core file")
}
