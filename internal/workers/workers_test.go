package workers

import (
	"context"
	"errors"
	"fmt"
	"testing"

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

// The workers run below arenactl's priority; the caller's thread keeps its own.
func TestRunLowersWorkersOnly(t *testing.T) {
	mine, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	prio := make([]int, 8)
	if err := Run(context.Background(), 4, len(prio), func(i int) error {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		prio[i] = p
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i, p := range prio {
		want := mine - Nice
		if 20-want > 19 {
			want = 1
		}
		if p != want {
			t.Errorf("piece %d ran at priority %d, want %d (caller %d)", i, p, want, mine)
		}
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
