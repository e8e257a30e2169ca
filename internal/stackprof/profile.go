package stackprof

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/unwind"
)

// Raw is one sampled allocation as the sampler drained it from the
// target's ring.
type Raw struct {
	// Addr is the block the allocator returned; Size the bytes requested
	// (calloc's n*size), which must be what the sampler counts down its
	// byte interval with: the unbiasing assumes it.
	Addr, Size uint64
	// Old: a realloc's sample, the block it was given (0 for none);
	// OldSize its usable bytes at the call. Such a sample counts what the
	// call added to the block, Size less OldSize (nothing for a shrink),
	// and no new block: a window's profile says which code made the heap
	// grow in it, and the rest of a block from before the window was not
	// allocated in it (issue 29). What the block held before stays with
	// the samples that counted it, which follow the block when realloc
	// moves it (Builder.Move).
	Old, OldSize uint64
	Tid          int
	At           time.Duration // since the window's start
	// Freed: the block was freed (or realloc'd away) before the window
	// ended, at FreedAt.
	Freed   bool
	FreedAt time.Duration
	// Stamp orders the sample against frees of blocks at its address
	// (the sampler's clock); 0 when unknown.
	Stamp uint64
	// Moved: a realloc's sample that moved a sampled block, the low 32
	// bits of the stamp of that move (its Move), 0 if it made none.
	Moved uint32
	// Kind is the entry point called: "malloc", "calloc", "realloc",
	// "new", "new[]", "posix_memalign", ...
	Kind string
	// Short: the stack copy is only the top of the stack (the sampler's
	// ring had no room for a full one). Where it unwinds to fewer frames
	// than the stack has, the Builder completes it from the full stacks
	// that begin with the same frames (complete.go). Thin: a whole stack
	// that was copied whole with chance 2^-Thin (the sampler's ring was
	// more than half full): it stands for the 2^Thin - 1 short ones it
	// was chosen over in that sharing.
	Short bool
	Thin  int
	// Shift: the sample was taken at Window.Rate << Shift (the sampler
	// doubles its mean interval while arenactl cannot read its samples as
	// fast as they come): it is weighted by that rate.
	Shift int
	// Scale (0: 1) is what the samples kept in this sample's drain stand
	// for beyond themselves: samples dropped in that drain (both rings full),
	// whose sites are unknown, are taken to be like those kept then.
	Scale float64
	Start unwind.Start
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
	// Dropped counts the samples the sampler had no room for: the ones
	// kept in the same drains stand for them (Raw.Scale).
	Dropped uint64
	// Shortened counts the samples taken with a short stack copy
	// (Raw.Short).
	Shortened uint64
	// MaxShift: the sampler doubled its mean interval up to this many
	// times for part of the window (Raw.Shift); 0: never.
	MaxShift int
}

// Profile is a sampled heap profile: one Site per distinct symbolized
// call stack, sorted by estimated in-use bytes, largest first.
type Profile struct {
	Window   Window
	Sites    []Site
	Mappings []Mapping // the modules the sites' frames are in, main executable first
	// InUseChunkBytes is Total's InUseBytes as the allocator's chunks
	// hold them (a header and rounding to 16 bytes each, pages for large
	// blocks): what a walk of the heap counts.
	InUseChunkBytes float64
	// Classified: the blocks still held at the window's end were scanned
	// for (Est.Leaked*, Counts.Leaked); else those are zero.
	Classified bool
	// Samples is the number of samples built from; Incomplete of them had
	// stacks that stopped before the outermost frame (Site.Stop), of which
	// Truncated because the stack copy was too short. Completed short
	// stacks (Raw.Short) were shared out among the full stacks that
	// begin with the same frames; ShortLeft, those that none began with,
	// are among Truncated.
	Samples, Incomplete, Truncated, Completed, ShortLeft int
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
	// Leaked is how many of the InUse samples nothing reachable points to
	// at the window's end (when the profile was classified).
	Leaked int
}

// Estimate is what the samples stand for, unbiased: every sampled block
// of size s counts 1/p objects and s/p bytes, p = 1-exp(-s/Rate) being
// the chance a block of that size was sampled (as Go's runtime/pprof and
// tcmalloc unbias). Alloc is everything allocated in the window; InUse
// what of it was still held at its end.
type Estimate struct {
	AllocObjects, AllocBytes float64
	InUseObjects, InUseBytes float64
	// AllocBytesVar and InUseBytesVar are the estimated variances of
	// AllocBytes and InUseBytes, from the samples: a block of size s
	// sampled with chance p adds s²(1-p)/p², an unbiased estimate of
	// what it adds to the variance of a sum of independent samples.
	AllocBytesVar, InUseBytesVar float64
	// LeakedObjects and LeakedBytes are the part of InUse that nothing
	// the program can reach points to at the window's end (Classify): a
	// leak, where the rest is merely held.
	LeakedObjects, LeakedBytes float64
}

