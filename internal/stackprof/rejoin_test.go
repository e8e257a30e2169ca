package stackprof_test

import (
	"testing"

	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/unwind"
)

// cut is r with its stack copy cut to n bytes: its unwinding stops in
// the copy, short of the thread's first frame.
func cut(r stackprof.Raw, n int) stackprof.Raw {
	r.Stack.Data = r.Stack.Data[:n]
	return r
}

// A stack cut short by its copy is joined exactly to the outer frames a
// whole copy of the same thread showed: whether the whole one came before
// it, after it (joined again when the profile is made), or as a blocked
// thread's stack given to Learn; without any, it stays truncated.
func TestCutStacksJoined(t *testing.T) {
	st := startSites(t)
	whole := st.widget
	short := cut(whole, 256)
	tr := st.u.Unwind(short.Start, short.Stack)
	if !tr.Truncated {
		t.Fatalf("a 256-byte copy unwinds to the end (%v): nothing to test", tr.Stop)
	}
	// The stop frame's CFA, which the join checks its caller's sp
	// against, is the sp of that frame's caller in the whole stack.
	wt := st.u.Unwind(whole.Start, whole.Stack)
	n := len(tr.Frames)
	if len(wt.Frames) <= n || tr.CallerSP == 0 || tr.CallerSP != wt.Frames[n].SP {
		t.Errorf("the cut stack's last frame's caller at sp %#x; the whole stack's at %#x", tr.CallerSP, wt.Frames[min(n, len(wt.Frames)-1)].SP)
	}
	for _, tc := range []struct {
		name  string
		build func(b *stackprof.Builder)
		sites int
		trunc int
	}{
		{"alone", func(b *stackprof.Builder) { b.Add(short) }, 1, 1},
		{"whole first", func(b *stackprof.Builder) { b.Add(whole); b.Add(short) }, 1, 0},
		{"whole after", func(b *stackprof.Builder) { b.Add(short); b.Add(whole) }, 1, 0},
		{"learned", func(b *stackprof.Builder) { b.Learn(whole.Start, whole.Stack); b.Add(short) }, 1, 0},
		{"short copy of another stack", func(b *stackprof.Builder) {
			other := short
			other.Stack.End += 4096 // another thread's, not alike: its frames at other depths
			b.Add(whole)
			b.Add(other)
		}, 2, 1},
	} {
		b := stackprof.NewBuilder(st.u, st.s)
		tc.build(b)
		p := b.Profile(fixtureWindow)
		if len(p.Sites) != tc.sites || p.Truncated != tc.trunc || p.Incomplete != tc.trunc {
			t.Errorf("%s: %d sites, %d truncated, %d incomplete; want %d sites, %d truncated", tc.name, len(p.Sites), p.Truncated, p.Incomplete, tc.sites, tc.trunc)
			continue
		}
		if tc.trunc == 0 {
			s := p.Sites[0]
			if s.Stop != unwind.StopEnd || s.Sampled.Alloc != p.Samples {
				t.Errorf("%s: the site stops at %v with %d of %d samples", tc.name, s.Stop, s.Sampled.Alloc, p.Samples)
			}
			expectTail(t, &s, []string{"widget_main", "server::handle", "cache<int>::fill", "make_widget", "operator new"})
		}
	}

	// A table of stacks (growth's): a cut stack's site moves to the
	// joined one when the table is finished, its values added to the
	// whole one's with the same labels.
	tb := stackprof.NewStacks(st.u, st.s)
	si, key := tb.Short(short.Start, short.Stack)
	if key == "" {
		t.Fatal("the cut stack is not short")
	}
	sj, _ := tb.Whole(whole.Start, whole.Stack)
	sk, _ := tb.Site(short.Start, short.Stack) // joined when the table is finished
	if si == sj || sk != si {
		t.Fatalf("sites %d (cut), %d (whole), %d (cut, after the whole)", si, sj, sk)
	}
	var v stackprof.Valued
	labels := map[string]string{"class": "anon"}
	tb.Finish(&v, []stackprof.ValuedSite{{Labels: labels, Values: []float64{1}}, {Labels: labels, Values: []float64{2}}}, []int{sj, si})
	if inc, tru := tb.Incomplete(); len(v.Sites) != 1 || v.Sites[0].Values[0] != 3 || v.Sites[0].Stop != unwind.StopEnd || inc != 0 || tru != 0 {
		t.Errorf("finished: %d sites (%+v), %d incomplete, %d truncated; want one of 3, none cut", len(v.Sites), v.Sites, inc, tru)
	}
}
