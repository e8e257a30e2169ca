// Package symbolize owns naming a target's code addresses: the module, the
// function (from .symtab, or .dynsym when the file is stripped; C++ names
// demangled with github.com/ianlancetaylor/demangle, as pprof does) and,
// when debug info is found (the module's own, or a separate debug file by
// build-id or .gnu_debuglink, as addr2line and gdb look), the file and
// line. Everything is parsed once per module and kept: a profile asks for
// the same addresses again and again. The DWARF kept is bounded
// (MaxDWARF): past it, modules are named by their symbols alone.
package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/arenactl/arenactl/internal/module"
)

// Location is what is known of one address.
type Location struct {
	Addr     uint64
	Module   string // the module's path as mapped; "" when in none
	BuildID  string
	Offset   uint64 // Addr in the module's file terms (Addr - load bias)
	Function string // demangled, without parameters; "" when no symbol covers Addr
	Mangled  string // the symbol as in the file
	FuncOff  uint64 // Addr - the function's start
	File     string // from the line table, when debug info was found
	Line     int
	// Inlined is set when Addr is in code inlined from other functions:
	// innermost first, each function with the file:line Addr is at inside
	// it; the last is the function it all was inlined into (Function).
	// File/Line above are the innermost's. From DWARF only.
	Inlined []InlinedCall
}

// InlinedCall is one function of an inline chain.
type InlinedCall struct {
	Function string
	File     string // where Addr is, inside this function
	Line     int
}

// Symbolizer names addresses of one target. Not safe for concurrent use.
type Symbolizer struct {
	mods  *module.Table
	syms  map[*module.Module]*modInfo
	cache map[uint64]Location
	// dwarfLeft is what more DWARF may be read (MaxDWARF at first).
	dwarfLeft uint64
}

// MaxDWARF bounds the DWARF a Symbolizer reads, all modules together, in
// bytes as the sections unpack. debug/dwarf holds each section whole in
// memory, and a session keeps them to its end: a server built with -g, or
// with its debug package installed, has hundreds of MB of it, which
// arenactl would take from the machine beside the server (rule 1 of the
// brief). A module whose DWARF does not fit in what is left is named by
// its symbols only, without files, lines or inlined calls (SkippedDWARF
// says which); libc's debug file is about 10 MB.
const MaxDWARF = 64 << 20

// maxDWARF is MaxDWARF, lowered by this package's tests.
var maxDWARF uint64 = MaxDWARF

// New makes a symbolizer over a target's module table (shared with the
// unwinder).
func New(mods *module.Table) *Symbolizer {
	return &Symbolizer{mods: mods, syms: map[*module.Module]*modInfo{}, cache: map[uint64]Location{}, dwarfLeft: maxDWARF}
}

const maxCachedLocations = 1 << 16

// Symbolize names addr. Addresses of call sites should be given as the
// unwinder's Frame.LookupPC (inside the call, not the return address).
func (s *Symbolizer) Symbolize(addr uint64) Location {
	if loc, ok := s.cache[addr]; ok {
		return loc
	}
	loc := s.symbolize(addr)
	if len(s.cache) >= maxCachedLocations {
		clear(s.cache)
	}
	s.cache[addr] = loc
	return loc
}

// Forget drops what was cached, after the module table was refreshed
// (an address may now belong to another module).
func (s *Symbolizer) Forget() {
	clear(s.cache)
	live := map[*module.Module]bool{}
	for _, m := range s.mods.Modules() {
		live[m] = true
	}
	for m, mi := range s.syms {
		if !live[m] {
			s.dwarfLeft += mi.dwarfHeld
			delete(s.syms, m)
		}
	}
}

// Prepare reads the symbols (and the DWARF index) of every module in the
// table now, for a caller that cannot afford to wait for them at the first
// address in a module.
func (s *Symbolizer) Prepare() {
	for _, m := range s.mods.Modules() {
		if s.syms[m] == nil {
			s.syms[m] = s.load(m)
		}
	}
}

