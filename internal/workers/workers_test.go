package workers

import (
	"context"
	"errors"
	"fmt"
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
