package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRunOrderAndFirstError(t *testing.T) {
	for _, jobs := range []int{1, 2, 7, 16} {
		out := make([]int, 1000)
		if err := Run(context.Background(), jobs, len(out), func(i int) error { out[i] = i * i; return nil }); err != nil {
			t.Fatal(err)
		}
		for i, v := range out {
			if v != i*i {
				t.Fatalf("jobs %d: out[%d] = %d", jobs, i, v)
			}
		}
		err := Run(context.Background(), jobs, 1000, func(i int) error {
			if i%100 == 37 {
				return fmt.Errorf("piece %d", i)
			}
			return nil
		})
		if err == nil || err.Error() != "piece 37" {
			t.Fatalf("jobs %d: error %v, want the lowest piece's", jobs, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, 4, 10, func(int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// The workers run below arenactl's priority, but for the caller's own
// goroutine, which works at its own and keeps it.
func TestRunLowersWorkersOnly(t *testing.T) {
	mine, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	lowered := mine - Nice
	if 20-lowered > 19 {
		lowered = 1
	}
	prio := make([]int, 64)
	if err := Run(context.Background(), 4, len(prio), func(i int) error {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		prio[i] = p
		time.Sleep(time.Millisecond) // so that every worker takes pieces
		return err
	}); err != nil {
		t.Fatal(err)
	}
	low := 0
	for i, p := range prio {
		switch p {
		case lowered:
			low++
		case mine:
		default:
			t.Errorf("piece %d ran at priority %d, want %d or the caller's %d", i, p, lowered, mine)
		}
	}
	if low == 0 {
		t.Error("no piece ran on a lowered worker")
	}
	if now, _ := unix.Getpriority(unix.PRIO_PROCESS, 0); now != mine {
		t.Errorf("caller's priority changed: %d -> %d", mine, now)
	}
}

func TestResolve(t *testing.T) {
	if Resolve(0) != Default() || Resolve(3) != 3 || Resolve(100000) != Max || Default() < 1 {
		t.Fatal("Resolve")
	}
}

// InOrder hands the results on in order at every worker count, never holds
// more than ahead of them, and stops on the first error of either side.
func TestInOrder(t *testing.T) {
	for _, jobs := range []int{1, 2, 7, 16} {
		for _, ahead := range []int{1, 3, 64} {
			var (
				mu            sync.Mutex
				held, maxHeld int
				got           []int
			)
			err := InOrder(context.Background(), jobs, 500, ahead, func(i int) (int, error) {
				mu.Lock()
				held++
				maxHeld = max(maxHeld, held)
				mu.Unlock()
				if i%7 == 0 {
					time.Sleep(50 * time.Microsecond) // out of step
				}
				return i * i, nil
			}, func(i, v int) error {
				mu.Lock()
				held--
				mu.Unlock()
				if v != i*i {
					return fmt.Errorf("piece %d got %d", i, v)
				}
				got = append(got, i)
				return nil
			})
			if err != nil {
				t.Fatalf("jobs %d ahead %d: %v", jobs, ahead, err)
			}
			if len(got) != 500 || got[0] != 0 || got[499] != 499 {
				t.Fatalf("jobs %d ahead %d: consumed %d pieces", jobs, ahead, len(got))
			}
			if jobs > 1 && maxHeld > ahead+1 { // the one being consumed too
				t.Errorf("jobs %d ahead %d: %d results held at once", jobs, ahead, maxHeld)
			}
		}
		err := InOrder(context.Background(), jobs, 1000, 4, func(i int) (int, error) {
			if i == 300 {
				return 0, fmt.Errorf("piece %d", i)
			}
			return i, nil
		}, func(i, v int) error { return nil })
		if err == nil || err.Error() != "piece 300" {
			t.Fatalf("jobs %d: producer's error %v", jobs, err)
		}
		consumed := 0
		err = InOrder(context.Background(), jobs, 1000, 4, func(i int) (int, error) { return i, nil }, func(i, v int) error {
			consumed++
			if i == 10 {
				return errors.New("consumer")
			}
			return nil
		})
		if err == nil || err.Error() != "consumer" || consumed != 11 {
			t.Fatalf("jobs %d: consumer's error %v after %d", jobs, err, consumed)
		}
	}
}
