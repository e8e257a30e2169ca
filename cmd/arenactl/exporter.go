package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"sync"

	"github.com/spf13/cobra"

	"github.com/arenactl/arenactl/internal/exporter"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/inspect"
	"github.com/arenactl/arenactl/internal/render"
)

func newExporterCmd() *cobra.Command {
	cfg := exporter.Defaults
	hold := holdFlag{cfg.Hold}
	var listen string
	var pids []int
	var comm, exe, cgroup, unit []string
	var profPids []int
	var profComm, profUnit []string
	cfg.Profile = exporter.ProfileDefaults
	profRate := sizeValue(cfg.Profile.Rate)
	c := &cobra.Command{
		Use:   "exporter",
		Short: "Serve Prometheus metrics of the glibc malloc state of chosen processes, read-only",
		Long: `exporter watches the processes given by --pid, and the processes matching
--comm, --exe, --cgroup and --unit (evaluated again every --discover-interval,
so processes that start are picked up and processes that exit disappear), and
serves their malloc state as Prometheus metrics on --listen (/metrics).

Each process is read as 'info --read-only' reads it: nothing runs in it,
nothing is trimmed; every thread is stopped only while a copy-on-write image
is made (milliseconds), and the image's allocator is walked while the process
runs (--freeze walk: every thread stopped for the whole walk instead).
Collections follow a schedule of their own, never more often than
--min-interval per process, and less often when the walk's freeze would
exceed --freeze-budget of its time; a scrape serves the last values read
(arenactl_snapshot_age_seconds says how old), so scrapes freeze nothing.

Matchers are regular expressions matched against the whole value. A process
is watched if its PID was given, or if it matches every kind of matcher given
(one of the expressions of each kind). The HTTP endpoint takes no target: only
these flags choose what is read.

--profile-pid and --profile-comm/--profile-unit choose watched processes
to profile: leaks' sampler is placed in each (a few ns per malloc; at most
--profile-max at once) and kept there while it is watched, and what each
holds by allocation stack, allocated since then, is served as a pprof heap
profile at /debug/pprof/heap?pid=N (and /pid/N/debug/pprof/heap) for Parca,
Pyroscope or 'go tool pprof'. The sampler is taken out when the process is
no longer watched and when the exporter exits.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			sel := &cfg.Selector
			for _, pid := range pids {
				if pid <= 0 {
					return &usageError{msg: fmt.Sprintf("--pid %d is not a process id", pid)}
				}
			}
			sel.Pids = pids
			for _, m := range []struct {
				flag  string
				exprs []string
				into  *[]*regexp.Regexp
			}{{"comm", comm, &sel.Comm}, {"exe", exe, &sel.Exe}, {"cgroup", cgroup, &sel.Cgroup}, {"unit", unit, &sel.Unit}} {
				for _, expr := range m.exprs {
					re, err := exporter.Compile(m.flag, expr)
					if err != nil {
						return &usageError{msg: err.Error()}
					}
					*m.into = append(*m.into, re)
				}
			}
			ps := &cfg.Profile.Selector
			for _, pid := range profPids {
				if pid <= 0 {
					return &usageError{msg: fmt.Sprintf("--profile-pid %d is not a process id", pid)}
				}
			}
			ps.Pids = profPids
			if !sel.HasMatchers() {
				// Only watched processes are profiled: a PID that no
				// --pid names would silently never be.
				for _, pp := range profPids {
					if !slices.Contains(pids, pp) {
						return &usageError{msg: fmt.Sprintf("--profile-pid %d is not watched: only processes watched (--pid, or a matcher) are profiled", pp)}
					}
				}
			}
			for _, m := range []struct {
				flag  string
				exprs []string
				into  *[]*regexp.Regexp
			}{{"profile-comm", profComm, &ps.Comm}, {"profile-unit", profUnit, &ps.Unit}} {
				for _, expr := range m.exprs {
					re, err := exporter.Compile(m.flag, expr)
					if err != nil {
						return &usageError{msg: err.Error()}
					}
					*m.into = append(*m.into, re)
				}
			}
			cfg.Profile.Rate = uint64(profRate)
			switch {
			case cfg.Profile.Max <= 0 || cfg.Profile.Every <= 0 || cfg.Profile.Rate == 0:
				return &usageError{msg: "--profile-max, --profile-every and --profile-rate must be positive"}
			case sel.Empty():
				return &usageError{msg: "exporter needs --pid or a matcher (--comm, --exe, --cgroup, --unit) to know what to watch"}
			case cfg.MinInterval <= 0, cfg.DiscoverInterval <= 0, cfg.Options.Timeout <= 0:
				return &usageError{msg: "--min-interval, --discover-interval and --timeout must be positive"}
			case cfg.FreezeBudget <= 0 || cfg.FreezeBudget > 1:
				return &usageError{msg: "--freeze-budget must be above 0 and at most 1"}
			case cfg.Concurrency <= 0 || cfg.MaxTargets <= 0:
				return &usageError{msg: "--concurrency and --max-targets must be positive"}
			}
			var logMu sync.Mutex
			cfg.Logf = func(format string, args ...any) {
				logMu.Lock()
				defer logMu.Unlock()
				// A target names itself (comm, exe): one line whatever it chose.
				fmt.Fprintln(os.Stderr, "arenactl exporter: "+render.Line(fmt.Sprintf(format, args...)))
			}
			if hold.h == inspect.HoldNone {
				return &usageError{msg: "the exporter reads no torn numbers: --freeze is auto, image or walk"}
			}
			l, err := net.Listen("tcp", listen)
			var addrErr *net.AddrError
			var dnsErr *net.DNSError
			switch {
			case errors.As(err, &addrErr), errors.As(err, &dnsErr):
				// Not an address: the command line's to change (one in
				// use, or a port not allowed, is the machine's).
				return &usageError{msg: fmt.Sprintf("--listen %s: %v", listen, err)}
			case err != nil:
				return err
			}
			cfg.Logf("serving http://%s/metrics", l.Addr())
			cfg.Hold = hold.h
			cfg.Reason = reason
			e := exporter.New(cfg)
			// A signal ends both; so does the server failing, which
			// must not leave the collections running.
			ctx, cancel := context.WithCancel(c.Context())
			defer cancel()
			done := make(chan struct{})
			go func() { e.Run(ctx); close(done) }()
			err = e.Serve(ctx, l)
			cancel()
			<-done
			return err
		},
		Annotations: map[string]string{endsByInterrupt: "true"},
	}
	fl := c.Flags()
	fl.StringVar(&listen, "listen", exporter.DefaultListen, "address to serve /metrics on; the default is reachable from this machine only")
	fl.IntSliceVar(&pids, "pid", nil, "watch this process; repeat for several")
	fl.StringArrayVar(&comm, "comm", nil, "watch processes whose name (/proc/PID/comm, 15 characters at most) matches this regular expression; repeat for several")
	fl.StringArrayVar(&exe, "exe", nil, "watch processes whose executable's path matches this regular expression")
	fl.StringArrayVar(&cgroup, "cgroup", nil, "watch processes whose cgroup path (as in /proc/PID/cgroup) matches this regular expression")
	fl.StringArrayVar(&unit, "unit", nil, "watch processes of the systemd units whose name matches this regular expression (e.g. 'mariadb\\.service')")
	fl.DurationVar(&cfg.MinInterval, "min-interval", cfg.MinInterval, "the shortest time between two collections of one process")
	fl.Float64Var(&cfg.FreezeBudget, "freeze-budget", cfg.FreezeBudget, "the fraction of its time a process may spend stopped by collections: a collection that stopped it for F (making the image, or the whole walk with --freeze walk) waits F/budget before the next")
	fl.DurationVar(&cfg.DiscoverInterval, "discover-interval", cfg.DiscoverInterval, "how often the matchers are evaluated again")
	fl.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "how many processes may be collected at the same time")
	fl.IntVar(&cfg.MaxTargets, "max-targets", cfg.MaxTargets, "the most processes watched at once (bounds the metrics' cardinality); more are counted in arenactl_targets_dropped")
	fl.IntSliceVar(&profPids, "profile-pid", nil, "place leaks' sampler in this watched process and serve what it holds by stack at /debug/pprof/heap?pid=N; repeat for several")
	fl.StringArrayVar(&profComm, "profile-comm", nil, "profile the watched processes whose name matches this regular expression (as --profile-pid)")
	fl.StringArrayVar(&profUnit, "profile-unit", nil, "profile the watched processes of the systemd units whose name matches this regular expression (as --profile-pid)")
	fl.IntVar(&cfg.Profile.Max, "profile-max", cfg.Profile.Max, "the most processes profiled at once")
	fl.Var(&profRate, "profile-rate", "the sampler's mean number of bytes allocated between two samples (suffixes K, M, G)")
	fl.DurationVar(&cfg.Profile.Every, "profile-every", cfg.Profile.Every, "how often each profile served is built anew")
	registerFreeze(fl, &hold, false)
	fl.DurationVar(&cfg.Options.Timeout, "timeout", cfg.Options.Timeout, "how long to wait for every thread of a process to stop")
	fl.StringArrayVar(&cfg.Options.DebugDirs, "debug-dir", libc.DefaultDebugDirs, "a directory of detached debug files (DIR/.build-id/xx/rest.debug) whose symbols locate main_arena and mp_; repeat for several")
	return c
}
