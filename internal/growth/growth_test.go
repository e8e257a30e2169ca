package growth

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// TestGrowthSites runs testdata/grow_sites.c (built -O2
// -fomit-frame-pointer: its stacks unwind only with CFI) through one
// window of its sites and sets what growth charged to each against what
// the target counted itself: a direct anonymous mmap touched page by page,
// 1 MiB mallocs (mmapped chunks) touched, small mallocs in the main
// thread and in two threads created in the window (the main heap and two
// arenas), a file mapped and read, threads created (their stacks), and
// malloc_trim giving the main heap's free memory back. The calls are
// recorded both ways: by the eBPF program, where most stacks are short
// and completed from the whole ones, and by perf's tracepoints.
func TestGrowthSites(t *testing.T) {
	t.Run("eBPF", func(t *testing.T) { testGrowthSites(t, false) })
	t.Run("tracepoints", func(t *testing.T) { testGrowthSites(t, true) })
}

func testGrowthSites(t *testing.T, tracepoints bool) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root (perf_event_paranoid 2)")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const period = 16
	// Records are lost only when arenactl's reader gets no CPU for the
	// tens of milliseconds its rings take to fill (the two arena
	// threads make 600 MB/s of them), and the kernel throttles an event
	// that samples more than perf_event_max_sample_rate allows in a tick
	// (it drops the rest of the tick's samples: a CI run lost 7 of the
	// 16 big blocks' mmaps so, with no record lost): on a loaded
	// machine, the window is run again.
	var g *report.Growth
	var tg *testutil.Target
	var mapped, big, fileSize, freed float64
	var small []float64
	for try := 1; ; try++ {
		tg = testutil.Start(t, bin)
		g, mapped, big, small, fileSize, freed = growthWindow(t, tg, file, Options{Period: period, Tracepoints: tracepoints})
		// Root and this kernel allow eBPF: a refusal is a failure
		// here, not a way round.
		if want := map[bool]string{false: "eBPF", true: "tracepoints"}[tracepoints]; g.CallsBy != want {
			t.Fatalf("calls recorded by %q (%s), want %s", g.CallsBy, g.NoBPF, want)
		}
		if g.Lost == 0 && g.Throttled == 0 {
			break
		}
		if try == 5 {
			// The accuracy asked of the sites holds for a lossless
			// window only; one the machine's load makes lossy five
			// times running says nothing of arenactl's (CI runs the
			// packages' tests side by side on 2 CPUs).
			tg.Quit()
			t.Skipf("records lost or throttled in each of 5 windows (%d lost, %d throttled): the machine is too loaded to check the sites", g.Lost, g.Throttled)
		}
		t.Logf("%d records lost, sampling throttled %d times: again", g.Lost, g.Throttled)
		tg.Quit()
	}
	// sum adds one value over the sites of a class (and arena, when
	// given) whose stack holds fn.
	sum := func(typ int, class, arena, fn string) float64 {
		var n float64
		for _, s := range g.Profile.Sites {
			if s.Labels[report.LabelClass] != class || arena != "" && s.Labels[report.LabelArena] != arena {
				continue
			}
			if fn == "" || slices.ContainsFunc(s.Frames, func(f stackprof.Frame) bool { return f.Function == fn }) {
				n += s.Values[typ]
			}
		}
		return n
	}
	page := float64(os.Getpagesize())
	// Every thread's own event counts its faults: a site's estimate is
	// off by less than a period at each end of each counter's run in it
	// (far less than a Poisson process's error); its bytes are pages,
	// chunk headers and rounding included (4016 bytes a 4000-byte block).
	near := func(what string, got, want float64) {
		t.Helper()
		tol := 0.03*want + 4*period*page
		if math.Abs(got-want) > tol {
			t.Errorf("%s: %.0f KiB, want %.0f ± %.0f KiB", what, got/1024, want/1024, tol/1024)
		} else {
			t.Logf("%s: %.0f KiB (target: %.0f KiB)", what, got/1024, want/1024)
		}
	}
	near("map_pages touched (anon)", sum(report.GrowthTouched, "anon", "", "map_pages"), mapped)
	if got := sum(report.GrowthMapped, "anon", "", "map_pages"); got != mapped {
		t.Errorf("map_pages mapped %.0f bytes, want %.0f: every call counts", got, mapped)
	}
	near("big_blocks touched (mmapped-chunk)", sum(report.GrowthTouched, "mmapped-chunk", "", "big_blocks"), big)
	if got := sum(report.GrowthMapped, "mmapped-chunk", "", "big_blocks"); got != 16*((1<<20)+page) {
		t.Errorf("big_blocks mapped %.0f bytes, want 16 chunks of 1 MiB and a page", got)
	}
	near("small_blocks touched in the main thread (main-heap, arena 0)", sum(report.GrowthTouched, "main-heap", "0", "small_blocks")*4000/4016, small[0])
	for _, arena := range []string{"1", "2"} {
		got := sum(report.GrowthTouched, "arena-heap", arena, "small_thread")
		near("small_blocks touched in a thread (arena-heap "+arena+")", got*4000/4016, small[1])
		if m := sum(report.GrowthMapped, "arena-heap", arena, "small_thread"); m < 0.9*small[1] || m > 1.1*small[1] {
			t.Errorf("arena %s: its heap grew (mprotect) %.0f bytes for %.0f allocated", arena, m, small[1])
		}
	}
	if got := sum(report.GrowthMapped, "file", "", "read_file"); got != fileSize {
		t.Errorf("read_file mapped %.0f bytes, want the file's %.0f", got, fileSize)
	}
	// A read fault maps 16 pages of the page cache, or a whole large
	// folio (a file written at once may sit in 2 MiB ones): rss_stat's
	// records count them all.
	near("read_file touched (file)", sum(report.GrowthTouched, "file", "", "read_file"), fileSize)
	if got := sum(report.GrowthMapped, "thread-stack", "", "__pthread_create_2_1"); got == 0 {
		t.Errorf("no thread stack mapped by pthread_create")
	}
	// malloc_trim advises away the free chunks' whole pages: the freed
	// blocks less a page at each end of the run, and what else of the
	// main heap was free (a little).
	back := sum(report.GrowthGivenBack, "main-heap", "0", "__malloc_trim")
	if back < freed-2*page-4096 || back > freed+128<<10 {
		t.Errorf("malloc_trim gave back %.0f bytes of the main heap, the target freed %.0f", back, freed)
	} else {
		t.Logf("malloc_trim gave back %.0f KiB (target freed %.0f KiB)", back/1024, freed/1024)
	}
	// The faults and calls explain the RSS growth, the file's pages
	// included.
	net, grew := g.Total(report.GrowthNet), float64(g.RSSGrowth())
	if !g.Measured || math.Abs(net-grew) > 0.05*grew+1<<20 {
		t.Errorf("explains %.1f MiB of an RSS growth of %.1f MiB", net/(1<<20), grew/(1<<20))
		for _, c := range g.Classes() {
			t.Logf("class %s: net %.1f MiB, touched %.1f MiB", c.Class, c.Values[report.GrowthNet]/(1<<20), c.Values[report.GrowthTouched]/(1<<20))
		}
		for _, s := range g.Profile.Sites {
			if v := s.Values; v[report.GrowthNet] < -(1 << 20) {
				t.Logf("%s %s: net %.1f MiB, unmapped %.1f MiB, given back %.1f MiB, at %s", s.Labels[report.LabelClass], s.Labels[report.LabelArena],
					v[report.GrowthNet]/(1<<20), v[report.GrowthUnmapped]/(1<<20), v[report.GrowthGivenBack]/(1<<20), stackNames(s.Frames))
			}
		}
	} else {
		t.Logf("explains %.1f of %.1f MiB", net/(1<<20), grew/(1<<20))
	}
	if t.Failed() {
		// Once (tracepoints, a loaded CI-like run) read_file's and
		// malloc_trim's bytes and a part of arena 1's went missing with
		// nothing lost or throttled: what the window saw, for the next
		// failure to say where they went.
		t.Logf("window: %v, %d threads, lost %d, throttled %d, incomplete %d, truncated %d, no rss_stat %q, calls by %s",
			g.Duration, g.Threads, g.Lost, g.Throttled, g.Incomplete, g.Truncated, g.NoRSSStat, g.CallsBy)
		for _, c := range g.Classes() {
			t.Logf("class %s: touched %.1f MiB, mapped %.1f MiB, given back %.1f MiB, calls %.0f, samples %.0f", c.Class,
				c.Values[report.GrowthTouched]/(1<<20), c.Values[report.GrowthMapped]/(1<<20), c.Values[report.GrowthGivenBack]/(1<<20),
				c.Values[report.GrowthCalls], c.Values[report.GrowthSamples])
		}
		for _, s := range g.Profile.Sites {
			if v := s.Values; v[report.GrowthTouched]+v[report.GrowthMapped]+v[report.GrowthGivenBack] >= 1<<20 {
				t.Logf("site %s %s: touched %.1f MiB, mapped %.1f MiB, given back %.1f MiB, at %s", s.Labels[report.LabelClass], s.Labels[report.LabelArena],
					v[report.GrowthTouched]/(1<<20), v[report.GrowthMapped]/(1<<20), v[report.GrowthGivenBack]/(1<<20), stackNames(s.Frames))
			}
		}
	}
	if line, code := tg.Quit(); line != "bye" || code != 0 {
		t.Errorf("target at exit: %q, status %d", line, code)
	}
}

