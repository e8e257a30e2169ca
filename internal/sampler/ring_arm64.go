package sampler

import (
	"debug/elf"
	_ "embed"

	"github.com/arenactl/arenactl/internal/arch"
)

// image is the sampler built for aarch64 (blob/gen.sh; symbols_arm64.go
// has its offsets).
//
//go:embed sampler_arm64.bin
var image []byte

// ringMachine is the machine whose code the hooks are (blob/sampler.c,
// built for aarch64 by blob/gen.sh), and so whose registers a record holds.
var ringMachine = arch.ARM64

// jumpSlot is the relocation of a PLT's GOT entry on this machine.
const jumpSlot = uint32(elf.R_AARCH64_JUMP_SLOT)

// ringRegs are the registers a record holds after its pc and sp, in the
// order the capture stubs store them (blob/sampler.c, struct regs:
// x29, x30, x19..x22), as debuggee.Regs words: on aarch64 a register's
// word in pr_reg is its DWARF number (arch.ARM64). The unwinder starts
// from pc (the return address, x30), sp, x29 and x30.
var ringRegs = [...]int{arch.ARM64FP, arch.ARM64LR, arch.ARM64X19, arch.ARM64X19 + 1, arch.ARM64X19 + 2, arch.ARM64X19 + 3}

// directJumps leaves the hooks' jumps through their slots as they are
// (adrp, ldr, br x16): a direct branch reaches 128 MiB, and the slot's
// load is one instruction of the fast path.
func directJumps(img []byte, base uint64, real map[string]uint64) {}
