package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/unwind"
)

// LeaksOptions say how long and how finely to sample.
type LeaksOptions struct {
	Options
	// Duration is the window; it ends earlier when ctx is done (Ctrl-C).
	Duration time.Duration
	// Rate is the mean bytes between samples (sampler.DefaultRate).
	Rate uint64
	// MinAge: a block allocated less than this before the window's end
	// does not count as held (it may be freed in a moment).
	MinAge time.Duration
	// RingSlots is the sampler's ring (sampler.Options; 0: its default).
	// The tests make it tiny to make it overflow.
	RingSlots int
	// Progress, when set, hears every drain: the elapsed time and the
	// samples so far.
	Progress func(elapsed time.Duration, samples int)
	// NoScan: no scan of the heap at the window's end (the profile then
	// says nothing of what is leaked, only held).
	NoScan bool
	// Drained, when set, is given the profile's builder after every
	// drain, with the time since the window opened (record reads the
	// live set from it); the window goes on meanwhile.
	Drained func(b *stackprof.Builder, at time.Duration)
	// Stops, when set, is held by whoever else stops the process's
	// threads meanwhile (record's trigger snapshots): a rescan, which
	// stops them too, skips its turn while it is.
	Stops *sync.Mutex
}

// drainEvery is how often the ring is read; rescanEvery how often the
// process's objects are looked at again for ones dlopen'd meanwhile.
const (
	drainEvery  = 100 * time.Millisecond
	rescanEvery = time.Second
)

// Leaks samples the process's allocations for the window and builds the
// profile of what was allocated and is still held, by call stack. The
// process is read (copy-on-write image) before and after, for the in-use
// growth the profile is to explain. A core cannot be profiled: it has no
// history.
func Leaks(ctx context.Context, pid int, o LeaksOptions) (_ *report.Leaks, err error) {
	// The scan at the window's end is checked now, before anything is
	// placed in the process; the heap it will scan is the one there now.
	op := budget.Scan
	if o.NoScan {
		op = budget.Walk
	}
	if err := budget.Check(pid, op, o.MaxMemory, o.Jobs); err != nil {
		return nil, err
	}
	before, err := inUse(ctx, pid, o.Options)
	if err != nil {
		return nil, err
	}
	t, done, err := openLive(pid, false)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	pid = t.Pid
	rep := &report.Leaks{Pid: pid, Exe: t.Exe, Libc: report.LibcOf(t.Libc), InUseBefore: before}
	sp, err := startSampler(ctx, t, o)
	if err != nil {
		return nil, err
	}
	s, start := sp.s, sp.start
	rate := sp.rate
	b, last, runErr := sample(ctx, t, s, sp.mods, sp.u, sp.sym, o, start, sp.startClock, rep)
	// Detached whatever happened, and even when ctx is done: a Ctrl-C
	// ends the window, never leaves the hooks in.
	left, derr := s.Detach(context.WithoutCancel(ctx))
	// The window ends where the last drain began: what came after was
	// never read (and is not counted), frees included.
	rep.Window = stackprof.Window{Start: start, Duration: last, Rate: rate, Dropped: rep.Dropped, Shortened: rep.Shortened, MaxShift: rep.MaxShift}
	rep.Patched, rep.Skipped, rep.Left, rep.Stopped = len(s.Patches), s.Skipped, report.SamplerLeft(left), s.Stopped
	if runErr == nil {
		runErr = derr
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return nil, runErr
	}
	rep.Interrupted = ctx.Err() != nil
	if !o.NoScan {
		if err := classifyHeld(context.WithoutCancel(ctx), t, o.Options, b); err != nil && o.Note != nil {
			o.Note(fmt.Sprintf("the heap was not scanned for what is leaked: %v", err))
		}
	}
	rep.Profile = b.Profile(rep.Window)
	if after, err := inUse(context.WithoutCancel(ctx), pid, o.Options); err == nil {
		rep.InUseAfter, rep.Measured = after, true
	}
	return rep, nil
}

// started is a sampler placed in a process, its window open.
type started struct {
	s          *sampler.Sampler
	mods       *module.Table
	u          *unwind.Unwinder
	sym        *symbolize.Symbolizer
	rate       uint64
	start      time.Time
	startClock uint64
}

