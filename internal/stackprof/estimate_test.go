package stackprof

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWeightExact: the weights where they are known in closed form.
func TestWeightExact(t *testing.T) {
	const r = 512 << 10
	for _, c := range []struct {
		size, rate uint64
		want       float64
	}{
		// A block as large as the mean interval is sampled with
		// probability 1-1/e.
		{r, r, 1 / (1 - 1/math.E)},
		{2 * r, r, 1 / (1 - math.Exp(-2))},
		// Tiny blocks stand for about rate/size each (+1/2, the next term).
		{1, r, float64(r) + 0.5},
		{0, r, 1},   // nothing to sample it by: itself
		{100, 0, 1}, // every allocation recorded
	} {
		if got := weight(c.size, c.rate); math.Abs(got-c.want) > 1e-6*c.want {
			t.Errorf("weight(%d, %d) = %.9g, want %.9g", c.size, c.rate, got, c.want)
		}
	}
}

// TestEstimateUnbiased samples a known allocation stream the way the
// sampler does (a byte countdown drawn from an exponential of mean Rate,
// a block sampled when the countdown runs out inside it), many times over,
// and checks that the mean estimate of every size class is the truth
// within a few standard errors of that mean: an estimator biased by a
// few percent fails. The generator is seeded, so the outcome is fixed.
func TestEstimateUnbiased(t *testing.T) {
	const rate, runs = 64 << 10, 100
	classes := []struct {
		size  uint64
		count int
	}{{24, 200000}, {4096, 4000}, {100 << 10, 200}, {3 << 20, 10}}
	rng := rand.New(rand.NewPCG(1, 2))
	next := func() float64 { return rng.ExpFloat64() * rate }
	sum := make([]struct{ objs, bytes float64 }, len(classes))
	left := make([]int, len(classes))
	for run := 0; run < runs; run++ {
		countdown := next()
		for i, c := range classes {
			left[i] = c.count
		}
		// Interleaved, as a program allocates.
		for remaining := true; remaining; {
			remaining = false
			for i, c := range classes {
				if left[i] == 0 {
					continue
				}
				remaining = true
				left[i]--
				countdown -= float64(c.size)
				if countdown > 0 {
					continue
				}
				countdown = next()
				w := weight(c.size, rate)
				sum[i].objs += w
				sum[i].bytes += w * float64(c.size)
			}
		}
	}
	for i, c := range classes {
		trueBytes := float64(c.size) * float64(c.count)
		mean, objs := sum[i].bytes/runs, sum[i].objs/runs
		// One run's relative standard error is sqrt((1-p)/(n p)); the
		// mean's is that over sqrt(runs).
		p := 1 - math.Exp(-float64(c.size)/rate)
		se := math.Sqrt((1-p)/(float64(c.count)*p)) / math.Sqrt(runs)
		relErr := math.Abs(mean-trueBytes) / trueBytes
		t.Logf("%7d B x %6d: mean estimate %.0f of %.0f bytes (%.2f%%, s.e. %.2f%%), %.0f of %d objects",
			c.size, c.count, mean, trueBytes, 100*relErr, 100*se, objs, c.count)
		if relErr > 4*se+1e-9 {
			t.Errorf("%d-byte blocks: mean estimate off by %.2f%%, more than 4 standard errors (%.2f%%)", c.size, 100*relErr, 100*se)
		}
		if math.Abs(objs-float64(c.count)) > 4*se*float64(c.count)+1e-9 {
			t.Errorf("%d-byte blocks: mean object estimate %.0f, want %d", c.size, objs, c.count)
		}
	}
}

// TestEstimateAndVariance samples a known stream as the sampler does,
// weighs the samples with Weight, and checks over many runs that the mean estimate is the truth
// and that the variance Weight's samples estimate, averaged, is the
// variance the estimates really have: the "±" leaks prints is the real
// error. With 400 runs the mean's standard error is 5 % of one run's,
// and the variance of 400 draws is known to about 7 %: the bounds (4
// standard errors; 30 % on the variance) fail an honest estimator with
// odds under 1 in 10,000 (the generator is seeded: the outcome is fixed).
func TestEstimateAndVariance(t *testing.T) {
	const rate, runs = 64 << 10, 400
	sizes := []uint64{208, 4096, 100 << 10}
	counts := []int{20000, 2000, 50}
	rng := rand.New(rand.NewPCG(3, 4))
	var truth float64
	for i, s := range sizes {
		truth += float64(s) * float64(counts[i])
	}
	ests := make([]float64, runs)
	meanVar := 0.0
	for run := range ests {
		countdown := rng.ExpFloat64() * rate
		left := append([]int(nil), counts...)
		for more := true; more; {
			more = false
			for i, s := range sizes {
				if left[i] == 0 {
					continue
				}
				more = true
				left[i]--
				countdown -= float64(s)
				if countdown > 0 {
					continue
				}
				countdown = rng.ExpFloat64() * rate
				_, b, v := Weight(s, rate)
				ests[run] += b
				meanVar += v / runs
			}
		}
	}
	mean, variance := meanVariance(ests)
	se := math.Sqrt(variance / runs)
	t.Logf("mean estimate %.4g of %.4g bytes (%+.2f%%, s.e. %.2f%%); variance %.4g, estimated from the samples %.4g (ratio %.3f)",
		mean, truth, 100*(mean/truth-1), 100*se/truth, variance, meanVar, meanVar/variance)
	if math.Abs(mean-truth) > 4*se {
		t.Errorf("mean estimate off by %.2f%%, more than 4 standard errors (%.2f%%)", 100*(mean/truth-1), 100*se/truth)
	}
	if r := meanVar / variance; r < 0.7 || r > 1.3 {
		t.Errorf("the samples estimate a variance %.3f times the real one", r)
	}
}

// meanVariance is the mean of xs and their variance (n-1).
func meanVariance(xs []float64) (mean, variance float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mean += x / n
	}
	for _, x := range xs {
		variance += (x - mean) * (x - mean) / (n - 1)
	}
	return mean, variance
}
