package chunks

import (
	"math/rand/v2"
	"testing"
)

// The index's slots against a plain list: chunks of 32 bytes and up at
// both halves of their slots, allocated or not, across rank blocks and
// summary words; every address asks Find, and the answer is the list's.
func TestSpanAgreesWithAList(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, seed))
		lo := uint64(0x55550000_0010) // 16 bytes into a 32-byte slot
		type chunk struct {
			addr, size uint64
			alloc      bool
		}
		var list []chunk
		a := lo
		for len(list) < 3000 {
			size := uint64(32 + 16*r.IntN(8))
			if r.IntN(50) == 0 {
				size = uint64(16 * (2 + r.IntN(4000))) // a long free run: empty words and blocks
			}
			list = append(list, chunk{a, size, r.IntN(2) == 0})
			a += size
		}
		hi := a
		ix := &Index{heaps: [][2]uint64{{lo, hi}}}
		var all []uint64
		for _, c := range list {
			v := c.addr
			if c.alloc {
				v |= 1
			}
			all = append(all, v)
		}
		ix.index(all)
		find := func(addr uint64) (Chunk, bool) {
			for _, c := range list {
				if c.alloc && addr >= c.addr+16 && addr < c.addr+c.size {
					ch := Chunk{Addr: c.addr, Size: c.size}
					if addr < ch.User() || addr >= ch.UserEnd() {
						return Chunk{}, false
					}
					return ch, true
				}
			}
			return Chunk{}, false
		}
		for _, c := range list {
			for _, addr := range []uint64{c.addr, c.addr + 8, c.addr + 16, c.addr + 24, c.addr + c.size/2, c.addr + c.size - 8, c.addr + c.size - 1} {
				got, ok := ix.Find(addr)
				want, wok := find(addr)
				if ok != wok || got.Addr != want.Addr || got.Size != want.Size {
					t.Fatalf("seed %d: Find(%#x) = %#x+%#x %v, want %#x+%#x %v", seed, addr, got.Addr, got.Size, ok, want.Addr, want.Size, wok)
				}
			}
		}
		n := 0
		ix.ForEach(func(c Chunk) bool {
			for n < len(list) && !list[n].alloc {
				n++
			}
			if c.Addr != list[n].addr || c.Size != list[n].size {
				t.Fatalf("seed %d: ForEach gave %#x+%#x, want %#x+%#x", seed, c.Addr, c.Size, list[n].addr, list[n].size)
			}
			n++
			return true
		})
		m := ix.NewMarks()
		for i, c := range list {
			if c.alloc {
				m.Set(Chunk{Addr: c.addr, Size: c.size}, uint8(i%4))
			}
		}
		for i, c := range list {
			if c.alloc {
				if v := m.Get(Chunk{Addr: c.addr, Size: c.size}); v != uint8(i%4) {
					t.Fatalf("seed %d: mark of %#x is %d, set %d", seed, c.addr, v, i%4)
				}
			}
		}
	}
}

// A start within 32 bytes of the one before (only a hostile core can
// describe one) is dropped, not given the slot's bits of its neighbour.
func TestSpanDropsAShortChunk(t *testing.T) {
	lo := uint64(0x10000)
	ix := &Index{heaps: [][2]uint64{{lo, lo + 0x100}}}
	ix.index([]uint64{lo | 1, (lo + 16) | 1, (lo + 64) | 1})
	c, ok := ix.Find(lo + 40)
	if !ok || c.Addr != lo || c.Size != 64 {
		t.Fatalf("Find = %#x+%#x %v, want the first chunk, 64 bytes", c.Addr, c.Size, ok)
	}
}
