// Package workers owns how arenactl spends the machine's CPUs on its own
// work: how many workers a walk or a scan may use by default, the lowered
// priority they run at, and the loop that hands them independent pieces of
// work and gathers the results in order, so that output never depends on
// the worker count.
//
// arenactl runs beside the server it looks at (docs/safety.md; rule 1 of the
// project): the server's CPUs are the server's. So by
// default a walk uses at most half of the CPUs this process may run on
// (runtime.GOMAXPROCS, which since Go 1.25 follows the cgroup's CPU quota
// as well as the affinity mask), and every worker thread but the caller's
// runs at nice 10 above arenactl's own. The thread that holds a target's
// thread or stops it for an image is never a lowered worker: it keeps
// arenactl's priority, so the workers cannot slow a stop.
package workers

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Nice is how much lower than arenactl's own priority a worker thread
// runs (setpriority(2) nice units).
const Nice = 10

// Max is the most workers --jobs accepts: more than this would only add
// threads that wait on the same memory bandwidth.
const Max = 256

// Default is the worker count when --jobs is not given: half the CPUs
// arenactl may use, at least one.
func Default() int {
	n := runtime.GOMAXPROCS(0) / 2
	if n < 1 {
		n = 1
	}
	return n
}

// Resolve turns a --jobs value into a worker count: 0 means Default.
func Resolve(jobs int) int {
	if jobs <= 0 {
		return Default()
	}
	if jobs > Max {
		return Max
	}
	return jobs
}

// lower drops the calling goroutine's OS thread to Nice below its current
// priority. The goroutine must hold the thread (runtime.LockOSThread) and
// never release it: a locked goroutine that exits takes its thread with it,
// so the lowered priority never leaks into another goroutine.
func lower() {
	tid := unix.Gettid()
	old, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		return
	}
	// Getpriority returns 20-nice.
	nice := 20 - old + Nice
	if nice > 19 {
		nice = 19
	}
	_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
}

// Run calls fn(i) for every i in [0, n) on up to jobs workers (jobs as
// Resolve takes it) and returns the error of the lowest i that failed, or
// ctx's error; after a failure no new piece is started. fn must put its
// result where index i says, so the caller's output is the same for any
// worker count. The calling goroutine is one of the workers, at its own
// priority; the others run at Nice below it. With one worker (or one
// piece) fn runs on the calling goroutine alone, as a serial loop would.
func Run(ctx context.Context, jobs, n int, fn func(i int) error) error {
	jobs = Resolve(jobs)
	if jobs > n {
		jobs = n
	}
	if jobs <= 1 {
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next   atomic.Int64
		failed atomic.Bool
		mu     sync.Mutex
		firstI = n
		firstE error
		wg     sync.WaitGroup
	)
	work := func() {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			err := ctx.Err()
			if err == nil {
				err = fn(i)
			}
			if err != nil {
				mu.Lock()
				if i < firstI {
					firstI, firstE = i, err
				}
				mu.Unlock()
				failed.Store(true)
				return
			}
		}
	}
	for w := 1; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Never unlocked: the thread ends with the goroutine.
			runtime.LockOSThread()
			lower()
			work()
		}()
	}
	// The caller is a worker too, at its own priority: on a machine whose
	// CPUs the server keeps busy, the lowered workers may get next to
	// nothing, and the work then goes at least at a serial walk's pace
	// instead of stalling (a busy heap's pre-flight took minutes).
	work()
	wg.Wait()
	return firstE
}
