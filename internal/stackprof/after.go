package stackprof

import (
	"slices"
	"time"
)

// This file puts in its place a sample of a block read after a free or a
// move of that block, or after a later sample of it.
//
// A drain reads the free ring whole, and each ring of samples up to its
// first record still being written (another thread's, stopped in the
// middle of it), the rest a drain later; records are in stamp order within
// a drain only (internal/sampler's Drain, which also holds back the
// samples stamped after its read of the free ring). So a block's sample
// can come a drain after the block's free, or its move by a realloc not
// sampled: applied to the block's earlier samples held at its address, or
// kept as an orphan and taken by the block's first sample read late. A
// second sample read late found nothing held and no orphan, and stayed
// held for ever where the block had left. Where samples are dense, drains
// come every few milliseconds and hold few back; sparse (a rate of 8 MiB),
// or under load, when the sampler doubles its interval, a realloc-grown
// site came out 3 to 6 % high (TestLeaksUnbiasedUnderLoad). Pausing the
// test's program at a window's end showed it: 3 to 15 of about 90 held
// grown blocks were at addresses the program no longer had, none since.
// So each free or move applied to a held block is kept, by address, for a
// later sample of the same block: one whose realloc moved it there (the
// move's stamp, Raw.Moved), or any sample at that address stamped before
// the free or move while the block was there, as the move that brought it
// or one of its samples says, with no other free or move at that address
// known between. The sample joins the block's samples where its stamp
// puts it, and shares their fate.
//
// The other way round, a block's sample can come after a later sample of
// it (held back in one ring while the other was read): it found a later
// sample held at its address and was taken for a block freed unseen. It
// joins the block instead, on the same evidence.

// maxApplied bounds the frees and moves kept: a sample read late is read
// within a few drains of them.
const maxApplied = 1 << 15

// appliedMove is a free (to 0) or a move of a held block, applied to its
// latest sample then (head), as read at at; came is how the block had
// come to the address (zero: it was allocated there).
type appliedMove struct {
	stamp, to uint64
	at        time.Duration
	head      int32
	came      arrival
}

// arrival is a move that brought a block to an address: where from, and
// its stamp.
type arrival struct{ addr, stamp uint64 }

// noteApplied keeps a free or move applied at addr, dropping the oldest
// kept past maxApplied.
func (b *Builder) noteApplied(addr uint64, a appliedMove) {
	if b.appliedKeys == nil {
		b.appliedKeys = make([]uint64, maxApplied)
	}
	slot := b.appliedN % maxApplied
	if b.appliedN >= maxApplied {
		old := b.appliedKeys[slot]
		if l := b.applied[old]; len(l) <= 1 {
			delete(b.applied, old)
		} else {
			b.applied[old] = l[1:]
		}
	}
	b.appliedKeys[slot] = addr
	b.appliedN++
	b.applied[addr] = append(b.applied[addr], a)
}

// late places sample i (r) that joined no held block, if it is of a block
// a free or move at its address was applied to before it was read: it
// reports whether it did.
func (b *Builder) late(i int, r Raw) bool {
	if r.Stamp == 0 {
		return false
	}
	// The block the free or move was for: the one this realloc moved
	// here, or one that was here then (sameBlock).
	a := b.firstApplied(r.Addr, r.Stamp, func(a *appliedMove) bool {
		movedIn := r.Old != 0 && r.Old != r.Addr && r.Moved != 0 && a.came.addr == r.Old && uint32(a.came.stamp) == r.Moved
		return movedIn || b.sameBlock(int(a.head), r.Addr, r.Stamp, a.came.stamp)
	})
	return a != nil && b.insert(i, int(a.head), a.to, a.at)
}

// arrivedLate joins the block whose latest sample is i, moved to addr by
// a move stamped so and read late, to the samples taken there since, if a
// free or move of that block at addr was applied to them already (the
// block's samples at addr read before its earlier ones and the move that
// brought it): it reports whether it did.
func (b *Builder) arrivedLate(i int, addr, stamp uint64) bool {
	a := b.firstApplied(addr, stamp, func(a *appliedMove) bool { return b.sameBlock(int(a.head), addr, stamp, 0) })
	if a == nil {
		return false
	}
	// Below the oldest of those samples: the block's earlier ones.
	e := b.oldest(int(a.head))
	if !before(b.samples[i].stamp, b.samples[e].stamp) {
		return false
	}
	b.below(e, i)
	if ns := &b.samples[b.newest(e)]; ns.freed {
		b.freeBlock(i, ns.freedAt)
	}
	return true
}

