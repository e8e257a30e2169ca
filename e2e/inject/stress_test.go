package inject

import (
	"github.com/arenactl/arenactl/internal/testutil"

	"fmt"
	"testing"
)

// 200 info and 200 trim against a target whose worker threads do nothing
// but malloc and free. Half the runs must borrow one of those workers
// (--thread), so the safety policy sees threads inside the allocator all
// the time: each run either succeeds or refuses clearly, and the target's
// heap survives everything.
func TestStressAgainstHammeringThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	tg := testutil.Start(t, testutil.BuildC(t, "arenas.c"), "hammer", "3")
	tids := tg.Threads()
	pid := fmt.Sprint(tg.Pid)
	ok, refused, refusals := 0, 0, 0
	for i := 0; i < 400; i++ {
		verb := []string{"info", "trim"}[i%2]
		args := []string{verb, "--json", "--timeout", "1s"}
		if i%4 >= 2 {
			args = append(args, "--thread", fmt.Sprint(tids[1+(i/4)%(len(tids)-1)]))
		}
		r := run(t, append(args, pid)...)
		switch r.Code {
		case 0:
			ok++
			var in struct {
				Injection jsonInjection `json:"injection"`
			}
			if err := decodeDoc([]byte(r.Stdout), &in); err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			refusals += in.Injection.Refusals
		case exitNoSafe:
			refused++
		default:
			t.Fatalf("run %d (%v): exit %d: %s", i, args, r.Code, r.Stderr)
		}
		if i%50 == 49 {
			if a := tg.Send("check"); a != "ok" {
				t.Fatalf("after %d runs the target says %s", i+1, a)
			}
		}
	}
	t.Logf("400 runs: %d succeeded, %d refused; %d unsafe moments were skipped on the way", ok, refused, refusals)
	if refusals == 0 {
		t.Error("no thread was ever found inside the allocator: the policy was not exercised")
	}
	mustQuit(t, tg)
}