func (s *Symbolizer) symbolize(addr uint64) Location {
	loc := Location{Addr: addr}
	mod, ok := s.mods.Lookup(addr)
	if !ok {
		return loc
	}
	loc.Module, loc.BuildID, loc.Offset = mod.Path, mod.BuildID(), addr-mod.Bias
	mi := s.syms[mod]
	if mi == nil {
		mi = s.load(mod)
		s.syms[mod] = mi
	}
	if sym, ok := mi.symbolAt(loc.Offset); ok {
		loc.Mangled, loc.FuncOff = sym.name, loc.Offset-sym.addr
		loc.Function = Demangle(sym.name)
	}
	if mi.dw != nil {
		loc.File, loc.Line = mi.dw.line(loc.Offset)
		loc.Inlined = mi.dw.inlined(loc.Offset, loc.File, loc.Line)
		if loc.Function == "" && len(loc.Inlined) == 0 {
			loc.Function = mi.dw.function(loc.Offset)
		}
	}
	return loc
}

// Demangle turns a C++ (Itanium ABI) or Rust symbol into its source name
// without parameter lists (templates kept: "b<int>::step"), as pprof's
// "templates" mode shows; other names are returned unchanged.
func Demangle(name string) string {
	if !strings.HasPrefix(name, "_Z") && !strings.HasPrefix(name, "_R") {
		return name
	}
	return demangle.Filter(name, demangle.NoParams, demangle.NoEnclosingParams, demangle.NoClones)
}

type symbol struct {
	addr, size uint64
	name       string
}

type modInfo struct {
	syms     []symbol // sorted by address, one per address
	sections [][2]uint64
	dw       *dwarfInfo
	// dwarfSkipped: the DWARF's size, where it was left out (MaxDWARF);
	// dwarfHeld, where it was read.
	dwarfSkipped, dwarfHeld uint64
}

// execSections are the module's code sections, [start, end): an unsized
// symbol (_init, hand-written assembly) reaches at most its section's end,
// not into the PLT after it.
func execSections(ef *elf.File) [][2]uint64 {
	var out [][2]uint64
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
			out = append(out, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}
	return out
}

// pltSymbols names the PLT stubs "read@plt", as perf and gdb do, from
// .rela.plt: BFD ld lays out one stub per relocation, in order, in .plt.sec
// when there is one (IBT), else in .plt after its 16-byte header.
func pltSymbols(ef *elf.File) []elf.Symbol {
	rela := ef.Section(".rela.plt")
	plt := ef.Section(".plt.sec")
	first := uint64(0)
	if plt == nil {
		plt, first = ef.Section(".plt"), 16
	}
	if rela == nil || plt == nil || ef.Class != elf.ELFCLASS64 {
		return nil
	}
	data, err := rela.Data()
	if err != nil {
		return nil
	}
	dyn, err := ef.DynamicSymbols()
	if err != nil {
		return nil
	}
	var out []elf.Symbol
	for k := 0; (k+1)*24 <= len(data); k++ {
		info := binary.LittleEndian.Uint64(data[k*24+8:])
		idx := info >> 32
		addr := plt.Addr + first + uint64(k)*16
		if idx == 0 || idx > uint64(len(dyn)) || addr+16 > plt.Addr+plt.Size {
			continue
		}
		out = append(out, elf.Symbol{Name: dyn[idx-1].Name + "@plt", Value: addr, Size: 16,
			Info: elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC), Section: elf.SHN_ABS})
	}
	return out
}

// SkippedDWARF is a module whose DWARF was not read: Bytes of it, more
// than was left of MaxDWARF.
type SkippedDWARF struct {
	Path  string
	Bytes uint64
}

func (k SkippedDWARF) String() string {
	return fmt.Sprintf("%s: its %.0f MiB of DWARF are left out (at most %d MiB are read, all files together): its frames are named without files, lines or inlined calls",
		k.Path, float64(k.Bytes)/(1<<20), MaxDWARF>>20)
}