// growthWindow runs grow_sites's sites through one growth window and
// returns it with what the target counted: bytes mapped and touched by
// map_pages, by big_blocks, by small_blocks in the main thread and its
// two threads, the file's size, the bytes trim freed.
func growthWindow(t *testing.T, tg *testutil.Target, file string, o Options) (_ *report.Growth, mapped, big float64, small []float64, fileSize, freed float64) {
	t.Helper()
	counts := func(cmd string) []float64 {
		f := strings.Fields(tg.Send(cmd))
		if len(f) < 2 || f[0] != "ok" {
			t.Fatalf("%s: target said %q", cmd, f)
		}
		var out []float64
		for _, s := range f[1:] {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s: target said %q", cmd, f)
			}
			out = append(out, n)
		}
		return out
	}
	g := growthWhile(t, tg, o, func() {
		mapped = counts("map 32")[0]
		big = counts("big 16")[0]
		small = counts("small 16")
		fileSize = counts("file " + file)[0]
		counts("threads 3")
		freed = counts("trim")[0]
	})
	return g, mapped, big, small, fileSize, freed
}

// growthWhile runs Growth on tg over a window that opens, runs during, and
// closes once the last samples have reached the rings.
func growthWhile(t *testing.T, tg *testutil.Target, o Options, during func()) *report.Growth {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := make(chan struct{})
	type result struct {
		g   *report.Growth
		err error
	}
	done := make(chan result, 1)
	o.Note = func(string) { close(open) }
	go func() {
		g, err := watchPid(ctx, tg.Pid, o)
		done <- result{g, err}
	}()
	select {
	case <-open:
	case r := <-done:
		t.Fatalf("growth ended before the window opened: %v", r.err)
	}
	during()
	time.Sleep(200 * time.Millisecond) // the last samples reach the rings
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.g

}

