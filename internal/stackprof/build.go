package stackprof

import (
	"debug/elf"
	"encoding/binary"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
	"github.com/arenactl/arenactl/internal/unwind"
)

// Build makes the profile of raws taken over w: each stack unwound with u
// and symbolized with s (both over the target's current module table),
// the samples aggregated per symbolized call stack. Mappings come from the
// modules the frames are in.
func Build(raws []Raw, w Window, u *unwind.Unwinder, s *symbolize.Symbolizer) *Profile {
	b := NewBuilder(u, s)
	for i := range raws {
		b.Add(raws[i])
	}
	return b.Profile(w)
}

// Builder builds a profile sample by sample, for a caller that drains the
// ring while the window runs: each sample is unwound and symbolized when
// added, while the modules its stack names are still mapped (a library
// dlclose'd later would be gone from the table), and its stack copy is
// not kept. Not safe for concurrent use.
type Builder struct {
	u *unwind.Unwinder
	s *symbolize.Symbolizer

	frames  []unwind.Frame // reused by every unwind
	pcKey   []byte
	byPCs   map[string]int // the unwound PCs (and stop) -> site
	byKey   map[string]int // the symbolized stack -> site
	sites   []*site
	samples []sample
	// live maps a held block's address to its latest sample; the
	// block's earlier ones (a realloc's sample joins those of the block
	// it grew) follow by sample.next. from maps a block moved by realloc
	// to the address it came from, to tell the realloc's own sample
	// (Raw.Old) that it is the same block, and by the move stamped when.
	live map[uint64]int
	from map[uint64]arrival
	// applied are the frees and moves applied to a held block, by its
	// address then, for a sample of that same block read after them
	// (after.go).
	applied     map[uint64][]appliedMove
	appliedKeys []uint64 // applied's entries in the order noted (a ring), to bound them
	appliedN    int
	// orphans are frees of addresses no held sample had, by address: the
	// allocation's record may come in a later drain (a ring is read up
	// to its first record still being written, and the frees it holds
	// after that are read already).
	orphans map[uint64][]orphan
	mods    []*module.Module
	modIdx  map[*module.Module]int

	incomplete, truncated int
	classified            bool // Classify ran
	short                 shortStacks
	outer                 *unwind.Outer
	pending               []pending // rejoin.go
	pendIdx               map[pendKey]int
	lastPending           int
	unjoinable            int
	// extend.go's: the process's memory now, and what it completed.
	mem                   func([]byte, uint64) (int, error)
	extendBuf             []byte
	extendFrames          []unwind.Frame
	extended, extendTried int
	extendAt              time.Time
	extendBudget          int
	extendRecent          RecentReads // by the stack's end

	// MinAge: a block allocated less than MinAge before the window's end
	// counts as allocated but not as held (leaks --min-age), so that
	// buffers merely in flight when the window closed are not taken for
	// leaks.
	MinAge time.Duration
}

type site struct {
	frames []Frame // root first; MappingID is an index+1 into Builder.mods until Profile
	stop   unwind.Stop
	key    string
}

type orphan struct {
	stamp uint64
	at    time.Duration
	to    uint64 // a move by realloc, to there; 0: a free
}

type sample struct {
	site    int
	stamp   uint64
	at      time.Duration
	size    uint64
	kind    string
	freed   bool
	freedAt time.Duration
	scale   float64
	shift   uint8
	leaked  bool  // held at the window's end, and reachable from nothing (Classify)
	partial int32 // 1 + the index of its short stack, to be completed (complete.go)
	pend    int32 // 1 + the index of its cut stack, to be joined again (rejoin.go)
	// A realloc of a block (Raw.Old): grown, the bytes it added to the
	// block (added), and the size it had (oldSize). Else added is size.
	grown   bool
	added   uint64
	oldSize uint64
	oldAddr uint64 // the block it grew, where it was
	moved   uint32 // the low half of the stamp of the move it made (Raw.Moved)
	next    int32  // 1 + the block's sample before this one; 0: none
	newer   int32  // 1 + the block's sample after this one (next's other way); 0: none
	addr    uint64 // the block's address when this sample was taken
}

