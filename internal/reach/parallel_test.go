package reach

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/testutil"
)

// visitLog is what a scan hands its visitors, in a form that compares:
// per chunk whether it is leaked and its head, and the leaked chunks in
// the order they came (a report's leak examples are the first ones), all
// to the first worker's visitor, after every reached chunk.
type visitLog struct {
	mu     sync.Mutex
	per    map[uint64]string
	leaked []uint64
}

func logVisits(t *testing.T) (*visitLog, func(int) Visitor) {
	l := &visitLog{per: map[uint64]string{}}
	return l, func(worker int) Visitor {
		return func(c chunks.Chunk, leaked bool, head []byte) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, ok := l.per[c.Addr]; ok {
				t.Errorf("chunk %#x handed to the visitor twice", c.Addr)
			}
			l.per[c.Addr] = fmt.Sprintf("%v %x", leaked, head)
			if leaked {
				if worker != 0 {
					t.Errorf("leaked chunk %#x handed to worker %d's visitor", c.Addr, worker)
				}
				l.leaked = append(l.leaked, c.Addr)
			} else if len(l.leaked) > 0 {
				t.Errorf("reached chunk %#x handed on after a leaked one", c.Addr)
			}
		}
	}
}

// ScanJobs gives every chunk Scan's class at any worker count, over the
// committed cores, with the same counts, bytes read and visits (the
// leaked chunks in the same order).
func TestScanJobsAgreesWithScan(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testutil.RepoRoot(t), "testdata", "cores", "arenas-*.core.zst"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no core fixtures: %v", err)
	}
	if testing.Short() {
		paths = paths[:1] // CI's run under the race detector
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h, ix := openIndexed(t, path)
			roots := Roots(h.T, ix, 0)
			wantLog, visitOf := logVisits(t)
			want, err := Scan(context.Background(), h.T, ix, roots, visitOf(0))
			if err != nil {
				t.Fatal(err)
			}
			for _, jobs := range []int{1, 2, 7, 16} {
				gotLog, visitOf := logVisits(t)
				got, err := ScanJobs(context.Background(), jobs, h.T, ix, roots, visitOf)
				if err != nil {
					t.Fatal(err)
				}
				if got.Count != want.Count || got.Bytes != want.Bytes || got.RootBytes != want.RootBytes || got.ChunkBytes != want.ChunkBytes {
					t.Errorf("jobs %d: counts %v bytes %v read %d+%d; Scan: %v %v %d+%d", jobs, got.Count, got.Bytes, got.RootBytes, got.ChunkBytes,
						want.Count, want.Bytes, want.RootBytes, want.ChunkBytes)
				}
				ix.ForEach(func(c chunks.Chunk) bool {
					if g, w := got.Class(c), want.Class(c); g != w {
						t.Errorf("jobs %d: chunk %#x: %v, Scan says %v", jobs, c.Addr, g, w)
					}
					if g, w := gotLog.per[c.Addr], wantLog.per[c.Addr]; g != w {
						t.Errorf("jobs %d: chunk %#x visited as %q, by Scan as %q", jobs, c.Addr, g, w)
					}
					return true
				})
				if fmt.Sprint(gotLog.leaked) != fmt.Sprint(wantLog.leaked) {
					t.Errorf("jobs %d: leaked chunks visited in another order", jobs)
				}
			}
		})
	}
}

// BenchmarkScanJobs scans the core ARENACTL_SCAN_CORE names (e.g. a
// snapshot of testdata/ptrdense.c, every word a pointer into the heap) at
// 1, 2 and ARENACTL_SCAN_JOBS workers, and reports the chunk bytes read per
// second of wall time and per second of CPU time (user and system, the
// whole process): on a machine shared with other work the second is the
// steadier figure.
func BenchmarkScanJobs(b *testing.B) {
	path := os.Getenv("ARENACTL_SCAN_CORE")
	if path == "" {
		b.Skip("ARENACTL_SCAN_CORE names no core")
	}
	c, err := core.OpenTarget(path, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	h, err := heap.OpenCore(c, heap.Options{NoLibcFile: true})
	if err != nil {
		b.Fatal(err)
	}
	ix, err := chunks.Build(h, nil)
	if err != nil {
		b.Fatal(err)
	}
	roots := Roots(h.T, ix, 0)
	counts := []int{1, 2}
	if n, err := strconv.Atoi(os.Getenv("ARENACTL_SCAN_JOBS")); err == nil && n > 2 {
		counts = append(counts, n)
	}
	for _, jobs := range counts {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			var read uint64
			cpu0 := cpuTime()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				res, err := ScanJobs(context.Background(), jobs, h.T, ix, roots, nil)
				if err != nil {
					b.Fatal(err)
				}
				read += res.ChunkBytes
			}
			wall, cpu := time.Since(start), cpuTime()-cpu0
			b.ReportMetric(float64(read)/(1<<20)/wall.Seconds(), "MiB/s")
			b.ReportMetric(float64(read)/(1<<20)/cpu.Seconds(), "MiB/cpu-s")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
