package unwind_test

import (
	"testing"

	"github.com/arenactl/arenactl/internal/unwind"
)

// chain is a trace of frames at (sp, pc) pairs, innermost first.
func chain(stop unwind.Stop, f ...uint64) unwind.Trace {
	tr := unwind.Trace{Stop: stop, Truncated: stop == unwind.StopTruncated}
	for i := 0; i < len(f); i += 2 {
		tr.Frames = append(tr.Frames, unwind.Frame{SP: f[i], PC: f[i+1], Exact: i == 0, Method: unwind.MethodCFI})
	}
	tr.Frames[len(tr.Frames)-1].Method = unwind.MethodNone
	return tr
}

func pcs(tr unwind.Trace) []uint64 {
	var out []uint64
	for _, f := range tr.Frames {
		out = append(out, f.SP, f.PC)
	}
	return out
}

func same(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A short copy's chain is joined to the outer frames a whole one of the
// same stack showed, step by exact step, and only then: a stop frame never
// seen, one seen with two callers, or whose rule puts its caller elsewhere
// stays truncated, and so does a chain of a stack with no known end.
func TestOuterJoin(t *testing.T) {
	const end = 0x7000_0000
	whole := chain(unwind.StopEnd, end-0x9000, 0x401000, end-0x5000, 0x402010, end-0x2000, 0x403020, end-0x100, 0x404030)
	o := unwind.NewOuter()
	o.Learn(&whole, end)

	short := chain(unwind.StopTruncated, end-0x6000, 0x405000, end-0x5000, 0x402010)
	short.CallerSP = end - 0x2000
	if !o.Join(&short, end, 0) || short.Truncated || short.Stop != unwind.StopEnd {
		t.Fatalf("not joined: %+v", short)
	}
	want := []uint64{end - 0x6000, 0x405000, end - 0x5000, 0x402010, end - 0x2000, 0x403020, end - 0x100, 0x404030}
	if !same(pcs(short), want) || short.Frames[1].Method != unwind.MethodCFI || short.Frames[3].Method != unwind.MethodNone {
		t.Fatalf("joined to %x, want %x (%+v)", pcs(short), want, short.Frames)
	}

	// Another thread started alike: the same depths below its stack's end.
	const end2 = 0x7100_0000
	other := chain(unwind.StopTruncated, end2-0x5800, 0x405000, end2-0x5000, 0x402010)
	if !o.Join(&other, end2, 0) || other.Frames[len(other.Frames)-1].SP != end2-0x100 {
		t.Fatalf("another thread's chain not joined at its own depths: %x", pcs(other))
	}

	for _, tc := range []struct {
		name     string
		tr       unwind.Trace
		callerSP uint64
		end      uint64
	}{
		{"never seen", chain(unwind.StopTruncated, end-0x6000, 0x405000, end-0x5008, 0x402010), 0, end},
		{"another return address", chain(unwind.StopTruncated, end-0x6000, 0x405000, end-0x5000, 0x402011), 0, end},
		{"its caller elsewhere", chain(unwind.StopTruncated, end-0x6000, 0x405000, end-0x5000, 0x402010), end - 0x2008, end},
		{"unknown end", chain(unwind.StopTruncated, end-0x6000, 0x405000, end-0x5000, 0x402010), 0, 0},
	} {
		tr := tc.tr
		tr.CallerSP = tc.callerSP
		before := pcs(tr)
		if o.Join(&tr, tc.end, 0) || !tr.Truncated || !same(pcs(tr), before) || tr.Frames[len(tr.Frames)-1].Method != unwind.MethodNone {
			t.Errorf("%s: joined or changed: %x", tc.name, pcs(tr))
		}
	}

	// The same frame seen called from elsewhere: joined through no more.
	moved := chain(unwind.StopEnd, end-0x5000, 0x402010, end-0x1000, 0x406000, end-0x100, 0x404030)
	o.Learn(&moved, end)
	again := chain(unwind.StopTruncated, end-0x6000, 0x405000, end-0x5000, 0x402010)
	if o.Join(&again, end, 0) {
		t.Fatalf("joined through a frame seen with two callers: %x", pcs(again))
	}
	if o.Joined != 2 || o.Unjoined != 5 {
		t.Errorf("joined %d, unjoined %d; want 2, 5", o.Joined, o.Unjoined)
	}
}

// A chain longer than the frame bound is not joined.
func TestOuterJoinBound(t *testing.T) {
	const end = 0x7000_0000
	var f []uint64
	for i := 0; i < 10; i++ {
		f = append(f, end-uint64(0x1000*(10-i)), 0x401000+uint64(i))
	}
	whole := chain(unwind.StopEnd, f...)
	o := unwind.NewOuter()
	o.Learn(&whole, end)
	short := chain(unwind.StopTruncated, end-0xb000, 0x400000, f[0], f[1])
	if o.Join(&short, end, 5) {
		t.Fatalf("joined past 5 frames: %d", len(short.Frames))
	}
	if !o.Join(&short, end, 11) || len(short.Frames) != 11 {
		t.Fatalf("not joined within 11 frames: %d", len(short.Frames))
	}
}