// Sigma is the standard error of InUseBytes.
func (e Estimate) Sigma() float64 { return math.Sqrt(e.InUseBytesVar) }

func (e *Estimate) add(o Estimate) {
	e.AllocObjects += o.AllocObjects
	e.AllocBytes += o.AllocBytes
	e.InUseObjects += o.InUseObjects
	e.InUseBytes += o.InUseBytes
	e.AllocBytesVar += o.AllocBytesVar
	e.InUseBytesVar += o.InUseBytesVar
	e.LeakedObjects += o.LeakedObjects
	e.LeakedBytes += o.LeakedBytes
}

func (c *Counts) add(o Counts) {
	c.Alloc += o.Alloc
	c.InUse += o.InUse
	c.AllocBytes += o.AllocBytes
	c.InUseBytes += o.InUseBytes
	c.Leaked += o.Leaked
}

// Call is a sampled call as a hook reached through the GOT sees it, before
// it has pushed anything: the return address on top of the caller's stack
// and the caller's callee-saved registers untouched.
type Call struct {
	// Entry is the first instruction of the function called (the real
	// malloc, operator new...), so that it shows as the stack's leaf; 0
	// when unknown: the caller is the leaf then.
	Entry uint64
	// Regs are the caller's registers at the call: pc is the return
	// address; sp the caller's stack pointer once the call returns (the
	// return address's slot + 8 on x86_64; on aarch64 sp at the call,
	// the return address in x30 as well), where Stack, the copy, starts;
	// and its callee-saved registers. StackEnd is the end of the thread's stack
	// mapping, 0 when unknown.
	Regs     debuggee.Regs
	Stack    []byte
	StackEnd uint64
}

// Unwind is the registers and stack copy the unwinder takes for the call:
// pc at Entry with the return address pushed back in front of the copy
// (x86_64; on aarch64 it stays in the link register, which Regs hold),
// exactly as at the called function's first instruction; without Entry,
// pc inside the call instruction, the caller's own frame as the leaf.
func (c Call) Unwind() (unwind.Start, unwind.Stack) {
	st, stack, _ := c.UnwindWith(nil)
	return st, stack
}

// UnwindWith is Unwind with the stack put together in scratch when it is
// large enough (grown and returned, for the next call, when not): for a
// caller that unwinds one call after another and keeps no stack, as the
// leaks drain does a few hundred thousand times a second.
func (c Call) UnwindWith(scratch []byte) (unwind.Start, unwind.Stack, []byte) {
	st := unwind.Start{Regs: c.Regs, HaveCalleeSaved: true}
	ret, sp := c.Regs.PCOf(liveMachine), c.Regs.SPOf(liveMachine)
	if c.Entry == 0 {
		// Inside the call: its line, and the CFI row in force across it.
		st.Regs.SetPCOf(liveMachine, ret-1)
		return st, unwind.Stack{Addr: sp, Data: c.Stack, End: c.StackEnd}, scratch
	}
	if liveMachine.Regs.RA != liveMachine.Regs.PC {
		// The return address is in a register (aarch64's x30: bl
		// writes it there and pushes nothing; Regs hold it), so the
		// stack at the entry is the caller's, as copied.
		st.Regs.SetPCOf(liveMachine, c.Entry)
		st.AtEntry = true
		return st, unwind.Stack{Addr: sp, Data: c.Stack, End: c.StackEnd}, scratch
	}
	if cap(scratch) < 8+len(c.Stack) {
		scratch = make([]byte, 8+len(c.Stack))
	}
	data := scratch[:8+len(c.Stack)]
	binary.LittleEndian.PutUint64(data, ret)
	copy(data[8:], c.Stack)
	st.Regs.SetPCOf(liveMachine, c.Entry)
	st.Regs.SetSPOf(liveMachine, sp-8)
	st.AtEntry = true
	return st, unwind.Stack{Addr: sp - 8, Data: data, End: c.StackEnd}, scratch
}

// liveMachine is the machine of every process a profile is built from: a
// live one, which arenactl traces only on its own machine (arch.ForProcess).
var liveMachine = arch.Host()
