package ptrace

import (
	"runtime"
)

// tracer runs every ptrace request on one OS thread. The kernel records the
// attaching thread as the tracer, and requests from any other thread fail
// with ESRCH, so goroutines must never issue ptrace calls themselves.
type tracer struct {
	work chan func()
	quit chan struct{}
}

func newTracer() *tracer {
	t := &tracer{work: make(chan func()), quit: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine returns, the runtime retires
		// the thread, and with it any leftover tracee relationship.
		close(ready)
		for {
			select {
			case f := <-t.work:
				f()
			case <-t.quit:
				return
			}
		}
	}()
	<-ready
	return t
}

// do runs f on the tracer thread and waits for it.
func (t *tracer) do(f func() error) error {
	errc := make(chan error, 1)
	t.work <- func() { errc <- f() }
	return <-errc
}

func (t *tracer) close() { close(t.quit) }
