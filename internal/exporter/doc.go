// Package exporter owns arenactl's Prometheus exporter: which processes it
// watches (PIDs given at start, and matchers on comm, executable, cgroup
// and systemd unit re-evaluated every discovery cycle), when each is read
// (a schedule per target, never more often than the minimum interval and
// within a budget of time frozen, independent of scrapes), and the metric
// model a scrape is served from (the last values read, with their age).
//
// Every collection is inspect.ReadOnly with every thread frozen for the
// walk: nothing is ever run in a target, nothing is trimmed. A scrape reads
// only what the collections left behind, so any number of scrapes freezes
// nothing; nothing in an HTTP request chooses a target.
package exporter
