package glibc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/glibc/libc"
	"github.com/arenactl/arenactl/internal/maps"
	"github.com/arenactl/arenactl/internal/module"
)

// BuildIDInMemory reads the GNU build-id of the ELF object whose first page
// is mapped at start, from memory alone: the ELF header, the program
// headers and the PT_NOTE they point to. A kernel core holds the first page
// of every mapped ELF file (bit 4 of coredump_filter, on by default), which
// is where linkers put .note.gnu.build-id.
func BuildIDInMemory(mem Memory, start uint64) (string, error) {
	ph, bias, err := programHeadersInMemory(mem, start)
	if err != nil {
		return "", err
	}
	bo := binary.LittleEndian
	for i := 0; i+56 <= len(ph); i += 56 {
		p := ph[i:]
		if elf.ProgType(bo.Uint32(p)) != elf.PT_NOTE || bo.Uint64(p[32:]) > 1<<16 {
			continue
		}
		b, err := readBytes(mem, bias+bo.Uint64(p[16:]), bo.Uint64(p[32:]))
		if err != nil {
			continue
		}
		if id := module.FindNote(b, bo, "GNU", 3); id != nil {
			return hex.EncodeToString(id), nil
		}
	}
	return "", errors.New("no build-id note in memory")
}

// programHeadersInMemory reads the program headers of the ELF object whose
// first page is mapped at start, and its load bias (where the segment at
// file offset 0 is mapped, less its virtual address).
func programHeadersInMemory(mem Memory, start uint64) (ph []byte, bias uint64, err error) {
	eh, err := readBytes(mem, start, 64)
	if err != nil {
		return nil, 0, err
	}
	if !bytes.Equal(eh[:4], []byte(elf.ELFMAG)) || eh[elf.EI_CLASS] != byte(elf.ELFCLASS64) || eh[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		return nil, 0, errors.New("no 64-bit little-endian ELF header in memory")
	}
	bo := binary.LittleEndian
	phoff, phentsize, phnum := bo.Uint64(eh[32:]), uint64(bo.Uint16(eh[54:])), uint64(bo.Uint16(eh[56:]))
	if phentsize != 56 || phnum == 0 || phnum > 256 || phoff > 1<<20 {
		return nil, 0, errors.New("implausible program headers")
	}
	ph, err = readBytes(mem, start+phoff, phnum*phentsize)
	if err != nil {
		return nil, 0, err
	}
	bias = start
	for i := uint64(0); i < phnum; i++ {
		p := ph[i*phentsize:]
		if elf.ProgType(bo.Uint32(p)) == elf.PT_LOAD && bo.Uint64(p[8:]) == 0 {
			bias = start - bo.Uint64(p[16:])
			break
		}
	}
	return ph, bias, nil
}

// MemoryOnly is libc as a core's memory shows it without libc's file.
type MemoryOnly struct {
	Libc    *libc.Libc // Version is the newest that fits, MinVersion the oldest
	Layout  layouts.Layout
	Anchors Anchors
	// SameFormat: every version that fits prints malloc_info alike, so the
	// XML is glibc's whichever it was.
	SameFormat bool
	Evidence   []string
	// Notes say what a reader should know of how sure the reading is
	// (a stated version memory contradicts), for the core's notes.
	Notes []string

	fits []int // the minor versions memory fits, oldest first
}

