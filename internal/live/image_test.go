package live_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/testutil"
)

// The image holds the process's memory as it was when it was made, while
// the process runs on and changes it; it is no child of the process, runs
// with every signal blocked, and the process keeps no call site.
func TestImage(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	masks := func() map[int]string {
		out := map[int]string{}
		for _, th := range lt.threads {
			out[th.tid] = statusOf(t, th.tid)["SigBlk"]
		}
		return out
	}
	before := masks()
	im, err := tgt.Image(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	allLetGo(t, lt.Pid)
	// Compared once every worker is back in its blocking syscall, as
	// before: rt_sigtimedwait unblocks the signal it waits for while in
	// it, so a thread on its way back in shows another mask for a moment.
	for _, th := range lt.threads {
		testutil.WaitUntil(t, fmt.Sprintf("thread %s (%d) to block again", th.name, th.tid), func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", lt.Pid, th.tid))
			return len(b) > 0 && !strings.HasPrefix(string(b), "running") && !strings.HasPrefix(string(b), "-1 ")
		})
	}
	if after := masks(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("signal masks changed: before %v, after %v", before, after)
	}
	if im.Pid == lt.Pid {
		t.Fatalf("the image is the process itself")
	}
	st := statusOf(t, im.Pid)
	if st["PPid"] == strconv.Itoa(lt.Pid) {
		t.Errorf("the image %d is a child of the process", im.Pid)
	}
	if st["SigBlk"] != "fffffffffffbfeff" { // all but SIGKILL and SIGSTOP
		t.Errorf("the image blocks signals %s, want all that can be", st["SigBlk"])
	}
	if got := children(t, lt.Pid); got != "" {
		t.Errorf("the process has children: %s", got)
	}
	if b := make([]byte, 5); true {
		if _, err := im.ReadAt(b, lt.text); err != nil || string(b) != "12345" {
			t.Errorf("image text: %q, %v", b, err)
		}
	}
	if maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", lt.Pid)); strings.Contains(string(maps), fmt.Sprintf("%x-", im.Site())) {
		t.Errorf("the call site at %#x is still in the process", im.Site())
	}
	if len(im.Threads()) != len(lt.threads) {
		t.Errorf("image threads: %d, want %d", len(im.Threads()), len(lt.threads))
	}
	// The process drops pages it wrote; the image keeps them.
	if got := lt.Send("drop"); got != "ok" {
		t.Fatalf("drop: %q", got)
	}
	var one [1]byte
	if _, err := im.ReadAt(one[:], lt.pages); err != nil || one[0] != 1 {
		t.Errorf("image page 0: %d, %v; want the 1 written before the image", one[0], err)
	}
	if got := readMem(t, lt.Pid, lt.pages, 1)[0]; got != 0 {
		t.Errorf("process page 0: %d after MADV_DONTNEED", got)
	}
	if err := im.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Mappings() {
		if m.Start <= im.Site() && im.Site() < m.End {
			t.Errorf("the image's mappings show the call site")
		}
	}
	// The lease is renewed: the image outlives it while it is read.
	time.Sleep(time.Duration(ptrace.ImageTicks+5) * 100 * time.Millisecond)
	if _, err := im.ReadAt(one[:], lt.pages); err != nil {
		t.Errorf("the image ended while its lease was renewed: %v", err)
	}
	lt.check(t)
	pid := im.Pid
	im.Close()
	waitEnded(t, pid)
	lt.check(t)
	lt.quit(t)
}

