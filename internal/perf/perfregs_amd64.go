package perf

import (
	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
)

// regsMask is x86_64's: BX 1, BP 6, SP 7, IP 8, R12..R15 20..23 in the
// kernel's perf_regs numbering.
var regsMask = arch.AMD64.Perf.Mask

// sampleRegs are where those registers go in debuggee.Regs, in the order a
// sample lists them.
var sampleRegs = [...]int{debuggee.RegRBX, debuggee.RegRBP, debuggee.RegRSP, debuggee.RegRIP,
	debuggee.RegR12, debuggee.RegR13, debuggee.RegR14, debuggee.RegR15}

const haveSampleRegs = true
