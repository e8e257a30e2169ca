package live_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// liveTarget is testdata/live_target.c running, with what its ready line
// says and the thread ids it recorded.
type liveTarget struct {
	*testutil.Target
	text, pages, spawned uint64
	npages               int
	threads              []targetThread // main, then the workers (and the spawner)
}

// targetThread is a long-lived thread of the target: its tid, its name, and
// pthread_self(), which is its thread pointer (fs_base) on x86_64.
type targetThread struct {
	name string
	tid  int
	self uint64
}

// startLive runs live_target.c in mode ("park", or "spawn" for a thread
// that creates short-lived threads without pause) and waits until every
// long-lived thread is blocked in its syscall.
func startLive(t *testing.T, mode string) *liveTarget {
	t.Helper()
	tg := testutil.Start(t, testutil.BuildC(t, "live_target.c"), mode)
	f := strings.Fields(tg.Ready())
	if len(f) != 6 {
		t.Fatalf("ready line: %q", tg.Ready())
	}
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			t.Fatalf("ready line %q: %v", tg.Ready(), err)
		}
		return v
	}
	lt := &liveTarget{Target: tg, text: hex(f[2]), pages: hex(f[3]), spawned: hex(f[5])}
	lt.npages, _ = strconv.Atoi(f[4])
	table := readMem(t, tg.Pid, hex(f[1]), 6*16)
	for i, name := range []string{"main", "nanosleep", "poll", "condvar", "sigwait", "spawner"} {
		tid := int(binary.LittleEndian.Uint64(table[16*i:]))
		if tid == 0 {
			continue
		}
		lt.threads = append(lt.threads, targetThread{name: name, tid: tid, self: binary.LittleEndian.Uint64(table[16*i+8:])})
	}
	for _, th := range lt.threads {
		if th.name == "spawner" {
			continue
		}
		testutil.WaitUntil(t, fmt.Sprintf("thread %s (%d) to block in its syscall", th.name, th.tid), func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", tg.Pid, th.tid))
			return len(b) > 0 && !strings.HasPrefix(string(b), "running") && !strings.HasPrefix(string(b), "-1 ")
		})
	}
	return lt
}

// thread returns the long-lived thread of that name.
func (lt *liveTarget) thread(t *testing.T, name string) targetThread {
	t.Helper()
	for _, th := range lt.threads {
		if th.name == name {
			return th
		}
	}
	t.Fatalf("the target has no %s thread", name)
	return targetThread{}
}

// check has the target wake every worker and see each count a wake-up: the
// target's own proof that every thread still works.
func (lt *liveTarget) check(t *testing.T) {
	t.Helper()
	if got := lt.Send("round"); got != "ok" {
		t.Fatalf("the target's round: %q; stderr: %s", got, lt.Stderr())
	}
}

// quit ends the target, which checks its workers one last time.
func (lt *liveTarget) quit(t *testing.T) {
	t.Helper()
	if line, code := lt.Quit(); line != "clean" || code != 0 {
		t.Fatalf("the target ended with %q, exit %d; stderr: %s", line, code, lt.Stderr())
	}
}

// readMem reads the target's memory through /proc/PID/mem, without the
// package under test.
func readMem(t *testing.T, pid int, addr uint64, n int) []byte {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		t.Fatalf("reading %d bytes at %#x in process %d: %v", n, addr, pid, err)
	}
	return b
}

func readWord(t *testing.T, pid int, addr uint64) uint64 {
	t.Helper()
	return binary.LittleEndian.Uint64(readMem(t, pid, addr, 8))
}

// openLive opens pid as a live target, closed when the test ends. It is
// the one place in these tests that knows how a live target is opened.
func openLive(t *testing.T, pid int) *live.Target {
	t.Helper()
	tgt, err := live.Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	return tgt
}

// taskState is what /proc says of one thread: its state letter and its
// tracer.
type taskState struct {
	state  byte
	tracer int
}

func (s taskState) dead() bool { return s.state == 'Z' || s.state == 'X' }

// taskStates reads the state of every thread of pid from
// /proc/PID/task/*/status. Threads that exit meanwhile are left out.
func taskStates(t *testing.T, pid int) map[int]taskState {
	t.Helper()
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("threads of process %d: %v", pid, err)
	}
	out := map[int]taskState{}
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue // exited
		}
		var st taskState
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "State":
				if v != "" {
					st.state = v[0]
				}
			case "TracerPid":
				st.tracer, _ = strconv.Atoi(v)
			}
		}
		out[tid] = st
	}
	return out
}

// allLetGo checks that no thread of pid is stopped or traced: whatever the
// package stopped, it gave back. A thread let go may show its stop for a
// moment, until the kernel wakes it, so the check is retried (for at most
// testutil.Patience, a hang guard).
func allLetGo(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(testutil.Patience)
	for {
		var held []string
		for tid, st := range taskStates(t, pid) {
			if !st.dead() && (st.state == 't' || st.state == 'T' || st.tracer != 0) {
				held = append(held, fmt.Sprintf("thread %d: state %c, tracer %d", tid, st.state, st.tracer))
			}
		}
		if len(held) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("threads still stopped or traced: %s", strings.Join(held, "; "))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