// firstApplied is the first free or move at addr stamped after stamp
// that is (same) of the block in question; nil if none.
func (b *Builder) firstApplied(addr, stamp uint64, same func(*appliedMove) bool) *appliedMove {
	var first *appliedMove
	for k := range b.applied[addr] {
		a := &b.applied[addr][k]
		if a.stamp > stamp && (first == nil || a.stamp < first.stamp) && same(a) {
			first = a
		}
	}
	return first
}

// oldest and newest are the first and last samples of the chain sample i
// is in (bounded, whatever the links); below puts the chain whose latest
// sample is j right below sample e.
func (b *Builder) oldest(i int) int {
	for n := 0; b.samples[i].next != 0 && n < len(b.samples); n++ {
		i = int(b.samples[i].next) - 1
	}
	return i
}

func (b *Builder) newest(i int) int {
	for n := 0; b.samples[i].newer != 0 && n < len(b.samples); n++ {
		i = int(b.samples[i].newer) - 1
	}
	return i
}

func (b *Builder) below(e, j int) {
	b.samples[e].next, b.samples[j].newer = int32(j+1), int32(e+1)
}

// sameBlock says whether a sample at addr, stamped so, is of the block
// whose latest sample is head: the block was at addr then, as the move
// that brought it there (stamped arrived; 0: none known) or one of its
// samples says (taken at addr before it, or after it by a realloc that
// grew the block in place there, not one that moved it there), and no
// free or move at addr is known between the two.
func (b *Builder) sameBlock(head int, addr, stamp, arrived uint64) bool {
	if arrived != 0 && arrived < stamp && !b.freedBetween(addr, arrived, stamp) {
		return true
	}
	for j, n := head, 0; j >= 0 && n < len(b.samples); j, n = int(b.samples[j].next)-1, n+1 {
		x := &b.samples[j]
		if x.addr != addr || x.stamp == 0 || x.stamp > stamp && !(x.grown && x.oldAddr == addr) {
			continue
		}
		lo, hi := min(x.stamp, stamp), max(x.stamp, stamp)
		if !b.freedBetween(addr, lo, hi) {
			return true
		}
	}
	return false
}

// freedBetween says whether a free or move at addr stamped after lo and
// before hi is known (applied, or waiting for its block as an orphan).
func (b *Builder) freedBetween(addr, lo, hi uint64) bool {
	for _, a := range b.applied[addr] {
		if a.stamp > lo && a.stamp < hi {
			return true
		}
	}
	for _, o := range b.orphans[addr] {
		if o.stamp > lo && o.stamp < hi {
			return true
		}
	}
	return false
}

// insert puts sample i in the chain of the block whose latest sample was
// head, where its stamp goes (the chain runs from the latest by next), and
// gives it the block's fate: freed with it, or held where it is now. to
// and at: the move (0: the free) that was applied to head, if any, read
// at at; where the block went from there. A sample that brings earlier
// ones of its own goes below the whole chain or not at all: it reports
// whether it went.
func (b *Builder) insert(i, head int, to uint64, at time.Duration) bool {
	s := &b.samples[i]
	newest := b.newest(head)
	// Walk from the newest down to the first sample older than i.
	newer, older := -1, newest
	for n := 0; older >= 0 && n < len(b.samples) && !before(b.samples[older].stamp, s.stamp); n++ {
		newer, older = older, int(b.samples[older].next)-1
	}
	if older >= 0 {
		if s.next != 0 {
			return false
		}
		b.below(i, older)
	}
	if newer >= 0 {
		b.below(newer, i)
		// The block's fate is its newest sample's.
		if ns := &b.samples[newest]; ns.freed {
			b.freeBlock(i, ns.freedAt)
		}
		return true
	}
	// The block's newest sample now.
	if ns := &b.samples[newest]; ns.freed {
		s.freed, s.freedAt = true, ns.freedAt
		return true
	}
	// Where the block is now: where the move took it, or further on by
	// the moves applied to it since; else (rare) wherever it is held.
	addr := to
	for step := 0; step < 64 && addr != 0; step++ {
		if j, ok := b.live[addr]; ok && j == newest {
			b.live[addr] = i
			return true
		}
		next := uint64(0)
		for _, a := range b.applied[addr] {
			if int(a.head) == newest {
				next = a.to
			}
		}
		addr = next
	}
	for a, j := range b.live {
		if j == newest {
			b.live[a] = i
			return true
		}
	}
	// Held nowhere: freed unseen.
	s.freed, s.freedAt = true, at
	return true
}

// HeldBlocks lists the addresses of the blocks held now whose latest
// sample's stack has a frame of function fn: for a test that asks the
// program which blocks it holds.
func (b *Builder) HeldBlocks(fn string) []uint64 {
	var out []uint64
	for addr, i := range b.live {
		s := &b.samples[i]
		if s.freed {
			continue
		}
		for _, f := range b.sites[s.site].frames {
			if f.Function == fn {
				out = append(out, addr)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
