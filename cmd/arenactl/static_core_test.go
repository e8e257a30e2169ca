package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/arenactl/arenactl/internal/testutil"
)

// A core of a static executable, the kernel's and arenactl's snapshot, is
// read through the allocator linked into the executable, as the live
// process is by info --read-only: the XML is the one the program printed
// itself just before, byte for byte.
func TestInfoFromStaticCore(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libc.a"); err != nil {
		t.Skip("no libc.a (libc6-dev) for gcc -static")
	}
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"static", []string{"-static"}},
		{"static-stripped", []string{"-static", "-s"}},
		{"static-pie", []string{"-static-pie"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := testutil.BuildC(t, "arenas.c", c.flags...)

			core, want := crashCore(t, exec.Command(bin, "park", "3"))
			got := mustRun(t, "info", "--xml", core)
			if got.stdout != string(want) {
				t.Fatalf("the core's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", want, got.stdout)
			}
			rep := coreInfo(t, core)
			if !rep.Libc.Static || rep.Libc.Path != bin || rep.Libc.Source != "executable file (build-id match)" {
				t.Errorf("libc %+v", rep.Libc)
			}
			staticThreads(t, rep)

			// The executable's file decides where main_arena is: without
			// it, or with another build at its path, the core is refused.
			moved := bin + ".moved"
			if err := os.Rename(bin, moved); err != nil {
				t.Fatal(err)
			}
			r := run(t, "info", core)
			// --libc names the file that holds the allocator: here the
			// executable, wherever it is now.
			withLibc := run(t, "info", "--xml", "--libc", moved, core)
			// A FIFO where the executable was is not opened (that would
			// block): refused like a missing file.
			if err := syscall.Mkfifo(bin, 0o600); err != nil {
				t.Fatal(err)
			}
			fifo := run(t, "info", core)
			os.Remove(bin)
			os.Rename(moved, bin)
			expectRefusal(t, r, exitError, "static executable", bin)
			expectRefusal(t, fifo, exitError, "static executable", "not a regular file")
			if withLibc.code != 0 || withLibc.stdout != string(want) {
				t.Errorf("with --libc: exit %d, %s", withLibc.code, withLibc.stderr)
			}

			// A snapshot records the allocator: it is read without the file.
			tg := testutil.Start(t, bin, "park", "3")
			want = frozenTarget(t, tg)
			snap := filepath.Join(t.TempDir(), "static.core")
			mustRun(t, "snapshot", fmt.Sprint(tg.Pid), "-o", snap)
			if got := mustRun(t, "info", "--xml", snap); got.stdout != string(want) {
				t.Fatalf("the snapshot's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- snapshot\n%s", want, got.stdout)
			}
			thaw(t, tg)
			mustQuit(t, tg)
			if err := os.Rename(bin, moved); err != nil {
				t.Fatal(err)
			}
			rep = coreInfo(t, snap)
			os.Rename(moved, bin)
			if !rep.Libc.Static || rep.Libc.Source != "snapshot note" {
				t.Errorf("snapshot libc %+v", rep.Libc)
			}
			staticThreads(t, rep)
		})
	}
}

func coreInfo(t *testing.T, core string) jsonInfo {
	t.Helper()
	var rep jsonInfo
	if err := json.Unmarshal([]byte(mustRun(t, "info", "--json", core).stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ReadOnly == nil {
		t.Fatalf("no read_only in the report of %s", core)
	}
	return rep
}

// staticThreads checks that every thread's tcache was found in the
// executable's own TLS block, each thread on an arena of its own.
func staticThreads(t *testing.T, rep jsonInfo) {
	t.Helper()
	ro := rep.ReadOnly
	if rep.Threads != 4 || len(ro.Threads) != 4 || len(ro.Damage) > 0 {
		t.Fatalf("%d threads, read_only threads %+v, damage %+v", rep.Threads, ro.Threads, ro.Damage)
	}
	arenas := map[int]bool{}
	for _, th := range ro.Threads {
		if th.Tcache == 0 || th.Arena == nil || arenas[*th.Arena] {
			t.Errorf("thread %+v", th)
			continue
		}
		arenas[*th.Arena] = true
	}
	if ro.TcachesSkipped != "" {
		t.Errorf("tcaches skipped: %s", ro.TcachesSkipped)
	}
}
