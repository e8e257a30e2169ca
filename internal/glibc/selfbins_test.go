package glibc

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
)

// The prefix counts a region keeps give, at every offset and for every
// arena layout, what selfBins counts by reading each bin: the scan of a
// static program's data takes them instead.
func TestSelfBinsAtIsSelfBins(t *testing.T) {
	const start = 0x4be000
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 64<<10)
	// Two arenas' worth of empty bins, some bins filled, and noise.
	for _, base := range []uint64{0x100, 0x3000 + 8} {
		for i := 1; i < nbins; i++ {
			off := base + 0x70 + uint64(i-1)*16
			self := start + off - 16
			if rng.IntN(5) == 0 {
				self = start + uint64(rng.IntN(len(b)))&^15
			}
			binary.LittleEndian.PutUint64(b[off:], self)
			binary.LittleEndian.PutUint64(b[off+8:], self)
		}
	}
	for i := 0x8000; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], start+uint64(i)-16+uint64(rng.IntN(2))*16)
	}
	r := &region{start: start, b: b}
	for m := 17; m <= 43; m++ {
		lay, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: m})
		for off := uint64(0); off+uint64(lay.StateSize) <= uint64(len(b)); off += 8 {
			want := selfBins(b[off:off+uint64(lay.StateSize)], lay, start+off)
			if got := r.selfBinsAt(off, lay); got != want {
				t.Fatalf("2.%d at +%#x: %d self-referential bins, selfBins says %d", m, off, got, want)
			}
		}
	}
}
