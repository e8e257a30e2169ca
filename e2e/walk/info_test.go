package walk

import (
	"syscall"

	"github.com/arenactl/arenactl/internal/testutil"

	"fmt"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
)

// The target writes malloc_info itself, from its main thread, at a quiescent
// point; arenactl then makes the same thread run malloc_info. Both go
// through a fmemopen stream whose FILE comes from that thread's tcache the
// second time, so the heap is the same for both: the XML must be identical.
func TestInfoMatchesTargetsOwnMallocInfo(t *testing.T) {
	bin := testutil.BuildC(t, "arenas.c")
	tg := testutil.Start(t, bin, "park", "6")
	want := ownReport(t, tg)
	r := mustRun(t, "info", "--xml", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	if r.Stdout != string(want) {
		t.Fatalf("arenactl's XML differs from the target's own malloc_info\n--- target\n%s\n--- arenactl\n%s", want, r.Stdout)
	}

	mi, err := mallocinfo.Parse(want)
	if err != nil {
		t.Fatal(err)
	}
	if len(mi.Arenas) != 7 {
		t.Errorf("target reports %d arenas, want 7 (main + 6 threads)", len(mi.Arenas))
	}
	r = mustRun(t, "info", "--json", "--thread", fmt.Sprint(tg.Pid), fmt.Sprint(tg.Pid))
	var got jsonInfo
	if err := decodeDoc([]byte(r.Stdout), &got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, r.Stdout)
	}
	if len(got.Arenas) != len(mi.Arenas) {
		t.Fatalf("--json has %d arenas, glibc %d", len(got.Arenas), len(mi.Arenas))
	}
	for i, a := range mi.Arenas {
		g := got.Arenas[i]
		if g.Index != a.Index || g.SystemCurrent != a.SystemCurrent || g.SystemMax != a.SystemMax ||
			*g.FastCount != a.FastCount || *g.FastBytes != a.FastBytes || g.RestCount != a.RestCount ||
			g.RestBytes != a.RestBytes || g.AspaceTotal != a.AspaceTotal || g.AspaceMprotect != a.AspaceMprotect {
			t.Errorf("arena %d: --json %+v, glibc %+v", i, g, a)
		}
	}
	if *got.Totals.MmapCount != mi.MmapCount || got.Totals.SystemCurrent != mi.SystemCurrent || got.Totals.RestBytes != mi.RestBytes {
		t.Errorf("totals: --json %+v, glibc mmap %d/%d system %d rest %d", got.Totals, mi.MmapCount, mi.MmapBytes, mi.SystemCurrent, mi.RestBytes)
	}
	if got.Threads != 7 || got.Injection == nil || got.Injection.Tid != tg.Pid || got.Libc.Version == "" {
		t.Errorf("header: threads %d, injection %+v, glibc %+v", got.Threads, got.Injection, got.Libc)
	}
	if len(got.Maps.Classes) == 0 || got.Maps.Process.Rss == 0 {
		t.Errorf("no memory map summary: %+v", got.Maps)
	}
	mustQuit(t, tg)
}

// The table names the glibc version, the borrowed thread, every arena and the
// map classes.
func TestInfoTable(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	r := mustRun(t, "info", fmt.Sprint(tg.Pid))
	for _, want := range []string{"glibc 2.", "malloc_info ran in thread", "0 main", "4 arenas", "mmapped chunks", "main-heap", "arena-heap", "thread-stack", "shared-lib"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("info output lacks %q:\n%s", want, r.Stdout)
		}
	}
}

// Many injections in a row: the target finishes its own work, finds its data
// intact, exits 0, and never printed any XML.
func TestTargetUnharmedByManyInjections(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "5")
	pid := fmt.Sprint(tg.Pid)
	for i := 0; i < 30; i++ {
		mustRun(t, "info", "--json", pid)
		mustRun(t, "trim", "--json", pid)
		if i%10 == 0 {
			if a := tg.Send("check"); a != "ok" {
				t.Fatalf("after %d rounds the target says %q", i+1, a)
			}
		}
	}
	line, code := tg.Quit()
	if line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d; stderr %q", line, code, tg.Stderr())
	}
	for name, out := range map[string]string{"stdout": tg.Stdout(), "stderr": tg.Stderr()} {
		if strings.Contains(out, "<malloc") || strings.Contains(out, "<heap") {
			t.Errorf("the target's %s holds XML:\n%s", name, out)
		}
	}
	if tg.Stderr() != "" {
		t.Errorf("the target wrote to stderr: %q", tg.Stderr())
	}
}

// A single thread spinning in its own code, never in a syscall: it is
// borrowed where it runs (outside libc, no allocator frame), and its loop
// carries on.
func TestInfoOnSingleThreadedBusyLoop(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "busy")
	for i := 0; i < 10; i++ {
		r := mustRun(t, "info", "--json", fmt.Sprint(tg.Pid))
		var got jsonInfo
		if err := decodeDoc([]byte(r.Stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got.Injection.Blocked != "running" || len(got.Arenas) != 1 || got.Threads != 1 {
			t.Fatalf("injection %+v, %d arenas, %d threads", got.Injection, len(got.Arenas), got.Threads)
		}
		mustRun(t, "trim", fmt.Sprint(tg.Pid))
	}
	if err := syscall.Kill(tg.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := tg.ExitCode(); code != 0 {
		t.Fatalf("busy target exited %d after SIGTERM (3 means its heap was damaged)", code)
	}
}

// The same equality under every other glibc that scripts/fetch-glibc.sh
// provides (2.31, 2.41, 2.43 today): the target runs under that glibc's own
// loader, so arenactl must find that libc, its symbols and a safe thread
// there, and glibc's XML must come back unchanged.
func TestInfoOnEveryGlibc(t *testing.T) {
	trees := testutil.GlibcTrees(t)
	if len(trees) == 0 {
		t.Skip("no glibc trees: run scripts/fetch-glibc.sh")
	}
	bin := testutil.BuildC(t, "arenas.c", testutil.GlibcSysroot(t)...)
	for _, g := range trees {
		t.Run(g.Version, func(t *testing.T) {
			tg := testutil.StartCmd(t, g.Command(bin, "park", "3"))
			want := ownReport(t, tg)
			pid := fmt.Sprint(tg.Pid)
			r := mustRun(t, "info", "--xml", "--thread", pid, pid)
			if r.Stdout != string(want) {
				t.Fatalf("arenactl's XML differs from the target's own under glibc %s\n--- target\n%s\n--- arenactl\n%s", g.Version, want, r.Stdout)
			}
			var got jsonInfo
			r = mustRun(t, "info", "--json", pid)
			if err := decodeDoc([]byte(r.Stdout), &got); err != nil {
				t.Fatal(err)
			}
			if got.Libc.Version != g.Version || len(got.Arenas) != 4 {
				t.Errorf("glibc %q (want %s), %d arenas (want 4)", got.Libc.Version, g.Version, len(got.Arenas))
			}
			mustRun(t, "trim", pid)
			mustQuit(t, tg)
		})
	}
}