// An image whose lease is not renewed (arenactl killed or hung) ends by
// itself.
func TestImageLeaseRunsOut(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	im, err := tgt.Image(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	im.StopLease()
	waitEnded(t, im.Pid)
	if _, err := im.ReadAt(make([]byte, 5), lt.text); err == nil {
		t.Errorf("an ended image read without error")
	}
	lt.check(t)
	lt.quit(t)
}

// A process whose cgroup has less room than it could write while the
// image lives gets no image, and nothing is stopped.
func TestImageRefusedNearMemoryLimit(t *testing.T) {
	cg := testutil.MemoryCgroup(t)
	lt := startLive(t, "park")
	cg.Add(t, lt.Pid)
	cg.Limit(t, cg.Usage(t)+64<<10)
	tgt := openLive(t, lt.Pid)
	_, err := tgt.Image(context.Background(), 3*time.Second)
	var un *live.ImageUnavailableError
	if !asImageUnavailable(err, &un) || !strings.Contains(un.Reason, "cgroup") {
		t.Fatalf("got %v, want the cgroup refusal", err)
	}
	if _, err := procfs.ReadMemoryRoom(lt.Pid); err != nil {
		t.Fatal(err)
	}
	lt.check(t)
	lt.quit(t)
}

func asImageUnavailable(err error, un **live.ImageUnavailableError) bool {
	e, ok := err.(*live.ImageUnavailableError)
	if ok {
		*un = e
	}
	return ok
}

func statusOf(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// children lists pid's child processes.
func children(t *testing.T, pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	return strings.TrimSpace(string(b))
}

// waitEnded waits until pid runs no more: gone, or a zombie its parent
// (init) has yet to reap.
func waitEnded(t *testing.T, pid int) {
	t.Helper()
	testutil.WaitUntil(t, fmt.Sprintf("the image %d to end", pid), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		return i > 0 && len(s) > i+2 && (s[i+2] == 'Z' || s[i+2] == 'X')
	})
}

// The image routine leaves out only a mapping that is, when every thread
// is stopped, exactly the span it was given: a span a page short of the
// mapping is left in, so is the region the program marked MADV_DONTFORK
// itself (it stays marked), and the exact span is left out. The mappings
// are the same after each image.
func TestImageLeavesOutOnlyExactMappings(t *testing.T) {
	tg := testutil.Start(t, testutil.BuildC(t, "pool.c", "-O2"), "128")
	tgt := openLive(t, tg.Pid)
	var pool, own maps.Range
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		var lo, hi uint64
		var perms string
		if n, _ := fmt.Sscanf(l, "%x-%x %s", &lo, &hi, &perms); n == 3 && perms == "rw-p" {
			switch hi - lo {
			case 128 << 20:
				pool = maps.Range{Start: lo, End: hi}
			case 64 << 20:
				own = maps.Range{Start: lo, End: hi}
			}
		}
	}
	if pool.End == 0 || own.End == 0 {
		t.Fatalf("no pool or own region in:\n%s", b)
	}
	for _, c := range []struct {
		name string
		give []maps.Range
		want int
	}{
		{"a page short", []maps.Range{{Start: pool.Start, End: pool.End - 4096}}, 0},
		{"marked by the program", []maps.Range{own}, 0},
		{"exact", []maps.Range{pool, own}, 1},
	} {
		before, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
		im, err := tgt.Image(context.Background(), 3*time.Second, c.give...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		left := im.LeftOut
		im.Close()
		if len(left) != c.want || c.want == 1 && left[0] != pool {
			t.Errorf("%s: left out %v, want %d (the pool %v)", c.name, left, c.want, pool)
		}
		if a := tg.Send("check"); a != "ok" {
			t.Fatalf("%s: the target says %q", c.name, a)
		}
		after, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", tg.Pid))
		if string(after) != string(before) {
			t.Errorf("%s: the mappings changed:\n%s\n---\n%s", c.name, before, after)
		}
	}
	if line, code := tg.Quit(); line != "clean" || code != 0 {
		t.Fatalf("target: %q, exit %d", line, code)
	}
}

// A thread's extended state is read while every thread is stopped only
// where a core needs it: an image for a walk or a scan goes without, one
// for a snapshot (ImageXState) and a freeze's Threads have it for every
// thread, as PTRACE_GETREGSET gives it (an FXSAVE area at least).
func TestImageXStateOnlyWhenAsked(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	for _, want := range []bool{false, true} {
		tgt.ImageXState = want
		im, err := tgt.Image(context.Background(), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ths := im.FrozenThreads()
		if len(ths) != len(lt.threads) {
			t.Errorf("the image has %d threads, the process %d", len(ths), len(lt.threads))
		}
		for _, th := range ths {
			if got := len(th.XState) >= 512; got != want || (!want && th.XState != nil) {
				t.Errorf("ImageXState %v: thread %d has %d bytes of extended state", want, th.Tid, len(th.XState))
			}
		}
		im.Close()
		allLetGo(t, lt.Pid)
	}
	f, err := tgt.Freeze(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range f.Threads() {
		if len(th.XState) < 512 {
			t.Errorf("frozen thread %d has %d bytes of extended state", th.Tid, len(th.XState))
		}
	}
	if _, err := f.Thaw(); err != nil {
		t.Fatal(err)
	}
	allLetGo(t, lt.Pid)
	lt.check(t)
	lt.quit(t)
}
