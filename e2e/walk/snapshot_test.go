package walk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// snapshot runs arenactl snapshot and returns its JSON report.
func snapshot(t *testing.T, pid int, path string, flags ...string) jsonSnapshot {
	t.Helper()
	r := mustRun(t, append([]string{"snapshot", "--json", fmt.Sprint(pid), "-o", path}, flags...)...)
	var rep jsonSnapshot
	if err := decodeDoc([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != rep.FileBytes {
		t.Fatalf("%s: %v; the report says %d bytes", path, err, rep.FileBytes)
	}
	return rep
}

func infoJSONOf(t *testing.T, args ...string) jsonInfo {
	t.Helper()
	var rep jsonInfo
	r := mustRun(t, append([]string{"info", "--json"}, args...)...)
	if err := decodeDoc([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Stdout)
	}
	return rep
}

func anonRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	roll, err := maps.ReadRollup(pid)
	if err != nil {
		t.Fatal(err)
	}
	return roll.Anonymous
}

// A snapshot of a process that stopped itself right after printing its own
// malloc_info gives that XML byte for byte, and the same tcaches, arenas and
// mmapped chunks as the live read-only walk, under every glibc available.
// It is small (under 1.2 times the anonymous RSS, compressed or not), gdb
// opens it with every thread, and the target stays stopped and unharmed.
func TestSnapshotMatchesLive(t *testing.T) {
	type run struct {
		name string
		bin  func(t *testing.T) string
		cmd  func(t *testing.T, bin string) *exec.Cmd
	}
	runs := []run{{"system",
		func(t *testing.T) string { return testutil.BuildC(t, "arenas.c") },
		func(t *testing.T, bin string) *exec.Cmd { return exec.Command(bin, "park", "5") }}}
	for _, g := range testutil.GlibcTrees(t) {
		runs = append(runs, run{g.Version,
			func(t *testing.T) string { return testutil.BuildC(t, "arenas.c", testutil.GlibcSysroot(t)...) },
			func(t *testing.T, bin string) *exec.Cmd { return g.Command(bin, "park", "5") }})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			bin := r.bin(t)
			tg := testutil.StartCmd(t, r.cmd(t, bin))
			want := frozenTarget(t, tg)
			anon := anonRSS(t, tg.Pid)
			dir := t.TempDir()
			plain := filepath.Join(dir, "snap.core")
			rep := snapshot(t, tg.Pid, plain)
			if processState(tg.Pid) != 'T' {
				t.Fatal("the target is no longer stopped after the snapshot")
			}
			// Unreadable may count guard pages next to a thread's TLS
			// (glibc 2.42 and later put them inside the stack mapping).
			if rep.Threads != 6 || rep.FrozenUs <= 0 || rep.WalkError != "" || rep.Unreadable > 64<<10 || rep.Compressed {
				t.Errorf("report %+v", rep)
			}
			if got := mustRun(t, "info", "--xml", plain).Stdout; got != string(want) {
				t.Fatalf("the snapshot's walk differs from glibc's malloc_info\n--- glibc\n%s\n--- snapshot\n%s", want, got)
			}
			live := infoJSONOf(t, "--read-only", fmt.Sprint(tg.Pid))
			snap := infoJSONOf(t, plain)
			sameWalk(t, live, snap)
			if t.Failed() {
				// Seen once in a CI rehearsal (2.41: 14 MB fewer written,
				// a heap page read as zeros), never reproduced: say what
				// the snapshot chose and how the mappings were classified.
				t.Logf("snapshot report %+v\n%s", rep, runWithin(t, time.Minute, "maps", fmt.Sprint(tg.Pid)).Stdout)
			}
			if snap.Core == nil || snap.Core.Signal != 0 || snap.Core.CrashTid != tg.Pid || snap.Pid != tg.Pid {
				t.Errorf("core %+v of pid %d", snap.Core, snap.Pid)
			}

			zst := filepath.Join(dir, "snap.core.zst")
			zrep := snapshot(t, tg.Pid, zst)
			if !zrep.Compressed || zrep.FileBytes >= zrep.CoreBytes {
				t.Errorf("zstd report %+v, plain %d bytes", zrep, rep.FileBytes)
			}
			if got := mustRun(t, "info", "--xml", zst).Stdout; got != string(want) {
				t.Fatal("the compressed snapshot gives different XML")
			}
			limit := anon * 12 / 10
			t.Logf("snapshot %d bytes (zstd %d), %d of memory written, %d listed as zeros; anonymous RSS %d; frozen %d µs",
				rep.FileBytes, zrep.FileBytes, rep.DumpedBytes, rep.ZeroBytes, anon, rep.FrozenUs)
			if uint64(rep.FileBytes) > limit {
				t.Errorf("snapshot of %d bytes, over 1.2 × the anonymous RSS (%d)", rep.FileBytes, anon)
			}
			if r.name == "system" {
				gdbThreads(t, bin, plain, tg.Threads())
			}
			thaw(t, tg)
			mustQuit(t, tg)
		})
	}
}

