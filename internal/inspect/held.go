package inspect

import (
	"context"
	"errors"
	"time"

	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// HeldOptions say how a profile of what is held is kept up to date for as
// long as its caller wants it (the exporter's profiled targets).
type HeldOptions struct {
	LeaksOptions
	// Every is how often Held's fn is given the profile (1 s when 0).
	Every time.Duration
}

// Held places leaks' sampler in the process and keeps it there until ctx
// is done or the process exits, giving fn, every o.Every, the profile of
// what was allocated since the sampler was placed and is still held, by
// stack (as record's intervals have it). The sampler is taken out at the
// end, whatever ended it; what taking it out left is returned. fn runs on
// the sampling goroutine: it is to keep the profile, not to work on it.
func Held(ctx context.Context, pid int, o HeldOptions, fn func(p *stackprof.Profile)) (_ report.SamplerLeft, err error) {
	every := o.Every
	if every <= 0 {
		every = time.Second
	}
	t, done, err := openLive(pid, false)
	if err != nil {
		return report.SamplerLeft{}, err
	}
	defer done(&err)
	if err := sameProcess(t, o.Same); err != nil {
		return report.SamplerLeft{}, err
	}
	lo := o.LeaksOptions
	lo.Duration, lo.NoScan = 0, true
	sp, err := startSampler(ctx, t, lo)
	if err != nil {
		return report.SamplerLeft{}, err
	}
	var last, lastDrop time.Duration
	lo.Drained = func(b *stackprof.Builder, at time.Duration) {
		if last > 0 && at-last < every {
			return
		}
		last = at
		p := b.Profile(stackprof.Window{Start: sp.start, Duration: at, Rate: sp.rate})
		fn(p)
		// As record's: freed samples are forgotten once they are most,
		// so what the builder holds is bounded by what is held, not by
		// how long the sampler has been in.
		if c, _ := p.Total(); p.Samples-c.InUse > max(1024, c.InUse) || at-lastDrop > orphanAge {
			b.DropFreed(at - orphanAge)
			lastDrop = at
		}
	}
	_, _, runErr := sample(ctx, t, sp.s, sp.mods, sp.u, sp.sym, lo, sp.start, sp.startClock, &report.Leaks{Pid: t.Pid})
	left, derr := sp.s.Detach(context.WithoutCancel(ctx))
	switch {
	case runErr != nil && errors.Is(runErr, procfs.ErrGone):
		return report.SamplerLeft(left), runErr
	case derr != nil && errors.Is(derr, procfs.ErrGone):
		return report.SamplerLeft(left), derr
	case runErr != nil && !errors.Is(runErr, context.Canceled):
		return report.SamplerLeft(left), runErr
	}
	return report.SamplerLeft(left), derr
}
