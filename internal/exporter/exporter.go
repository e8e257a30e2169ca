package exporter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/ptrace"
	"github.com/arenactl/arenactl/internal/report"
)

// Config is what the exporter is told at start; nothing changes it later.
type Config struct {
	Selector Selector
	// MinInterval is the shortest time between two collections of one
	// target, whatever the scrapes and the budget say.
	MinInterval time.Duration
	// FreezeBudget is the fraction of time a target may spend frozen: a
	// collection that froze it for F waits at least F/FreezeBudget before
	// the next one, so a large heap is read less often than a small one.
	FreezeBudget float64
	// DiscoverInterval is how often the selector is evaluated again.
	DiscoverInterval time.Duration
	// Concurrency is how many targets may be collected at once.
	Concurrency int
	// MaxTargets bounds how many processes are watched (and so the
	// metrics' cardinality); processes selected beyond it are counted,
	// not watched.
	MaxTargets int
	// Options are the read-only walk's: Timeout bounds stopping every
	// thread; DebugDirs locate main_arena and mp_ by symbol.
	Options inspect.Options
	// Hold is how a target is kept still while it is read: by default a
	// copy-on-write image, so the stop does not grow with the heap.
	Hold inspect.Hold
	// Logf, when set, hears when a target is added or removed.
	Logf func(format string, args ...any)
	// Profile says which targets get a sampler, for the pprof profiles
	// served at /debug/pprof/heap; none by default.
	Profile ProfileConfig
	// Reason is the reason label of a collection's error, one of Reasons.
	// What an error means to the user is decided in one place,
	// cmd/arenactl's table of error kinds, which sets it; unset, every
	// failure is ReasonOther.
	Reason func(error) string
}

// Defaults are the values cmd/arenactl's flags start from.
var Defaults = Config{
	MinInterval:      30 * time.Second,
	FreezeBudget:     0.01,
	DiscoverInterval: 15 * time.Second,
	Concurrency:      1,
	MaxTargets:       64,
	Options:          inspect.Options{Timeout: 3 * time.Second},
}

// maxBackoff bounds how far repeated failures push a target's next
// collection out, in multiples of MinInterval.
const maxBackoff = 16

// Reasons a collection fails, the values of the reason label: a small,
// fixed set, derived from the error's kind (package errkind) by
// Config.Reason.
const (
	ReasonNotGlibc   = "not_glibc"  // another allocator, musl, no glibc malloc found
	ReasonPermission = "permission" // the kernel refused to let us read or trace it
	ReasonGone       = "gone"       // it exited while we read it
	ReasonTraced     = "traced"     // another tracer (a debugger) holds it
	ReasonDamaged    = "damaged"    // the walk found the allocator's state inconsistent
	ReasonTimeout    = "timeout"    // its threads did not stop in time
	ReasonOther      = "other"
)

// Reasons lists every reason, in the order metrics show them.
var Reasons = []string{ReasonNotGlibc, ReasonPermission, ReasonGone, ReasonTraced, ReasonDamaged, ReasonTimeout, ReasonOther}

// reason is cfg.Reason's label for err.
func (c *Config) reason(err error) string {
	if c.Reason == nil {
		return ReasonOther
	}
	return c.Reason(err)
}

// snapshot is one successful collection.
type snapshot struct {
	rep      *report.Report
	findings []diagnose.Finding
	at       time.Time
}

// target is one watched process and what its collections left.
type target struct {
	proc    *process
	removed chan struct{} // closed when it stops being watched

	mu          sync.Mutex
	last        *snapshot // the last success; nil before one
	lastAt      time.Time // the last collection, successful or not
	lastReason  string    // "" when the last collection succeeded
	lastFreeze  time.Duration
	lastWalk    time.Duration
	lastTook    time.Duration
	collections uint64
	errors      map[string]uint64
	frozenTotal time.Duration
	walkTotal   time.Duration
	tookTotal   time.Duration
	prof        profiledState

	// stops is held while a collection stops the process; a profiled
	// target's sampler skips its rescan (which stops it too) meanwhile,
	// rather than fail on a process already traced.
	stops sync.Mutex

	// procMu orders the reads through proc.proc (alive, from the loop and
	// from a scrape) before the loop, ending, closes it.
	procMu   sync.Mutex
	procGone bool // proc.proc is closed
}

