package stackprof

import (
	"fmt"
	"math"
	"strings"
)

// Top is the n sites holding the most estimated bytes at the window's end
// (all of them for n <= 0), largest first; sites that hold nothing are
// not among them.
func (p *Profile) Top(n int) []Site {
	var out []Site
	for _, s := range p.Sites { // already sorted by in-use bytes
		if s.Sampled.InUse == 0 {
			continue
		}
		if n > 0 && len(out) == n {
			break
		}
		out = append(out, s)
	}
	return out
}

// Total is the sum of every site's counts and estimates.
func (p *Profile) Total() (Counts, Estimate) {
	var c Counts
	var e Estimate
	for i := range p.Sites {
		c.add(p.Sites[i].Sampled)
		e.add(p.Sites[i].Est)
	}
	return c, e
}

// Growth is how fast a site's held bytes grew over the window, in bytes
// per second: what it allocated in the window and still holds, spread
// over the window (0 for a window of no length).
func (p *Profile) Growth(s *Site) float64 {
	return p.perSecond(s.Est.InUseBytes)
}

// TotalGrowth is Growth summed over every site.
func (p *Profile) TotalGrowth() float64 {
	_, e := p.Total()
	return p.perSecond(e.InUseBytes)
}

func (p *Profile) perSecond(bytes float64) float64 {
	if p.Window.Duration <= 0 {
		return 0
	}
	return bytes / p.Window.Duration.Seconds()
}

// Explanation sets the in-use bytes the profile attributes against the
// in-use growth measured another way over the same window (the read-only
// walk's in-use bytes at the end less at the start).
type Explanation struct {
	Explained float64 // estimated bytes allocated in the window and still held
	// Sigma is Explained's standard error (sampling alone); Held the
	// samples behind it; Rate the window's.
	Sigma    float64
	Held     int
	Rate     uint64
	Measured int64 // the measured growth; may be 0 or negative
	// Chunks is Explained as the allocator's chunks hold it (headers and
	// rounding), which the walk counts: what Disagree compares (0: use
	// Explained).
	Chunks float64
	// AllocPerSecond is how fast the process allocated (estimated), for
	// a suggested rate that the process can afford.
	AllocPerSecond float64
}

// Explains is how much of a measured in-use growth the profile accounts
// for.
func (p *Profile) Explains(measured int64) Explanation {
	c, e := p.Total()
	return Explanation{Explained: e.InUseBytes, Sigma: e.Sigma(), Held: c.InUse, Rate: p.Window.Rate, Measured: measured,
		Chunks: p.InUseChunkBytes, AllocPerSecond: p.perSecond(e.AllocBytes)}
}

// Within is how many standard errors a difference of two estimates may
// reach before they are said to disagree: 3 (a Gaussian goes beyond it
// once in 370 windows).
const Within = 3

// FewSamples is the fewest held samples an estimate is shown without a
// warning: below, its relative error is above about 30 %.
const FewSamples = 10

// Disagree says whether the walk's growth is outside the profile's
// sampling error: +1 when the profile holds more than grew, -1 less, 0
// when they agree (or no growth was measured).
func (x Explanation) Disagree() int {
	if x.Measured <= 0 || x.Rate == 0 && x.Sigma == 0 {
		return 0
	}
	held, sigma := x.Explained, x.Sigma
	if x.Chunks > 0 && x.Explained > 0 {
		held, sigma = x.Chunks, x.Sigma*x.Chunks/x.Explained
	}
	switch d := held - float64(x.Measured); {
	case d > Within*sigma:
		return 1
	case -d > Within*sigma:
		return -1
	}
	return 0
}

// SuggestRate is a --rate that would give about 100 held samples where
// this profile had held (samples) over the bytes held, rounded down to a
// power of two, at least 4 KiB; 0 when the rate is fine already or
// nothing tells.
func SuggestRate(rate uint64, held int, heldBytes float64) uint64 {
	const want = 100
	if rate == 0 || held >= FewSamples {
		return 0
	}
	var r float64
	if held > 0 {
		r = float64(rate) * float64(held) / want
	} else if heldBytes > 0 {
		r = heldBytes / want
	} else {
		return 0
	}
	out := uint64(4 << 10)
	for out*2 <= uint64(r) {
		out *= 2
	}
	if out >= rate {
		return 0
	}
	return out
}

// Fraction is Explained/Measured, 0 when nothing grew.
func (x Explanation) Fraction() float64 {
	if x.Measured <= 0 {
		return 0
	}
	return x.Explained / float64(x.Measured)
}

