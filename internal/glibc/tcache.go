package glibc

import (
	"fmt"
	"sort"
)

// ThreadTLS is what the tcache locator needs of a thread: its thread
// pointer (fs_base on x86_64), from registers of a stopped thread or from a
// core's NT_PRSTATUS.
type ThreadTLS struct {
	Tid    int
	FsBase uint64
}

// ThreadCache is one thread's tcache and the arena it allocates from.
type ThreadCache struct {
	Tid    int
	Addr   uint64 // its tcache_perthread_struct; 0 when the thread has none yet
	Arena  uint64 // thread_arena; 0 when the thread never allocated
	Chunks uint64
	Bytes  uint64
	Bins   []TcacheBin // non-empty bins only
}

// TcacheBin is one size class of a tcache.
type TcacheBin struct {
	Size, Count uint64
}

// Tcaches finds every thread's tcache and arena without symbols: libc
// reaches its initial-exec TLS variables through GOT slots that hold their
// offset from the thread pointer (R_X86_64_TPOFF64 against no symbol). The
// slot whose value, for the threads, points just past a chunk of the size of
// a tcache_perthread_struct is tcache; the slot whose value is an arena is
// thread_arena (glibc-malloc.md §7.4). It returns the caches and the set of
// chunk addresses they hold, for the chunk walk to count as cached.
func Tcaches(l *Libc, lay Layout, mem Memory, threads []ThreadTLS, arenas []uint64) ([]ThreadCache, map[uint64]bool, []Damage) {
	if lay.TcacheBins == 0 || len(threads) == 0 {
		return nil, nil, nil
	}
	c := newBlockMem(mem)
	isArena := map[uint64]bool{}
	for _, a := range arenas {
		isArena[a] = true
	}
	type slotVals struct {
		vals          []uint64 // per thread
		tcache, arena int      // how many threads' values look like one
	}
	var best, bestArena *slotVals
	for _, s := range l.img.tpoff {
		off, ok := c.word(l.Base + s.Offset)
		if !ok {
			continue
		}
		sv := &slotVals{}
		for _, th := range threads {
			v, _ := c.word(th.FsBase + off)
			sv.vals = append(sv.vals, v)
			if v != 0 && v%16 == 0 {
				if sz, ok := c.word(v - 8); ok && sz&^sizeBits == lay.TcacheChunkSize {
					sv.tcache++
				}
			}
			if isArena[v] {
				sv.arena++
			}
		}
		if sv.tcache > 0 && (best == nil || sv.tcache > best.tcache) {
			best = sv
		}
		if sv.arena > 0 && (bestArena == nil || sv.arena > bestArena.arena) {
			bestArena = sv
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	var out []ThreadCache
	var dmg []Damage
	cached := map[uint64]bool{}
	for i, th := range threads {
		tc := ThreadCache{Tid: th.Tid, Addr: best.vals[i]}
		if bestArena != nil && isArena[bestArena.vals[i]] {
			tc.Arena = bestArena.vals[i]
		}
		if tc.Addr != 0 {
			dmg = append(dmg, readTcache(c, lay, &tc, cached)...)
		}
		out = append(out, tc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tid < out[j].Tid })
	return out, cached, dmg
}

// readTcache walks the entries of one tcache. Entries are user pointers; the
// chunk starts 16 bytes before. Their next links are mangled from 2.32 on.
func readTcache(c *blockMem, lay Layout, tc *ThreadCache, cached map[uint64]bool) []Damage {
	var dmg []Damage
	bad := func(at uint64, what string) {
		dmg = append(dmg, Damage{Addr: at, What: fmt.Sprintf("thread %d's tcache: %s", tc.Tid, what)})
	}
	for i := 0; i < lay.TcacheBins; i++ {
		e, ok := c.word(tc.Addr + uint64(lay.TcacheEntries) + uint64(i)*8)
		if !ok {
			bad(tc.Addr, "unreadable")
			return dmg
		}
		var n, size uint64
		seen := map[uint64]bool{}
		for e != 0 {
			if e%16 != 0 || seen[e] || len(seen) > 1<<20 {
				bad(e, fmt.Sprintf("bin %d is misaligned or loops", i))
				break
			}
			seen[e] = true
			raw, ok := c.word(e - 8)
			if !ok {
				bad(e, fmt.Sprintf("bin %d points to unreadable memory", i))
				break
			}
			size = raw &^ sizeBits
			cached[e-16] = true
			n++
			next, _ := c.word(e)
			if lay.SafeLinking {
				next ^= e >> 12
			}
			e = next
		}
		if n == 0 {
			continue
		}
		if !lay.TcacheCountsDown {
			var cnt uint64
			if b, err := readBytes(c, tc.Addr+uint64(i*lay.TcacheCountBytes), uint64(lay.TcacheCountBytes)); err == nil {
				cnt = uint64(b[0])
				if lay.TcacheCountBytes == 2 {
					cnt |= uint64(b[1]) << 8
				}
			}
			if cnt != n {
				bad(tc.Addr, fmt.Sprintf("bin %d counts %d entries but its list has %d", i, cnt, n))
			}
		}
		tc.Bins = append(tc.Bins, TcacheBin{Size: size, Count: n})
		tc.Chunks += n
		tc.Bytes += n * size
	}
	return dmg
}