// Exporter watches the selected processes and keeps their last collection.
type Exporter struct {
	cfg  Config
	self int
	sem  chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	targets map[key]*target
	dropped int // selected beyond MaxTargets at the last discovery
	// missing are the PIDs given (--pid) that the last discovery could
	// not watch, with the reason: served as target_up 0 and
	// target_error, so that a wrong --pid does not pass unnoticed.
	missing         map[int]string
	discoveries     uint64 // cycles run
	discoveryErrors uint64
	profiling       int // targets with a sampler placed or being placed
}

// New returns an exporter of cfg (Defaults standing in for what is unset)
// that watches nothing until Run.
func New(cfg Config) *Exporter {
	d := Defaults
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = d.MinInterval
	}
	if cfg.FreezeBudget <= 0 || cfg.FreezeBudget > 1 {
		cfg.FreezeBudget = d.FreezeBudget
	}
	if cfg.DiscoverInterval <= 0 {
		cfg.DiscoverInterval = d.DiscoverInterval
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = d.Concurrency
	}
	if cfg.MaxTargets <= 0 {
		cfg.MaxTargets = d.MaxTargets
	}
	if cfg.Options.Timeout <= 0 {
		cfg.Options.Timeout = d.Options.Timeout
	}
	pd := ProfileDefaults
	if cfg.Profile.Max <= 0 {
		cfg.Profile.Max = pd.Max
	}
	if cfg.Profile.Rate == 0 {
		cfg.Profile.Rate = pd.Rate
	}
	if cfg.Profile.Every <= 0 {
		cfg.Profile.Every = pd.Every
	}
	return &Exporter{cfg: cfg, self: os.Getpid(), sem: make(chan struct{}, cfg.Concurrency), targets: map[key]*target{}, missing: map[int]string{}}
}

func (e *Exporter) logf(format string, args ...any) {
	if e.cfg.Logf != nil {
		e.cfg.Logf(format, args...)
	}
}

