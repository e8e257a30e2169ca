package inject

import (
	"github.com/arenactl/arenactl/internal/testutil"

	"fmt"
	"testing"
)

// stressRuns is how many runs TestStressAgainstHammeringThreads makes at
// least: 120 in the short form CI runs, ARENACTL_STRESS_RUNS for the long
// form (2000 makes it a soak). Until an unsafe moment has been met it goes
// on, up to twice as many: 200 runs met 9 (CI on the 2-CPU dev machine),
// 400 runs 14 and 21, about one in 20, so the chance of meeting none in
// 240 is about one in 60,000. Each run shares the CPUs with the target's
// three hammering threads and the other packages' tests: 200 took 458 s.
func stressRuns() int { return testutil.Rounds("ARENACTL_STRESS_RUNS", 120) }

// info and trim by turns against a target whose worker threads do nothing
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
	runs := stressRuns()
	i := 0
	for ; i < runs || refusals == 0 && i < 2*runs; i++ {
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
	t.Logf("%d runs: %d succeeded, %d refused; %d unsafe moments were skipped on the way", i, ok, refused, refusals)
	if refusals == 0 {
		t.Error("no thread was ever found inside the allocator: the policy was not exercised")
	}
	mustQuit(t, tg)
}
