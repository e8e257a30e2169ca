package sampler

import "github.com/arenactl/arenactl/internal/arch"

// ringMachine: the hooks are x86_64 code (blob/sampler.c, built by
// blob/gen.sh); an aarch64 arenactl places them in no process (live
// aarch64 targets are refused, issue 31), so it reads no record, and a
// record's callee-saved registers are none it knows.
var ringMachine = arch.ARM64

var ringRegs = [...]int{}
