// Command copyrate measures how fast this machine copies memory with one
// worker and with more: the ceiling of a walk or scan that reads the heap
// by copying it (pread of a core, /proc/PID/mem of an image), whatever
// arenactl does with what it copied. bench/scale/run.sh prints it beside
// its figures, so that "two workers are 1.3x faster" can be read against
// what the machine's memory allows.
//
//	copyrate N...    e.g. copyrate 1 2 8
//
// Each worker copies its share of 512 MiB through a 256 KiB buffer (a
// walk's block), five times; the best of three rounds is printed.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	total = 512 << 20
	block = 256 << 10
	loops = 5
)

func main() {
	src := make([]byte, total)
	for i := 0; i < len(src); i += 4096 {
		src[i] = byte(i) // resident before any copy is timed
	}
	var base float64
	for _, a := range os.Args[1:] {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "copyrate: %q is not a worker count\n", a)
			os.Exit(2)
		}
		best := time.Duration(1<<63 - 1)
		for range 3 {
			best = min(best, copyAll(src, n))
		}
		rate := float64(total*loops) / best.Seconds() / 1e9
		if base == 0 {
			base = rate
		}
		fmt.Printf("memory copy at %d workers: %.1f GB/s (%.2fx one worker's)\n", n, rate, rate/base)
	}
}

func copyAll(src []byte, n int) time.Duration {
	per := len(src) / n &^ (block - 1)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, block)
			part := src[w*per : (w+1)*per]
			for range loops {
				for off := 0; off+block <= len(part); off += block {
					copy(buf, part[off:])
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
