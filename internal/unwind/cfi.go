package unwind

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"github.com/arenactl/arenactl/internal/module"
)

// DWARF register numbers of x86-64 (System V psABI, figure 3.36).
const (
	regRAX = 0
	regRDX = 1
	regRCX = 2
	regRBX = 3
	regRSI = 4
	regRDI = 5
	regRBP = 6
	regRSP = 7
	regR8  = 8
	regR15 = 15
	regRA  = 16 // the return address column: the caller's rip
	nRegs  = 17
)

// ruleKind is how one register (or the CFA) is recovered in the caller.
type ruleKind uint8

const (
	ruleSame      ruleKind = iota // unchanged (callee-saved and not saved, or unmentioned)
	ruleUndefined                 // not recoverable (for the return address: the outermost frame)
	ruleOffset                    // saved at CFA+off
	ruleValOffset                 // is CFA+off
	ruleRegister                  // is in register reg
	ruleExpr                      // saved at the address expr computes (CFA pushed first)
	ruleValExpr                   // is what expr computes (CFA pushed first)
	ruleCFAReg                    // CFA only: reg+off
	ruleCFAExpr                   // CFA only: expr
)

type rule struct {
	kind ruleKind
	reg  uint8
	off  int64
	expr []byte
}

// row is one line of a module's CFI table, compiled for one address: how
// to find the CFA and the caller's registers there. Rows are cached by
// address, since a profile sees the same return addresses again and again.
type row struct {
	cfa    rule
	regs   [nRegs]rule
	method Method
	// signal: this frame is a signal trampoline ('S' augmentation, or
	// __restore_rt recognized by its code); the caller's pc is where it was
	// interrupted, not a return address.
	signal bool
	// When no FDE covers the address, the row says which fallback applies:
	// sigframe (the trampoline recognized by its code: registers from the
	// rt_sigframe), or noCFI (frame pointer if rbp chains, else stop). A
	// PLT stub's row is an ordinary one (CFA = rsp+8 or +16).
	sigframe, noCFI bool
}

// cfi is a module's parsed call frame information, addresses in the file's
// terms (before the load bias).
type cfi struct {
	fdes []*frame.FrameDescriptionEntry // sorted by begin
	plts [][3]uint64                    // [start, end, kind] of PLT sections: 1 .plt, 2 .plt.sec/.plt.got
	rows map[uint64]*row
}

const maxCachedRows = 1 << 16

func loadCFI(m *module.Module) *cfi {
	c := &cfi{rows: map[uint64]*row{}}
	ef, err := m.ELF()
	if err != nil {
		return c // no file, no CFI: every frame in it takes a fallback
	}
	var all []*frame.FrameDescriptionEntry
	if s := ef.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		if fdes, err := parseFrames(s, true); err == nil {
			all = append(all, fdes...)
		}
	}
	// .debug_frame, in the file itself or its separate debug file, covers
	// what .eh_frame may leave out (code built -fno-asynchronous-unwind-tables
	// -g); where both describe a function, .eh_frame's entry comes first
	// and wins (they describe the same code).
	for _, f := range []*elf.File{ef, debugOf(m, ef)} {
		if f == nil {
			continue
		}
		if s := f.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
			if fdes, err := parseFrames(s, false); err == nil {
				all = append(all, fdes...)
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Begin() < all[j].Begin() })
	dedup := all[:0]
	for _, f := range all {
		if len(dedup) > 0 && dedup[len(dedup)-1].Begin() == f.Begin() {
			continue
		}
		dedup = append(dedup, f)
	}
	c.fdes = dedup
	for _, s := range ef.Sections {
		switch s.Name {
		case ".plt":
			c.plts = append(c.plts, [3]uint64{s.Addr, s.Addr + s.Size, 1})
		case ".plt.sec", ".plt.got":
			c.plts = append(c.plts, [3]uint64{s.Addr, s.Addr + s.Size, 2})
		}
	}
	return c
}

func debugOf(m *module.Module, own *elf.File) *elf.File {
	d, _ := m.Debug()
	if d == own {
		return nil
	}
	return d
}

// parseFrames parses .eh_frame or .debug_frame.
func parseFrames(s *elf.Section, eh bool) (frame.FrameDescriptionEntries, error) {
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	addr := uint64(0)
	if eh {
		addr = s.Addr
		if addr == 0 { // delve reads 0 as "this is .debug_frame"
			return nil, fmt.Errorf("%s at address 0", s.Name)
		}
	}
	return parseFrameData(s.Name, data, addr)
}

// parseFrameData parses CFI with delve's parser (ehAddr is .eh_frame's
// address, 0 for .debug_frame). The parser assumes well-formed input: a
// section that makes it panic has no usable CFI.
func parseFrameData(name string, data []byte, ehAddr uint64) (fdes frame.FrameDescriptionEntries, err error) {
	defer func() {
		if r := recover(); r != nil {
			fdes, err = nil, fmt.Errorf("malformed %s: %v", name, r)
		}
	}()
	fdes, err = frame.Parse(data, binary.LittleEndian, 0, 8, ehAddr)
	// Zero-length entries (left by the linker for discarded code) would
	// shadow real ones in the search.
	out := fdes[:0]
	for _, f := range fdes {
		if f != nil && f.CIE != nil && f.End() > f.Begin() {
			out = append(out, f)
		}
	}
	return out, err
}

