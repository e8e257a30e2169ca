package libc

// TLSOffsets lists where libc's TLS variables may be, as offsets from the
// thread pointer (two's complement: they are below it). A shared libc
// reaches its initial-exec variables through GOT slots relocated with
// R_X86_64_TPOFF64, whose live values are those offsets. A static
// executable has no such slots: its TLS block, libc's variables included,
// sits right below the thread pointer at a link-time constant distance
// (local-exec), so every word of that block is a candidate. On aarch64
// (TLS variant I, image.tlsAbove) the slots are R_AARCH64_TLS_TPREL64 and
// the offsets positive; a static executable's block follows the TCB.
//
// A Libc made from a snapshot's Record has no file: its offsets are the
// ones recorded (RecordedTLS). word reads a word of the target's memory.
func (l *Libc) TLSOffsets(word func(addr uint64) (uint64, bool)) []uint64 {
	if l.RecordedTLS != nil {
		return l.RecordedTLS
	}
	var offs []uint64
	if l.Static && l.img.tlsAbove {
		// The block after the 16-byte TCB, at most its alignment (which
		// tlsSize is a multiple of) further.
		return blockOffsets(16, 2*l.img.tlsSize)
	}
	if l.Static {
		for off := uint64(0); off+8 <= l.img.tlsSize; off += 8 {
			offs = append(offs, off-l.img.tlsSize)
		}
		return offs
	}
	for _, s := range l.img.tpoff {
		if off, ok := word(l.Base + s.Offset); ok {
			if l.img.tlsAbove {
				return blockOffsets(off-s.Addend, l.img.tlsSize)
			}
			offs = append(offs, off)
		}
	}
	return offs
}

// blockOffsets are the offsets of every word of a TLS block of size bytes
// at offset base from the thread pointer. aarch64's GCC reaches tcache
// without a GOT slot of its own: with section anchors (on by default
// there) malloc.c loads one TPREL slot, thread_arena's, and adds the
// distance to tcache (in glibc 2.36's arm64 libc.so.6, thread_arena is at
// 0x48 of libc's TLS block, tcache at 0x50, and only the first has an
// R_AARCH64_TLS_TPREL64). Any slot's value less its addend is where libc's
// block starts, so every word of the block is a candidate, as in a static
// executable.
func blockOffsets(base, size uint64) []uint64 {
	var offs []uint64
	for off := uint64(0); off+8 <= size; off += 8 {
		offs = append(offs, base+off)
	}
	return offs
}

// TLSSize is the object's PT_TLS size rounded up to its alignment (see
// image.tlsSize); 0 when unknown.
func (l *Libc) TLSSize() uint64 { return l.img.tlsSize }

// SetTLSSize sets TLSSize for a Libc made from memory alone, from the
// program headers found there.
func (l *Libc) SetTLSSize(n uint64) { l.img.tlsSize = n }
