package inspect

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// truthSites are testdata/leaks_truth.c's sites, in the order it reports
// them, with the largest block each allocates (for grow_log, twice the
// most one call adds); realloc: the site grows blocks by realloc, and is
// not one of the small sites pooled together.
var truthSites = []struct {
	fn      string
	largest float64
	realloc bool
}{{"grow_realloc", 1 << 20, true}, {"leak_malloc", 4096, false}, {"leak_calloc", 2048, false}, {"leak_memalign", 1024, false},
	{"leak_aligned", 768, false}, {"leak_in_thread", 2560, false}, {"leak_in_handler", 1536, false}, {"leak_new", 208, false},
	{"grow_log", 512, true}}

// TestLeaksUnbiasedWholePath profiles testdata/leaks_truth.c over many
// windows, the whole path (the sampler in the target, the drains, the
// builder's estimates), and sets each site's estimate of the bytes it
// allocated in the window and still held at its end against the truth
// the target tells from its own log of every block, with the times it
// was allocated and given back (realloc growth in place and moving,
// calloc, posix_memalign, aligned_alloc, small calls right after large
// blocks, C++'s operator new reaching malloc through libstdc++, a churn
// beside them; two threads of at most 60 MiB/s each, and threads
// created every 5 ms that allocate 64 blocks and exit, a signal handler
// that allocates, a child forked every 100 ms that allocates and exits).
//
// The check is pooled over the windows with the default ring, per site
// and over the small ones together, and over the small sites of the
// windows with a tiny ring:
// z = Σ(estimate − truth) / √Σ variance. For the sites that grow blocks
// the variance is what each window's samples estimate; for a site of
// small blocks it is its truth times the window's sampling interval, a
// thinned count's (the variance its own few samples estimate shrinks with
// their number, and made a site with 2 samples of 10 expected 5.5
// standard errors low under load). An unbiased estimator gives z about
// normal: |z| > 4.5 has odds of 7 in a million, 7 in 100,000 for the ten
// checks, on any seed; a site with a handful of samples expected has a
// Poisson count's longer upper tail (5 expected: 16 or more taken, 1 in
// 15,000). Each window's own z, where 30 samples or more are held,
// must stay within 6 (odds 2 in a billion each). The sampler before
// issue 18's fix (a shortened interval after every large block), run
// through this test, put the small sites of the threads that grow
// blocks +13 %, +12 %, +11 % and +10 % high (z +5.1, +3.2, +2.1, +1.7;
// the short-lived threads' site, with no large block before its calls,
// +2 %), and the small sites pooled +7.5 % ± 1.4 % (z +5.5); fixed,
// +3.3 %, +0.5 %, −2.0 %, +5.0 %, −0.4 %, pooled +0.9 % ± 1.3 %, and
// +1.8 % ± 8.8 % in the tiny ring's windows, half of whose samples were
// dropped. Those windows now drop nothing: about 70 % of their samples
// go to the short ring and have their stacks completed from the whole
// ones, and the small sites pool to about ± 2.2 % there. With drops,
// operator new's site in the mix made a tiny-ring window put the
// short-lived threads' site at 40 % of its truth (−8.8 standard errors).
// The window's ends are known to the drain's precision (well under a
// millisecond): a block on the boundary may fall either side, so each
// window allows each site one of its largest blocks beyond the error.
// For grow_realloc, whose blocks are sampled almost surely and whose
// error is tiny, that is 1 MiB a window, 6 % of what it holds: its check
// catches gross errors only (a realloc counted twice, or lost).
// Each window checks that nothing was dropped.
//
// A realloc counts what it added to the block (issue 29), and the truth
// too: grow_log's log lives across windows, and each window sees it
// grown from a block allocated before it. Before the fix, which counted
// a realloc's whole new block (and let go of a sampled block's sample at
// its next realloc), 8 windows put that site at 4.00 ± 0.40 times its
// truth (z +7.5; from 0.5 to 7.1 times in single windows); fixed, 1.04 ±
// 0.12.
//
// ARENACTL_LEAKS_WINDOWS=200 makes it a soak (about 8 minutes);
// ARENACTL_LEAKS_THREADS=64 shares the same load among 64 threads.
func TestLeaksUnbiasedWholePath(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical, about 40 s")
	}
	threads := testutil.Rounds("ARENACTL_LEAKS_THREADS", 2)
	truthWindows(t, truthRun{windows: testutil.Rounds("ARENACTL_LEAKS_WINDOWS", 20), threads: threads,
		budget: int64(120 << 20 / threads), rate: 64 << 10, tinyEvery: 4})
}

