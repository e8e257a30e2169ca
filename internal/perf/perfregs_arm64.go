package perf

import "github.com/arenactl/arenactl/internal/arch"

// regsMask is aarch64's: x19..x28, x29, lr, sp, pc (perf_regs 19..32).
var regsMask = arch.ARM64.Perf.Mask

// sampleRegs: target.Regs holds no aarch64 registers yet, so the sample's
// are read past and not kept (a sample has no registers, HaveRegs false).
var sampleRegs = [14]int{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

const haveSampleRegs = false