// FromMemory finds libc's allocator in memory alone, for a core whose libc
// file is missing or is not the one the process ran: main_arena by its
// run-time signature (empty bins that point to themselves, in libc's
// writable memory, tried at the bins offset of every layout: 0x68, 0x70,
// 0x18, and kept only when the arena ring closes on it), mp_ by its
// pattern (sbrk_base at the start of the main heap, the defaults of
// arena_test, arena_max, n_mmaps_max and the tcache fields, counters that
// agree with each other), and the version by a vote of what memory says:
// the bins offset and the fields after the arena ring, heap_info's size
// (a thread arena lies 0x20 or 0x30 past its heap's start), the size of
// tcache_perthread_struct (0x250, 0x290, 0x300: the first chunk of a heap
// is the tcache of the thread that made it), whether fastbin and tcache
// links are mangled (safe-linking), and which layout of mp_ is found.
// Versions that differ in nothing memory shows (2.30 and 2.31, say, which
// differ in malloc_info's format only) are reported as a range; the walk
// uses the newest, and SameFormat says whether the range prints alike.
// What libc states of its own version, its banner in memory or its file
// name, is believed over that range (believe): it narrows the range where
// memory agrees, and where it does not a note says so.
func FromMemory(ms []maps.Mapping, mem Memory) (*MemoryOnly, error) {
	m0, ok := libc.LibcMapping(ms)
	if !ok {
		return nil, libc.ErrNoLibc
	}
	l, regions, err := objectRegions(ms, mem, m0, 4<<20)
	if err != nil {
		return nil, err
	}
	l.Source = SourceMemory
	e := newEvidence(ms, mem, regions)
	r, err := e.read(l)
	if err != nil {
		return nil, err
	}
	r.Anchors.Method = "memory only: self-referential bins in libc's data; mp_ by its defaults and sbrk_base"
	return r, nil
}

func newEvidence(ms []maps.Mapping, mem Memory, regions []region) *memEvidence {
	return &memEvidence{ms: ms, mem: mem, regions: regions, states: map[stateKey]*stateObs{}, mps: map[mpKey]*mpObs{}}
}

// read finds the allocator of l in the regions e was given, and the
// versions it fits.
func (e *memEvidence) read(l *libc.Libc) (*MemoryOnly, error) {
	var fits []int
	for m := 17; m <= 43; m++ {
		lay, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: m})
		if e.fits(lay) {
			fits = append(fits, m)
		}
	}
	if len(fits) == 0 {
		return nil, fmt.Errorf("%s's memory matches no glibc layout arenactl knows (2.17 to 2.43): %s", e.objectName(), e.summary())
	}
	lo, hi := fits[0], fits[len(fits)-1]
	lay, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: hi})
	st, mp := e.state(lay), e.mp(lay)
	r := &MemoryOnly{Layout: lay, SameFormat: true, Libc: l, fits: fits}
	for _, m := range fits {
		other, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: m})
		r.SameFormat = r.SameFormat && formatOf(other) == formatOf(lay)
	}
	r.Anchors = Anchors{MainArena: st.addr, Mp: mp.addr}
	l.Version = layouts.Version{Major: 2, Minor: hi}
	if lo != hi {
		l.MinVersion = layouts.Version{Major: 2, Minor: lo}
	}
	r.Evidence = e.describe(lay)
	l.VersionFrom = "memory only: " + strings.Join(r.Evidence, "; ")
	if lo != hi {
		l.VersionFrom += fmt.Sprintf("; fits glibc 2.%d to 2.%d", lo, hi)
		if len(fits) != hi-lo+1 {
			l.VersionFrom += fmt.Sprintf(" (%d of them)", len(fits))
		}
	}
	e.believe(r, statedVersions(l, e.mem))
	return r, nil
}

// formatOf is what decides how malloc_info prints.
type format struct {
	sizePrefix, unsortedPrefix                               string
	restTop, subheaps, mmapLine, fastTotals, garbageUnsorted bool
}

func formatOf(l layouts.Layout) format {
	return format{l.SizePrefix, l.UnsortedPrefix, l.RestIncludesTop, l.AllSubheaps, l.MmapLine, l.FastTotals, l.GarbageUnsorted}
}

// region is a copy of one of libc's writable mappings.
type region struct {
	start uint64
	b     []byte
	// selfs[j] counts the words j, j-2, j-4... that begin an empty bin
	// (fd and bk both hold the word's address less 16): how many
	// self-referential bins an arena has is then a difference of two, not
	// 127 reads at every offset of a static program's megabytes of data.
	selfs []int32
}