// TestLeaksUnbiasedUnderLoad is the same test at issue 28's load: 16
// threads allocating as fast as they can on this project's 2 CPUs, the
// default rate, windows of 2 s. arenactl's drain then has about a
// seventeenth of the CPUs; it used to lose 40-47 % of the samples there
// (both rings full), and the drains' scaling of the drops stood in for
// them. Now no sample may be dropped (but while the interval climbs on a
// machine loaded far past this, see truthWindows): the drain costs less,
// and the sampler doubles its mean interval while the short ring is more
// than half full, each sample weighted by the rate it was taken at. The
// checks and their odds are the other test's.
//
// ARENACTL_LEAKS_LOAD_WINDOWS sets the number of windows (6), and
// ARENACTL_RATE the sampling rate of every test of this file (bytes): with
// sparse samples (8 MiB; or under two busy loops beside this test, where
// the sampler doubles its interval up to 8 times), grow_realloc came out
// 3 to 6 % high until a realloc's sample read after its block's free or
// move joined the block (internal/stackprof's after.go).
func TestLeaksUnbiasedUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("statistical, about 40 s")
	}
	truthWindows(t, truthRun{windows: testutil.Rounds("ARENACTL_LEAKS_LOAD_WINDOWS", 6), threads: 16, budget: 1 << 40,
		churn: 32, duration: 2 * time.Second, noScan: true})
}

// truthRun is how truthWindows runs testdata/leaks_truth.c and profiles
// it: threads allocating budget bytes a second each, windows of duration
// (1.5 s) at rate (the default), one in tinyEvery with a ring of 16
// records (none).
type truthRun struct {
	windows, threads int
	budget           int64
	churn            int // rounds of unlogged churn per round (1)
	rate             uint64
	duration         time.Duration
	tinyEvery        int
	noScan           bool // no scan for what is leaked at a window's end
}

