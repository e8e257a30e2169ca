package render

import (
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/heapprof"
)

// The lines leaks prints when there is nothing to show, and its warnings.
func TestLeaksEdges(t *testing.T) {
	win := heapprof.Window{Duration: 5 * time.Second, Rate: 512 << 10}
	churn := heapprof.Site{Frames: []heapprof.Frame{{Function: "main"}, {Function: "churn"}, {Function: "malloc"}},
		Sampled: heapprof.Counts{Alloc: 4, AllocBytes: 4 << 20}, Est: heapprof.Estimate{AllocObjects: 5, AllocBytes: 5 << 20}}
	for _, c := range []struct {
		name     string
		p        heapprof.Profile
		explains *heapprof.Explanation
		want     []string
	}{
		{"empty", heapprof.Profile{Window: win}, nil, []string{"0 samples", "no allocation was sampled in the window"}},
		{"churn", heapprof.Profile{Window: win, Sites: []heapprof.Site{churn}, Samples: 4}, &heapprof.Explanation{Measured: -(2 << 20)},
			[]string{"of 5.0 MiB allocated", "nothing sampled in the window is still held", "the heap's in-use bytes shrank by 2.0 MiB"}},
		{"dropped", heapprof.Profile{Window: heapprof.Window{Duration: time.Second, Dropped: 4}, Samples: 12, Incomplete: 3, Truncated: 1},
			nil, []string{"every allocation recorded", "4 samples found the ring full", "low by about 25%", "3 of 12 stacks end before the thread's first frame, 1 cut short"}},
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
