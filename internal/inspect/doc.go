// Package inspect owns arenactl's use cases, each one flow from a target to
// a report: info by an injected malloc_info, info by a read-only walk (live,
// frozen or not), info of a core, trim and its dry run, a snapshot, a watch
// (those reports sampled over time, each diagnosed and compared with the one
// before, until the process exits or is no longer the same), and the
// pre-flight checks every injection makes. cmd/arenactl parses flags, calls
// one function here and renders what it returns; another front end (an
// exporter, a profiler) calls the same functions.
//
// Errors describe conditions, wrapped with the process or file they concern,
// and match their kind of package errkind; what to do about them (hints,
// exit codes) is the caller's to say.
package inspect

import (
	"time"

	"github.com/arenactl/arenactl/internal/diagnose"
	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/procfs"
)

// Options are what the live use cases share.
type Options struct {
	// Timeout bounds the search for a safe thread, an injected call, and
	// stopping every thread for a freeze.
	Timeout time.Duration
	// Tid, when not 0, is the one thread to borrow.
	Tid int
	// DebugDirs hold detached debug files by build-id, for main_arena and
	// mp_ by symbol.
	DebugDirs []string
	// NoHeapCheck skips the pre-flight walk of the free lists before an
	// injection: on a large, busy heap it costs CPU (up to about a second on
	// 2 CPUs shared with 8 allocating threads), at the price of not catching
	// damage that would make glibc abort.
	NoHeapCheck bool
	// MaxMemory, when not 0, is the most memory a walk or scan may take
	// (--max-memory): one whose estimate is larger is refused before the
	// process is touched (budget.Check), as is one larger than the machine
	// or arenactl's cgroup can spare.
	MaxMemory uint64
	// Jobs is how many workers a walk may spread its arenas over and a scan
	// its marking, as workers.Resolve takes it (0: its default). The thread
	// that borrows or stops the target is never one of them.
	Jobs int
	// Note receives what an injection found of earlier runs' leftovers in
	// the target (call sites, buffers, FILEs) and what it did with them;
	// nil drops the notes.
	Note func(string)
	// NoResidency skips reading which free pages and mmapped chunks are
	// resident (report.Residency, for the RSS waterfall): a use case that
	// wants the walk's totals only (leaks' in-use, the exporter's scrape)
	// reads no page map of a heap that may be tens of GiB.
	NoResidency bool
	// Same, when its Start is not 0, is the process the pid must still
	// name (watch's, from its first sample): a later process given the pid
	// is refused as the process gone, once its /proc directory is held, so
	// that it is never read in its place (Info, ReadOnly and Held).
	Same procfs.Identity
	// Env, when not nil, is given what the diagnosis needs of the process
	// beyond its report (diagnose.Env), read through its /proc directory
	// while Info or ReadOnly holds it: never of a later process given its
	// pid, as a read by pid after the report could be.
	Env *diagnose.Env
}

// ErrInterrupted: a signal (context cancellation) ended the run; the target
// was restored and released before it returned. It is errkind's
// ErrInterrupted, saying what became of the target.
var ErrInterrupted error = interrupted{}

type interrupted struct{}

func (interrupted) Error() string        { return "interrupted: the target was restored and released" }
func (interrupted) Is(target error) bool { return target == errkind.ErrInterrupted }