// truthWindows profiles testdata/leaks_truth.c window after window and
// checks the estimates against its truth (TestLeaksUnbiasedWholePath).
func truthWindows(t *testing.T, run truthRun) {
	windows, rate := run.windows, run.rate
	if v, _ := strconv.ParseUint(os.Getenv("ARENACTL_RATE"), 10, 64); v > 0 {
		rate = v
	}
	if run.duration == 0 {
		run.duration = 1500 * time.Millisecond
	}
	exe := testutil.BuildC(t, "leaks_truth.c", "-O2", "-fomit-frame-pointer", "-lstdc++")
	tg := testutil.StartCmd(t, exec.Command(exe, strconv.Itoa(run.threads), strconv.FormatInt(run.budget, 10), strconv.Itoa(max(run.churn, 1))))
	t.Cleanup(func() { tg.Quit() })
	n := len(truthSites)
	sumEst, sumTruth, sumVar, sumSlack := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	samples := make([]int, n)
	var tiny struct{ est, truth, variance, slack float64 } // the small sites in the tiny ring's windows
	for w := 0; w < windows; w++ {
		// One window in four has a ring of 16 records: it overflows and
		// passes most samples on to the short ring, and the estimates
		// must stay unbiased all the same. They are pooled apart.
		slots := 0
		if run.tinyEvery > 0 && w%run.tinyEvery == run.tinyEvery-1 {
			slots = 16
		}
		rep, err := Leaks(context.Background(), tg.Pid, LeaksOptions{Options: Options{Timeout: 10 * time.Second},
			Duration: run.duration, Rate: rate, RingSlots: slots, NoScan: run.noScan})
		if err != nil {
			t.Fatal(err)
		}
		win := rep.Window
		// Nothing may be dropped at issue 28's load. Inside the whole
		// suite, every other package's tests beside this one, the machine
		// can be loaded far past it; the sampler's interval climbs from ×1
		// at each window's start, a doubling per eighth of the short ring
		// taken while it is more than half full, and in one run of
		// 2026-11-29 both rings filled while it climbed to ×32 (90 samples
		// of 11,522). Drops in a window whose interval had to reach ×16 or
		// more pass up to 2 % of its samples, logged: they are counted, the
		// drains' scaling stands for them, and the estimates are checked
		// all the same.
		switch {
		case win.Dropped == 0:
		case win.MaxShift >= 4 && win.Dropped*50 <= uint64(rep.Samples):
			t.Logf("window %d: %d samples of %d dropped while the interval climbed to x%d", w, win.Dropped, rep.Samples, 1<<win.MaxShift)
		default:
			t.Errorf("window %d: %d samples of %d dropped", w, win.Dropped, rep.Samples)
		}
		start := win.Start.UnixNano()
		answer := tg.Send(fmt.Sprintf("truth %d %d", start, start+win.Duration.Nanoseconds()))
		f := strings.Fields(answer)
		if len(f) != n+1 || f[0] != "truth" {
			t.Fatalf("the target said %q", answer)
		}
		line := fmt.Sprintf("window %2d (%s, %d samples, %d short, %d completed, %d dropped, %d untracked, rate up to x%d):", w, win.Duration.Round(time.Millisecond), rep.Samples, win.Shortened, rep.Profile.Completed, win.Dropped, rep.Untracked, 1<<win.MaxShift)
		type siteWindow struct {
			truth, est, variance float64
			held                 int
		}
		sites := make([]siteWindow, n)
		var smallEst, smallVar float64
		for i, s := range truthSites {
			sw := &sites[i]
			sw.truth, _ = strconv.ParseFloat(f[i+1], 64)
			for _, site := range rep.Profile.Sites {
				if site.Leaf().Function == s.fn {
					sw.est += site.Est.InUseBytes
					sw.variance += site.Est.InUseBytesVar
					sw.held += site.Sampled.InUse
				}
			}
			if !s.realloc {
				smallEst += sw.est
				smallVar += sw.variance
			}
		}
		// A site of small blocks has, under an unbiased estimator, the
		// variance of a thinned count: its truth times the mean interval
		// its bytes were sampled at, which the window's small samples
		// measure as their variance per estimated byte (the sampler's
		// interval is the same for every thread at a time). The variance
		// each site's own samples estimate falls with their number: a site
		// with 10 samples expected and 2 taken (Poisson odds about 1 in
		// 360) was put 5.5 standard errors low that way.
		perByte := float64(win.Rate) * float64(int(1)<<win.MaxShift)
		if smallEst > 0 {
			perByte = smallVar / smallEst
		}
		for i, s := range truthSites {
			sw := sites[i]
			truth, est, variance, held := sw.truth, sw.est, sw.variance, sw.held
			if !s.realloc && 16*s.largest <= float64(win.Rate) && truth > 0 {
				variance = truth * perByte
			}
			if held >= 30 {
				d := est - truth
				if z := math.Copysign(max(math.Abs(d)-s.largest, 0), d) / math.Sqrt(variance); math.Abs(z) > 6 {
					t.Errorf("window %d: %s estimated %.0f bytes of %.0f held, %.1f standard errors off", w, s.fn, est, truth, z)
				}
			}
			switch {
			case slots == 0:
				sumEst[i] += est
				sumTruth[i] += truth
				sumVar[i] += variance
				sumSlack[i] += s.largest
				samples[i] += held
			case !s.realloc:
				tiny.est += est
				tiny.truth += truth
				tiny.variance += variance
				tiny.slack += s.largest
			}
			if truth > 0 {
				line += fmt.Sprintf(" %s %+.1f%%", s.fn, 100*(est/truth-1))
			} else {
				line += fmt.Sprintf(" %s %.0f of 0 bytes", s.fn, est)
			}
		}
		t.Log(line)
	}
	var all struct{ est, truth, variance, slack float64 }
	for i := 1; i < len(truthSites); i++ {
		if truthSites[i].realloc {
			continue
		}
		all.est += sumEst[i]
		all.truth += sumTruth[i]
		all.variance += sumVar[i]
		all.slack += sumSlack[i]
	}
	check := func(name string, est, truth, variance, slack float64) {
		d := est - truth
		z := math.Copysign(max(math.Abs(d)-slack, 0), d) / math.Sqrt(variance)
		msg := fmt.Sprintf("%-14s estimate/truth %.4f ± %.4f (one standard error), z %+.1f", name, est/truth, math.Sqrt(variance)/truth, z)
		if math.Abs(z) > 4.5 {
			t.Errorf("%s: biased", msg)
		} else {
			t.Log(msg)
		}
	}
	for i, s := range truthSites {
		check(fmt.Sprintf("%s (%d held samples)", s.fn, samples[i]), sumEst[i], sumTruth[i], sumVar[i], sumSlack[i])
	}
	check("the small sites", all.est, all.truth, all.variance, all.slack)
	if tiny.truth > 0 {
		check("the small sites, tiny ring", tiny.est, tiny.truth, tiny.variance, tiny.slack)
	}
}

