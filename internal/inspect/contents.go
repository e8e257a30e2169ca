package inspect

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/arenactl/arenactl/internal/budget"
	"github.com/arenactl/arenactl/internal/chunks"
	"github.com/arenactl/arenactl/internal/core"
	"github.com/arenactl/arenactl/internal/heap"
	"github.com/arenactl/arenactl/internal/live"
	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/reach"
	"github.com/arenactl/arenactl/internal/report"
	"github.com/arenactl/arenactl/internal/stackprof"
)

// How much of the leaked chunks the report shows: groups, examples per
// group, and bytes of each example.
const (
	leakGroups   = 20
	leakExamples = 3
	previewBytes = 32
)

// Contents is what a live process's heap holds, the process held as mode
// says: read from a copy-on-write image of it (the process runs on; it was
// stopped only while the image was made), or with every thread stopped for
// the read. Nothing is left out of the image: memory malloc does not own is
// a root of the scan.
func Contents(ctx context.Context, pid int, o Options, mode Hold, addrs []uint64) (_ *report.Contents, err error) {
	if err := budget.Check(pid, budget.Scan, o.MaxMemory, o.Jobs); err != nil {
		return nil, err
	}
	t, done, err := openLive(pid, true)
	if err != nil {
		return nil, err
	}
	defer done(&err)
	h, err := openHeap(t, o.DebugDirs, o.Jobs)
	if err != nil {
		return nil, err
	}
	// The vtables are read from the files before anything is stopped.
	mods := module.NewTable(t, o.DebugDirs...)
	defer mods.Close()
	fetchDebug(ctx, mods, o.Note)
	types := reach.NewTypes(mods)
	tls := reach.StaticTLS(mods)
	hd, err := hold(ctx, t, mode, o.Timeout)
	if err != nil {
		return nil, err
	}
	hh := *h
	hh.T = hd.mem
	// Guard regions hold nothing: their pages are no unread roots.
	var guarded func(lo, hi uint64) uint64
	if pm, err := t.Proc().OpenPagemap(); err == nil {
		defer pm.Close()
		guarded = func(lo, hi uint64) uint64 {
			n, _ := pm.Guarded(lo, hi)
			return n
		}
	}
	rep, err := contentsOf(ctx, &hh, types, tls, addrs, guarded, o.Jobs)
	ro := &report.ReadOnly{}
	if rerr := hd.release(ro); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", t.Pid, err)
	}
	rep.Pid, rep.Exe, rep.Libc, rep.Hold, rep.Frozen = t.Pid, t.Exe, report.LibcOf(h.Libc), ro.Hold, ro.Frozen
	rep.Threads = countThreads(t.Proc())
	return rep, nil
}

