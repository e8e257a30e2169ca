package heapprof

import (
	"fmt"
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
	Measured  int64   // the measured growth; may be 0 or negative
}

// Explains is how much of a measured in-use growth the profile accounts
// for.
func (p *Profile) Explains(measured int64) Explanation {
	_, e := p.Total()
	return Explanation{Explained: e.InUseBytes, Measured: measured}
}

// Fraction is Explained/Measured, 0 when nothing grew.
func (x Explanation) Fraction() float64 {
	if x.Measured <= 0 {
		return 0
	}
	return x.Explained / float64(x.Measured)
}

// String says it in one unit, the larger number's: "explains 118 of 125
// MiB of the in-use growth". A measured shrink or no growth is said as
// such: the profile's bytes then stand for turnover, not growth.
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
	return fmt.Sprintf("explains %s of %s of the in-use growth", num(x.Explained, u), scaled(float64(x.Measured), u))
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
