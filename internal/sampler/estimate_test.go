package sampler_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arenactl/arenactl/internal/sampler"
	"github.com/arenactl/arenactl/internal/stackprof"
	"github.com/arenactl/arenactl/internal/testutil"
)

// hookRun is what testdata/sampler_hooks.c reported: the bytes each site
// allocated, and the estimate and variance of them its records make.
type hookRun struct {
	truth, est, variance [5]float64
	samples, short       [5]int
	whole, wholeVar      [5]float64 // Σ 2^k over whole records, and the variance it estimates
	dropped, shortened   int
	maxShift             int // the most the sampler doubled its interval
}

var hookSites = [5]string{"realloc growth", "malloc(4096)", "malloc(208)", "calloc(64, 32)", "posix_memalign(64, 1024)"}

// runHooks runs the sampler's own code on the stream of calls of
// testdata/sampler_hooks.c, with arenactl's table of draws for rate.
func runHooks(t *testing.T, rate uint64, seed uint64, rounds, slots, drainEvery int) hookRun {
	t.Helper()
	exe := testutil.BuildC(t, "sampler_hooks.c", "-O2")
	var tbl bytes.Buffer
	for _, d := range sampler.Draws(rate) {
		binary.Write(&tbl, binary.LittleEndian, d)
	}
	draws := filepath.Join(t.TempDir(), "draws")
	if err := os.WriteFile(draws, tbl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, draws, strconv.FormatUint(seed, 10), strconv.Itoa(rounds), strconv.Itoa(slots),
		strconv.Itoa(drainEvery)).Output()
	if err != nil {
		t.Fatalf("%s: %v", exe, err)
	}
	var r hookRun
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		n := make([]uint64, len(f))
		for i := 1; i < len(f); i++ {
			n[i], _ = strconv.ParseUint(f[i], 10, 64)
		}
		switch {
		case f[0] == "T" && len(f) == 3:
			r.truth[n[1]] = float64(n[2])
		case f[0] == "S" && len(f) == 8:
			_, b, v := stackprof.Weight(n[2], rate<<n[7])
			r.est[n[1]] += float64(n[4]) * b
			r.variance[n[1]] += float64(n[4]) * v
			r.samples[n[1]] += int(n[4])
			if n[3] == 1 {
				r.short[n[1]] += int(n[4])
			}
			r.whole[n[1]] += float64(n[5])
			r.wholeVar[n[1]] += float64(n[6])
		case f[0] == "D" && len(f) == 4:
			r.dropped, r.shortened, r.maxShift = int(n[1]), int(n[2]), int(n[3])
		default:
			t.Fatalf("%s said %q", exe, sc.Text())
		}
	}
	return r
}

// check fails the test for a site whose estimate is more than z of its
// standard errors from the truth.
func (r hookRun) check(t *testing.T, z float64) {
	t.Helper()
	for s := range hookSites {
		sd := math.Sqrt(r.variance[s])
		dev := (r.est[s] - r.truth[s]) / sd
		msg := fmt.Sprintf("%-24s %6d samples: estimate %.4g of %.4g bytes (%+.2f%%, %+.1f standard errors of %.2f%%)",
			hookSites[s], r.samples[s], r.est[s], r.truth[s], 100*(r.est[s]/r.truth[s]-1), dev, 100*sd/r.truth[s])
		if math.Abs(dev) > z {
			t.Errorf("%s: biased", msg)
		} else {
			t.Log(msg)
		}
	}
}

