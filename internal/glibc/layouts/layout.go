package layouts

import (
	"fmt"

	"github.com/arenactl/arenactl/internal/glibc/mallocinfo"
)

// Layout is everything version-dependent that arenactl needs to read
// glibc's allocator from memory and to print malloc_info as that version
// does. It is data: the walker and the renderer never test version
// numbers. Offsets are those of struct malloc_state, struct malloc_par,
// heap_info and the tcache structs in malloc/malloc.c and malloc/arena.c of
// each version (x86_64);
// an offset of -1 means the field does not exist in that version.
//
// The same offsets hold on aarch64 (issue 31), checked against glibc's
// source: every field is a pointer, size_t, INTERNAL_SIZE_T (size_t), int
// or mutex_t (__libc_lock_t, an int: sysdeps/nptl/libc-lockP.h), 8 and 4
// bytes on both LP64 machines with the same natural alignment;
// MALLOC_ALIGNMENT is sysdeps/generic/malloc-alignment.h's on both (no
// sysdeps/aarch64 or sysdeps/x86_64 override; sysdeps/i386 has one):
// 2 * SIZE_SZ = 16, which __alignof__ (long double) equals on both (x87's
// 80-bit and aarch64's 128-bit long double are both 16-aligned), so
// MINSIZE is 32 and heap_info's pad (-6 * SIZE_SZ & MALLOC_ALIGN_MASK,
// malloc/arena.c) is the same; HEAP_MAX_SIZE is 2 *
// DEFAULT_MMAP_THRESHOLD_MAX = 64 MiB for sizeof (long) 8 (malloc/arena.c,
// malloc/malloc.c), and from 2.35 heap_max_size() depends on the huge page
// size only; TCACHE_MAX_BINS, the tcache counts' type and tcache_entry's
// key and next are machine-independent C. What differs on aarch64 lies
// outside these structs: the page size a heap and an mmapped chunk are
// aligned to (GLRO(dl_pagesize), 4, 16 or 64 KiB: internal/glibc's walk.go,
// trimPage, reads it; its pageSz, 4 KiB, divides them all), the thread pointer's place relative to static TLS (TLS
// variant I, sysdeps/aarch64/nptl/tls.h, where x86_64 has variant II:
// internal/glibc/libc's TLSOffsets and internal/reach's TLS roots), and memory tagging: with
// glibc.mem.tagging (sysdeps/aarch64/libc-mtag.h, 2.33 on) the pointers
// malloc returns, and so tcache entries' next links, carry a tag in their
// top byte (arch.Arch.StripTag).
type Layout struct {
	Profile string // versions sharing this Layout (ProfileName): "A" (2.17) ... "K" (2.35-2.41), "L" (2.42), "M" (2.43)

	// struct malloc_state
	StateFlags, StateFastbins, StateTop, StateBins, StateNext                  int64
	StateNextFree, StateAttached, StateSystemMem, StateMaxSystemMem, StateSize int64
	NFastbins                                                                  int // 10, or 0 on 2.43

	// struct malloc_par mp_
	MpTrimThreshold, MpTopPad, MpMmapThreshold, MpArenaTest, MpArenaMax  int64
	MpHpPagesize, MpNMmaps, MpNMmapsMax, MpMaxNMmaps, MpNoDynThreshold   int64
	MpMmappedMem, MpMaxMmappedMem, MpSbrkBase                            int64
	MpTcacheBins, MpTcacheMaxBytes, MpTcacheCount, MpTcacheUnsortedLimit int64
	MpSize                                                               int64

	HeapInfoSize int64 // heap_info: ar_ptr, prev, size, mprotect_size[, pagesize]

	// MmapTail is how much of an mmapped chunk's region lies past its
	// size: 0, or CHUNK_HDR_SZ from 2.43, where such a chunk is laid out
	// as any other and its prev_size's bit 0 (MMAP_HP) says huge pages
	// (malloc/malloc.c, mmap_set_chunk, mmap_size).
	MmapTail uint64

	// tcache_perthread_struct
	TcacheBins       int   // 0 without tcache
	TcacheCountBytes int   // 1 (char counts) or 2 (uint16_t)
	TcacheEntries    int64 // offset of entries[]
	TcacheChunkSize  uint64
	TcacheCountsDown bool // 2.42+: num_slots counts free slots, not entries

	// Behaviour
	SafeLinking     bool // fastbin and tcache next pointers are mangled (2.32+)
	RestIncludesTop bool // malloc_info counts the top chunk in "rest" (2.31+)
	AllSubheaps     bool // aspace sums every heap and <aspace type="subheaps"> is printed (2.27+)
	GarbageUnsorted bool // <unsorted> is uninitialised stack (2.17, 2.18)
	// Format is how this version prints malloc_info.
	mallocinfo.Format
}

