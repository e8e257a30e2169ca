package walk

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/testutil"
)

// truthLine is one object heapobjs.cpp describes: how it is reachable and
// its type.
type truthLine struct{ class, addr, typ string }

var heapClasses = map[string]string{"static": "static", "stack": "stack", "leaked": "leaked", "inner": "leaked (only from leaked)"}

// heapTruth asks heapobjs for its objects and its pinning object.
func heapTruth(t *testing.T, tg *testutil.Target) (objs []truthLine, pin string) {
	t.Helper()
	line := tg.Send("truth")
	for ; line != "end"; line = tg.Next() {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "pin":
			pin = f[1]
		case len(f) == 3 && heapClasses[f[0]] != "":
			objs = append(objs, truthLine{f[0], f[1], f[2]})
		default:
			t.Fatalf("heapobjs said %q", line)
		}
	}
	if len(objs) < 15 || pin == "" {
		t.Fatalf("heapobjs told %d objects and pin %q", len(objs), pin)
	}
	return objs, pin
}

var lookupLine = regexp.MustCompile(`^(0x[0-9a-f]+): in the \d+-byte chunk at (0x[0-9a-f]+), (.+), (static|stack|leaked|leaked \(only from leaked\))$`)

// checkHeap runs arenactl heap on what (a PID or a file) and checks every
// object's class and type against the target's own word, and the pin.
func checkHeap(t *testing.T, what string, objs []truthLine, pin string) {
	t.Helper()
	args := []string{"heap"}
	for _, o := range objs {
		args = append(args, "--addr", o.addr)
	}
	out := mustRun(t, append(args, what)...).Stdout
	got := map[string][3]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := lookupLine.FindStringSubmatch(l); m != nil {
			got[m[1]] = [3]string{m[2], m[3], m[4]}
		}
	}
	for _, o := range objs {
		g, ok := got[o.addr]
		switch {
		case !ok:
			t.Errorf("%s: no allocated chunk found for the %s %s at %s", what, o.class, o.typ, o.addr)
		case g[0] != o.addr:
			t.Errorf("%s: %s is in a chunk at %s, not its own", what, o.addr, g[0])
		case o.typ != "-" && g[1] != o.typ:
			t.Errorf("%s: %s is a %s, arenactl says %s", what, o.addr, o.typ, g[1])
		case g[2] != heapClasses[o.class]:
			t.Errorf("%s: the %s at %s is %s, arenactl says %s", what, o.typ, o.addr, heapClasses[o.class], g[2])
		}
	}
	if !regexp.MustCompile(`the live \d+-byte PinObj at ` + pin + ` is the highest chunk below top: \d`).MatchString(out) {
		t.Errorf("%s: the PinObj at %s is not named as what pins its arena's free memory:\n%s", what, pin, out)
	}
	if t.Failed() {
		t.Logf("%s:\n%s", what, out)
	}
}

