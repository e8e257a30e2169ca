package unwind_test

import (
	"testing"

	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/unwind"
)

// BenchmarkUnwindSymbolize is the profiler's per-sample cost with warm
// caches: unwinding the parked 9-frame chain from an 8 KiB copy, then
// naming every frame (go test -run '^$' -bench UnwindSymbolize
// ./internal/unwind/). Reported as ns/sample and ns/frame.
func BenchmarkUnwindSymbolize(b *testing.B) {
	bench(b, true)
}

// BenchmarkUnwind is the unwinding alone.
func BenchmarkUnwind(b *testing.B) {
	bench(b, false)
}

func bench(b *testing.B, names bool) {
	cb := buildChain(b, "pie", chainVariants[0].flags...)
	ct := startChain(b, cb)
	lt, smp := freezeSample(b, ct.Pid, ct.chainTid, 8<<10)
	mods := module.NewTable(lt, cb.debugDir)
	defer mods.Close()
	u := unwind.New(mods)
	sym := symbolize.New(mods)
	frames := make([]unwind.Frame, 0, unwind.DefaultMaxFrames)
	tr := u.UnwindInto(frames, smp.regs, smp.stack) // warm the caches
	for _, f := range tr.Frames {
		sym.Symbolize(f.LookupPC())
	}
	n := len(tr.Frames)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tr = u.UnwindInto(frames, smp.regs, smp.stack)
		if names {
			for _, f := range tr.Frames {
				sym.Symbolize(f.LookupPC())
			}
		}
	}
	b.StopTimer()
	if len(tr.Frames) != n {
		b.Fatalf("%d frames, then %d", n, len(tr.Frames))
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(ns, "ns/sample")
	b.ReportMetric(ns/float64(n), "ns/frame")
	ct.quit(b)
}
