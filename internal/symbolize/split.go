package symbolize

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"slices"
	"sort"
	"strings"
)

// Go's debug/dwarf parses the abbreviation table of every unit when it
// opens a module's DWARF (dwarf.New, Go 1.26), and keeps them all: GCC
// gives each compile unit a table of its own, and libc's debug file
// (Debian's libc6-dbg, 2,063 units, 10 MB of DWARF) took 21 MB of heap
// that way, 36 MB of growth's RSS. A profile reads a few dozen units. So
// a module's sections are kept and each unit is opened alone, as a
// dwarf.Data over its own bytes of .debug_info, when an address in it is
// first asked for; its tables are kept and the Data let go.
//
// A unit opened alone can follow references within itself only. Where a
// unit's abbreviations allow a reference into another unit
// (DW_FORM_ref_addr: LTO's and dwz's output; the alternate file's forms;
// DW_FORM_indirect, which could be either), the module is opened whole,
// as before.

// sections are the DWARF sections a unit's dwarf.Data is made of; not
// .debug_loc/.debug_loclists (variables' locations) nor .debug_frame.
type sections struct {
	abbrev, info, line, ranges, str []byte
	extra                           map[string][]byte // DWARF 5's, by name (dwarf.Data's AddSection)
}

// extraSections are the sections dwarf.Data.AddSection takes.
var extraSections = []string{".debug_addr", ".debug_line_str", ".debug_str_offsets", ".debug_rnglists"}

// errWhole: the module's DWARF cannot be split into units (see above).
var errWhole = errors.New("DWARF with references between units")

// openDwarf indexes f's DWARF by unit, each opened alone when first
// asked for, or opens it whole when it cannot be split.
func openDwarf(f *elf.File) (*dwarfInfo, error) {
	di, err := splitDwarf(f)
	if errors.Is(err, errWhole) {
		d, err := f.DWARF()
		if err != nil {
			return nil, err
		}
		return newDwarfInfo(d), nil
	}
	return di, err
}

// splitDwarf is openDwarf's split path; errWhole when the module must be
// opened whole.
func splitDwarf(f *elf.File) (*dwarfInfo, error) {
	if f.Type == elf.ET_REL {
		return nil, errWhole // relocations to apply: debug/elf's DWARF does
	}
	sec := &sections{extra: map[string][]byte{}}
	want := map[string]*[]byte{".debug_abbrev": &sec.abbrev, ".debug_info": &sec.info, ".debug_line": &sec.line,
		".debug_ranges": &sec.ranges, ".debug_str": &sec.str}
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".zdebug_") || s.Name == ".debug_types" {
			return nil, errWhole // compressed the old way, or DWARF 4's type units: debug/elf's DWARF reads them
		}
		to, extra := want[s.Name], slices.Contains(extraSections, s.Name)
		if to == nil && !extra || s.Type == elf.SHT_NOBITS {
			continue
		}
		b, err := s.Data()
		if err != nil {
			return nil, err
		}
		if extra {
			sec.extra[s.Name] = b
		} else {
			*to = b
		}
	}
	if len(sec.info) == 0 {
		return nil, errors.New("no .debug_info")
	}
	units, err := unitSpans(sec.info, f.ByteOrder)
	if err != nil {
		return nil, err
	}
	checked := map[uint64]bool{}
	for _, u := range units {
		if checked[u.abbrev] {
			continue
		}
		checked[u.abbrev] = true
		if crossUnitForms(sec.abbrev, u.abbrev) {
			return nil, errWhole
		}
	}
	di := &dwarfInfo{sec: sec, cu: map[dwarf.Offset]*cuInfo{}}
	for _, u := range units {
		d, err := sec.unit(u)
		if err != nil {
			continue
		}
		e, err := d.Reader().Next()
		if err != nil || e == nil || e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagPartialUnit {
			continue
		}
		if rs, err := d.Ranges(e); err == nil {
			for _, rg := range rs {
				if rg[1] > rg[0] {
					di.cus = append(di.cus, cuRange{lo: rg[0], hi: rg[1], off: dwarf.Offset(u.off), end: u.end})
				}
			}
		}
	}
	sort.Slice(di.cus, func(i, j int) bool { return di.cus[i].lo < di.cus[j].lo })
	return di, nil
}