// selfBinsAt is selfBins of the arena at byte off of r, for lay.
func (r *region) selfBinsAt(off uint64, lay layouts.Layout) int {
	if r.selfs == nil {
		n := len(r.b) / 8
		r.selfs = make([]int32, n)
		for j := 0; j < n; j++ {
			if j >= 2 {
				r.selfs[j] = r.selfs[j-2]
			}
			self := r.start + uint64(j)*8 - 16
			if j+1 < n && le(r.b, int64(j)*8) == self && le(r.b, int64(j+1)*8) == self {
				r.selfs[j]++
			}
		}
	}
	j0 := int((off + uint64(lay.StateBins)) / 8)
	j1 := j0 + 2*(nbins-2)
	if j1 >= len(r.selfs) {
		return 0
	}
	n := r.selfs[j1]
	if j0 >= 2 {
		n -= r.selfs[j0-2]
	}
	return int(n)
}

// maxRegions bounds the bytes objectRegions copies in all.
const maxRegions = 64 << 20

// objectRegions copies the writable mappings of the ELF object whose
// lowest mapping is m0 (libc, or a static executable), up to limit bytes
// each, and the bss right after them; unreadable pages read as zeros.
func objectRegions(ms []maps.Mapping, mem Memory, m0 maps.Mapping, limit uint64) (*libc.Libc, []region, error) {
	l := &libc.Libc{Path: m0.Path, Base: m0.Start - m0.Offset}
	var data []maps.Mapping
	end := uint64(0)
	for _, m := range ms {
		if m.Path == m0.Path && m.Start >= m0.Start {
			l.Mappings = append(l.Mappings, m)
			if m.Executable() {
				l.Text = append(l.Text, m)
			}
			if m.Writable() {
				data = append(data, m)
			}
			end = max(end, m.End)
		}
	}
	for _, m := range ms {
		if m.Start == end && m.Path == "" && m.Writable() {
			data = append(data, m) // the bss past the file's last page
		}
	}
	var regions []region
	total := uint64(0)
	for _, m := range data {
		// An object's data is far smaller; a bss past it that is not
		// (a program's big static arrays) holds neither main_arena nor
		// mp_, which are initialised data. A crafted core may name the
		// object in many mappings: what is copied is bounded in all.
		if m.Size() > limit || m.Path == "" && m.Size() > 4<<20 || total+m.Size() > maxRegions {
			continue
		}
		total += m.Size()
		b := make([]byte, m.Size())
		for a := uint64(0); a < m.Size(); a += pageSz {
			mem.ReadAt(b[a:min(a+pageSz, m.Size())], m.Start+a) // a page not in the core stays zero
		}
		regions = append(regions, region{start: m.Start, b: b})
	}
	if len(regions) == 0 {
		return nil, nil, fmt.Errorf("%s has no writable memory in the core", m0.Path)
	}
	return l, regions, nil
}

// memEvidence gathers, once per layout of the arena and of mp_, what memory
// says; fits checks one version against it.
type memEvidence struct {
	ms      []maps.Mapping
	mem     Memory
	regions []region
	states  map[stateKey]*stateObs
	mps     map[mpKey]*mpObs
	// static: the regions are a static executable's, which also holds
	// the program's own data, and whose main heap starts with the static
	// TLS block that __libc_setup_tls (csu/libc-tls.c) takes with sbrk
	// before malloc's first sbrk: sbrk_base, and so system_mem, are not
	// page-aligned there.
	static bool
}

// objectName names the object that holds the allocator, for messages.
func (e *memEvidence) objectName() string {
	if e.static {
		return "the executable"
	}
	return "libc"
}

type stateKey struct{ bins, next, size int64 }

// stateObs is main_arena as one arena layout finds it, and what the arenas
// it leads to say.
type stateObs struct {
	addr       uint64
	self       int         // its self-referential bins
	linked     int         // its non-empty bins whose first chunk links back to the bin
	others     []candidate // other places that pass the checks main_arena does
	st         []byte      // its struct
	plausible  bool        // the fields after the ring fit this layout
	heapInfo   uint64      // 0x20 or 0x30, 0 when no thread arena tells
	thread     int         // thread arenas
	tcacheSize uint64      // 0 when no heap starts with a tcache
	tcacheN    int
	mangled    int // links that are valid once demangled (safe-linking)
	plain      int // links that are valid as they are
}

