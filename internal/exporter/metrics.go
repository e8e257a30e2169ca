package exporter

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/arenactl/arenactl/internal/buildinfo"
)

// The metric model. Names follow Prometheus's conventions: one prefix,
// base units (bytes, seconds), _total for counters, _info for metadata.
// Every per-process series carries pid and comm, and no more: the
// executable, libc and unit are in the _info series, to join on. The
// cardinality is bounded by MaxTargets processes, glibc's arena limit per
// process, the memory-map classes, the diagnosis's finding ids and the
// reasons.

const ns = "arenactl_"

var (
	proc  = []string{"pid", "comm"}
	arena = []string{"pid", "comm", "arena"}
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(ns+name, help, labels, nil)
}

func with(base []string, more ...string) []string {
	return append(append([]string{}, base...), more...)
}

var (
	descBuild = desc("build_info", "The exporter's build: version, commit and Go version; always 1.",
		"version", "revision", "goversion")
	descTargets = desc("targets", "Processes watched now.")
	descDropped = desc("targets_dropped", "Processes the selector matched at the last discovery beyond --max-targets, not watched.")
	descDisc    = desc("discoveries_total", "Discovery cycles run (evaluations of --pid and the matchers).")
	descDiscErr = desc("discovery_errors_total", "Discovery cycles that could not list /proc.")

	descTargetInfo = desc("target_info", "A watched process: its executable, systemd unit and cgroup; always 1.",
		with(proc, "exe", "unit", "cgroup")...)
	descUp = desc("target_up", "1 when the last collection of the process succeeded, 0 when it failed (see arenactl_target_error).",
		proc...)
	descError = desc("target_error", "1, with the reason the last collection failed; absent when it succeeded.",
		with(proc, "reason")...)
	descCollections = desc("collections_total", "Collections made of the process (read-only walks, each with every thread frozen).", proc...)
	descErrors      = desc("collection_errors_total", "Collections of the process that failed, by reason.", with(proc, "reason")...)
	descLastAt      = desc("last_collection_timestamp_seconds", "When the last collection of the process ended, successful or not (Unix time).", proc...)
	descLastOK      = desc("last_success_timestamp_seconds", "When the values served for the process were read (Unix time); absent before the first success.", proc...)
	descAge         = desc("snapshot_age_seconds", "How old the values served for the process are, at this scrape.", proc...)
	descFreeze      = desc("collection_freeze_seconds", "How long every thread of the process was stopped by the last collection.", proc...)
	descWalk        = desc("collection_walk_seconds", "How long the last collection's walk of the allocator took (of its image while the process ran, or within its freeze with --freeze walk; 0 after a failure).", proc...)
	descTook        = desc("collection_duration_seconds", "How long the last collection of the process took, freeze included (opening it, the walk, the memory map).", proc...)
	descFreezeTotal = desc("collection_freeze_seconds_total", "Time every thread of the process has been stopped by collections, in all.", proc...)
	descWalkTotal   = desc("collection_walk_seconds_total", "Time spent walking the process's allocator, in all.", proc...)
	descTookTotal   = desc("collection_duration_seconds_total", "Time spent collecting the process, in all.", proc...)
	descProfileAge  = desc("profile_age_seconds", "How old the pprof profile served for the process (--profile-*) is, at this scrape; absent when none is served.", proc...)

	descLibc = desc("libc_info", "The process's glibc (a static executable holds its own copy); always 1.",
		with(proc, "version", "path", "build_id", "static")...)
	descThreads      = desc("process_threads", "Threads of the process.", proc...)
	descMmapChunks   = desc("mmapped_chunks", "Chunks glibc mmapped outside every arena (allocations above the mmap threshold).", proc...)
	descMmapBytes    = desc("mmapped_bytes", "Bytes of the chunks glibc mmapped outside every arena.", proc...)
	descDamage       = desc("heap_damage", "Inconsistencies the last walk found in the allocator's state (0 on a sound heap).", proc...)
	descClassRss     = desc("memory_rss_bytes", "Resident memory of the process's mappings, by class (main-heap, arena-heap, thread-stack, anon, ...).", with(proc, "class")...)
	descClassDirty   = desc("memory_private_dirty_bytes", "Private dirty memory of the process's mappings, by class.", with(proc, "class")...)
	descClassSwap    = desc("memory_swap_bytes", "Swapped-out memory of the process's mappings, by class.", with(proc, "class")...)
	descClassSize    = desc("memory_mapped_bytes", "Address space of the process's mappings, by class.", with(proc, "class")...)
	descFinding      = desc("finding", "1 for each finding of the diagnosis (arenactl info's findings) on the last collection.", with(proc, "finding", "severity")...)
	descFindingSaves = desc("finding_savings_bytes", "What the fix for a finding would give back, estimated.", with(proc, "finding", "severity")...)

	descSystem    = desc("arena_system_bytes", "Memory the arena holds from the system (malloc_info's system current).", arena...)
	descSystemMax = desc("arena_system_max_bytes", "The most memory the arena has held from the system.", arena...)
	descInUse     = desc("arena_in_use_bytes", "Memory of the arena not free in any bin: system minus free (chunks in threads' tcaches count as in use, as malloc_info counts them).", arena...)
	descFree      = desc("arena_free_bytes", "Free memory of the arena by bins: fast (fastbins) and rest (every other bin, and from glibc 2.31 the top chunk), as malloc_info counts them.", with(arena, "bins")...)
	descFreeCount = desc("arena_free_chunks", "Free chunks of the arena by bins, as malloc_info counts them.", with(arena, "bins")...)
	descTop       = desc("arena_top_bytes", "Size of the arena's top chunk.", arena...)
	descTrim      = desc("arena_trimmable_bytes", "Whole free pages in the arena that malloc_trim would give back (resident or not).", arena...)
	descHeaps     = desc("arena_heaps", "Heaps (mmapped 64 MiB regions) of a thread arena; 0 for the main arena, which grows by sbrk.", arena...)
	descAttached  = desc("arena_threads", "Threads attached to the arena (glibc 2.23 and later).", arena...)
	descTcache    = desc("arena_tcache_bytes", "Bytes of the arena's chunks sitting in some thread's tcache.", arena...)
	descLargest   = desc("arena_largest_free_bytes", "The largest free chunk in the arena's bins.", arena...)
)

