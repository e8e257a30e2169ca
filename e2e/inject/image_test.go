package inject

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// bigMiB is the heap of TestImageBigHeapSelfChecking; ARENACTL_BIG_MIB
// sets it (e.g. 8192 for the long form).
func bigMiB() int { return testutil.Rounds("ARENACTL_BIG_MIB", 1024) }

// imageKillRounds is how many runs TestSIGKILLDuringImage kills;
// ARENACTL_IMAGE_KILL_ROUNDS sets it.
func imageKillRounds() int { return testutil.Rounds("ARENACTL_IMAGE_KILL_ROUNDS", 8) }

// liveImages lists the processes other than pid that run pid's executable
// and are not zombies: images of it that still run.
func liveImages(t *testing.T, pid int) []int {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		if x, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); err != nil || x != exe {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X' {
			out = append(out, p)
		}
	}
	return out
}

// noImageLeft waits until no image of pid runs (an image whose arenactl
// was killed ends by itself within its 2 s lease), and checks pid has no
// child.
func noImageLeft(t *testing.T, pid int) {
	t.Helper()
	testutil.WaitUntil(t, fmt.Sprintf("no image of process %d to run", pid), func() bool { return len(liveImages(t, pid)) == 0 })
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); strings.TrimSpace(string(b)) != "" {
		t.Errorf("process %d has children: %s", pid, b)
	}
}