type mpKey struct{ size, sbrk int64 }

type mpObs struct {
	addr  uint64
	score int
	err   error
}

func (e *memEvidence) rw(a uint64) bool {
	m, ok := maps.Find(e.ms, a)
	return ok && m.Readable() && m.Writable()
}

func (e *memEvidence) word(a uint64) uint64 {
	v, _ := readWord(e.mem, a)
	return v
}

// fits reports whether what memory shows agrees with lay's version.
func (e *memEvidence) fits(lay layouts.Layout) bool {
	st := e.state(lay)
	if st.addr == 0 || !st.plausible {
		return false
	}
	if st.heapInfo != 0 && st.heapInfo != uint64(lay.HeapInfoSize) {
		return false
	}
	if st.tcacheSize != 0 && st.tcacheSize != lay.TcacheChunkSize {
		return false
	}
	if sl, known := st.safeLinking(); known && sl != lay.SafeLinking {
		return false
	}
	return e.mp(lay).err == nil
}

// safeLinking decides from the links' votes; known is false without a
// clear majority.
func (s *stateObs) safeLinking() (sl, known bool) {
	switch {
	case s.mangled > 2*s.plain:
		return true, true
	case s.plain > 2*s.mangled:
		return false, true
	}
	return false, false
}

// state finds main_arena for lay's arena layout and reads the evidence its
// ring holds.
func (e *memEvidence) state(lay layouts.Layout) *stateObs {
	key := stateKey{lay.StateBins, lay.StateNext, lay.StateSize}
	if s, ok := e.states[key]; ok {
		return e.withFields(s, lay)
	}
	s := &stateObs{}
	e.states[key] = s
	for i := range e.regions {
		r := &e.regions[i]
		for off := uint64(0); off+uint64(lay.StateSize) <= uint64(len(r.b)); off += 8 {
			addr := r.start + off
			st := r.b[off : off+uint64(lay.StateSize)]
			n := r.selfBinsAt(off, lay)
			if n < 16 || !e.plausibleArena(st, lay, addr) || checkMainArena(e.mem, lay, addr) != nil {
				continue
			}
			c := candidate{addr, n, e.linkedBins(st, lay, addr), st}
			switch {
			case s.addr == 0:
			case c.linked < s.linked || c.linked == s.linked && c.self <= s.self:
				s.others = append(s.others, c)
				continue
			default:
				s.others = append(s.others, candidate{s.addr, s.self, s.linked, s.st})
			}
			s.addr, s.self, s.linked, s.st = c.addr, c.self, c.linked, c.st
		}
	}
	if s.addr == 0 {
		return s
	}
	e.ringEvidence(s, lay)
	return e.withFields(s, lay)
}

// candidate is a place that passes the checks of main_arena.
type candidate struct {
	addr   uint64
	self   int
	linked int
	st     []byte
}

// linkedBins counts the non-empty bins of the arena image st (at addr)
// whose first chunk's bk points back at the bin, as unlink_chunk in
// malloc/malloc.c requires of every chunk in a bin: a copy of main_arena
// elsewhere has the same bins, but the chunks link back to the original.
func (e *memEvidence) linkedBins(st []byte, lay layouts.Layout, addr uint64) int {
	n := 0
	for i := 1; i < nbins; i++ {
		off := lay.StateBins + int64(i-1)*16
		self := addr + uint64(off) - 16
		if fd := le(st, off); fd != self && e.word(fd+24) == self {
			n++
		}
	}
	return n
}

// rivals are the other candidates that the bins' links do not tell from
// the one chosen: as many of their bins link back to them.
func (s *stateObs) rivals() []uint64 {
	var out []uint64
	for _, c := range s.others {
		if c.linked == s.linked {
			out = append(out, c.addr)
		}
	}
	return out
}

