package symbolize

import (
	"debug/dwarf"
	"sort"
)

// dwarfInfo answers line and inline queries for one module from its DWARF.
// Only an index of the compile units' ranges is built up front; a unit's
// line table and inline tree are read the first time an address in it is
// asked for (libc's debug file has some 1,700 units; a profile touches a
// few dozen).
type dwarfInfo struct {
	d   *dwarf.Data // the module's, opened whole; nil when its units are opened alone from sec (split.go)
	sec *sections
	cus []cuRange // sorted by lo
	cu  map[dwarf.Offset]*cuInfo
}

type cuRange struct {
	lo, hi uint64
	off    dwarf.Offset
	end    uint64 // the unit's end in .debug_info, where units are opened alone
}

type cuInfo struct {
	rows   []lineRow // sorted by addr
	scopes []scope   // subprograms and inlined subroutines
	failed bool
}

type lineRow struct {
	addr   uint64
	file   string
	line   int
	endSeq bool
}

// scope is a subprogram or an inlined subroutine's address range.
type scope struct {
	lo, hi   uint64
	depth    int
	inlined  bool
	name     string
	callFile string // for an inlined subroutine: where it was called from
	callLine int
}

func newDwarfInfo(d *dwarf.Data) *dwarfInfo {
	di := &dwarfInfo{d: d, cu: map[dwarf.Offset]*cuInfo{}}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			if rs, err := d.Ranges(e); err == nil {
				for _, rg := range rs {
					if rg[1] > rg[0] {
						di.cus = append(di.cus, cuRange{lo: rg[0], hi: rg[1], off: e.Offset})
					}
				}
			}
		}
		r.SkipChildren()
	}
	sort.Slice(di.cus, func(i, j int) bool { return di.cus[i].lo < di.cus[j].lo })
	return di
}

func (di *dwarfInfo) unit(vaddr uint64) *cuInfo {
	c := di.cus
	i := sort.Search(len(c), func(i int) bool { return c[i].lo > vaddr }) - 1
	for k := 0; i >= 0 && k < 8; i, k = i-1, k+1 {
		if vaddr < c[i].hi {
			return di.load(c[i].off, c[i].end)
		}
	}
	return nil
}

func (di *dwarfInfo) load(off dwarf.Offset, end uint64) *cuInfo {
	if ci := di.cu[off]; ci != nil {
		return ci
	}
	ci := &cuInfo{}
	di.cu[off] = ci
	d, at := di.d, off
	if d == nil {
		var err error
		if d, err = di.sec.unit(unitSpan{off: uint64(off), end: end}); err != nil {
			ci.failed = true
			return ci
		}
		at = 0
	}
	r := d.Reader()
	r.Seek(at)
	cu, err := r.Next()
	if err != nil || cu == nil {
		ci.failed = true
		return ci
	}
	var files []*dwarf.LineFile // indexed as DW_AT_call_file counts
	if lr, err := d.LineReader(cu); err == nil && lr != nil {
		var le dwarf.LineEntry
		for lr.Next(&le) == nil {
			name := ""
			if le.File != nil {
				name = le.File.Name
			}
			ci.rows = append(ci.rows, lineRow{le.Address, name, le.Line, le.EndSequence})
		}
		// By address; a sequence's end before another's start at the same
		// address, so that the lookup lands on the start.
		sort.SliceStable(ci.rows, func(i, j int) bool {
			a, b := ci.rows[i], ci.rows[j]
			if a.addr != b.addr {
				return a.addr < b.addr
			}
			return a.endSeq && !b.endSeq
		})
		files = lr.Files() // complete once the program was read (DWARF 4 may add files as it goes)
	}
	// The inline tree: subprograms and inlined subroutines with their
	// ranges and nesting depth.
	depth := 0
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			depth--
			if depth < 0 {
				break
			}
			continue
		}
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine {
			if rs, err := d.Ranges(e); err == nil && len(rs) > 0 {
				sc := scope{depth: depth, inlined: e.Tag == dwarf.TagInlinedSubroutine, name: nameOf(d, e)}
				if sc.inlined {
					if fi, ok := e.Val(dwarf.AttrCallFile).(int64); ok && fi >= 0 && int(fi) < len(files) && files[fi] != nil {
						sc.callFile = files[fi].Name
					}
					if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
						sc.callLine = int(l)
					}
				}
				for _, rg := range rs {
					s := sc
					s.lo, s.hi = rg[0], rg[1]
					ci.scopes = append(ci.scopes, s)
				}
			}
		}
		if e.Children {
			depth++
		}
	}
	return ci
}

// nameOf names a subprogram or inlined subroutine: its linkage name
// demangled when it (or what it refers to) has one, else its plain name.
func nameOf(d *dwarf.Data, e *dwarf.Entry) string {
	plain := ""
	for hop := 0; e != nil && hop < 4; hop++ {
		if ln, ok := e.Val(dwarf.AttrLinkageName).(string); ok && ln != "" {
			return Demangle(ln)
		}
		if n, ok := e.Val(dwarf.AttrName).(string); ok && plain == "" {
			plain = n
		}
		ref, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			if ref, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset); !ok {
				break
			}
		}
		r := d.Reader()
		r.Seek(ref)
		e, _ = r.Next()
	}
	return plain
}

func (di *dwarfInfo) line(vaddr uint64) (string, int) {
	ci := di.unit(vaddr)
	if ci == nil {
		return "", 0
	}
	rows := ci.rows
	i := sort.Search(len(rows), func(i int) bool { return rows[i].addr > vaddr }) - 1
	if i < 0 || rows[i].endSeq {
		return "", 0
	}
	return rows[i].file, rows[i].line
}

// inlined is the chain of functions inlined at vaddr, innermost first,
// ending with the function they were inlined into; nil when vaddr is in no
// inlined code. file:line is the line table's answer for vaddr.
func (di *dwarfInfo) inlined(vaddr uint64, file string, line int) []InlinedCall {
	ci := di.unit(vaddr)
	if ci == nil {
		return nil
	}
	var chain []scope
	for _, s := range ci.scopes {
		if vaddr >= s.lo && vaddr < s.hi {
			chain = append(chain, s)
		}
	}
	sort.SliceStable(chain, func(i, j int) bool { return chain[i].depth > chain[j].depth })
	if len(chain) < 2 || !chain[0].inlined {
		return nil
	}
	out := make([]InlinedCall, 0, len(chain))
	for _, s := range chain {
		out = append(out, InlinedCall{Function: s.name, File: file, Line: line})
		if !s.inlined {
			break
		}
		file, line = s.callFile, s.callLine
	}
	return out
}

// function names the subprogram around vaddr, for code with DWARF but no
// symbol table entry.
func (di *dwarfInfo) function(vaddr uint64) string {
	ci := di.unit(vaddr)
	if ci == nil {
		return ""
	}
	best := -1
	name := ""
	for _, s := range ci.scopes {
		if !s.inlined && vaddr >= s.lo && vaddr < s.hi && s.depth > best {
			best, name = s.depth, s.name
		}
	}
	return name
}
