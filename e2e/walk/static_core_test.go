package walk

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/testutil"
)

// A core of a static executable, the kernel's and arenactl's snapshot, is
// read through the allocator linked into the executable, as the live
// process is by info --read-only, and without the executable's file from
// memory alone: the XML is the one the program printed itself just
// before, byte for byte.
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
			if got.Stdout != string(want) {
				t.Fatalf("the core's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", want, got.Stdout)
			}
			rep := coreInfo(t, core)
			if !rep.Libc.Static || rep.Libc.Path != bin || rep.Libc.Source != "executable file (build-id match)" {
				t.Errorf("libc %+v", rep.Libc)
			}
			staticThreads(t, rep)

			// Without the executable's file (moved away, a FIFO in its
			// place, or none looked for), memory alone finds main_arena:
			// the one place in the executable's writable data that looks
			// like it. A kernel core holds the pages written since exec,
			// main_arena's and mp_'s among them.
			moved := bin + ".moved"
			if err := os.Rename(bin, moved); err != nil {
				t.Fatal(err)
			}
			missing := run(t, "info", "--xml", core)
			missingRep := coreInfo(t, core)
			// --libc names the file that holds the allocator: here the
			// executable, wherever it is now.
			withLibc := run(t, "info", "--xml", "--libc", moved, core)
			// A FIFO where the executable was is not opened (that would
			// block): passed over like a missing file.
			if err := syscall.Mkfifo(bin, 0o600); err != nil {
				t.Fatal(err)
			}
			fifo := run(t, "info", "--xml", core)
			fifoRep := coreInfo(t, core)
			os.Remove(bin)
			os.Rename(moved, bin)
			noFile := run(t, "info", "--xml", "--no-libc-file", core)
			for name, r := range map[string]result{"missing": missing, "fifo": fifo, "--no-libc-file": noFile, "--libc": withLibc} {
				if r.Code != 0 || r.Stdout != string(want) {
					t.Errorf("%s: exit %d, %s\n--- glibc\n%s\n--- core\n%s", name, r.Code, r.Stderr, want, r.Stdout)
				}
			}
			staticFromMemory(t, missingRep, bin)
			staticFromMemory(t, fifoRep, bin)
			if !slices.ContainsFunc(fifoRep.Core.LibcNotes, func(n string) bool { return strings.Contains(n, "not a regular file") }) {
				t.Errorf("the FIFO is not in the notes: %q", fifoRep.Core.LibcNotes)
			}

			// A snapshot records the allocator: it is read without the file.
			tg := testutil.Start(t, bin, "park", "3")
			want = frozenTarget(t, tg)
			snap := filepath.Join(t.TempDir(), "static.core")
			mustRun(t, "snapshot", fmt.Sprint(tg.Pid), "-o", snap)
			if got := mustRun(t, "info", "--xml", snap); got.Stdout != string(want) {
				t.Fatalf("the snapshot's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- snapshot\n%s", want, got.Stdout)
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

// staticFromMemory checks the report of a static core read without the
// executable's file: the allocator found in memory, the one candidate, with
// every check of main_arena held, and every thread's tcache found in the
// TLS block the program headers in memory size, as with the file.
func staticFromMemory(t *testing.T, rep jsonInfo, bin string) {
	t.Helper()
	ro := rep.ReadOnly
	if !rep.Libc.Static || rep.Libc.Path != bin || rep.Libc.Source != glibc.SourceStaticMemory || !ro.Exact {
		t.Errorf("libc %+v, exact %v", rep.Libc, ro.Exact)
	}
	for _, w := range []string{"the only candidate", "5 of 5 checks held"} {
		if !strings.Contains(ro.FoundBy, w) {
			t.Errorf("found_by %q lacks %q", ro.FoundBy, w)
		}
	}
	staticThreads(t, rep)
}

func coreInfo(t *testing.T, core string) jsonInfo {
	t.Helper()
	var rep jsonInfo
	if err := json.Unmarshal([]byte(mustRun(t, "info", "--json", core).Stdout), &rep); err != nil {
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

// gdb's gcore of a stripped static program, as most of a peer's public
// test cores are, is read from memory alone once the executable is gone:
// the XML is the one the program printed while it was stopped.
func TestStaticGcoreFromMemory(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libc.a"); err != nil {
		t.Skip("no libc.a (libc6-dev) for gcc -static")
	}
	if _, err := exec.LookPath("gcore"); err != nil {
		t.Skip("no gcore (gdb)")
	}
	raw, err := os.ReadFile(testutil.BuildC(t, "arenas.c", "-static", "-s"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "arenas-static")
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	tg := testutil.Start(t, bin, "park", "3")
	want := frozenTarget(t, tg)
	prefix := filepath.Join(t.TempDir(), "gcore")
	out, err := exec.Command("gcore", "-o", prefix, fmt.Sprint(tg.Pid)).CombinedOutput()
	thaw(t, tg)
	mustQuit(t, tg)
	if err != nil {
		t.Fatalf("gcore: %v\n%s", err, out)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	core := fmt.Sprintf("%s.%d", prefix, tg.Pid)
	if got := mustRun(t, "info", "--xml", core); got.Stdout != string(want) {
		t.Fatalf("the gcore's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- core\n%s", want, got.Stdout)
	}
	staticFromMemory(t, coreInfo(t, core), bin)
}

// A static program whose own data holds a copy of main_arena (moved as if
// it lived there: its empty bins point at themselves, its ring closes)
// shows memory alone two places that pass every check but one: whether the
// chunks in the bins link back. With chunks in its bins the original is
// told apart; with none the core is refused in one line, unless the
// executable's file says where main_arena is.
func TestStaticCoreCopyOfMainArena(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libc.a"); err != nil {
		t.Skip("no libc.a (libc6-dev) for gcc -static")
	}
	bin := testutil.BuildC(t, "arenacopy.c", "-static")
	for _, mode := range []string{"binned", "empty"} {
		t.Run(mode, func(t *testing.T) {
			core, want := crashCore(t, exec.Command(bin, mode))
			if got := mustRun(t, "info", "--xml", core); got.Stdout != string(want) {
				t.Fatalf("with the executable's file the walk differs\n--- glibc\n%s\n--- core\n%s", want, got.Stdout)
			}
			r := run(t, "info", "--xml", "--no-libc-file", core)
			if mode == "empty" {
				expectRefusal(t, r, exitError, "static executable", "2 places", "look like main_arena", "--libc")
				return
			}
			if r.Code != 0 || r.Stdout != string(want) {
				t.Fatalf("memory alone: exit %d, %s\n--- glibc\n%s\n--- core\n%s", r.Code, r.Stderr, want, r.Stdout)
			}
			var rep jsonInfo
			if err := json.Unmarshal([]byte(mustRun(t, "info", "--json", "--no-libc-file", core).Stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if w := "the one candidate of 2 whose bins' chunks link back to it"; rep.ReadOnly == nil || !strings.Contains(rep.ReadOnly.FoundBy, w) {
				t.Errorf("found_by lacks %q: %+v", w, rep.ReadOnly)
			}
		})
	}
}
