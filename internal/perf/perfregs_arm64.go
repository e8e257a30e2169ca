package perf

import "github.com/arenactl/arenactl/internal/arch"

// regsMask is aarch64's: x19..x28, x29, lr, sp, pc (perf_regs 19..32).
var regsMask = arch.ARM64.Perf.Mask

// sampleRegs are where those registers go in debuggee.Regs, in the order a
// sample lists them: the word of pr_reg (struct user_pt_regs) that holds
// each one's DWARF number. Perf's numbering, DWARF's and user_pt_regs'
// agree on aarch64 (arch/arm64/include/uapi/asm/perf_regs.h), so these
// are 19..32; derived from arch.ARM64 rather than written, so that they
// follow its mask.
var sampleRegs = func() []int {
	out := make([]int, len(arch.ARM64.Perf.Order))
	for i, dw := range arch.ARM64.Perf.Order {
		out[i] = -1
		for w, d := range arch.ARM64.Prstatus.Words {
			if d == dw {
				out[i] = w
				break
			}
		}
	}
	return out
}()

const haveSampleRegs = true
