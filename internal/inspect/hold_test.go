package inspect

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/glibc/inject"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// The borrowed thread is held from its stop to its release, around the
// lock check and the call: no per-thread /proc file may be read in that
// time. With 2000 threads, reading each one's status there held the thread
// for hundreds of milliseconds around a call of a few. What is counted is
// the cause, not the time: ptrace's reads of per-thread files while held.
func TestInjectHoldReadsNoPerThreadFiles(t *testing.T) {
	bin := testutil.BuildC(t, "many_threads.c")
	for _, n := range []int{12, 2000} {
		tg := testutil.StartCmd(t, exec.Command(bin, strconv.Itoa(n)))
		tgt, err := live.Open(tg.Pid)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		o := Options{Timeout: 10 * time.Second}
		pf, err := runPreflight(ctx, tgt, o)
		if err != nil {
			t.Fatal(err)
		}
		if pf.walk == nil {
			t.Fatalf("no pre-flight walk (%s): the lock check would be skipped", pf.skipped)
		}
		var sess *live.Session
		if _, err := injectCall(ctx, tgt, pf, o, func(c inject.Caller) error {
			sess = c.(*live.Session)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		tgt.Close()
		if got := sess.ProcReadsHeld(); got != 0 {
			t.Errorf("%d threads: %d per-thread /proc reads while the thread was held, want none", n+1, got)
		}
		if line, code := tg.Quit(); line != "clean" || code != 0 {
			t.Fatalf("target: %q %d", line, code)
		}
	}
}