func (c *cfi) fdeFor(vaddr uint64) *frame.FrameDescriptionEntry {
	f := c.fdes
	i := sort.Search(len(f), func(i int) bool { return f[i].Begin() > vaddr }) - 1
	// Entries may nest or overlap after merging two sections: look back a
	// few for one that covers vaddr.
	for k := 0; i >= 0 && k < 4; i, k = i-1, k+1 {
		if f[i].Cover(vaddr) {
			return f[i]
		}
	}
	return nil
}

// pltKind says whether vaddr is in a PLT section (1 .plt, 2 .plt.sec or
// .plt.got, 0 neither), and where that section starts.
func (c *cfi) pltKind(vaddr uint64) (kind, start uint64) {
	for _, p := range c.plts {
		if vaddr >= p[0] && vaddr < p[1] {
			return p[2], p[0]
		}
	}
	return 0, 0
}

// rowFor compiles (and caches) the row at vaddr, a fallback row when no
// FDE covers it.
func (c *cfi) rowFor(m *module.Module, vaddr uint64) *row {
	if r, ok := c.rows[vaddr]; ok {
		return r
	}
	r := c.compile(vaddr)
	if r == nil {
		r = c.fallback(m, vaddr)
	}
	if len(c.rows) >= maxCachedRows {
		clear(c.rows)
	}
	c.rows[vaddr] = r
	return r
}

var (
	sigframeRow = &row{method: MethodSignal, signal: true, sigframe: true}
	noCFIRow    = &row{noCFI: true}
)

// fallback is the row for an address no FDE covers.
func (c *cfi) fallback(m *module.Module, vaddr uint64) *row {
	// The trampoline's return address is its first instruction, so the
	// lookup address (one less) is the byte before it.
	if isRestoreRT(m, vaddr) || isRestoreRT(m, vaddr+1) {
		return sigframeRow
	}
	var off int64
	kind, start := c.pltKind(vaddr)
	switch kind {
	case 1: // lazy .plt: jmp *got; push n; jmp .plt0 (each 16 bytes; the push at +6, .plt0 pushes first)
		off = 8
		if vaddr-start < 16 || (vaddr&15) >= 11 {
			off = 16
		}
	case 2: // .plt.sec, .plt.got: jumps only
		off = 8
	default:
		return noCFIRow
	}
	r := &row{method: MethodPLT, cfa: rule{kind: ruleCFAReg, reg: regRSP, off: off}}
	r.regs[regRA] = rule{kind: ruleOffset, off: -8}
	return r
}

// restoreRT is glibc's x86-64 __restore_rt: mov $15,%rax (rt_sigreturn);
// syscall. The kernel makes a signal handler return into it.
var restoreRT = [9]byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}

func isRestoreRT(mod *module.Module, vaddr uint64) bool {
	var b [9]byte
	return mod.ReadVaddr(b[:], vaddr) == nil && b == restoreRT
}

func (c *cfi) compile(vaddr uint64) (r *row) {
	fde := c.fdeFor(vaddr)
	if fde == nil {
		return nil
	}
	defer func() {
		if recover() != nil { // delve's interpreter panics on truncated programs
			r = nil
		}
	}()
	fc, err := fde.EstablishFrame(vaddr)
	if err != nil {
		return nil
	}
	r = &row{method: MethodCFI}
	for i := range r.regs {
		r.regs[i] = rule{kind: ruleSame}
	}
	switch fc.CFA.Rule {
	case frame.RuleCFA:
		if fc.CFA.Reg >= nRegs {
			return nil
		}
		r.cfa = rule{kind: ruleCFAReg, reg: uint8(fc.CFA.Reg), off: fc.CFA.Offset}
	case frame.RuleExpression:
		r.cfa = rule{kind: ruleCFAExpr, expr: fc.CFA.Expression}
	default:
		return nil
	}
	for reg, dr := range fc.Regs {
		if reg >= nRegs {
			continue
		}
		var ru rule
		switch dr.Rule {
		case frame.RuleUndefined:
			ru = rule{kind: ruleUndefined}
		case frame.RuleSameVal:
			ru = rule{kind: ruleSame}
		case frame.RuleOffset:
			ru = rule{kind: ruleOffset, off: dr.Offset}
		case frame.RuleValOffset:
			ru = rule{kind: ruleValOffset, off: dr.Offset}
		case frame.RuleRegister:
			if dr.Reg >= nRegs {
				ru = rule{kind: ruleUndefined}
			} else {
				ru = rule{kind: ruleRegister, reg: uint8(dr.Reg)}
			}
		case frame.RuleExpression:
			ru = rule{kind: ruleExpr, expr: dr.Expression}
		case frame.RuleValExpression:
			ru = rule{kind: ruleValExpr, expr: dr.Expression}
		default:
			ru = rule{kind: ruleUndefined}
		}
		r.regs[reg] = ru
	}
	if fc.RetAddrReg != regRA {
		if fc.RetAddrReg >= nRegs {
			return nil
		}
		r.regs[regRA] = r.regs[fc.RetAddrReg]
	}
	for _, ch := range fde.CIE.Augmentation {
		if ch == 'S' {
			r.signal = true
			r.method = MethodSignal
		}
	}
	return r
}
