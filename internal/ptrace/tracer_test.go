package ptrace

import (
	"fmt"
	"os"
	"testing"
)

// The tracer thread must be one the runtime retires when close ends its
// goroutine: never the process's main thread. On the main thread close
// waited a whole second for an exit that never came (info and trim took
// 1.2 s instead of 0.2 s about two runs in five), and the kernel kept
// whatever the tracer still traced.
func TestTracerThreadIsRetired(t *testing.T) {
	for i := 0; i < 100; i++ {
		tr := newTracer()
		if tr.tid == os.Getpid() {
			t.Fatalf("round %d: the tracer runs on the main thread", i)
		}
		tr.close()
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tr.tid)); err == nil {
			t.Fatalf("round %d: tracer thread %d still alive after close", i, tr.tid)
		}
	}
}
