package reach

import (
	"context"
	"math"
	"sort"
	"sync/atomic"

	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/workers"
)

// ScanJobs is Scan on up to jobs workers (internal/workers: jobs as
// workers.Resolve takes it). With one it is Scan. With more, the heap is
// cut into segments of address (segmentSize of an arena's heap, or one
// mmapped chunk) that the workers sweep in rounds, and the marks are shared
// and set by compare-and-swap: a chunk is read by the one worker whose swap
// claimed it, once per scan as in Scan.
//
// The classes are Scan's, whatever the worker count or the order the
// workers meet the chunks in: a pass marks the closure of its roots over
// the chunks no earlier pass marked, the leaked pass marks what an
// unreachable chunk other than itself points to, and neither depends on
// the order of the marking. Sweeps counts the rounds.
//
// visitOf, when not nil, gives each worker its visitor (0 up to jobs-1),
// and the visitors of different workers are called at once: a reached
// chunk is handed to the visitor of the worker that reads it, as it reads
// it, so that the heap is read once; the leaked chunks are handed to the
// first visitor once every reached one has been, in the index's order, as
// Scan hands them (so the first leaked chunks of a type are the same).
// What a visitor counts must not depend on the order of the reached
// chunks.
//
// A round sweeps every segment, reading the chunks marked but not read
// yet through that worker's blocks, in address order. A chunk marked in a
// segment some worker has already swept past is read at once by the
// worker that marked it (Scan's "behind the sweep"), up to maxWork waiting
// per worker; the rest waits for the next round.
func ScanJobs(ctx context.Context, jobs int, t debuggee.Target, ix *chunks.Index, roots []Root, visitOf func(worker int) Visitor) (*Result, error) {
	jobs = workers.Resolve(jobs)
	if jobs <= 1 {
		var visit Visitor
		if visitOf != nil {
			visit = visitOf(0)
		}
		return Scan(ctx, t, ix, roots, visit)
	}
	p := &par{ix: ix, marks: ix.NewMarks(), t: t, addr: addrMask(t)}
	p.lo, p.hi = ix.Bounds()
	for _, sp := range ix.Spans() {
		for lo := sp[0]; lo < sp[1]; lo += segmentSize {
			p.segs = append(p.segs, [2]uint64{lo, min(lo+segmentSize, sp[1])})
		}
	}
	ix.ForEachMmapped(func(c chunks.Chunk) { p.segs = append(p.segs, [2]uint64{c.Addr, c.Addr + 1}) })
	sort.Slice(p.segs, func(i, j int) bool { return p.segs[i][0] < p.segs[j][0] })
	p.cursor = make([]atomic.Uint64, len(p.segs))
	// One worker state per worker, handed from one piece to the next: each
	// has its own blocks (a share of Scan's) and its own waiting chunks.
	p.pool = make(chan *parWorker, jobs)
	for i := 0; i < jobs; i++ {
		w := &parWorker{p: p, cache: newBlocksOf(t, max(maxBlocks/jobs, 16)), maxWork: max(maxWork/jobs, 4096)}
		if visitOf != nil {
			w.visit = visitOf(i)
		}
		p.pool <- w
	}
	r := &Result{ix: ix, marks: p.marks, cache: newBlocks(t), Roots: roots}
	for _, pass := range []struct {
		static bool
		mark   uint8
	}{{true, markStatic}, {false, markStack}} {
		var pieces []Root
		for _, root := range roots {
			if root.Kind.static() != pass.static {
				continue
			}
			if root.Kind == RootRegs {
				pieces = append(pieces, root)
				continue
			}
			for lo := root.Start; lo < root.End; lo += rootPiece {
				pc := root
				pc.Start, pc.End = lo, min(lo+rootPiece, root.End)
				pieces = append(pieces, pc)
			}
		}
		for i := range p.cursor {
			p.cursor[i].Store(0)
		}
		p.round = 0
		err := workers.Run(ctx, jobs, len(pieces), func(i int) error {
			w := <-p.pool
			defer func() { p.pool <- w }()
			w.mark, w.seg = pass.mark, -1
			if pc := pieces[i]; pc.Kind == RootRegs {
				w.refs(pc.regs, 0)
			} else {
				w.rootBytes += w.scan(pc.Start, pc.End, 0)
			}
			w.drain()
			return nil
		})
		for err == nil && p.pending.Load() > 0 {
			r.Sweeps++
			p.round++
			for i := range p.cursor {
				p.cursor[i].Store(0)
			}
			err = workers.Run(ctx, jobs, len(p.segs), func(i int) error {
				w := <-p.pool
				defer func() { p.pool <- w }()
				w.mark = pass.mark
				w.sweep(i)
				return nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
	// What is left is leaked: each unreached chunk is read for the chunks
	// it points to, which are reached only from leaked memory. They are
	// read segment by segment in the index's order (Index.ForEach: the
	// heaps' in address order, then the mmapped chunks), as Scan reads
	// them, and handed to the first visitor in that order.
	order := make([]int, 0, len(p.segs))
	for mmapped := range 2 {
		for i, sg := range p.segs {
			if (sg[1]-sg[0] == 1) == (mmapped == 1) { // a mmapped chunk's segment is one byte
				order = append(order, i)
			}
		}
	}
	var leakedVisit Visitor
	if visitOf != nil {
		leakedVisit = visitOf(0)
	}
	// A segment's leaked chunks wait with their heads, 65 bytes a chunk:
	// 8.5 MiB for a 4 MiB segment of 32-byte chunks all leaked. So at
	// most one segment per worker waits, besides the one handed on.
	free := make(chan *told, jobs+1)
	err := workers.InOrder(ctx, jobs, len(order), jobs, func(i int) (*told, error) {
		sg := p.segs[order[i]]
		w := <-p.pool
		defer func() { p.pool <- w }()
		w.mark, w.seg = markInner, -1
		var tl *told
		if leakedVisit != nil {
			select {
			case tl = <-free:
				tl.reset()
			default:
				tl = &told{}
			}
		}
		ix.ForEachIn(sg[0], sg[1], func(c chunks.Chunk) bool {
			if v := p.marks.Load(c); v == markNone || v == markInner {
				if tl != nil {
					tl.add(c, w.cache)
				}
				w.chunkBytes += w.scan(c.User(), c.UserEnd(), c.Addr)
			}
			return true
		})
		return tl, ctx.Err()
	}, func(_ int, tl *told) error {
		if tl == nil {
			return nil
		}
		for k, c := range tl.cs {
			leakedVisit(c, true, tl.head(k))
		}
		select {
		case free <- tl:
		default:
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The classes are known: each worker counts a share of the segments.
	counts := make([]struct{ n, b [Leaked + 1]uint64 }, len(p.segs))
	err = workers.Run(ctx, jobs, len(p.segs), func(i int) error {
		ct := &counts[i]
		ix.ForEachIn(p.segs[i][0], p.segs[i][1], func(c chunks.Chunk) bool {
			cl := classOf(p.marks.Load(c)) // Class's Get keeps a memo: one goroutine's
			ct.n[cl]++
			ct.b[cl] += c.Size
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, ct := range counts {
		for cl := range ct.n {
			r.Count[cl] += ct.n[cl]
			r.Bytes[cl] += ct.b[cl]
		}
	}
	close(p.pool)
	for w := range p.pool {
		r.RootBytes += w.rootBytes
		r.ChunkBytes += w.chunkBytes
	}
	return r, nil
}

// told is the leaked chunks of one segment, with their heads, waiting to
// be handed to the visitor in order.
type told struct {
	cs    []chunks.Chunk
	n     []uint8 // bytes of the head that could be read
	heads []byte  // HeadSize a chunk
}

func (tl *told) reset() { tl.cs, tl.n, tl.heads = tl.cs[:0], tl.n[:0], tl.heads[:0] }

func (tl *told) add(c chunks.Chunk, bs *blocks) {
	var h [HeadSize]byte
	n := bs.read(h[:min(HeadSize, c.UserEnd()-c.User())], c.User())
	tl.cs, tl.n, tl.heads = append(tl.cs, c), append(tl.n, uint8(n)), append(tl.heads, h[:]...)
}

func (tl *told) head(k int) []byte { return tl.heads[k*HeadSize:][:tl.n[k]] }

const (
	// segmentSize is how much of an arena's heap one piece of a round
	// sweeps: small enough that the workers share a heap of a few
	// segments evenly, large enough that a piece is not mostly overhead.
	segmentSize = 4 << 20
	// rootPiece is how much of a root one piece scans.
	rootPiece = 1 << 20
	// cursorStep is how far ahead of the sweep its cursor is stored.
	cursorStep = 64 << 10
	// lateRound is the last round of a pass after which a chunk behind
	// the sweeps is read at once even on its own.
	lateRound = 2
)

// par is what the workers of ScanJobs share.
type par struct {
	addr    uint64 // addrMask's
	ix      *chunks.Index
	marks   *chunks.Marks
	t       debuggee.Target
	lo, hi  uint64
	segs    [][2]uint64
	cursor  []atomic.Uint64 // per segment: how far this round's sweep went (MaxUint64: done)
	pending atomic.Int64    // chunks marked pending and not claimed yet
	round   int             // of the pass, from 1; 0 while its roots are scanned
	pool    chan *parWorker
}

// seg is the segment that holds addr (a chunk's start), or -1.
func (p *par) seg(addr uint64) int {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i][1] > addr })
	if i < len(p.segs) && p.segs[i][0] <= addr {
		return i
	}
	return -1
}

// parWorker is one worker's state.
type parWorker struct {
	p                     *par
	cache                 *blocks
	mark                  uint8
	seg                   int // the segment it sweeps; -1 outside a sweep
	work                  []chunks.Chunk
	maxWork               int // Scan's maxWork, shared out: what the workers hold stays Scan's
	own                   []byte
	ws                    []uint64     // a batch's words that may point into the heap
	refBuf                []chunks.Ref // lent to Marks.Refs
	untagged              []uint64     // untag's
	rootBytes, chunkBytes uint64
	visit                 Visitor // this worker's, for the reached chunks it reads
	head                  [HeadSize]byte
}

// refs takes the words of ws for references, as scanner.refs does: in the
// leaked pass an unmarked chunk a word points into is marked markInner; in
// the others it becomes pending (pended).
func (w *parWorker) refs(ws []uint64, from uint64) {
	ws = untag(ws, w.p.addr, &w.untagged)
	if w.mark == markInner {
		w.refBuf = w.p.marks.Refs(w.refBuf, ws, from, markNone, markInner, true, ignore)
		return
	}
	w.refBuf = w.p.marks.Refs(w.refBuf, ws, from, markNone, markPending, true, w.pended)
}

// pended counts c, which this worker just marked pending, and waits to read
// it here when its segment's sweep has passed it.
func (w *parWorker) pended(c chunks.Chunk) {
	p := w.p
	p.pending.Add(1)
	// The sweep stores its cursor before it loads a chunk's mark, and
	// this loads the cursor after its swap: either the sweep sees the
	// chunk pending, or this sees the sweep at or past it. Behind the
	// sweep, a chunk in a block at hand is read now; one that would be
	// read on its own (a system call for a few words) waits for the next
	// round, which reads it through its blocks, unless rounds are not
	// enough (a list linked in no order of address advances a node a
	// round: after the second, such chunks are read at once).
	if s := p.seg(c.Addr); s >= 0 && c.Addr <= p.cursor[s].Load() && len(w.work) < w.maxWork &&
		(p.round > lateRound || w.cache.has(c.User())) {
		w.work = append(w.work, c)
	}
}

// claim gives c the pass's mark if it is still pending: true for the one
// worker that is to read it.
func (w *parWorker) claim(c chunks.Chunk) bool {
	if !w.p.marks.CAS(c, markPending, w.mark) {
		return false
	}
	w.p.pending.Add(-1)
	return true
}

// read reads a claimed chunk for references: one behind the sweep on its
// own when small and not in a block at hand, else through the blocks.
func (w *parWorker) read(c chunks.Chunk, behind bool) {
	start, end := c.User(), c.UserEnd()
	if behind && end-start <= maxOwn && !w.cache.has(start) && !w.cache.has(end-1) {
		if cap(w.own) < maxOwn {
			w.own = make([]byte, maxOwn)
		}
		b := w.own[:end-start]
		if n, err := w.p.t.ReadAt(b, start); err == nil && n == len(b) {
			if w.visit != nil {
				w.visit(c, false, b[:min(HeadSize, len(b))])
			}
			for off := 0; off < len(b); off += batch {
				w.ws = words(w.ws[:0], b[off:min(len(b), off+batch)], w.p.lo, w.p.hi, w.p.addr)
				w.refs(w.ws, c.Addr)
			}
			w.chunkBytes += uint64(len(b))
			return
		}
	}
	if w.visit != nil {
		h := w.head[:min(HeadSize, end-start)]
		w.visit(c, false, h[:w.cache.read(h, start)])
	}
	w.chunkBytes += w.scan(start, end, c.Addr)
}

// drain reads the chunks waiting here, and what they reach behind the
// sweeps.
func (w *parWorker) drain() {
	for len(w.work) > 0 {
		c := w.work[len(w.work)-1]
		w.work = w.work[:len(w.work)-1]
		if w.claim(c) {
			w.read(c, true)
		}
	}
}

// sweep goes over segment i in address order, reading every pending chunk
// it meets and, after each, those waiting here.
func (w *parWorker) sweep(i int) {
	p := w.p
	w.seg = i
	var ahead uint64 // the cursor as stored: at or past every chunk met
	p.ix.ForEachIn(p.segs[i][0], p.segs[i][1], func(c chunks.Chunk) bool {
		// The store is a full fence (it must come before the mark's
		// load), a third of the sweep's time when made per chunk: it is
		// made once per cursorStep, a little ahead of the sweep. A
		// chunk marked between the sweep and the cursor is taken for
		// behind it by its marker and may be read by either; the claim
		// decides.
		if c.Addr >= ahead {
			ahead = c.Addr + cursorStep
			p.cursor[i].Store(ahead)
		}
		if p.marks.Load(c) == markPending && w.claim(c) {
			w.read(c, false)
		}
		w.drain()
		return true
	})
	p.cursor[i].Store(math.MaxUint64)
	w.drain()
	w.seg = -1
}

// scan is scanner.scan for a worker: [start, end) read for references
// through its blocks; it returns how many bytes it read.
func (w *parWorker) scan(start, end uint64, from uint64) uint64 {
	var n uint64
	for a := (start + 7) &^ 7; a+8 <= end; {
		base := a &^ (blockSize - 1)
		blk := w.cache.get(base)
		off, stop := a-base, min(blockSize, end-base)
		for ; off < stop; off += batch {
			w.ws = words(w.ws[:0], blk.b[off:min(stop, off+batch)], w.p.lo, w.p.hi, w.p.addr)
			w.refs(w.ws, from)
		}
		n += blk.readable(a-base, stop)
		a = base + blockSize
	}
	return n
}