// String says it in one unit, the larger number's, with the profile's
// sampling error: "explains 118 ± 6 of 125 MiB of the in-use growth"
// (± Within standard errors). When the walk's growth is outside that, it
// says so and what can make them differ; when too few samples are held
// for the estimate to mean much, it says that and suggests a rate. A
// measured shrink or no growth is said as such: the profile's bytes then
// stand for turnover, not growth.
func (x Explanation) String() string {
	if x.Measured <= 0 {
		what := "did not grow"
		if x.Measured < 0 {
			what = "shrank by " + strings.TrimSpace(scaled(float64(-x.Measured), unitFor(float64(-x.Measured))))
		}
		return fmt.Sprintf("the heap's in-use bytes %s; the profile holds %s allocated in the window",
			what, strings.TrimSpace(scaled(x.Explained, unitFor(x.Explained))))
	}
	u := unitFor(max(x.Explained, float64(x.Measured)))
	pm := ""
	if x.Sigma > 0 {
		pm = " ± " + num(Within*x.Sigma, u)
	}
	out := fmt.Sprintf("explains %s%s of %s of the in-use growth", num(x.Explained, u), pm, scaled(float64(x.Measured), u))
	if x.Rate > 0 && x.Held < FewSamples {
		out += fmt.Sprintf(": from %s, too few to tell", plural(x.Held, "1 held sample", "%d held samples"))
		if how := Suggest(x.Rate, x.Held, max(x.Explained, float64(x.Measured)), x.AllocPerSecond); how != "" {
			out += " (" + how + " would take about 100)"
		}
		return out
	}
	switch x.Disagree() {
	case 1:
		out += ": the profile holds more than the walk saw grow, beyond its sampling error " +
			"(blocks older than the window were freed or realloc'd meanwhile, which the profile does not see: it counts what the window allocated; or blocks whose free could not be watched)"
	case -1:
		out += ": the walk saw more grow than the profile holds, beyond its sampling error " +
			"(memory the sampler does not see: calls that bypass the PLT, samples the sampler dropped with both its rings full, blocks younger than --min-age)"
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}

// MaxSamplesPerSecond is the most samples a second Suggest proposes: each
// costs the process a few microseconds, and arenactl reads and unwinds
// them; past it, a longer window is proposed instead.
const MaxSamplesPerSecond = 10000

// Suggest says how to take about 100 held samples where held samples
// stood for heldBytes at rate: a finer --rate (SuggestRate), unless the
// process, allocating allocPerSecond (0: unknown), would then be sampled
// more than MaxSamplesPerSecond times a second: then the finest rate that
// stays under it and a window so many times as long. "" when the rate
// is fine already or nothing tells.
func Suggest(rate uint64, held int, heldBytes, allocPerSecond float64) string {
	r := SuggestRate(rate, held, heldBytes)
	if r == 0 {
		return ""
	}
	if allocPerSecond <= 0 || allocPerSecond/float64(r) <= MaxSamplesPerSecond {
		return "--rate " + RateFlag(r)
	}
	// The rate that would take 100 samples in this window, unrounded.
	exact := heldBytes / 100
	if held > 0 {
		exact = float64(rate) * float64(held) / 100
	}
	afford := uint64(4 << 10)
	for float64(afford) < allocPerSecond/MaxSamplesPerSecond {
		afford *= 2
	}
	if afford >= rate {
		return fmt.Sprintf("a window %.0f times as long", math.Ceil(float64(rate)/exact))
	}
	longer := int(math.Ceil(float64(afford) / exact))
	return fmt.Sprintf("--rate %s (about %.0f samples a second here) and a window %d times as long",
		RateFlag(afford), allocPerSecond/float64(afford), longer)
}

// RateFlag is a --rate value as the flag takes it: "64KiB".
func RateFlag(r uint64) string {
	switch {
	case r%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", r>>20)
	case r%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", r>>10)
	}
	return fmt.Sprint(r)
}

type unit struct {
	name string
	size float64
}

func unitFor(n float64) unit {
	for _, u := range []unit{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return u
		}
	}
	return unit{"B", 1}
}

// num is n in unit u, whole above 10 units, to a tenth below.
func num(n float64, u unit) string {
	v := n / u.size
	if v >= 10 || u.size == 1 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func scaled(n float64, u unit) string { return num(n, u) + " " + u.name }

// allocators are the allocator's own entry points and the functions they
// call on: a stack's leaf is in one of them, and the site is named after
// the first frame outside.
var allocators = map[string]bool{
	"malloc": true, "calloc": true, "realloc": true, "reallocarray": true, "free": true,
	"posix_memalign": true, "aligned_alloc": true, "memalign": true, "valloc": true, "pvalloc": true,
	"__libc_malloc": true, "__libc_calloc": true, "__libc_realloc": true, "__libc_memalign": true,
	"__libc_valloc": true, "__libc_pvalloc": true, "__posix_memalign": true,
	"operator new": true, "operator new[]": true,
}

// IsAllocator says whether a function is one of the allocator's entry
// points (also as its PLT stub, "malloc@plt").
func IsAllocator(function string) bool {
	return allocators[strings.TrimSuffix(function, "@plt")]
}

// Leaf is the frame that allocated: the innermost one outside the
// allocator (its entry points, and code in no module such as the
// sampler's own), or the leaf itself when every frame is.
func (s *Site) Leaf() Frame {
	for i := len(s.Frames) - 1; i >= 0; i-- {
		f := s.Frames[i]
		if f.Module == "" && i == len(s.Frames)-1 || IsAllocator(f.Function) {
			continue
		}
		return f
	}
	if len(s.Frames) == 0 {
		return Frame{}
	}
	return s.Frames[len(s.Frames)-1]
}

// Name is how a frame is called when shown: its function, or
// module+0xoffset (as pprof and perf name code without symbols), or its
// address when in no module.
func (f Frame) Name() string {
	switch {
	case f.Function != "":
		return f.Function
	case f.Module != "":
		return fmt.Sprintf("%s+%#x", baseName(f.Module), f.Offset)
	}
	return fmt.Sprintf("%#x", f.Addr)
}

// Position is file:line when known, "" otherwise.
func (f Frame) Position() string {
	if f.File == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d", f.File, f.Line)
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
