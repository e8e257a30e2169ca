package unwind_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/unwind"
)

// TestUnwindTruncatedCopy cuts the parked chain's stack copy at every
// 8 bytes: each unwind stops marked truncated with a prefix of the full
// chain, never a wrong frame, until the copy holds it all.
func TestUnwindTruncatedCopy(t *testing.T) {
	b := buildChain(t, "pie", chainVariants[0].flags...)
	ct := startChain(t, b)
	lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
	mods := module.NewTable(lt, b.debugDir)
	defer mods.Close()
	u := unwind.New(mods)
	full := u.Unwind(smp.regs, smp.stack)
	if full.Truncated || len(full.Frames) < 8 {
		t.Fatalf("the full copy unwinds to %d frames, stop %s", len(full.Frames), full.Stop)
	}
	sawPartial := false
	for n := 0; n <= len(smp.stack.Data); n += 8 {
		// With the stack's end known, and without.
		end := smp.stack.End
		if n%16 == 8 {
			end = 0
		}
		tr := u.Unwind(smp.regs, unwind.Stack{Addr: smp.stack.Addr, Data: smp.stack.Data[:n], End: end})
		if len(tr.Frames) == 0 || len(tr.Frames) > len(full.Frames) {
			t.Fatalf("copy of %d bytes: %d frames (full: %d)", n, len(tr.Frames), len(full.Frames))
		}
		for i, f := range tr.Frames {
			if f.PC != full.Frames[i].PC || f.SP != full.Frames[i].SP {
				t.Fatalf("copy of %d bytes: frame #%d is pc %#x sp %#x, the full copy's %#x %#x",
					n, i, f.PC, f.SP, full.Frames[i].PC, full.Frames[i].SP)
			}
		}
		if len(tr.Frames) < len(full.Frames) {
			sawPartial = sawPartial || len(tr.Frames) > 1
			if !tr.Truncated || tr.Stop != unwind.StopTruncated {
				t.Fatalf("copy of %d bytes: %d of %d frames, stop %s truncated %v",
					n, len(tr.Frames), len(full.Frames), tr.Stop, tr.Truncated)
			}
		} else if tr.Truncated {
			t.Fatalf("copy of %d bytes: all %d frames yet marked truncated", n, len(tr.Frames))
		}
	}
	if !sawPartial {
		t.Error("no cut gave a partial chain")
	}
	// The profiler's 8 KiB copy: the parked chain is shallow, so it holds
	// it all.
	if n := min(8<<10, len(smp.stack.Data)); true {
		tr := u.Unwind(smp.regs, unwind.Stack{Addr: smp.stack.Addr, Data: smp.stack.Data[:n], End: smp.stack.End})
		if tr.Truncated {
			t.Errorf("8 KiB copy truncated at %d frames", len(tr.Frames))
		}
	}
	ct.quit(t)
}

// TestUnwindGarbage feeds random stacks and registers, salted with
// addresses of real code and of the stack itself so that the walk gets
// far: no panic, no loop, never more than MaxFrames.
func TestUnwindGarbage(t *testing.T) {
	b := buildChain(t, "pie", chainVariants[0].flags...)
	ct := startChain(t, b)
	lt, smp := freezeSample(t, ct.Pid, ct.chainTid, stackMax)
	mods := module.NewTable(lt, b.debugDir)
	defer mods.Close()
	u := unwind.New(mods)
	u.MaxFrames = 64
	sym := symbolize.New(mods)
	var code [][2]uint64
	for _, m := range mods.Modules() {
		code = append(code, [2]uint64{m.Start, m.End})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	const base = 0x7ffd_0000_0000
	pick := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			c := code[rng.IntN(len(code))]
			return c[0] + rng.Uint64N(c[1]-c[0])
		case 1:
			return base + rng.Uint64N(8<<10)&^7
		case 2:
			return rng.Uint64()
		}
		return uint64(rng.IntN(64))
	}
	data := make([]byte, 8<<10)
	stops := map[unwind.Stop]int{}
	frames := 0
	for it := 0; it < iterations; it++ {
		for i := 0; i+8 <= len(data); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], pick())
		}
		var r debuggee.Regs
		for _, n := range host.Perf.Order { // pc, sp, the frame pointer, the callee-saved
			setReg(&r, host, n, pick())
		}
		r.SetSPOf(host, base+rng.Uint64N(64)*8)
		regs := unwind.Start{Regs: r, HaveCalleeSaved: rng.IntN(2) == 0}
		if it%3 == 0 { // a real return address in the parked chain, then garbage
			regs.Regs.SetPCOf(host, smp.regs.Regs.PCOf(host))
		}
		stack := unwind.Stack{Addr: base, Data: data}
		if it%2 == 0 {
			stack.End = base + uint64(len(data))
		}
		tr := u.Unwind(regs, stack)
		if len(tr.Frames) == 0 || len(tr.Frames) > u.MaxFrames {
			t.Fatalf("iteration %d: %d frames", it, len(tr.Frames))
		}
		for _, f := range tr.Frames {
			sym.Symbolize(f.LookupPC())
		}
		stops[tr.Stop]++
		frames += len(tr.Frames)
	}
	t.Logf("%d unwinds, %d frames, stops %v", iterations, frames, stops)
	ct.quit(t)
}
