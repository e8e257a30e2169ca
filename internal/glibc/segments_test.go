package glibc

import (
	"encoding/binary"
	"fmt"
	"github.com/arenactl/arenactl/internal/glibc/memio"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/arenactl/arenactl/internal/maps"
)

// flat is memory made of one run of bytes at base.
type flat struct {
	base uint64
	b    []byte
}

func (f flat) ReadAt(p []byte, addr uint64) (int, error) {
	if addr < f.base || addr-f.base >= uint64(len(f.b)) {
		return 0, fmt.Errorf("reading %#x: not mapped", addr)
	}
	n := copy(p, f.b[addr-f.base:])
	if n < len(p) {
		return n, fmt.Errorf("reading %#x: past the end", addr+uint64(n))
	}
	return n, nil
}

func (flat) ReadsInParallel() {}

// A long heap walked in segments, cut at its free chunks, gives what the
// serial chunk walk gives: the same counts, the same damage at the same
// chunk, the same stop at a fencepost; also when a free list holds an
// address that is no chunk (a cut the chain does not arrive at: the walk
// goes on alone from where it stopped), whatever the number of workers.
func TestChunksInSegmentsAsSerial(t *testing.T) {
	const base = 0x7f0000000000
	defer SetSegMin(4 << 10)()
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		bend func(mem []byte, chunks []uint64, free, fast *memio.AddrSet) // damage to make
	}{
		{"clean", nil},
		{"free-list addresses inside chunks", func(mem []byte, chunks []uint64, free, fast *memio.AddrSet) {
			// The only chunk starts the lists give are not: every cut
			// is one the chain does not arrive at.
			free.Clear()
			fast.Clear()
			for _, i := range []int{len(chunks) / 3, len(chunks) / 2, 2 * len(chunks) / 3} {
				free.Add(chunks[i] + 16) // the user data of an in-use chunk
			}
		}},
		{"some free-list addresses inside chunks", func(mem []byte, chunks []uint64, free, _ *memio.AddrSet) {
			for i := 5; i < len(chunks); i += 50 {
				free.Add(chunks[i] + 32)
			}
		}},
		{"a size that does not fit", func(mem []byte, chunks []uint64, _, _ *memio.AddrSet) {
			binary.LittleEndian.PutUint64(mem[chunks[len(chunks)*3/5]-base+8:], 0x4141414141414141)
		}},
		{"a misaligned size", func(mem []byte, chunks []uint64, _, _ *memio.AddrSet) {
			binary.LittleEndian.PutUint64(mem[chunks[len(chunks)/4]-base+8:], 0x88|prevInuse)
		}},
		{"a fencepost", func(mem []byte, chunks []uint64, _, _ *memio.AddrSet) {
			binary.LittleEndian.PutUint64(mem[chunks[len(chunks)/2]-base+8:], 0x10|prevInuse)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Chunks of 32 to 512 bytes over 1 MiB, their user data
			// random; every third free in a bin, every seventh in a
			// fastbin, every eleventh in a tcache.
			mem := make([]byte, 1<<20)
			for i := range mem {
				mem[i] = byte(rnd.Uint32())
			}
			free, fast, cached := memio.NewAddrSet(), memio.NewAddrSet(), memio.NewAddrSet()
			var chunks []uint64
			p := uint64(base)
			for p+512+16 < base+uint64(len(mem)) {
				sz := uint64(32 + 16*rnd.IntN(31))
				binary.LittleEndian.PutUint64(mem[p-base+8:], sz|prevInuse)
				switch n := len(chunks); {
				case n%3 == 0:
					free.Add(p)
				case n%7 == 0:
					fast.Add(p)
				case n%11 == 0:
					cached.Add(p)
				}
				chunks = append(chunks, p)
				p += sz
			}
			top := p
			binary.LittleEndian.PutUint64(mem[top-base+8:], (base+uint64(len(mem))-top)|prevInuse)
			if tc.bend != nil {
				tc.bend(mem, chunks, free, fast)
			}
			m := flat{base: base, b: mem}
			walk := func(segJobs int) (ArenaWalk, []Damage) {
				wk := &walker{mem: memio.New(m), ms: []maps.Mapping{{Start: base, End: base + uint64(len(mem)), Perms: "rw-p"}},
					free: free, fast: fast, tcached: cached, badSize: map[uint64]bool{}, segJobs: segJobs, w: &Walk{Params: Params{SbrkBase: base}}}
				aw := ArenaWalk{Addr: base, Main: true, Top: top}
				wk.chunks(&aw)
				return aw, wk.w.Damage
			}
			wantAW, wantDmg := walk(1)
			if tc.name == "clean" && (!wantAW.Walked || wantAW.InUseChunks == 0) {
				t.Fatalf("the serial walk did not walk the heap: %+v", wantAW)
			}
			for _, jobs := range []int{2, 7, 16} {
				aw, dmg := walk(jobs)
				if !reflect.DeepEqual(aw, wantAW) || !reflect.DeepEqual(dmg, wantDmg) {
					t.Errorf("%d workers: %+v %v, serially %+v %v", jobs, aw, dmg, wantAW, wantDmg)
				}
			}
		})
	}
}
