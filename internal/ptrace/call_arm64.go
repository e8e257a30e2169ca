package ptrace

import (
	"errors"
	"fmt"

	"github.com/arenactl/arenactl/internal/errkind"
)

// Calls are not injected into aarch64 processes yet (issue 31: the
// trampoline, the signal frame with its FP/SIMD and SVE records, the
// syscall restart through NT_ARM_SYSTEM_CALL). Every way into a call site
// says so, before anything of the thread is changed.

// pageSize is the call site's page: the routines' layout (internal/arch/site)
// assumes 4 KiB pages.
const pageSize = 4096

// ErrNoCallsHere: calls cannot be injected on this machine yet.
var ErrNoCallsHere = fmt.Errorf("calls into aarch64 processes are not supported yet: %w", errkind.ErrArch)

func (th *Thread) arm() error { return fmt.Errorf("thread %d: %w", th.Tid, ErrNoCallsHere) }

func (th *Thread) park() error { return ErrNoCallsHere }

func (th *Thread) enterTrampoline() error { return ErrNoCallsHere }

func (th *Thread) trampSyscall(nr uint64, args ...uint64) (uint64, error) {
	return 0, ErrNoCallsHere
}

func (th *Thread) call(lim CallLimits, fn uint64, args []uint64) (uint64, error) {
	return 0, ErrNoCallsHere
}

// FindTrampoline: no signal trampoline is looked for on aarch64 yet.
func FindTrampoline(p *Process) (uint64, error) {
	return 0, errors.New("no signal trampoline is looked for in aarch64 processes yet")
}

// slotPC is where a site keeps the pc it puts the thread back at: after
// x0..x30 and sp, in user_pt_regs' order, the layout an aarch64 routine
// will load.
const slotPC = regsOff + 8*32