func stackNames(fs []stackprof.Frame) string {
	var names []string
	for i := len(fs) - 1; i >= 0; i-- {
		names = append(names, fs[i].Name())
	}
	return strings.Join(names, " < ")
}

// Mmapped chunks the kernel merged with memory that is not malloc's below
// them (a small mapping the program makes right after them lands there)
// are still told for mmapped chunks: the header search read only from the
// mapping's start, and every chunk above 64 KiB of the program's own was
// charged to anonymous memory.
func TestGrowthChunksBehindForeignMemory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root (perf_event_paranoid 2)")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	for try := 1; ; try++ {
		tg := testutil.Start(t, bin)
		g := growthWhile(t, tg, Options{}, func() {
			// The chunks, then 64 KiB mapped and touched right below
			// them: the kernel merges the two into one mapping.
			if a := tg.Send("big 8"); a != "ok 8388608" {
				t.Fatalf("big: %q", a)
			}
			if a := tg.Send("mapk 64"); a != "ok 65536" {
				t.Fatalf("mapk: %q", a)
			}
		})
		tg.Quit()
		if (g.Lost != 0 || g.Throttled != 0) && try < 5 {
			continue
		}
		var chunks, anon float64
		for _, s := range g.Profile.Sites {
			if !slices.ContainsFunc(s.Frames, func(f stackprof.Frame) bool { return f.Function == "big_blocks" }) {
				continue
			}
			switch s.Labels[report.LabelClass] {
			case "mmapped-chunk":
				chunks += s.Values[report.GrowthMapped]
			case "anon":
				anon += s.Values[report.GrowthMapped]
			}
		}
		page := float64(os.Getpagesize())
		if chunks != 8*((1<<20)+page) || anon != 0 {
			t.Errorf("big_blocks mapped %.0f bytes of mmapped chunks and %.0f of anonymous memory; want 8 chunks of 1 MiB and a page", chunks, anon)
		}
		return
	}
}