// A large heap, read from images and snapshotted from images again and
// again while its workers change it: the workers find every block as they
// left it, nothing runs or stays behind.
func TestImageBigHeapSelfChecking(t *testing.T) {
	mib := bigMiB()
	tg := testutil.Start(t, testutil.BuildC(t, "bigcheck.c", "-O2"), strconv.Itoa(mib))
	pid := fmt.Sprint(tg.Pid)
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		r := mustRun(t, "info", "--read-only", "--json", pid)
		var doc struct {
			ReadOnly struct {
				FrozenUs int64  `json:"frozen_us"`
				WalkUs   int64  `json:"walk_us"`
				Hold     string `json:"hold"`
			} `json:"read_only"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.ReadOnly.Hold != "image" {
			t.Fatalf("read-only walk %d held the process by %q, want an image", i, doc.ReadOnly.Hold)
		}
		t.Logf("%d MiB: stopped %d µs, walked %d µs", mib, doc.ReadOnly.FrozenUs, doc.ReadOnly.WalkUs)
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("after read-only walk %d the target says %q", i, a)
		}
		noImageLeft(t, tg.Pid)
	}
	for i := 0; i < 1; i++ {
		core := filepath.Join(dir, "big.core")
		r := mustRun(t, "snapshot", pid, "-o", core, "--json")
		if !strings.Contains(r.Stdout, `"hold": "image"`) {
			t.Fatalf("snapshot %d was not written from an image: %s", i, r.Stdout)
		}
		mustRun(t, "info", core)
		os.Remove(core)
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("after snapshot %d the target says %q", i, a)
		}
		noImageLeft(t, tg.Pid)
	}
	if left := markedMappings(t, tg.Pid); len(left) != 0 {
		t.Errorf("call sites left in the target: %v", left)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// SIGKILL of arenactl at random moments of read-only walks and snapshots
// made from images: while every thread is stopped, while the image is
// made, while it is read. No image outlives its lease, the target checks
// itself after every kill, and a later complete run removes what a killed
// one left.
func TestSIGKILLDuringImage(t *testing.T) {
	for _, c := range []struct {
		name string
		src  string
		args []string
	}{
		// Registers, syscall restarts and signal masks of every kind of
		// thread, the one borrowed for the clone among them.
		{"selfcheck", "selfcheck.c", nil},
		// A heap whose walk and dump take long enough to be killed in.
		{"bigcheck", "bigcheck.c", []string{"128"}},
		// Memory left out of the image: the marks around the clone are
		// undone, the program's own kept, whenever arenactl dies.
		{"pool", "pool.c", []string{"256"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := testutil.Start(t, testutil.BuildC(t, c.src, "-O2"), c.args...)
			pid := fmt.Sprint(tg.Pid)
			core := filepath.Join(t.TempDir(), "k.core")
			verbs := [][]string{{"info", "--read-only", "--freeze", "image", pid}, {"snapshot", "--freeze", "image", pid, "-o", core}}
			start := time.Now()
			mustRun(t, verbs[1]...)
			span := time.Since(start) * 5 / 4
			seed := time.Now().UnixNano()
			rng := rand.New(rand.NewSource(seed))
			t.Logf("seed %d, a snapshot takes %v", seed, span*4/5)
			for i := 0; i < imageKillRounds(); i++ {
				args := verbs[i%2]
				cmd := exec.Command(arenactl, args...)
				cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				delay := time.Duration(rng.Int63n(int64(span)))
				time.Sleep(delay)
				cmd.Process.Kill()
				cmd.Wait()
				testutil.WaitUntil(t, "the target to be untraced", func() bool { return !testutil.Traced(tg.Pid) })
				noImageLeft(t, tg.Pid)
				if st := stoppedThreads(tg.Pid); st != "" {
					t.Fatalf("round %d (%s, killed after %v): threads left stopped: %s", i, args[0], delay, st)
				}
				if a := tg.Send("check"); a != "ok" {
					t.Fatalf("round %d (%s, killed after %v): target says %q", i, args[0], delay, a)
				}
			}
			r := mustRun(t, "info", "--read-only", pid)
			if left := unexplainedSites(t, tg.Pid, r.Stderr); len(left) != 0 {
				t.Errorf("call sites still in the target after a complete run: %v; it said: %s", left, r.Stderr)
			}
			noImageLeft(t, tg.Pid)
			if line, code := tg.Quit(); line != "clean" || code != 0 {
				t.Fatalf("target: %q, exit %d", line, code)
			}
		})
	}
}

// refusesImage checks that --freeze image on pid exits 14 with one line
// holding why, and that the default falls back to a frozen walk whose
// output holds fallback.
func refusesImage(t *testing.T, pid, why, fallback string) {
	t.Helper()
	r := run(t, "info", "--read-only", "--freeze", "image", pid)
	if r.Code != exitNoImage || !strings.Contains(r.Stderr, why) || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q; want exit %d and one line naming the %s", r.Code, r.Stderr, exitNoImage, why)
	}
	r = mustRun(t, "info", "--read-only", pid)
	if !strings.Contains(r.Stdout, fallback) {
		t.Errorf("the fallback does not say why there was no image:\n%s", r.Stdout)
	}
}

// A target in a cgroup without room for the pages it might write while an
// image lives gets no image: --freeze image refuses (exit 14) and nothing
// is stopped; the default reads it frozen instead and says why.
func TestImageRefusedNearCgroupLimit(t *testing.T) {
	cg := testutil.MemoryCgroup(t)
	tg := testutil.Start(t, testutil.BuildC(t, "bigcheck.c", "-O2"), "64", "2", "still")
	cg.Add(t, tg.Pid)
	cg.Limit(t, cg.Usage(t)+256<<10)
	refusesImage(t, fmt.Sprint(tg.Pid), "cgroup", "no copy-on-write image")
	checkedInCgroup(t, cg, tg)
}

// checkedInCgroup checks that no image of tg is left and that tg finds
// itself whole, then lifts cg's limit and lets tg exit.
func checkedInCgroup(t *testing.T, cg *testutil.Cgroup, tg *testutil.Target) {
	t.Helper()
	noImageLeft(t, tg.Pid)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target says %q", a)
	}
	cg.Limit(t, 1<<40)
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// The room an image needs does not count memory it leaves out, which it
// never shares, so never copies: a process whose memory is mostly a pool
// gets an image in a cgroup with room for its heap alone.
func TestImageLeavesOutNearCgroupLimit(t *testing.T) {
	cg := testutil.MemoryCgroup(t)
	tg := testutil.Start(t, testutil.BuildC(t, "pool.c", "-O2"), "256")
	cg.Add(t, tg.Pid)
	cg.Limit(t, cg.Usage(t)+32<<20)
	r := mustRun(t, "info", "--read-only", "--freeze", "image", "--json", fmt.Sprint(tg.Pid))
	if !strings.Contains(r.Stdout, `"hold": "image"`) || !strings.Contains(r.Stdout, fmt.Sprintf(`"left_out_bytes": %d`, 256<<20)) {
		t.Errorf("want an image without the pool: %s", r.Stdout)
	}
	checkedInCgroup(t, cg, tg)
}

// A clone the kernel refuses (here: a pids cgroup at its limit, for the
// helper, then for the image itself) leaves nothing: no image, no child to
// reap, every thread's signal mask its own; --freeze image says so (exit
// 14), the default falls back to a frozen walk.
func TestImageCloneRefused(t *testing.T) {
	for _, room := range []int{0, 1} { // tasks the cgroup allows beyond the target's
		t.Run(fmt.Sprintf("room%d", room), func(t *testing.T) {
			cg := testutil.PidsCgroup(t)
			tg := testutil.Start(t, testutil.BuildC(t, "selfcheck.c", "-O2"))
			cg.Add(t, tg.Pid)
			cg.Set(t, "pids.max", fmt.Sprint(len(tg.Threads())+room))
			refusesImage(t, fmt.Sprint(tg.Pid), "clone", "no copy-on-write image")
			noImageLeft(t, tg.Pid)
			if a := tg.Send("check"); a != "ok" {
				t.Fatalf("target says %q", a)
			}
			cg.Set(t, "pids.max", "max")
			if line, code := tg.Quit(); line != "clean" || code != 0 {
				t.Fatalf("target: %q, exit %d", line, code)
			}
		})
	}
}

// A child subreaper would adopt the image when its helper exits (orphans
// go to the nearest subreaper above their parent, and the helper's parent
// is the process): no image is made of one. --freeze image says so (exit
// 14), the default falls back to a frozen walk, and the process never has
// a child of ours or a SIGCHLD. snapshot takes the same way.
func TestImageRefusedForSubreaper(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "subreaper.c", "-O2"))
	pid := fmt.Sprint(tg.Pid)
	refusesImage(t, pid, "subreaper", "subreaper")
	mustRun(t, "snapshot", "-o", filepath.Join(t.TempDir(), "s.core"), pid)
	noImageLeft(t, tg.Pid)
	if a := tg.Send("check"); a != "ok" {
		t.Fatalf("target says %q", a)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// vmFlags maps each mapping of pid ("start-end") to its smaps VmFlags.
func vmFlags(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Count(f[0], "-") == 1 && !strings.HasSuffix(f[0], ":") {
			cur = f[0]
		} else if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			out[cur] = strings.TrimSpace(v)
		}
	}
	return out
}

// withoutStack drops the [stack] line from a maps text, and its entry from
// vmFlags: the main thread's stack grows down under the frame a call
// borrowing it pushes (any injection's, not the leaving out's).
func withoutStack(maps string, flags map[string]string) (string, map[string]string) {
	var keep []string
	out := map[string]string{}
	for k, v := range flags {
		out[k] = v
	}
	for _, l := range strings.Split(maps, "\n") {
		if strings.HasSuffix(l, "[stack]") {
			delete(out, strings.Fields(l)[0])
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n"), out
}

// A process whose memory is mostly a pool malloc does not own (like
// mariadbd's buffer pool): the image is made without the pool, the walk
// gives what a frozen walk gives, and the process is left as it was: the
// same mappings, the same flags (its own MADV_DONTFORK mark kept), and a
// fork of its own still gets the pool and still does not get the region
// it marked.
func TestImageLeavesOutForeignMemory(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "pool.c", "-O2"), "512")
	pid := fmt.Sprint(tg.Pid)
	mapsBefore, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	flagsBefore := vmFlags(t, tg.Pid)
	marked := 0
	for _, f := range flagsBefore {
		if strings.Contains(" "+f+" ", " dc ") {
			marked++
		}
	}
	if marked == 0 {
		t.Fatalf("the target's own MADV_DONTFORK region shows no dc flag: %v", flagsBefore)
	}

	r := mustRun(t, "info", "--read-only", "--json", pid)
	var doc struct {
		ReadOnly struct {
			Hold         string `json:"hold"`
			FrozenUs     int64  `json:"frozen_us"`
			CloneUs      int64  `json:"clone_us"`
			LeftOut      int    `json:"left_out"`
			LeftOutBytes uint64 `json:"left_out_bytes"`
		} `json:"read_only"`
		Maps struct {
			Classes []struct {
				Class string `json:"class"`
				RSS   uint64 `json:"rss"`
			} `json:"classes"`
		} `json:"maps"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	// The pool sits at a 64 MiB boundary like a thread arena's heap, and
	// holds none: it is anonymous memory in the memory map.
	for _, c := range doc.Maps.Classes {
		if c.Class == "arena-heap" && c.RSS >= 64<<20 || c.Class == "anon" && c.RSS < 512<<20 {
			t.Errorf("the pool is not counted as anonymous memory outside the heaps: %+v", doc.Maps.Classes)
		}
	}
	ro := doc.ReadOnly
	t.Logf("stopped %d µs, clone %d µs, left out %d mappings, %d bytes", ro.FrozenUs, ro.CloneUs, ro.LeftOut, ro.LeftOutBytes)
	if ro.Hold != "image" || ro.LeftOut != 1 || ro.LeftOutBytes != 512<<20 {
		t.Errorf("want an image without the 512 MiB pool (and without counting the region the target marked itself): %s", r.Stdout)
	}
	if !strings.Contains(mustRun(t, "info", "--read-only", pid).Stdout, "the image left out one mapping of 512.0 MiB") {
		t.Errorf("the text output does not say what the image left out")
	}
	// Byte for byte what a walk of the stopped process itself gives (the
	// workers are idle).
	image := mustRun(t, "info", "--read-only", "--xml", pid).Stdout
	frozen := mustRun(t, "info", "--read-only", "--freeze", "walk", "--xml", pid).Stdout
	if image != frozen {
		t.Errorf("the XML from the image without the pool differs from a frozen walk's:\n%s\n---\n%s", image, frozen)
	}

	// A snapshot made without the pool: the pool listed, nothing of it
	// dumped, the same XML read back.
	core := filepath.Join(t.TempDir(), "pool.core")
	sr := mustRun(t, "snapshot", pid, "-o", core, "--json")
	var snap struct {
		Hold         string `json:"hold"`
		LeftOut      int    `json:"left_out"`
		LeftOutBytes uint64 `json:"left_out_bytes"`
		FileBytes    int64  `json:"file_bytes"`
	}
	if err := json.Unmarshal([]byte(sr.Stdout), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Hold != "image" || snap.LeftOut != 1 || snap.LeftOutBytes != 512<<20 || snap.FileBytes >= 512<<20 {
		t.Errorf("want a snapshot from an image without the pool, and a core smaller than it: %s", sr.Stdout)
	}
	if got := mustRun(t, "info", "--xml", core).Stdout; got != frozen {
		t.Errorf("the XML of the snapshot differs from a frozen walk's:\n%s\n---\n%s", got, frozen)
	}
	if !coreLists(t, core, poolStart(t, tg.Pid)) {
		t.Errorf("the core does not list the pool's mapping")
	}

	mapsAfter, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	before, fBefore := withoutStack(string(mapsBefore), flagsBefore)
	after, fAfter := withoutStack(string(mapsAfter), vmFlags(t, tg.Pid))
	if after != before {
		t.Errorf("the target's mappings changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if fmt.Sprint(fAfter) != fmt.Sprint(fBefore) {
		t.Errorf("the target's mapping flags changed:\nbefore: %v\nafter:  %v", fBefore, fAfter)
	}
	if a := tg.Send("check"); a != "ok" {
		t.Errorf("the target's own check: %q", a)
	}
	if a := tg.Send("fork"); a != "fork ok" {
		t.Errorf("the target's own fork: %q", a)
	}
	noImageLeft(t, tg.Pid)
	if left := markedMappings(t, tg.Pid); len(left) != 0 {
		t.Errorf("call sites left in the target: %v", left)
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// poolStart is where pool.c's pool is: its 512 MiB read-write mapping.
func poolStart(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var lo, hi uint64
		var perms string
		if n, _ := fmt.Sscanf(l, "%x-%x %s", &lo, &hi, &perms); n == 3 && perms == "rw-p" && hi-lo == 512<<20 {
			return lo
		}
	}
	t.Fatalf("no 512 MiB pool in process %d's mappings", pid)
	return 0
}

// coreLists says whether the core at path has a PT_LOAD segment at addr.
func coreLists(t *testing.T, path string, addr uint64) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr == addr {
			return true
		}
	}
	return false
}