// Run discovers and collects until ctx ends, then waits for the
// collections under way to finish (each thaws its target before it
// returns).
func (e *Exporter) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.DiscoverInterval)
	defer t.Stop()
	for {
		e.discover(ctx)
		select {
		case <-ctx.Done():
			e.mu.Lock()
			for k, tg := range e.targets {
				e.removeLocked(k, tg, "")
			}
			e.mu.Unlock()
			e.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// discover evaluates the selector: new processes get a collector of their
// own, processes no longer selected (or gone) are dropped with their series.
func (e *Exporter) discover(ctx context.Context) {
	procs, err := e.cfg.Selector.discover(e.self)
	// Given PIDs first, then the oldest, so that the processes watched
	// under MaxTargets are the ones asked for by PID and stay the same
	// from cycle to cycle.
	sort.SliceStable(procs, func(i, j int) bool {
		if procs[i].Given != procs[j].Given {
			return procs[i].Given
		}
		return procs[i].Start < procs[j].Start
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	e.discoveries++
	if err != nil {
		e.discoveryErrors++
	}
	if ctx.Err() != nil {
		for _, p := range procs {
			p.close()
		}
		return
	}
	now := map[key]*process{}
	found := map[int]bool{}
	for _, p := range procs {
		now[p.key()] = p
		found[p.Pid] = true
	}
	// A PID given that is not watched says why, once, and stays in the
	// metrics with that reason while it is not.
	missing := map[int]string{}
	for _, pid := range e.cfg.Selector.Pids {
		if found[pid] {
			continue
		}
		reason, why := notWatched(pid, e.self)
		missing[pid] = reason
		if _, had := e.missing[pid]; !had {
			e.logf("process %d (--pid) %s: not watched", pid, why)
		}
	}
	e.missing = missing
	for k, tg := range e.targets {
		switch p := now[k]; {
		case p == nil:
			e.removeLocked(k, tg, "is no longer selected")
		case p.Comm != tg.proc.Comm || p.Exe != tg.proc.Exe || p.Cgroup != tg.proc.Cgroup:
			// It ran exec, renamed itself or moved: its series start
			// again under the labels it has now.
			e.removeLocked(k, tg, "changed")
		}
	}
	e.dropped = 0
	for _, p := range procs {
		if e.targets[p.key()] != nil {
			p.close() // the target holds its own, since it was found
			continue
		}
		if len(e.targets) >= e.cfg.MaxTargets {
			p.close()
			e.dropped++
			continue
		}
		tg := &target{proc: p, removed: make(chan struct{}), errors: map[string]uint64{}}
		e.targets[p.key()] = tg
		e.logf("watching process %d (%s, %s)", p.Pid, p.Comm, p.Exe)
		e.wg.Add(1)
		go e.loop(ctx, tg)
	}
	e.startProfilesLocked(ctx)
}

// sortedLocked is the watched targets, the oldest process first. e.mu is
// held.
func (e *Exporter) sortedLocked() []*target {
	out := make([]*target, 0, len(e.targets))
	for _, tg := range e.targets {
		out = append(out, tg)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].proc.Start != out[j].proc.Start {
			return out[i].proc.Start < out[j].proc.Start
		}
		return out[i].proc.Pid < out[j].proc.Pid
	})
	return out
}

// notWatched says why a PID given was not selected: the reason label and
// a phrase for the log.
func notWatched(pid, self int) (reason, why string) {
	if pid == self {
		return ReasonOther, "is this exporter"
	}
	// One process answers every question: held, then read.
	proc, err := procfs.OpenProc(pid)
	var st procfs.Stat
	if err == nil {
		defer proc.Close()
		st, err = proc.ReadStat()
	}
	switch {
	case errors.Is(err, procfs.ErrNoProcess):
		return ReasonGone, "does not exist"
	case errors.Is(err, procfs.ErrPermission):
		return ReasonPermission, "cannot be read (permission denied)"
	case err != nil:
		return ReasonOther, "cannot be read: " + err.Error()
	case st.Exited():
		return ReasonGone, "has exited (a zombie)"
	case ptrace.IsImageOf(proc):
		return ReasonOther, "is an arenactl's copy-on-write image of a process"
	}
	return ReasonGone, "was not found"
}

// removeLocked stops watching tg; why ("" to say nothing) goes to the log.
func (e *Exporter) removeLocked(k key, tg *target, why string) {
	if e.targets[k] != tg {
		return
	}
	delete(e.targets, k)
	close(tg.removed)
	if why != "" {
		e.logf("process %d (%s) %s: no longer watched", tg.proc.Pid, tg.proc.Comm, why)
	}
}

func (e *Exporter) remove(tg *target, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removeLocked(tg.proc.key(), tg, why)
}

// alive reports whether the process tg watches still exists: the same
// process, not a later one that reuses its PID, and not a zombie. It is
// read through the directory held since discovery, which fails once the
// process is reaped whoever has its pid now; the start time is compared
// too, for a /proc where no directory could be held (procfs.OpenProc).
func (tg *target) alive() bool {
	tg.procMu.Lock()
	defer tg.procMu.Unlock()
	if tg.procGone {
		return false
	}
	st, err := tg.proc.proc.ReadStat()
	return err == nil && !st.Exited() && st.StartTime == tg.proc.Start
}

// closeProc lets the held directory go, once nothing reads through it.
func (tg *target) closeProc() {
	tg.procMu.Lock()
	defer tg.procMu.Unlock()
	if !tg.procGone {
		tg.procGone = true
		tg.proc.close()
	}
}

// loop collects tg on its schedule until it is removed or ctx ends.
func (e *Exporter) loop(ctx context.Context, tg *target) {
	defer e.wg.Done()
	defer tg.closeProc()
	failures := 0
	for {
		// One collection at a time per target (this loop), Concurrency
		// at a time overall (sem).
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return
		case <-tg.removed:
			return
		}
		if !tg.alive() {
			<-e.sem
			e.remove(tg, "exited")
			return
		}
		frozen, err := e.collect(ctx, tg)
		<-e.sem
		switch {
		case err == nil:
			failures = 0
		case e.cfg.reason(err) == ReasonGone && !tg.alive():
			e.remove(tg, "exited")
			return
		default:
			failures++
		}
		timer := time.NewTimer(e.cfg.nextWait(frozen, failures))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		case <-tg.removed:
			timer.Stop()
			return
		}
	}
}

