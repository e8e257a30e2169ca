package stackprof

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// pcsOf is a stack's PCs as the Builder keys them, leaf first.
func pcsOf(pcs ...uint64) []byte {
	var b []byte
	for _, pc := range pcs {
		b = binary.LittleEndian.AppendUint64(b, pc)
	}
	return b
}

// TestShortStacksShareOut runs the sampler's choice of whole or short
// stack copies (blob/sampler.c's thinning: a ring of 16 read after every
// 24 samples) over a stream of three sites: A and B reach malloc through
// the same wrapper (their short stacks are the same two frames), C
// through another. B's samples are spread over each period, A's come in
// a run at its end, when the ring is fuller, so more of A's are short.
// Each run's profile must give every site its calls: the mean over 300
// runs within 4.5 standard errors of the truth (odds of a false failure
// about 2 in 100,000 per site, on a fixed seed). Shared out in proportion
// to the whole samples unweighted, as a first version did, A must come
// out low by more than that: the stream does test the weighting.
func TestShortStacksShareOut(t *testing.T) {
	const runs, periods, slots = 300, 100, 16
	wrap, wrap2 := uint64(0x1000), uint64(0x2000)
	stacks := map[string][]byte{
		"A": pcsOf(0x10, wrap, 0xa0, 0xa1),
		"B": pcsOf(0x10, wrap, 0xb0),
		"C": pcsOf(0x10, wrap2, 0xc0),
	}
	short := map[string][]byte{"A": pcsOf(0x10, wrap), "B": pcsOf(0x10, wrap), "C": pcsOf(0x10, wrap2)}
	// One period: B and C spread, then A's run.
	var period []string
	for i := 0; i < 12; i++ {
		period = append(period, "B")
		if i%3 == 0 {
			period = append(period, "C")
		}
	}
	for i := 0; i < 8; i++ {
		period = append(period, "A")
	}
	truth := map[string]float64{}
	for _, s := range period {
		truth[s] += periods
	}
	est := map[bool]map[string][]float64{false: {}, true: {}}
	shortShare := map[string]float64{}
	for run := 0; run < runs; run++ {
		for _, weighted := range []bool{true, false} {
			b := NewBuilder(nil, nil)
			at := map[string]int{}
			for _, name := range []string{"A", "B", "C", "wrap", "wrap2"} {
				b.sites = append(b.sites, &site{frames: []Frame{{Function: name}}, key: name})
				at[name] = len(b.sites) - 1
			}
			partialSite := map[string]int{"A": at["wrap"], "B": at["wrap"], "C": at["wrap2"]}
			r := rand.New(rand.NewPCG(uint64(run), 7)) // the same draws for both ways
			for p := 0; p < periods; p++ {
				used := 0
				for _, name := range period {
					k := thinningOf(used, slots)
					if k < 64 && r.Uint64()&(1<<k-1) == 0 {
						used++
						n := 1.0
						if weighted {
							n = math.Ldexp(1, k) - 1
						}
						b.short.full(stacks[name], at[name], n)
						b.samples = append(b.samples, sample{site: at[name], size: 1})
						continue
					}
					if weighted {
						shortShare[name]++
					}
					b.samples = append(b.samples, sample{site: partialSite[name], size: 1, partial: b.short.partial(short[name])})
				}
			}
			prof := b.Profile(Window{})
			got := map[string]float64{}
			for _, s := range prof.Sites {
				got[s.Frames[0].Function] = s.Est.InUseObjects
			}
			for name := range truth {
				est[weighted][name] = append(est[weighted][name], got[name])
			}
			if got["wrap"]+got["wrap2"] != 0 {
				t.Fatalf("short stacks left as they were: %v", got)
			}
		}
	}
	for _, weighted := range []bool{true, false} {
		for _, name := range []string{"A", "B", "C"} {
			mean, v := meanVariance(est[weighted][name])
			se := math.Sqrt(v / runs)
			z := 0.0
			if d := mean - truth[name]; math.Abs(d) > 1e-9*truth[name] {
				z = d / se
			}
			msg := fmt.Sprintf("%s (weighted %v, %.0f%% short): mean estimate %.1f of %.0f calls (%+.2f%%, %+.1f standard errors)",
				name, weighted, 100*shortShare[name]/truth[name]/runs, mean, truth[name], 100*(mean/truth[name]-1), z)
			switch {
			case weighted && math.Abs(z) > 4.5:
				t.Errorf("%s: biased", msg)
			case !weighted && name == "A" && z > -4.5:
				t.Errorf("%s: the stream does not show the bias the weights remove", msg)
			default:
				t.Log(msg)
			}
		}
	}
}

// thinningOf is blob/sampler.c's thinning for a ring of slots with used
// taken: 64 when it is full.
func thinningOf(used, slots int) int {
	if used >= slots {
		return 64
	}
	room, j := slots-used, 0
	for room <= slots>>(j+1) {
		j++
	}
	return min(j*(j+1)/2, 63)
}