// The same classification from a live process (read from its copy-on-write
// image), from a snapshot of it (a default one: it carries every root)
// and from gdb's gcore of it: every
// object the target describes is found at its address with its class
// (reachable from static data, a thread-local, an interior pointer or
// memory of its own; from a stack or only a register; leaked; leaked but
// for other leaked chunks, in a lost list and a lost cycle) and its C++ type.
func TestHeapClassifiesWhatTheTargetSays(t *testing.T) {
	bin := testutil.BuildCWith(t, "g++", "heapobjs.cpp", "-O2", "-pthread")
	tg := testutil.Start(t, bin)
	objs, pin := heapTruth(t, tg)
	pid := fmt.Sprint(tg.Pid)
	checkHeap(t, pid, objs, pin)

	snap := filepath.Join(t.TempDir(), "heapobjs.core")
	mustRun(t, "snapshot", "-o", snap, pid)
	checkHeap(t, snap, objs, pin)

	if _, err := exec.LookPath("gcore"); err != nil {
		t.Log("no gcore (gdb): the kernel-format core is not checked")
	} else {
		prefix := filepath.Join(t.TempDir(), "gcore")
		if b, err := exec.Command("gcore", "-o", prefix, pid).CombinedOutput(); err != nil {
			t.Fatalf("gcore: %v\n%s", err, b)
		}
		checkHeap(t, prefix+"."+pid, objs, pin)
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// A stripped program names no vtable: its objects are still told apart by
// their vtable's place in its .data.rel.ro, one name per class, and
// classed as the unstripped program's are.
func TestHeapNamesStrippedVtables(t *testing.T) {
	bin := testutil.BuildCWith(t, "g++", "heapobjs.cpp", "-O2", "-pthread", "-s")
	tg := testutil.Start(t, bin)
	objs, _ := heapTruth(t, tg)
	args := []string{"heap"}
	for _, o := range objs {
		args = append(args, "--addr", o.addr)
	}
	out := mustRun(t, append(args, fmt.Sprint(tg.Pid))...).Stdout
	got := map[string][3]string{}
	for _, l := range strings.Split(out, "\n") {
		if m := lookupLine.FindStringSubmatch(l); m != nil {
			got[m[1]] = [3]string{m[2], m[3], m[4]}
		}
	}
	nameOf := map[string]string{} // the program's class -> arenactl's name
	classOf := map[string]string{}
	for _, o := range objs {
		g, ok := got[o.addr]
		if !ok {
			t.Errorf("no chunk found for the %s at %s", o.typ, o.addr)
			continue
		}
		if g[2] != heapClasses[o.class] {
			t.Errorf("the %s at %s is %s, arenactl says %s", o.typ, o.addr, heapClasses[o.class], g[2])
		}
		if o.typ == "-" {
			continue
		}
		if !strings.HasPrefix(g[1], "vtable at heapobjs") {
			t.Errorf("the %s at %s is named %q, not by its vtable's place", o.typ, o.addr, g[1])
			continue
		}
		if n, ok := nameOf[o.typ]; ok && n != g[1] {
			t.Errorf("two %s objects are named %q and %q", o.typ, n, g[1])
		}
		if c, ok := classOf[g[1]]; ok && c != o.typ {
			t.Errorf("a %s and a %s are both named %q", c, o.typ, g[1])
		}
		nameOf[o.typ], classOf[g[1]] = g[1], o.typ
	}
	if len(nameOf) < 4 {
		t.Errorf("%d classes told apart, want Session, Buffer, Leaky and PinObj: %v", len(nameOf), nameOf)
	}
	if t.Failed() {
		t.Logf("\n%s", out)
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}

// The shapes that cost a scan most stay within one sweep of the heap per
// pass, live and from a snapshot's core: a million 16-byte nodes linked in
// shuffled order, reachable only through the list (each next node
// anywhere: reading a node behind the sweep at the next sweep made this a
// sweep per node, and the command did not finish in ten minutes), a table
// of pointers to 200,000 other nodes allocated after them, and a lost cycle
// linked in shuffled order. Every node is classed: the list's and the
// table's static, the cycle's leaked only from leaked. The count of sweeps,
// not a time, is the bound checked; and arenactl's peak RSS stays under
// 256 MiB, about six times the 42 MiB heap (65 to 80 MiB here: the Go
// runtime, the walk's copy windows and the scan's block cache).
func TestHeapBoundedOnHostileShapes(t *testing.T) {
	bin := testutil.BuildC(t, "heapshapes.c", "-O2")
	tg := testutil.Start(t, bin)
	var nodes, table, cycle uint64
	if _, err := fmt.Sscanf(tg.Ready(), "ready %d %d %d", &nodes, &table, &cycle); err != nil {
		t.Fatalf("heapshapes said %q: %v", tg.Ready(), err)
	}
	snap := filepath.Join(t.TempDir(), "shapes.core")
	mustRun(t, "snapshot", "-o", snap, fmt.Sprint(tg.Pid))
	for _, target := range []string{fmt.Sprint(tg.Pid), snap} {
		var doc struct {
			Classes []struct {
				Class string `json:"class"`
				Count uint64 `json:"count"`
			} `json:"classes"`
			Scan struct {
				Sweeps int `json:"sweeps"`
			} `json:"scan"`
		}
		// The serial scan's bound on sweeps (the parallel one's rounds:
		// TestHeapSameAtAnyJobs).
		cmd := exec.Command(arenactl, "heap", "--json", "--jobs", "1", target)
		r, hwm := runCmdHWM(t, cmd)
		if r.Code != 0 {
			t.Fatalf("arenactl heap %s: exit %d: %s", target, r.Code, r.Stderr)
		}
		if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, c := range doc.Classes {
			got[c.Class] = c.Count
		}
		// The nodes, the table, and a few chunks of stdio's.
		if got["static"] < nodes+table+1 || got["static"] > nodes+table+16 {
			t.Errorf("%s: %d chunks static, want the %d nodes, the table and a few of stdio's", target, got["static"], nodes+table)
		}
		if got["leaked (only from leaked)"] != cycle || got["leaked"] != 0 {
			t.Errorf("%s: leaked %d, leaked only from leaked %d; want the cycle's %d nodes, each referenced by another", target, got["leaked"], got["leaked (only from leaked)"], cycle)
		}
		if doc.Scan.Sweeps > 2 {
			t.Errorf("%s: the scan went over the heap %d times; one a pass (static, stack) at most", target, doc.Scan.Sweeps)
		}
		if hwm > 256<<10 {
			t.Errorf("%s: arenactl's peak RSS was at least %d KiB", target, hwm)
		} else {
			t.Logf("%s: %d sweeps, arenactl's peak RSS %d KiB", target, doc.Scan.Sweeps, hwm)
		}
	}
	tg.Quit()
}

// heap --folded is every type's bytes, split into reachable and leaked: on
// a committed core its lines add up to the heap's allocated bytes and its
// leaked bytes as --json counts them.
func TestHeapFoldedAddsUp(t *testing.T) {
	core := filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-2.36-kernel.core.zst")
	var doc struct {
		Bytes   uint64 `json:"bytes"`
		Classes []struct {
			Class string `json:"class"`
			Bytes uint64 `json:"bytes"`
		} `json:"classes"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "heap", "--json", core).Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	var leaked uint64
	for _, c := range doc.Classes {
		if strings.HasPrefix(c.Class, "leaked") {
			leaked += c.Bytes
		}
	}
	sums := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(mustRun(t, "heap", "--folded", core).Stdout), "\n") {
		i := strings.LastIndexByte(l, ' ')
		stack, v := l[:i], l[i+1:]
		n, err := strconv.ParseUint(v, 10, 64)
		frames := strings.Split(stack, ";")
		if err != nil || len(frames) != 2 || (frames[0] != "reachable" && frames[0] != "leaked") {
			t.Fatalf("not a folded line of heap's: %q", l)
		}
		sums[frames[0]] += n
	}
	if sums["reachable"]+sums["leaked"] != doc.Bytes || sums["leaked"] != leaked {
		t.Errorf("folded: %d reachable, %d leaked; --json: %d bytes, %d leaked", sums["reachable"], sums["leaked"], doc.Bytes, leaked)
	}
	expectRefusal(t, run(t, "heap", "--folded", "--json", core), exitUsage, "--folded and --json are mutually exclusive")
}

// runCmdHWM is runCmd, with the command's peak RSS as its /proc status says
// it (VmHWM, KiB) when last read, every 5 ms while it runs. The rusage
// wait4 gives is no use here: Go starts a child sharing its memory until
// exec, and the kernel carries that memory's peak, the test binary's,
// into the child's maxrss.
func runCmdHWM(t *testing.T, cmd *exec.Cmd) (result, uint64) {
	t.Helper()
	var hwm uint64
	done := make(chan struct{})
	polled := make(chan struct{})
	r := runCmdStarted(t, cmd, func() {
		go func() {
			defer close(polled)
			status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
			for {
				if b, err := os.ReadFile(status); err == nil {
					for _, l := range strings.Split(string(b), "\n") {
						var v uint64
						if _, err := fmt.Sscanf(l, "VmHWM: %d kB", &v); err == nil && v > hwm {
							hwm = v
						}
					}
				}
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	})
	close(done)
	<-polled
	return r, hwm
}

// Roots that cannot be read are said in words that fit the target: four
// blocks pointed to only from a page marked MADV_DONTFORK (as io_uring's
// rings are) are not in a copy-on-write image, so heap says that page
// could not be read there, why, and that --freeze walk reads it; it used
// to give a snapshot's words ("not in the file ... --full") on a live
// process. --freeze walk reads the page, and the blocks are static. A
// guard page (MADV_GUARD_INSTALL, where the kernel has them) holds
// nothing and is no unread root, in either.
func TestHeapUnreadRootsSaid(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "dontfork.c", "-O2"))
	page := tg.Next()
	pid := fmt.Sprint(tg.Pid)
	type scan struct {
		Scan struct {
			Unread uint64 `json:"unread_root_bytes"`
		} `json:"scan"`
	}
	var doc scan
	if err := json.Unmarshal([]byte(mustRun(t, "heap", "--json", pid).Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Scan.Unread != 4096 {
		t.Errorf("image: %d bytes of roots unread, want the page's 4096", doc.Scan.Unread)
	}
	out := mustRun(t, "heap", pid).Stdout
	for _, w := range []string{"4.0 KiB of roots could not be read in anonymous memory", "copy-on-write image", "MADV_DONTFORK", "--freeze walk"} {
		if !strings.Contains(out, w) {
			t.Errorf("image: the warning lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "snapshot") || strings.Contains(out, "--full") {
		t.Errorf("image: a snapshot's words on a live process:\n%s", out)
	}
	doc = scan{}
	if err := json.Unmarshal([]byte(mustRun(t, "heap", "--json", "--freeze", "walk", pid).Stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Scan.Unread != 0 {
		t.Errorf("--freeze walk: %d bytes of roots unread", doc.Scan.Unread)
	}
	if out := mustRun(t, "heap", "--freeze", "walk", pid).Stdout; strings.Contains(out, "WARNING") {
		t.Errorf("--freeze walk (page at %s) warns:\n%s", page, out)
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Fatalf("target: %q %d", line, code)
	}
}
