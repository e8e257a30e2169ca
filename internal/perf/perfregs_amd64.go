package perf

import (
	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/target"
)

// regsMask is x86_64's: BX 1, BP 6, SP 7, IP 8, R12..R15 20..23 in the
// kernel's perf_regs numbering.
var regsMask = arch.AMD64.Perf.Mask

// sampleRegs are where those registers go in target.Regs, in the order a
// sample lists them.
var sampleRegs = [...]int{target.RegRBX, target.RegRBP, target.RegRSP, target.RegRIP,
	target.RegR12, target.RegR13, target.RegR14, target.RegR15}

const haveSampleRegs = true
