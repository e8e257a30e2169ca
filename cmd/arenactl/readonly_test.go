package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"arenactl/internal/testutil"
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

func processState(pid int) byte {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

func thaw(t *testing.T, tg *testutil.Target) {
	t.Helper()
	if err := syscall.Kill(tg.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if a := tg.Next(); a != "ok" {
		t.Fatalf("target after SIGCONT: %q", a)
	}
}

// The read-only walk reproduces glibc's malloc_info byte for byte on the
// same frozen process, under every glibc available, and runs nothing in it.
func TestReadOnlyMatchesMallocInfo(t *testing.T) {
	type run struct {
		name string
		tg   func(t *testing.T) *testutil.Target
	}
	runs := []run{{"system", func(t *testing.T) *testutil.Target {
		return testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "5")
	}}}
	for _, g := range testutil.GlibcTrees(t) {
		runs = append(runs, run{g.Version, func(t *testing.T) *testutil.Target {
			bin := testutil.BuildC(t, "arenas.c", testutil.GlibcSysroot(t)...)
			return testutil.StartCmd(t, g.Command(bin, "park", "5"))
		}})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			tg := r.tg(t)
			want := frozenTarget(t, tg)
			pid := fmt.Sprint(tg.Pid)
			for _, mode := range [][]string{{"--read-only"}, {"--read-only", "--no-freeze"}} {
				got := mustRun(t, append(append([]string{"info", "--xml"}, mode...), pid)...)
				if got.stdout != string(want) {
					t.Fatalf("%v: the walk differs from glibc's malloc_info\n--- glibc\n%s\n--- walk\n%s", mode, want, got.stdout)
				}
			}
			if processState(tg.Pid) != 'T' {
				t.Fatal("the target is no longer stopped after the read-only walk")
			}
			thaw(t, tg)
			mustQuit(t, tg)
		})
	}
}

// The JSON of a read-only walk carries what malloc_info lacks.
func TestReadOnlyExtras(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "3")
	r := mustRun(t, "info", "--read-only", "--json", fmt.Sprint(tg.Pid))
	var got jsonInfo
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
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