// startSampler places the sampler in t and opens its window; the caller
// detaches it, whatever happens next.
func startSampler(ctx context.Context, t *live.Target, o LeaksOptions) (*started, error) {
	// Every loaded object's CFI and symbols are read before the window
	// opens: read at the first stack through each, they held up the
	// first drain for 0.4 s (leaks.cpp), long enough for the ring to fill
	// and samples to be dropped.
	mods := module.NewTable(t, o.DebugDirs...)
	fetchDebug(ctx, mods, o.Note)
	u, sym := unwind.New(mods), symbolize.New(mods)
	u.Prepare()
	sym.Prepare()
	if o.Note != nil {
		for _, k := range sym.SkippedDWARF() {
			o.Note(k.String())
		}
	}
	// These tables are kept for the whole session: the memory limit
	// follows them from now on, or the collector marks them back to back.
	budget.Hold()
	s, err := sampler.Attach(ctx, t, sampler.Options{Rate: o.Rate, Timeout: o.Timeout, RingSlots: o.RingSlots})
	if err != nil {
		return nil, err
	}
	rate := o.Rate
	if rate == 0 {
		rate = sampler.DefaultRate
	}
	start := time.Now()
	// The window begins at the sampler's clock now: samples taken since
	// the threads were let go, before start, are not counted. Under load
	// (16 threads on 2 CPUs) that can be long: one window put a site of
	// 1 MiB blocks 14 % high.
	startClock, err := s.Clock()
	if err != nil {
		_, _ = s.Detach(context.WithoutCancel(ctx))
		return nil, t.Explain(err)
	}
	// Said only now that the window's clock has begun: said before, a
	// caller that acts on it (the tests send "go" at once) could allocate
	// before startClock, and those samples were not counted: one window
	// of 128 sampled blocks, under load, counted none.
	if o.Note != nil {
		for _, n := range s.Notes {
			o.Note(n)
		}
		until := "until interrupted (Ctrl-C)"
		if o.Duration > 0 {
			until = "for " + o.Duration.String() + " (Ctrl-C ends it earlier)"
		}
		o.Note(fmt.Sprintf("the sampler is in place: %d GOT entries point at it; the window is open %s", len(s.Patches), until))
	}
	return &started{s: s, mods: mods, u: u, sym: sym, rate: rate, start: start, startClock: startClock}, nil
}

// sample drains the ring until the window ends, building the profile as it
// goes (each stack is unwound while the objects it names are mapped). It
// returns when, since start, the last drain began.
func sample(ctx context.Context, t live.Observed, s *sampler.Sampler, mods *module.Table, u *unwind.Unwinder, sym *symbolize.Symbolizer, o LeaksOptions, start time.Time, startClock uint64, rep *report.Leaks) (_ *stackprof.Builder, last time.Duration, _ error) {
	b := stackprof.NewBuilder(u, sym)
	b.MinAge = o.MinAge
	b.SetMemory(t.ReadAt) // cut stacks completed where the thread is still in them
	blocked := stackprof.NewBlockedStacks(t, b.Learn)
	blocked.Read()
	cut := 0
	end := start.Add(o.Duration)
	// The first read comes soon, to learn how fast samples come.
	timer := time.NewTimer(drainEvery / 20)
	defer timer.Stop()
	lastScan := start
	var prev time.Duration // when the drain before began
	var seenDropped uint64 // drops counted by the drains so far
	var owed float64       // drops not yet stood for
	var scratch []byte     // each stack as the unwinder takes it, in turn
	for {
		stop := false
		select {
		case <-ctx.Done():
			stop = true
		case now := <-timer.C:
			stop = o.Duration > 0 && !now.Before(end)
		}
		if time.Since(lastScan) >= rescanEvery && !stop && (o.Stops == nil || o.Stops.TryLock()) {
			lastScan = time.Now()
			err := s.Rescan(ctx)
			if o.Stops != nil {
				o.Stops.Unlock()
			}
			if err != nil && ctx.Err() == nil {
				return b, last, err
			}
			// Caches are dropped only when objects came or went: parsing
			// a big binary's CFI and symbols again every second would
			// cost the machine's CPU, which the process shares.
			was := moduleSet(mods)
			mods.Refresh()
			if moduleSet(mods) != was {
				u.Forget()
				sym.Forget()
			}
		}
		last = time.Since(start)
		b.SampledBefore(time.Now())
		recs, st, err := s.Drain()
		if err != nil {
			return b, last, t.Explain(err)
		}
		rep.Dropped, rep.Shortened, rep.Untracked, rep.MaxShift = st.Dropped, st.Shortened, st.Untracked, st.MaxShift
		at := time.Since(start)
		ms := t.Mappings()

		// Samples dropped since the last drain (both rings were full,
		// which takes a process allocating faster than the short ring
		// is read) have no record: the ones this drain kept stand for
		// them too, as many more as were dropped (what the process
		// allocates is taken to be alike over the few milliseconds
		// between two drains); drops with nothing kept wait for the
		// next drain's.
		owed += float64(st.Dropped - seenDropped)
		seenDropped = st.Dropped
		kept, short := 0.0, 0
		for i := range recs {
			if recs[i].Kind != "free" {
				kept++
				if recs[i].Short {
					short++
				}
			}
		}
		scale := 0.0
		if kept > 0 && owed > 0 {
			scale, owed = (kept+owed)/kept, 0
		}
		// The window ends at the sampler's clock as the last drain
		// began: what was stamped later is not counted.
		var endClock uint64
		if stop {
			endClock = st.Clock
		}
		allocs := 0
		add := func(recs []sampler.Record, at time.Duration, ms []maps.Mapping) {
			for i := range recs {
				r := &recs[i]
				if endClock != 0 && r.Stamp > endClock || r.Stamp != 0 && r.Stamp <= startClock {
					continue
				}
				if r.Kind == "free" {
					b.Move(r.Addr, r.To, r.Stamp, at)
					continue
				}
				var rw stackprof.Raw
				rw, scratch = raw(r, at, s.Real(r.Kind), ms, scratch)
				rw.Scale = scale
				b.Add(rw)
				rep.Samples++
				allocs++
			}
		}
		add(recs, at, ms)
		if n := b.Cut(); n > cut {
			// New stacks cut short and not joined: the threads blocked
			// now may show their outer frames.
			cut = n
			blocked.Read()
		}
		if o.Progress != nil {
			o.Progress(at, rep.Samples)
		}
		if o.Drained != nil && !stop {
			o.Drained(b, at)
		}
		timer.Reset(min(nextDrain(allocs-short, last-prev, s.RingSlots()), nextDrain(short, last-prev, s.ShortSlots()), cutDrain))
		prev = last
		if stop {
			// A ring is read up to its first record still being written;
			// the ones after it may have been taken in the window. A
			// thread preempted in the middle of one (16 threads on 2
			// CPUs) held back the window's last records, and their blocks
			// went uncounted. Read again, a little later, for those.
			for wait := 0; st.Pending && wait < finalWaits; wait++ {
				time.Sleep(drainEvery / 20)
				b.SampledBefore(time.Now())
				if recs, st, err = s.Drain(); err != nil {
					return b, last, t.Explain(err)
				}
				add(recs, last, t.Mappings())
			}
			return b, last, nil
		}
	}
}

