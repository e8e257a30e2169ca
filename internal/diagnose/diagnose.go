// Package diagnose turns a report.Report into findings: what makes the
// process's memory high, the numbers that show it, the fix for the target's
// glibc version, and what the fix would save. It reads only the report and
// a few facts about the process's environment, so it works the same on a
// live process and on a core.
package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/report"
)

// Severity orders findings.
type Severity int

const (
	Info Severity = iota
	Warning
	Critical
)

func (s Severity) String() string { return [...]string{"info", "warning", "critical"}[s] }

// Finding is one diagnosis.
type Finding struct {
	ID       string // stable: "arena-bloat", "fragmentation", ...
	Severity Severity
	Title    string
	Evidence []string // the numbers behind it
	Fix      string   // what to do, for this glibc version
	Savings  uint64   // bytes the fix would give back, estimated
}

// Env is what the report does not carry about the process.
type Env struct {
	OnlineCPUs   int               // 0 when unknown (a core)
	AffinityCPUs int               // CPUs in the process's affinity mask; 0 when unknown
	Vars         map[string]string // MALLOC_* and GLIBC_TUNABLES from its environment; nil when unknown
}

// Thresholds of what is worth a finding. A finding about a few megabytes
// wastes an on-call engineer's time.
const (
	minSavings       = 16 << 20
	fragPercent      = 30
	stackShare       = 0.25
	tcacheHoard      = 4 << 20
	manyMmapped      = 1000
	defaultThreshold = 128 << 10
)

// Diagnose returns the findings for a report, most severe and largest first.
func Diagnose(r *report.Report, env Env) []Finding {
	d := &diag{r: r, env: env, tunables: parseTunables(env.Vars["GLIBC_TUNABLES"])}
	d.arenas()
	d.fragmentation()
	d.thresholds()
	d.tcaches()
	d.outsideMalloc()
	sort.SliceStable(d.out, func(i, j int) bool {
		if d.out[i].Severity != d.out[j].Severity {
			return d.out[i].Severity > d.out[j].Severity
		}
		return d.out[i].Savings > d.out[j].Savings
	})
	return d.out
}

type diag struct {
	r        *report.Report
	env      Env
	tunables map[string]string
	out      []Finding
}

func (d *diag) add(f Finding) { d.out = append(d.out, f) }

// setting returns a malloc setting from GLIBC_TUNABLES or its environment
// variable alias, and whether it is set.
func (d *diag) setting(tunable, env string) (string, bool) {
	if v, ok := d.tunables["glibc.malloc."+tunable]; ok {
		return v, true
	}
	v, ok := d.env.Vars[env]
	return v, ok
}

func parseTunables(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ":") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (d *diag) walk() *glibc.Walk {
	if d.r.ReadOnly == nil {
		return nil
	}
	return d.r.ReadOnly.Walk
}

// arenaLimit is glibc's default limit on arenas: 8 per CPU, counting the
// CPUs the way the target's version counts them (arena_get2 in
// malloc/arena.c: __get_nprocs, but __get_nprocs_sched in 2.35-2.38).
func (d *diag) arenaLimit() (int, string) {
	v := d.r.Libc.Version
	cpus, how := d.env.OnlineCPUs, "online CPUs"
	if v.AtLeast(2, 35) && v.Less(2, 39) {
		cpus, how = d.env.AffinityCPUs, "CPUs in the process's affinity mask"
	}
	if cpus == 0 {
		return 0, ""
	}
	return max(8*cpus, 9), fmt.Sprintf("8 × %d %s", cpus, how)
}

