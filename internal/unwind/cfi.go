package unwind

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"github.com/arenactl/arenactl/internal/module"
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
	cfa rule
	// regs are the rules of the machine's DWARF columns (machine.cols),
	// the return address column's among them.
	regs   []rule
	method Method
	// signal: this frame is a signal trampoline ('S' augmentation, or
	// the trampoline recognized by its code); the caller's pc is where it
	// was interrupted, not a return address.
	signal bool
	// When no FDE covers the address (or, on aarch64, the code is the
	// vDSO's trampoline), the row says which fallback applies: sigframe
	// (the trampoline recognized by its code: registers from the
	// rt_sigframe), or noCFI (frame pointer if it chains, else stop). A
	// PLT stub's row is an ordinary one (machine.plt).
	sigframe, noCFI bool
}

// cfi is a module's parsed call frame information, addresses in the file's
// terms (before the load bias).
type cfi struct {
	m    *machine
	fdes []*frame.FrameDescriptionEntry // sorted by begin
	plts [][3]uint64                    // [start, end, kind] of PLT sections: 1 .plt, 2 .plt.sec/.plt.got
	rows map[uint64]*row
}

const maxCachedRows = 1 << 16

func loadCFI(mach *machine, m *module.Module) *cfi {
	c := &cfi{m: mach, rows: map[uint64]*row{}}
	ef, err := m.ELF()
	if err != nil {
		return c // no file, no CFI: every frame in it takes a fallback
	}
	var all []*frame.FrameDescriptionEntry
	if s := ef.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		if fdes, err := parseFrames(mach, s, true); err == nil {
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
			if fdes, err := parseFrames(mach, s, false); err == nil {
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
func parseFrames(mach *machine, s *elf.Section, eh bool) (frame.FrameDescriptionEntries, error) {
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
	fdes, err := parseFrameData(s.Name, data, addr)
	if mach.link {
		dropNegateRAState(fdes)
	}
	return fdes, err
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
	var r *row
	if c.m.sigCodeFirst && (c.m.isSigreturn(m, vaddr) || c.m.isSigreturn(m, vaddr+1)) {
		r = sigframeRow
	} else {
		r = c.compile(vaddr)
	}
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
	if c.m.isSigreturn(m, vaddr) || c.m.isSigreturn(m, vaddr+1) {
		return sigframeRow
	}
	kind, start := c.pltKind(vaddr)
	if kind != 0 {
		if r := c.m.plt(kind, start, vaddr); r != nil {
			return r
		}
	}
	return noCFIRow
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
	mach := c.m
	cols := uint64(mach.cols)
	r = mach.newRow(MethodCFI)
	switch fc.CFA.Rule {
	case frame.RuleCFA:
		if fc.CFA.Reg >= cols {
			return nil
		}
		r.cfa = rule{kind: ruleCFAReg, reg: uint8(fc.CFA.Reg), off: fc.CFA.Offset}
	case frame.RuleExpression:
		r.cfa = rule{kind: ruleCFAExpr, expr: fc.CFA.Expression}
	default:
		return nil
	}
	for reg, dr := range fc.Regs {
		if reg >= cols {
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
			if dr.Reg >= cols {
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
	// The CIE names its return address column (x86_64's 16, aarch64's
	// x30); a CIE naming another one has its rule stand for the machine's.
	if ra := uint64(mach.ra); fc.RetAddrReg != ra {
		if fc.RetAddrReg >= cols {
			return nil
		}
		r.regs[ra] = r.regs[fc.RetAddrReg]
	}
	for _, ch := range fde.CIE.Augmentation {
		if ch == 'S' {
			r.signal = true
			r.method = MethodSignal
		}
	}
	return r
}

// dropNegateRAState turns aarch64's DW_CFA_AARCH64_negate_ra_state (0x2d,
// which every function built with -mbranch-protection=pac-ret carries after
// its paciasp) into DW_CFA_nop in the CIEs' and FDEs' programs: delve's
// interpreter does not know the opcode and gives up on the whole entry.
// The state it tracks (whether the saved x30 is signed) is not needed: the
// unwinder strips what is not address from every return address it reads
// (arch.Arch.StripCode), signed or not.
func dropNegateRAState(fdes frame.FrameDescriptionEntries) {
	seen := map[*frame.CommonInformationEntry]bool{}
	for _, f := range fdes {
		if f.CIE != nil && !seen[f.CIE] {
			seen[f.CIE] = true
			f.CIE.InitialInstructions = negateToNop(f.CIE.InitialInstructions)
		}
		f.Instructions = negateToNop(f.Instructions)
	}
}

// negateToNop returns prog with every DW_CFA_AARCH64_negate_ra_state
// instruction a DW_CFA_nop (the same length), walking the instructions
// with their operands (DWARF 5, section 6.4.2) so that an operand byte is
// never taken for one; at an opcode it does not know it stops, leaving the
// rest to delve's interpreter. prog is copied before the first change.
func negateToNop(prog []byte) []byte {
	const negate = 0x2d
	out := prog
	copied := false
	uleb := func(i int) int {
		for i < len(prog) && prog[i]&0x80 != 0 {
			i++
		}
		return i + 1
	}
	block := func(i int) int {
		var n uint64
		var shift uint
		for ; i < len(prog); i++ {
			if shift < 64 {
				n |= uint64(prog[i]&0x7f) << shift
			}
			shift += 7
			if prog[i]&0x80 == 0 {
				break
			}
		}
		if n > uint64(len(prog)) {
			return len(prog)
		}
		return i + 1 + int(n)
	}
	for i := 0; i < len(prog); {
		op := prog[i]
		i++
		switch op >> 6 {
		case 1, 3: // advance_loc, restore: operand in the opcode
			continue
		case 2: // offset: ULEB128 offset
			i = uleb(i)
			continue
		}
		switch op {
		case negate:
			if !copied {
				out = append([]byte(nil), prog...)
				copied = true
			}
			out[i-1] = 0 // DW_CFA_nop
		case 0x00, 0x0a, 0x0b: // nop, remember_state, restore_state
		case 0x01: // set_loc: an address
			i += 8
		case 0x02:
			i++
		case 0x03:
			i += 2
		case 0x04:
			i += 4
		case 0x06, 0x07, 0x08, 0x0d, 0x0e, 0x13, 0x2e: // one LEB128
			i = uleb(i)
		case 0x05, 0x09, 0x0c, 0x11, 0x12, 0x14, 0x15, 0x2f: // two LEB128
			i = uleb(uleb(i))
		case 0x0f: // def_cfa_expression: a block
			i = block(i)
		case 0x10, 0x16: // expression, val_expression: a register, a block
			i = block(uleb(i))
		default:
			return out
		}
	}
	return out
}
