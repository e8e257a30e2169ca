// Command walk measures arenactl's read-only walker on a live process: the
// free-list walk (glibc.WalkLists, what the injection preflight reads) and
// the full walk (glibc.WalkAll: every thread's tcache, then every chunk of
// every heap, as `arenactl info --read-only` does), with every thread of the
// process stopped for the whole run (with -image, read from a copy-on-write
// image instead, as `arenactl heap` and `info --read-only` read it, with
// the process running); with -scan, also the chunk index and the
// reachability scan of `arenactl heap` (chunks.Build, reach.Scan). See
// README.md in this directory.
//
//	go run ./bench/walk/walkbench -pid PID [-n 5] [-scan] [-image] [-cpuprofile FILE] [-memprofile FILE]
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/glibc"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/reach"
)

func main() {
	pid := flag.Int("pid", 0, "the process to walk (every thread is stopped while this runs)")
	n := flag.Int("n", 5, "walks of each kind")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the walks to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the walks to this file")
	scan := flag.Bool("scan", false, "also time the chunk index and the reachability scan (arenactl heap)")
	image := flag.Bool("image", false, "read a copy-on-write image of the process instead of stopping it")
	flag.Parse()
	if *pid <= 0 || *n <= 0 {
		fmt.Fprintln(os.Stderr, "usage: walk -pid PID [-n N] [-cpuprofile FILE] [-memprofile FILE]")
		os.Exit(2)
	}
	if err := run(*pid, *n, *scan, *image, *cpuprofile, *memprofile); err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
}

// walkStats is what one kind of walk saw, and its times.
type walkStats struct {
	name          string
	chunks, bytes uint64 // chunks and heap bytes it covers
	times         []time.Duration
	cpu           []time.Duration // this process's CPU time (user and system), every goroutine
}

func (s *walkStats) print() {
	sort.Slice(s.times, func(i, j int) bool { return s.times[i] < s.times[j] })
	sort.Slice(s.cpu, func(i, j int) bool { return s.cpu[i] < s.cpu[j] })
	med, cpu := s.times[len(s.times)/2], s.cpu[len(s.cpu)/2]
	fmt.Printf("%-10s %10d chunks %8.3f GiB   median %8.1f ms (min %.1f, max %.1f)   %6.2f M chunks/s   %6.2f GiB/s   CPU %.1f ms\n",
		s.name, s.chunks, float64(s.bytes)/(1<<30), ms(med), ms(s.times[0]), ms(s.times[len(s.times)-1]),
		float64(s.chunks)/med.Seconds()/1e6, float64(s.bytes)/(1<<30)/med.Seconds(), ms(cpu))
}

