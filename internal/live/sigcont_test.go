package live_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/arenactl/arenactl/internal/testutil"
)

// stopAll stops pid with SIGSTOP and waits until every thread is stopped.
func stopAll(t *testing.T, lt *liveTarget) {
	t.Helper()
	if err := unix.Kill(lt.Pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "every thread to stop", func() bool { return len(stoppedOthers(t, lt.Pid, 0)) == len(lt.threads) })
}

// A SIGCONT sent to a stopped process while arenactl holds it continues
// the process, as it would have without arenactl: the stop arenactl gives
// back at the end does not undo it.
func TestSIGCONTWhileFrozen(t *testing.T) {
	lt := startLive(t, "park")
	stopAll(t, lt)
	tgt := openLive(t, lt.Pid)
	f, err := tgt.Freeze(context.Background(), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(lt.Pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Thaw(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "every thread to go on", func() bool { return len(stoppedOthers(t, lt.Pid, 0)) == 0 })
	lt.check(t)
	lt.quit(t)
}

func TestSIGCONTWhileBorrowed(t *testing.T) {
	lt := startLive(t, "park")
	stopAll(t, lt)
	tgt := openLive(t, lt.Pid)
	s, err := borrow(context.Background(), tgt, 0, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(lt.Pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the others run on
	if _, err := s.Release(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "every thread to go on", func() bool { return len(stoppedOthers(t, lt.Pid, 0)) == 0 })
	lt.check(t)
	lt.quit(t)
}
