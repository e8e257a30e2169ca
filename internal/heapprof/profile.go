package heapprof

import (
	"time"

	"github.com/arenactl/arenactl/internal/unwind"
)

// Raw is one sampled allocation as the sampler drained it from the
// target's ring.
type Raw struct {
	// Addr is the block the allocator returned; Size the bytes requested
	// (calloc's n*size), which must be what the sampler counts down its
	// byte interval with: the unbiasing assumes it.
	Addr, Size uint64
	Tid        int
	At         time.Duration // since the window's start
	// Freed: the block was freed (or realloc'd away) before the window
	// ended, at FreedAt.
	Freed   bool
	FreedAt time.Duration
	// Kind is the entry point called: "malloc", "calloc", "realloc",
	// "new", "new[]", "posix_memalign", ...
	Kind  string
	Regs  unwind.Regs
	Stack unwind.Stack
}

// Window is the time the samples were taken over and how.
type Window struct {
	Start    time.Time
	Duration time.Duration
	// Rate is the mean number of bytes between samples (a Poisson
	// process over the bytes allocated); 0 means every allocation was
	// recorded.
	Rate uint64
	// Dropped counts the samples the ring had no room for: the estimates
	// are low by about Dropped/(Samples+Dropped).
	Dropped uint64
}

// Profile is a sampled heap profile: one Site per distinct symbolized
// call stack, sorted by estimated in-use bytes, largest first.
type Profile struct {
	Window   Window
	Sites    []Site
	Mappings []Mapping // the modules the sites' frames are in, main executable first
	// Samples is the number of samples built from; Incomplete of them had
	// stacks that stopped before the outermost frame (Site.Stop), of which
	// Truncated because the stack copy was too short.
	Samples, Incomplete, Truncated int
}

// Site is one call stack that allocated, with what was sampled there and
// what it stands for.
type Site struct {
	// Frames run from the root (the thread's start) to the leaf (the
	// allocator's entry), inlined calls expanded as frames of their own,
	// as pprof shows them.
	Frames []Frame
	// Kinds are the allocator entry points sampled here, sorted.
	Kinds   []string
	Sampled Counts
	Est     Estimate
	// Stop is why the unwinding of this stack ended (unwind.StopEnd when
	// it reached the outermost frame).
	Stop unwind.Stop
}

// Frame is one function of a call stack.
type Frame struct {
	Function string // demangled, without parameters; "" when no symbol covers Addr
	Mangled  string // the symbol as in the file ("" for an inlined function)
	File     string // from the debug info, when found
	Line     int
	// Inlined: this function was inlined into the next frame towards the
	// root; both share Addr.
	Inlined bool
	// Addr is the address looked up: the instruction for the leaf, inside
	// the call instruction for a caller.
	Addr    uint64
	Module  string // the module's path as mapped; "" when Addr is in none
	BuildID string
	Offset  uint64 // Addr in the module's file terms (before the load bias)
	// MappingID is the module's Mapping's ID in Profile.Mappings; 0 when
	// in none.
	MappingID int
}

// Mapping is a module the profile's frames are in, as pprof's Mapping
// has it: its address range and the file offset mapped at Start.
type Mapping struct {
	ID                   int // 1-based: Profile.Mappings[ID-1]
	Start, Limit, Offset uint64
	File, BuildID        string
	// HasLines: some frame here got a file and line from debug info.
	HasLines bool
}

// Counts are the samples themselves: how many were taken, and how many
// were still held when the window ended, with the bytes they requested.
type Counts struct {
	Alloc, InUse           int
	AllocBytes, InUseBytes uint64
}

// Estimate is what the samples stand for, unbiased: every sampled block
// of size s counts 1/p objects and s/p bytes, p = 1-exp(-s/Rate) being
// the chance a block of that size was sampled (as Go's runtime/pprof and
// tcmalloc unbias). Alloc is everything allocated in the window; InUse
// what of it was still held at its end.
type Estimate struct {
	AllocObjects, AllocBytes float64
	InUseObjects, InUseBytes float64
}

func (e *Estimate) add(o Estimate) {
	e.AllocObjects += o.AllocObjects
	e.AllocBytes += o.AllocBytes
	e.InUseObjects += o.InUseObjects
	e.InUseBytes += o.InUseBytes
}

func (c *Counts) add(o Counts) {
	c.Alloc += o.Alloc
	c.InUse += o.InUse
	c.AllocBytes += o.AllocBytes
	c.InUseBytes += o.InUseBytes
}