// arenas: many thread arenas whose free memory sits idle, or, with
// nothing free yet, more arenas than threads left to use them.
func (d *diag) arenas() {
	mi := d.r.Malloc
	n := len(mi.Arenas)
	// One arena per thread up to a handful is glibc working as designed;
	// bloat is many arenas, or more arenas than there are threads left.
	if n < 8 && (d.r.Threads == 0 || n <= d.r.Threads) {
		return
	}
	if _, ok := d.setting("arena_max", "MALLOC_ARENA_MAX"); ok {
		return // the user chose the limit
	}
	if w := d.walk(); w != nil && w.Params.ArenaMax != 0 {
		return // set through mallopt
	}
	var free, system uint64
	for _, a := range mi.Arenas[1:] {
		free += a.FreeBytes()
		system += a.SystemCurrent
	}
	if free < minSavings {
		d.spentArenas(n, free)
		return
	}
	ev := []string{
		fmt.Sprintf("%d arenas (main + %d thread arenas) hold %s from the system, %s of it free", n, n-1, mb(system), mb(free)),
	}
	if limit, how := d.arenaLimit(); limit > 0 {
		ev = append(ev, fmt.Sprintf("glibc %s allows up to %d arenas here (%s)", d.r.Libc.Version, limit, how))
	}
	if d.r.Threads > 0 {
		ev = append(ev, fmt.Sprintf("%d thread(s) now; an arena is never freed, even after the threads that made it exit", d.r.Threads))
	}
	sev := Warning
	if free > 256<<20 {
		sev = Critical
	}
	d.add(Finding{
		ID: "arena-bloat", Severity: sev,
		Title:    "many malloc arenas each keep their own free memory",
		Evidence: ev,
		Fix: "start the process with " + d.arenaMaxSetting() + "; " +
			"threads then share two arenas and reuse each other's free memory. Takes effect at the next start.",
		Savings: free,
	})
}

// arenaMaxSetting says how to limit the arenas to two on the target's
// glibc: the environment variable always works, the tunable from 2.26 on
// (ptmalloc_init in malloc/arena.c). 2.25 lists it (elf/dl-tunables.list)
// but builds without tunables unless configured --enable-tunables
// (configure.ac@2.25: default no; 2.26: default yes).
func (d *diag) arenaMaxSetting() string {
	if !d.r.Libc.Version.IsZero() && d.r.Libc.Version.Less(2, 26) {
		return "MALLOC_ARENA_MAX=2 (glibc " + d.r.Libc.Version.String() + " has no GLIBC_TUNABLES)"
	}
	return "MALLOC_ARENA_MAX=2 (or GLIBC_TUNABLES=glibc.malloc.arena_max=2)"
}

// spentArenas: arenas left by threads that have ended, holding nothing
// free yet. Nothing is wasted now, which is why it is only information:
// but each thread arena keeps a heap's HEAP_MAX reservation of address
// space, and once their threads' successors free memory into them, it is
// the arena bloat above. Only said when there are more arenas than live
// threads (one arena per thread is glibc as designed) and many of them.
func (d *diag) spentArenas(n int, free uint64) {
	threads := d.r.Threads
	if threads == 0 || n <= threads || n < 8 {
		return
	}
	ev := []string{fmt.Sprintf("%d arenas (main + %d thread arenas) for %d live thread(s): glibc never frees an arena, "+
		"so the arenas of threads that ended stay, waiting for new threads", n, n-1, threads)}
	for _, c := range d.r.Maps.Classes {
		if c.Class != maps.ClassArenaHeap || c.Size == 0 {
			continue
		}
		line := fmt.Sprintf("the thread arenas' heaps reserve %s of address space (each heap reserves %s up front and commits what it uses)",
			mb(c.Size), mb(maps.HeapMaxSize))
		if d.r.Maps.Rollup.Rss > 0 {
			line += fmt.Sprintf("; %s of it is resident", mb(c.Rss))
		}
		ev = append(ev, line)
	}
	ev = append(ev, fmt.Sprintf("only %s is free in the thread arenas: nothing to give back now", mb(free)))
	if limit, how := d.arenaLimit(); limit > 0 {
		ev = append(ev, fmt.Sprintf("glibc %s allows up to %d arenas here (%s)", d.r.Libc.Version, limit, how))
	}
	d.add(Finding{
		ID: "arenas-outlive-threads", Severity: Info,
		Title:    "more malloc arenas than live threads, with nothing free in them yet",
		Evidence: ev,
		Fix: "nothing to do now. If memory freed in these arenas grows (arena-bloat), start the process with " +
			d.arenaMaxSetting() + "; threads then share two arenas. Takes effect at the next start.",
	})
}