// cutDrain is the longest between two drains: a stack cut short by its
// copy is completed from its thread's stack as it is when the sample is
// unwound, if the thread is still in the calls the copy shows
// (stackprof's extend.go); MariaDB's CREATE TABLE has left them within
// tens of milliseconds (at drainEvery, 89-95% of its samples under
// mariadb-slap reached their thread's first frame), and its CREATE TABLE
// LIKE and DROP TABLE often within 20 ms: at 20 ms, 23 runs in 30 reached
// 95% (89.5-99.9%), their stragglers bursts of 100-150 samples of one
// such statement; at 5 ms, 14 runs in 14 (99.4-99.8%). On a process that
// allocates little it costs arenactl 0.4% of a CPU more.
const cutDrain = 5 * time.Millisecond

// finalWaits bounds how many more times the window's end reads the rings
// for records that were being written at its last drain (5 ms apart): a
// second, for a thread the machine's load keeps off the CPUs (a thread
// stopped in the middle of one, by SIGSTOP, holds the window's end that
// long).
const finalWaits = 200

// nextDrain is when to read a ring of slots records again, given that
// the last read took n samples from it that came in over since: about
// when it will be an eighth full, at the rate they came, between
// drainEvery/50 and drainEvery. A ring found more than half full passes
// samples on to the short ring (their stacks are then completed from
// others, less surely): at 3 GB/s of allocation (5,900 samples a second
// at the default rate), a fixed 100 ms, or 10 ms only after a drain that
// found it a quarter full, gave 25 % of the samples short stacks.
func nextDrain(n int, since time.Duration, slots int) time.Duration {
	if n == 0 || since <= 0 {
		return drainEvery
	}
	next := time.Duration(float64(since) * float64(slots) / 8 / float64(n))
	return min(max(next, drainEvery/50), drainEvery)
}

// raw turns a record into the profiler's sample: the leaf is the allocator
// function at its entry (the caller's return address on top of its
// stack), so the caller is symbolized at its call. The sample's stack is
// put together in scratch (returned, grown if need be): the Builder
// keeps no stack.
func raw(r *sampler.Record, at time.Duration, fn uint64, ms []maps.Mapping, scratch []byte) (stackprof.Raw, []byte) {
	c := stackprof.Call{Entry: fn, Regs: r.Regs, Stack: r.Stack}
	if m, ok := maps.Find(ms, r.Regs.SPOf(arch.Host())); ok {
		c.StackEnd = m.End
	}
	start, st, scratch := c.UnwindWith(scratch)
	return stackprof.Raw{Addr: r.Addr, Size: r.Size, Old: r.Old, OldSize: r.OldSize, Tid: r.Tid, Stamp: r.Stamp, Moved: r.Moved, At: at, Kind: r.Kind, Short: r.Short, Thin: r.Thin, Shift: r.Shift, Start: start, Stack: st}, scratch
}

// inUse is the bytes the allocator holds in use, from a read-only walk
// (a copy-on-write image when one can be made).
func inUse(ctx context.Context, pid int, o Options) (uint64, error) {
	o.NoResidency = true
	rep, err := ReadOnly(ctx, pid, o, HoldAuto)
	if err != nil {
		return 0, fmt.Errorf("reading the heap before profiling: %w", err)
	}
	var n uint64
	for _, a := range rep.ReadOnly.Walk.Arenas {
		n += a.InUseBytes - a.TcacheBytes // a tcache's chunks are free to the program
	}
	return n + rep.ReadOnly.Walk.Mmapped.Bytes, nil
}

// moduleSet identifies the objects a table holds, to tell a change.
func moduleSet(mods *module.Table) string {
	var b strings.Builder
	for _, m := range mods.Modules() {
		fmt.Fprintf(&b, "%p,", m)
	}
	return b.String()
}
