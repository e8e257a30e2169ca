package render

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/stackprof"
)

// The lines leaks prints when there is nothing to show, and its warnings.
func TestLeaksEdges(t *testing.T) {
	win := stackprof.Window{Duration: 5 * time.Second, Rate: 512 << 10}
	churn := stackprof.Site{Frames: []stackprof.Frame{{Function: "main"}, {Function: "churn"}, {Function: "malloc"}},
		Sampled: stackprof.Counts{Alloc: 4, AllocBytes: 4 << 20}, Est: stackprof.Estimate{AllocObjects: 5, AllocBytes: 5 << 20}}
	for _, c := range []struct {
		name     string
		p        stackprof.Profile
		explains *stackprof.Explanation
		want     []string
	}{
		{"empty", stackprof.Profile{Window: win}, nil, []string{"0 samples", "no allocation was sampled in the window"}},
		{"churn", stackprof.Profile{Window: win, Sites: []stackprof.Site{churn}, Samples: 4}, &stackprof.Explanation{Measured: -(2 << 20)},
			[]string{"of 5.0 MiB allocated", "nothing sampled in the window is still held", "the heap's in-use bytes shrank by 2.0 MiB"}},
		{"dropped", stackprof.Profile{Window: stackprof.Window{Duration: time.Second, Dropped: 4}, Samples: 12, Incomplete: 3, Truncated: 1},
			nil, []string{"every allocation recorded", "4 samples (25%) found both rings full", "the ones kept in the same drains stand for them", "3 of 12 stacks end before the thread's first frame, 1 cut short"}},
		{"short stacks", stackprof.Profile{Window: stackprof.Window{Duration: time.Second, Rate: 512 << 10, Shortened: 300}, Samples: 400, Completed: 280, ShortLeft: 5},
			nil, []string{"300 of 400 samples kept only the top of their stack (15 of those stacks were whole all the same); 280 were completed from the whole stacks",
				"; 5 matched no whole stack and stay cut short"}},
		{"nothing held, growth seen", stackprof.Profile{Window: win, Sites: []stackprof.Site{churn}, Samples: 4},
			&stackprof.Explanation{Measured: 2 << 20, Rate: 512 << 10},
			[]string{"at one sample per 512.0 KiB, that says only that less than about 1.5 MiB allocated in the window is held",
				"the walk saw 2.0 MiB grow: --rate 16KiB would take about 100 samples of that",
				"explains 0.0 of 2.0 MiB of the in-use growth: from 0 held samples, too few to tell (--rate 16KiB would take about 100"}},
		// 3 GB/s of allocation: 8 KiB would be 370,000 samples a second.
		{"few samples, busy process", stackprof.Profile{Window: win, Sites: []stackprof.Site{held(1.5*(1<<20), 3)}, Samples: 3},
			&stackprof.Explanation{Explained: 1.5 * (1 << 20), Sigma: 0.9 * (1 << 20), Held: 3, Rate: 512 << 10, Measured: 1782579, AllocPerSecond: 3e9},
			[]string{"from 3 held samples, too few to tell (a window 34 times as long would take about 100)"}},
		{"few samples, less busy", stackprof.Profile{Window: win, Sites: []stackprof.Site{held(1.5*(1<<20), 3)}, Samples: 3},
			&stackprof.Explanation{Explained: 1.5 * (1 << 20), Sigma: 0.9 * (1 << 20), Held: 3, Rate: 512 << 10, Measured: 1782579, AllocPerSecond: 300e6},
			[]string{"from 3 held samples, too few to tell (--rate 32KiB (about 9155 samples a second here) and a window 3 times as long would take about 100)"}},
		// The run: 176 MB explained of 117 MB grown, 2000 held
		// samples (a standard error of about 2.2 %).
		{"more than grew", stackprof.Profile{Window: win, Sites: []stackprof.Site{held(176e6, 2000)}, Samples: 2000},
			&stackprof.Explanation{Explained: 176e6, Sigma: 176e6 / math.Sqrt(2000), Held: 2000, Rate: 512 << 10, Measured: 117e6},
			[]string{"explains 168 ± 11 of 112 MiB of the in-use growth: the profile holds more than the walk saw grow, beyond its sampling error"}},
		{"less than grew", stackprof.Profile{Window: win, Sites: []stackprof.Site{held(50e6, 400)}, Samples: 400},
			&stackprof.Explanation{Explained: 50e6, Sigma: 50e6 / math.Sqrt(400), Held: 400, Rate: 512 << 10, Measured: 117e6},
			[]string{"explains 48 ± 7.2 of 112 MiB of the in-use growth: the walk saw more grow than the profile holds, beyond its sampling error"}},
		{"agree", stackprof.Profile{Window: win, Sites: []stackprof.Site{held(110e6, 400)}, Samples: 400},
			&stackprof.Explanation{Explained: 110e6, Sigma: 110e6 / math.Sqrt(400), Held: 400, Rate: 512 << 10, Measured: 117e6},
			[]string{"explains 105 ± 16 of 112 MiB of the in-use growth\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			if err := Leaks(&b, &c.p, c.explains); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("no %q in:\n%s", w, b.String())
				}
			}
		})
	}
}

// held is a site holding bytes from n samples.
func held(bytes float64, n int) stackprof.Site {
	return stackprof.Site{Frames: []stackprof.Frame{{Function: "main"}, {Function: "leak"}, {Function: "malloc"}},
		Sampled: stackprof.Counts{Alloc: n, InUse: n}, Est: stackprof.Estimate{AllocBytes: bytes, InUseBytes: bytes, InUseObjects: float64(n)}}
}