// A process that maps and unmaps in a loop fills the eBPF program's ring
// between two reads: most calls get a short stack copy, which ends in a
// helper both of grow_sites's churn sites call, and are completed from the
// few whole ones. Each site's bytes must come out as the target counted
// them: shared by count, churn_a (3 calls in 4, a third of the bytes of
// churn_b's) would get half as much again as it mapped. The bytes are
// exact over both sites; each one's share is estimated from the whole
// stacks, about 2000 of 400000 here, whose weights differ. Over 20 windows
// (TestGrowthCompletionSpread) churn_a's error averaged -0.45 % ± 0.82 %
// with a standard deviation of 3.7 % a window: the 12 % allowed is 3.3 of
// those (a false failure in about 1000 runs), and a count share's 50 %
// bias is 13.
func TestGrowthCompletesShortStacks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events and eBPF on another process need root")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	defer tg.Quit()
	a, b, g := churnWindow(t, tg, 200000)
	gotA, gotB := churnSums(g)
	t.Logf("%d calls, %d short (%d completed, %d left); churn_a mapped %.1f MiB of %.1f, churn_b %.1f MiB of %.1f",
		g.Calls, g.ShortCalls, g.Completed, g.ShortLeft, gotA/(1<<20), a/(1<<20), gotB/(1<<20), b/(1<<20))
	if g.CallsBy != "eBPF" {
		t.Fatalf("calls recorded by %q (%s), want eBPF", g.CallsBy, g.NoBPF)
	}
	if g.ShortCalls < g.Calls/2 {
		t.Errorf("%d of %d calls short: the loop did not fill the ring, nothing was completed", g.ShortCalls, g.Calls)
	}
	if g.Lost > 0 {
		t.Skipf("%d calls lost: the machine is too loaded to check the sites", g.Lost)
	}
	if math.Abs(gotA+gotB-(a+b)) > 1<<20 {
		t.Errorf("both sites mapped %.1f MiB, want %.1f: every call counts", (gotA+gotB)/(1<<20), (a+b)/(1<<20))
	}
	for _, c := range []struct {
		site      string
		got, want float64
	}{{"churn_a", gotA, a}, {"churn_b", gotB, b}} {
		if math.Abs(c.got-c.want) > 0.12*c.want {
			t.Errorf("%s mapped %.1f MiB, want %.1f ± 12 %%", c.site, c.got/(1<<20), c.want/(1<<20))
		}
	}
}

// churnWindow runs grow_sites's churn through a growth window: the bytes
// each site mapped by the target's count, and the window.
func churnWindow(t *testing.T, tg *testutil.Target, n int) (a, b float64, g *report.Growth) {
	t.Helper()
	g = growthWhile(t, tg, Options{}, func() {
		f := strings.Fields(tg.Send("churn " + strconv.Itoa(n)))
		if len(f) != 3 || f[0] != "ok" {
			t.Fatalf("churn: target said %q", f)
		}
		a, _ = strconv.ParseFloat(f[1], 64)
		b, _ = strconv.ParseFloat(f[2], 64)
	})
	return a, b, g
}

