package heapprof

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