// Classify marks each block still held whose address leaked says is
// leaked (nothing the program can reach points to it), for the profile's
// leaked estimates; known false means it could not say, and the block is
// counted held. It returns how many held blocks it could classify.
func (b *Builder) Classify(leaked func(addr uint64) (lost, known bool)) int {
	n := 0
	for addr, i := range b.live {
		if b.samples[i].freed {
			continue
		}
		lost, known := leaked(addr)
		if known {
			n++
			for j := i; ; {
				b.samples[j].leaked = lost
				if j = int(b.samples[j].next) - 1; j < 0 {
					break
				}
			}
		}
	}
	b.classified = true
	return n
}

// NewBuilder starts an empty profile over an unwinder and a symbolizer.
func NewBuilder(u *unwind.Unwinder, s *symbolize.Symbolizer) *Builder {
	return &Builder{u: u, s: s, byPCs: map[string]int{}, byKey: map[string]int{},
		live: map[uint64]int{}, from: map[uint64]arrival{}, applied: map[uint64][]appliedMove{},
		orphans: map[uint64][]orphan{}, modIdx: map[*module.Module]int{}, outer: unwind.NewOuter(),
		lastPending: -1}
}

// site unwinds a stack and returns the index of its site (one per stack
// that symbolizes the same; a new one is symbolized once) and where the
// unwinding stopped; it counts incomplete and truncated stacks.
func (b *Builder) site(start unwind.Start, stack unwind.Stack) (int, unwind.Stop) {
	si, tr := b.trace(start, stack)
	b.count(tr)
	return si, tr.Stop
}

// count counts an incomplete or truncated stack.
func (b *Builder) count(tr unwind.Trace) {
	if tr.Stop != unwind.StopEnd {
		b.incomplete++
	}
	if tr.Truncated {
		b.truncated++
		if b.lastPending >= 0 {
			b.pending[b.lastPending].counted++
		}
	}
}

// trace unwinds a stack and finds its site; b.pcKey holds its PCs (leaf
// first) and stop after it.
func (b *Builder) trace(start unwind.Start, stack unwind.Stack) (int, unwind.Trace) {
	tr := b.u.UnwindInto(b.frames, start, stack)
	if ext, ok := b.extend(stack, &tr); ok {
		// The same sample, its copy completed (extend.go): taken if
		// it goes further.
		etr := b.u.UnwindInto(b.extendFrames, start, ext)
		b.extendFrames = etr.Frames
		if !etr.Truncated && len(etr.Frames) > len(tr.Frames) {
			b.extended++
			b.frames, b.extendFrames = etr.Frames, tr.Frames
			tr = etr
		}
	}
	b.outer.Learn(&tr, stack.End) // joined when the profile is made: rejoin.go
	b.frames = tr.Frames
	b.pcKey = b.pcKey[:0]
	for _, f := range tr.Frames {
		b.pcKey = binary.LittleEndian.AppendUint64(b.pcKey, f.LookupPC())
	}
	b.pcKey = append(b.pcKey, byte(tr.Stop))
	si, ok := b.byPCs[string(b.pcKey)]
	if !ok {
		si = b.siteOf(tr)
		b.byPCs[string(b.pcKey)] = si
	}
	b.notePending(&tr, stack.End, si)
	return si, tr
}

// Add unwinds, symbolizes and records one sample. A sample at the address
// of a block still held means that one of the two was freed unseen (the
// allocator never hands out a held address twice): the earlier, by their
// stamps, is counted freed then. A realloc's sample at the block it grew
// in place, or moved (Move), is not that: it joins the block's samples.
func (b *Builder) Add(r Raw) {
	si, tr := b.trace(r.Start, r.Stack)
	pcs := b.pcKey[:len(b.pcKey)-1]
	s := sample{addr: r.Addr, site: si, stamp: r.Stamp, at: r.At, size: r.Size, kind: r.Kind, freed: r.Freed, freedAt: r.FreedAt, scale: r.Scale, added: r.Size, shift: uint8(r.Shift),
		pend: int32(b.lastPending + 1)}
	if r.Old != 0 {
		s.grown, s.oldSize, s.oldAddr, s.added, s.moved = true, r.OldSize, r.Old, r.Size-min(r.OldSize, r.Size), r.Moved
	}
	switch {
	case r.Short && tr.Truncated:
		s.partial = b.short.partial(pcs)
	case r.Short:
		b.count(tr) // whole though short: nothing to complete
	default:
		b.count(tr)
		b.short.full(pcs, si, math.Ldexp(1, r.Thin)-1)
	}
	i := len(b.samples)
	if head, held := b.live[r.Addr]; held && !s.freed && r.Old != 0 && (r.Old == r.Addr || b.from[r.Addr].addr == r.Old) &&
		before(b.samples[head].stamp, r.Stamp) {
		s.next = int32(head + 1)
		b.samples[head].newer = int32(i + 1)
		delete(b.live, r.Addr)
	}
	b.samples = append(b.samples, s)
	if s.freed {
		return
	}
	if s.next == 0 && b.late(i, r) {
		return
	}
	b.place(i, r.Addr, r.Stamp, r.At, 0)
}