// CoreContents is Contents of a core or snapshot.
func CoreContents(ctx context.Context, path string, o CoreOptions, addrs []uint64) (*report.Contents, error) {
	t, h, err := openCore(ctx, path, o)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	mods := module.NewTable(t, o.DebugDirs...)
	defer mods.Close()
	fetchDebug(ctx, mods, o.Note)
	rep, err := contentsOf(ctx, h, reach.NewTypes(mods), reach.StaticTLS(mods), addrs, nil, o.Jobs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, ths := t.Process(), t.Threads()
	rep.Pid, rep.Exe, rep.Libc, rep.Threads = p.Pid, p.Exe, report.LibcOf(h.Libc), len(ths)
	rep.Core = &report.CoreInfo{Path: path, Command: p.Command, LibcNotes: h.LibcNotes, Snapshot: t.Note(core.NoteAllocator) != nil}
	if len(ths) > 0 {
		rep.Core.CrashTid = ths[0].Tid
	}
	return rep, nil
}

// contentsOf indexes h's chunks, scans from its roots, counts, and says
// what holds each of addrs. guarded (nil: none) is how many bytes of a
// range are guard regions, which hold nothing and count as no unread root;
// jobs is the scan's workers (Options.Jobs).
func contentsOf(ctx context.Context, h *heap.Heap, types *reach.Types, tls uint64, addrs []uint64, guarded func(lo, hi uint64) uint64, jobs int) (*report.Contents, error) {
	start := time.Now()
	ix, err := chunks.Build(h, nil)
	if err != nil {
		return nil, err
	}
	roots := reach.Roots(h.T, ix, tls)
	types.ReadFrom(h.T)
	// vtableOf names a chunk by its first word: a vtable symbol, or in a
	// stripped object a vtable's shape.
	vtableOf := func(first uint64) (string, bool) {
		if name, ok := types.Of(first); ok {
			return name, true
		}
		return types.OfStripped(first)
	}
	typeOfHead := func(c chunks.Chunk, head []byte) (string, bool) {
		if len(head) >= 8 {
			if name, ok := vtableOf(binary.LittleEndian.Uint64(head)); ok {
				return name, true
			}
		}
		return fmt.Sprintf("size %d", c.Size), false
	}
	// Each worker of the scan counts the chunks it reads in a census of
	// its own; the leaked chunks come to the first, in address order.
	var censuses []*census
	leaks := map[string]*report.LeakGroup{}
	res, err := reach.ScanJobs(ctx, jobs, h.T, ix, roots, func(worker int) reach.Visitor {
		for len(censuses) <= worker {
			censuses = append(censuses, &census{byType: map[string]*report.TypeCount{}, bySize: map[uint64]*report.TypeCount{}})
		}
		cs := censuses[worker]
		return func(c chunks.Chunk, leaked bool, head []byte) {
			tc := cs.count(c, head, vtableOf)
			if !leaked {
				return
			}
			tc.LeakedCount++
			tc.LeakedBytes += c.Size
			lg := leaks[tc.Type]
			if lg == nil {
				lg = &report.LeakGroup{Type: tc.Type}
				leaks[tc.Type] = lg
			}
			lg.Count++
			lg.Bytes += c.Size
			if len(lg.Examples) < leakExamples {
				lg.Examples = append(lg.Examples, report.LeakExample{Addr: c.User(), Size: c.Size, Preview: append([]byte(nil), head...)})
			}
		}
	})
	byType, bySize := mergeCensuses(censuses)
	if err != nil {
		return nil, err
	}
	rep := &report.Contents{
		Chunks: ix.Count, Bytes: ix.Bytes, FreeChunks: ix.FreeCount, FreeBytes: ix.FreeBytes,
		RootBytes: res.RootBytes, ChunkBytes: res.ChunkBytes, Vtables: types.Len(),
		IndexBits: ix.Bits() + res.Bits(), Sweeps: res.Sweeps, InteriorPointers: true,
	}
	for _, cl := range reach.Classes {
		rep.Classes = append(rep.Classes, report.ClassCount{Class: cl.String(), Count: res.Count[cl], Bytes: res.Bytes[cl]})
	}
	var rootSpan uint64
	perKind := map[reach.RootKind]*report.RootCount{}
	var kinds []reach.RootKind
	for _, r := range roots {
		rc := perKind[r.Kind]
		if rc == nil {
			rc = &report.RootCount{Kind: r.Kind.String()}
			perKind[r.Kind] = rc
			kinds = append(kinds, r.Kind)
		}
		rc.Count++
		rc.Bytes += r.End - r.Start + r.Missing
		rootSpan += r.End - r.Start + r.Missing
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		rep.Roots = append(rep.Roots, *perKind[k])
	}
	if rootSpan > res.RootBytes {
		rep.Unread = rootSpan - res.RootBytes
	}
	if guarded != nil {
		for i := range res.Unread {
			u := &res.Unread[i]
			g := min(guarded(u.Start, u.End), u.Bytes, rep.Unread)
			u.Bytes -= g
			rep.Unread -= g
		}
	}
	rep.UnreadIn = unreadPlaces(res.Unread)
	typeOf := func(c chunks.Chunk) (string, bool) {
		var b [8]byte
		return typeOfHead(c, b[:res.Read(b[:], c.User())])
	}
	// Which leaked chunks nothing points to is known once the scan is
	// over: only those are read again, for their type.
	ix.ForEach(func(c chunks.Chunk) bool {
		if res.Class(c) == reach.Leaked {
			if name, _ := typeOf(c); leaks[name] != nil {
				leaks[name].Roots++
			}
		}
		return true
	})
	for _, tc := range byType {
		rep.Types = append(rep.Types, *tc)
	}
	for _, tc := range bySize {
		rep.Types = append(rep.Types, *tc)
	}
	sortByBytes(rep.Types, func(t report.TypeCount) (uint64, string) { return t.Bytes, t.Type })
	for _, lg := range leaks {
		rep.Leaks = append(rep.Leaks, *lg)
	}
	sortByBytes(rep.Leaks, func(l report.LeakGroup) (uint64, string) { return l.Bytes, l.Type })
	if len(rep.Leaks) > leakGroups {
		rep.Leaks = rep.Leaks[:leakGroups]
	}
	for i, a := range ix.Arenas {
		pin := report.ArenaPin{Index: i, Addr: a.Addr, Main: a.Main, TopSize: a.Top.Size, FreeBelow: a.FreeBelow}
		if i < len(ix.Walk.Arenas) {
			aw := ix.Walk.Arenas[i]
			pin.FreeBytes, pin.Trimmable = aw.FreeBytes+aw.FastBytes, aw.Trimmable()
		}
		if c := a.HighestUsed; c.Size != 0 {
			pin.Highest, pin.HighestLen = c.User(), c.Size
			pin.HighestTyp, _ = typeOf(c)
		}
		rep.Arenas = append(rep.Arenas, pin)
	}
	for _, a := range addrs {
		l := report.Lookup{Addr: a}
		if c, ok := ix.Find(a); ok {
			l.Found, l.Chunk, l.Size, l.Class = true, c.User(), c.Size, res.Class(c).String()
			l.Type, _ = typeOf(c)
		}
		rep.Lookups = append(rep.Lookups, l)
	}
	rep.Scan = time.Since(start)
	return rep, nil
}

// census counts chunks by type: by vtable where the first word points
// into one, else by size (no name made per chunk).
type census struct {
	byType map[string]*report.TypeCount
	bySize map[uint64]*report.TypeCount
}

// count counts c, whose first bytes are head, and returns its row.
func (cs *census) count(c chunks.Chunk, head []byte, vtableOf func(uint64) (string, bool)) *report.TypeCount {
	var tc *report.TypeCount
	name, vt := "", false
	if len(head) >= 8 {
		name, vt = vtableOf(binary.LittleEndian.Uint64(head))
	}
	if vt {
		if tc = cs.byType[name]; tc == nil {
			tc = &report.TypeCount{Type: name, Vtable: true}
			cs.byType[name] = tc
		}
	} else if tc = cs.bySize[c.Size]; tc == nil {
		tc = &report.TypeCount{Type: fmt.Sprintf("size %d", c.Size)}
		cs.bySize[c.Size] = tc
	}
	tc.Count++
	tc.Bytes += c.Size
	return tc
}

// mergeCensuses adds the workers' censuses up.
func mergeCensuses(cs []*census) (map[string]*report.TypeCount, map[uint64]*report.TypeCount) {
	byType, bySize := map[string]*report.TypeCount{}, map[uint64]*report.TypeCount{}
	add := func(to, tc *report.TypeCount) {
		to.Count += tc.Count
		to.Bytes += tc.Bytes
		to.LeakedCount += tc.LeakedCount
		to.LeakedBytes += tc.LeakedBytes
	}
	for _, c := range cs {
		for k, tc := range c.byType {
			if byType[k] == nil {
				byType[k] = &report.TypeCount{Type: tc.Type, Vtable: tc.Vtable}
			}
			add(byType[k], tc)
		}
		for k, tc := range c.bySize {
			if bySize[k] == nil {
				bySize[k] = &report.TypeCount{Type: tc.Type}
			}
			add(bySize[k], tc)
		}
	}
	return byType, bySize
}

// sortByBytes orders a report's rows by bytes, largest first, then by name.
func sortByBytes[T any](rows []T, key func(T) (uint64, string)) {
	sort.Slice(rows, func(i, j int) bool {
		bi, ni := key(rows[i])
		bj, nj := key(rows[j])
		if bi != bj {
			return bi > bj
		}
		return ni < nj
	})
}

// classifyHeld scans the heap of t, read from a copy-on-write image made
// now, and tells b which of the blocks it saw allocated and still held are
// leaked: those nothing the program can reach points to. Only an image is
// used: the scan takes seconds on a large heap, too long to stop the
// process for.
func classifyHeld(ctx context.Context, t *live.Target, o Options, b *stackprof.Builder) error {
	h, err := openHeap(t, o.DebugDirs, o.Jobs)
	if err != nil {
		return err
	}
	mods := module.NewTable(t, o.DebugDirs...)
	defer mods.Close()
	tls := reach.StaticTLS(mods)
	hd, err := hold(ctx, t, HoldImage, o.Timeout)
	if err != nil {
		return err
	}
	defer hd.release(&report.ReadOnly{})
	hh := *h
	hh.T = hd.mem
	ix, err := chunks.Build(&hh, nil)
	if err != nil {
		return err
	}
	res, err := reach.ScanJobs(ctx, o.Jobs, hh.T, ix, reach.Roots(hh.T, ix, tls), nil)
	if err != nil {
		return err
	}
	b.Classify(func(addr uint64) (bool, bool) {
		c, ok := ix.Find(addr)
		if !ok {
			return false, false
		}
		return res.Class(c).IsLeaked(), true
	})
	return nil
}

// unreadPlaces names where roots could not be read, most bytes first.
func unreadPlaces(us []reach.UnreadRoot) []report.UnreadPlace {
	var out []report.UnreadPlace
	at := map[string]int{}
	for _, u := range us {
		if u.Bytes == 0 {
			continue
		}
		var where string
		switch u.Kind {
		case reach.RootData:
			where = u.Path
		case reach.RootStack:
			where = fmt.Sprintf("the stack of thread %d", u.Tid)
		case reach.RootTLS:
			where = fmt.Sprintf("the TLS of thread %d", u.Tid)
		default:
			where = "anonymous memory"
		}
		if i, ok := at[where]; ok {
			out[i].Bytes += u.Bytes
			continue
		}
		at[where] = len(out)
		out = append(out, report.UnreadPlace{Where: where, Bytes: u.Bytes})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}
