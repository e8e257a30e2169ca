package profile

import (
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/report"
)

// checkWalks checks malloc's split at every walk of a recording of
// record_phases.c against the program's own counts, where the truth was
// the same from 100 ms before the walk's image to 50 ms after the read of
// its pagemap (the log is every 20 ms): what malloc holds (held and tcache lines) is what sites A
// and B hold, plus their chunks' headers and the program's few small
// blocks (stdio's buffers): at most 1 MiB more; A's memory freed and not
// trimmed (phase 4) is free, resident and trimmable, to within 1 MiB;
// after malloc_trim (phase 5) at most 1 MiB is trimmable and A's memory
// is free and not resident; before A's free (phases 1-3) at most 1 MiB is
// trimmable (M_TRIM_THRESHOLD is huge: nothing but the top's few pages);
// the mmapped chunks resident are C's, to within a page a chunk. Every
// phase must have one walk checked at least.
func checkWalks(t *testing.T, rec *report.Recording, truth []phaseTruth) {
	t.Helper()
	const slack = 1 << 20
	var peakA float64
	for _, l := range truth {
		peakA = max(peakA, l.heldA)
	}
	checked := map[int]int{}
	walks := 0
	for i := range rec.Intervals {
		m := rec.Intervals[i].Malloc
		if m == nil {
			continue
		}
		walks++
		var win []phaseTruth
		for _, l := range truth {
			if !l.at.Before(m.At.Add(-100*time.Millisecond)) && !l.at.After(m.ResidentAt.Add(50*time.Millisecond)) {
				win = append(win, l)
			}
		}
		if len(win) < 4 {
			continue
		}
		steady := true
		for _, l := range win {
			steady = steady && l == (phaseTruth{l.at, win[0].phase, win[0].heldA, win[0].heldB, win[0].hC})
		}
		if !steady || win[0].phase < 1 || win[0].phase > 5 {
			continue
		}
		tr := win[0]
		checked[tr.phase]++
		at := m.At.Format("15:04:05.000")
		if held, want := float64(m.Held+m.Tcache), tr.heldA+tr.heldB; held < want || held > want+slack {
			t.Errorf("phase %d, walk at %s: malloc holds %.0f bytes (held %d, tcache %d), sites A and B hold %.0f", tr.phase, at, held, m.Held, m.Tcache, want)
		}
		switch trim := float64(m.Trimmable); {
		case tr.phase == 4 && (trim < peakA-slack || trim > peakA+slack):
			t.Errorf("phase 4, walk at %s: %.0f bytes trimmable, A freed %.0f untrimmed", at, trim, peakA)
		case tr.phase != 4 && trim > slack:
			t.Errorf("phase %d, walk at %s: %.0f bytes trimmable, want (almost) none", tr.phase, at, trim)
		}
		if tr.phase == 5 && float64(m.FreeNotResident) < peakA-slack {
			t.Errorf("phase 5, walk at %s: %d bytes free and not resident after malloc_trim, A's %.0f were given back", at, m.FreeNotResident, peakA)
		}
		if tr.phase == 4 && float64(m.FreeNotResident) > slack {
			t.Errorf("phase 4, walk at %s: %d bytes free and not resident before the trim", at, m.FreeNotResident)
		}
		if mm := float64(m.Mmapped); mm < tr.hC || mm > tr.hC+16*4096 {
			t.Errorf("phase %d, walk at %s: %.0f bytes of mmapped chunks resident, site C holds %.0f", tr.phase, at, mm, tr.hC)
		}
		if m.Stop <= 0 || m.Cpu <= 0 {
			t.Errorf("walk at %s: its cost is not recorded (stop %s, cpu %s)", at, m.Stop, m.Cpu)
		}
	}
	t.Logf("walks checked by phase: %v of %d", checked, walks)
	for _, e := range rec.Events {
		if e.Kind == report.EventWalk {
			t.Logf("%s: %s", e.At.Format("15:04:05.000"), e.Text)
		}
	}
	for p := 1; p <= 5; p++ {
		if checked[p] < 1 {
			t.Errorf("phase %d: no walk checked (the machine too slow?)", p)
		}
	}
}
