package walk

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/testutil"
)

// bigheap is the benchmarks' fragmented heap (bench/walk/bigheap.c): 16
// arenas, half of the chunks free between kept neighbours.
func bigheap(t *testing.T, pairs int) *testutil.Target {
	t.Helper()
	bin := testutil.BuildC(t, filepath.Join(testutil.RepoRoot(t), "bench", "walk", "bigheap.c"))
	return testutil.Start(t, bin, "16", fmt.Sprint(pairs), "500")
}

// peakRSS runs arenactl and returns its result and its peak RSS, as
// bench/scale/rusage reports it (wait4's ru_maxrss). Not through our own
// wait4: os/exec starts a child sharing this process's memory until it
// execs (CLONE_VM), and the kernel folds the high-water mark of the memory
// left at exec into the child's ru_maxrss, so every child of a test binary
// that grew to 461 MiB after a suite's worth of tests "peaked" at 461 MiB.
// The small wrapper's own is what leaks in there.
func peakRSS(t *testing.T, cmd *exec.Cmd) (result, uint64) {
	t.Helper()
	rusageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "arenactl-rusage-")
		if err == nil {
			rusageBin = filepath.Join(dir, "rusage")
			if out, err := exec.Command("go", "build", "-o", rusageBin, filepath.Join(testutil.RepoRoot(t), "bench", "scale", "rusage")).CombinedOutput(); err != nil {
				rusageErr = fmt.Errorf("building bench/scale/rusage: %v\n%s", err, out)
			}
		} else {
			rusageErr = err
		}
	})
	if rusageErr != nil {
		t.Fatal(rusageErr)
	}
	out := filepath.Join(t.TempDir(), "rusage")
	wrapped := exec.Command(rusageBin, append([]string{out}, cmd.Args...)...)
	wrapped.Env = cmd.Env
	r := runCmd(t, wrapped)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("rusage: %v\n%s", err, r.Stderr)
	}
	var wall, cpu, maxrss uint64
	var code int
	if _, err := fmt.Sscan(string(b), &wall, &cpu, &maxrss, &code); err != nil {
		t.Fatalf("rusage wrote %q: %v", b, err)
	}
	return r, maxrss << 10
}

var (
	rusageOnce sync.Once
	rusageBin  string
	rusageErr  error
)

// Every command that walks or scans a heap stays under 64 MiB plus a bit
// per 16 bytes of heap (docs/scale.md), and grows with the heap by no more
// than that bit: two heaps, the larger four times the smaller. Before the
// walker's cache was bounded (and a core's pages released), a 1.1 GiB heap
// took 190-220 MiB for info, trim and heap, and a heap of a core the whole
// core (1.2 GiB).
func TestPeakRSSBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1.1 GiB heap")
	}
	cmds := [][]string{{"heap"}, {"info", "--read-only"}, {"info"}, {"trim", "--dry-run"}, {"heap", "CORE"}, {"info", "CORE"}}
	type point struct{ heap, rss uint64 }
	got := map[string][]point{}
	for _, pairs := range []int{32768, 131072} { // about 0.27 and 1.1 GiB
		tg := bigheap(t, pairs)
		heap, err := budget.HeapOfPid(tg.Pid)
		if err != nil {
			t.Fatal(err)
		}
		coreFile := filepath.Join(t.TempDir(), "snap.core")
		mustRun(t, "snapshot", "-o", coreFile, fmt.Sprint(tg.Pid))
		for _, c := range cmds {
			args := append([]string(nil), c...)
			if args[len(args)-1] == "CORE" {
				args[len(args)-1] = coreFile
			} else {
				args = append(args, fmt.Sprint(tg.Pid))
			}
			r, rss := peakRSS(t, exec.Command(arenactl, args...))
			if r.Code != 0 {
				t.Fatalf("arenactl %s: exit %d: %s", strings.Join(args, " "), r.Code, r.Stderr)
			}
			name := strings.Join(c, " ")
			bound := budget.Need(budget.Scan, heap)
			t.Logf("%-18s heap %5d MiB: peak RSS %4d MiB (bound %d MiB)", name, heap>>20, rss>>20, bound>>20)
			if rss > bound {
				t.Errorf("%s of a %d MiB heap: peak RSS %d MiB, over 64 MiB + 1 bit per 16 bytes (%d MiB)", name, heap>>20, rss>>20, bound>>20)
			}
			got[name] = append(got[name], point{heap, rss})
		}
		os.Remove(coreFile)
		tg.Quit()
	}
	for name, ps := range got {
		if len(ps) != 2 {
			continue
		}
		// Growing linearly: no more than a bit per 16 bytes of the heap
		// added, and 16 MiB for what the garbage collector's pacing adds
		// (it lets the Go heap grow towards the soft limit budget.Apply
		// sets, which grows with the heap; seen: 14 MiB for 822 MiB).
		grew := int64(ps[1].rss) - int64(ps[0].rss)
		if allowed := int64(ps[1].heap-ps[0].heap)/128 + 16<<20; grew > allowed {
			t.Errorf("%s: peak RSS grew %d MiB for %d MiB more heap, more than %d MiB", name, grew>>20, (ps[1].heap-ps[0].heap)>>20, allowed>>20)
		}
	}
}