// place puts the held block whose latest sample is i at addr, where it
// is as of stamp, having come from `came` by the move stamped so (0:
// none): frees and moves of it that came first (orphans) are applied, and
// a block held at the same address is one of the two freed unseen (the
// earlier by their stamps, at at), unless it is the same block: the
// sample there is of the realloc that made that very move, read before
// this sample (a ring read up to a record still being written holds back
// the ones after it) or before the move itself (a drain reads the free
// ring, then the others: a realloc between the two reads has its sample
// read in this drain and its move in the next; taken for a block freed
// unseen, every earlier sample of the block went freed, and under load a
// window lost up to a sixth of a realloc-grown site's bytes). Known by
// the move's stamp: a later realloc between the same two addresses,
// whose block's free is not read yet, also grew from there, and joined
// to it, a freed block's samples stayed held (+2 to +9 % under load).
func (b *Builder) place(i int, addr, stamp uint64, at time.Duration, came uint64) {
	for {
		o, ok := b.takeOrphan(addr, stamp)
		if !ok {
			break
		}
		// Kept for a later sample of this block read later still (after.go).
		var by arrival
		if came != 0 {
			by = arrival{came, stamp}
		}
		b.noteApplied(addr, appliedMove{stamp: o.stamp, to: o.to, at: o.at, head: int32(i), came: by})
		if o.to == 0 {
			b.freeBlock(i, o.at)
			return
		}
		b.from[o.to] = arrival{addr, o.stamp}
		came, addr, stamp = addr, o.to, o.stamp
	}
	if old, held := b.live[addr]; held && came != 0 && b.grewFrom(old, came, stamp) {
		// The same block: its samples join those already there.
		b.below(b.oldest(old), i)
		return
	}
	if old, held := b.live[addr]; held {
		if !before(b.samples[old].stamp, stamp) {
			if b.sameBlock(old, addr, stamp, b.from[addr].stamp) && b.insert(i, old, 0, at) {
				return
			}
			b.freeBlock(i, at)
			return
		}
		b.freeBlock(old, at)
	} else if came != 0 && b.arrivedLate(i, addr, stamp) {
		return
	}
	b.live[addr] = i
}

// grewFrom says whether a sample of the block whose latest sample is i was
// of the realloc that moved the block at addr by the move stamped so.
func (b *Builder) grewFrom(i int, addr, stamp uint64) bool {
	for i >= 0 {
		if s := &b.samples[i]; s.grown && s.oldAddr == addr && s.moved != 0 && s.moved == uint32(stamp) {
			return true
		}
		i = int(b.samples[i].next) - 1
	}
	return false
}

// freeBlock marks a block's samples, from its latest (i), freed at at.
func (b *Builder) freeBlock(i int, at time.Duration) {
	for i >= 0 {
		b.samples[i].freed, b.samples[i].freedAt = true, at
		i = int(b.samples[i].next) - 1
	}
}

// before says whether stamp a comes before b; unknown (0) stamps are taken
// to be in the order they arrive.
func before(a, b uint64) bool { return a == 0 || b == 0 || a < b }

// Free records that the sampled block at addr, if one is held, was freed
// at at. A free stamped before the held block's allocation, or with no
// block held there, was for a block whose record has not come yet (a
// realloc's, recorded late, or one behind a record still being written
// when the ring was read): it is kept for that record (an orphan), and
// the block is freed when it comes. It reports whether a held block was
// freed.
func (b *Builder) Free(addr, stamp uint64, at time.Duration) bool { return b.Move(addr, 0, stamp, at) }

