package stackprof

import "github.com/arenactl/arenactl/internal/unwind"

// This file exposes the exact joining of truncated stacks to the outer
// frames their thread was seen to have (internal/unwind's Outer): the
// Builder learns from every stack it unwinds, and from the whole stacks
// given to Learn, and joins the cut ones when the profile is made
// (rejoin.go). A joined stack counts as whole; only the ones it cannot
// join are left to the statistical completion of complete.go, which
// shares a short stack among whole ones that begin alike where this
// repeats what a whole copy would have shown.

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
// not have been joined with what was known when they came: when it grows,
// a caller may look for more outer frames to Learn.
func (b *Builder) Cut() int { return b.unjoinable }

// Cut is the Builder's Cut for the stacks of a Stacks.
func (t *Stacks) Cut() int { return t.b.Cut() }
