package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

// WatchOptions say how each sample of a watch is taken, and how often.
type WatchOptions struct {
	Options
	// Interval is the time between the starts of two samples.
	Interval time.Duration
	// Count is how many samples to take; 0: until ctx is done.
	Count int
	// Inject takes each sample as Info does (malloc_info in one borrowed
	// thread) instead of as ReadOnly does, holding the process as Hold says.
	Inject bool
	Hold   Hold
	// Failed is told of a sample that failed when the watch goes on
	// regardless; nil drops them.
	Failed func(at time.Time, err error)
}

// WatchSample is one sample of a watch: its report, diagnosed and
// summarized, and how it compares with the sample before.
type WatchSample struct {
	// At is when the sample began.
	At       time.Time
	Report   *report.Report
	Findings []diagnose.Finding
	// Summary numbers the sample from 1 (Summary.Sample), as people
	// count them ("1 sample", "of 3 samples").
	Summary *report.Summary
	// Changes are since the sample before; nil for the first.
	Changes *report.Diff
}

// Watched is what a watch saw, from its first sample to its last, for
// the summary of what changed over it; First is nil when no sample was
// taken.
type Watched struct {
	Samples     int
	First, Last *report.Summary
	Rss         []uint64 // every sample's RSS, for a trend
}

// maxWatchFailures is how many samples in a row may fail (other than by
// the process's exit) before a watch gives up.
const maxWatchFailures = 3

// Watch samples the process every o.Interval until o.Count samples were
// taken, ctx is done (an interruption: no error), the process exits (an
// error that is ptrace.ErrGone) or maxWatchFailures samples in a row
// failed, and hands each sample to each; an error from each ends the
// watch with it. What was seen is returned in every case, with the error.
// Nothing is held between samples.
func Watch(ctx context.Context, pid int, o WatchOptions, each func(*WatchSample) error) (*Watched, error) {
	seen := &Watched{}
	born, _ := procfs.IdentityOf(pid)
	gone := func() error {
		return fmt.Errorf("process %d exited after %s: %w", pid, samples(seen.Samples), ptrace.ErrGone)
	}
	var failed int
	next := time.Now()
	for o.Count == 0 || seen.Samples < o.Count {
		if !sleepUntil(ctx, next) {
			break
		}
		at := time.Now()
		next = at.Add(o.Interval)
		if seen.Samples > 0 && !born.Alive() {
			return seen, gone()
		}
		var rep *report.Report
		var err error
		o.Options.Same = born // a later process given the pid is never sampled
		var env diagnose.Env
		o.Options.Env = &env
		if o.Inject {
			rep, err = Info(ctx, pid, o.Options)
		} else {
			rep, err = ReadOnly(ctx, pid, o.Options, o.Hold)
		}
		if ctx.Err() != nil && err != nil {
			break // interrupted during the sample, which restored everything
		}
		if err != nil {
			if seen.Samples == 0 {
				return seen, err
			}
			if !born.Alive() {
				return seen, gone()
			}
			if failed++; failed == maxWatchFailures {
				return seen, fmt.Errorf("%d samples in a row failed, the last with: %w", failed, err)
			}
			if o.Failed != nil {
				o.Failed(at, err)
			}
			continue
		}
		failed = 0
		if born.Start == 0 { // it had not started, or exited and came back
			born, _ = procfs.IdentityOf(pid)
		}
		if err := each(seen.add(at, rep, env)); err != nil {
			return seen, err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return seen, nil
}

func samples(n int) string {
	if n == 1 {
		return "1 sample"
	}
	return fmt.Sprintf("%d samples", n)
}

// sleepUntil waits for t; false if the context was cancelled first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}

// add diagnoses and summarizes a sample taken at at, compares it with the
// one before and records it; env is the process's, read while the sample
// held it.
func (seen *Watched) add(at time.Time, rep *report.Report, env diagnose.Env) *WatchSample {
	findings := diagnose.Diagnose(rep, env)
	s := report.Summarize(rep, diagnose.Summaries(findings))
	seen.Samples++
	// Without the monotonic reading: the summary's span is the one the
	// printed times show.
	s.Sample = &report.Sample{Index: seen.Samples, Time: at.Round(0)}
	seen.Rss = append(seen.Rss, s.Rollup.Rss)
	ws := &WatchSample{At: at, Report: rep, Findings: findings, Summary: s}
	if seen.Last != nil {
		ws.Changes = report.Compare(seen.Last, s)
	}
	if seen.First == nil {
		seen.First = s
	}
	seen.Last = s
	return ws
}