// allDescs is every metric the exporter can emit.
var allDescs = []*prometheus.Desc{
	descBuild, descTargets, descDropped, descDisc, descDiscErr,
	descTargetInfo, descUp, descError, descCollections, descErrors, descLastAt, descLastOK, descAge,
	descFreeze, descWalk, descTook, descFreezeTotal, descWalkTotal, descTookTotal, descProfileAge,
	descLibc, descThreads, descMmapChunks, descMmapBytes, descDamage,
	descClassRss, descClassDirty, descClassSwap, descClassSize, descFinding, descFindingSaves,
	descSystem, descSystemMax, descInUse, descFree, descFreeCount, descTop, descTrim, descHeaps,
	descAttached, descTcache, descLargest,
}

// MetricNames lists the name of every metric the exporter can emit (for
// the dashboard's test and the README).
func MetricNames() []string {
	var names []string
	for _, d := range allDescs {
		// Desc has no accessor for its name; its String holds it quoted.
		s := d.String()
		if i := strings.Index(s, `fqName: "`); i >= 0 {
			rest := s[i+len(`fqName: "`):]
			names = append(names, rest[:strings.IndexByte(rest, '"')])
		}
	}
	return names
}

// collector emits the exporter's state as constant metrics. It is made
// from the exporter and reads only what collections left: a scrape stops
// nothing.
type collector struct {
	e     *Exporter
	build buildinfo.Info
}

// Collector returns the exporter's prometheus.Collector.
func (e *Exporter) Collector() prometheus.Collector {
	return &collector{e: e, build: buildinfo.Read()}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// label makes a value safe as a label value: valid UTF-8.
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	rev := c.build.Commit
	if rev == "" {
		rev = "unknown"
	}
	gauge(ch, descBuild, 1, c.build.Version, rev, c.build.GoVersion)

	tgs := e.watched()
	e.mu.Lock()
	dropped, disc, discErr := e.dropped, e.discoveries, e.discoveryErrors
	missing := make([]int, 0, len(e.missing))
	reasons := map[int]string{}
	for pid, r := range e.missing {
		missing, reasons[pid] = append(missing, pid), r
	}
	e.mu.Unlock()
	sort.Ints(missing)
	for _, pid := range missing {
		// No process to name: comm is empty.
		pl := []string{strconv.Itoa(pid), ""}
		gauge(ch, descUp, 0, pl...)
		gauge(ch, descError, 1, with(pl, reasons[pid])...)
	}
	gauge(ch, descTargets, float64(len(tgs)))
	gauge(ch, descDropped, float64(dropped))
	counter(ch, descDisc, float64(disc))
	counter(ch, descDiscErr, float64(discErr))
	for _, tg := range tgs {
		c.collectTarget(ch, tg)
	}
}

