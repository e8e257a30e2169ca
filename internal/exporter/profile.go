package exporter

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/procfs"
	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// ProfileConfig says which watched targets get leaks' sampler placed in
// them, so that the exporter serves what they hold by allocation stack as
// pprof profiles. Nothing is placed unless the selector selects: the
// sampler runs code in the process (a few ns per malloc), which a read-only
// collection never does.
type ProfileConfig struct {
	// Selector picks among the watched targets: a target is profiled
	// when its PID is in Pids, or when it matches every kind of matcher
	// given. Empty, none is.
	Selector Selector
	// Max is how many targets are profiled at once (those watched first
	// get the places; a place freed is taken at the next discovery).
	Max int
	// Rate is the sampler's mean bytes between two samples.
	Rate uint64
	// Every is how often the profile served is built anew.
	Every time.Duration
}

// ProfileDefaults are the values cmd/arenactl's flags start from.
var ProfileDefaults = ProfileConfig{Max: 4, Rate: sampler.DefaultRate, Every: 10 * time.Second}

// selects reports whether the profile selector picks p, a watched process.
func (s *Selector) selects(p *process) bool {
	for _, pid := range s.Pids {
		if pid == p.Pid {
			return true
		}
	}
	return s.HasMatchers() &&
		(len(s.Comm) == 0 || anyMatch(s.Comm, p.Comm)) &&
		(len(s.Exe) == 0 || anyMatch(s.Exe, p.Exe)) &&
		(len(s.Cgroup) == 0 || anyMatch(s.Cgroup, p.Cgroup)) &&
		(len(s.Unit) == 0 || anyMatch(s.Unit, p.Unit))
}

// profiledState is a profiled target's sampler's, under target.mu.
type profiledState struct {
	on    bool      // a sampler is (being) placed
	pprof []byte    // the last profile, gzipped profile.proto; nil before one
	at    time.Time // when it was built
	err   string    // why the sampler ended, when it did
}

// startProfilesLocked places a sampler in each watched target the
// selector picks that has none, while places are free. e.mu is held.
func (e *Exporter) startProfilesLocked(ctx context.Context) {
	pc := &e.cfg.Profile
	if pc.Selector.Empty() {
		return
	}
	// The oldest watched first, as targets are taken under MaxTargets.
	for _, tg := range e.sortedLocked() {
		if e.profiling >= pc.Max {
			return
		}
		tg.mu.Lock()
		skip := tg.prof.on || tg.prof.err != ""
		tg.mu.Unlock()
		if skip || !pc.Selector.selects(tg.proc) {
			continue
		}
		tg.mu.Lock()
		tg.prof.on = true
		tg.mu.Unlock()
		e.profiling++
		e.wg.Add(1)
		go e.profile(ctx, tg)
	}
}

// profile keeps a sampler in tg until tg is no longer watched or ctx ends,
// then takes it out (Held does, whatever ended it). A sampler that cannot
// be placed, or ends by an error, is not placed again in that process.
func (e *Exporter) profile(ctx context.Context, tg *target) {
	defer e.wg.Done()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-tg.removed:
			cancel()
		case <-pctx.Done():
		}
	}()
	pc := &e.cfg.Profile
	o := inspect.HeldOptions{Every: pc.Every}
	o.Options, o.Rate, o.Stops = e.cfg.Options, pc.Rate, &tg.stops
	o.Note = nil // the sampler's notes are leaks' console lines
	// The process discovery found, never a later one given its pid.
	o.Same = procfs.Identity{Pid: tg.proc.Pid, Start: tg.proc.Start}
	var buf bytes.Buffer
	left, err := inspect.Held(pctx, tg.proc.Pid, o, func(p *stackprof.Profile) {
		buf.Reset()
		if err := stackprof.WritePprof(&buf, p); err != nil {
			return
		}
		b := bytes.Clone(buf.Bytes())
		tg.mu.Lock()
		tg.prof.pprof, tg.prof.at = b, time.Now()
		tg.mu.Unlock()
	})
	why := ""
	switch {
	case err != nil && pctx.Err() == nil:
		why = err.Error()
		e.logf("process %d (%s): no profile: %v", tg.proc.Pid, tg.proc.Comm, err)
	case left.Addr != 0:
		e.logf("process %d (%s): the sampler's %d bytes at %#x stay in the process, inert: %s", tg.proc.Pid, tg.proc.Comm, left.Size, left.Addr, left.Why)
	}
	tg.mu.Lock()
	tg.prof.on, tg.prof.err = false, why
	if why != "" {
		tg.prof.pprof = nil
	}
	tg.mu.Unlock()
	e.mu.Lock()
	e.profiling--
	e.mu.Unlock()
}

// pprofNames are the profile names served, as Go's net/http/pprof names a
// heap profile: pull-based stores scrape "allocs" for memory by default
// (Grafana Alloy's pyroscope.scrape) or "heap"; both are the same profile
// here, whose default sample type is inuse_space.
var pprofNames = map[string]bool{"heap": true, "allocs": true}

// servePprof serves a profiled target's last profile: the target is
// named by ?pid=N or by the path prefix /pid/N (Parca's path_prefix), and
// is one of those the command line chose to profile; a request only reads
// the bytes the sampler's goroutine left, so it reaches no process and no
// file, whatever it asks.
func (e *Exporter) servePprof(w http.ResponseWriter, r *http.Request) {
	if !pprofNames[r.PathValue("name")] {
		http.Error(w, "no such profile: heap and allocs are served", http.StatusNotFound)
		return
	}
	arg := r.PathValue("pid")
	if arg == "" {
		arg = r.URL.Query().Get("pid")
	}
	pid, err := strconv.Atoi(arg)
	if err != nil || pid <= 0 || len(arg) > 10 {
		http.Error(w, "name a profiled process: ?pid=N or /pid/N/debug/pprof/heap", http.StatusNotFound)
		return
	}
	var body []byte
	for _, tg := range e.watched() {
		if tg.proc.Pid != pid {
			continue
		}
		tg.mu.Lock()
		body = tg.prof.pprof
		tg.mu.Unlock()
	}
	if body == nil {
		http.Error(w, fmt.Sprintf("process %d is not profiled (see --profile-pid, --profile-comm), or its first profile is not built yet", pid), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="heap-%d.pb.gz"`, pid))
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}
