package budget

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

var keep [][]byte

// A session's soft limit stays above what it holds: the live heap plus
// Apply's share, followed after each collection as the live heap grows.
// Without Hold the limit is the share alone, below the live heap here,
// and every allocation found the collector at its limit.
func TestHoldFollowsLiveHeap(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer func() { session.Lock(); session.held = false; session.Unlock(); keep = nil }()
	Apply(Base, 1)
	share := session.share
	if got := debug.SetMemoryLimit(-1); uint64(got) != share {
		t.Fatalf("after Apply the limit is %d, want the share %d", got, share)
	}
	grow := func() {
		for i := 0; i < 8; i++ {
			keep = append(keep, make([]byte, 8<<20))
			for j := range keep[len(keep)-1] {
				keep[len(keep)-1][j] = 1 // touch: the pages are the live heap's
			}
		}
	}
	grow() // 64 MiB held: above the share
	runtime.GC()
	Hold()
	if got := uint64(debug.SetMemoryLimit(-1)); got < 64<<20+share {
		t.Fatalf("after Hold the limit is %d MiB, want at least 64 MiB held + %d MiB", got>>20, share>>20)
	}
	grow() // 128 MiB held
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if got := uint64(debug.SetMemoryLimit(-1)); got >= 128<<20+share {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the limit stayed at %d MiB with 128 MiB held", got>>20)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