// fragmentation: memory the heaps keep resident although malloc counts it
// free. Measured against RSS, so free pages already given back (by trim or
// never touched) do not count.
func (d *diag) fragmentation() {
	w := d.walk()
	mi := d.r.Malloc
	var trimmable, nonMainTop uint64
	var detail []string
	for i, a := range mi.Arenas {
		if a.FreePercent() >= fragPercent && a.FreeBytes() >= minSavings {
			detail = append(detail, fmt.Sprintf("arena %d: %s free of %s (%.0f%%), largest free size class %s",
				a.Index, mb(a.FreeBytes()), mb(a.SystemCurrent), a.FreePercent(), mb(a.LargestFreeClass())))
		}
		if w != nil && i < len(w.Arenas) {
			trimmable += w.Arenas[i].Trimmable()
			if !w.Arenas[i].Main {
				nonMainTop += w.Arenas[i].TopSize
			}
		}
	}
	var heapRss uint64
	for _, c := range d.r.Maps.Classes {
		if c.Class == maps.ClassMainHeap || c.Class == maps.ClassArenaHeap {
			heapRss += c.Rss
		}
	}
	inUse := mi.InUse()
	residentFree := heapRss - min(heapRss, inUse)
	if d.r.Maps.Rollup.Rss == 0 { // a core: no RSS, judge by malloc's own counts
		residentFree = mi.FreeBytes()
	}
	if len(detail) > 0 && residentFree >= minSavings && float64(residentFree) >= fragPercent/100.0*float64(max(heapRss, mi.SystemCurrent)) {
		f := Finding{
			ID: "fragmentation", Severity: Warning,
			Title: "the heaps keep free memory resident between chunks still in use",
			Evidence: append([]string{fmt.Sprintf("heaps are %s resident with %s in use: %s resident but free",
				mb(heapRss), mb(inUse), mb(residentFree))}, detail...),
			Fix:     "run `arenactl trim PID` to return the whole free pages now; to keep it low, lower MALLOC_TRIM_THRESHOLD_ (e.g. 131072) and consider MALLOC_ARENA_MAX=2",
			Savings: residentFree,
		}
		if trimmable > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("malloc_trim would madvise up to %s now (whole pages inside free chunks)", mb(trimmable)))
			f.Savings = min(residentFree, trimmable)
		}
		d.add(f)
	}
	if nonMainTop >= minSavings {
		d.add(Finding{
			ID: "untrimmable-thread-heaps", Severity: Warning,
			Title: "free memory at the top of thread arenas that malloc_trim cannot return",
			Evidence: []string{fmt.Sprintf("the top chunks of the thread arenas hold %s; malloc_trim never shrinks them, "+
				"only free() does, and only once a top exceeds trim_threshold (%s)", mb(nonMainTop), mb(w.Params.TrimThreshold))},
			Fix:     "set MALLOC_TRIM_THRESHOLD_=131072 (this also stops glibc from raising it after large frees), or MALLOC_ARENA_MAX=2 so fewer heaps exist",
			Savings: nonMainTop,
		})
	}
}

// thresholds: the dynamic mmap threshold raised by a large free, and many
// mmapped chunks.
func (d *diag) thresholds() {
	w := d.walk()
	if w == nil {
		return
	}
	p := w.Params
	if !p.NoDynThreshold && p.MmapThreshold > defaultThreshold {
		d.add(Finding{
			ID: "mmap-threshold-raised", Severity: Warning,
			Title: "a large free raised the mmap threshold: big blocks now come from the arenas and stay there",
			Evidence: []string{fmt.Sprintf("mmap_threshold is %s (default 128 KiB) and trim_threshold %s: glibc raises both when a mmapped block is freed",
				mb(p.MmapThreshold), mb(p.TrimThreshold))},
			Fix: "start the process with MALLOC_MMAP_THRESHOLD_=131072 (fixes the threshold and turns the adjustment off); " +
				"blocks above it are then unmapped on free",
		})
	}
	if p.NMmaps > manyMmapped {
		d.add(Finding{
			ID: "many-mmapped", Severity: Info,
			Title:    "many blocks are mmapped one by one",
			Evidence: []string{fmt.Sprintf("%d mmapped chunks, %s; each costs a system call to allocate and free", p.NMmaps, mb(p.MmappedMem))},
			Fix:      "if they are short-lived, raise MALLOC_MMAP_THRESHOLD_ above their size",
		})
	}
}

