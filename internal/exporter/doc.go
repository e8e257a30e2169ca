// Package exporter owns arenactl's Prometheus exporter: which processes it
// watches (PIDs given at start, and matchers on comm, executable, cgroup
// and systemd unit re-evaluated every discovery cycle), when each is read
// (a schedule per target, never more often than the minimum interval and
// within a budget of time frozen, independent of scrapes), and the metric
// model a scrape is served from (the last values read, with their age).
//
// Every collection is inspect.ReadOnly, by default from a copy-on-write
// image made while every thread is stopped for a few milliseconds (raw
// syscalls in one thread; with --freeze walk, every thread frozen for the
// whole walk): no code of the program's is ever run, nothing is trimmed. A scrape reads
// only what the collections left behind, so any number of scrapes freezes
// nothing; nothing in an HTTP request chooses a target.
//
// Targets the command line chooses to profile (ProfileConfig) also get
// leaks' sampler, kept in them while they are watched (inspect.Held), and
// their last profile of what is held by allocation stack is served as
// pprof, for pull-based profile stores.
//
// The reason label of a failed collection is one of a fixed set (Reasons),
// chosen by the classifier the caller gives (Config.Reason): cmd/arenactl
// derives it from the one table that also gives its exit codes and hints.
package exporter