// sameWalk compares what a core's read-only walk found with the live one:
// every thread's tcache and arena, every arena's walk, the mmapped chunks.
func sameWalk(t *testing.T, live, snap jsonInfo) {
	t.Helper()
	if live.ReadOnly == nil || snap.ReadOnly == nil {
		t.Fatal("no read-only walk")
	}
	if !reflect.DeepEqual(live.ReadOnly.Threads, snap.ReadOnly.Threads) {
		t.Errorf("tcaches differ\nlive %+v\nsnapshot %+v", live.ReadOnly.Threads, snap.ReadOnly.Threads)
	}
	if !reflect.DeepEqual(live.ReadOnly.Mmapped, snap.ReadOnly.Mmapped) || !reflect.DeepEqual(live.ReadOnly.Damage, snap.ReadOnly.Damage) {
		t.Errorf("mmapped %+v / %+v, damage %+v / %+v", live.ReadOnly.Mmapped, snap.ReadOnly.Mmapped, live.ReadOnly.Damage, snap.ReadOnly.Damage)
	}
	if len(live.Arenas) != len(snap.Arenas) {
		t.Fatalf("%d arenas live, %d in the snapshot", len(live.Arenas), len(snap.Arenas))
	}
	for i := range live.Arenas {
		if !reflect.DeepEqual(live.Arenas[i], snap.Arenas[i]) {
			t.Errorf("arena %d\nlive %+v\nsnapshot %+v", i, live.Arenas[i].Walk, snap.Arenas[i].Walk)
		}
	}
}

// gdbThreads opens the core with gdb and checks it lists every thread once,
// and returns the backtrace of the first one.
func gdbThreads(t *testing.T, bin, corePath string, tids []int) string {
	t.Helper()
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Log("gdb is not installed: not opening the snapshot with it")
		return ""
	}
	out, err := exec.Command("gdb", "-nx", "-batch", "-ex", "info threads", "-ex", "bt", bin, corePath).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	s := string(out)
	for _, tid := range tids {
		if n := strings.Count(s, fmt.Sprintf("(LWP %d)", tid)); n < 1 || strings.Count(s, fmt.Sprintf("[New LWP %d]", tid)) > 1 {
			t.Errorf("gdb lists thread %d %d times:\n%s", tid, n, s)
		}
	}
	if strings.Contains(s, "not in executable format") || strings.Contains(s, "is not a core dump") {
		t.Errorf("gdb does not take the snapshot for a core:\n%s", s)
	}
	return s
}

