package glibc

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/errkind"
	"github.com/arenactl/arenactl/internal/glibc/layouts"
	"github.com/arenactl/arenactl/internal/maps"
)

// AmbiguousError: more than one place in a static executable's writable
// data passes every check main_arena does, and memory alone cannot tell
// which is the allocator's (the program's own data may hold a copy).
type AmbiguousError struct {
	Exe   string
	Addrs []uint64
}

func (e *AmbiguousError) Error() string {
	a := make([]string, len(e.Addrs))
	for i, x := range e.Addrs {
		a[i] = fmt.Sprintf("%#x", x)
	}
	return fmt.Sprintf("%d places in the writable data of %s look like main_arena (%s), as many of whose bins' chunks link back to each: memory alone cannot tell which is the allocator's",
		len(e.Addrs), e.Exe, strings.Join(a, ", "))
}

func (e *AmbiguousError) Is(target error) bool { return target == errkind.ErrMemoryOnly }

// FromMemoryStatic finds the allocator that gcc -static linked into the
// executable exe (its path as the core's mappings name it) from a core's
// memory alone, as FromMemory finds libc's: main_arena and mp_ are the
// executable's initialised data (malloc/malloc.c: main_arena's initialiser
// sets next to itself; mp_'s sets the defaults), so they lie in its
// writable file mappings. The program's own data lies there too, so the
// match must be unique: a second place that passes every check refuses
// the core (AmbiguousError). How sure the match is, is said in the
// anchors' Method: which of the checks of main_arena held.
func FromMemoryStatic(ms []maps.Mapping, mem Memory, exe string) (*MemoryOnly, error) {
	var m0 maps.Mapping
	found := false
	for _, m := range ms {
		if m.Path == exe && (!found || m.Start < m0.Start) {
			m0, found = m, true
		}
	}
	if !found {
		return nil, fmt.Errorf("the executable %s is not among the core's mappings", exe)
	}
	// A static program's data is its own and glibc's: larger than
	// libc's, still bounded.
	l, regions, err := objectRegions(ms, mem, m0, maxScan)
	if err != nil {
		return nil, err
	}
	l.Static, l.Source = true, SourceStaticMemory
	if ph, bias, err := programHeadersInMemory(mem, m0.Start); err == nil && m0.Offset == 0 {
		l.Base = bias // 0 for a non-PIE executable, whose addresses are its own
		l.SetTLSSize(tlsSizeOf(ph))
	}
	e := newEvidence(ms, mem, regions)
	e.static = true
	r, err := e.read(l)
	if err != nil {
		return nil, err
	}
	st := e.state(r.Layout)
	if rivals := st.rivals(); len(rivals) > 0 {
		return nil, &AmbiguousError{Exe: exe, Addrs: append([]uint64{st.addr}, rivals...)}
	}
	held, checks := e.mainArenaChecks(r.Layout, r.Anchors)
	unique := "the only candidate"
	if n := len(st.others); n > 0 {
		unique = fmt.Sprintf("the one candidate of %d whose bins' chunks link back to it", n+1)
	}
	r.Anchors.Method = fmt.Sprintf("memory only: main_arena in the executable's writable data, %s; %d of %d checks held (%s); mp_ by its defaults and sbrk_base",
		unique, held, len(checks), strings.Join(checks, ", "))
	return r, nil
}

// maxStaticTLS bounds the TLS block whose words are tried as tcache's slot:
// a program's own __thread variables are rarely more than a few KiB.
const maxStaticTLS = 1 << 20

// tlsSizeOf is what internal/glibc/libc takes from a file's PT_TLS, from
// the program headers ph in memory: the TLS block's size rounded up to its
// alignment, how far below the thread pointer a static program's block
// starts, so that every thread's tcache is found as with the file
// (libc.Libc.TLSOffsets). 0 when there is none, or it is implausible.
func tlsSizeOf(ph []byte) uint64 {
	for i := 0; i+56 <= len(ph); i += 56 {
		p := ph[i:]
		if elf.ProgType(binary.LittleEndian.Uint32(p)) != elf.PT_TLS {
			continue
		}
		memsz, align := binary.LittleEndian.Uint64(p[40:]), max(binary.LittleEndian.Uint64(p[48:]), 1)
		if memsz > maxStaticTLS || align > 4096 || align&(align-1) != 0 {
			return 0
		}
		return (memsz + align - 1) &^ (align - 1)
	}
	return 0
}

// mainArenaChecks says which of the signs of a static program's
// main_arena hold for the one found: its empty bins point at themselves
// (bin_at in malloc/malloc.c), the ring closes on it, top lies in the
// main heap and its chunk ends where the heap does (sysmalloc keeps the
// top chunk at the break), mp_.sbrk_base lies in that heap below top, and
// sbrk_base + system_mem is the break. The first two are what made it a
// candidate; the others may fail on a sound heap (another caller of sbrk,
// a heap trimmed by hand), so they are counted, not required.
func (e *memEvidence) mainArenaChecks(lay layouts.Layout, a Anchors) (int, []string) {
	st := e.state(lay)
	held := 0
	var out []string
	check := func(ok bool, yes, no string) {
		if ok {
			held++
			out = append(out, yes)
		} else {
			out = append(out, "not: "+no)
		}
	}
	check(true, fmt.Sprintf("%d of %d bins empty and pointing at themselves, %d of the other %d holding chunks that link back", st.self, nbins-1, st.linked, nbins-1-st.self), "")
	ring := len(ArenaRing(e.mem, lay, a))
	check(true, fmt.Sprintf("the arena ring closes through %d arenas", ring), "")

	top, sys := le(st.st, lay.StateTop), le(st.st, lay.StateSystemMem)
	heap, inHeap := maps.Find(e.ms, top)
	inHeap = inHeap && top%16 == 0 && uint32(le(st.st, lay.StateFlags))&2 == 0
	topEnd := uint64(0)
	if inHeap {
		topEnd = top + e.word(top+8)&^sizeBits
	}
	check(inHeap && topEnd == heap.End, "top's chunk ends at the heap's end", "top's chunk ends at the heap's end")
	sbrk := e.word(a.Mp + uint64(lay.MpSbrkBase))
	check(inHeap && sbrk >= heap.Start && sbrk <= top, "mp_.sbrk_base in the heap below top", "mp_.sbrk_base in the heap below top")
	maxSys := le(st.st, lay.StateMaxSystemMem)
	check(inHeap && sbrk+sys == heap.End && sys <= maxSys, "sbrk_base + system_mem is the heap's end", "sbrk_base + system_mem is the heap's end")
	return held, out
}

// HasTLS reports whether the TLS block of a static executable read from
// memory is known, so that each thread's tcache can be looked for in it.
func (r *MemoryOnly) HasTLS() bool { return r.Libc.Static && r.Libc.TLSSize() != 0 }