// churnSums are the bytes growth says churn_a and churn_b mapped.
func churnSums(g *report.Growth) (a, b float64) {
	for _, s := range g.Profile.Sites {
		for _, f := range s.Frames {
			switch f.Function {
			case "churn_a":
				a += s.Values[report.GrowthMapped]
			case "churn_b":
				b += s.Values[report.GrowthMapped]
			}
		}
	}
	return a, b
}

// TestGrowthCompletionSpread runs TestGrowthCompletesShortStacks's window
// ARENACTL_GROWTH_WINDOWS times (a soak, not run in CI) and reports each
// site's mean error and its spread: the completion is unbiased when the
// mean is within a few standard errors of it of zero.
func TestGrowthCompletionSpread(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ARENACTL_GROWTH_WINDOWS"))
	if n == 0 {
		t.Skip("a soak: set ARENACTL_GROWTH_WINDOWS (20 takes about a minute)")
	}
	if os.Geteuid() != 0 {
		t.Skip("perf events and eBPF on another process need root")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	defer tg.Quit()
	var errA, errB []float64
	for i := 0; i < n; i++ {
		a, b, g := churnWindow(t, tg, 200000)
		gotA, gotB := churnSums(g)
		errA, errB = append(errA, gotA/a-1), append(errB, gotB/b-1)
		t.Logf("window %d: %d short of %d calls, %d lost; churn_a %+.1f %%, churn_b %+.1f %%", i, g.ShortCalls, g.Calls, g.Lost, 100*(gotA/a-1), 100*(gotB/b-1))
	}
	for _, e := range []struct {
		site string
		errs []float64
	}{{"churn_a", errA}, {"churn_b", errB}} {
		mean, sd := meanSD(e.errs)
		se := sd / math.Sqrt(float64(len(e.errs)))
		t.Logf("%s: mean error %+.2f %% ± %.2f %% (sd of a window %.2f %%)", e.site, 100*mean, 100*se, 100*sd)
		if math.Abs(mean) > 4*se+0.005 {
			t.Errorf("%s: mean error %+.2f %% is %.1f standard errors from 0: biased", e.site, 100*mean, mean/se)
		}
	}
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	if len(xs) > 1 {
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return mean, sd
}

// madeBefore takes, over a range, the latest mapping made before a time
// at each address: once each where a loop maps the same address again,
// and the parts of an earlier one a later one leaves uncovered.
func TestMadeBefore(t *testing.T) {
	w := &growthWatch{}
	log := func(at, start, end uint64) {
		w.mmapLog = append(w.mmapLog, recentMapping{at: at, m: maps.Mapping{Start: start, End: end}})
	}
	for at := uint64(1); at <= 5; at++ {
		log(at, 0x100000, 0x110000)
	}
	got := w.madeBefore(5, 0x100000, 0x110000)
	if len(got) != 1 || got[0].Start != 0x100000 || got[0].End != 0x110000 {
		t.Errorf("a loop's mapping: %+v", got)
	}
	w.mmapLog = nil
	log(1, 0x8000, 0x9000)
	log(2, 0xa000, 0x80000)
	log(3, 0x9000, 0x40000)
	log(4, 0x8000, 0x10000) // after the time asked for
	got = w.madeBefore(3, 0x8000, 0x10000)
	want := [][2]uint64{{0x8000, 0x9000}, {0x9000, 0x40000}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %x", got, want)
	}
	for i, m := range got {
		if m.Start != want[i][0] || m.End != want[i][1] {
			t.Errorf("piece %d: %#x-%#x, want %x", i, m.Start, m.End, want[i])
		}
	}
	// A later mapping inside an earlier one leaves both sides of it.
	w.mmapLog = nil
	log(1, 0x0, 0x10000)
	log(2, 0x4000, 0x8000)
	got = w.madeBefore(2, 0x0, 0x10000)
	if len(got) != 3 || got[0].End != 0x4000 || got[1].Start != 0x4000 || got[2].Start != 0x8000 || got[2].End != 0x10000 {
		t.Errorf("straddled: %+v", got)
	}
}

// latestMappings gives, over all the mappings made since the last read,
// the one made last at each address and what earlier ones have left,
// whatever order of address they were made in.
func TestLatestMappings(t *testing.T) {
	var rs []recentMapping
	made := func(at, start, end uint64) {
		rs = append(rs, recentMapping{at: at, m: maps.Mapping{Start: start, End: end, Perms: fmt.Sprint(at)}})
	}
	check := func(name string, want [][3]uint64) {
		t.Helper()
		got := latestMappings(rs)
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].Start == want[i][0] && got[i].End == want[i][1] && got[i].Perms == fmt.Sprint(want[i][2])
		}
		if !ok {
			var s []string
			for _, m := range got {
				s = append(s, fmt.Sprintf("%#x-%#x@%s", m.Start, m.End, m.Perms))
			}
			t.Errorf("%s: got %v, want %x", name, s, want)
		}
		rs = nil
	}
	// A loop mapping one address again: the last one.
	for at := uint64(1); at <= 3; at++ {
		made(at, 0x100000, 0x110000)
	}
	check("loop", [][3]uint64{{0x100000, 0x110000, 3}})
	// A later mapping starting lower over an earlier one's start: it
	// wins where they meet, the earlier keeps its end.
	made(1, 0x8000, 0x10000)
	made(2, 0x4000, 0xc000)
	check("lower, later", [][3]uint64{{0x4000, 0xc000, 2}, {0xc000, 0x10000, 1}})
	// The same, made in the other order: the one starting higher wins
	// where it is later, not because it starts higher.
	made(1, 0x4000, 0xc000)
	made(2, 0x8000, 0x10000)
	check("higher, later", [][3]uint64{{0x4000, 0x8000, 1}, {0x8000, 0x10000, 2}})
	made(2, 0x4000, 0xc000)
	made(1, 0x8000, 0x10000)
	check("higher, earlier", [][3]uint64{{0x4000, 0xc000, 2}, {0xc000, 0x10000, 1}})
	// A later mapping inside an earlier one leaves both sides of it; a
	// third over the second's end and the first's rest.
	made(1, 0x0, 0x10000)
	made(2, 0x4000, 0x8000)
	made(3, 0x6000, 0xa000)
	check("inside", [][3]uint64{{0x0, 0x4000, 1}, {0x4000, 0x6000, 2}, {0x6000, 0xa000, 3}, {0xa000, 0x10000, 1}})
	// An earlier mapping inside a later one is gone; apart ones stay.
	made(1, 0x5000, 0x6000)
	made(2, 0x4000, 0x8000)
	made(3, 0x9000, 0xa000)
	check("covered", [][3]uint64{{0x4000, 0x8000, 2}, {0x9000, 0xa000, 3}})
}