// --max-memory below the estimate refuses in one line with exit 17 before
// the process is touched: a process another debugger holds is refused
// for want of memory, not as traced, so arenactl never tried to attach; no
// snapshot file is created.
func TestMaxMemoryRefusesUntouched(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "idle.c"))
	pid := fmt.Sprint(tg.Pid)
	for _, args := range [][]string{
		{"heap", "--max-memory", "1M", pid},
		{"info", "--read-only", "--max-memory", "1M", pid},
		{"info", "--max-memory", "1M", pid},
		{"trim", "--max-memory", "1M", pid},
		{"leaks", "--max-memory", "1M", "--duration", "1s", pid},
	} {
		expectRefusal(t, run(t, args...), exitNoMemory, "process "+pid, "more than --max-memory allows (1 MiB)", "nothing was done to it", "a larger --max-memory")
	}
	out := filepath.Join(t.TempDir(), "snap.core")
	expectRefusal(t, run(t, "snapshot", "--max-memory", "1M", "-o", out, pid), exitNoMemory, "--max-memory")
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused snapshot left %s: %v", out, err)
	}
	for _, bad := range []string{"lots", "0", "-1G", "1.5G"} {
		expectRefusal(t, run(t, "heap", "--max-memory", bad, pid), exitUsage, "--max-memory")
	}
	if testutil.Traced(tg.Pid) {
		t.Error("the process is traced after the refusals")
	}
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Skip("gdb is not installed")
	}
	g := exec.Command(gdb, "-q", "-nx", "-batch", "-p", pid, "-ex", "shell sleep 60")
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { g.Process.Signal(syscall.SIGTERM); g.Wait() }()
	for i := 0; !testutil.Traced(tg.Pid); i++ {
		if i > 2000 {
			t.Fatal("gdb never attached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	expectRefusal(t, run(t, "heap", "--max-memory", "1M", pid), exitNoMemory, "--max-memory")
	expectRefusal(t, run(t, "heap", pid), exitTraced, "already traced")
}

// arenactl run inside a memory cgroup (v2 where its memory controller is
// there, else v1's): a walk and a scan fit a limit the estimate fits, and
// are refused, naming the cgroup, under one it does not.
func TestWalkAndScanInCgroup(t *testing.T) {
	tg := bigheap(t, 32768) // about 0.27 GiB of heap
	pid := fmt.Sprint(tg.Pid)
	cg := testutil.MemoryCgroup(t)
	inCgroup := func(args ...string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg.Dir, arenactl}, args...)...)
	}
	// Room for the estimate (about 66 MiB) and the margin (64 MiB).
	cg.Limit(t, 192<<20)
	for _, args := range [][]string{{"info", "--read-only", pid}, {"heap", pid}} {
		r, rss := peakRSS(t, inCgroup(args...))
		if r.Code != 0 {
			t.Fatalf("arenactl %s in a 192 MiB cgroup: exit %d: %s", strings.Join(args, " "), r.Code, r.Stderr)
		}
		t.Logf("%s in a 192 MiB cgroup: peak RSS %d MiB", strings.Join(args, " "), rss>>20)
	}
	// No room for the estimate once the margin is kept.
	cg.Limit(t, 100<<20)
	for _, args := range [][]string{{"info", "--read-only", pid}, {"heap", pid}} {
		r := runCmd(t, inCgroup(args...))
		expectRefusal(t, r, exitNoMemory, "cgroup", filepath.Base(cg.Dir), "nothing was done to it")
	}
	if testutil.Traced(tg.Pid) {
		t.Error("the process is traced after the refusals")
	}
	tg.Quit()
}

// The parallel scan says what the serial one does: at 1, 2, 7 and 16
// workers, the classes, the types, the leaks (with their examples), the
// roots, the lookups and the bytes read of a live process's image, of its
// snapshot, and of the hostile shapes (a shuffled list, a hash table, a
// lost cycle) are the same. Its rounds are bounded as the serial scan's
// sweeps are: a list linked in no order of address takes three rounds of
// a pass at most (two, then every chunk behind a sweep is read at once).
func TestHeapSameAtAnyJobs(t *testing.T) {
	objs := testutil.Start(t, testutil.BuildCWith(t, "g++", "heapobjs.cpp", "-O2", "-pthread"))
	truth, _ := heapTruth(t, objs)
	shapes := testutil.Start(t, testutil.BuildC(t, "heapshapes.c", "-O2"))
	snap := filepath.Join(t.TempDir(), "heapobjs.core")
	mustRun(t, "snapshot", "-o", snap, fmt.Sprint(objs.Pid))
	for _, target := range []string{fmt.Sprint(objs.Pid), snap, fmt.Sprint(shapes.Pid)} {
		var want string
		for _, jobs := range []string{"1", "2", "7", "16"} {
			args := []string{"heap", "--json", "--jobs", jobs}
			for _, o := range truth {
				args = append(args, "--addr", o.addr)
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(mustRun(t, append(args, target)...).Stdout), &doc); err != nil {
				t.Fatal(err)
			}
			scan, _ := doc["scan"].(map[string]any)
			if sw, _ := scan["sweeps"].(float64); sw > 6 {
				t.Errorf("%s: heap --jobs %s went over the heap %v times; three rounds a pass at most", target, jobs, sw)
			}
			keep := map[string]any{"root_bytes": scan["root_bytes"], "chunk_bytes": scan["chunk_bytes"]}
			for _, k := range []string{"chunks", "bytes", "classes", "types", "leaks", "arenas", "roots", "lookups"} {
				keep[k] = doc[k]
			}
			b, _ := json.Marshal(keep)
			if jobs == "1" {
				want = string(b)
			} else if string(b) != want {
				t.Errorf("%s: heap --jobs %s differs from --jobs 1:\n%s\n%s", target, jobs, b, want)
			}
		}
	}
	objs.Quit()
	shapes.Quit()
}