// A default snapshot carries every root of a heap scan, the stacks among
// them: gdb unwinds the main thread to main() from it, and heap reads
// every root. --full adds what a scan does not need (shared memory, and
// big anonymous mappings that hold no heap, which this target has none
// of), never less. A running target keeps running, unharmed.
func TestSnapshotFull(t *testing.T) {
	bin := testutil.BuildC(t, "arenas.c")
	tg := testutil.Start(t, bin, "park", "3")
	dir := t.TempDir()
	small, full := filepath.Join(dir, "small.core"), filepath.Join(dir, "full.core")
	rs, rf := snapshot(t, tg.Pid, small), snapshot(t, tg.Pid, full, "--full")
	if !rf.Full || rf.DumpedBytes < rs.DumpedBytes {
		t.Errorf("--full %+v, default %+v", rf, rs)
	}
	if st := processState(tg.Pid); st != 'S' || testutil.Traced(tg.Pid) {
		t.Fatalf("the target is in state %c, traced %v", st, testutil.Traced(tg.Pid))
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target after snapshots: %s", a)
	}
	for _, c := range []struct{ path string }{{small}, {full}} {
		cr, err := core.Open(c.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, th := range cr.Threads {
			var b [8]byte
			if _, err := cr.ReadAt(b[:], th.SP()); err != nil {
				t.Errorf("%s: thread %d's stack pointer %#x: %v", filepath.Base(c.path), th.Tid, th.SP(), err)
			}
		}
		cr.Close()
		if out := gdbThreads(t, bin, c.path, tg.Threads()); out != "" && !strings.Contains(out, " main (") {
			t.Errorf("%s: gdb does not unwind the main thread to main():\n%s", filepath.Base(c.path), out)
		}
		var doc struct {
			Scan struct {
				Unread uint64 `json:"unread_root_bytes"`
			} `json:"scan"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, "heap", "--json", c.path).Stdout), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Scan.Unread != 0 {
			t.Errorf("%s: heap could not read %d bytes of roots", filepath.Base(c.path), doc.Scan.Unread)
		}
	}
	if anon := anonRSS(t, tg.Pid); uint64(rf.FileBytes) > anon*12/10 {
		t.Errorf("--full snapshot of %d bytes, anonymous RSS %d", rf.FileBytes, anon)
	}
	mustQuit(t, tg)
}

// SIGINT while the snapshot is written: the threads are let go first, no
// file (nor a partial one) is left, and arenactl exits 130.
func TestSnapshotInterrupted(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "5")
	dir := t.TempDir()
	out := filepath.Join(dir, "snap.core")
	interrupted := 0
	for i := 0; i < 10 && interrupted < 2; i++ {
		cmd := exec.Command(arenactl, "snapshot", fmt.Sprint(tg.Pid), "-o", out)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A snapshot of this small process can begin and end between two
		// looks at the target (5 ms apart): it then counts as done before
		// the signal. CI once waited for a freeze that was over.
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		exited := false
		testutil.WaitUntil(t, "arenactl to freeze the target", func() bool {
			select {
			case err = <-done:
				exited = true
			default:
			}
			return exited || testutil.Traced(tg.Pid)
		})
		if !exited {
			cmd.Process.Signal(syscall.SIGINT)
			err = <-done
		}
		var ee *exec.ExitError
		switch {
		case err == nil:
			os.Remove(out) // done before the signal
		case errors.As(err, &ee) && ee.ExitCode() == exitInterrupted:
			interrupted++
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("message: %s", stderr.String())
			}
		default:
			t.Fatalf("arenactl: %v: %s", err, stderr.String())
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("files left behind: %v", left)
		}
		if testutil.Traced(tg.Pid) || processState(tg.Pid) != 'S' {
			t.Fatalf("the target is left traced or stopped (state %c)", processState(tg.Pid))
		}
	}
	if interrupted == 0 {
		t.Error("no run was interrupted while writing")
	}
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target: %s", a)
	}
	mustQuit(t, tg)
}

func TestSnapshotRefusals(t *testing.T) {
	expectRefusal(t, run(t, "snapshot", "1"), exitUsage, "-o FILE")
	expectRefusal(t, run(t, "snapshot", "99999999", "-o", filepath.Join(t.TempDir(), "x")), exitNoProcess, "no such process")
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "park", "2")
	// A bad -o is a bad command line, the README says (issue 22, item 9).
	expectRefusal(t, run(t, "snapshot", fmt.Sprint(tg.Pid), "-o", "/nonexistent/dir/x.core"), exitUsage, "/nonexistent/dir")
	if testutil.Traced(tg.Pid) || processState(tg.Pid) != 'S' {
		t.Error("the target was left traced or stopped")
	}
	mustQuit(t, tg)
}
