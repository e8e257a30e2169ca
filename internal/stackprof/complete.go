package stackprof

import (
	"math"
	"sort"
	"strings"
)

// This file completes short stacks. A sampler that cannot keep up copies
// only the top of some stacks (Raw.Short), chosen at random, not by what
// they are: each then unwinds to its innermost frames only. Among the
// samples whose stacks were copied whole, those that begin with the same
// frames say which whole stacks such a call may have had, and how often
// each: the short sample's estimates are shared out among them in those
// proportions. A short stack that no whole one begins with stays as it
// is, counted truncated.
//
// The choice of a short copy is random, with a chance that depends on how
// full the sampler's ring was, not on the call; but a site whose calls
// come in runs meets a fuller ring and gets more short copies. Each whole
// sample was kept whole with a known chance p = 2^-Raw.Thin, so it stands
// for (1-p)/p = 2^Thin - 1 samples that went short in its place: summed
// per stack, those estimate without bias (Horvitz and Thompson) how many
// short samples each stack had, and the shares are their proportions.
// Shared by the whole samples' plain counts instead, a site whose calls
// come in runs got too little (TestShortStacksShareOut). A sample the
// ring turned away while full had no chance of a whole copy and nothing
// stands for it; the sampler's thinning makes that rare. Where the whole
// samples under a short stack all had chance 1, their plain counts share
// it. Where no whole stack begins with a short one's frames, nothing says
// where its calls came from.

// shortStacks keeps the PCs (leaf first, 8 bytes each) of the short
// stacks to complete, and the whole stacks to complete them from: a
// Completion whose one value is the sample itself.
type shortStacks struct {
	partials []string       // by index
	index    map[string]int // partials' index
	whole    Completion
}

// Share is the part of a short sample given to a site.
type Share struct {
	Site int
	Frac float64
}

// partial notes a short stack's PCs and returns 1 + its index.
func (c *shortStacks) partial(pcs []byte) int32 {
	if c.index == nil {
		c.index = map[string]int{}
	}
	i, ok := c.index[string(pcs)]
	if !ok {
		i = len(c.partials)
		c.partials = append(c.partials, string(pcs))
		c.index[c.partials[i]] = i
	}
	return int32(i + 1)
}

// one is a sample's only value, for Completion.
var one = []float64{1}

// full notes one sample of a whole stack with these PCs, at site, that
// stands for w short ones (2^Raw.Thin - 1).
func (c *shortStacks) full(pcs []byte, site int, w float64) {
	c.whole.Whole(string(pcs), site, w, one)
}

// resolve gives, for each short stack by index, the sites of the whole
// stacks that begin with its PCs and each one's part, largest first; nil
// where none does.
func (c *shortStacks) resolve() [][]Share {
	if len(c.partials) == 0 {
		return nil
	}
	out := make([][]Share, len(c.partials))
	for i, sh := range c.whole.Shares(c.partials, 1) {
		if sh != nil {
			out[i] = sh[0]
		}
	}
	return out
}

// Completion completes the short stacks of samples that carry a value per
// type (growth's calls: bytes mapped, unmapped, calls...), each whole
// sample with its values. A short sample's values are shared per type:
// a site's part of bytes mapped is the whole samples' bytes mapped there,
// each standing for the short ones it was chosen over, over all of them
// (a ratio estimator per type). Shared by counts, a site whose calls map
// more bytes than another's under the same short stack got too little.
type Completion struct {
	whole map[string]*valuedWhole
}

type valuedWhole struct {
	site   int
	w, raw []float64 // the values weighted by what each sample stands for, and as they are
	n      float64
}

// Whole notes a whole sample (Stacks.Whole's key) at site that stands for
// w short ones, with its values by type.
func (c *Completion) Whole(key string, site int, w float64, values []float64) {
	if c.whole == nil {
		c.whole = map[string]*valuedWhole{}
	}
	vw := c.whole[key]
	if vw == nil {
		vw = &valuedWhole{site: site, w: make([]float64, len(values)), raw: make([]float64, len(values))}
		c.whole[key] = vw
	}
	for i, v := range values {
		vw.w[i] += w * v
		vw.raw[i] += v
	}
	vw.n++
}

// Also adds values charged late to a whole sample noted before (Whole),
// each standing for w short ones too.
func (c *Completion) Also(key string, w float64, values []float64) {
	vw := c.whole[key]
	if vw == nil {
		return
	}
	for i, v := range values {
		vw.w[i] += w * v
		vw.raw[i] += v
	}
}

// Shares gives, for each short stack key, the sites its values go to and
// each one's part, per type: shares[i][typ]; nil where no whole stack
// begins with keys[i]'s PCs. Where the weighted values of a type are all
// zero (the whole samples had chance 1, or none had that type), the plain
// values share it, then the whole samples' counts.
func (c *Completion) Shares(keys []string, types int) [][][]Share {
	wk := make([]string, 0, len(c.whole))
	for k := range c.whole {
		wk = append(wk, k)
	}
	sort.Strings(wk)
	out := make([][][]Share, len(keys))
	for i, p := range keys {
		var under []*valuedWhole
		for j := sort.SearchStrings(wk, p); j < len(wk) && strings.HasPrefix(wk[j], p); j++ {
			under = append(under, c.whole[wk[j]])
		}
		if len(under) == 0 {
			continue
		}
		out[i] = make([][]Share, types)
		for typ := 0; typ < types; typ++ {
			weigh := []func(*valuedWhole) float64{
				// Net values are negative (given back): their size.
				func(v *valuedWhole) float64 { return math.Abs(v.w[typ]) },
				func(v *valuedWhole) float64 { return math.Abs(v.raw[typ]) },
				func(v *valuedWhole) float64 { return v.n },
			}
			for _, f := range weigh {
				bySite, total := map[int]float64{}, 0.0
				for _, v := range under {
					bySite[v.site] += f(v)
					total += f(v)
				}
				if total <= 0 {
					continue
				}
				sh := make([]Share, 0, len(bySite))
				for site, x := range bySite {
					if x > 0 {
						sh = append(sh, Share{site, x / total})
					}
				}
				sort.Slice(sh, func(a, b int) bool {
					if sh[a].Frac != sh[b].Frac {
						return sh[a].Frac > sh[b].Frac
					}
					return sh[a].Site < sh[b].Site
				})
				out[i][typ] = sh
				break
			}
		}
	}
	return out
}
