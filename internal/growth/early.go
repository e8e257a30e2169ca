package growth

import (
	"github.com/arenactl/arenactl/internal/stackprof"
	"sync/atomic"
	"time"

	"github.com/arenactl/arenactl/internal/arch"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/perf"
)

// This file reads, for a fault sample whose stack copy was full (and so
// may be cut short), the rest of its thread's stack as soon as the
// stream's reader takes the sample from its ring: internal/stackprof
// completes a cut stack from the stack as it is read, where it still
// holds the copy's bytes from the last unwound frame on (stackprof's
// extend.go), and a drain comes up to 50 ms after the sample, by when a
// short statement (MariaDB's CREATE TABLE, whose frames go deeper than a
// copy) is over. The reader takes the rings every 10 ms.

// earlyMax bounds what is read above a sample's sp, and earlyRate the
// bytes read a second (past it, samples are left to the read at the
// drain): the reader runs ahead of the process's threads.
const (
	earlyMax  = 512 << 10
	earlyRate = 16 << 20
)

// earlyReader reads stacks for the stream's reader; ms are the mappings
// as the watch last read them.
type earlyReader struct {
	w      *growthWatch
	ms     atomic.Pointer[[]maps.Mapping]
	copy   int // the fault samples' stack copy, in bytes
	budget int
	at     time.Time
	// recent serves a burst of one thread's samples with one read.
	recent stackprof.RecentReads
}

// setMappings gives the reader the mappings last read.
func (e *earlyReader) setMappings(ms []maps.Mapping) { e.ms.Store(&ms) }

// read is the stream's early function.
func (e *earlyReader) read(smp *perf.Sample) {
	if smp.Event != 0 || !smp.HaveRegs || len(smp.Stack) < e.copy {
		return
	}
	ms := e.ms.Load()
	if ms == nil {
		return
	}
	sp := smp.Regs.SPOf(arch.Host())
	m, ok := maps.Find(*ms, sp)
	if !ok || m.End <= sp+uint64(len(smp.Stack)) {
		return
	}
	now := time.Now()
	// Only a read made after the sample was taken serves it: one made
	// before may be of another path at the same depth (RecentReads).
	if lag := perf.Now() - smp.Time; smp.Time != 0 && int64(lag) > 0 {
		e.recent.Since(now.Add(-time.Duration(lag)))
	} else {
		e.recent.Since(now)
	}
	if b, ok := e.recent.Covering(uint64(smp.Tid), sp, sp+uint64(len(smp.Stack))+1, now); ok {
		smp.Later, smp.LaterAddr = b, sp
		return
	}
	if now.Sub(e.at) >= time.Second/10 {
		e.at, e.budget = now, earlyRate/10
	}
	n := min(m.End-sp, earlyMax)
	if int(n) > e.budget {
		return
	}
	e.budget -= int(n)
	buf := make([]byte, n)
	got, _ := e.w.t.ReadAt(buf, sp)
	if got > len(smp.Stack) {
		smp.Later, smp.LaterAddr = buf[:got], sp
		e.recent.Keep(uint64(smp.Tid), sp, buf[:got], now)
	}
}

// readStack is the memory the stacks are completed from (stackprof's
// SetMemory): the sample being unwound's early read where it covers
// what is asked, else the process as it is now.
func (w *growthWatch) readStack(p []byte, addr uint64) (int, error) {
	if l := w.later; l != nil && addr >= w.laterAddr && addr+uint64(len(p)) <= w.laterAddr+uint64(len(l)) {
		return copy(p, l[addr-w.laterAddr:]), nil
	}
	return w.t.ReadAt(p, addr)
}