// unitSpan is one unit of .debug_info: its bytes, header included, and
// the offset of its abbreviation table.
type unitSpan struct {
	off, end, abbrev uint64
}

// unitSpans reads the units' headers (DWARF 5 section 7.5.1; DWARF 2-4's
// put the abbreviation offset before the address size, and have no unit
// type).
func unitSpans(info []byte, bo binary.ByteOrder) ([]unitSpan, error) {
	var out []unitSpan
	for off := uint64(0); off < uint64(len(info)); {
		b := info[off:]
		if len(b) < 4 {
			return nil, errors.New("a unit header cut short")
		}
		length, hdr, offSize := uint64(bo.Uint32(b)), uint64(4), uint64(4)
		switch {
		case length == 0xffffffff:
			if len(b) < 12 {
				return nil, errors.New("a unit header cut short")
			}
			length, hdr, offSize = bo.Uint64(b[4:]), 12, 8
		case length >= 0xfffffff0:
			return nil, errors.New("a reserved unit length")
		}
		if length > uint64(len(b))-hdr || length < 2+offSize+1 {
			return nil, errors.New("a unit longer than .debug_info")
		}
		body := b[hdr : hdr+length]
		at := uint64(2)
		if bo.Uint16(body) >= 5 {
			at += 2 // unit type, address size
		}
		if uint64(len(body)) < at+offSize {
			return nil, errors.New("a unit header cut short")
		}
		abbrev := uint64(bo.Uint32(body[at:]))
		if offSize == 8 {
			abbrev = bo.Uint64(body[at:])
		}
		out = append(out, unitSpan{off: off, end: off + hdr + length, abbrev: abbrev})
		off += hdr + length
	}
	return out, nil
}

// crossUnitForms says whether the abbreviation table at off allows an
// attribute that may refer outside its unit: DW_FORM_ref_addr,
// DW_FORM_ref_sup4/8, DW_FORM_GNU_ref_alt and DW_FORM_GNU_strp_alt (the
// alternate file's), or DW_FORM_indirect (any form). A table that cannot
// be read says yes: the whole path then reads what it can.
func crossUnitForms(abbrev []byte, off uint64) bool {
	if off >= uint64(len(abbrev)) {
		return true
	}
	b := abbrev[off:]
	// Not delve's leb128, which panics on a number cut short.
	uleb := func() (uint64, bool) {
		var v uint64
		for shift := uint(0); len(b) > 0 && shift < 64; shift += 7 {
			c := b[0]
			b = b[1:]
			v |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	for {
		code, ok := uleb()
		if !ok {
			return true
		}
		if code == 0 {
			return false
		}
		if _, ok := uleb(); !ok || len(b) == 0 { // the tag, then whether it has children
			return true
		}
		b = b[1:]
		for {
			attr, ok1 := uleb()
			form, ok2 := uleb()
			if !ok1 || !ok2 {
				return true
			}
			if attr == 0 && form == 0 {
				break
			}
			switch form {
			case 0x10, 0x16, 0x1c, 0x24, 0x1f20, 0x1f21: // ref_addr, indirect, ref_sup4, ref_sup8, GNU_ref_alt, GNU_strp_alt
				return true
			case 0x21: // implicit_const: its value is here
				if _, ok := uleb(); !ok { // an SLEB128 is as long as a ULEB128
					return true
				}
			}
		}
	}
}

// unit opens one unit alone: a dwarf.Data over its bytes of .debug_info,
// the other sections whole. Offsets in it count from the unit's start.
func (s *sections) unit(u unitSpan) (*dwarf.Data, error) {
	d, err := dwarf.New(s.abbrev, nil, nil, s.info[u.off:u.end], s.line, nil, s.ranges, s.str)
	if err != nil {
		return nil, err
	}
	for _, n := range extraSections {
		if b := s.extra[n]; b != nil {
			if err := d.AddSection(n, b); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}
