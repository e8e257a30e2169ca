package unwind

import (
	"debug/elf"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/arenactl/arenactl/internal/arch"
)

// TestMalformedCFI damages a real .eh_frame (libc's) in many ways: parsing
// and compiling rows from it never panic, whatever the parser makes of it.
func TestMalformedCFI(t *testing.T) {
	ef, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no system libc to take .eh_frame from:", err)
	}
	defer ef.Close()
	s := ef.Section(".eh_frame")
	if s == nil {
		t.Skip("libc has no .eh_frame")
	}
	orig, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	if fdes, err := parseFrameData(s.Name, orig, s.Addr); err != nil || len(fdes) < 100 {
		t.Fatalf("the intact section: %d FDEs, %v", len(fdes), err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rounds := 200
	if testing.Short() {
		rounds = 30
	}
	for round := 0; round < rounds; round++ {
		data := append([]byte(nil), orig...)
		switch round % 3 {
		case 0: // truncated anywhere
			data = data[:rng.IntN(len(data))]
		case 1: // bytes flipped
			for k := 0; k < 1+rng.IntN(64); k++ {
				data[rng.IntN(len(data))] = byte(rng.Uint32())
			}
		case 2: // a window of noise
			at := rng.IntN(len(data))
			for k := at; k < len(data) && k < at+256; k++ {
				data[k] = byte(rng.Uint32())
			}
		}
		fdes, _ := parseFrameData(s.Name, data, s.Addr)
		m := amd64Machine
		if round%2 == 1 { // aarch64's rewrite of its programs never panics either
			dropNegateRAState(fdes)
			m = arm64Machine
		}
		c := &cfi{m: m, fdes: fdes, rows: map[uint64]*row{}}
		sort.SliceStable(c.fdes, func(i, j int) bool { return c.fdes[i].Begin() < c.fdes[j].Begin() })
		for k := 0; k < 50 && len(fdes) > 0; k++ {
			f := fdes[rng.IntN(len(fdes))]
			c.compile(f.Begin() + rng.Uint64N(f.End()-f.Begin()))
		}
	}
}

// TestEvalNeverPanics runs random DWARF expressions.
func TestEvalNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var regs regSet
	for i := 0; i < nRegs; i++ {
		regs.set(i, rng.Uint64())
	}
	stack := &Stack{Addr: 0x1000, Data: make([]byte, 512)}
	cfa := uint64(0x1100)
	for i := 0; i < 20000; i++ {
		expr := make([]byte, rng.IntN(24))
		for k := range expr {
			expr[k] = byte(rng.Uint32())
		}
		eval(expr, &cfa, &regs, stack.read)
		eval(expr, nil, &regs, stack.read)
	}
	// The PLT expression ld writes: rsp + 8 + ((rip & 15) >= 11) * 8.
	plt := []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}
	for _, c := range []struct{ rip, want uint64 }{{0x1000, 0x2008}, {0x100b, 0x2010}} {
		var r regSet
		r.set(arch.AMD64RSP, 0x2000)
		r.set(arch.AMD64RIP, c.rip)
		if got, err := eval(plt, nil, &r, stack.read); err != nil || got != c.want {
			t.Errorf("PLT CFA at rip %#x: %#x, %v; want %#x", c.rip, got, err, c.want)
		}
	}
}