// withFields checks the fields after the ring against lay: arenas of one
// bins offset differ there (attached_threads from 2.23).
func (e *memEvidence) withFields(s *stateObs, lay layouts.Layout) *stateObs {
	if s.addr == 0 {
		return s
	}
	sys, maxSys := le(s.st, lay.StateSystemMem), le(s.st, lay.StateMaxSystemMem)
	align := uint64(pageSz)
	if e.static {
		align = 16
	}
	ok := sys%align == 0 && (maxSys == 0 || sys <= maxSys)
	if lay.StateAttached >= 0 {
		ok = ok && le(s.st, lay.StateAttached) < 4096 // a thread count, where the older layout has system_mem
	}
	c := *s
	c.plausible = ok
	return &c
}

// plausibleArena checks a candidate main_arena's bins and top: each bin is
// empty (points to itself) or points to aligned chunks in writable memory.
func (e *memEvidence) plausibleArena(st []byte, lay layouts.Layout, addr uint64) bool {
	for i := 1; i < nbins; i++ {
		off := lay.StateBins + int64(i-1)*16
		self := addr + uint64(off) - 16
		fd, bk := le(st, off), le(st, off+8)
		if fd == self && bk == self {
			continue
		}
		if fd%16 != 0 || bk%16 != 0 || !e.rw(fd) || !e.rw(bk) {
			return false
		}
	}
	top := le(st, lay.StateTop)
	return top == addr+uint64(lay.StateBins)-16 || top%16 == 0 && e.rw(top)
}

// ringEvidence reads what the arenas of main_arena's ring say of the
// version: where thread arenas lie in their heaps, the first chunk of every
// heap, and whether free-list links are mangled.
func (e *memEvidence) ringEvidence(s *stateObs, lay layouts.Layout) {
	hi := map[uint64]int{}
	tc := map[uint64]int{}
	var firsts []uint64 // first chunks of heaps
	if top := le(s.st, lay.StateTop); uint32(le(s.st, lay.StateFlags))&2 == 0 && e.rw(top) {
		if m, ok := maps.Find(e.ms, top); ok {
			// The main heap's first chunk is at sbrk_base, which is
			// where the system_mem bytes below the heap's end begin (the
			// heap's start, but in a static program: see static).
			first := m.Start
			if sys := le(s.st, lay.StateSystemMem); e.static && sys < m.Size() {
				first = m.End - sys
			}
			firsts = append(firsts, (first+15)&^15)
		}
	}
	for _, a := range ArenaRing(e.mem, lay, Anchors{MainArena: s.addr}) {
		if a != s.addr {
			s.thread++
			heap := a &^ (defaultHeap - 1)
			if off := a - heap; (off == 0x20 || off == 0x30) && e.word(heap) == a {
				hi[off]++
			}
			firsts = append(firsts, (a+uint64(lay.StateSize)+15)&^15)
		}
		for i := 0; i < lay.NFastbins; i++ {
			p := e.word(a + uint64(lay.StateFastbins) + uint64(i)*8)
			for n := 0; n < 32 && p != 0 && p%16 == 0 && e.rw(p); n++ {
				p = s.vote(e, p+16)
			}
		}
	}
	for _, c := range firsts {
		if sz := e.word(c+8) &^ sizeBits; sz == 0x250 || sz == 0x290 || sz == 0x300 {
			tc[sz]++
			e.tcacheLinks(s, c+16, sz)
		}
	}
	s.heapInfo, _ = most(hi)
	s.tcacheSize, s.tcacheN = most(tc)
}

// tcacheLinks votes on the links of the tcache_perthread_struct at user
// pointer tp, whose chunk has size sz.
func (e *memEvidence) tcacheLinks(s *stateObs, tp, sz uint64) {
	bins, entries := 64, uint64(0x80)
	switch sz {
	case 0x250:
		entries = 0x40
	case 0x300:
		bins, entries = 76, 0x98
	}
	for i := 0; i < bins; i++ {
		p := e.word(tp + entries + uint64(i)*8)
		for n := 0; n < 16 && p != 0 && p%16 == 0 && e.rw(p); n++ {
			p = s.vote(e, p)
		}
	}
}

