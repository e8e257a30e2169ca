package stackprof

import (
	"slices"

	"github.com/arenactl/arenactl/internal/unwind"
)

// This file joins the stacks cut short by their copy to the outer frames
// their threads were seen to have (unwind.Outer), when the profile is
// made: by then every frame that could join them has been learned (from
// later samples through the same frames, from threads read while blocked
// later in the window), and so has every frame seen with two callers,
// which nothing is joined through. Joined as they came, a stack could go
// through a frame before its second caller was seen. The join is exact
// (unwind.Outer); a heap profile moves each such sample to its joined
// site, a table of stacks (growth) moves a site only when every stack of
// it joins to the same one, since its values are not kept per sample.

// maxPending bounds the distinct cut stacks kept for joining again.
const maxPending = 1 << 12

// pendKey is a cut stack: its PCs and stop, its thread's stack, and its
// last frame's caller's sp.
type pendKey struct {
	pcs           string
	end, callerSP uint64
}

type pending struct {
	frames        []unwind.Frame
	end, callerSP uint64
	site          int // the cut stack's own site
	counted       int // times counted incomplete and truncated
	joined        int // its joined site once joined, else -1
}

// notePending keeps a stack still cut after its join (b.pcKey its key) for
// rejoin, and remembers it for count and Add.
func (b *Builder) notePending(tr *unwind.Trace, end uint64, si int) {
	b.lastPending = -1
	if !tr.Truncated || end == 0 {
		return
	}
	if b.pendIdx == nil {
		b.pendIdx = map[pendKey]int{}
	}
	k := pendKey{string(b.pcKey), end, tr.CallerSP}
	i, ok := b.pendIdx[k]
	if !ok {
		if len(b.pending) >= maxPending {
			return
		}
		i = len(b.pending)
		b.pendIdx[k] = i
		b.pending = append(b.pending, pending{frames: slices.Clone(tr.Frames), end: end, callerSP: tr.CallerSP, site: si, joined: -1})
		// Whether what is known now joins it: if not, the caller may
		// look for more (Cut).
		try := *tr
		try.Frames = slices.Clone(tr.Frames)
		if !b.outer.Join(&try, end, b.u.MaxFrames) {
			b.unjoinable++
		}
	}
	b.lastPending = i
}

// rejoin tries again to join the cut stacks not joined yet.
func (b *Builder) rejoin() {
	for i := range b.pending {
		p := &b.pending[i]
		if p.joined >= 0 {
			continue
		}
		tr := unwind.Trace{Frames: slices.Clone(p.frames), Stop: unwind.StopTruncated, Truncated: true, CallerSP: p.callerSP}
		if b.outer.Join(&tr, p.end, b.u.MaxFrames) {
			p.joined = b.siteOf(tr)
		}
	}
}

// joinedSite is the site a sample's cut stack (1 + its pending index, 0
// for none) was joined to at rejoin, -1 if none.
func (b *Builder) joinedSite(pend int32) int {
	if pend <= 0 {
		return -1
	}
	return b.pending[pend-1].joined
}

// movedSites joins the cut stacks again and says, for a table of stacks,
// where each site moved (itself if not), and how many counted-truncated
// stacks moved with them.
func (b *Builder) movedSites() (to []int, moved int) {
	b.rejoin()
	to = make([]int, len(b.sites))
	for i := range to {
		to[i] = i
	}
	target := map[int]int{}
	for i := range b.pending {
		p := &b.pending[i]
		t, seen := target[p.site]
		switch {
		case p.joined < 0 || seen && t != p.joined:
			target[p.site] = -1
		case !seen:
			target[p.site] = p.joined
		}
	}
	for i := range b.pending {
		p := &b.pending[i]
		if t := target[p.site]; t >= 0 {
			to[p.site] = t
			moved += p.counted
		}
	}
	return to, moved
}