// A forked child inherits perf events opened with inherit, and an exec'd
// one keeps them: its faults and brk calls were charged to the target (a
// child that touched 256 MiB showed as 257 MiB first touched against an
// RSS growth of 0; exec'd children's brk calls, compared with the
// target's break, as hundreds of GiB mapped). Only the target's own
// threads count: here the target touches nothing itself while a child
// touches 128 MiB and four exec'd children grow their breaks by 16 MiB.
func TestGrowthOwnThreadsOnly(t *testing.T) {
	t.Run("eBPF", func(t *testing.T) { testGrowthOwnThreadsOnly(t, false) })
	t.Run("tracepoints", func(t *testing.T) { testGrowthOwnThreadsOnly(t, true) })
}

func testGrowthOwnThreadsOnly(t *testing.T, tracepoints bool) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root (perf_event_paranoid 2)")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	tg := testutil.Start(t, bin)
	defer tg.Quit()
	g := growthWhile(t, tg, Options{Tracepoints: tracepoints}, func() {
		for _, cmd := range []string{"fork 128", "exec 4"} {
			if a := tg.Send(cmd); a != "ok 0" {
				t.Fatalf("%s: target said %q", cmd, a)
			}
		}
	})
	// The target's own faults after fork (copies on write of the few
	// pages it writes, its stack) and its fork/wait calls are small.
	touched, mapped, unmapped := g.Total(report.GrowthTouched), g.Total(report.GrowthMapped), g.Total(report.GrowthUnmapped)
	t.Logf("%d fault samples, %d calls: touched %.1f MiB, mapped %.1f MiB, unmapped %.1f MiB; RSS grew %.1f MiB",
		g.FaultSamples, g.Calls, touched/(1<<20), mapped/(1<<20), unmapped/(1<<20), float64(g.RSSGrowth())/(1<<20))
	if touched > 4<<20 || mapped > 4<<20 || unmapped > 4<<20 {
		t.Errorf("the children's memory charged to the target: touched %.1f MiB, mapped %.1f MiB, unmapped %.1f MiB (the target itself touched almost nothing)",
			touched/(1<<20), mapped/(1<<20), unmapped/(1<<20))
	}
	for _, s := range g.Profile.Sites {
		if slices.ContainsFunc(s.Frames, func(f stackprof.Frame) bool { return f.Function == "child_touch" || f.Function == "grow_break" }) {
			t.Errorf("a child's site charged to the target: %s %s", s.Labels[report.LabelClass], stackNames(s.Frames))
			break
		}
	}
}

