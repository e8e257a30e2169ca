package reach

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/arenactl/arenactl/internal/debuggee"
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
	// ro are the .data.rel.ro sections of the objects that name no
	// vtable (stripped), text their executable ranges: there a vtable is
	// recognised by its shape (OfStripped), reading mem, once per
	// address (seen).
	ro, text []vtable
	mem      debuggee.Target
	mu       sync.Mutex // seen's: a scan's workers name chunks at once
	seen     map[uint64]string
}

type vtable struct {
	lo, hi uint64
	name   string
	bias   uint64
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
		ef, err := m.ELF()
		if err == nil {
			add(ef)
		}
		if dbg, _ := m.Debug(); dbg != nil {
			add(dbg)
		}
		if ef == nil {
			continue
		}
		base := m.Path[strings.LastIndexByte(m.Path, '/')+1:]
		for _, sec := range ef.Sections {
			switch {
			case sec.Name == ".data.rel.ro" && len(seen) == 0:
				ty.ro = append(ty.ro, vtable{lo: m.Bias + sec.Addr, hi: m.Bias + sec.Addr + sec.Size, name: base, bias: m.Bias})
			case sec.Flags&elf.SHF_EXECINSTR != 0 && sec.Size > 0:
				ty.text = append(ty.text, vtable{lo: m.Bias + sec.Addr, hi: m.Bias + sec.Addr + sec.Size})
			}
		}
	}
	sort.Slice(ty.ro, func(i, j int) bool { return ty.ro[i].lo < ty.ro[j].lo })
	sort.Slice(ty.text, func(i, j int) bool { return ty.text[i].lo < ty.text[j].lo })
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

// ReadFrom has OfStripped read the vtables it judges from t.
func (ty *Types) ReadFrom(t debuggee.Target) { ty.mem, ty.seen = t, map[uint64]string{} }

// OfStripped names a chunk whose first word first points into the
// .data.rel.ro of an object with no vtable symbols (stripped), at a word
// that itself points into code (a virtual function), by where that vtable
// is: "vtable at libfoo.so+0x1f2e8". Objects of one class share it, so
// they are counted together even with no name. Each such address is read
// once.
func (ty *Types) OfStripped(first uint64) (string, bool) {
	if ty.mem == nil || first%8 != 0 {
		return "", false
	}
	i := sort.Search(len(ty.ro), func(i int) bool { return ty.ro[i].hi > first })
	if i == len(ty.ro) || ty.ro[i].lo > first {
		return "", false
	}
	ty.mu.Lock()
	defer ty.mu.Unlock()
	if name, ok := ty.seen[first]; ok {
		return name, name != ""
	}
	var b [8]byte
	name := ""
	if n, err := ty.mem.ReadAt(b[:], first); err == nil && n == 8 && within(ty.text, binary.LittleEndian.Uint64(b[:])) {
		name = fmt.Sprintf("vtable at %s+%#x", ty.ro[i].name, first-ty.ro[i].bias)
	}
	ty.seen[first] = name
	return name, name != ""
}

// Stripped reports whether some object is read by shape (OfStripped).
func (ty *Types) Stripped() bool { return len(ty.ro) > 0 }

func within(rs []vtable, addr uint64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi > addr })
	return i < len(rs) && rs[i].lo <= addr
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
