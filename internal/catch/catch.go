// Package catch owns arenactl's catching of the signals that end a run as
// Ctrl-C does, from the first moment Go code runs.
//
// Go's runtime handles every signal from its start; until a program asks
// for one with signal.Notify, a SIGQUIT, SIGABRT, or a SIGSEGV or SIGBUS
// sent by kill(2), makes it print a dump of its goroutines and exit 2
// (runtime/signal_unix.go, sighandler: the signal table's _SigThrow).
// arenactl's exit 2 is a bad command line, and a dump is not one line:
// main asked too late, after every package's initialization (milliseconds
// on a loaded machine). This package imports nothing but os/signal's
// dependencies and asks in its init, which Go runs as soon as os/signal is
// initialized (packages are initialized in the order of their import
// paths, each once its imports are: this one's path sorts before the
// heavy ones'). Main then takes over with Take. Before this init a signal
// meets Go's runtime or the kernel's default alone; nothing of the target
// has been touched then.
package catch

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals are those that end a run as Ctrl-C does: the ones users and
// supervisors stop a tool with, and every other Go's runtime would exit on
// with a dump (its sigtable: throw). The fault signals are caught only
// when kill(2) sends them; the kernel's own still crash, as they must.
var Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGABRT,
	syscall.SIGILL, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSTKFLT, syscall.SIGSYS}

// early receives what comes before main takes over; one is enough to know.
var early = make(chan os.Signal, 1)

func init() {
	signal.Notify(early, Signals...)
}

// Take ends the early catch, once the caller catches Signals itself (it
// must have called signal.Notify for them already, so that none is missed
// between the two), and says whether one came before: the run must then
// end as if interrupted at once.
func Take() bool {
	signal.Stop(early)
	select {
	case <-early:
		return true
	default:
		return false
	}
}
