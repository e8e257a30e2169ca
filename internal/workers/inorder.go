package workers

import (
	"context"
	"sync"
)

// InOrder calls produce(i) for every i in [0, n) on up to jobs workers, as
// Run does, and consume(i, v) with each result on the calling goroutine, in
// order of i, while later ones are produced: work whose results must be
// handed on in order (a visitor that counts in address order) is spread
// over the workers, and only the handing on is serial. At most ahead
// results (at least one) are being produced or waiting at once, besides
// the one being consumed, which bounds the memory they hold: a worker
// whose piece is that far ahead of the consumer waits. The error returned is the first the consumer met: consume's, or
// the producers' (Run's) once the piece it waits for will never come.
// With one worker each piece is produced and consumed in turn, as a serial
// loop would.
func InOrder[T any](ctx context.Context, jobs, n, ahead int, produce func(i int) (T, error), consume func(i int, v T) error) error {
	if Resolve(jobs) <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := produce(i)
			if err != nil {
				return err
			}
			if err := consume(i, v); err != nil {
				return err
			}
		}
		return nil
	}
	ahead = max(ahead, 1)
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		next    int  // the piece the consumer waits for
		stop    bool // the consumer gave up: producers return
		ran     bool // Run returned
		runErr  error
		vals    = make([]T, ahead) // piece i's result at i%ahead
		ready   = make([]bool, ahead)
		runDone = make(chan struct{})
	)
	go func() {
		defer close(runDone)
		err := Run(ctx, jobs, n, func(i int) error {
			mu.Lock()
			for i >= next+ahead && !stop {
				cond.Wait()
			}
			if stop { // not an error of its own: the one that stopped it is
				mu.Unlock()
				return nil
			}
			mu.Unlock()
			v, err := produce(i)
			mu.Lock()
			if err != nil {
				// The pieces after it will not be consumed: the
				// workers waiting for room must not wait for ever.
				stop = true
				cond.Broadcast()
				mu.Unlock()
				return err
			}
			vals[i%ahead], ready[i%ahead] = v, true
			cond.Broadcast()
			mu.Unlock()
			return nil
		})
		mu.Lock()
		ran, runErr = true, err
		cond.Broadcast()
		mu.Unlock()
	}()
	finish := func(err error) error {
		mu.Lock()
		stop = true
		cond.Broadcast()
		mu.Unlock()
		<-runDone
		return err
	}
	var zero T
	for i := 0; i < n; i++ {
		mu.Lock()
		for !ready[i%ahead] && !ran {
			cond.Wait()
		}
		if !ready[i%ahead] { // Run returned without it: a piece failed
			err := runErr
			mu.Unlock()
			return finish(err)
		}
		v := vals[i%ahead]
		vals[i%ahead], ready[i%ahead] = zero, false
		next = i + 1
		cond.Broadcast()
		mu.Unlock()
		if err := consume(i, v); err != nil {
			return finish(err)
		}
	}
	return finish(nil)
}