// Three growth runs on one process at once each count its faults: the
// kernel stamped the samples of every run but the last one opened with
// that run's ids, and the others dropped them all ("page faults: 0
// samples", silently).
func TestGrowthRunsAtOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root (perf_event_paranoid 2)")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, bytesOf(8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tg := testutil.Start(t, bin)
	defer tg.Quit()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		g   *report.Growth
		err error
	}
	// Two by eBPF, one by tracepoints: any mix failed.
	modes := []bool{false, false, true}
	runs := len(modes)
	done := make(chan result, runs)
	for _, tracepoints := range modes {
		open := make(chan struct{})
		o := Options{Tracepoints: tracepoints}
		o.Note = func(m string) {
			if strings.HasPrefix(m, "perf events are open") {
				close(open)
			}
		}
		go func() {
			g, err := watchPid(ctx, tg.Pid, o)
			done <- result{g, err}
		}()
		<-open
	}
	var mapped, read float64
	if f := strings.Fields(tg.Send("map 32")); len(f) == 2 {
		mapped, _ = strconv.ParseFloat(f[1], 64)
	}
	if f := strings.Fields(tg.Send("fileslow " + file + " 0")); len(f) == 2 {
		read, _ = strconv.ParseFloat(f[1], 64)
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	for i := 0; i < runs; i++ {
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		var got, gotFile float64
		for _, s := range r.g.Profile.Sites {
			if slices.ContainsFunc(s.Frames, func(f stackprof.Frame) bool { return f.Function == "map_pages" }) {
				got += s.Values[report.GrowthTouched]
			}
			if s.Labels[report.LabelClass] == "file" && slices.ContainsFunc(s.Frames, func(f stackprof.Frame) bool { return f.Function == "read_slowly" }) {
				gotFile += s.Values[report.GrowthTouched]
			}
		}
		t.Logf("run by %s: %d fault samples, map_pages touched %.1f MiB of %.1f, read_slowly %.1f MiB of %.1f",
			r.g.CallsBy, r.g.FaultSamples, got/(1<<20), mapped/(1<<20), gotFile/(1<<20), read/(1<<20))
		if math.Abs(got-mapped) > 0.05*mapped || math.Abs(gotFile-read) > 0.15*read {
			t.Errorf("run by %s: map_pages touched %.1f MiB, read_slowly %.1f MiB; the target touched %.1f MiB and %.1f MiB (%d fault samples)",
				r.g.CallsBy, got/(1<<20), gotFile/(1<<20), mapped/(1<<20), read/(1<<20), r.g.FaultSamples)
		}
	}
}

// A fault in a file maps many pages at once (fault-around, a large folio
// of the page cache), and growth counted each sampled fault as one page:
// a file read a page at a time was charged 0.06× of what the process
// touched, and explained_sigma claimed ±0.5 MiB of a 7 MiB miss. Here the
// target reads a 16 MiB file (written at once, so the page cache holds it
// in large folios) a page at a time over about a second, and touches 16
// MiB of anonymous memory: each class must come within 15 % of what the
// target counted, and the RSS growth within the stated error. The file's
// pages are counted, not sampled, and each thread's fault samples are
// every 16th of its own faults, off by less than a period at each end:
// the 15 % is for pages the kernel maps around the last ones read (a
// folio), not for chance; counting a fault as a page is 16× low.
func TestGrowthFilePages(t *testing.T) {
	t.Run("eBPF", func(t *testing.T) { testGrowthFilePages(t, false) })
	t.Run("tracepoints", func(t *testing.T) { testGrowthFilePages(t, true) })
}