// Offsets of the arena struct, struct malloc_state in malloc/malloc.c: L1
// 2.17-2.22, L2 2.23-2.26 (attached_threads), L3 2.27-2.42 (have_fastchunks),
// L4 2.43 (no fastbins).
var (
	stateL1 = Layout{StateFlags: 4, StateFastbins: 0x08, StateTop: 0x58, StateBins: 0x68, StateNext: 0x868,
		StateNextFree: 0x870, StateAttached: -1, StateSystemMem: 0x878, StateMaxSystemMem: 0x880, StateSize: 0x888, NFastbins: 10}
	stateL2 = Layout{StateFlags: 4, StateFastbins: 0x08, StateTop: 0x58, StateBins: 0x68, StateNext: 0x868,
		StateNextFree: 0x870, StateAttached: 0x878, StateSystemMem: 0x880, StateMaxSystemMem: 0x888, StateSize: 0x890, NFastbins: 10}
	stateL3 = Layout{StateFlags: 4, StateFastbins: 0x10, StateTop: 0x60, StateBins: 0x70, StateNext: 0x870,
		StateNextFree: 0x878, StateAttached: 0x880, StateSystemMem: 0x888, StateMaxSystemMem: 0x890, StateSize: 0x898, NFastbins: 10}
	stateL4 = Layout{StateFlags: 4, StateFastbins: -1, StateTop: 0x08, StateBins: 0x18, StateNext: 0x818,
		StateNextFree: 0x820, StateAttached: 0x828, StateSystemMem: 0x830, StateMaxSystemMem: 0x838, StateSize: 0x840, NFastbins: 0}

	// mp_, struct malloc_par in malloc/malloc.c: P1 2.17-2.23, P2 2.24-2.25,
	// P3 2.26-2.34 (tcache), P4 2.35-2.42 (huge pages), P5 2.43 (thp_mode).
	mpP1 = Layout{MpTrimThreshold: 0, MpTopPad: 8, MpMmapThreshold: 0x10, MpArenaTest: 0x18, MpArenaMax: 0x20, MpHpPagesize: -1,
		MpNMmaps: 0x28, MpNMmapsMax: 0x2c, MpMaxNMmaps: 0x30, MpNoDynThreshold: 0x34, MpMmappedMem: 0x38, MpMaxMmappedMem: 0x40,
		MpSbrkBase: 0x50, MpTcacheBins: -1, MpTcacheMaxBytes: -1, MpTcacheCount: -1, MpTcacheUnsortedLimit: -1, MpSize: 0x58}
	mpP2 = Layout{MpTrimThreshold: 0, MpTopPad: 8, MpMmapThreshold: 0x10, MpArenaTest: 0x18, MpArenaMax: 0x20, MpHpPagesize: -1,
		MpNMmaps: 0x28, MpNMmapsMax: 0x2c, MpMaxNMmaps: 0x30, MpNoDynThreshold: 0x34, MpMmappedMem: 0x38, MpMaxMmappedMem: 0x40,
		MpSbrkBase: 0x48, MpTcacheBins: -1, MpTcacheMaxBytes: -1, MpTcacheCount: -1, MpTcacheUnsortedLimit: -1, MpSize: 0x50}
	mpP3 = Layout{MpTrimThreshold: 0, MpTopPad: 8, MpMmapThreshold: 0x10, MpArenaTest: 0x18, MpArenaMax: 0x20, MpHpPagesize: -1,
		MpNMmaps: 0x28, MpNMmapsMax: 0x2c, MpMaxNMmaps: 0x30, MpNoDynThreshold: 0x34, MpMmappedMem: 0x38, MpMaxMmappedMem: 0x40,
		MpSbrkBase: 0x48, MpTcacheBins: 0x50, MpTcacheMaxBytes: 0x58, MpTcacheCount: 0x60, MpTcacheUnsortedLimit: 0x68, MpSize: 0x70}
	mpP4 = Layout{MpTrimThreshold: 0, MpTopPad: 8, MpMmapThreshold: 0x10, MpArenaTest: 0x18, MpArenaMax: 0x20, MpHpPagesize: 0x30,
		MpNMmaps: 0x3c, MpNMmapsMax: 0x40, MpMaxNMmaps: 0x44, MpNoDynThreshold: 0x48, MpMmappedMem: 0x50, MpMaxMmappedMem: 0x58,
		MpSbrkBase: 0x60, MpTcacheBins: 0x68, MpTcacheMaxBytes: 0x70, MpTcacheCount: 0x78, MpTcacheUnsortedLimit: 0x80, MpSize: 0x88}
	mpP5 = Layout{MpTrimThreshold: 0, MpTopPad: 8, MpMmapThreshold: 0x10, MpArenaTest: 0x18, MpArenaMax: 0x20, MpHpPagesize: 0x38,
		MpNMmaps: 0x44, MpNMmapsMax: 0x48, MpMaxNMmaps: 0x4c, MpNoDynThreshold: 0x50, MpMmappedMem: 0x58, MpMaxMmappedMem: 0x60,
		MpSbrkBase: 0x68, MpTcacheBins: 0x70, MpTcacheMaxBytes: 0x78, MpTcacheCount: 0x80, MpTcacheUnsortedLimit: 0x88, MpSize: 0x90}
)