// vote reads the link stored at pos and says whether it makes sense as
// is or demangled (safe-linking stores (pos >> 12) ^ next), returning the
// next element, or 0 at the end or when it makes sense neither way.
func (s *stateObs) vote(e *memEvidence, pos uint64) uint64 {
	raw := e.word(pos)
	switch {
	case raw == 0:
		s.plain++ // the end of a list, unmangled
		return 0
	case raw == pos>>12:
		s.mangled++ // the end of a list, mangled
		return 0
	}
	dem := raw ^ pos>>12
	plainOK, mangledOK := raw%16 == 0 && e.rw(raw), dem%16 == 0 && e.rw(dem)
	switch {
	case plainOK && !mangledOK:
		s.plain++
		return raw
	case mangledOK && !plainOK:
		s.mangled++
		return dem
	}
	return 0
}

// most returns the key with the most votes and its count (0, 0 for none).
func most(votes map[uint64]int) (uint64, int) {
	var best uint64
	n := 0
	for k, v := range votes {
		if v > n || v == n && k > best {
			best, n = k, v
		}
	}
	return best, n
}

// mp finds mp_ for lay's layout of it: the unique best match in libc's
// writable memory.
func (e *memEvidence) mp(lay layouts.Layout) *mpObs {
	key := mpKey{lay.MpSize, lay.MpSbrkBase}
	if o, ok := e.mps[key]; ok {
		return o
	}
	o := &mpObs{}
	e.mps[key] = o
	st := e.state(lay)
	var heap maps.Mapping
	top, sys := uint64(0), uint64(0)
	if st.addr != 0 {
		top, sys = le(st.st, lay.StateTop), le(st.st, lay.StateSystemMem)
		if uint32(le(st.st, lay.StateFlags))&2 != 0 || !e.rw(top) {
			top = 0 // not initialised, or not contiguous: sbrk_base says nothing
		} else {
			heap, _ = maps.Find(e.ms, top)
		}
	}
	tie := false
	for _, r := range e.regions {
		for off := uint64(0); off+uint64(lay.MpSize) <= uint64(len(r.b)); off += 8 {
			sc := mpScore(r.b[off:off+uint64(lay.MpSize)], lay, heap, top, sys, e.rw)
			switch {
			case sc > o.score:
				o.addr, o.score, tie = r.start+off, sc, false
			case sc == o.score && sc > 0:
				tie = true
			}
		}
	}
	switch {
	case o.score < 4:
		o.err = fmt.Errorf("no mp_ of the layout of glibc %s in %s's data", layoutVersions(lay), e.objectName())
	case tie:
		o.err = fmt.Errorf("several places in %s's data look like mp_ of the layout of glibc %s", e.objectName(), layoutVersions(lay))
	}
	return o
}

