package reach

import (
	"debug/elf"
	"sort"
	"strings"

	"github.com/arenactl/arenactl/internal/module"
	"github.com/arenactl/arenactl/internal/symbolize"
)

// Types names a chunk by its first word: an object of a C++ class with
// virtual functions starts with its vtable pointer, which points into the
// class's vtable symbol (_ZTV…), 16 bytes past its start under the Itanium
// C++ ABI (offset to top and typeinfo come first), further for the
// secondary vtables of multiple inheritance. The symbols come from each
// loaded object's .dynsym and .symtab, and its debug file's when found.
type Types struct {
	vt []vtable // by address
}

type vtable struct {
	lo, hi uint64
	name   string
}

// NewTypes reads the vtable symbols of every module of mods.
func NewTypes(mods *module.Table) *Types {
	ty := &Types{}
	for _, m := range mods.All() {
		seen := map[string]bool{}
		add := func(ef *elf.File) {
			if ef == nil {
				return
			}
			syms, _ := ef.Symbols()
			dyn, _ := ef.DynamicSymbols()
			for _, s := range append(syms, dyn...) {
				if !strings.HasPrefix(s.Name, "_ZTV") || s.Size <= 16 || s.Value == 0 || seen[s.Name] {
					continue
				}
				seen[s.Name] = true
				name := strings.TrimPrefix(symbolize.Demangle(s.Name), "vtable for ")
				lo := m.Bias + s.Value
				ty.vt = append(ty.vt, vtable{lo: lo + 16, hi: lo + s.Size, name: name})
			}
		}
		if ef, err := m.ELF(); err == nil {
			add(ef)
		}
		if ef, _ := m.Debug(); ef != nil {
			add(ef)
		}
	}
	sort.Slice(ty.vt, func(i, j int) bool { return ty.vt[i].lo < ty.vt[j].lo })
	return ty
}

// Of is the class whose vtable first (a chunk's first word) points into.
func (ty *Types) Of(first uint64) (string, bool) {
	i := sort.Search(len(ty.vt), func(i int) bool { return ty.vt[i].hi > first })
	if i < len(ty.vt) && ty.vt[i].lo <= first && first%8 == 0 {
		return ty.vt[i].name, true
	}
	return "", false
}

// Len is how many vtables are known.
func (ty *Types) Len() int { return len(ty.vt) }

// StaticTLS is how much static TLS the loaded objects of mods have: each
// PT_TLS segment's size rounded up to its alignment, summed, as ld.so lays
// the initial modules' blocks below the thread pointer
// (elf/dl-tls.c, _dl_determine_tlsoffset, TLS_TCB_AT_TP). It never reaches
// below the real blocks into a thread's stack frames: ld.so's own
// offsets only add padding and the surplus reserved for dlopen.
func StaticTLS(mods *module.Table) uint64 {
	var n uint64
	for _, m := range mods.All() {
		ef, err := m.ELF()
		if err != nil {
			continue
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_TLS {
				al := max(p.Align, 1)
				n += (p.Memsz + al - 1) / al * al
			}
		}
	}
	return n
}
