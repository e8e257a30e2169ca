package sampler

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/live"
)

// hooksFor refuses every process: the hooks are x86_64 code
// (blob/sampler.c, built by blob/gen.sh), and a live process of an
// aarch64 arenactl is aarch64's. Refused before anything is read or
// placed (exit 18).
func hooksFor(t *live.Target) error {
	return fmt.Errorf("process %d: leaks' sampler has no aarch64 hooks yet (issue 31): %w", t.Pid, errkind.ErrArch)
}

// ringMachine: an aarch64 arenactl places the hooks in no process
// (hooksFor), so it reads no record, and a record's callee-saved
// registers are none it knows.
var ringMachine = arch.ARM64

var ringRegs = [...]int{}