// mpScore rates b as mp_ of layout lay: 0 when its fields contradict each
// other or the main heap (sbrk_base must lie in the heap that holds the
// main arena's top, below the top), else one point per default value.
func mpScore(b []byte, lay layouts.Layout, heap maps.Mapping, top, sys uint64, rw func(uint64) bool) int {
	w := func(off int64) uint64 { return le(b, off) }
	i32 := func(off int64) int32 { return int32(uint32(le(b, off))) }
	sbrk := w(lay.MpSbrkBase)
	score := 0
	switch {
	case top != 0 && (sbrk < heap.Start || sbrk > top):
		return 0
	case top != 0 && (sbrk == heap.Start || sys != 0 && sbrk+sys == heap.End):
		// malloc's first sbrk set sbrk_base, and everything sbrk'd since
		// is system_mem: the heap's start, unless something (a static
		// program's TLS) was sbrk'd before.
		score += 2
	case top == 0 && sbrk != 0 && !rw(sbrk):
		return 0
	}
	nm, nmMax, maxNm := i32(lay.MpNMmaps), i32(lay.MpNMmapsMax), i32(lay.MpMaxNMmaps)
	mm, maxMm := w(lay.MpMmappedMem), w(lay.MpMaxMmappedMem)
	if nm < 0 || nm > maxNm || nmMax < 0 || mm > maxMm || mm%pageSz != 0 || maxMm%pageSz != 0 || uint32(i32(lay.MpNoDynThreshold)) > 1 {
		return 0
	}
	trim, mmapT := w(lay.MpTrimThreshold), w(lay.MpMmapThreshold)
	for _, ok := range []bool{
		w(lay.MpArenaTest) == layouts.DefaultArenaTest, w(lay.MpArenaMax) == 0, nmMax == layouts.DefaultMmapMax,
		w(lay.MpTopPad) == layouts.DefaultThreshold, trim == layouts.DefaultThreshold || trim == 2*mmapT,
	} {
		if ok {
			score++
		}
	}
	if lay.MpHpPagesize >= 0 && w(lay.MpHpPagesize) == 0 {
		score++
	}
	if lay.MpTcacheBins >= 0 {
		tb, tc, tm := w(lay.MpTcacheBins), w(lay.MpTcacheCount), w(lay.MpTcacheMaxBytes)
		if tb == 0 || tb > 128 || tc > 0xffff || tm > 1<<20 {
			return 0
		}
		for _, ok := range []bool{tb == 64 || tb == 76, tc == 7 || tc == 16, tm == 1032 || tm == 1040 || tm == 1041} {
			if ok {
				score++
			}
		}
	}
	return score
}

// layoutVersions names the versions that share lay's mp_ layout, for
// messages.
func layoutVersions(lay layouts.Layout) string {
	lo, hi := 0, 0
	for m := 17; m <= 43; m++ {
		o, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: m})
		if o.MpSize == lay.MpSize && o.MpSbrkBase == lay.MpSbrkBase {
			if lo == 0 {
				lo = m
			}
			hi = m
		}
	}
	if lo == hi {
		return fmt.Sprintf("2.%d", lo)
	}
	return fmt.Sprintf("2.%d to 2.%d", lo, hi)
}

// describe says what memory showed, for lay's layouts.
func (e *memEvidence) describe(lay layouts.Layout) []string {
	st, mp := e.state(lay), e.mp(lay)
	out := []string{fmt.Sprintf("main_arena at %#x (bins at +%#x, %d of them empty)", st.addr, lay.StateBins, st.self)}
	if st.heapInfo != 0 {
		out = append(out, fmt.Sprintf("heap_info of %#x bytes (%d thread arenas)", st.heapInfo, st.thread))
	} else {
		out = append(out, "no thread arena to size heap_info")
	}
	if st.tcacheSize != 0 {
		out = append(out, fmt.Sprintf("tcache of %#x bytes (%d heaps start with one)", st.tcacheSize, st.tcacheN))
	} else {
		out = append(out, "no heap starts with a tcache")
	}
	switch sl, known := st.safeLinking(); {
	case !known:
		out = append(out, fmt.Sprintf("safe-linking undecided (%d mangled, %d plain links)", st.mangled, st.plain))
	case sl:
		out = append(out, fmt.Sprintf("safe-linking (%d of %d links mangled)", st.mangled, st.mangled+st.plain))
	default:
		out = append(out, fmt.Sprintf("no safe-linking (%d of %d links plain)", st.plain, st.mangled+st.plain))
	}
	if mp.err != nil {
		return append(out, mp.err.Error())
	}
	return append(out, fmt.Sprintf("mp_ at %#x in the layout of glibc %s", mp.addr, layoutVersions(lay)))
}

// summary says what memory showed when no version fits.
func (e *memEvidence) summary() string {
	for m := 43; m >= 17; m-- {
		lay, _ := layouts.LayoutFor(layouts.Version{Major: 2, Minor: m})
		if st := e.state(lay); st.addr != 0 {
			return strings.Join(e.describe(lay), "; ")
		}
	}
	return "no main_arena (an arena of self-referential bins whose ring closes) in " + e.objectName() + "'s writable memory"
}
