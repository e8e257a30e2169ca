package live

import (
	"context"
	"time"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/procfs"
)

// What only a live process can do, one interface per power, so that a use
// case names the one it needs and no more: read while it runs (Observed),
// stop every thread (Freezer), make a copy-on-write image (Imager), borrow
// a thread to run calls in (Borrower). debuggee.Target is what every target
// gives, a core's as much as a process's; these are what a core never
// has (delve's pkg/proc keeps its Process apart from what only some
// targets do in the same way). *Target has them all; which of them a use
// case may use still depends on how the target was opened (OpenObserved:
// none but Observed).

// Observed is a live process read while it runs: its mappings read again,
// its pages told apart by whether they hold data, and an error explained
// by the process exiting or replacing its program meanwhile.
type Observed interface {
	debuggee.Target
	// Refresh re-reads the mappings with their smaps counters;
	// RefreshRanges without them.
	Refresh() error
	RefreshRanges() error
	DataRuns(start, end uint64, fn func(start, end uint64, data bool)) error
	Explain(err error) error
	// Proc is its /proc directory, held: what is read there is never a
	// later process's given its pid.
	Proc() *procfs.Proc
}

// Freezer stops every thread of the process for a read.
type Freezer interface {
	Observed
	Freeze(ctx context.Context, timeout time.Duration) (*Frozen, error)
}

// Imager makes a copy-on-write image of the process, read while it runs on.
type Imager interface {
	Observed
	Image(ctx context.Context, timeout time.Duration, leaveOut ...maps.Range) (*Image, error)
}

// Borrower borrows one thread that is safe to borrow, to call functions of
// the process's in it.
type Borrower interface {
	Observed
	Hijack(ctx context.Context, opts HijackOptions) (*Session, error)
}

var (
	_ Freezer  = (*Target)(nil)
	_ Imager   = (*Target)(nil)
	_ Borrower = (*Target)(nil)
)