// tcaches: threads holding much memory in their tcache.
func (d *diag) tcaches() {
	if d.r.ReadOnly == nil {
		return
	}
	var hoard []string
	var total uint64
	for _, tc := range d.r.ReadOnly.Tcaches {
		if tc.Bytes >= tcacheHoard {
			hoard = append(hoard, fmt.Sprintf("thread %d: %d chunks, %s", tc.Tid, tc.Chunks, mb(tc.Bytes)))
			total += tc.Bytes
		}
	}
	if len(hoard) == 0 {
		return
	}
	d.add(Finding{
		ID: "tcache-hoarding", Severity: Info,
		Title:    "threads keep freed memory in their private caches",
		Evidence: hoard,
		Fix:      "lower GLIBC_TUNABLES=glibc.malloc.tcache_count (or tcache_max) for this process",
		Savings:  total,
	})
}

// outsideMalloc: resident memory malloc does not explain.
func (d *diag) outsideMalloc() {
	roll := d.r.Maps.Rollup
	if roll.Rss == 0 {
		return // a core: no RSS
	}
	byClass := map[maps.Class]maps.ClassSummary{}
	for _, c := range d.r.Maps.Classes {
		byClass[c.Class] = c
	}
	stacks := byClass[maps.ClassThreadStack].Rss + byClass[maps.ClassMainStack].Rss
	if float64(stacks) >= stackShare*float64(roll.Rss) && stacks >= minSavings {
		d.add(Finding{
			ID: "thread-stacks", Severity: Warning,
			Title: "thread stacks, not malloc, hold much of the resident memory",
			Evidence: []string{fmt.Sprintf("stacks are %s of %s resident (%d thread stack mappings)",
				mb(stacks), mb(roll.Rss), byClass[maps.ClassThreadStack].Count)},
			Fix: "fewer threads, or smaller stacks (pthread_attr_setstacksize, or ulimit -s before start); malloc settings do not help here",
		})
	}
	// glibc gives each chunk above the mmap threshold a mapping of its own
	// (sysmalloc's mmap path, malloc/malloc.c): anonymous and not a heap,
	// so in this class, yet malloc's. Up to their size of the class's RSS
	// is theirs; only the rest is memory malloc does not explain.
	anon := byClass[maps.ClassAnon]
	chunks := d.mmappedBytes()
	outside := anon.Rss - min(anon.Rss, chunks)
	if outside >= minSavings && float64(outside) >= 0.25*float64(roll.Rss) {
		ev := []string{fmt.Sprintf("%s resident in %d anonymous mappings that are not heaps: memory the program or a library maps itself", mb(outside), anon.Count)}
		if chunks > 0 {
			ev[0] = fmt.Sprintf("%s resident in %d anonymous mappings that are not heaps, beyond what malloc's mmapped chunks (%s) can hold: memory the program or a library maps itself",
				mb(outside), anon.Count, mb(chunks))
		}
		d.add(Finding{
			ID: "anonymous-outside-malloc", Severity: Info,
			Title:    "anonymous memory outside the malloc heaps",
			Evidence: ev,
			Fix:      "`arenactl maps --all PID` lists them",
		})
	}
}

// mmappedBytes is the size of the chunks malloc mmapped one by one: as
// malloc_info counts them, or as the read-only walk found them.
func (d *diag) mmappedBytes() uint64 {
	var n uint64
	if mi := d.r.Malloc; mi != nil {
		n = mi.MmapBytes
	}
	if ro := d.r.ReadOnly; ro != nil && ro.Walk != nil {
		n = max(n, ro.Walk.Mmapped.Bytes, ro.Walk.Params.MmappedMem)
	}
	return n
}

func mb(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