// TestLeaksHeldBlocksAreLive: every grow_realloc block a window's profile
// holds at its end is one the program holds. The program's workers are
// paused before the window ends (every record written, the last drains
// read them all) and list their buffers. Sparse samples (8 MiB) space the
// drains out: a block's sample read a drain after the block's free or
// move stayed held where the block had been, 3 to 15 of about 90 held
// blocks a window before internal/stackprof's after.go.
func TestLeaksHeldBlocksAreLive(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20 s")
	}
	exe := testutil.BuildC(t, "leaks_truth.c", "-O2", "-fomit-frame-pointer", "-lstdc++")
	tg := testutil.StartCmd(t, exec.Command(exe, "16", strconv.FormatInt(1<<40, 10), "32"))
	t.Cleanup(func() { tg.Quit() })
	for w := 0; w < 4; w++ {
		var held []uint64
		paused := false
		rep, err := Leaks(context.Background(), tg.Pid, LeaksOptions{Options: Options{Timeout: 10 * time.Second}, Duration: 2 * time.Second, Rate: 8 << 20, NoScan: true,
			Drained: func(b *stackprof.Builder, at time.Duration) {
				switch {
				case !paused && at >= 1500*time.Millisecond:
					paused = true
					if a := tg.Send("pause"); a != "paused" {
						t.Errorf("the target said %q", a)
					}
				case paused:
					held = b.HeldBlocks("grow_realloc")
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		live := map[uint64]bool{}
		for _, a := range strings.Fields(tg.Send("grown"))[1:] {
			v, err := strconv.ParseUint(a, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			live[v] = true
		}
		tg.Send("resume")
		var wrong []string
		for _, a := range held {
			if !live[a] {
				wrong = append(wrong, fmt.Sprintf("%#x", a))
			}
		}
		t.Logf("window %d: %d samples, %d grown blocks held of the %d the program has, %d not the program's", w, rep.Samples, len(held), len(live), len(wrong))
		if len(held) == 0 {
			t.Errorf("window %d: no grown block held at its end", w)
		}
		if len(wrong) > 0 && rep.Untracked == 0 {
			t.Errorf("window %d: held at addresses the program no longer has: %v", w, wrong)
		}
	}
}