// TestNoBiasAfterLargeBlocks runs the sampler's hooks, counters and draws
// on a stream of calls that mixes a block grown by realloc up to 1 MiB
// with small allocations, and checks every site's estimate against the
// bytes it allocated. It is the cause of issue 18's upward bias: after
// sampling a block larger than the draw that followed, the sampler set
// its counter to that same draw, known to be shorter than the rest of
// the block, so the calls right after a large block were sampled too
// often: with that one line put back, the 4 KiB site comes out +10.9 %
// here (8 standard errors), calloc +15.8 %, posix_memalign +13.5 %, the
// 208-byte blocks +18.7 %, the large blocks themselves +1.8 % (25).
//
// Each site is allowed 5 standard errors (from the samples' own
// variances, about 1.3 % for malloc(4096), 7 % for malloc(208)); with
// the generator's seed changed, an unbiased sampler fails one of the five
// with odds of about 3 in a million.
func TestNoBiasAfterLargeBlocks(t *testing.T) {
	r := runHooks(t, 64<<10, 1, 100000, 1<<16, 5)
	if r.dropped != 0 || r.shortened != 0 {
		t.Fatalf("%d samples dropped, %d shortened by a ring that should never fill", r.dropped, r.shortened)
	}
	r.check(t, 5)
}

// TestFullRingLosesNothing gives the same stream a ring of 16 records read
// after every 100 calls, about 12 samples' worth: the ring is more than
// half full most of the time and passes most samples on to the short
// ring. Before, a ring more than half full let samples go and weighted
// the ones it kept, and a full one dropped them: the estimates were
// unbiased only where the drops fell at random. Now no sample is lost
// and every site's estimate is the truth within 5 of its standard errors
// (odds as above).
//
// Each whole record, made whole with chance p = 2^-k, stands for
// 2^k - 1 samples that went short in its place: summed per site, those
// must be the site's short samples within 5 of the standard errors they
// estimate. That is what lets stackprof share a short stack out among the
// whole ones. The share of short records is not the same at every site:
// the large reallocs are sampled in runs, when the ring is fuller (25 %
// of them short against 19 % of the rest), so shares by the plain counts
// of whole records would give the bursty sites too little.
func TestFullRingLosesNothing(t *testing.T) {
	r := runHooks(t, 64<<10, 2, 200000, 16, 100)
	all := 0
	for _, n := range r.samples {
		all += n
	}
	t.Logf("%d samples, %d short, %d dropped", all, r.shortened, r.dropped)
	if r.shortened < all/10 {
		t.Errorf("only %d of %d samples short: the ring did not come near full", r.shortened, all)
	}
	if r.dropped != 0 || r.maxShift != 0 {
		t.Errorf("%d samples dropped; the interval was doubled %d times", r.dropped, r.maxShift)
	}
	for s, n := range r.samples {
		standFor := r.whole[s] - float64(n-r.short[s])
		z := (standFor - float64(r.short[s])) / math.Sqrt(r.wholeVar[s])
		msg := fmt.Sprintf("%-24s %6d samples, %5d short (%4.1f%%); the whole ones stand for %.0f short (%+.1f standard errors)",
			hookSites[s], n, r.short[s], 100*float64(r.short[s])/float64(n), standFor, z)
		if math.Abs(z) > 5 {
			t.Errorf("%s", msg)
		} else {
			t.Log(msg)
		}
	}
	r.check(t, 5)
}

// TestRateRisesUnbiased reads the rings only every 12,000 calls, about
// 1,400 samples' worth at 64 KiB against a short ring of 1,024: arenactl
// falling behind a busy process (issue 28). The sampler doubles its mean
// interval as the short ring passes half full, and the reads halve it
// again when they find it nearly empty. No sample may be lost, and with
// each record weighted by the rate of the interval that ended in it
// every site's estimate is the truth within 5 standard errors (odds as
// above). Weighted by the base rate, they would all be far too low.
func TestRateRisesUnbiased(t *testing.T) {
	r := runHooks(t, 64<<10, 3, 200000, 16, 12000)
	all := 0
	for _, n := range r.samples {
		all += n
	}
	t.Logf("%d samples, %d short, %d dropped, the interval doubled up to %d times", all, r.shortened, r.dropped, r.maxShift)
	if r.dropped != 0 {
		t.Errorf("%d samples dropped", r.dropped)
	}
	if r.maxShift == 0 {
		t.Errorf("the interval never rose: the short ring never passed half full")
	}
	r.check(t, 5)
}
