package symbolize

import (
	"debug/elf"
	"testing"
)

// The symbolizer on real processes (chain, separate debug file by
// build-id, symbols-only library, inline chains) is tested with the
// unwinder, in internal/unwind; these are the naming rules alone.

func TestDemangle(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"_ZN1bIiE4stepEi", "b<int>::step"},
		{"_ZN1a6runner3runEi", "a::runner::run"},
		{"_ZL10chain_mainPv", "chain_main"},
		{"_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back"},
		{"_Znwm", "operator new"},
		{"_ZN2nd1dEiPFiiE.cold", "nd::d"},
		{"malloc", "malloc"},
		{"_Z", "_Z"}, // not a valid mangling: kept as is
	} {
		if got := Demangle(c.in); got != c.want {
			t.Errorf("Demangle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSymbolAtPicksReadableAlias(t *testing.T) {
	sym := func(name string, bind elf.SymBind, value, size uint64) elf.Symbol {
		return elf.Symbol{Name: name, Info: elf.ST_INFO(bind, elf.STT_FUNC), Value: value, Size: size, Section: 14}
	}
	mi := &modInfo{syms: funcSymbols([]elf.Symbol{
		sym("__libc_malloc", elf.STB_GLOBAL, 0x1000, 0x100),
		sym("__GI___libc_malloc", elf.STB_LOCAL, 0x1000, 0x100),
		sym("malloc", elf.STB_GLOBAL, 0x1000, 0x100),
		sym("__read", elf.STB_GLOBAL, 0x2000, 0x40),
		sym("read", elf.STB_WEAK, 0x2000, 0x40),
		sym("asm_stub", elf.STB_LOCAL, 0x3000, 0), // unsized: reaches the next symbol
		sym("after", elf.STB_GLOBAL, 0x3100, 0x10),
		{Name: "data", Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_OBJECT), Value: 0x2800, Size: 8, Section: 20},
	})}
	for _, c := range []struct {
		addr uint64
		want string
	}{{0x1000, "malloc"}, {0x10ff, "malloc"}, {0x1100, ""}, {0x2010, "read"}, {0x2800, ""},
		{0x30f0, "asm_stub"}, {0x3105, "after"}, {0x3110, ""}, {0x10, ""}} {
		s, ok := mi.symbolAt(c.addr)
		if got := s.name; !ok && got != "" || got != c.want {
			t.Errorf("%#x: %q, want %q", c.addr, got, c.want)
		}
	}
}
