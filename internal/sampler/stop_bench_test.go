package sampler_test

import (
	"context"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/testutil"
)

// BenchmarkStopManyThreads measures how long attaching and detaching the
// sampler keep every thread of a process of 2,000 parked threads stopped
// (issue 22, item 17: 2.2 s in all). It reports the stop per run, not an
// assertion: the time depends on the machine.
//
//	go test ./internal/sampler -run '^$' -bench StopManyThreads -benchtime 5x
func BenchmarkStopManyThreads(b *testing.B) {
	tg := testutil.Start(b, testutil.BuildC(b, "many_threads.c", "-O2"), "2000")
	lt, err := live.Open(tg.Pid)
	if err != nil {
		b.Fatal(err)
	}
	defer lt.Close()
	var stopped, attach, detach time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := sampler.Attach(context.Background(), lt, sampler.Options{Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		attach += s.Stopped
		was := s.Stopped
		left, err := s.Detach(context.Background())
		if err != nil || left.Addr != 0 {
			b.Fatalf("detach: %v, left %+v", err, left)
		}
		detach += s.Stopped - was
		stopped += s.Stopped
	}
	b.ReportMetric(float64(stopped.Milliseconds())/float64(b.N), "ms-stopped/op")
	b.ReportMetric(float64(attach.Milliseconds())/float64(b.N), "ms-attach/op")
	b.ReportMetric(float64(detach.Milliseconds())/float64(b.N), "ms-detach/op")
}

// BenchmarkFreezeThawManyThreads splits a bare stop of the same process
// into stopping every thread (Freeze) and letting them go (Thaw).
func BenchmarkFreezeThawManyThreads(b *testing.B) {
	tg := testutil.Start(b, testutil.BuildC(b, "many_threads.c", "-O2"), "2000")
	lt, err := live.Open(tg.Pid)
	if err != nil {
		b.Fatal(err)
	}
	defer lt.Close()
	var freeze, thaw, held time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		f, err := lt.Freeze(context.Background(), 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		h, err := f.Thaw()
		if err != nil {
			b.Fatal(err)
		}
		freeze += mid.Sub(start)
		thaw += time.Since(mid)
		held += h
	}
	b.ReportMetric(float64(freeze.Microseconds())/1000/float64(b.N), "ms-freeze/op")
	b.ReportMetric(float64(thaw.Microseconds())/1000/float64(b.N), "ms-thaw/op")
	b.ReportMetric(float64(held.Microseconds())/1000/float64(b.N), "ms-held/op")
}