func testGrowthFilePages(t *testing.T, tracepoints bool) {
	if os.Geteuid() != 0 {
		t.Skip("perf events on another process need root (perf_event_paranoid 2)")
	}
	bin := testutil.BuildC(t, "grow_sites.c", "-O2", "-fomit-frame-pointer")
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, bytesOf(16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tg := testutil.Start(t, bin)
	defer tg.Quit()
	answer := func(cmd string) float64 {
		f := strings.Fields(tg.Send(cmd))
		if len(f) != 2 || f[0] != "ok" {
			t.Fatalf("%s: target said %q", cmd, f)
		}
		n, _ := strconv.ParseFloat(f[1], 64)
		return n
	}
	var read, mapped float64
	g := growthWhile(t, tg, Options{Tracepoints: tracepoints}, func() {
		read = answer("fileslow " + file + " 250")
		mapped = answer("map 16")
	})
	// The eBPF program where calls are recorded by eBPF (this kernel
	// runs it: TestCallsRecordFilePages), perf's tracepoint otherwise.
	if want := map[bool]string{false: "eBPF", true: "tracepoint"}[tracepoints]; g.RSSStatBy != want {
		t.Errorf("file pages counted by %q (%s), want %s", g.RSSStatBy, g.NoRSSStat, want)
	}
	sum := func(typ int, class, fn string) float64 {
		var n float64
		for _, s := range g.Profile.Sites {
			if s.Labels[report.LabelClass] == class && slices.ContainsFunc(s.Frames, func(f stackprof.Frame) bool { return f.Function == fn }) {
				n += s.Values[typ]
			}
		}
		return n
	}
	for _, c := range []struct {
		class, fn string
		want      float64
	}{{"file", "read_slowly", read}, {"anon", "map_pages", mapped}} {
		got := sum(report.GrowthTouched, c.class, c.fn)
		if math.Abs(got-c.want) > 0.15*c.want {
			t.Errorf("%s touched %.1f MiB of %s memory, the target touched %.1f MiB", c.fn, got/(1<<20), c.class, c.want/(1<<20))
		} else {
			t.Logf("%s touched %.1f MiB of %s memory (target: %.1f MiB)", c.fn, got/(1<<20), c.class, c.want/(1<<20))
		}
	}
	// The error stated covers what was missed: the RSS growth is within
	// three standard errors (and a page table's worth) of what is
	// explained.
	net, grew := g.Total(report.GrowthNet), float64(g.RSSGrowth())
	sigma := g.TouchedSigma(g.Total(report.GrowthSamples))
	if !g.Measured || math.Abs(net-grew) > 3*sigma+256<<10 {
		t.Errorf("explains %.1f MiB ± %.1f MiB (3σ) of an RSS growth of %.1f MiB", net/(1<<20), 3*sigma/(1<<20), grew/(1<<20))
	} else {
		t.Logf("explains %.1f MiB ± %.1f MiB (3σ) of an RSS growth of %.1f MiB", net/(1<<20), 3*sigma/(1<<20), grew/(1<<20))
	}
}

// bytesOf is n bytes that are not all zero.
func bytesOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// watchPid opens pid as inspect's use case does (observed only, its heap
// where it is glibc's; no debuginfod) and watches it.
func watchPid(ctx context.Context, pid int, o Options) (_ *report.Growth, err error) {
	tg, err := live.OpenObserved(pid)
	if err != nil {
		return nil, err
	}
	defer func() {
		err = tg.Explain(err)
		tg.Close()
	}()
	in := Input{Target: tg, Modules: module.NewTable(tg)}
	if tg.Libc != nil {
		in.Libc = report.LibcOf(tg.Libc)
		if h, err := heap.Open(tg, tg.Libc, heap.Options{}); err == nil {
			in.Heap = h
		}
	}
	return Watch(ctx, in, o)
}
