package heapprof

import "github.com/arenactl/arenactl/internal/unwind"

// This file exposes the exact joining of truncated stacks to the outer
// frames their thread was seen to have (internal/unwind's Outer), which
// the Builder applies to every stack it unwinds before anything else: a
// joined stack counts as whole, and only the ones it cannot join are left
// to the statistical completion of complete.go.

// Joined is how many stacks were cut short by their copy and joined
// exactly to their thread's outer frames, and how many of the cut ones
// could not be.
func (b *Builder) Joined() (joined, unjoined int) { return b.outer.Joined, b.outer.Unjoined }

// Joined is the Builder's Joined for the stacks of a Stacks.
func (t *Stacks) Joined() (joined, unjoined int) { return t.b.Joined() }

// Learn unwinds a stack only to learn its thread's outer frames (a copy of
// the whole stack of a thread blocked in a call, read while it stayed
// blocked): it makes no site and counts nothing.
func (b *Builder) Learn(start unwind.Start, stack unwind.Stack) {
	tr := b.u.UnwindInto(b.frames, start, stack)
	b.frames = tr.Frames
	b.outer.Learn(&tr, stack.End)
}

// Learn is the Builder's Learn for the stacks of a Stacks.
func (t *Stacks) Learn(start unwind.Start, stack unwind.Stack) { t.b.Learn(start, stack) }

// Cut is how many distinct stacks were cut short by their copy and could
// not be joined when added: when it grows, a caller may look for more
// outer frames to Learn.
func (b *Builder) Cut() int { return len(b.pending) }

// Cut is the Builder's Cut for the stacks of a Stacks.
func (t *Stacks) Cut() int { return t.b.Cut() }
