package unwind

// This file joins a chain that a short stack copy cut off to the outer
// frames the same thread's stack was seen to have. A thread's outer frames
// (its start routine, a server's connection loop, the statement path)
// change rarely and sit at the same addresses each time: a frame at the
// same sp with the same return address is called from the same place.
// Every unwound chain teaches which frame called which, per stack mapping
// (by depth below the mapping's end, so that threads started alike, whose
// frames sit at the same depths, teach each other too); a chain that stops
// at the copy's end at a frame seen before, whose caller was seen at
// exactly the sp the stop frame's rule gives, is joined to the callers seen
// then, one exact step at a time up to the thread's first frame: its own
// thread's first, else any thread's. A frame seen with two different callers is never joined
// through, nor is a chain whose stop frame was never seen: it stays
// truncated (for internal/stackprof's statistical completion, which is
// another thing: it shares a short stack among the whole stacks that
// begin with it, where this repeats what the copy would have shown).

// maxLinks bounds what an Outer remembers (about 100 bytes a link): a
// thread's outer frames are few, and a window that sees more distinct
// frames than this learns no new ones.
const maxLinks = 1 << 17

// Outer remembers, per thread stack and across threads, the caller of
// every frame seen, and joins truncated chains to them. Not safe for concurrent use.
type Outer struct {
	links map[linkKey]*link
	// Joined counts the calls of Join that completed a chain, Unjoined
	// those that could not.
	Joined, Unjoined int
}

// linkKey is a frame: its depth below the end of its thread's stack
// mapping, its pc, and whose stack it was seen in: the mapping's end (that
// thread's), or 0 for any thread's (threads started alike have their
// frames at the same depths).
type linkKey struct{ scope, depth, pc uint64 }

type link struct {
	caller Frame  // its SP a depth below the stack's end, as in linkKey; Method unused
	method Method // how the caller was found from this frame
	root   bool   // this frame was the outermost: nothing called it
	// conflict: seen with two different callers (or as a root and not):
	// the frame does not say where its chain goes.
	conflict bool
}

// NewOuter starts with nothing learned.
func NewOuter() *Outer { return &Outer{links: map[linkKey]*link{}} }

// Learn notes which frame called which in tr, a chain unwound from a copy
// of the stack whose mapping ends at end (0: unknown, nothing is learned).
// A chain that reached its end teaches that its last frame is a root.
func (o *Outer) Learn(tr *Trace, end uint64) {
	if end == 0 {
		return
	}
	fs := tr.Frames
	for i := range fs {
		if fs[i].SP > end {
			break // an alternate signal stack's frames, or garbage
		}
		var l link
		switch {
		case i+1 < len(fs) && fs[i+1].SP <= end:
			l = link{caller: fs[i+1], method: fs[i].Method}
			l.caller.Method, l.caller.SP = MethodNone, end-fs[i+1].SP
		case i+1 == len(fs) && tr.Stop == StopEnd:
			l = link{root: true}
		default:
			continue // the copy, the CFI or the frame count ended it: nothing known
		}
		for _, scope := range [2]uint64{end, 0} {
			o.learn(linkKey{scope, end - fs[i].SP, fs[i].PC}, l)
		}
	}
}

func (o *Outer) learn(k linkKey, l link) {
	old := o.links[k]
	if old == nil {
		if len(o.links) < maxLinks {
			o.links[k] = &l
		}
		return
	}
	if old.root != l.root || old.caller.PC != l.caller.PC || old.caller.SP != l.caller.SP ||
		old.caller.Exact != l.caller.Exact || old.method != l.method {
		old.conflict = true
	}
}

// Join extends tr, truncated by its stack copy, with the callers its last
// frame was seen to have in the stack ending at end, if the remembered
// chain reaches a root and every step is exact: each frame seen before
// with one caller only, and the first caller's sp the one the stop frame's
// rule gave (tr.CallerSP, where known). It returns whether it did; tr is
// unchanged if not.
func (o *Outer) Join(tr *Trace, end uint64, maxFrames int) bool {
	if !tr.Truncated || len(tr.Frames) == 0 {
		return false
	}
	if end == 0 || tr.Frames[len(tr.Frames)-1].SP > end {
		o.Unjoined++
		return false
	}
	if maxFrames <= 0 {
		maxFrames = DefaultMaxFrames
	}
	// This thread's own frames first, then any thread's.
	if o.join(tr, end, end, maxFrames) || o.join(tr, end, 0, maxFrames) {
		o.Joined++
		tr.Stop, tr.Truncated, tr.CallerSP = StopEnd, false, 0
		return true
	}
	o.Unjoined++
	return false
}

func (o *Outer) join(tr *Trace, end, scope uint64, maxFrames int) bool {
	n := len(tr.Frames)
	frames := tr.Frames
	last := frames[n-1]
	for {
		l := o.links[linkKey{scope, end - last.SP, last.PC}]
		if l == nil || l.conflict {
			break
		}
		if l.root {
			tr.Frames = frames
			return true
		}
		caller := l.caller
		caller.SP = end - caller.SP
		if len(frames) == n && tr.CallerSP != 0 && caller.SP != tr.CallerSP || caller.SP <= last.SP ||
			len(frames) >= maxFrames {
			break
		}
		frames[len(frames)-1].Method = l.method
		frames = append(frames, caller)
		last = caller
	}
	// Not joined: tr as it was (an append may have written past its
	// frames, in its spare capacity only).
	tr.Frames = tr.Frames[:n]
	tr.Frames[n-1].Method = MethodNone
	return false
}
