package walk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

const mallocDebugLib = "/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

// A process that preloads glibc's libc_malloc_debug.so is read, never
// called: with MALLOC_CHECK_ its heap is the library's own copy of malloc
// (one arena, no tcache), without it libc's arenas, which the library only
// wraps. Either way the live walk, a snapshot and a kernel core give the
// XML the program's own malloc_info printed (the library's malloc_info
// dispatches the same way), with and without debug symbols; info and trim
// refuse it with exit 7 and leave it running.
func TestMallocDebug(t *testing.T) {
	// The system's glibc, and every tree of scripts/fetch-glibc.sh that
	// has the library (2.34+: 2.41 and 2.43, whose layout has no fastbins).
	type glibcUnder struct {
		name, lib string
		command   func(t *testing.T, args ...string) *exec.Cmd
	}
	var runs []glibcUnder
	if _, err := os.Stat(mallocDebugLib); err == nil {
		runs = append(runs, glibcUnder{"system", mallocDebugLib, func(t *testing.T, args ...string) *exec.Cmd {
			return exec.Command(testutil.BuildC(t, "arenas.c"), args...)
		}})
	}
	for _, g := range testutil.GlibcTrees(t) {
		lib := filepath.Join(g.LibDir, "libc_malloc_debug.so.0")
		if _, err := os.Stat(lib); err != nil || g.Loader == "" {
			continue
		}
		runs = append(runs, glibcUnder{g.Version, lib, func(t *testing.T, args ...string) *exec.Cmd {
			return g.Command(testutil.BuildC(t, "arenas.c", testutil.GlibcSysroot(t)...), args...)
		}})
	}
	if len(runs) == 0 {
		t.Skip("no libc_malloc_debug.so.0 (glibc 2.34+)")
	}
	noSymbols := t.TempDir()
	for _, g := range runs {
		for _, c := range []struct {
			name, env, object string
			tcache            bool
		}{
			{"MALLOC_CHECK_", "MALLOC_CHECK_=3", "libc_malloc_debug.so.0", false},
			{"wrapping libc", "MALLOC_CHECK_=", "libc.so.6", true},
		} {
			t.Run(g.name+"/"+c.name, func(t *testing.T) {
				command := func() *exec.Cmd {
					cmd := g.command(t, "park", "3")
					cmd.Env = append(os.Environ(), "LD_PRELOAD="+g.lib, c.env)
					return cmd
				}
				tg := testutil.StartCmd(t, command())
				pid := fmt.Sprint(tg.Pid)
				want := frozenTarget(t, tg)
				for _, flags := range [][]string{nil, {"--debug-dir", noSymbols}} {
					got := mustRun(t, append(append([]string{"info", "--read-only", "--xml"}, flags...), pid)...)
					if got.Stdout != string(want) {
						t.Fatalf("%v: the walk differs from the program's malloc_info\n--- program\n%s\n--- walk\n%s", flags, want, got.Stdout)
					}
				}
				info := readOnlyInfo(t, pid, "--debug-dir", noSymbols)
				checkMallocDebugInfo(t, info, c.object, c.tcache)
				if text := mustRun(t, "info", "--read-only", pid).Stdout; !strings.Contains(text, "its 4 threads were stopped") {
					t.Errorf("text output:\n%s", text)
				}

				snap := filepath.Join(t.TempDir(), "debug.core")
				mustRun(t, "snapshot", pid, "-o", snap)
				if got := mustRun(t, "info", "--xml", snap); got.Stdout != string(want) {
					t.Fatalf("the snapshot differs from the program's malloc_info\n--- program\n%s\n--- snapshot\n%s", want, got.Stdout)
				}
				checkMallocDebugInfo(t, coreInfo(t, snap), c.object, c.tcache)
				thaw(t, tg)

				// Nothing is called in it: the pre-flight checks and the
				// injected calls know libc's arenas and locks, not the copy's.
				for _, cmd := range [][]string{{"info", pid}, {"trim", pid}} {
					expectRefusal(t, run(t, cmd...), exitNotGlibc, "libc_malloc_debug.so.0", "--read-only")
				}
				if testutil.Traced(tg.Pid) || processState(tg.Pid) != 'S' {
					t.Error("the target was left traced or stopped")
				}
				if tg.Send("check") != "ok" {
					t.Error("the target's heap check failed")
				}
				mustQuit(t, tg)

				core, want := crashCore(t, command())
				if got := mustRun(t, "info", "--xml", core); got.Stdout != string(want) {
					t.Fatalf("the core differs from the program's malloc_info\n--- program\n%s\n--- core\n%s", want, got.Stdout)
				}
				rep := coreInfo(t, core)
				checkMallocDebugInfo(t, rep, c.object, c.tcache)
				if !strings.Contains(strings.Join(rep.Core.LibcNotes, "\n"), "MALLOC_CHECK_") {
					t.Errorf("no note says which malloc held the heap: %q", rep.Core.LibcNotes)
				}
			})
		}
	}
}

func checkMallocDebugInfo(t *testing.T, info jsonInfo, object string, tcache bool) {
	t.Helper()
	ro := info.ReadOnly
	if filepath.Base(info.Libc.Path) != object || info.Libc.Version == "" {
		t.Errorf("glibc %+v, want the allocator of %s", info.Libc, object)
	}
	if tcache {
		if ro.TcachesSkipped != "" || len(ro.Threads) == 0 {
			t.Errorf("tcaches skipped (%q), threads %+v", ro.TcachesSkipped, ro.Threads)
		}
		return
	}
	if !strings.Contains(ro.TcachesSkipped, "no tcache") || len(info.Arenas) != 1 {
		t.Errorf("tcaches skipped %q, %d arenas: want none and one", ro.TcachesSkipped, len(info.Arenas))
	}
}
