package sampler

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/arenactl/arenactl/internal/module"
)

// hooked are the functions whose GOT entries are pointed at the sampler,
// each with the offset of its hook and of the slot holding the real
// function in the image. C++'s operator new and delete are not among them:
// libstdc++ reaches malloc, aligned_alloc and free through its own GOT, so
// they are sampled there, with operator new on the stack, and counted once.
var hooked = map[string]struct{ hook, real uint64 }{
	"malloc":         {symHMalloc, symRMalloc},
	"calloc":         {symHCalloc, symRCalloc},
	"realloc":        {symHRealloc, symRRealloc},
	"reallocarray":   {symHReallocarray, symRReallocarray},
	"posix_memalign": {symHPosixMemalign, symRPosixMemalign},
	"aligned_alloc":  {symHAlignedAlloc, symRAlignedAlloc},
	"memalign":       {symHMemalign, symRMemalign},
	"valloc":         {symHValloc, symRValloc},
	"pvalloc":        {symHPvalloc, symRPvalloc},
	"free":           {symHFree, symRFree},
}

// A slot is one GOT entry of one loaded object that calls a hooked
// function.
type slot struct {
	Module string
	Name   string
	Addr   uint64 // the entry, in the target
}

// gotSlots lists m's GOT entries for the hooked functions that calls go
// through: its R_X86_64_JUMP_SLOT relocations (the PLT's;
// R_AARCH64_JUMP_SLOT on aarch64). Not R_X86_64_GLOB_DAT
// (R_AARCH64_GLOB_DAT): those also serve to take the function's address, and
// a program that stored a hook's address while profiled would call into
// the sampler after it is removed. Code built -fno-plt (calls through
// GLOB_DAT entries) goes unsampled.
func gotSlots(m *module.Module) ([]slot, error) {
	f, err := m.ELF()
	if err != nil {
		return nil, err
	}
	if f.Machine != ringMachine.Machine || f.Class != elf.ELFCLASS64 {
		return nil, nil
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, nil // no dynamic symbols: nothing imported
	}
	var out []slot
	seen := map[uint64]bool{}
	for _, sec := range f.Sections {
		if sec.Type != elf.SHT_RELA {
			continue
		}
		if sec.Link != 0 && int(sec.Link) < len(f.Sections) && f.Sections[sec.Link].Type != elf.SHT_DYNSYM {
			continue
		}
		data, err := sec.Data()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", m.Path, sec.Name, err)
		}
		for i := 0; i+24 <= len(data); i += 24 {
			off := binary.LittleEndian.Uint64(data[i:])
			info := binary.LittleEndian.Uint64(data[i+8:])
			typ, sym := uint32(info), info>>32
			if typ != jumpSlot {
				continue
			}
			if sym == 0 || int(sym) > len(syms) {
				continue
			}
			// Also libc's own: its internal calls of malloc go through
			// its GOT so that an interposed malloc is used by libc too.
			s := syms[sym-1] // DynamicSymbols leaves out the null symbol
			name, _, _ := strings.Cut(s.Name, "@")
			if _, ok := hooked[name]; !ok {
				continue
			}
			addr := m.Bias + off
			if seen[addr] {
				continue
			}
			seen[addr] = true
			out = append(out, slot{Module: m.Path, Name: name, Addr: addr})
		}
	}
	return out, nil
}
