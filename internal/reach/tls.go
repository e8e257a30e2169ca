package reach

import (
	"encoding/binary"

	"github.com/arenactl/arenactl/internal/debuggee"
	"github.com/arenactl/arenactl/internal/maps"
)

// How a thread's static TLS is found from its memory alone, for when the
// files that say how much there is (each object's PT_TLS: StaticTLS) cannot
// be read: a snapshot or a core read without libc's file. There libc's
// block (glibc's tcache and thread_arena variables) would be missed, and
// what only it reaches taken for stack, in every thread but the main one,
// whose TLS is in anonymous memory of its own.
//
// Each thread's dynamic thread vector (DTV) says where every module's TLS
// block is. Its address is the second word of the thread control block at
// the thread pointer (sysdeps/x86_64/nptl/tls.h, tcbhead_t: tcb, dtv,
// self); INSTALL_DTV stores a pointer to its second element, so entry -1
// holds its length and entry 0 the generation, and entry i (16 bytes:
// struct dtv_pointer, val first) module i's block (elf/dl-tls.c,
// allocate_dtv, _dl_allocate_tls_init). A block in static TLS lies below
// the thread pointer (TLS_TCB_AT_TP); one of a module loaded later is in
// the heap, or TLS_DTV_UNALLOCATED.

// maxDTV bounds the entries read from a DTV: far above the modules any
// program loads, and a hostile length costs one bounded read.
const maxDTV = 1 << 10

// dtvBelow is how far below the thread pointer fs the static TLS blocks of
// the thread's DTV reach, within the mapping m that holds fs and above the
// thread's stack pointer sp where m holds it too; 0 when the DTV cannot be
// read.
func dtvBelow(t debuggee.Target, m maps.Mapping, fs, sp uint64) uint64 {
	word := func(addr uint64) (uint64, bool) {
		var b [8]byte
		if n, err := t.ReadAt(b[:], addr); err != nil || n != len(b) {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	dtv, ok := word(fs + 8)
	if !ok || dtv < 16 || dtv%8 != 0 {
		return 0
	}
	n, ok := word(dtv - 16)
	if !ok || n == 0 {
		return 0
	}
	n = min(n, maxDTV)
	b := make([]byte, 16*n)
	got, _ := t.ReadAt(b, dtv+16)
	floor := m.Start
	if m.Contains(sp) {
		floor = max(floor, sp)
	}
	var below uint64
	for i := 0; i+8 <= got; i += 16 {
		val := binary.LittleEndian.Uint64(b[i:])
		if val >= floor && val < fs {
			below = max(below, fs-val)
		}
	}
	return below
}

// tcbAt says whether the thread control block at the thread pointer fs is
// there to read: its first word points at itself (tcbhead_t.tcb, set with
// self by TLS_INIT_TP, sysdeps/x86_64/nptl/tls.h). A core can hold a
// thread's TLS as zeros: gdb's gcore writes zeros where it could not read
// (seen with glibc 2.43's threads, whose stack mappings hold guard pages).
func tcbAt(t debuggee.Target, fs uint64) bool {
	var b [8]byte
	if n, err := t.ReadAt(b[:], fs); err != nil || n != len(b) {
		return false
	}
	return binary.LittleEndian.Uint64(b[:]) == fs
}

// tlsAboveRange is a thread's TLS root on a machine of TLS variant I
// (aarch64, arch.Arch.TLSAbove; sysdeps/aarch64/nptl/tls.h, glibc 2.36):
// the two-word TCB at the thread pointer fs and the static TLS blocks
// above it: static bytes by the files (StaticTLS), or as far as the DTV's
// blocks start, plus tcbAbove for the last block; bounded by m. struct
// pthread, below fs (TLS_PRE_TCB_SIZE), is not part of it: its size is
// not known without libc's debug information, and right below it lie
// the top frames of the thread's stack, which scanned as TLS would make
// what only a stack holds static. It is scanned all the same, as the
// thread's stack (from sp to the mapping's end) or, for the main thread,
// as the anonymous memory the loader put it in. there is false when the
// TCB's dtv does not lead to a plausible DTV: memory a core holds as
// zeros (tcbAt's case on x86_64).
func tlsAboveRange(t debuggee.Target, m maps.Mapping, fs, static uint64) (lo, hi uint64, there bool) {
	word := func(addr uint64) (uint64, bool) {
		var b [8]byte
		if n, err := t.ReadAt(b[:], addr); err != nil || n != len(b) {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	lo = fs
	above := static
	dtv, ok := word(fs)
	if ok && dtv >= 16 && dtv%8 == 0 {
		if n, ok := word(dtv - 16); ok && n > 0 {
			there = true
			n = min(n, maxDTV)
			b := make([]byte, 16*n)
			got, _ := t.ReadAt(b, dtv+16)
			for i := 0; i+8 <= got; i += 16 {
				if val := binary.LittleEndian.Uint64(b[i:]); val > fs && val < m.End {
					above = max(above, val-fs)
				}
			}
		}
	}
	hi = min(m.End, fs+min(m.End-fs, above+16+tcbAbove))
	return lo, hi, there
}