// Move records that realloc moved the sampled block at addr to `to` at at
// (stamped before), as Free does a free (to 0): the block is the same, and
// its samples stay held, at the new address. It reports whether a held
// block was moved.
func (b *Builder) Move(addr, to, stamp uint64, at time.Duration) bool {
	i, ok := b.live[addr]
	if !ok || !before(b.samples[i].stamp, stamp) {
		if stamp != 0 {
			b.orphans[addr] = append(b.orphans[addr], orphan{stamp, at, to})
		}
		return false
	}
	b.noteApplied(addr, appliedMove{stamp: stamp, to: to, at: at, head: int32(i), came: b.from[addr]})
	delete(b.live, addr)
	delete(b.from, addr)
	if to == 0 {
		b.freeBlock(i, at)
		return true
	}
	b.from[to] = arrival{addr, stamp}
	b.place(i, to, stamp, at, addr)
	return true
}

// takeOrphan finds the first free or move at addr stamped after stamp
// that came before its allocation's record, and takes it: the block was
// freed or moved then.
func (b *Builder) takeOrphan(addr, stamp uint64) (orphan, bool) {
	list := b.orphans[addr]
	best := -1
	for i, o := range list {
		if stamp != 0 && o.stamp > stamp && (best < 0 || o.stamp < list[best].stamp) {
			best = i
		}
	}
	if best < 0 {
		return orphan{}, false
	}
	o := list[best]
	if list = append(list[:best], list[best+1:]...); len(list) == 0 {
		delete(b.orphans, addr)
	} else {
		b.orphans[addr] = list
	}
	return o, true
}

// siteOf symbolizes an unwound stack and finds (or makes) its site.
func (b *Builder) siteOf(tr unwind.Trace) int {
	var leafFirst []Frame
	for _, f := range tr.Frames {
		pc := f.LookupPC()
		loc := b.s.Symbolize(pc)
		mapping := 0
		if f.Module != nil {
			mapping = b.moduleIndex(f.Module) + 1
		}
		base := Frame{Addr: pc, Module: loc.Module, BuildID: loc.BuildID, Offset: loc.Offset, MappingID: mapping}
		if len(loc.Inlined) > 0 {
			for i, in := range loc.Inlined {
				fr := base
				fr.Function, fr.File, fr.Line = in.Function, in.File, in.Line
				fr.Inlined = i < len(loc.Inlined)-1
				if !fr.Inlined {
					fr.Mangled = loc.Mangled
				}
				leafFirst = append(leafFirst, fr)
			}
			continue
		}
		fr := base
		fr.Function, fr.Mangled, fr.File, fr.Line = loc.Function, loc.Mangled, loc.File, loc.Line
		leafFirst = append(leafFirst, fr)
	}
	frames := make([]Frame, len(leafFirst))
	for i, f := range leafFirst {
		frames[len(frames)-1-i] = f
	}
	key := stackKey(frames)
	if si, ok := b.byKey[key]; ok {
		return si
	}
	b.sites = append(b.sites, &site{frames: frames, stop: tr.Stop, key: key})
	b.byKey[key] = len(b.sites) - 1
	return len(b.sites) - 1
}

// stackKey names a symbolized stack: two stacks are one site when every
// frame is the same function at the same file:line of the same module;
// an unnamed frame is known by its module and offset only.
func stackKey(frames []Frame) string {
	var sb strings.Builder
	for _, f := range frames {
		sb.WriteString(f.Module)
		sb.WriteByte(0)
		if f.Function == "" {
			sb.WriteString(strconv.FormatUint(f.Offset, 16))
		} else {
			sb.WriteString(f.Function)
			sb.WriteByte(0)
			sb.WriteString(f.File)
			sb.WriteByte(':')
			sb.WriteString(strconv.Itoa(f.Line))
		}
		if f.Inlined {
			sb.WriteString("\x00i")
		}
		sb.WriteByte(1)
	}
	return sb.String()
}

func (b *Builder) moduleIndex(m *module.Module) int {
	if i, ok := b.modIdx[m]; ok {
		return i
	}
	b.mods = append(b.mods, m)
	b.modIdx[m] = len(b.mods) - 1
	return len(b.mods) - 1
}

// weight is how many blocks one sampled block of size bytes stands for
// when blocks are sampled by a Poisson process of mean rate bytes: the
// inverse of the chance 1-exp(-size/rate) that a sample point fell in
// it. A zero-sized block, which no byte could make sampled, stands for
// itself, as does every block when every one was recorded (rate 0).
func weight(size, rate uint64) float64 {
	if rate == 0 || size == 0 {
		return 1
	}
	return 1 / -math.Expm1(-float64(size)/float64(rate))
}