// Default values of mp_'s first fields in the file image (mp_'s static
// initialiser in malloc/malloc.c): trim_threshold, top_pad and
// mmap_threshold are 128 KiB, arena_test is 8, arena_max 0; n_mmaps_max is
// 65536.
const (
	DefaultThreshold = 0x20000
	DefaultArenaTest = 8
	DefaultMmapMax   = 65536
)

const (
	prefix219 = "\t\t\t\t\t\t\t      "   // 7 tabs + 6 spaces
	prefix220 = "\t\t\t\t\t\t\t        " // 7 tabs + 8 spaces
)

// LayoutFor returns the layout of a glibc version from 2.17 to 2.43. A
// version outside that range is an error: guessing offsets would print
// confident nonsense.
func LayoutFor(v Version) (Layout, error) {
	if v.Major != 2 || v.Minor < 17 || v.Minor > 43 {
		return Layout{}, fmt.Errorf("glibc %s is outside the versions arenactl knows (2.17 to 2.43)", v)
	}
	m := v.Minor
	var l Layout
	switch {
	case m <= 22:
		l = stateL1
	case m <= 26:
		l = stateL2
	case m <= 42:
		l = stateL3
	default:
		l = stateL4
	}
	var mp Layout
	switch {
	case m <= 23:
		mp = mpP1
	case m <= 25:
		mp = mpP2
	case m <= 34:
		mp = mpP3
	case m <= 42:
		mp = mpP4
	default:
		mp = mpP5
	}
	l.MpTrimThreshold, l.MpTopPad, l.MpMmapThreshold, l.MpArenaTest, l.MpArenaMax = mp.MpTrimThreshold, mp.MpTopPad, mp.MpMmapThreshold, mp.MpArenaTest, mp.MpArenaMax
	l.MpHpPagesize, l.MpNMmaps, l.MpNMmapsMax, l.MpMaxNMmaps, l.MpNoDynThreshold = mp.MpHpPagesize, mp.MpNMmaps, mp.MpNMmapsMax, mp.MpMaxNMmaps, mp.MpNoDynThreshold
	l.MpMmappedMem, l.MpMaxMmappedMem, l.MpSbrkBase = mp.MpMmappedMem, mp.MpMaxMmappedMem, mp.MpSbrkBase
	l.MpTcacheBins, l.MpTcacheMaxBytes, l.MpTcacheCount, l.MpTcacheUnsortedLimit, l.MpSize = mp.MpTcacheBins, mp.MpTcacheMaxBytes, mp.MpTcacheCount, mp.MpTcacheUnsortedLimit, mp.MpSize

	l.HeapInfoSize = 0x20
	if m >= 43 {
		l.MmapTail = 16
	}
	if m >= 35 {
		l.HeapInfoSize = 0x30
	}
	switch {
	case m >= 42:
		l.TcacheBins, l.TcacheCountBytes, l.TcacheEntries, l.TcacheChunkSize, l.TcacheCountsDown = 76, 2, 0x98, 0x300, true
	case m >= 30:
		l.TcacheBins, l.TcacheCountBytes, l.TcacheEntries, l.TcacheChunkSize = 64, 2, 0x80, 0x290
	case m >= 26:
		l.TcacheBins, l.TcacheCountBytes, l.TcacheEntries, l.TcacheChunkSize = 64, 1, 0x40, 0x250
	}

	l.SafeLinking = m >= 32
	l.RestIncludesTop = m >= 31
	l.AllSubheaps = m >= 27
	l.MmapLine = m >= 20
	l.FastTotals = m <= 42
	l.GarbageUnsorted = m <= 18
	switch {
	case m <= 18:
		l.SizePrefix = ""
	case m == 19:
		l.SizePrefix = prefix219
	case m <= 30:
		l.SizePrefix = prefix220
	default:
		l.SizePrefix = "  "
	}
	if m >= 20 {
		l.UnsortedPrefix = "  "
	}
	l.Profile = ProfileName(m)
	return l, nil
}

// ProfileName names the Layout that glibc 2.m shares with the versions
// that read and print alike (Layout.Profile).
func ProfileName(m int) string {
	switch {
	case m <= 18:
		return "A"
	case m == 19:
		return "B"
	case m <= 22:
		return "C"
	case m == 23:
		return "D"
	case m <= 25:
		return "E"
	case m == 26:
		return "F"
	case m <= 29:
		return "G"
	case m == 30:
		return "H"
	case m == 31:
		return "I"
	case m <= 34:
		return "J"
	case m <= 41:
		return "K"
	case m == 42:
		return "L"
	}
	return "M"
}

// FirstChunk is the offset of the first chunk in a non-main arena's first
// heap: just past heap_info and the arena struct, rounded so that user
// memory is 16-aligned (_int_new_arena in malloc/arena.c).
func (l Layout) FirstChunk() int64 {
	end := l.HeapInfoSize + l.StateSize
	// chunk2mem(p) = p+16 must be 16-aligned, so p itself is 16-aligned.
	return (end + 15) &^ 15
}