func (c *collector) collectTarget(ch chan<- prometheus.Metric, tg *target) {
	p := tg.proc
	pl := []string{strconv.Itoa(p.Pid), label(p.Comm)}
	gauge(ch, descTargetInfo, 1, with(pl, label(p.Exe), label(p.Unit), label(p.Cgroup))...)

	tg.mu.Lock()
	defer tg.mu.Unlock()
	up := 0.0
	if tg.collections > 0 && tg.lastReason == "" {
		up = 1
	}
	gauge(ch, descUp, up, pl...)
	if tg.lastReason != "" {
		gauge(ch, descError, 1, with(pl, tg.lastReason)...)
	}
	counter(ch, descCollections, float64(tg.collections), pl...)
	for _, r := range Reasons {
		counter(ch, descErrors, float64(tg.errors[r]), with(pl, r)...)
	}
	if tg.collections > 0 {
		gauge(ch, descLastAt, float64(tg.lastAt.UnixNano())/1e9, pl...)
		gauge(ch, descFreeze, tg.lastFreeze.Seconds(), pl...)
		gauge(ch, descWalk, tg.lastWalk.Seconds(), pl...)
		gauge(ch, descTook, tg.lastTook.Seconds(), pl...)
	}
	counter(ch, descFreezeTotal, tg.frozenTotal.Seconds(), pl...)
	counter(ch, descWalkTotal, tg.walkTotal.Seconds(), pl...)
	counter(ch, descTookTotal, tg.tookTotal.Seconds(), pl...)
	if tg.prof.pprof != nil {
		gauge(ch, descProfileAge, time.Since(tg.prof.at).Seconds(), pl...)
	}

	s := tg.last
	if s == nil {
		return
	}
	gauge(ch, descLastOK, float64(s.at.UnixNano())/1e9, pl...)
	gauge(ch, descAge, time.Since(s.at).Seconds(), pl...)
	r := s.rep
	static := "false"
	if r.Libc.Static {
		static = "true"
	}
	gauge(ch, descLibc, 1, with(pl, r.Libc.Version.String(), label(r.Libc.Path), r.Libc.BuildID, static)...)
	gauge(ch, descThreads, float64(r.Threads), pl...)
	mi := r.Malloc
	var damage int
	if ro := r.ReadOnly; ro != nil && ro.Walk != nil {
		damage = len(ro.Walk.Damage)
		count, bytes := ro.Walk.Mmapped.Count, ro.Walk.Mmapped.Bytes
		if mi.HasMmap {
			// glibc's own counters, as info shows them.
			count, bytes = mi.MmapCount, mi.MmapBytes
		}
		gauge(ch, descMmapChunks, float64(count), pl...)
		gauge(ch, descMmapBytes, float64(bytes), pl...)
	}
	gauge(ch, descDamage, float64(damage), pl...)
	for _, cl := range r.Maps.Classes {
		l := with(pl, cl.Class.String())
		gauge(ch, descClassRss, float64(cl.Rss), l...)
		gauge(ch, descClassDirty, float64(cl.PrivateDirty), l...)
		gauge(ch, descClassSwap, float64(cl.Swap), l...)
		gauge(ch, descClassSize, float64(cl.Size), l...)
	}
	for _, f := range s.findings {
		l := with(pl, f.ID, f.Severity.String())
		gauge(ch, descFinding, 1, l...)
		gauge(ch, descFindingSaves, float64(f.Savings), l...)
	}
	for i := range mi.Arenas {
		a := &mi.Arenas[i]
		l := with(pl, strconv.Itoa(a.Index))
		gauge(ch, descSystem, float64(a.SystemCurrent), l...)
		gauge(ch, descSystemMax, float64(a.SystemMax), l...)
		gauge(ch, descInUse, float64(a.InUse()), l...)
		gauge(ch, descFree, float64(a.FastBytes), with(l, "fast")...)
		gauge(ch, descFree, float64(a.RestBytes), with(l, "rest")...)
		gauge(ch, descFreeCount, float64(a.FastCount), with(l, "fast")...)
		gauge(ch, descFreeCount, float64(a.RestCount), with(l, "rest")...)
		if r.ReadOnly == nil || r.ReadOnly.Walk == nil || i >= len(r.ReadOnly.Walk.Arenas) {
			continue
		}
		w := &r.ReadOnly.Walk.Arenas[i]
		gauge(ch, descTop, float64(w.TopSize), l...)
		gauge(ch, descTrim, float64(w.Trimmable()), l...)
		gauge(ch, descHeaps, float64(len(w.Heaps)), l...)
		gauge(ch, descAttached, float64(w.AttachedThreads), l...)
		gauge(ch, descTcache, float64(w.TcacheBytes), l...)
		gauge(ch, descLargest, float64(w.LargestFree), l...)
	}
}