// Weight is what one sample stands for: the blocks (1/p) and bytes
// (size/p) of its kind, p the chance it was sampled, and what it adds to
// the variance of a bytes estimate, size²(1-p)/p².
func Weight(size, rate uint64) (objects, bytes, variance float64) {
	w := weight(size, rate)
	b := w * float64(size)
	return w, b, b * b * (1 - 1/w)
}

// chunkSize is about what glibc's malloc takes for a block of n bytes: a
// chunk of n plus its 8-byte header rounded up to 16, at least 32; a page
// multiple for one mapped of its own (from 128 KiB, the default threshold).
func chunkSize(n uint64) uint64 {
	if n >= 128<<10 {
		return (n + 16 + 4095) &^ 4095
	}
	return max(32, (n+8+15)&^15)
}

// Profile aggregates what was added into the profile of window w (whose
// Rate unbiases). The Builder may go on adding after it.
func (b *Builder) Profile(w Window) *Profile {
	type acc struct {
		counts Counts
		est    Estimate
		kinds  map[string]bool
	}
	b.rejoin() // before the sites are counted: it may add some
	accs := make([]acc, len(b.sites))
	chunks := 0.0
	shares := b.short.resolve()
	p := &Profile{Window: w, Samples: len(b.samples), Incomplete: b.incomplete, Truncated: b.truncated, Classified: b.classified}
	own := []Share{{Frac: 1}}
	for _, smp := range b.samples {
		// The chance a call was sampled follows from the bytes it asked
		// for, which the sampler counts down; a realloc that grew a block
		// counts only what it added (issue 29), and no new block.
		wt, bytes, v := Weight(smp.size, w.Rate<<smp.shift)
		if smp.scale > 1 {
			wt, bytes = wt*smp.scale, bytes*smp.scale
		}
		objs, chunk := wt, chunkSize(smp.size)
		if smp.grown {
			bytes, objs = wt*float64(smp.added), 0
			chunk -= min(chunk, chunkSize(smp.oldSize))
		}
		v = bytes * bytes * (1 - 1/wt)
		held := !smp.freed && (b.MinAge <= 0 || w.Duration-smp.at >= b.MinAge)
		if held {
			chunks += wt * float64(chunk)
		}
		// A completed short stack's estimates are shared out among the
		// full stacks it may be, its sampled counts go to the likeliest.
		to := own
		own[0].Site = smp.site
		if js := b.joinedSite(smp.pend); js >= 0 {
			// Cut short when added, joined since (rejoin.go).
			own[0].Site = js
			if smp.partial == 0 {
				p.Incomplete--
				p.Truncated--
			}
		} else if smp.partial > 0 {
			if sh := shares[smp.partial-1]; sh != nil {
				to = sh
				p.Completed++
			} else {
				p.Incomplete++
				p.Truncated++
				p.ShortLeft++
			}
		}
		for i, sh := range to {
			a := &accs[sh.Site]
			f := sh.Frac
			if i == 0 {
				a.counts.Alloc++
				a.counts.AllocBytes += smp.added
				if held {
					a.counts.InUse++
					a.counts.InUseBytes += smp.added
					if smp.leaked {
						a.counts.Leaked++
					}
				}
			}
			a.est.AllocObjects += f * objs
			a.est.AllocBytes += f * bytes
			a.est.AllocBytesVar += f * f * v
			if held {
				a.est.InUseObjects += f * objs
				a.est.InUseBytes += f * bytes
				a.est.InUseBytesVar += f * f * v
				if smp.leaked {
					a.est.LeakedObjects += f * objs
					a.est.LeakedBytes += f * bytes
				}
			}
			if smp.kind != "" {
				if a.kinds == nil {
					a.kinds = map[string]bool{}
				}
				a.kinds[smp.kind] = true
			}
		}
	}
	p.InUseChunkBytes = chunks
	ids := b.mappings(p)
	keys := make([]string, 0, len(b.sites))
	for i, st := range b.sites {
		if accs[i].counts.Alloc == 0 && accs[i].est.AllocObjects == 0 {
			continue
		}
		frames := renumbered(st.frames, ids, p.Mappings)
		var kinds []string
		for k := range accs[i].kinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		p.Sites = append(p.Sites, Site{Frames: frames, Kinds: kinds, Sampled: accs[i].counts, Est: accs[i].est, Stop: st.stop})
		keys = append(keys, st.key)
	}
	order := make([]int, len(p.Sites))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, c := &p.Sites[order[i]].Est, &p.Sites[order[j]].Est
		if a.InUseBytes != c.InUseBytes {
			return a.InUseBytes > c.InUseBytes
		}
		if a.AllocBytes != c.AllocBytes {
			return a.AllocBytes > c.AllocBytes
		}
		return keys[order[i]] < keys[order[j]]
	})
	sorted := make([]Site, len(p.Sites))
	for i, k := range order {
		sorted[i] = p.Sites[k]
	}
	p.Sites = sorted
	return p
}