// cpuTime is the CPU time this process has used: on a shared machine the
// wall time of a walk depends on what else runs, its CPU time much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func run(pid, n int, scan, image bool, cpuprofile, memprofile string) error {
	t, err := live.OpenReadOnly(pid)
	if err != nil {
		return err
	}
	defer t.Close()
	h, err := heap.Open(t, t.Libc, heap.Options{DebugDirs: libc.DefaultDebugDirs})
	if err != nil {
		return err
	}
	mods := module.NewTable(t, libc.DefaultDebugDirs...)
	defer mods.Close()
	tls := reach.StaticTLS(mods)
	threads := len(t.Threads())
	thaw := func() (time.Duration, error) { return 0, nil }
	if image {
		im, err := t.Image(context.Background(), 3*time.Second)
		if err != nil {
			return err
		}
		defer im.Close()
		threads = len(im.Threads())
		hh := *h
		hh.T = im
		h = &hh
	} else {
		frozen, err := t.Freeze(context.Background(), 3*time.Second)
		if err != nil {
			return err
		}
		defer frozen.Thaw()
		thaw = frozen.Thaw
	}

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if memprofile != "" {
		runtime.MemProfileRate = 64 << 10
	}

	lists := &walkStats{name: "free lists"}
	full := &walkStats{name: "full walk"}
	index := &walkStats{name: "index"}
	scans := &walkStats{name: "scan"}
	var indexBits uint64
	var digest [32]byte
	var peakHeap uint64
	for i := 0; i < n; i++ {
		start, cpu0 := time.Now(), cpuTime()
		w, err := h.WalkLists()
		if err != nil {
			return err
		}
		lists.times = append(lists.times, time.Since(start))
		lists.cpu = append(lists.cpu, cpuTime()-cpu0)
		lists.chunks, lists.bytes = 0, 0
		for _, a := range w.Malloc.Arenas {
			lists.chunks += a.FastCount + a.RestCount
			lists.bytes += a.FastBytes + a.RestBytes
		}

		runtime.GC()
		start, cpu0 = time.Now(), cpuTime()
		w, caches, err := h.Walk()
		if err != nil {
			return err
		}
		full.times = append(full.times, time.Since(start))
		full.cpu = append(full.cpu, cpuTime()-cpu0)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapAlloc)
		full.chunks, full.bytes = 0, 0
		for _, a := range w.Arenas {
			full.chunks += a.InUseChunks + a.FreeChunks + a.FastChunks
			full.bytes += a.InUseBytes + a.FreeBytes + a.FastBytes
		}
		// The same process, stopped throughout: every walk must give the
		// same result, before and after a change to the walker too.
		b, err := json.Marshal(struct {
			Malloc  *mallocinfo.Info
			Arenas  []glibc.ArenaWalk
			Mmapped glibc.MmappedChunks
			Damage  []glibc.Damage
			Caches  []glibc.ThreadCache
		}{w.Malloc, w.Arenas, w.Mmapped, w.Damage, caches})
		if err != nil {
			return err
		}
		d := sha256.Sum256(b)
		if i > 0 && d != digest {
			return fmt.Errorf("walk %d differs from walk 1", i+1)
		}
		digest = d
		if !scan {
			continue
		}

		// The index walks the heap again (chunks.Build); the scan reads
		// the roots and what they reach, every allocated chunk once.
		// Its figure in GiB/s is the heap's bytes (every chunk the
		// walk covers) over its time, as a sweep reads the heap front
		// to back; the chunks it scanned are printed beside.
		runtime.GC()
		start, cpu0 = time.Now(), cpuTime()
		ix, err := chunks.Build(h, nil)
		if err != nil {
			return err
		}
		index.times = append(index.times, time.Since(start))
		index.cpu = append(index.cpu, cpuTime()-cpu0)
		index.chunks, index.bytes = full.chunks, full.bytes
		runtime.GC()
		start, cpu0 = time.Now(), cpuTime()
		res, err := reach.Scan(context.Background(), h.T, ix, reach.Roots(h.T, ix, tls), nil)
		if err != nil {
			return err
		}
		scans.times = append(scans.times, time.Since(start))
		scans.cpu = append(scans.cpu, cpuTime()-cpu0)
		scans.chunks, scans.bytes = ix.Count, full.bytes
		indexBits = ix.Bits() + res.Bits()
		if i == 0 {
			fmt.Printf("scan: %d allocated chunks, %.3f GiB of them read, %.3f GiB of roots\n",
				ix.Count, float64(res.ChunkBytes)/(1<<30), float64(res.RootBytes)/(1<<30))
		}
	}
	held, err := thaw()
	if err != nil {
		return err
	}
	if memprofile != "" {
		f, err := os.Create(memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	how := fmt.Sprintf("every thread stopped for %.2f s in all", held.Seconds())
	if image {
		how = "read from a copy-on-write image, the process running"
	}
	fmt.Printf("process %d (%s), glibc %s, %d threads; %d walks of each kind, %s\n",
		pid, t.Exe, t.Libc.Version, threads, n, how)
	lists.print()
	full.print()
	if scan {
		index.print()
		scans.print()
		fmt.Printf("index and marks: %.1f Mbit, %.2f bits per 16 bytes of heap\n", float64(indexBits)/1e6, float64(indexBits)/float64(full.bytes/16))
	}
	fmt.Printf("Go heap after a full walk, largest: %.1f MiB; result digest %x\n", float64(peakHeap)/(1<<20), digest[:8])
	return nil
}
