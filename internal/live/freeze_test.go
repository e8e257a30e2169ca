package live_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/testutil"
)

// frozen is a freeze as these tests see it: each stopped thread with its
// stack pointer and thread pointer, as the freeze's registers and the
// target's thread list give them, and the mappings as read while frozen.
type frozen struct {
	threads  []frozenThread
	mappings []maps.Mapping
	thaw     func() error
}

type frozenThread struct {
	tid        int
	sp, fsBase uint64 // from the freeze's registers
	tls        uint64 // from the target's thread list, which the heap walks; 0: absent
}

// freeze freezes tgt. It is the one place in these tests that knows the
// freeze API.
func freeze(t *testing.T, tgt *live.Target) *frozen {
	t.Helper()
	f, err := tgt.Freeze(context.Background(), testutil.Patience)
	if err != nil {
		t.Fatal(err)
	}
	tls := map[int]uint64{}
	for _, th := range tgt.Threads() {
		tls[th.Tid] = th.TP()
	}
	fr := &frozen{mappings: tgt.Mappings(), thaw: func() error {
		_, err := f.Thaw()
		if n := len(tgt.Threads()); n != 0 {
			t.Errorf("the target lists %d threads with registers after the thaw, want none", n)
		}
		return err
	}}
	for _, th := range f.Threads() {
		fr.threads = append(fr.threads, frozenThread{tid: th.Tid, sp: th.SP(), fsBase: th.TP(), tls: tls[th.Tid]})
	}
	if len(tls) != len(fr.threads) {
		t.Errorf("%d threads stopped, %d in the target's thread list", len(fr.threads), len(tls))
	}
	return fr
}

// soakRounds is how many freezes a test makes: a few by default, more with
// ARENACTL_SOAK=N.
func soakRounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("ARENACTL_SOAK")); err == nil && n > 0 {
		return n
	}
	return def
}

// A freeze stops every thread, with their registers and thread pointers
// read; a thaw lets every one go, and the target carries on.
func TestFreezeThaw(t *testing.T) {
	lt := startLive(t, "park")
	tgt := openLive(t, lt.Pid)
	for round := 0; round < 3; round++ {
		fr := freeze(t, tgt)
		checkFrozen(t, lt, fr)
		byTid := map[int]frozenThread{}
		for _, th := range fr.threads {
			byTid[th.tid] = th
		}
		if fr.threads[0].tid != lt.Pid {
			t.Errorf("first thread stopped: %d, want the main thread %d", fr.threads[0].tid, lt.Pid)
		}
		if len(fr.threads) != len(lt.threads) {
			t.Errorf("%d threads stopped, the target has %d", len(fr.threads), len(lt.threads))
		}
		for _, th := range lt.threads {
			ft, ok := byTid[th.tid]
			if !ok {
				t.Errorf("thread %s (%d) was not stopped", th.name, th.tid)
				continue
			}
			// The thread pointer is pthread_self() on x86_64.
			if ft.fsBase != th.self || ft.tls != th.self {
				t.Errorf("thread %s (%d): fs_base %#x, TLS list %#x; pthread_self() is %#x", th.name, th.tid, ft.fsBase, ft.tls, th.self)
			}
			want := maps.ClassThreadStack
			if th.name == "main" {
				want = maps.ClassMainStack
			}
			if m, ok := maps.Find(fr.mappings, ft.sp); !ok || m.Class != want {
				t.Errorf("thread %s (%d): stack pointer %#x in %+v, want a mapping of class %v", th.name, th.tid, ft.sp, m, want)
			}
		}
		if err := fr.thaw(); err != nil {
			t.Fatal(err)
		}
		allLetGo(t, lt.Pid)
		lt.check(t)
	}
	lt.quit(t)
}

// checkFrozen checks that no thread of the target runs: each is in a
// tracing stop and among the threads the freeze lists, and each listed one
// has registers and a thread pointer.
func checkFrozen(t *testing.T, lt *liveTarget, fr *frozen) {
	t.Helper()
	listed := map[int]bool{}
	for _, th := range fr.threads {
		if listed[th.tid] {
			t.Errorf("thread %d listed twice", th.tid)
		}
		listed[th.tid] = true
		if th.sp == 0 || th.fsBase == 0 || th.tls != th.fsBase {
			t.Errorf("thread %d: sp %#x, fs_base %#x, TLS list %#x", th.tid, th.sp, th.fsBase, th.tls)
		}
		if _, ok := maps.Find(fr.mappings, th.sp); !ok {
			t.Errorf("thread %d: stack pointer %#x is in no mapping read during the freeze", th.tid, th.sp)
		}
	}
	for tid, st := range taskStates(t, lt.Pid) {
		switch {
		case st.dead():
			// Exited before it could be stopped, not reaped yet.
		case st.state != 't':
			t.Errorf("thread %d is not stopped during the freeze: state %c", tid, st.state)
		case !listed[tid]:
			t.Errorf("thread %d is stopped but not among the frozen threads", tid)
		}
	}
}

// Against a target that creates and ends threads without pause: each
// freeze catches the threads created while it stops the others, tolerates
// the ones that end meanwhile, and nothing runs until the thaw, after which
// the target goes on creating threads.
func TestFreezeCatchesNewThreads(t *testing.T) {
	lt := startLive(t, "spawn")
	tgt := openLive(t, lt.Pid)
	most := 0
	for round, n := 0, soakRounds(15); round < n; round++ {
		before := readWord(t, lt.Pid, lt.spawned)
		testutil.WaitUntil(t, "the target to spawn more threads", func() bool { return readWord(t, lt.Pid, lt.spawned) > before })
		fr := freeze(t, tgt)
		checkFrozen(t, lt, fr)
		most = max(most, len(fr.threads))
		listed := map[int]bool{}
		for _, th := range fr.threads {
			listed[th.tid] = true
		}
		for _, th := range lt.threads {
			if !listed[th.tid] {
				t.Errorf("round %d: long-lived thread %s (%d) was not stopped", round, th.name, th.tid)
			}
		}
		// Nothing runs: the spawner's count holds still while /proc is
		// read once more.
		held := readWord(t, lt.Pid, lt.spawned)
		taskStates(t, lt.Pid)
		if now := readWord(t, lt.Pid, lt.spawned); now != held {
			t.Errorf("round %d: the spawner went on from %d to %d during the freeze", round, held, now)
		}
		if err := fr.thaw(); err != nil {
			t.Fatalf("round %d: thaw: %v", round, err)
		}
		if t.Failed() {
			break
		}
	}
	before := readWord(t, lt.Pid, lt.spawned)
	testutil.WaitUntil(t, "the target to spawn threads after the thaw", func() bool { return readWord(t, lt.Pid, lt.spawned) > before })
	lt.check(t)
	allLetGo(t, lt.Pid)
	t.Logf("at most %d threads in one freeze", most)
	lt.quit(t)
}
