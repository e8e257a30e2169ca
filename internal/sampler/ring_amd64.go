package sampler

import (
	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/live"
)

// ringMachine is the machine whose code the hooks are (blob/sampler.c,
// built for x86_64 by blob/gen.sh), and so whose registers a record holds.
var ringMachine = arch.AMD64

// ringRegs are the callee-saved registers a record holds after its pc and
// sp, in the order the hooks' entry pushes them (blob/sampler.c, struct
// record's rbx, rbp, r12..r15), as debuggee.Regs words.
var ringRegs = [...]int{debuggee.RegRBX, debuggee.RegRBP, debuggee.RegR12, debuggee.RegR13, debuggee.RegR14, debuggee.RegR15}

// hooksFor: the hooks are x86_64 code, and a live process is of
// arenactl's own machine.
func hooksFor(t *live.Target) error { return nil }
