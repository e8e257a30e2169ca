package libc

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// image is what arena discovery needs from the file of the object that
// holds the allocator: its initialised data, where main_arena and mp_ keep
// their static initialisers, and the GOT slots through which libc reaches
// its own initial-exec TLS variables (tcache, thread_arena).
type image struct {
	data     []byte // .data as in the file
	dataAddr uint64 // its link-time address
	tpoff    []tlsSlot
	// tlsSize is the object's PT_TLS memsz rounded up to its alignment: in
	// a static executable, how far below the thread pointer its TLS block
	// starts (glibc's csu/libc-tls.c and the linker's local-exec offsets
	// agree on it). 0 without a TLS segment.
	tlsSize uint64
	// tlsAbove: the machine's TLS is variant I (aarch64): the thread
	// pointer points at a 16-byte TCB with the TLS blocks above it, so
	// the offsets are positive, and a static executable's block starts
	// right after the TCB (glibc 2.36's sysdeps/aarch64/nptl/tls.h,
	// TLS_DTV_AT_TP and TLS_TCB_SIZE; csu/libc-tls.c, __libc_setup_tls,
	// tcb_offset). x86_64's is variant II: blocks below the pointer.
	tlsAbove bool
	// syms are the link-time addresses of main_arena and mp_ from the
	// object's own .symtab, when it kept one (a static executable that
	// was not stripped); nil otherwise.
	syms *SymbolAnchors
}

// tlsSlot is an R_X86_64_TPOFF64 (aarch64: R_AARCH64_TLS_TPREL64)
// relocation against no symbol: a GOT word at Offset (link-time) that
// holds, once relocated, the thread-pointer offset of libc's TLS variable
// at Addend in its TLS block.
type tlsSlot struct {
	Offset, Addend uint64
}

func readImage(ef *elf.File) (image, error) {
	var img image
	sec := ef.Section(".data")
	if sec == nil || sec.Type != elf.SHT_PROGBITS {
		return img, fmt.Errorf("no .data section")
	}
	data, err := sec.Data()
	if err != nil {
		return img, fmt.Errorf("reading .data: %w", err)
	}
	img.data, img.dataAddr = data, sec.Addr
	img.tlsAbove = ef.Machine == elf.EM_AARCH64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_TLS {
			align := max(p.Align, 1)
			img.tlsSize = (p.Memsz + align - 1) / align * align
		}
	}
	img.syms, _ = symtabAnchors(ef) // most objects are stripped: no symbols is no error
	if rela := ef.Section(".rela.dyn"); rela != nil {
		b, err := rela.Data()
		if err != nil {
			return img, fmt.Errorf("reading .rela.dyn: %w", err)
		}
		for off := 0; off+24 <= len(b); off += 24 {
			info := binary.LittleEndian.Uint64(b[off+8:])
			if isTPOff(ef.Machine, uint32(info)) && info>>32 == 0 {
				img.tpoff = append(img.tpoff, tlsSlot{
					Offset: binary.LittleEndian.Uint64(b[off:]),
					Addend: binary.LittleEndian.Uint64(b[off+16:]),
				})
			}
		}
	}
	return img, nil
}

// word reads the 8-byte value at link-time address addr of .data.
func (img *image) word(addr uint64) (uint64, bool) {
	if addr < img.dataAddr || addr+8 > img.dataAddr+uint64(len(img.data)) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(img.data[addr-img.dataAddr:]), true
}

// isTPOff: a relocation of type typ writes a TLS variable's offset from
// the thread pointer into a GOT word, on machine m.
func isTPOff(m elf.Machine, typ uint32) bool {
	switch m {
	case elf.EM_X86_64:
		return elf.R_X86_64(typ) == elf.R_X86_64_TPOFF64
	case elf.EM_AARCH64:
		return elf.R_AARCH64(typ) == elf.R_AARCH64_TLS_TPREL64
	}
	return false
}