// mappings fills p.Mappings from the modules seen, the main executable
// first (pprof takes the first mapping for the program), then by address;
// ids maps a module index to its mapping's ID.
func (b *Builder) mappings(p *Profile) (ids []int) {
	order := make([]int, len(b.mods))
	for i := range order {
		order[i] = i
	}
	main := make([]bool, len(b.mods))
	for i, m := range b.mods {
		main[i] = isMainExecutable(m)
	}
	sort.SliceStable(order, func(i, j int) bool {
		mi, mj := main[order[i]], main[order[j]]
		if mi != mj {
			return mi
		}
		return b.mods[order[i]].Start < b.mods[order[j]].Start
	})
	ids = make([]int, len(b.mods))
	for k, i := range order {
		m := b.mods[i]
		ids[i] = k + 1
		p.Mappings = append(p.Mappings, Mapping{ID: k + 1, Start: m.Start, Limit: m.End, Offset: fileOffset(m, m.Start),
			File: m.Path, BuildID: m.BuildID()})
	}
	return ids
}

// isMainExecutable: the program, not a library: it names an interpreter,
// or is not position-independent at all.
func isMainExecutable(m *module.Module) bool {
	ef, err := m.ELF()
	if err != nil {
		return false
	}
	if ef.Type == elf.ET_EXEC {
		return true
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// fileOffset is the offset in m's file that is mapped at addr, from the
// loadable segment holding it (the kernel maps whole pages, so the
// segment's page-aligned start counts).
func fileOffset(m *module.Module, addr uint64) uint64 {
	ef, err := m.ELF()
	if err != nil {
		return 0
	}
	vaddr := addr - m.Bias
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		const page = 0xfff
		start := p.Vaddr &^ page
		if vaddr >= start && vaddr < p.Vaddr+p.Memsz {
			return p.Off&^page + (vaddr - start)
		}
	}
	return 0
}

// renumbered is a copy of frames with their mappings numbered as ids says
// (the profile's order, main executable first), marking in ms the mappings
// a frame has a file:line of.
func renumbered(frames []Frame, ids []int, ms []Mapping) []Frame {
	out := make([]Frame, len(frames))
	for i, f := range frames {
		if f.MappingID != 0 {
			f.MappingID = ids[f.MappingID-1]
			if f.File != "" {
				ms[f.MappingID-1].HasLines = true
			}
		}
		out[i] = f
	}
	return out
}

// DropFreed forgets the samples of blocks freed since, so that a Builder
// kept for a long time (arenactl record) holds memory for what is held
// only: the held samples are at most the held bytes over the rate. Afterwards the
// profile's alloc figures count only what is still held; its in-use
// figures are unchanged. A block's samples are freed together
// (freeBlock), so the chains by sample.next stay whole. Frees whose
// allocation never came (it was dropped, both rings full) and that came
// before `before` are forgotten too: an allocation's record comes a few
// drains late at most. It returns how many samples were dropped.
func (b *Builder) DropFreed(before time.Duration) int {
	for addr, list := range b.orphans {
		kept := list[:0]
		for _, o := range list {
			if o.at >= before {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			delete(b.orphans, addr)
		} else {
			b.orphans[addr] = kept
		}
	}
	at := make([]int32, len(b.samples)) // 1 + each kept sample's new index
	kept := b.samples[:0:0]
	for i := range b.samples {
		if !b.samples[i].freed {
			at[i] = int32(len(kept) + 1)
			kept = append(kept, b.samples[i])
		}
	}
	dropped := len(b.samples) - len(kept)
	if dropped == 0 {
		return 0
	}
	for i := range kept {
		if n := kept[i].next; n != 0 {
			kept[i].next = at[n-1]
		}
	}
	for addr, i := range b.live {
		if at[i] == 0 {
			delete(b.live, addr) // a freed block's: nothing more can free it
			continue
		}
		b.live[addr] = int(at[i]) - 1
	}
	b.samples = kept
	return dropped
}
