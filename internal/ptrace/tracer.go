package ptrace

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// tracer runs every ptrace request on one OS thread. The kernel records the
// attaching thread as the tracer, and requests from any other thread fail
// with ESRCH, so goroutines must never issue ptrace calls themselves.
type tracer struct {
	work chan func()
	quit chan struct{}
	// stuck is set while the tracer thread is inside a request that a
	// bounded call gave up on; every later request fails at once instead
	// of queueing behind it.
	stuck atomic.Bool
	tid   int // the tracer thread
}

var errTracerStuck = errors.New("the tracer thread is still blocked in an abandoned ptrace request")

func newTracer() *tracer {
	t := &tracer{work: make(chan func()), quit: make(chan struct{})}
	ready := make(chan struct{})
	go t.serve(ready)
	<-ready
	return t
}

// serve is the tracer thread's loop; ready is closed once t.tid is set.
func (t *tracer) serve(ready chan struct{}) {
	runtime.LockOSThread()
	// Never unlocked: when this goroutine returns, the runtime retires
	// the thread, and with it any leftover tracee relationship.
	if tid := unix.Gettid(); tid == unix.Getpid() {
		// The process's main thread is the one the runtime never retires
		// (runtime.LockOSThread): a tracer there would outlive close, which
		// then waited its whole second for it, and the tracees it forgot
		// would stay ours. While this goroutine holds the main thread, the
		// next one cannot start on it.
		go t.serve(ready)
		<-ready
		runtime.UnlockOSThread()
		return
	}
	t.tid = unix.Gettid()
	close(ready)
	for {
		select {
		case f := <-t.work:
			f()
		case <-t.quit:
			return
		}
	}
}

// do runs f on the tracer thread and waits for it. f must not block in the
// kernel for long: requests that can (PTRACE_SEIZE) go through doBounded.
func (t *tracer) do(f func() error) error {
	if t.stuck.Load() {
		return errTracerStuck
	}
	errc := make(chan error, 1)
	t.work <- func() { errc <- f() }
	return <-errc
}

// doBounded runs f on the tracer thread like do, but gives up waiting at
// b's deadline or cancellation, and calls idle every couple of
// milliseconds meanwhile (from the calling goroutine, not the tracer
// thread). A request given up on still runs to its end on the tracer
// thread; late is then called there with its result, and until then every
// other request fails with errTracerStuck.
func (t *tracer) doBounded(f func() error, b Bound, idle func(), late func(error)) (err error, gaveUp bool) {
	if t.stuck.Load() {
		return errTracerStuck, false
	}
	var (
		mu          sync.Mutex
		done, given bool
	)
	errc := make(chan error, 1)
	t.work <- func() {
		err := f()
		mu.Lock()
		if given {
			mu.Unlock()
			late(err)
			t.stuck.Store(false)
			return
		}
		done = true
		mu.Unlock()
		errc <- err
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var expire <-chan time.Time
	if !b.Deadline.IsZero() {
		timer := time.NewTimer(time.Until(b.Deadline))
		defer timer.Stop()
		expire = timer.C
	}
	giveUp := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return false
		}
		given = true
		t.stuck.Store(true)
		return true
	}
	for {
		select {
		case err := <-errc:
			return err, false
		case <-tick.C:
			idle()
			continue
		case <-expire:
		case <-b.Cancel:
		}
		if giveUp() {
			return nil, true
		}
		return <-errc, false
	}
}

// close retires the tracer thread and waits (a little) until it is gone:
// the kernel lets go of any tracee still attached as the thread exits,
// and a caller that opens the process again right after must not find it
// still traced by us.
func (t *tracer) close() {
	close(t.quit)
	task := fmt.Sprintf("/proc/self/task/%d", t.tid)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
		if _, err := os.Stat(task); err != nil {
			return
		}
	}
}