// SkippedDWARF lists the modules loaded so far whose DWARF was left out.
func (s *Symbolizer) SkippedDWARF() []SkippedDWARF {
	var out []SkippedDWARF
	for m, mi := range s.syms {
		if mi.dwarfSkipped > 0 {
			out = append(out, SkippedDWARF{Path: m.Path, Bytes: mi.dwarfSkipped})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// dwarfBytes is how much memory f's DWARF takes once read: debug/elf's
// DWARF reads every .debug_ (or .zdebug_) section whole, unpacked (Go
// 1.26, debug/elf File.DWARF). It gives a SHF_COMPRESSED section's
// unpacked size as its Size; an old .zdebug_ section says it after its
// "ZLIB" magic.
func dwarfBytes(f *elf.File) uint64 {
	var n uint64
	for _, sec := range f.Sections {
		if sec.Type == elf.SHT_NOBITS {
			continue
		}
		switch {
		case strings.HasPrefix(sec.Name, ".debug_"):
			n += sec.Size
		case strings.HasPrefix(sec.Name, ".zdebug_"):
			var hdr [12]byte
			if _, err := sec.ReadAt(hdr[:], 0); err == nil && string(hdr[:4]) == "ZLIB" {
				n += binary.BigEndian.Uint64(hdr[4:])
			} else {
				n += sec.Size
			}
		}
	}
	return n
}

func (s *Symbolizer) load(mod *module.Module) *modInfo {
	mi := &modInfo{}
	ef, err := mod.ELF()
	if err != nil {
		return mi
	}
	dbg, _ := mod.Debug()
	var all []elf.Symbol
	for _, f := range []*elf.File{ef, dbg} {
		if f == nil {
			continue
		}
		if ss, err := f.Symbols(); err == nil {
			all = append(all, ss...)
		}
		if f == ef {
			if ss, err := f.DynamicSymbols(); err == nil {
				all = append(all, ss...)
			}
		}
	}
	mi.syms = funcSymbols(append(all, pltSymbols(ef)...))
	mi.sections = execSections(ef)
	if dbg != nil {
		if n := dwarfBytes(dbg); n > s.dwarfLeft {
			mi.dwarfSkipped = n
		} else if dw, err := openDwarf(dbg); err == nil {
			s.dwarfLeft -= n
			mi.dw, mi.dwarfHeld = dw, n
		}
	}
	return mi
}

// funcSymbols keeps function symbols, one per address: of aliases
// (malloc, __libc_malloc, __GI___libc_malloc; read, __read, __libc_read)
// the one with the fewest leading underscores, global before weak before
// local, as a reader would name it.
func funcSymbols(all []elf.Symbol) []symbol {
	better := func(a, b elf.Symbol) bool {
		ua := len(a.Name) - len(strings.TrimLeft(a.Name, "_"))
		ub := len(b.Name) - len(strings.TrimLeft(b.Name, "_"))
		if ua != ub {
			return ua < ub
		}
		rank := func(s elf.Symbol) int {
			switch elf.ST_BIND(s.Info) {
			case elf.STB_GLOBAL:
				return 0
			case elf.STB_WEAK:
				return 1
			}
			return 2
		}
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if len(a.Name) != len(b.Name) {
			return len(a.Name) < len(b.Name)
		}
		return a.Name < b.Name
	}
	best := map[uint64]elf.Symbol{}
	for _, s := range all {
		t := elf.ST_TYPE(s.Info)
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || s.Value == 0 || s.Section == elf.SHN_UNDEF || s.Name == "" {
			continue
		}
		if o, ok := best[s.Value]; !ok || better(s, o) || (o.Size == 0 && s.Size != 0) {
			if ok && s.Size == 0 && o.Size != 0 {
				s.Size = o.Size
			}
			best[s.Value] = s
		}
	}
	out := make([]symbol, 0, len(best))
	for _, s := range best {
		out = append(out, symbol{s.Value, s.Size, s.Name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

func (mi *modInfo) symbolAt(vaddr uint64) (symbol, bool) {
	s := mi.syms
	i := sort.Search(len(s), func(i int) bool { return s[i].addr > vaddr }) - 1
	if i < 0 {
		return symbol{}, false
	}
	// A sized symbol must cover vaddr; an unsized one (hand-written
	// assembly) is taken to reach the next symbol.
	if s[i].size != 0 && vaddr >= s[i].addr+s[i].size {
		return symbol{}, false
	}
	if s[i].size == 0 {
		for _, sec := range mi.sections {
			if s[i].addr >= sec[0] && s[i].addr < sec[1] && vaddr >= sec[1] {
				return symbol{}, false
			}
		}
	}
	return s[i], true
}
