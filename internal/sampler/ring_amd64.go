package sampler

import (
	"debug/elf"
	_ "embed"
	"encoding/binary"
	"slices"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
)

// image is the sampler built for x86_64 (blob/gen.sh; symbols_amd64.go
// has its offsets).
//
//go:embed sampler.bin
var image []byte

// ringMachine is the machine whose code the hooks are (blob/sampler.c,
// built for x86_64 by blob/gen.sh), and so whose registers a record holds.
var ringMachine = arch.AMD64

// jumpSlot is the relocation of a PLT's GOT entry on this machine.
const jumpSlot = uint32(elf.R_X86_64_JMP_SLOT)

// ringRegs are the callee-saved registers a record holds after its pc and
// sp, in the order the hooks' entry pushes them (blob/sampler.c, struct
// record's rbx, rbp, r12..r15), as debuggee.Regs words.
var ringRegs = [...]int{debuggee.RegRBX, debuggee.RegRBP, debuggee.RegR12, debuggee.RegR13, debuggee.RegR14, debuggee.RegR15}

// directJumps turns each hook's jump on to the real function, an indirect
// jump through its slot (jmp *r_NAME(%rip): ff 25 disp32), into a direct
// one (jmp rel32, then a nop) when the function is within reach: no load
// and no indirect branch on every call. Out of reach, the slot stays in use.
func directJumps(img []byte, base uint64, real map[string]uint64) {
	for name, h := range hooked {
		fn, ok := real[name]
		if !ok {
			continue
		}
		end := hookEnds[slices.Index(hookEnds, h.hook)+1]
		for at := h.hook; at+6 <= end; at++ {
			if img[at] != 0xff || img[at+1] != 0x25 {
				continue
			}
			disp := int64(int32(binary.LittleEndian.Uint32(img[at+2:])))
			if uint64(int64(at+6)+disp) != h.real {
				continue
			}
			rel := int64(fn) - int64(base+at+5)
			if rel != int64(int32(rel)) {
				break
			}
			img[at] = 0xe9
			binary.LittleEndian.PutUint32(img[at+1:], uint32(int32(rel)))
			img[at+5] = 0x90
		}
	}
}