// nextWait is how long to wait after a collection that froze the target
// for frozen, the last failures of them in a row having failed: at least
// MinInterval, long enough that the freeze stays within FreezeBudget, and,
// for a target that cannot be read (another allocator, damage), longer
// after each failure, up to maxBackoff times MinInterval.
func (c *Config) nextWait(frozen time.Duration, failures int) time.Duration {
	wait := max(c.MinInterval, time.Duration(float64(frozen)/c.FreezeBudget))
	if failures > 0 {
		wait = max(wait, c.MinInterval*time.Duration(min(1<<min(failures-1, 8), maxBackoff)))
	}
	return wait
}

// collect reads tg once, read-only (from an image, or with every thread
// frozen for the walk),
// and records the result. It returns how long the target was frozen.
func (e *Exporter) collect(ctx context.Context, tg *target) (time.Duration, error) {
	start := time.Now()
	o := e.cfg.Options
	o.NoResidency = true // the metrics take the walk's totals only
	// The process discovery found, never a later one given its pid; and
	// its environment read while the walk holds it.
	o.Same = procfs.Identity{Pid: tg.proc.Pid, Start: tg.proc.Start}
	var env diagnose.Env
	o.Env = &env
	tg.stops.Lock()
	rep, err := inspect.ReadOnly(ctx, tg.proc.Pid, o, e.cfg.Hold)
	tg.stops.Unlock()
	if err == nil && !tg.alive() {
		// The walk opened the process by its pid. The one discovery
		// held still being there after it means the pid was never free
		// meanwhile, so the walk read it; gone, the pid may have named a
		// newcomer that started in the same clock tick (which o.Same
		// cannot tell), and what was read is not served as its.
		rep, err = nil, fmt.Errorf("process %d exited while it was read: %w", tg.proc.Pid, ptrace.ErrGone)
	}
	var findings []diagnose.Finding
	var frozen, walked time.Duration
	if err == nil {
		findings = diagnose.Diagnose(rep, env)
		if rep.ReadOnly != nil {
			frozen, walked = rep.ReadOnly.Frozen, rep.ReadOnly.Walked
		}
	}
	took := time.Since(start)
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.collections++
	tg.lastAt, tg.lastTook, tg.lastFreeze, tg.lastWalk = time.Now(), took, frozen, walked
	tg.tookTotal += took
	tg.frozenTotal += frozen
	tg.walkTotal += walked
	if err != nil {
		r := e.cfg.reason(err)
		if tg.lastReason != r {
			e.logf("process %d (%s): %v", tg.proc.Pid, tg.proc.Comm, err)
		}
		tg.lastReason = r
		tg.errors[r]++
		return frozen, err
	}
	if tg.lastReason != "" {
		e.logf("process %d (%s): read again", tg.proc.Pid, tg.proc.Comm)
	}
	tg.lastReason = ""
	tg.last = &snapshot{rep: rep, findings: findings, at: tg.lastAt}
	return frozen, nil
}

// watched returns the targets to serve, dropping those whose process has
// exited since the last discovery: a scrape never shows a process that is
// gone.
func (e *Exporter) watched() []*target {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*target, 0, len(e.targets))
	for k, tg := range e.targets {
		if !tg.alive() {
			e.removeLocked(k, tg, "exited")
			continue
		}
		out = append(out, tg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].proc.Pid < out[j].proc.Pid })
	return out
}
